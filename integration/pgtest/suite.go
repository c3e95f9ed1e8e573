package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/db"
)

// Options shape a [Suite]. The zero value is the suite of the package
// functions ([NewDB], [NewURL] …).
type Options struct {
	// Prefix starts the name of every database the suite makes: its
	// templates are Prefix + "tmpl_" + a fingerprint, its test databases
	// Prefix + "t_" + 16 random hex digits. 1-30 characters of [a-z0-9_],
	// starting with a letter; end it with an underscore for readable names.
	// Defaults to "docket_". Suites with different prefixes share a server
	// without touching each other's databases, templates included.
	Prefix string
	// CleanStaleTemplates makes the build of a new template also drop the
	// suite's templates of other fingerprints (same prefix) built more than
	// a day ago, so a long-lived server does not collect one per schema
	// change. Off by default: a server shared with other checkouts, or with
	// anything else, keeps every template until someone drops it.
	CleanStaleTemplates bool
	// Migrate, when not nil, runs on the template once docket's migrations
	// have, with a pool on the template as the server's admin role: the
	// application's own schema (tables, functions, seed rows), so that every
	// test database starts with it. It runs when the template is built, not
	// per test; its error fails every test that asks for a database.
	Migrate func(ctx context.Context, pool *pgxpool.Pool) error
	// MigrateVersion names what Migrate does: a release, a migration
	// number, or a digest of the migration files ([HashFS]). It is part of
	// the template's fingerprint, so a new version gets a new template, and
	// applications with different migrations never share one: change it
	// whenever Migrate's result changes. Required with Migrate, refused
	// without it; at most 200 bytes.
	MigrateVersion string
}

// Suite makes the test databases of one configuration: one name prefix,
// one template (docket's schema, and the application's when
// [Options.Migrate] is set), on the server the package finds (see the
// package documentation). Create it once, in a package variable or in
// TestMain, and call [Main] from TestMain as with the package functions. It
// is safe for concurrent use.
type Suite struct {
	prefix      string
	clean       bool
	migrate     func(ctx context.Context, pool *pgxpool.Pool) error
	fingerprint string // of the template: the schema's, with MigrateVersion's
}

// defaultPrefix is the prefix of the package functions' databases.
const defaultPrefix = "docket_"

var prefixPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,29}$`)

// New returns a suite with opts. It refuses, with [db.ErrInvalidArgument],
// a malformed prefix, Migrate without MigrateVersion, MigrateVersion
// without Migrate, or a MigrateVersion over 200 bytes.
func New(opts Options) (*Suite, error) {
	const op = "pgtest.new"
	if opts.Prefix == "" {
		opts.Prefix = defaultPrefix
	}
	if !prefixPattern.MatchString(opts.Prefix) {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid prefix %q: want 1-30 characters of [a-z0-9_], starting with a letter", opts.Prefix))
	}
	switch {
	case opts.Migrate != nil && opts.MigrateVersion == "":
		return nil, db.Refuse(db.ErrInvalidArgument, op, "Migrate needs a MigrateVersion, so that its templates are told apart from other applications' and rebuilt when it changes")
	case opts.Migrate == nil && opts.MigrateVersion != "":
		return nil, db.Refuse(db.ErrInvalidArgument, op, "MigrateVersion is set without Migrate")
	case len(opts.MigrateVersion) > 200:
		return nil, db.Refuse(db.ErrInvalidArgument, op, "MigrateVersion is over 200 bytes")
	}
	s := &Suite{prefix: opts.Prefix, clean: opts.CleanStaleTemplates, migrate: opts.Migrate, fingerprint: db.SchemaFingerprint()}
	if opts.Migrate != nil {
		h := sha256.Sum256([]byte(db.SchemaFingerprint() + "\x00" + opts.MigrateVersion))
		s.fingerprint = hex.EncodeToString(h[:])[:16]
	}
	return s, nil
}

// MustNew is [New] for package-level variables: it panics when New
// refuses opts.
func MustNew(opts Options) *Suite {
	s, err := New(opts)
	if err != nil {
		panic(err)
	}
	return s
}

// CleanTemplatesEnv names the environment variable that asks the package
// functions' suite to clean stale templates: set to 1 (or true), the suite
// of [NewDB], [NewURL], [NewEmptyDB] and [Scratch] runs with
// [Options.CleanStaleTemplates]. Any other value, or none, leaves them.
const CleanTemplatesEnv = "DOCKET_TEST_CLEAN_TEMPLATES"

// defaultSuite is the suite of the package functions.
var defaultSuite = MustNew(Options{CleanStaleTemplates: cleanTemplatesAsked(os.Getenv(CleanTemplatesEnv))})

// cleanTemplatesAsked reports whether v, the value of [CleanTemplatesEnv],
// asks for stale templates to be cleaned.
func cleanTemplatesAsked(v string) bool {
	ok, err := strconv.ParseBool(v)
	return err == nil && ok
}

// Prefix returns the prefix of the suite's database names.
func (s *Suite) Prefix() string { return s.prefix }

// TemplateName returns the name of the suite's template database: the
// prefix, "tmpl_", and a fingerprint of docket's schema and the suite's
// MigrateVersion.
func (s *Suite) TemplateName() string { return s.prefix + "tmpl_" + s.fingerprint }

// NewDB is [NewDB] with the suite's options: a fresh database cloned from
// the suite's template, named with its prefix.
func (s *Suite) NewDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return open(t, s.newURL(t, sharedFor(t), true))
}

// NewURL is [NewURL] with the suite's options.
func (s *Suite) NewURL(t testing.TB) string {
	t.Helper()
	return s.newURL(t, sharedFor(t), true)
}

// NewEmptyDB is [NewEmptyDB] with the suite's prefix: a database without
// the docket schema (nor the application's).
func (s *Suite) NewEmptyDB(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	u := s.newURL(t, sharedFor(t), false)
	return open(t, u), u
}

// Scratch is [Scratch] with the suite's options.
func (s *Suite) Scratch(ctx context.Context, migrated bool) (string, error) {
	srv, _, err := sharedServer(ctx)
	if err != nil {
		return "", err
	}
	return s.scratch(ctx, srv, migrated)
}

// HashFS returns a digest of every file of fsys, names and contents, in
// name order: a [Options.MigrateVersion] that changes whenever the
// application's migration files do (an embed.FS, or os.DirFS of its
// migrations directory). It returns the error of walking or reading fsys.
func HashFS(fsys fs.FS) (string, error) {
	var names []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("pgtest: hash files: %w", err)
	}
	slices.Sort(names)
	h := sha256.New()
	for _, name := range names {
		f, err := fsys.Open(name)
		if err != nil {
			return "", fmt.Errorf("pgtest: hash files: %w", err)
		}
		fmt.Fprintf(h, "%s\x00", name)
		_, err = io.Copy(h, f)
		_ = f.Close()
		if err != nil {
			return "", fmt.Errorf("pgtest: hash %s: %w", name, err)
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
