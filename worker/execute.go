package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/jobclaim"
	"github.com/docket-dev/docket/jobs"
)

// dispatchWorker is River's worker for dispatches.
type dispatchWorker struct {
	river.WorkerDefaults[dispatchArgs]
	w *Client
}

// claimAnswer is one dispatch's share of a grouped claim: found false when
// the job is unknown or not the worker's to claim.
type claimAnswer struct {
	result jobclaim.Result[jobs.Job]
	found  bool
}

// lockedRecheck is how long a dispatch waits before looking again at a due
// job another claimant had locked; maxShortWaits bounds how often it waits
// in the worker before handing the wait to River.
const (
	lockedRecheck = 50 * time.Millisecond
	maxShortWaits = 3
)

// Work carries one dispatch: claim the job, run its handler, record the
// outcome. It returns an error to River only for infrastructure failures,
// which River retries; every outcome of the job itself is docket's.
func (d *dispatchWorker) Work(ctx context.Context, rj *river.Job[dispatchArgs]) error {
	w := d.w
	id := rj.Args.JobID
	var lease time.Duration
	if h := w.cfg.Registry.lookup(rj.Args.JobKind); h != nil {
		lease = h.opts.Lease
	}
	for waited := 0; ; waited++ {
		ans, err := w.claim(ctx, jobclaim.Want{ID: id, Lease: lease})
		if err != nil {
			w.emit(Event{Type: EventError, JobID: id, Kind: rj.Args.JobKind, Err: err})
			return fmt.Errorf("claim job %d: %w", id, err)
		}
		if !ans.found {
			w.log.WarnContext(ctx, "docket worker: dispatch for a job this worker may not claim or that does not exist; dropped", "job", id)
			w.emit(Event{Type: EventSkipped, JobID: id, Kind: rj.Args.JobKind})
			return nil
		}
		j := ans.result.Job
		switch ans.result.Outcome {
		case jobclaim.Taken:
			return w.run(ctx, j)
		case jobclaim.Undecodable:
			w.log.WarnContext(ctx, "docket worker: job's payload schema is not one this deployment decodes; left queued",
				"job", j.ID, "kind", j.Kind, "payload_schema", j.PayloadSchema)
			w.emit(Event{Type: EventRefused, JobID: j.ID, Kind: j.Kind, State: string(j.State),
				Err: db.RefuseCode("DK012", "worker.claim", fmt.Sprintf("kind %s payload schema %d", j.Kind, j.PayloadSchema), "job", j.ID)})
			return nil
		}
		// Unavailable. Drop the dispatch of a job that is finished, in
		// doubt, or held by a live lease (its holder dispatches any retry).
		if j.State != jobs.Queued {
			w.emit(Event{Type: EventSkipped, JobID: j.ID, Kind: j.Kind, State: string(j.State)})
			return nil
		}
		// Queued: not yet due, or locked by another claimant. Wait a
		// moment here, or longer in River.
		wait := j.AvailableAt.Sub(w.cfg.Clock.Now())
		if wait <= 0 {
			wait = lockedRecheck
		}
		if wait > shortWait || waited >= maxShortWaits {
			w.emit(Event{Type: EventSnoozed, JobID: j.ID, Kind: j.Kind, State: string(j.State)})
			return river.JobSnooze(wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// ledgerOp is one request to the group commit: a claim or a success.
type ledgerOp struct {
	claim    jobclaim.Want
	complete *jobs.Completion
}

// ledgerAnswer is one request's share of a group commit.
type ledgerAnswer struct {
	claim   claimAnswer
	refusal error // a success's refusal
	err     error // the failure of the request's half of the batch
}

// claim claims one job through the group commit.
func (w *Client) claim(ctx context.Context, want jobclaim.Want) (claimAnswer, error) {
	a, err := w.ledger.do(ctx, ledgerOp{claim: want})
	if err == nil {
		err = a.err
	}
	return a.claim, err
}

// completeGrouped records one success through the group commit: the
// element's refusal, or the whole batch's failure.
func (w *Client) completeGrouped(ctx context.Context, c jobs.Completion) error {
	a, err := w.ledger.do(ctx, ledgerOp{complete: &c})
	if err != nil {
		return err
	}
	if a.err != nil {
		return a.err
	}
	return a.refusal
}

// flushLedger records a batch of successes and claims a batch of jobs in one
// transaction, so both share one commit: two statements, one WAL flush.
func (w *Client) flushLedger(ctx context.Context, ops []ledgerOp) ([]ledgerAnswer, error) {
	var (
		wants       []jobclaim.Want
		completions []jobs.Completion
	)
	for _, op := range ops {
		if op.complete != nil {
			completions = append(completions, *op.complete)
		} else {
			wants = append(wants, op.claim)
		}
	}
	refusals, claims, err := w.ledgerTx(ctx, completions, wants)
	var completeErr, claimErr error
	if err != nil && len(completions) > 0 && len(wants) > 0 {
		// One half may have failed the other: try each on its own, so a
		// failed claim does not lose successes, nor the other way round.
		refusals, _, completeErr = w.ledgerTx(ctx, completions, nil)
		_, claims, claimErr = w.ledgerTx(ctx, nil, wants)
	} else if err != nil {
		completeErr, claimErr = err, err
	}
	out := make([]ledgerAnswer, len(ops))
	for i, op := range ops {
		switch {
		case op.complete != nil && completeErr != nil:
			out[i].err = completeErr
		case op.complete != nil:
			out[i].refusal, refusals = refusals[0], refusals[1:]
		case claimErr != nil:
			out[i].err = claimErr
		default:
			out[i].claim, claims = claims[0], claims[1:]
		}
	}
	return out, nil
}

// ledgerTx records completions and claims wants in one transaction.
func (w *Client) ledgerTx(ctx context.Context, completions []jobs.Completion, wants []jobclaim.Want) (refusals []error, claims []claimAnswer, err error) {
	err = db.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
		var err error
		if len(completions) > 0 {
			if refusals, err = w.jobs.CompleteManyTx(ctx, tx, completions); err != nil {
				return err
			}
		}
		if len(wants) > 0 {
			claims, err = w.claimMany(ctx, tx, wants)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return refusals, claims, nil
}

// claimMany claims a batch of wanted jobs in one statement.
func (w *Client) claimMany(ctx context.Context, tx pgx.Tx, wants []jobclaim.Want) ([]claimAnswer, error) {
	results, err := w.store.ClaimIDsTx(ctx, tx, uniqueWants(wants), w.decoders)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]jobclaim.Result[jobs.Job], len(results))
	for _, r := range results {
		byID[r.Job.ID] = r
	}
	out := make([]claimAnswer, len(wants))
	taken := make(map[int64]bool, len(wants))
	for i, want := range wants {
		r, ok := byID[want.ID]
		// Two dispatches of one job in one batch: the first gets the claim,
		// the other sees the job held.
		if ok && r.Outcome == jobclaim.Taken {
			if taken[want.ID] {
				r.Outcome = jobclaim.Unavailable
			}
			taken[want.ID] = true
		}
		out[i] = claimAnswer{result: r, found: ok}
	}
	return out, nil
}

// uniqueWants drops repeated ids, keeping the first.
func uniqueWants(wants []jobclaim.Want) []jobclaim.Want {
	seen := make(map[int64]bool, len(wants))
	out := wants[:0:0]
	for _, w := range wants {
		if !seen[w.ID] {
			seen[w.ID] = true
			out = append(out, w)
		}
	}
	return out
}

// run runs the handler of claimed job j and records its outcome.
func (w *Client) run(ctx context.Context, j jobs.Job) error {
	h := w.cfg.Registry.lookup(j.Kind)
	if h == nil {
		// Not reachable: the claim names only the registry's kinds.
		return w.fail(ctx, j, Event{JobID: j.ID, Kind: j.Kind, Attempt: j.Attempts}, jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "no handler for kind " + j.Kind})
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
		return nil
	}
	if err != nil && w.stopping.Load() && ctx.Err() != nil {
		return w.release(ctx, j, base)
	}
	if err != nil {
		if errors.Is(context.Cause(hctx), errTimeout) {
			err = fmt.Errorf("%w after %v: %w", errTimeout, h.opts.Timeout, err)
		}
		f := failureOf(err)
		if h.opts.Revision != "" {
			f.Diagnostic = "[" + h.opts.Revision + "] " + f.Diagnostic
		}
		return w.fail(ctx, j, base, f)
	}
	return w.succeed(ctx, j, res, base)
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

// succeed records success: grouped with others when there are no writes, in
// a transaction of its own with the writes otherwise.
func (w *Client) succeed(ctx context.Context, j jobs.Job, res Result, e Event) error {
	settle := context.WithoutCancel(ctx) // the outcome is recorded even as the worker stops
	var err error
	if res.WritesFunc == nil {
		err = w.completeGrouped(settle, jobs.Completion{Lease: j.Lease(), Result: res.Value})
		if err != nil && !isRefusal(err) {
			// The batch did not commit, or its answer was lost: once more on
			// its own. A success already recorded is then a quiet no-op.
			_, err = w.jobs.Complete(settle, j.Lease(), res.Value, nil)
		}
	} else {
		_, err = w.jobs.Complete(settle, j.Lease(), res.Value, func(tx pgx.Tx) error { return res.WritesFunc(settle, tx) })
		if err != nil && !isRefusal(err) {
			// The writes failed: the attempt failed, retryably.
			return w.fail(ctx, j, e, jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "completion writes: " + err.Error()})
		}
	}
	switch {
	case err == nil:
		e.Type, e.State = EventSucceeded, string(jobs.Succeeded)
	case isRefusal(err):
		e.Type, e.Err = EventLeaseLost, err
		w.log.WarnContext(ctx, "docket worker: success refused", "job", j.ID, "kind", j.Kind, "err", err)
	default:
		e.Type, e.Err = EventError, err
		w.emit(e)
		return fmt.Errorf("complete job %d: %w", j.ID, err)
	}
	w.emit(e)
	return nil
}

// isRefusal reports whether err is the job store refusing an outcome (the
// lease is no longer this worker's), as opposed to a failure to reach it.
func isRefusal(err error) bool {
	return errors.Is(err, db.ErrStaleClaim) || errors.Is(err, db.ErrTerminal) || errors.Is(err, db.ErrNotFound)
}

// fail records a failed attempt and, when the job is queued again for a
// retry, its next dispatch, in one transaction.
func (w *Client) fail(ctx context.Context, j jobs.Job, e Event, f jobs.Failure) error {
	after, err := w.settle(context.WithoutCancel(ctx), func(ctx context.Context, tx pgx.Tx) (jobs.Job, error) {
		return w.jobs.FailTx(ctx, tx, j.Lease(), f)
	})
	switch {
	case err == nil:
		e.Type, e.State, e.Err = EventFailed, string(after.State), errors.New(f.Diagnostic)
		w.log.InfoContext(ctx, "docket worker: attempt failed", "job", j.ID, "kind", j.Kind, "attempt", j.Attempts,
			"class", f.Class, "state", after.State, "diagnostic", f.Diagnostic)
	case isRefusal(err):
		e.Type, e.Err = EventLeaseLost, err
	default:
		e.Type, e.Err = EventError, err
		w.emit(e)
		return fmt.Errorf("fail job %d: %w", j.ID, err)
	}
	w.emit(e)
	return nil
}

// release gives back the lease of a handler cancelled by Stop: the job is
// queued again with its attempt counted, and dispatched anew, in one
// transaction.
func (w *Client) release(ctx context.Context, j jobs.Job, e Event) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ReleaseTimeout)
	defer cancel()
	after, err := w.settle(rctx, func(ctx context.Context, tx pgx.Tx) (jobs.Job, error) {
		return w.jobs.ReleaseTx(ctx, tx, j.Lease(), time.Time{}, "worker stopped while the handler ran")
	})
	switch {
	case err == nil:
		e.Type, e.State = EventReleased, string(after.State)
		w.log.InfoContext(ctx, "docket worker: released a lease on stop", "job", j.ID, "kind", j.Kind, "state", after.State)
	case isRefusal(err):
		e.Type, e.Err = EventLeaseLost, err
	default:
		e.Type, e.Err = EventError, err
		w.emit(e)
		return fmt.Errorf("release job %d: %w", j.ID, err)
	}
	w.emit(e)
	return nil
}

// settle moves a held job on with move and, when that queues it again,
// inserts its next dispatch, in one transaction: a job queued by the worker
// is never left without a dispatch.
func (w *Client) settle(ctx context.Context, move func(ctx context.Context, tx pgx.Tx) (jobs.Job, error)) (jobs.Job, error) {
	var after jobs.Job
	err := db.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
		var err error
		if after, err = move(ctx, tx); err != nil {
			return err
		}
		return dispatchTx(ctx, w.river, tx, w.cfg.Clock, after)
	})
	return after, err
}

var (
	errLeaseLost = errors.New("worker: the job's lease was lost")
	errTimeout   = errors.New("worker: handler timed out")
)
