package pgtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/pgserver"
)

// dropTimeout bounds dropping a test's database during cleanup.
const dropTimeout = 30 * time.Second

// NewDB creates a fresh database with the docket schema already migrated,
// cloned from a template, and returns a pool opened on it with db.Open. When
// t ends, the pool is closed and the database dropped. If no server can be
// found or any step fails, NewDB stops the test with t.Fatal and so never
// returns nil.
//
// Its databases are named docket_t_…, cloned from docket_tmpl_…; use a
// [Suite] for other names or the application's own migrations.
func NewDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return defaultSuite.NewDB(t)
}

// NewURL is like NewDB but returns the connection URL of the fresh, migrated
// database instead of a pool; the caller opens and closes its own
// connections. The database is dropped when t ends, even if connections are
// still open. On failure it stops the test with t.Fatal.
func NewURL(t testing.TB) string {
	t.Helper()
	return defaultSuite.NewURL(t)
}

// NewEmptyDB creates a fresh database without the docket schema, cloned from
// template0, for tests of migrations themselves. It returns a pool opened on
// it with db.Open and its URL. When t ends, the pool is closed and the
// database dropped. On failure it stops the test with t.Fatal.
func NewEmptyDB(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	return defaultSuite.NewEmptyDB(t)
}

// Main runs the tests of m and then stops whatever this package started (a
// local postgres child process or a container) before exiting with the
// tests' exit code. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// A failure to stop is printed to stderr and does not change the exit code.
func Main(m *testing.M) {
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	if err := stopShared(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: stopping PostgreSQL: %v\n", err)
	}
	cancel()
	os.Exit(code)
}

// sharedFor returns the process-wide server or stops t with t.Fatal.
func sharedFor(t testing.TB) *server {
	t.Helper()
	srv, first, err := sharedServer(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if first {
		t.Logf("pgtest: using %s", srv)
	}
	return srv
}

// newURL creates a database for t on srv, migrated (cloned from the
// suite's template) or empty (cloned from template0), registers dropping it
// when t ends, and returns its URL. It stops t with t.Fatal on failure.
func (s *Suite) newURL(t testing.TB, srv *server, migrated bool) string {
	t.Helper()
	ctx := t.Context()
	source := "template0"
	if migrated {
		var err error
		if source, err = srv.template(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	name, err := s.createDB(ctx, srv, source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		if err := srv.DropDatabase(ctx, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	u, err := srv.URL(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// newDB is the suite's NewDB on server srv.
func (s *Suite) newDB(t testing.TB, srv *server) *pgxpool.Pool {
	t.Helper()
	return open(t, s.newURL(t, srv, true))
}

// createDB creates a database on srv with a new random name of the suite's
// as a copy of template and returns the name, or an error naming both
// databases.
func (s *Suite) createDB(ctx context.Context, srv *server, template string) (string, error) {
	name := pgserver.RandomName(s.prefix + "t_")
	if err := srv.CreateDatabase(ctx, name, template); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return name, nil
}

// open opens a pool on u with db.Open and closes it when t ends. Cleanups run
// last-in first-out, so the pool is closed before its database is dropped.
// It stops t with t.Fatal on failure.
func open(t testing.TB, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := db.Open(t.Context(), u)
	if err != nil {
		t.Fatalf("pgtest: db.Open(%s): %v", pgserver.MaskURL(u), err)
	}
	t.Cleanup(pool.Close)
	return pool
}
