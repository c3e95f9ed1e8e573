package main

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/integration/pgtest"
)

// requireClosingTable checks the demo's closing table for n orders of the
// sample rotation: of every ten, seven succeed (one on a retry), one fails,
// one dies after three attempts, one is left uncertain.
func requireClosingTable(t *testing.T, out string, n int) {
	t.Helper()
	tens := n / 10
	for _, row := range []struct {
		outcome        string
		jobs, attempts int
	}{
		{"succeeded", 7 * tens, 8 * tens},
		{"failed", tens, tens},
		{"dead", tens, 3 * tens},
		{"uncertain", tens, tens},
	} {
		require.Regexp(t, regexp.MustCompile(`(?m)^  `+row.outcome+`\s+`+strconv.Itoa(row.jobs)+`\s+`+strconv.Itoa(row.attempts)+`  \S`), out)
	}
	require.Contains(t, out, strconv.Itoa(7*tens)+" of "+strconv.Itoa(n)+" orders are invoiced in shop.orders")
}

func TestDemoOnAGivenDatabase(t *testing.T) {
	t.Parallel()
	env := dbEnv(pgtest.NewURL(t))
	env["USER"] = "ana"

	r := docket(t, env, "demo")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "project   demo: svc:orders may create and claim jobs there, user:ana reconcile them")
	// Not a terminal: the progress comes as lines, the last one final.
	require.Regexp(t, `placed 40/40  queued 0  claimed 0  succeeded 28  failed 4  dead 4  uncertain 4\n`, r.stdout)
	require.NotContains(t, r.stdout, "\r")
	require.Contains(t, r.stdout, "All 40 invoice jobs settled in")
	requireClosingTable(t, r.stdout, 40)
	require.Contains(t, r.stdout, "SELECT state, count(*), sum(attempts) AS attempts FROM docket.jobs\n  WHERE project = 'demo' GROUP BY state ORDER BY state;")
	require.Contains(t, r.stdout, "docket.jobs_uncertain WHERE project = 'demo'")
	require.NotContains(t, r.stdout, "scratch")

	// The commands it suggests work on what it left.
	show := regexp.MustCompile(`docket job show (\d+)`).FindStringSubmatch(r.stdout)
	require.NotNil(t, show, r.stdout)
	s := docket(t, env, "--as", "user:ana", "job", "show", show[1])
	require.Equal(t, 0, s.code, s.stderr)
	require.Regexp(t, `state\s+dead`, s.stdout)
	reconcile := regexp.MustCompile(`docket job reconcile --note "([^"]+)" (\d+) succeeded`).FindStringSubmatch(r.stdout)
	require.NotNil(t, reconcile, r.stdout)
	s = docket(t, env, "--as", "user:ana", "job", "reconcile", "--note", reconcile[1], reconcile[2], "succeeded")
	require.Equal(t, 0, s.code, s.stderr)

	// Again on the same database: a project of its own.
	r = docket(t, env, "demo", "--orders", "10")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "project   demo-2:")
	requireClosingTable(t, r.stdout, 10)
	require.Contains(t, r.stdout, "WHERE project = 'demo-2'")
}

// Without a URL the demo finds a server as the tests do and works in a
// scratch database it drops.
func TestDemoOnAScratchDatabase(t *testing.T) {
	t.Parallel()
	r := docket(t, map[string]string{"USER": "ana"}, "demo", "--orders", "20")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "finding a server as docket's tests do")
	requireClosingTable(t, r.stdout, 20)
	require.Contains(t, r.stdout, "The scratch database is dropped now.")
}

func TestDemoUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"demo", "--orders", "0"},
		{"demo", "--orders", "1001"},
		{"demo", "--orders", "many"},
		{"demo", "now"},
	} {
		requireRefused(t, docket(t, nil, args...), exitUsage, args)
	}
}
