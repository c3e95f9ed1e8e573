package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
)

// A provisioned database is empty, migratable, and gone after Close; the
// server tests share is untouched.
func TestProvisionMakesADatabaseAndCloseDropsIt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	shared := pgtest.NewDB(t)

	d, err := pgtest.Provision(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, d.Server)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = d.Close(context.Background())
		}
	})

	pool, err := db.Open(ctx, d.URL)
	require.NoError(t, err)
	var name string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_database()").Scan(&name))
	require.Equal(t, "/"+name, urlPath(t, d.URL))
	var exists bool
	const query = "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'docket')"
	require.NoError(t, pool.QueryRow(ctx, query).Scan(&exists))
	require.False(t, exists, "a provisioned database starts empty")
	require.NoError(t, db.Migrate(ctx, pool))

	// Close drops the database even with a connection still open.
	require.NoError(t, d.Close(ctx))
	closed = true
	pool.Close()
	conn, err := pgx.Connect(ctx, d.URL)
	if err == nil {
		_ = conn.Close(ctx)
	}
	require.Error(t, err, "the database outlived Close")

	require.NoError(t, shared.Ping(ctx), "Close stopped the server tests share")
}
