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

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/pgserver"
)

// templatePrefix starts the name of every migrated template database; the
// rest is db.SchemaFingerprint, so a schema change gets a new template.
const templatePrefix = "docket_tmpl_"

// templateTimeout bounds waiting for another process's build plus our own.
const templateTimeout = 5 * time.Minute

// validName matches database names that need no quoting and fit in
// PostgreSQL's 63-byte identifier limit.
var validName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// templateName returns the name of the migrated template database for the
// current schema. It fails if db.SchemaFingerprint is not a short lower-case
// alphanumeric string.
func templateName() (string, error) {
	name := templatePrefix + db.SchemaFingerprint()
	if !validName.MatchString(name) || name == templatePrefix {
		return "", fmt.Errorf("pgtest: db.SchemaFingerprint() = %q does not make a valid database name", db.SchemaFingerprint())
	}
	return name, nil
}

// template returns the name of the migrated template database on s,
// building it on the first call in this process unless another process
// already built it. Every caller gets the same name or the same error.
func (s *server) template(ctx context.Context) (string, error) {
	s.tmplOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), templateTimeout)
		defer cancel()
		s.tmpl, s.tmplErr = s.buildTemplate(ctx)
	})
	return s.tmpl, s.tmplErr
}

// buildTemplate makes sure a migrated template database exists, holding an
// advisory lock so that processes sharing the server build it only once. It
// returns the template's name, or an error saying which step failed.
func (s *server) buildTemplate(ctx context.Context) (string, error) {
	name, err := templateName()
	if err != nil {
		return "", err
	}
	ident := pgx.Identifier{name}.Sanitize()

	// A connection of its own: closing it releases the advisory lock even if
	// unlocking fails, and it is never handed to anything else.
	conn, err := pgx.Connect(ctx, s.AdminURL())
	if err != nil {
		return "", fmt.Errorf("pgtest: template %s: connect to %s: %w", name, pgserver.MaskURL(s.AdminURL()), err)
	}
	defer conn.Close(context.Background())

	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey(name)); err != nil {
		return "", fmt.Errorf("pgtest: template %s: advisory lock: %w", name, err)
	}

	var isTemplate bool
	err = conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&isTemplate)
	switch {
	case err == nil && isTemplate:
		return name, nil // built earlier, maybe by another process
	case err == nil:
		// Left over from a build that died half way.
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			return "", fmt.Errorf("pgtest: template %s: drop unfinished leftover: %w", name, err)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("pgtest: template %s: look up: %w", name, err)
	}

	if err := s.CreateDatabase(ctx, name, "template0"); err != nil {
		return "", fmt.Errorf("pgtest: template %s: %w", name, err)
	}
	if err := s.migrate(ctx, name); err != nil {
		return "", fmt.Errorf("pgtest: template %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident+" IS_TEMPLATE true"); err != nil {
		return "", fmt.Errorf("pgtest: template %s: mark as template: %w", name, err)
	}
	// COMMENT takes a literal, not a parameter; the text is ours alone.
	builtAt := time.Now().UTC().Format(time.RFC3339)
	if _, err := conn.Exec(ctx, "COMMENT ON DATABASE "+ident+" IS '"+templateComment+builtAt+"'"); err != nil {
		return "", fmt.Errorf("pgtest: template %s: comment: %w", name, err)
	}
	dropStaleTemplates(ctx, conn, name)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockKey(name)); err != nil {
		return "", fmt.Errorf("pgtest: template %s: advisory unlock: %w", name, err)
	}
	return name, nil
}

// migrate runs db.Migrate on database name and closes every connection it
// opened, so that the database can be used as a template right after.
func (s *server) migrate(ctx context.Context, name string) error {
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

// dropStaleTemplates drops the templates of other schemas built more than
// staleTemplateAge ago (or by a version of pgtest that did not record when),
// so a long-lived server does not collect one template per schema change.
// It is best effort: a template it cannot drop is left for the next build.
func dropStaleTemplates(ctx context.Context, conn *pgx.Conn, keep string) {
	rows, err := conn.Query(ctx, `
		SELECT datname, coalesce(shobj_description(oid, 'pg_database'), '')
		FROM pg_database
		WHERE datname LIKE 'docket\_tmpl\_%' AND datname <> $1 AND datistemplate`, keep)
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
