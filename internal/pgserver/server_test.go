package pgserver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// findOrSkip finds a server for t as Find does, closed when t ends, or skips
// t if this machine has none.
func findOrSkip(t *testing.T) *Server {
	t.Helper()
	srv, err := Find(t.Context())
	if errors.Is(err, ErrNotFound) {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close(context.Background())) })
	return srv
}

// requireCreateAndDrop creates an empty database on srv, connects to it and
// drops it with the connection still open.
func requireCreateAndDrop(t *testing.T, srv *Server) {
	t.Helper()
	ctx := t.Context()
	name := RandomName("docket_t_")
	require.NoError(t, srv.CreateDatabase(ctx, name, "template0"))
	u, err := srv.URL(name)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var got string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&got))
	require.Equal(t, name, got)

	err = srv.CreateDatabase(ctx, name, "template0")
	require.ErrorContains(t, err, "create database "+name+" from template0")

	require.NoError(t, srv.DropDatabase(ctx, name), "drop with a connection still open")
	var n int
	require.NoError(t, srv.admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n))
	require.Zero(t, n, "database %s outlived DropDatabase", name)
	require.NoError(t, srv.DropDatabase(ctx, name), "dropping what is gone")
}

func TestCreateAndDropDatabase(t *testing.T) {
	t.Parallel()
	requireCreateAndDrop(t, findOrSkip(t))
}

// A server that does not answer is stopped, and the error keeps its
// password to itself.
func TestOpenUnreachableStopsAndMasks(t *testing.T) {
	t.Parallel()
	stopped := 0
	_, err := Open(t.Context(), "postgres://ana:s3cret@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5", "test server",
		func(context.Context) error { stopped++; return nil })
	require.Error(t, err)
	require.Equal(t, 1, stopped)
	require.True(t, strings.HasPrefix(err.Error(), "test server: connect postgres://ana:xxxxx@127.0.0.1:1/"), err.Error())
	require.NotContains(t, err.Error(), "s3cret")
}

func TestRandomName(t *testing.T) {
	t.Parallel()
	a, b := RandomName("docket_t_"), RandomName("docket_t_")
	require.Regexp(t, `^docket_t_[0-9a-f]{16}$`, a)
	require.NotEqual(t, a, b)
}
