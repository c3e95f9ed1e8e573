package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// inFlight is how many handlers the stop tests leave running.
const inFlight = 5

// enqueueInvoices enqueues n invoices, orders 0..n-1, and returns their ids
// in that order.
func enqueueInvoices(t *testing.T, e env, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range n {
		enq, err := e.client.Enqueue(t.Context(), invoiceSpec(t, i, ""))
		require.NoError(t, err)
		ids[i] = enq.Job.ID
	}
	return ids
}

// A worker stopped past its deadline cancels the handlers still running and
// gives their leases back before Stop returns: no job stays claimed, each is
// queued again with its attempt counted, due at once, and the next worker
// runs it.
func TestStopPastDeadlineReleasesRunningJobs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		<-ctx.Done()
		return ctx.Err()
	}))
	rec := newRecorder()
	ids := enqueueInvoices(t, e, inFlight)
	w := startWorker(t, e, reg, rec, nil)
	rec.waitN(t, inFlight, is(worker.EventStarted, 0))

	past, cancel := context.WithCancel(ctx)
	cancel() // the deadline has already passed
	err := w.Stop(past)
	require.ErrorIs(t, err, context.Canceled, "Stop says the handlers had to be cancelled")

	require.Equal(t, inFlight, rec.count(is(worker.EventReleased, 0)))
	require.Zero(t, rec.count(is(worker.EventFailed, 0)))
	// A sweep the stop cut short may report an error; no job may.
	require.Zero(t, rec.count(func(ev worker.Event) bool { return ev.Type == worker.EventError && ev.JobID != 0 }))
	var claimed int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.jobs WHERE state = 'claimed'").Scan(&claimed))
	require.Zero(t, claimed)
	for _, id := range ids {
		j, err := e.client.Jobs().Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.Queued, j.State, "job %d", id)
		require.Equal(t, 1, j.Attempts, "job %d keeps its attempt", id)
		require.Empty(t, j.ClaimedBy)
		require.False(t, j.AvailableAt.After(e.Clock.Now()), "job %d is claimable at once", id)
		require.Contains(t, j.Diagnostic, "released")
	}
	require.Zero(t, perJobRiverRows(t, e.Pool))
	var batches int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.river_job WHERE kind = $1 AND finalized_at IS NULL`,
		worker.BatchKind).Scan(&batches))
	require.Zero(t, batches, "the stopped worker's batch is over")

	// The next worker runs them, each once more.
	var runs atomic.Int32
	again := worker.NewRegistry()
	require.NoError(t, worker.Handle(again, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		runs.Add(1)
		return nil
	}))
	rec2 := newRecorder()
	startWorker(t, e, again, rec2, nil)
	rec2.waitN(t, inFlight, is(worker.EventSucceeded, 0))
	require.EqualValues(t, inFlight, runs.Load())
	for _, id := range ids {
		j, err := e.client.Jobs().Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.Succeeded, j.State, "job %d", id)
		require.Equal(t, 2, j.Attempts, "job %d", id)
	}
}

// A worker stopped with time to spare waits for its running handlers: they
// finish undisturbed, their successes are recorded, and Stop returns nil
// only after the last one.
func TestStopWithinDeadlineWaitsForHandlers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	release := make([]chan struct{}, inFlight)
	for i := range release {
		release[i] = make(chan struct{})
	}
	var interrupted atomic.Int32
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		select {
		case <-release[j.Args.Order]:
			return nil
		case <-ctx.Done():
			interrupted.Add(1)
			return ctx.Err()
		}
	}))
	rec := newRecorder()
	ids := enqueueInvoices(t, e, inFlight)
	w := startWorker(t, e, reg, rec, nil)
	rec.waitN(t, inFlight, is(worker.EventStarted, 0))

	stopped := make(chan error, 1)
	go func() {
		generous, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		stopped <- w.Stop(generous)
	}()
	for i, id := range ids {
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned (%v) while %d handlers still ran", err, inFlight-i)
		default:
		}
		close(release[i])
		rec.waitN(t, 1, is(worker.EventSucceeded, id))
	}
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(waitLimit):
		t.Fatalf("Stop did not return within %v of its last handler finishing", waitLimit)
	}

	require.Zero(t, interrupted.Load(), "no handler was cancelled")
	require.Zero(t, rec.count(is(worker.EventReleased, 0)))
	var claimed int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.jobs WHERE state = 'claimed'").Scan(&claimed))
	require.Zero(t, claimed, "Stop returned nil: nothing is claimed")
	for _, id := range ids {
		j, err := e.client.Jobs().Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.Succeeded, j.State, "job %d", id)
		require.Equal(t, 1, j.Attempts, "job %d", id)
	}
	require.Zero(t, perJobRiverRows(t, e.Pool))
}
