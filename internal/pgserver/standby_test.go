//go:build unix

package pgserver

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// A synchronous standby has every commit its primary acknowledged; once the
// primary is killed and the standby promoted, a client of the multi-host URL
// writes to the standby.
func TestStandbyFollowsAndTakesOver(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary, err := StartCluster(ctx)
	if errors.Is(err, ErrNoLocalBinaries) {
		t.Skip("no PostgreSQL server binaries installed")
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, primary.Close(context.Background())) })
	standby, err := StartStandby(ctx, primary, true)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, standby.Close(context.Background())) })
	multi, err := MultiHost(primary.AdminURL(), primary, standby)
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, multi)
	require.NoError(t, err)
	// A synchronous standby has flushed each commit its primary acknowledges,
	// which is what a takeover needs; it shows the commit to its own readers
	// only once it has also replayed it. remote_apply makes the commit wait
	// for that too, so the read below is not a race with the replay.
	_, err = conn.Exec(ctx, `SET synchronous_commit = remote_apply; CREATE TABLE t (n int); INSERT INTO t SELECT generate_series(1, 100)`)
	require.NoError(t, err)
	var port int
	require.NoError(t, conn.QueryRow(ctx, `SELECT inet_server_port()`).Scan(&port))
	require.Equal(t, primary.Port(), port, "the writable one")
	require.NoError(t, conn.Close(ctx))

	// What the primary acknowledged (and, here, the standby replayed) is
	// on the standby already.
	sc, err := pgx.Connect(ctx, standby.AdminURL())
	require.NoError(t, err)
	var n int
	require.NoError(t, sc.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n))
	require.Equal(t, 100, n)
	require.NoError(t, sc.Close(ctx))

	require.NoError(t, primary.Stop(ctx, ImmediateShutdown))
	require.NoError(t, standby.Promote(ctx))
	conn, err = pgx.Connect(ctx, multi)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO t VALUES (101)`)
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n))
	require.Equal(t, 101, n)
	require.NoError(t, conn.QueryRow(ctx, `SELECT inet_server_port()`).Scan(&port))
	require.Equal(t, standby.Port(), port, "the promoted standby")
}
