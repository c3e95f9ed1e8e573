package worker_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// TestTenThousandJobsThroughTwoWorkers burns down 10,000 jobs with two
// workers serving one queue: every job ends succeeded exactly once in the
// docket record, no River dispatch is left unfinalized, and no docket job is
// left claimed.
func TestTenThousandJobsThroughTwoWorkers(t *testing.T) {
	t.Parallel()
	const n = 10_000
	e := setup(t)
	ctx := context.Background()
	var runs atomic.Int64
	seen := make([]atomic.Int32, n+1)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		runs.Add(1)
		seen[j.Args.Order].Add(1)
		return nil
	}))
	specs := make([]jobs.Spec, n)
	for i := range specs {
		specs[i] = invoiceSpec(t, i+1, "")
	}
	_, err := e.client.EnqueueMany(ctx, specs)
	require.NoError(t, err)

	rec := newRecorder()
	succeeded := func(ev worker.Event) bool { return ev.Type == worker.EventSucceeded }
	tune := func(cfg *worker.Config) { cfg.Queues = map[string]int{jobs.DefaultQueue: 50} }
	w1 := startWorker(t, e, reg, rec, tune)
	w2 := startWorker(t, e, reg, rec, tune)
	rec.waitN(t, n, succeeded)
	stop := func(w *worker.Client) {
		sctx, cancel := context.WithTimeout(ctx, waitLimit)
		defer cancel()
		require.NoError(t, w.Stop(sctx))
	}
	stop(w1)
	stop(w2)

	require.EqualValues(t, n, runs.Load(), "each handler ran once")
	for i := 1; i <= n; i++ {
		require.EqualValues(t, 1, seen[i].Load(), "order %d", i)
	}
	var byState = map[string]int{}
	rows, err := e.Pool.Query(ctx, "SELECT state, count(*) FROM docket.jobs GROUP BY state")
	require.NoError(t, err)
	for rows.Next() {
		var s string
		var c int
		require.NoError(t, rows.Scan(&s, &c))
		byState[s] = c
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int{"succeeded": n}, byState)
	var events, live int
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT count(*) FROM docket.job_events WHERE to_state = 'succeeded'`).Scan(&events))
	require.Equal(t, n, events, "one succeeded event per job")
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT count(*) FROM docket.river_job
		WHERE kind = 'docket.dispatch' AND finalized_at IS NULL`).Scan(&live))
	require.Zero(t, live, "no dispatch left unfinalized")
	// Both workers did work.
	var claimants int
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT count(DISTINCT attempted_by) FROM docket.river_job WHERE kind = 'docket.dispatch'`).Scan(&claimants))
	require.Equal(t, 2, claimants, "both workers ran dispatches")
}
