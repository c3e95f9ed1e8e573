package jobs_test

// Wake-ups: a transaction that holds them (docket.wake = 'held', as the
// worker's batches begin) notifies, as its claim ends, the queues of the
// jobs it made due that the claim did not take; any other transaction
// notifies as it writes. Each case reads the notifications its commit sent,
// up to a sentinel sent after it.

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// heldBegin is how the worker begins a transaction that holds its wake-ups.
const heldBegin = "BEGIN; SET LOCAL docket.wake = 'held'"

// notified runs fn in a transaction begun by begin ("" for a plain one) on
// pool, commits it, and returns the payloads of the notifications on
// docket_jobs the commit sent, sorted.
func notified(t *testing.T, e env, pool *pgxpool.Pool, begin string, fn func(tx pgx.Tx)) []string {
	t.Helper()
	ctx := t.Context()
	since := testkit.Listen(t, e.Pool, "docket_jobs")
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: begin})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	fn(tx)
	require.NoError(t, tx.Commit(ctx))
	got := since()
	slices.Sort(got)
	return got
}

func TestAHeldWakeUpIsSentForWhatTheClaimLeft(t *testing.T) {
	t.Parallel()
	e := setup(t, "beta")
	e.Allow(t, testkit.Grants(app, "beta", access.JobCreate, access.JobClaim)...)
	ctx := t.Context()
	beta, err := jobs.NewClient(e.API, jobs.Config{Project: "beta", Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	claimer := cqClient(t, e, project, app)
	enqueue := func(tx pgx.Tx, c *jobs.Client, queue, kind string, n int) []int64 {
		specs := make([]jobs.Spec, n)
		for i := range specs {
			specs[i] = jobs.Spec{Kind: kind, Queue: queue, Payload: []byte(`{}`)}
		}
		rs, err := c.EnqueueManyTx(ctx, tx, specs)
		require.NoError(t, err)
		ids := make([]int64, n)
		for i, r := range rs {
			ids[i] = r.ID
		}
		return ids
	}
	claim := func(tx pgx.Tx, queue string, limit int) []jobs.Job {
		got, err := cqStore(claimer).ClaimQueueTx(ctx, tx, queue, limit, []jobs.Decoder{cqInvoice}, nil, nil)
		require.NoError(t, err)
		return got
	}
	// Each case in a queue of its own, so none claims another's jobs.
	q := func(name string) string { return "wake-" + name }
	// A job claimed before, of each queue the cases queue one again in.
	claimed := map[string]jobs.Job{}
	for _, queue := range []string{q("again"), q("again-left"), q("again-plain")} {
		_, err := e.client.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Queue: queue, Payload: []byte(`{}`)})
		require.NoError(t, err)
		got, err := cqClaim(ctx, e, claimer, queue, 1, nil, nil)
		require.NoError(t, err)
		require.Len(t, got, 1)
		claimed[queue] = got[0]
	}
	release := func(tx pgx.Tx, queue string) {
		_, err := e.client.ReleaseTx(ctx, tx, claimed[queue].Lease(), e.Clock.Now(), "again")
		require.NoError(t, err)
	}
	for _, c := range []struct {
		name  string
		begin string
		fn    func(tx pgx.Tx)
		want  []string
	}{
		{"the claim takes all", heldBegin, func(tx pgx.Tx) {
			enqueue(tx, e.client, q("all"), "billing.invoice", 2)
			require.Len(t, claim(tx, q("all"), 5), 2)
		}, []string{}},
		{"the claim takes one of two", heldBegin, func(tx pgx.Tx) {
			enqueue(tx, e.client, q("half"), "billing.invoice", 2)
			require.Len(t, claim(tx, q("half"), 1), 1)
		}, []string{q("half")}},
		{"another queue", heldBegin, func(tx pgx.Tx) {
			enqueue(tx, e.client, q("mine"), "billing.invoice", 1)
			enqueue(tx, e.client, q("theirs"), "billing.invoice", 1)
			require.Len(t, claim(tx, q("mine"), 5), 1)
		}, []string{q("theirs")}},
		{"a kind the claimer does not decode", heldBegin, func(tx pgx.Tx) {
			enqueue(tx, e.client, q("kind"), "billing.refund", 1)
			require.Empty(t, claim(tx, q("kind"), 5))
		}, []string{q("kind")}},
		{"a job in a project the claimer's client does not name", heldBegin, func(tx pgx.Tx) {
			// job_claim_queue claims in every project of the actor's
			// grant: beta's job is taken too, and wakes no one.
			enqueue(tx, beta, q("beta"), "billing.invoice", 1)
			require.Len(t, claim(tx, q("beta"), 5), 1)
		}, []string{}},
		{"not held", "", func(tx pgx.Tx) {
			enqueue(tx, e.client, q("plain"), "billing.invoice", 1)
			require.Len(t, claim(tx, q("plain"), 5), 1)
		}, []string{q("plain")}},
		{"a claim undone", heldBegin, func(tx pgx.Tx) {
			enqueue(tx, e.client, q("undone"), "billing.invoice", 1)
			_, err := tx.Exec(ctx, "SAVEPOINT docket_claim")
			require.NoError(t, err)
			require.Len(t, claim(tx, q("undone"), 5), 1)
			_, err = tx.Exec(ctx, "ROLLBACK TO SAVEPOINT docket_claim; SELECT docket.job_wake_flush()")
			require.NoError(t, err)
		}, []string{q("undone")}},
		{"writes after the claim", heldBegin, func(tx pgx.Tx) {
			require.Empty(t, claim(tx, q("after"), 5))
			enqueue(tx, e.client, q("after"), "billing.invoice", 1)
		}, []string{q("after")}},
		{"more than a thousand held", heldBegin, func(tx pgx.Tx) {
			enqueue(tx, e.client, q("first"), "billing.invoice", 600)
			enqueue(tx, e.client, q("over"), "billing.invoice", 600) // notified at once
			var held int
			require.NoError(t, tx.QueryRow(ctx, "SELECT cardinality(current_setting('docket.wake_jobs')::bigint[])").Scan(&held))
			require.Equal(t, 600, held)
			require.Len(t, claim(tx, q("first"), 1000), 600)
		}, []string{q("over")}},
		{"a job queued again and taken", heldBegin, func(tx pgx.Tx) {
			release(tx, q("again"))
			require.Len(t, claim(tx, q("again"), 5), 1)
		}, []string{}},
		{"a job queued again and left", heldBegin, func(tx pgx.Tx) {
			release(tx, q("again-left"))
		}, []string{}},
		{"a job queued again, not held", "", func(tx pgx.Tx) {
			release(tx, q("again-plain"))
		}, []string{q("again-plain")}},
		{"held and never claimed", heldBegin, func(tx pgx.Tx) {
			// The session's own jobs wait for the workers' poll.
			enqueue(tx, e.client, q("unclaimed"), "billing.invoice", 1)
		}, []string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, notified(t, e, e.API, c.begin, c.fn))
		})
	}
}

