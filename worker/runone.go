package worker

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// JobRun is what [Client.RunJob] did with one job.
type JobRun struct {
	// Job is the job as it stands after the attempt was recorded.
	Job jobs.Job
	// Outcome is the event the worker reported for the attempt:
	// [EventSucceeded], [EventFailed] (Job.State says where the job went),
	// [EventLeaseLost] (the job was cancelled or taken over while the
	// handler ran) or [EventError] (the outcome could not be recorded
	// before the lease expired).
	Outcome EventType
	// Err is why the attempt did not succeed: the handler's own error,
	// unchanged (wrapped by [Fail] or [RetryAfter] if the handler did so),
	// so errors.Is finds what it returned; an error matching
	// [ErrHandlerPanic] when it panicked; the error of the result's
	// WritesFunc; the refusal of the result's completion record
	// ([db.ErrInvalidArgument]); or the refusal of an outcome whose lease
	// was lost. Nil when the job succeeded.
	Err error
}

// ErrHandlerPanic is matched (errors.Is) by [JobRun.Err] when the handler
// panicked. Its message carries the recorded diagnostic: the panic's value
// and the start of its stack.
var ErrHandlerPanic = errors.New("worker: the handler panicked")

// RunJob claims job id, runs its handler and records the outcome, all
// before it returns, through the code a batch of a started worker runs for
// each of its jobs: the same claim under the lease protocol (a fresh
// token, one more attempt, the handler's lease), the same decoding into the
// payload type, the same context (cancelled when the lease is lost or the
// handler's timeout passes), the same heartbeat, the same classification
// of the handler's error ([Fail], [RetryAfter], a panic) and the same
// completion, with the result's WritesFunc in the transaction that records
// the success; only a success without writes is recorded alone, not with a
// batch's others. Events go to [Config.OnEvent] as usual. It is for tests,
// and for tools that run one job by hand: it needs no [Client.Start],
// builds nothing per call (no second client), and runs the job whatever its
// queue.
//
// Time is the client's [Config.Clock]: with a [db.FakeClock], a job is due
// when the clock says so, and a retry's wait ends when the test moves the
// clock past the job's AvailableAt.
//
// It refuses, changing nothing: a client without handlers, a job of a kind
// the registry has no handler for, or one for an executor outside docket
// (External), with [db.ErrInvalidArgument]; a job the actor may not see
// with [db.ErrNotFound]; a job whose payload schema the registry does not
// decode, or pinned to revisions that do not include its handler's, with
// [db.ErrRefusedRevision]; a finished job with [db.ErrTerminal]; a job that
// is not claimable now (not yet due, held by a live lease, uncertain) with
// [db.ErrInvalidArgument], saying why; a due job it still could not claim
// (the actor lacks job.claim on its project, or another claimant holds
// its row) with [db.ErrNotPermitted]. The error of a database it cannot
// reach is returned as it is. Once the job is claimed, the error is nil and
// [JobRun] says what became of the attempt.
func (w *Client) RunJob(ctx context.Context, id int64) (JobRun, error) {
	const op = "worker.run_job"
	if !w.runs {
		return JobRun{}, db.Refuse(db.ErrInvalidArgument, op, "this client has no handler to run: register one with worker.Handle in Config.Registry", "job", id)
	}
	before, err := w.jobs.Get(ctx, id)
	if err != nil {
		return JobRun{}, err
	}
	h := w.cfg.Registry.lookup(before.Kind)
	switch {
	case h == nil:
		return JobRun{}, db.Refuse(db.ErrInvalidArgument, op, "no handler for kind "+before.Kind+" in the registry", "job", id)
	case before.External:
		return JobRun{}, db.Refuse(db.ErrInvalidArgument, op, "the job is for an executor outside docket (External): docket's worker never runs it", "job", id)
	}
	j, ok, err := w.jobs.ClaimID(ctx, id, jobs.ClaimOptions{Lease: h.opts.Lease, Decoders: w.decoders})
	if err != nil {
		return JobRun{}, err
	}
	if !ok {
		return JobRun{}, notClaimable(op, before, w.cfg.Clock)
	}

	// The enqueuing span's context, when the client traces. The job is
	// claimed by now, so a failure to read it costs the link, not the run.
	var link trace.SpanContext
	if w.telemetry().Tracing() {
		if links, err := w.jobs.SpanContexts(ctx, []int64{id}); err == nil {
			link = links[id]
		}
	}
	// The batch's own run: it records every outcome but a success without
	// writes, which is recorded here, alone, as a batch records its own.
	o := w.run(ctx, j, link)
	e := o.event
	if o.success != nil {
		e, o.err = w.recordSuccess(ctx, o)
	}

	after, err := w.jobs.Get(context.WithoutCancel(ctx), id)
	if err != nil {
		return JobRun{}, fmt.Errorf("%s: job %d: reading it back: %w", op, id, err)
	}
	return runOf(after, e, o.err), nil
}

