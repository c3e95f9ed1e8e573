package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// run runs the handler of claimed job j and records its outcome, except a
// success without writes, which it returns for its batch to record with the
// others.
func (w *Client) run(ctx context.Context, j jobs.Job) outcome {
	h := w.cfg.Registry.lookup(j.Kind)
	if h == nil {
		// Not reachable: the claim names only the registry's kinds.
		w.fail(ctx, j, Event{JobID: j.ID, Kind: j.Kind, Attempt: j.Attempts}, jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "no handler for kind " + j.Kind})
		return outcome{job: j}
	}
	lease := j.Lease()
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if h.opts.Timeout > 0 {
		var stop context.CancelFunc
		hctx, stop = context.WithTimeoutCause(hctx, h.opts.Timeout, errTimeout)
		defer stop()
	}
	beat := w.heartbeat(hctx, cancel, lease, j)
	defer beat.stop()

	w.emit(Event{Type: EventStarted, JobID: j.ID, Kind: j.Kind, Attempt: j.Attempts, Revision: h.opts.Revision, State: string(j.State)})
	began := time.Now()
	res, err := callHandler(hctx, h, j)
	took := time.Since(began)
	beat.stop()
	base := Event{JobID: j.ID, Kind: j.Kind, Attempt: j.Attempts, Revision: h.opts.Revision, Duration: took}

	if cause := context.Cause(hctx); errors.Is(cause, errLeaseLost) {
		// The lease is gone: whatever the handler says, it is not its to
		// record. Report the refusal a late outcome gets.
		lost := beat.lostErr()
		base.Type, base.Err = EventLeaseLost, lost
		w.log.WarnContext(ctx, "docket worker: lease lost while the handler ran", "job", j.ID, "kind", j.Kind, "err", lost)
		w.emit(base)
		return outcome{job: j}
	}
	if err != nil && w.stopping.Load() && ctx.Err() != nil {
		w.release(ctx, j, base)
		return outcome{job: j}
	}
	if err != nil {
		if errors.Is(context.Cause(hctx), errTimeout) {
			err = fmt.Errorf("%w after %v: %w", errTimeout, h.opts.Timeout, err)
		}
		f := failureOf(err)
		if h.opts.Revision != "" {
			f.Diagnostic = "[" + h.opts.Revision + "] " + f.Diagnostic
		}
		w.fail(ctx, j, base, f)
		return outcome{job: j}
	}
	if res.WritesFunc == nil {
		return outcome{job: j, success: &jobs.Completion{Lease: lease, Result: res.Value}, event: base}
	}
	w.succeedWithWrites(ctx, j, res, base)
	return outcome{job: j}
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
// transaction of their own: both commit or neither does.
func (w *Client) succeedWithWrites(ctx context.Context, j jobs.Job, res Result, e Event) {
	settle := context.WithoutCancel(ctx) // the outcome is recorded even as the worker stops
	_, err := w.jobs.Complete(settle, j.Lease(), res.Value, func(tx pgx.Tx) error { return res.WritesFunc(settle, tx) })
	switch {
	case err == nil:
		e.Type, e.State = EventSucceeded, string(jobs.Succeeded)
	case isRefusal(err):
		e.Type, e.Err = EventLeaseLost, err
		w.log.WarnContext(ctx, "docket worker: success refused", "job", j.ID, "kind", j.Kind, "err", err)
	default:
		// The writes failed: the attempt failed, retryably.
		w.fail(ctx, j, e, jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "completion writes: " + err.Error()})
		return
	}
	w.emit(e)
}

// isRefusal reports whether err is the job store refusing an outcome (the
// lease is no longer this worker's), as opposed to a failure to reach it.
func isRefusal(err error) bool {
	return errors.Is(err, db.ErrStaleClaim) || errors.Is(err, db.ErrTerminal) || errors.Is(err, db.ErrNotFound)
}

// fail records a failed attempt. A job queued again for a retry wakes the
// workers of its queue when its wait is over (the notification, or the
// poll).
func (w *Client) fail(ctx context.Context, j jobs.Job, e Event, f jobs.Failure) {
	after, err := w.jobs.Fail(context.WithoutCancel(ctx), j.Lease(), f)
	switch {
	case err == nil:
		e.Type, e.State, e.Err = EventFailed, string(after.State), errors.New(f.Diagnostic)
		w.log.InfoContext(ctx, "docket worker: attempt failed", "job", j.ID, "kind", j.Kind, "attempt", j.Attempts,
			"class", f.Class, "state", after.State, "diagnostic", f.Diagnostic)
	case isRefusal(err):
		e.Type, e.Err = EventLeaseLost, err
	default:
		e.Type, e.Err = EventError, err
		w.log.WarnContext(ctx, "docket worker: recording a failure failed; the lease will expire", "job", j.ID, "err", err)
	}
	w.emit(e)
}

// release gives back the lease of a handler cancelled by Stop: the job is
// queued again with its attempt counted.
func (w *Client) release(ctx context.Context, j jobs.Job, e Event) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ReleaseTimeout)
	defer cancel()
	after, err := w.jobs.Release(rctx, j.Lease(), time.Time{}, "worker stopped while the handler ran")
	switch {
	case err == nil:
		e.Type, e.State = EventReleased, string(after.State)
		w.log.InfoContext(ctx, "docket worker: released a lease on stop", "job", j.ID, "kind", j.Kind, "state", after.State)
	case isRefusal(err):
		e.Type, e.Err = EventLeaseLost, err
	default:
		e.Type, e.Err = EventError, err
		w.log.WarnContext(ctx, "docket worker: releasing a lease failed; it will expire", "job", j.ID, "err", err)
	}
	w.emit(e)
}

var (
	errLeaseLost = errors.New("worker: the job's lease was lost")
	errTimeout   = errors.New("worker: handler timed out")
)
