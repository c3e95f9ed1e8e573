package main

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/pgserver"
)

// helperEnv makes this test binary the command withpostgres runs.
const helperEnv = "WITHPOSTGRES_TEST_COMMAND"

// The command runs with DOCKET_TEST_DATABASE_URL naming docket_test on a
// cluster of its own size; withpostgres exits with the command's status.
// (No t.Parallel: t.Setenv clears the URL the suite itself may run on.)
func TestRunGivesTheCommandALoginOnAPrivateCluster(t *testing.T) {
	t.Setenv(pgserver.EnvURL, "")
	t.Setenv(pgserver.EnvOnly, "")
	t.Setenv(helperEnv, "1")
	code, err := run([]string{os.Args[0], "-test.run=^TestHelperCommand$"}, 42)
	if errors.Is(err, pgserver.ErrNoLocalBinaries) {
		t.Skip("no PostgreSQL server binaries installed")
	}
	require.NoError(t, err)
	require.Equal(t, 7, code, "the command's own exit status")
}

// TestHelperCommand is the command: it checks what it was given and exits 7.
func TestHelperCommand(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("run by TestRunGivesTheCommandALoginOnAPrivateCluster")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv(pgserver.EnvURL))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var user, maxConns string
	var super, createDB, createRole, signal bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_user, current_setting('max_connections'),
		rolsuper, rolcreatedb, rolcreaterole, pg_has_role('pg_signal_backend', 'MEMBER')
		FROM pg_roles WHERE rolname = current_user`).Scan(&user, &maxConns, &super, &createDB, &createRole, &signal))
	require.Equal(t, role, user)
	require.Equal(t, "42", maxConns)
	require.False(t, super, "the command's login is no superuser")
	require.True(t, createDB && createRole && signal)
	os.Exit(7)
}

// A server named already is the command's to use: withpostgres refuses to
// start another beside it.
func TestRunRefusesWhenAServerIsNamed(t *testing.T) {
	t.Setenv(pgserver.EnvURL, "postgres://u@127.0.0.1:1/postgres")
	code, err := run([]string{"true"}, 10)
	require.Equal(t, 2, code)
	require.EqualError(t, err, pgserver.EnvURL+" is set: run the command without withpostgres to use that server")

	t.Setenv(pgserver.EnvURL, "")
	t.Setenv(pgserver.EnvOnly, "container")
	code, err = run([]string{"true"}, 10)
	require.Equal(t, 2, code)
	require.EqualError(t, err, pgserver.EnvOnly+" is set: run the command without withpostgres to use that server")
}

func TestSuiteConnections(t *testing.T) {
	t.Parallel()
	require.Equal(t, 200, suiteConnections(1))
	require.Equal(t, 200, suiteConnections(2), "97 seen at the peak of a run on 2 cores")
	require.Equal(t, 400, suiteConnections(4))
	require.Equal(t, 1600, suiteConnections(8))
}
