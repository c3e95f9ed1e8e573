//go:build unix

package pgserver

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// A cluster crashed with an immediate shutdown starts again on the same
// data directory and port: the same URL reaches it, committed rows survive
// crash recovery, and a session open across the crash is gone.
func TestClusterCrashAndRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, err := StartCluster(ctx)
	if errors.Is(err, ErrNoLocalBinaries) {
		t.Skip("no PostgreSQL server binaries installed")
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, c.Close(context.Background()))
		require.NoDirExists(t, c.l.dir)
	})
	require.True(t, c.Running())

	conn, err := pgx.Connect(ctx, c.AdminURL())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var syncCommit string
	require.NoError(t, conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&syncCommit))
	require.Equal(t, "on", syncCommit, "an acknowledged commit survives a crash of the server")
	_, err = conn.Exec(ctx, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)")
	require.NoError(t, err)

	require.NoError(t, c.Stop(ctx, ImmediateShutdown))
	require.False(t, c.Running())
	require.Error(t, c.Stop(ctx, FastShutdown), "a stopped cluster cannot stop")
	require.Error(t, conn.Ping(ctx), "the session did not survive the crash")

	require.NoError(t, c.Start(ctx))
	require.True(t, c.Running())
	require.Error(t, c.Start(ctx), "a running cluster cannot start")
	again, err := pgx.Connect(ctx, c.AdminURL())
	require.NoError(t, err)
	defer again.Close(context.Background())
	var n int
	require.NoError(t, again.QueryRow(ctx, "SELECT n FROM kept").Scan(&n))
	require.Equal(t, 1, n)

	require.NoError(t, c.Stop(ctx, FastShutdown))
	require.NoError(t, c.Start(ctx))
	require.True(t, c.Running())
}
