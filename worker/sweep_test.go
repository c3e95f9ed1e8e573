package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// TestJobsEnqueuedBySQLRunThroughTheDispatchSweep enqueues with docket's SQL
// functions only, as an operator or a trigger would: no Go, no dispatch. The
// dispatch sweep finds the jobs and the worker runs each once; a job for an
// external executor is left alone.
func TestJobsEnqueuedBySQLRunThroughTheDispatchSweep(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	var runs atomic.Int32
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		runs.Add(1)
		return nil
	}))
	const n = 25
	var ids []int64
	for i := range n {
		var id int64
		require.NoError(t, e.Pool.QueryRow(ctx, `
			SELECT id FROM docket.job_enqueue_one('acme', 'svc:app', $1, 'billing.invoice', 'default', 1::smallint,
			    jsonb_build_object('order', $2::int), 1, NULL, $1, 5, false, $3::boolean, interval '5 minutes',
			    interval '1 second', interval '1 minute', 0::float8, NULL, '{}'::text[], NULL, NULL, NULL, NULL)`,
			e.Clock.Now(), i, i == 0).Scan(&id))
		ids = append(ids, id)
	}
	external := ids[0]
	var undispatched int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.jobs_undispatched").Scan(&undispatched))
	require.Equal(t, n-1, undispatched, "the operator view lists the jobs no dispatch carries, not the external one")

	rec := newRecorder()
	startWorker(t, e, reg, rec, nil)
	rec.waitN(t, n-1, func(ev worker.Event) bool { return ev.Type == worker.EventSucceeded })
	require.EqualValues(t, n-1, runs.Load())
	for _, id := range ids[1:] {
		require.Equal(t, jobs.Succeeded, jobState(t, e.Pool, id))
	}
	require.Equal(t, jobs.Queued, jobState(t, e.Pool, external), "a job for external executors is never dispatched")
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.jobs_undispatched").Scan(&undispatched))
	require.Zero(t, undispatched)
}

// TestDispatchSweepIsSafeWithManySweepers runs the dispatch sweep from
// several workers at once over jobs made by SQL: each job gets one dispatch. (150 jobs: fewer than one run looks at.)
func TestDispatchSweepIsSafeWithManySweepers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error { return nil }))
	_, err := e.Pool.Exec(ctx, `
		SELECT docket.job_enqueue_many('acme', 'svc:app', $1,
		    array_fill('billing.invoice'::text, ARRAY[150]), array_fill('default'::text, ARRAY[150]),
		    array_fill(1::smallint, ARRAY[150]), array_fill('{}'::jsonb, ARRAY[150]), array_fill(1, ARRAY[150]),
		    array_fill(NULL::text, ARRAY[150]), array_fill($1::timestamptz, ARRAY[150]), array_fill(5, ARRAY[150]),
		    array_fill(false, ARRAY[150]), array_fill(false, ARRAY[150]), array_fill(interval '5 minutes', ARRAY[150]),
		    array_fill(interval '1 second', ARRAY[150]), array_fill(interval '1 minute', ARRAY[150]),
		    array_fill(0::float8, ARRAY[150]), array_fill(NULL::jsonb, ARRAY[150]), array_fill(NULL::jsonb, ARRAY[150]),
		    array_fill(NULL::text, ARRAY[150]), array_fill(NULL::bigint, ARRAY[150]), array_fill(NULL::bigint, ARRAY[150]),
		    array_fill(NULL::text, ARRAY[150]))`, e.Clock.Now())
	require.NoError(t, err)

	// Workers that are made but not started: their sweeps run by hand.
	const sweepers = 4
	ws := make([]*worker.Client, sweepers)
	for i := range ws {
		w, err := worker.NewClient(e.API, worker.Config{Actor: app, Registry: reg, Clock: e.Clock, Deployment: "test", Logger: testLogger})
		require.NoError(t, err)
		ws[i] = w
	}
	for round := 0; round < 3; round++ {
		start := make(chan struct{})
		errs := make(chan error, sweepers)
		for _, w := range ws {
			go func() {
				<-start
				_, err := w.Sweep(ctx, worker.SweepDispatch)
				errs <- err
			}()
		}
		close(start)
		for range ws {
			require.NoError(t, <-errs)
		}
	}
	var dispatches, distinct int
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT count(*), count(DISTINCT args->>'job_id') FROM docket.river_job WHERE kind = 'docket.dispatch'`).Scan(&dispatches, &distinct))
	require.Equal(t, 150, dispatches, "one dispatch per job")
	require.Equal(t, 150, distinct)
}

// TestUnknownPayloadSchemaNeverRuns enqueues a job whose payload schema no
// handler decodes: the handler never runs, the job stays queued, and
// operators see it in docket.jobs_undecodable.
func TestUnknownPayloadSchemaNeverRuns(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	var runs atomic.Int32
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error {
		runs.Add(1)
		return nil
	}))
	newer := jobs.MustKind[Invoice]("billing.invoice", 2)
	s, err := newer.Spec(Invoice{Order: 1})
	require.NoError(t, err)
	future, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	known, err := e.client.Enqueue(ctx, invoiceSpec(t, 2, ""))
	require.NoError(t, err)

	rec := newRecorder()
	w := startWorker(t, e, reg, rec, nil)
	rec.waitN(t, 1, is(worker.EventRefused, future.Job.ID))
	rec.waitN(t, 1, is(worker.EventSucceeded, known.Job.ID))
	ev := lastEvent(rec, is(worker.EventRefused, future.Job.ID))
	require.True(t, errors.Is(ev.Err, db.ErrRefusedRevision), "refused with DK012: %v", ev.Err)

	// The dispatch sweep leaves it too.
	_, err = w.Sweep(ctx, worker.SweepDispatch)
	require.NoError(t, err)
	require.EqualValues(t, 1, runs.Load(), "only the known schema's job ran")
	j, err := e.client.Jobs().Get(ctx, future.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, j.State)
	require.Zero(t, j.Attempts, "a refused job spends no attempt")
	var listed int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.jobs_undecodable WHERE id = $1", future.Job.ID).Scan(&listed))
	require.Equal(t, 1, listed, "operators see it as refused")
}

func lastEvent(r *recorder, match func(worker.Event) bool) worker.Event {
	var last worker.Event
	r.count(func(e worker.Event) bool {
		if match(e) {
			last = e
		}
		return false
	})
	return last
}
