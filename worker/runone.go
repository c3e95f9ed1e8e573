package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
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
	// WritesFunc; or the refusal of an outcome whose lease was lost. Nil
	// when the job succeeded.
	Err error
}

// ErrHandlerPanic is matched (errors.Is) by [JobRun.Err] when the handler
// panicked. Its message carries the recorded diagnostic: the panic's value
// and the start of its stack.
var ErrHandlerPanic = errors.New("worker: the handler panicked")

// RunJob claims job id, runs its handler and records the outcome, all
// before it returns, as a batch of a started worker would: the same claim
// under the lease protocol (a fresh token, one more attempt, the handler's
// lease), the same decoding into the payload type, the same context
// (cancelled when the lease is lost or the handler's timeout passes), the
// same heartbeat, the same classification of the handler's error ([Fail],
// [RetryAfter], a panic) and the same completion, with the result's
// WritesFunc in the transaction that records the success. Events go to
// [Config.OnEvent] as usual. It is for tests, and for tools that run one
// job by hand: it needs no [Client.Start], and runs the job whatever its
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
	once, rec, err := w.runOnce(h, id)
	if err != nil {
		return JobRun{}, err
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
	if once.telemetry().Tracing() {
		if links, err := once.jobs.SpanContexts(ctx, []int64{id}); err == nil {
			link = links[id]
		}
	}
	o := once.run(ctx, j, link)
	if o.success != nil {
		var refusal error
		err := once.hold(ctx, j, o.until, "success", func(tctx context.Context) error {
			_, err := w.jobs.CompleteWith(tctx, *o.success, nil)
			return err
		})
		switch {
		case err == nil:
		case isRefusal(err):
			refusal = err
		default:
			// Abandoned once the lease expired (hold logged it): the
			// lease sweep settles the job, as after a crash.
			o.event.Type, o.event.Err = EventError, err
			once.emit(o.event)
		}
		if err == nil || refusal != nil {
			once.settled(o, refusal)
		}
	}

	after, err := w.jobs.Get(context.WithoutCancel(ctx), id)
	if err != nil {
		return JobRun{}, fmt.Errorf("%s: job %d: reading it back: %w", op, id, err)
	}
	return rec.result(after), nil
}

// runRecorder is what one RunJob learns of its attempt.
type runRecorder struct {
	mu         sync.Mutex
	outcome    EventType
	outcomeErr error // the outcome event's error
	handlerErr error // the handler's own error, or its WritesFunc's
	panicked   bool
}

// result is the run of job after, as rec saw it.
func (r *runRecorder) result(after jobs.Job) JobRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	run := JobRun{Job: after, Outcome: r.outcome}
	switch {
	case r.outcome == EventSucceeded:
	case r.panicked:
		run.Err = fmt.Errorf("%w: %s", ErrHandlerPanic, after.Diagnostic)
	case r.outcome == EventFailed && r.handlerErr != nil:
		run.Err = r.handlerErr
	case r.outcomeErr != nil:
		// The outcome was refused (the lease was lost) or abandoned: that
		// is what became of the attempt, whatever the handler said.
		run.Err = r.outcomeErr
	default:
		run.Err = r.handlerErr
	}
	return run
}

// runOnce returns a client that runs h exactly as w does, but tells rec
// what the handler returned (its error, a panic, its WritesFunc's error)
// and which outcome the attempt of job id had. It is a client made by
// NewClient from w's configuration, so it runs the same code; it is never
// started.
func (w *Client) runOnce(h *handler, id int64) (*Client, *runRecorder, error) {
	rec := &runRecorder{}
	watched := *h
	watched.run = func(ctx context.Context, j jobs.Job) (res Result, err error) {
		returned := false
		defer func() {
			if !returned {
				rec.mu.Lock()
				rec.panicked = true
				rec.mu.Unlock()
			}
		}()
		res, err = h.run(ctx, j)
		returned = true
		rec.mu.Lock()
		rec.handlerErr = err
		rec.mu.Unlock()
		if err == nil && res.WritesFunc != nil {
			writes := res.WritesFunc
			res.WritesFunc = func(ctx context.Context, tx pgx.Tx) error {
				err := writes(ctx, tx)
				rec.mu.Lock()
				rec.handlerErr = err
				rec.mu.Unlock()
				return err
			}
		}
		return res, err
	}
	reg := NewRegistry()
	reg.handlers[watched.kind] = &watched
	cfg := w.cfg
	cfg.Registry = reg
	onEvent := w.cfg.OnEvent
	cfg.OnEvent = func(e Event) {
		if e.JobID == id {
			switch e.Type {
			case EventSucceeded, EventFailed, EventLeaseLost, EventReleased, EventError:
				rec.mu.Lock()
				rec.outcome, rec.outcomeErr = e.Type, e.Err
				rec.mu.Unlock()
			}
		}
		if onEvent != nil {
			onEvent(e)
		}
	}
	cfg.Sweeps = nil // the built-in and configured sweeps are not run here
	once, err := NewClient(w.pool, cfg)
	if err != nil {
		return nil, nil, err
	}
	once.decoders, once.leases = w.decoders, w.leases
	return once, rec, nil
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