// recordSuccess records the success o carries in a statement of its own,
// holding it (see hold) while its lease lasts, and returns the event it
// emitted: the success, its refusal (the lease was lost), the failed
// attempt whose completion record storage refused, with that refusal, or
// its abandon.
func (w *Client) recordSuccess(ctx context.Context, o outcome) (Event, error) {
	err := w.hold(ctx, o.job, o.until, w.heldSuccess(*o.success))
	if recordRefused(err) {
		return w.settled(o, err), err
	}
	if err == nil || isRefusal(err) {
		return w.settled(o, err), nil
	}
	// Abandoned once the lease expired (hold logged it): the lease sweep
	// settles the job, as after a crash.
	o.event.Type, o.event.Err = EventError, err
	o.attempt.end(o.event, "")
	w.emit(o.event)
	return o.event, nil
}

// heldSuccess is success c, without writes, for hold: with a late form
// unless it carries a completion record, which only a live claim records.
func (w *Client) heldSuccess(c jobs.Completion) heldOutcome {
	o := heldOutcome{what: "success", write: func(tctx context.Context) error {
		_, err := w.jobs.CompleteWith(tctx, c, nil)
		return err
	}}
	if c.Record == nil {
		o.late = func(tctx context.Context) error {
			_, err := w.jobs.CompleteLate(tctx, c.Lease, c.Result, c.Spent)
			return err
		}
	}
	return o
}

// runOf is the run of job after whose attempt ended with event e, the
// handler having had handlerErr (see outcome.err).
func runOf(after jobs.Job, e Event, handlerErr error) JobRun {
	run := JobRun{Job: after, Outcome: e.Type}
	var panicked *panicError
	switch {
	case e.Type == EventSucceeded:
	case errors.As(handlerErr, &panicked):
		run.Err = fmt.Errorf("%w: %s", ErrHandlerPanic, after.Diagnostic)
	case e.Type == EventFailed && handlerErr != nil:
		run.Err = handlerErr
	case e.Err != nil:
		// The outcome was refused (the lease was lost) or abandoned: that
		// is what became of the attempt, whatever the handler said.
		run.Err = e.Err
	default:
		run.Err = handlerErr
	}
	return run
}

// notClaimable says why job j, as read before a claim that found nothing,
// could not be claimed.
func notClaimable(op string, j jobs.Job, clock db.Clock) error {
	now := clock.Now()
	switch {
	case j.State.Terminal():
		return db.Refuse(db.ErrTerminal, op, "the job is "+string(j.State)+": it runs no more", "job", j.ID)
	case j.State == jobs.Queued && j.AvailableAt.After(now):
		return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("the job is not due until %s; the client's clock reads %s",
			j.AvailableAt.Format("2006-01-02T15:04:05.999999Z07:00"), now.Format("2006-01-02T15:04:05.999999Z07:00")), "job", j.ID)
	case j.State == jobs.Claimed:
		return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("the job is held by a claim of %s until %s (not repeatable, or no attempts left, once expired)",
			j.ClaimedBy, j.LeaseExpiresAt.Format("2006-01-02T15:04:05.999999Z07:00")), "job", j.ID)
	case j.State == jobs.Uncertain:
		return db.Refuse(db.ErrInvalidArgument, op, "the job is uncertain: reconcile it", "job", j.ID)
	}
	return db.Refuse(db.ErrNotPermitted, op, "the job is due but was not claimed: the actor lacks job.claim on project "+j.Project+", or another claimant holds it", "job", j.ID)
}
