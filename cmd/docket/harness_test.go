package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast of the command's tests: ana administers project acme, svc:app is
// the application working there and user:vic reads it. Each test gives them
// the grants it needs; user:sam and user:bo never hold one.
const project, ana, app, vic = testkit.Acme, testkit.Ana, testkit.App, testkit.Vic

// unreachable points the command at a database nothing listens at: a wrong
// command line must be refused before connecting.
var unreachable = map[string]string{"DOCKET_DATABASE_URL": "postgres://u:p@127.0.0.1:1/x"}

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

// docket runs the command with args, reading its environment from envs only.
func docket(t *testing.T, envs map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string { return envs[k] }
	code := run(t.Context(), args, getenv, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// dbEnv is the environment of a command working on the database at url.
func dbEnv(url string) map[string]string {
	return map[string]string{"DOCKET_DATABASE_URL": url}
}

// harness is one test's database, with project acme and the test's grants given
// by ana, and the environment pointing the command at it.
type harness struct {
	testkit.Env
	env map[string]string
}

// setup returns a fresh migrated database with project acme, each of grants
// given by ana, and a fake clock at [testkit.T0] for the test's own clients.
func setup(t *testing.T, grants ...[]access.Grant) harness {
	t.Helper()
	k := testkit.Setup(t, ana, []string{project}, testkit.Join(grants...)...)
	return harness{Env: k, env: dbEnv(k.Pool.Config().ConnString())}
}

// run runs the command with args on the test's database.
func (c harness) run(t *testing.T, args ...string) result {
	t.Helper()
	return docket(t, c.env, args...)
}

// as runs the command with args on the test's database, acting as actor.
func (c harness) as(t *testing.T, actor access.Actor, args ...string) result {
	t.Helper()
	return c.run(t, append([]string{"--as", string(actor)}, args...)...)
}

// requireRefused requires the run of args to have exited with code, printing
// nothing on stdout and one line on stderr.
func requireRefused(t *testing.T, r result, code int, args []string) {
	t.Helper()
	require.Equal(t, code, r.code, "%v: %s", args, r.stderr)
	require.Empty(t, r.stdout, "%v", args)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "%v: one line: %q", args, r.stderr)
}

// requireUsageErrors requires each command line to exit 2 before connecting.
func requireUsageErrors(t *testing.T, lines [][]string) {
	t.Helper()
	for _, args := range lines {
		r := docket(t, unreachable, args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
	}
}
