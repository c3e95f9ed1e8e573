package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// run runs the handler of claimed job j and records its outcome, except a
// success without writes, which it returns for its caller (a batch, or
// RunJob) to record. The outcome it returns carries the event it emitted, or
// the success's event to emit once recorded, and why the attempt did not
// succeed as the handler had it: its error unchanged, a panic, its
// WritesFunc's error or the refusal of its completion record. link is the
// context of the span that enqueued j, when known.
func (w *Client) run(ctx context.Context, j jobs.Job, link trace.SpanContext) outcome {
	ctx, att := w.startAttempt(ctx, j, link)
	h := w.cfg.Registry.lookup(j.Kind)
	if h == nil {
		// Not reachable: the claim names only the registry's kinds.
		e := w.fail(ctx, j, Event{JobID: j.ID, Kind: j.Kind, Attempt: j.Attempts}, jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "no handler for kind " + j.Kind},
			j.LeaseExpiresAt)
		return outcome{job: j, event: e}
	}
	lease := j.Lease()
	meter := &spendMeter{}
	hctx, cancel := context.WithCancelCause(context.WithValue(ctx, spendKey{}, meter))
	defer cancel(nil)
	if h.opts.Timeout > 0 {
		var stop context.CancelFunc
		hctx, stop = context.WithTimeoutCause(hctx, h.opts.Timeout, errTimeout)
		defer stop()
	}
	beat := w.heartbeat(hctx, cancel, lease, j)
	defer beat.stop()

	// Counted as running before it is said to have started, so that a stop
	// that follows the start's event counts it.
	w.handlers.Add(1)
	w.emit(Event{Type: EventStarted, JobID: j.ID, Kind: j.Kind, Attempt: j.Attempts, Revision: h.opts.Revision, State: string(j.State)})
	began := time.Now()
	res, err := callHandler(hctx, h, j)
	w.handlers.Add(-1)
	took := time.Since(began)
	if att != nil {
		att.handlerReturned(w.cfg.Clock.Now())
	}
	beat.stop()
	base := Event{JobID: j.ID, Kind: j.Kind, Attempt: j.Attempts, Revision: h.opts.Revision, Duration: took}

	if cause := context.Cause(hctx); errors.Is(cause, errLeaseLost) {
		// The lease is gone: whatever the handler says, it is not its to
		// record. Report the refusal a late outcome gets.
		lost := beat.lostErr()
		base.Type, base.Err = EventLeaseLost, lost
		w.log.WarnContext(ctx, "docket worker: lease lost while the handler ran", "job", j.ID, "kind", j.Kind, "err", lost)
		w.emitAttempt(ctx, base, "")
		return outcome{job: j, event: base, err: err}
	}
	if err != nil && w.stopping.Load() && ctx.Err() != nil {
		return outcome{job: j, event: w.release(ctx, j, base, beat.leaseUntil()), err: err}
	}
	if err != nil {
		recorded := err
		if errors.Is(context.Cause(hctx), errTimeout) {
			recorded = fmt.Errorf("%w after %v: %w", errTimeout, h.opts.Timeout, err)
		}
		f := failureOf(recorded)
		f.Spent = meter.total()
		if h.opts.Revision != "" {
			f.Diagnostic = "[" + h.opts.Revision + "] " + f.Diagnostic
		}
		return outcome{job: j, event: w.fail(ctx, j, base, f, beat.leaseUntil()), err: err}
	}
	// Whether the result's completion record may complete the job is
	// storage's rule alone: a success without writes goes to the batch,
	// whose statement refuses a bad record for its element only, and that
	// attempt then fails (see settled); one with writes is refused in its
	// own transaction, which rolls the writes back (succeedWithWrites).
	if res.WritesFunc == nil {
		return outcome{job: j, success: &jobs.Completion{Lease: lease, Result: res.Value, Record: res.Record, Spent: meter.total()},
			event: base, until: beat.leaseUntil(), attempt: att}
	}
	e, err := w.succeedWithWrites(ctx, j, res, meter.total(), base, beat.leaseUntil())
	return outcome{job: j, event: e, err: err}
}

// callHandler runs h on j, turning a panic into a retryable failure whose
// diagnostic carries the start of the stack.
func callHandler(ctx context.Context, h *handler, j jobs.Job) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return h.run(ctx, j)
}

