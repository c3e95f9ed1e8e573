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
// workers serving one queue, started together: every job ends succeeded
// exactly once in the docket record, after one attempt, both workers ran
// some, no docket job is left claimed, no job has a River row of its own and
// no batch is left unfinished.
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
	var byWorker [2]atomic.Int64
	ws := make([]*worker.Client, 2)
	for i := range ws {
		ws[i] = newWorker(t, e, reg, nil, func(cfg *worker.Config) {
			cfg.Queues = map[string]int{jobs.DefaultQueue: 50}
			cfg.OnEvent = func(ev worker.Event) {
				if succeeded(ev) {
					byWorker[i].Add(1)
				}
				rec.add(ev)
			}
		})
	}
	startTogether(t, ws...)
	rec.waitN(t, n, succeeded)
	stopTogether(t, ws...)

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
	var attempts int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT sum(attempts) FROM docket.jobs`).Scan(&attempts))
	require.Equal(t, n, attempts, "one attempt per job")
	require.Equal(t, int64(n), byWorker[0].Load()+byWorker[1].Load())
	t.Logf("successes by worker: %d and %d", byWorker[0].Load(), byWorker[1].Load())
	require.NotZero(t, byWorker[0].Load(), "the first worker ran jobs")
	require.NotZero(t, byWorker[1].Load(), "the second worker ran jobs")
	require.Zero(t, perJobRiverRows(t, e.Pool), "no job has a River row of its own")
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT count(*) FROM docket.river_job WHERE kind = $1 AND state = 'running'`, worker.BatchKind).Scan(&live))
	require.Zero(t, live, "no batch is left running")
}
