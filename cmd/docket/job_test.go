package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/jobs"
)

func TestJobCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.NewURL(t)
	env := map[string]string{"DOCKET_DATABASE_URL": url}
	for _, args := range [][]string{
		{"project", "create", "acme"},
		{"grant", "svc:app", "acme", "job.create"},
		{"grant", "svc:app", "acme", "job.claim"},
		{"grant", "user:ana", "acme", "job.cancel"},
		{"grant", "user:ana", "acme", "job.reconcile"},
		{"grant", "user:ana", "acme", "job.claim"}, // to sweep acme's expired leases
	} {
		r := docket(t, env, append([]string{"--as", "user:ana"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
	}

	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	clock := db.NewFakeClock(time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond))
	app, err := jobs.NewClient(pool, jobs.Config{Project: "acme", Actor: "svc:app", Clock: clock})
	require.NoError(t, err)
	var ids []int64
	for i := range 3 {
		e, err := app.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: []byte(fmt.Sprint(i)), Retry: jobs.RetryPolicy{MaxAttempts: 2}})
		require.NoError(t, err)
		ids = append(ids, e.Job.ID)
	}
	// The third is claimed and its holder lost: its lease ran out an hour ago
	// by the real clock the command uses.
	_, err = app.Claim(ctx, "default", jobs.ClaimOptions{Limit: 1})
	require.NoError(t, err)

	// A reader without a job grant on acme sees nothing.
	r := docket(t, env, "--as", "user:bo", "job", "list", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, "\n"), r.stdout)
	r = docket(t, env, "--as", "user:bo", "job", "show", fmt.Sprint(ids[0]))
	require.Equal(t, 1, r.code)

	r = docket(t, env, "--as", "user:ana", "job", "list", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 4, strings.Count(r.stdout, "\n"), r.stdout)
	require.Regexp(t, fmt.Sprintf(`%d\s+billing.invoice\s+default\s+claimed\s+1/2`, ids[0]), r.stdout)

	r = docket(t, env, "--as", "user:ana", "job", "list", "--state", "queued", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 3, strings.Count(r.stdout, "\n"), r.stdout)

	r = docket(t, env, "--as", "user:ana", "job", "sweep")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("job %d is uncertain\n", ids[0]))
	require.Contains(t, r.stdout, "1 expired leases swept\n")

	r = docket(t, env, "--as", "user:ana", "job", "reconcile", "--note", "checked the ledger", fmt.Sprint(ids[0]), "succeeded")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("job %d is succeeded\n", ids[0]), r.stdout)

	r = docket(t, env, "--as", "user:ana", "job", "cancel", "--reason", "customer withdrew", fmt.Sprint(ids[1]))
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("job %d is cancelled\n", ids[1]), r.stdout)

	r = docket(t, env, "--as", "user:ana", "job", "show", fmt.Sprint(ids[0]))
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `state\s+succeeded`, r.stdout)
	require.Regexp(t, `4\s+\S+\s+uncertain\s+succeeded\s+user:ana\s+1\s+reconciled: checked the ledger`, r.stdout)
	require.Contains(t, r.stdout, "history verified: 4 events, hash chain intact")

	// Refusals: one line, exit 1, nothing changed.
	for _, args := range [][]string{
		{"--as", "svc:app", "job", "cancel", fmt.Sprint(ids[2])},  // no job.cancel grant
		{"--as", "user:ana", "job", "cancel", fmt.Sprint(ids[0])}, // already succeeded
		{"--as", "user:ana", "job", "reconcile", fmt.Sprint(ids[2]), "failed"},
		{"--as", "user:ana", "job", "show", "999999"},
	} {
		r = docket(t, env, args...)
		require.Equal(t, 1, r.code, "%v", args)
		require.Empty(t, r.stdout)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	}
	j, err := app.Get(context.Background(), pool, ids[2])
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, j.State)

	// A wrong command line exits 2 before connecting.
	for _, args := range [][]string{
		{"job"},
		{"job", "frob"},
		{"job", "list"},
		{"job", "list", "--limit", "0", "acme"},
		{"job", "show", "x"},
		{"job", "reconcile", "1", "maybe"},
		{"job", "reconcile", "--result", "{", "1", "succeeded"},
		{"job", "sweep", "--limit", "20000"},
	} {
		r = docket(t, map[string]string{"DOCKET_DATABASE_URL": "postgres://u:p@127.0.0.1:1/x"}, args...)
		require.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
	}
}