// succeedWithWrites records success with the handler's writes, in a
// transaction of their own: both commit or neither does. When the
// transaction fails for any reason but a refusal or the writes' own error,
// the success is held (see hold): each further try first renews the lease,
// which locks the job and is refused once the job has moved on, so the
// writes run again only while the job is still this lease's, and never
// after an earlier try committed. A refused renewal is then resolved by
// reading the job back: succeeded under this lease means an earlier try's
// commit, whose reply was lost, went through. A completion in doubt is never
// turned into a failure, so a job that must not run twice is not run again.
// It returns the event it emitted and, when the writes failed (or storage
// refused the record) and so failed the attempt, their error.
func (w *Client) succeedWithWrites(ctx context.Context, j jobs.Job, res Result, spent jobs.Spend, e Event, until time.Time) (Event, error) {
	lease := j.Lease()
	d := j.LeaseExpiresAt.Sub(j.ClaimedAt)
	tries := 0
	o := heldOutcome{what: "success with writes", write: func(tctx context.Context) error {
		tries++
		err := db.WithTx(tctx, w.pool, func(tx pgx.Tx) error {
			if tries > 1 {
				if _, err := w.jobs.RenewTx(tctx, tx, lease, d); err != nil {
					return err
				}
			}
			if err := writesOf(res.WritesFunc(tctx, tx)); err != nil {
				return err
			}
			_, err := w.jobs.CompleteWithTx(tctx, tx, jobs.Completion{Lease: lease, Result: res.Value, Record: res.Record, Spent: spent})
			if errors.Is(err, db.ErrInvalidArgument) {
				// Storage refused the record: as the writes' own failure,
				// the attempt fails and the writes roll back.
				return &writesError{err: err}
			}
			return err
		})
		return w.refusedAtCommit(j, err)
	}}
	if res.Record == nil {
		// Late, the success is recorded first, locking the job, and once:
		// the same success on record already (an earlier try committed,
		// its reply lost) refuses it, and the writes roll back with it.
		o.late = func(tctx context.Context) error {
			tries++
			err := db.WithTx(tctx, w.pool, func(tx pgx.Tx) error {
				if _, err := w.jobs.CompleteLateTx(tctx, tx, lease, res.Value, spent); err != nil {
					return err
				}
				return writesOf(res.WritesFunc(tctx, tx))
			})
			return w.refusedAtCommit(j, err)
		}
	}
	err := w.hold(ctx, j, until, o)
	if isRefusal(err) && tries > 1 && w.recordedBy(context.WithoutCancel(ctx), j, lease) {
		err = nil
	}
	switch {
	case err == nil:
		e.Type, e.State = EventSucceeded, string(jobs.Succeeded)
	case isRefusal(err):
		e.Type, e.Err = EventLeaseLost, err
		w.log.WarnContext(ctx, "docket worker: success refused", "job", j.ID, "kind", j.Kind, "generation", j.LeaseGeneration, "err", err)
	case isWritesError(err):
		// The writes failed (the database refused them, or they are the
		// handler's own error): the attempt failed, retryably.
		var we *writesError
		errors.As(err, &we)
		return w.fail(ctx, j, e, jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "completion writes: " + err.Error(), Spent: spent}, until), we.err
	default:
		e.Type, e.Err = EventError, err // abandoned: hold logged it
	}
	w.emitAttempt(ctx, e, "")
	return e, nil
}

// refusedAtCommit is err, the end of a transaction recording job j's
// success with writes, as a writesError when the commit refused the
// completion: a job that requests an output completed without its record
// (jobs_completion_recorded). As a refused record, the attempt fails and the
// writes are rolled back.
func (w *Client) refusedAtCommit(j jobs.Job, err error) error {
	if err != nil && !isWritesError(err) && definite(err) {
		if t := db.Translate(err, "job.complete", "job", j.ID); errors.Is(t, db.ErrInvalidArgument) {
			return &writesError{err: t}
		}
	}
	return err
}

// recordedBy reports whether job j has succeeded under lease: an earlier
// completion committed though its reply was lost. A read that fails
// reports false: the lease sweep then settles the job.
func (w *Client) recordedBy(ctx context.Context, j jobs.Job, lease jobs.Lease) bool {
	ok, err := w.jobs.SucceededUnder(ctx, lease)
	if err != nil {
		w.log.WarnContext(ctx, "docket worker: reading back a job whose completion was in doubt failed", "job", j.ID, "err", err)
		return false
	}
	return ok
}

