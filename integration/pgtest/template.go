package pgtest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/pgserver"
)

// templateTimeout bounds waiting for another process's build plus our own.
const templateTimeout = 5 * time.Minute

// validName matches database names that need no quoting and fit in
// PostgreSQL's 63-byte identifier limit.
var validName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// template returns the name of suite's migrated template database on s,
// building it on the first call in this process unless another process
// already built it. Every caller gets the same name or the same error.
func (s *server) template(ctx context.Context, suite *Suite) (string, error) {
	name := suite.TemplateName()
	if !validName.MatchString(name) {
		return "", fmt.Errorf("pgtest: template name %q is not a valid database name", name)
	}
	s.mu.Lock()
	if s.tmpls == nil {
		s.tmpls = map[string]*builtTemplate{}
	}
	b := s.tmpls[name]
	if b == nil {
		b = &builtTemplate{}
		s.tmpls[name] = b
	}
	s.mu.Unlock()
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), templateTimeout)
		defer cancel()
		b.err = s.buildTemplate(ctx, suite, name)
	})
	return name, b.err
}

// buildTemplate makes sure suite's migrated template database, name,
// exists, holding an advisory lock so that processes sharing the server
// build it only once. It returns an error saying which step failed.
func (s *server) buildTemplate(ctx context.Context, suite *Suite, name string) error {
	ident := pgx.Identifier{name}.Sanitize()

	// A connection of its own: closing it releases the advisory lock even if
	// unlocking fails, and it is never handed to anything else.
	conn, err := pgx.Connect(ctx, s.AdminURL())
	if err != nil {
		return fmt.Errorf("pgtest: template %s: connect to %s: %w", name, pgserver.MaskURL(s.AdminURL()), err)
	}
	defer conn.Close(context.Background())

	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey(name)); err != nil {
		return fmt.Errorf("pgtest: template %s: advisory lock: %w", name, err)
	}

	var isTemplate bool
	err = conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&isTemplate)
	switch {
	case err == nil && isTemplate:
		return nil // built earlier, maybe by another process
	case err == nil:
		// Left over from a build that died half way.
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("pgtest: template %s: drop unfinished leftover: %w", name, err)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgtest: template %s: look up: %w", name, err)
	}

	if err := s.CreateDatabase(ctx, name, "template0"); err != nil {
		return fmt.Errorf("pgtest: template %s: %w", name, err)
	}
	if err := s.migrate(ctx, name, suite.migrate); err != nil {
		return fmt.Errorf("pgtest: template %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident+" IS_TEMPLATE true"); err != nil {
		return fmt.Errorf("pgtest: template %s: mark as template: %w", name, err)
	}
	// COMMENT takes a literal, not a parameter; the text is ours alone.
	builtAt := time.Now().UTC().Format(time.RFC3339)
	if _, err := conn.Exec(ctx, "COMMENT ON DATABASE "+ident+" IS '"+templateComment+builtAt+"'"); err != nil {
		return fmt.Errorf("pgtest: template %s: comment: %w", name, err)
	}
	if suite.clean {
		dropStaleTemplates(ctx, conn, suite.prefix, name)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockKey(name)); err != nil {
		return fmt.Errorf("pgtest: template %s: advisory unlock: %w", name, err)
	}
	return nil
}

// migrate runs db.Migrate on database name, then app when it is not nil,
// and closes every connection it opened, so that the database can be used
// as a template right after.
func (s *server) migrate(ctx context.Context, name string, app func(context.Context, *pgxpool.Pool) error) error {
	u, err := s.URL(name)
	if err != nil {
		return err
	}
	pool, err := db.Open(ctx, u)
	if err != nil {
		return fmt.Errorf("db.Open: %w", err)
	}
	defer pool.Close()
	if err := db.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("db.Migrate: %w", err)
	}
	if app != nil {
		if err := app(ctx, pool); err != nil {
			return fmt.Errorf("the suite's Migrate: %w", err)
		}
	}
	return nil
}

// lockKey is the advisory lock key that guards building template name.
func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("docket/pgtest:" + name))
	return int64(h.Sum64())
}

// templateComment starts the comment on every template database; the build
// instant follows it.
const templateComment = "pgtest template built "

// staleTemplateAge is how old a template of another schema must be before a
// new build drops it. Another checkout testing an older schema on the same
// server within this window keeps its template.
const staleTemplateAge = 24 * time.Hour

// dropStaleTemplates drops the templates of prefix (named prefix, "tmpl_"
// and a fingerprint of 16 hex digits) other than keep built more than
// staleTemplateAge ago (or by a version of pgtest that did not record
// when), so a long-lived server does not collect one template per schema
// change. Databases of other prefixes are never looked at. It is best
// effort: a template it cannot drop (another role's, say) is left alone.
func dropStaleTemplates(ctx context.Context, conn *pgx.Conn, prefix, keep string) {
	// prefix is [a-z0-9_]: nothing in it means anything to a regexp.
	rows, err := conn.Query(ctx, `
		SELECT datname, coalesce(shobj_description(oid, 'pg_database'), '')
		FROM pg_database
		WHERE datname ~ ('^' || $2 || 'tmpl_[0-9a-f]{16}$') AND datname <> $1 AND datistemplate`, keep, prefix)
	if err != nil {
		return
	}
	type template struct{ Name, Comment string }
	found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[template])
	if err != nil {
		return
	}
	for _, tmpl := range found {
		built, err := time.Parse(time.RFC3339, strings.TrimPrefix(tmpl.Comment, templateComment))
		if err == nil && time.Since(built) < staleTemplateAge {
			continue
		}
		ident := pgx.Identifier{tmpl.Name}.Sanitize()
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident+" IS_TEMPLATE false"); err != nil {
			continue
		}
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
	}
}