// TestAHeldWakeUpTellsNothingOfAnotherProject: a session that forges its
// held list with another project's job, and claims, is notified of that
// job's queue whether the job is queued or claimed: the claim reads the
// state of the jobs it chose itself, and no others.
func TestAHeldWakeUpTellsNothingOfAnotherProject(t *testing.T) {
	t.Parallel()
	e := setup(t, "beta")
	e.Allow(t, testkit.Grants(testkit.Ana, "beta", access.JobCreate, access.JobClaim)...)
	ctx := t.Context()
	theirs, err := jobs.NewClient(e.API, jobs.Config{Project: "beta", Actor: testkit.Ana, Clock: e.Clock})
	require.NoError(t, err)
	queued, err := theirs.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Queue: "secret", Payload: []byte(`{}`)})
	require.NoError(t, err)
	taken, err := theirs.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Queue: "secret", Payload: []byte(`{}`)})
	require.NoError(t, err)
	got, err := cqClaim(ctx, e, theirs, "secret", 1, nil, nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	if got[0].ID != taken.Job.ID {
		queued, taken = taken, queued
	}
	claimer := cqClient(t, e, project, app)
	for _, id := range []int64{queued.Job.ID, taken.Job.ID} {
		t.Run(fmt.Sprint(id), func(t *testing.T) {
			require.Equal(t, []string{"secret"}, notified(t, e, e.API, heldBegin, func(tx pgx.Tx) {
				_, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL docket.wake_jobs = '{%d}'; SET LOCAL docket.wake_queues = '{secret}'", id))
				require.NoError(t, err)
				_, err = cqStore(claimer).ClaimQueueTx(ctx, tx, "secret", 5, nil, nil, nil)
				require.NoError(t, err)
			}))
		})
	}
}