// writesError is the error of a handler's completion writes that trying
// again would not mend: the database refused a statement, or the handler's
// own code failed. A connection lost while they ran is not one.
type writesError struct{ err error }

func (e *writesError) Error() string { return e.err.Error() }
func (e *writesError) Unwrap() error { return e.err }

// writesOf marks err, returned by a handler's WritesFunc, as a writesError
// unless it is a connection lost (or another error that leaves nothing
// decided), which the caller tries again.
func writesOf(err error) error {
	if err == nil {
		return nil
	}
	if !connectionLost(err) {
		return &writesError{err: err}
	}
	return err
}

func isWritesError(err error) bool {
	var we *writesError
	return errors.As(err, &we)
}

// isRefusal reports whether err is the job store refusing an outcome (the
// lease is no longer this worker's, or its actor no longer holds job.claim
// there), as opposed to a failure to reach it.
func isRefusal(err error) bool {
	return errors.Is(err, db.ErrStaleClaim) || errors.Is(err, db.ErrTerminal) || errors.Is(err, db.ErrNotFound) ||
		errors.Is(err, db.ErrNotPermitted)
}

// fail records a failed attempt, holding the failure (see hold) while its
// lease, expiring at until, lasts, and returns the event it emitted. A job
// queued again for a retry wakes the workers of its queue when its wait is
// over (the notification, or the poll).
func (w *Client) fail(ctx context.Context, j jobs.Job, e Event, f jobs.Failure, until time.Time) Event {
	var after jobs.Job
	err := w.hold(ctx, j, until, heldOutcome{what: "failure",
		write: func(tctx context.Context) error {
			var err error
			after, err = w.jobs.Fail(tctx, j.Lease(), f)
			return err
		},
		late: func(tctx context.Context) error {
			var err error
			after, err = w.jobs.FailLate(tctx, j.Lease(), f)
			return err
		}})
	switch {
	case err == nil:
		e.Type, e.State, e.Err = EventFailed, string(after.State), errors.New(f.Diagnostic)
		w.log.InfoContext(ctx, "docket worker: attempt failed", "job", j.ID, "kind", j.Kind, "attempt", j.Attempts,
			"class", f.Class, "state", after.State, "diagnostic", f.Diagnostic)
	case isRefusal(err):
		e.Type, e.Err = EventLeaseLost, err
		w.log.WarnContext(ctx, "docket worker: failure refused", "job", j.ID, "kind", j.Kind, "generation", j.LeaseGeneration, "err", err)
	default:
		e.Type, e.Err = EventError, err // abandoned: hold logged it
	}
	w.emitAttempt(ctx, e, f.Class)
	return e
}

// release gives back the lease of a handler cancelled by Stop: the job is
// queued again with its attempt counted. It holds the release (see hold)
// for up to [Config.ReleaseTimeout], or until the lease expires at until,
// and returns the event it emitted.
func (w *Client) release(ctx context.Context, j jobs.Job, e Event, until time.Time) Event {
	until = minTime(until, w.cfg.Clock.Now().Add(w.cfg.ReleaseTimeout))
	var after jobs.Job
	// Stop's cancellation is why this runs: the release is held for its own
	// bound, not the batch's context.
	err := w.hold(context.WithoutCancel(ctx), j, until, heldOutcome{what: "release", write: func(tctx context.Context) error {
		var err error
		after, err = w.jobs.Release(tctx, j.Lease(), time.Time{}, "worker stopped while the handler ran")
		return err
	}})
	switch {
	case err == nil:
		e.Type, e.State = EventReleased, string(after.State)
		w.log.InfoContext(ctx, "docket worker: released a lease on stop", "job", j.ID, "kind", j.Kind, "state", after.State)
	case isRefusal(err):
		e.Type, e.Err = EventLeaseLost, err
	default:
		e.Type, e.Err = EventError, err // abandoned: hold logged it
	}
	w.emitAttempt(ctx, e, "")
	return e
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

var (
	errLeaseLost = errors.New("worker: the job's lease was lost")
	errTimeout   = errors.New("worker: handler timed out")
)
