package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// A worker whose actor holds job.claim in no project would claim nothing:
// Start refuses it with db.ErrNotPermitted, naming the actor and the grant
// it needs, and starts and writes nothing; Stop is a no-op. Once granted,
// the same client starts and runs the job.
func TestStartRefusesAnActorThatMayClaimNowhere(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const stranger access.Actor = "svc:stranger"
	enq, err := e.client.Enqueue(ctx, invoiceSpec(t, 1, ""))
	require.NoError(t, err)
	ran := make(chan int64, 1)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(_ context.Context, j *jobs.Typed[Invoice]) error {
		ran <- j.ID
		return nil
	}))
	rec := newRecorder()
	w := newWorker(t, e, reg, rec, func(c *worker.Config) { c.Actor = stranger })

	before := wrfSnapshot(t, e.Pool) + testkit.Snapshot(t, e.Pool, "docket.job_decoders")
	err = w.Start(ctx)
	wrfRefused(t, err, db.ErrNotPermitted, "svc:stranger holds job.claim in no project")
	require.ErrorContains(t, err, "grant it job.claim")
	require.Equal(t, before, wrfSnapshot(t, e.Pool)+testkit.Snapshot(t, e.Pool, "docket.job_decoders"), "a refused Start writes nothing")
	require.NoError(t, w.Stop(ctx), "stopping a worker that did not start is a no-op")
	require.Zero(t, rec.count(func(worker.Event) bool { return true }))

	// The grant given, the same client starts and runs the job.
	e.Allow(t, testkit.Grants(stranger, project, access.JobClaim)...)
	testkit.Start(t, w)
	select {
	case id := <-ran:
		require.Equal(t, enq.Job.ID, id)
	case <-time.After(waitLimit):
		t.Fatalf("the granted worker did not run the job within %v", waitLimit)
	}
	rec.waitN(t, 1, is(worker.EventSucceeded, enq.Job.ID))
}

// Cancelling the context passed to Start stops the worker hard, as River's
// does: it claims no more, cancels its running handlers, and records what
// each returns. Those that return their context's error give their leases
// back: the job is queued again, due at once, its attempt counted. Those
// that return nil succeed. No handler runs twice; Stopped is closed, and a
// later Stop returns nil at once. The next worker runs the released jobs.
func TestCancellingStartsContextStopsTheWorker(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	ids := enqueueInvoices(t, e, inFlight)
	var (
		mu   sync.Mutex
		runs = map[int64]int{}
	)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		mu.Lock()
		runs[j.ID]++
		mu.Unlock()
		<-ctx.Done()
		if j.Args.Order%2 == 0 {
			return ctx.Err() // given back
		}
		return nil // finished as the stop came
	}))
	rec := newRecorder()
	w := newWorker(t, e, reg, rec, nil)
	life, cancel := context.WithCancel(ctx)
	defer cancel()
	require.NoError(t, w.Start(life))
	rec.waitN(t, inFlight, is(worker.EventStarted, 0))

	cancel()
	select {
	case <-w.Stopped():
	case <-time.After(waitLimit):
		t.Fatalf("the worker did not stop within %v of its Start context's end", waitLimit)
	}
	quick, stop := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer stop()
	require.NoError(t, w.Stop(quick), "Stop after the context's stop is a no-op")
	require.NoError(t, w.Stop(quick))

	released, succeeded := (inFlight+1)/2, inFlight/2
	require.Equal(t, released, rec.count(is(worker.EventReleased, 0)))
	require.Equal(t, succeeded, rec.count(is(worker.EventSucceeded, 0)))
	require.Zero(t, rec.count(is(worker.EventFailed, 0)))
	require.Zero(t, rec.count(func(ev worker.Event) bool { return ev.Type == worker.EventError && ev.JobID != 0 }))
	mu.Lock()
	for _, id := range ids {
		require.Equal(t, 1, runs[id], "job %d ran once", id)
	}
	mu.Unlock()
	var claimed int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.jobs WHERE state = 'claimed'").Scan(&claimed))
	require.Zero(t, claimed)
	for i, id := range ids {
		j, err := e.client.Jobs().Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, 1, j.Attempts, "job %d", id)
		if i%2 == 0 {
			require.Equal(t, jobs.Queued, j.State, "job %d was given back", id)
			require.False(t, j.AvailableAt.After(e.Clock.Now()), "job %d is claimable at once", id)
		} else {
			require.Equal(t, jobs.Succeeded, j.State, "job %d finished", id)
		}
	}
	var open []string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(format('%s %s %s', id, state, attempted_at)), '{}') FROM docket.river_job
		WHERE kind = $1 AND finalized_at IS NULL`, worker.BatchKind).Scan(&open))
	require.Empty(t, open, "the stopped worker's batch is over")

	// The next worker runs the released jobs, each once more.
	var again atomic.Int32
	next := worker.NewRegistry()
	require.NoError(t, worker.Handle(next, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error {
		again.Add(1)
		return nil
	}))
	rec2 := newRecorder()
	startWorker(t, e, next, rec2, nil)
	rec2.waitN(t, released, is(worker.EventSucceeded, 0))
	require.EqualValues(t, released, again.Load())
	for i, id := range ids {
		j, err := e.client.Jobs().Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.Succeeded, j.State, "job %d", id)
		require.Equal(t, 1+(1-i%2), j.Attempts, "job %d", id)
	}
}

// A handler that ignores its cancelled context past the release timeout
// keeps its lease: the stop by Start's context ends without it, and the
// Stop after it says what is still running.
func TestStartContextStopNamesAHandlerPastTheReleaseTimeout(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	stubborn := make(chan struct{})
	defer close(stubborn)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error {
		<-stubborn // ignores its context
		return nil
	}))
	rec := newRecorder()
	ids := enqueueInvoices(t, e, 1)
	w := newWorker(t, e, reg, rec, func(c *worker.Config) { c.ReleaseTimeout = time.Millisecond })
	life, cancel := context.WithCancel(ctx)
	require.NoError(t, w.Start(life))
	rec.waitN(t, 1, is(worker.EventStarted, ids[0]))

	cancel()
	select {
	case <-w.Stopped():
	case <-time.After(waitLimit):
		t.Fatalf("the worker did not stop within %v of its Start context's end", waitLimit)
	}
	err := w.Stop(ctx)
	require.ErrorContains(t, err, "1 handler still running after the release timeout")
	var stopErr *worker.StopError
	require.ErrorAs(t, err, &stopErr)
	require.Equal(t, 1, stopErr.Running)
	require.Empty(t, stopErr.Abandoned, "the handler has no outcome yet")
	require.Equal(t, jobs.Claimed, jobState(t, e.Pool, ids[0]), "the stubborn handler's job keeps its lease")
}
