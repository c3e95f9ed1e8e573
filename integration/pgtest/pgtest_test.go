package pgtest_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m)
}

func TestNewDBIsolatedInParallel(t *testing.T) {
	t.Parallel()
	pgtest.CheckIsolation(t, 20, pgtest.NewDB)
}

func TestNewEmptyDBHasNoDocketSchema(t *testing.T) {
	t.Parallel()
	pool, u := pgtest.NewEmptyDB(t)
	ctx := t.Context()

	var name string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_database()").Scan(&name))
	require.Equal(t, "/"+name, urlPath(t, u))

	var exists bool
	const query = "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'docket')"
	require.NoError(t, pool.QueryRow(ctx, query).Scan(&exists))
	require.False(t, exists, "empty database has a docket schema")

	// What NewEmptyDB is for: migrating from nothing.
	require.NoError(t, db.Migrate(ctx, pool))
	require.NoError(t, pool.QueryRow(ctx, query).Scan(&exists))
	require.True(t, exists, "docket schema missing after db.Migrate")
}

func TestNewURLDatabaseIsDroppedAfterTest(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("user", func(t *testing.T) {
		var conn *pgx.Conn
		// Registered before NewURL, so it runs after the drop: the drop must
		// succeed although this connection is still open.
		t.Cleanup(func() {
			if conn != nil {
				_ = conn.Close(context.Background())
			}
		})
		u := pgtest.NewURL(t)
		var err error
		conn, err = pgx.Connect(t.Context(), u)
		require.NoError(t, err)
		require.NoError(t, conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name))
		require.Equal(t, "/"+name, urlPath(t, u))
		require.True(t, strings.HasPrefix(name, "docket_t_"), name)
	})
	require.NotEmpty(t, name)

	pool := pgtest.NewDB(t)
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n))
	require.Zero(t, n, "database %s still exists after its test ended", name)
}

func BenchmarkNewDB(b *testing.B) {
	pgtest.NewDB(b) // find the server and build the template outside the timing
	for b.Loop() {
		pgtest.NewDB(b)
	}
}

// urlPath returns the path of URL u.
func urlPath(t *testing.T, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	return parsed.Path
}
