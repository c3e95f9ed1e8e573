package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// cancelSeen is what a handler saw when its context ended.
type cancelSeen struct {
	at    time.Time
	err   error
	cause error
}

// A job cancelled while its handler runs is taken from the handler within two
// heartbeats: the next renewal is refused, the handler's context is cancelled,
// and what the handler then returns is not recorded: the job stays cancelled
// and the worker reports the lost lease. The handler's lease is worth nothing
// afterwards.
func TestCancelWhileRunning(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	leases := make(chan jobs.Lease, 1)
	seen := make(chan cancelSeen, 1)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		leases <- j.Lease()
		<-ctx.Done()
		seen <- cancelSeen{at: time.Now(), err: ctx.Err(), cause: context.Cause(ctx)}
		return nil // tries to succeed all the same
	}, worker.HandlerOptions{Lease: jobs.MinLease}))
	rec := newRecorder()
	enq, err := e.client.Enqueue(ctx, invoiceSpec(t, 1, ""))
	require.NoError(t, err)
	id := enq.Job.ID
	startWorker(t, e, reg, rec, nil)

	var lease jobs.Lease
	select {
	case lease = <-leases:
	case <-time.After(waitLimit):
		t.Fatalf("the handler did not start within %v", waitLimit)
	}
	require.Equal(t, id, lease.JobID)
	require.Equal(t, e.Clock.Now().Add(jobs.MinLease), lease.ExpiresAt, "the claim takes the handler's lease")

	cancelledAt := time.Now()
	j, err := e.client.Jobs().Cancel(ctx, id, "the order was withdrawn")
	require.NoError(t, err)
	require.Equal(t, jobs.Cancelled, j.State)

	var s cancelSeen
	select {
	case s = <-seen:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler's context was not cancelled within 30s of the job's cancellation")
	}
	// The worker's default heartbeat renews every third of the lease.
	beat := jobs.MinLease / 3
	took := s.at.Sub(cancelledAt)
	t.Logf("handler context cancelled %v after the job was (heartbeat every %v); cause: %v", took, beat, s.cause)
	require.LessOrEqual(t, took, 2*beat, "the handler learned of the cancellation later than two heartbeats")
	require.ErrorIs(t, s.err, context.Canceled)
	require.Error(t, s.cause)
	require.NotErrorIs(t, s.cause, context.Canceled, "the worker gives the handler the reason, not a bare cancellation")
	require.NotErrorIs(t, s.cause, context.DeadlineExceeded)

	rec.waitN(t, 1, is(worker.EventLeaseLost, id))
	var lost worker.Event
	rec.mu.Lock()
	for _, ev := range rec.events {
		if ev.Type == worker.EventLeaseLost && ev.JobID == id {
			lost = ev
		}
	}
	rec.mu.Unlock()
	require.ErrorIs(t, lost.Err, db.ErrStaleClaim)
	require.Zero(t, rec.count(is(worker.EventSucceeded, id)))
	require.Zero(t, rec.count(is(worker.EventFailed, id)))

	got, err := e.client.Jobs().Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, jobs.Cancelled, got.State)
	require.Equal(t, 1, got.Attempts)
	require.Nil(t, got.Result)

	// The lease the handler held settles nothing any more.
	_, err = e.client.Jobs().Complete(ctx, lease, mustJSON(map[string]bool{"late": true}), nil)
	require.ErrorIs(t, err, db.ErrStaleClaim)
	_, err = e.client.Jobs().Fail(ctx, lease, jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "late"})
	require.ErrorIs(t, err, db.ErrStaleClaim)
	_, err = e.client.Jobs().Renew(ctx, lease, jobs.MinLease)
	require.ErrorIs(t, err, db.ErrStaleClaim)
	require.Equal(t, jobs.Cancelled, jobState(t, e.Pool, id))
}
