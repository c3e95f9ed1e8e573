package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
)

func TestMigrateThenStatus(t *testing.T) {
	t.Parallel()
	_, url := pgtest.NewEmptyDB(t)
	env := dbEnv(url)
	env["USER"] = "ana"

	r := docket(t, env, "status")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "docket schema: version 0 of")
	require.Contains(t, r.stdout, "behind: run docket migrate")

	r = docket(t, env, "migrate")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "docket schema at version")

	r = docket(t, env, "migrate")
	require.Equal(t, 0, r.code, r.stderr)

	r = docket(t, env, "status")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "state:         current")
	require.Contains(t, r.stdout, "roles:         docket_app, docket_operator, docket_reader, docket_worker, docket_clock")
	require.Regexp(t, `docket\.capabilities\s+25\n`, r.stdout)
	require.Regexp(t, `docket\.river_migration\s+\d+\n`, r.stdout)

	r = docket(t, env, "migrate", "down", "--to", "0")
	require.Equal(t, 0, r.code, r.stderr)
	r = docket(t, env, "status")
	require.Contains(t, r.stdout, "docket schema: version 0 of")
}

func TestProjectsAndGrants(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	env := map[string]string{"DATABASE_URL": url}

	r := docket(t, env, "--as", "user:ana", "project", "create", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "project acme is active\n", r.stdout)

	r = docket(t, env, "--as", "user:ana", "grant", "svc:billing", "acme", "job.create")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "granted job.create on acme to svc:billing\n", r.stdout)
	r = docket(t, env, "--as", "user:ana", "grant", "svc:billing", "acme", "job.create")
	require.Equal(t, "svc:billing already holds job.create on acme\n", r.stdout)

	r = docket(t, env, "grants", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `svc:billing\s+job.create\s+user:ana`, r.stdout)

	r = docket(t, env, "--as", "user:ana", "revoke", "svc:billing", "acme", "job.create")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "revoked job.create on acme from svc:billing\n", r.stdout)

	for _, args := range [][]string{
		{"grant", "svc billing", "acme", "job.create"},
		{"grant", "svc:billing", "ACME", "job.create"},
		{"grant", "svc:billing", "acme", "job.*"},
		{"grant", "svc:billing", "nope", "job.create"},
		{"--as", "ana", "grant", "svc:billing", "acme", "job.create"},
		{"project", "retire", "acme"},
	} {
		requireRefused(t, docket(t, env, args...), exitError, args)
	}

	r = docket(t, env, "project", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `acme\s+active`, r.stdout)
}

// An unreachable database gets one line naming the host, never the password,
// and a non-zero exit.
func TestUnreachableDatabase(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"migrate", "status"} {
		r := docket(t, nil, "--database-url", "postgres://ana:hunter2@127.0.0.1:1/orders?sslmode=disable", cmd)
		require.Equal(t, 1, r.code)
		require.Empty(t, r.stdout)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
		require.Contains(t, r.stderr, "127.0.0.1:1")
		require.NotContains(t, r.stderr, "hunter2")
	}
	r := docket(t, map[string]string{"DOCKET_DATABASE_URL": "postgres://ana:hunter2@db.invalid:5432/x"}, "status")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "db.invalid:5432")
	require.NotContains(t, r.stderr, "hunter2")

	r = docket(t, nil, "--database-url", "postgres://ana:hunter2@host:notaport/x", "status")
	require.Equal(t, 1, r.code)
	require.NotContains(t, r.stderr, "hunter2")
}

func TestURLPrecedence(t *testing.T) {
	t.Parallel()
	good := pgtest.NewURL(t)
	bad := "postgres://u:p@127.0.0.1:1/x?sslmode=disable"
	require.Equal(t, 0, docket(t, map[string]string{"DATABASE_URL": bad, "DOCKET_DATABASE_URL": good}, "status").code)
	require.Equal(t, 0, docket(t, map[string]string{"DOCKET_DATABASE_URL": bad}, "--database-url", good, "status").code)
	require.Equal(t, 1, docket(t, map[string]string{"DOCKET_DATABASE_URL": bad, "DATABASE_URL": good}, "status").code)
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"--nope", "status"},
		{"status"}, // no URL anywhere
		{"--database-url", "postgres://x@127.0.0.1:1/x", "grant", "only-one"},
		{"--database-url", "postgres://x@127.0.0.1:1/x", "migrate", "down"},
	} {
		r := docket(t, nil, args...)
		require.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	}
	r := docket(t, nil, "help")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "usage: docket")
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := docket(t, nil, "version")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, db.SchemaFingerprint())
	require.Contains(t, r.stdout, "River ")
}
