package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/jobclaim"
	"github.com/docket-dev/docket/jobs"
)

// BatchKind is the River kind of a batch: the River job that claims a
// queue's due docket jobs, runs their handlers and settles them. Its args
// are {"queue": QUEUE}, and it runs in River queue QUEUE.
const BatchKind = "docket.batch"

// Batching shapes the worker's batches: each claims a queue's due jobs in
// one statement, runs their handlers at once, and records their successes
// in one statement, in the transaction that claims the next ones.
type Batching struct {
	// Max is the most jobs one batch holds at once: 1..1000. A queue runs
	// Queues[q]/Max batches at once (rounded up), sharing its Queues[q]
	// handlers. Left 0, each queue's batches hold half its handlers
	// (rounded up), at most 1000: a queue of 100 handlers runs in two
	// batches of 50, one of 1,000 in two of 500. Two batches beat one,
	// whose handlers wait while its transaction runs, and two large
	// batches beat many small ones: each statement's fixed cost is shared
	// by more jobs, and fewer claimers skip each other's locked rows
	// (docs/worker.md, "Performance").
	Max int
	// Window is how long a batch waits for more of its handlers to finish
	// before it records the successes it has, while others still run: 0 ..
	// 100 ms. Defaults to 2 ms. A negative value means none: each handler's
	// success is recorded as soon as the batch is free to, which adds no
	// wait at low load but under load commits more, smaller transactions.
	// A batch whose last claim drained its queue, notified while its
	// handlers run, also waits up to Window for one of them to finish, to
	// claim in that success's transaction.
	Window time.Duration
	// Idle is how long a batch with nothing to do waits for new work before
	// it ends: 10 ms .. 1 h. Defaults to 30 s. While one waits, a job that
	// falls due starts within a few milliseconds of its notification;
	// after, the next job waits for River to start a batch (about
	// FetchCooldown).
	Idle time.Duration
	// Rescan is how often a claim of the queue reads it from its head: 0 ..
	// 1 min. Defaults to 100 ms. A claim from the head reads through the
	// index entries of every job claimed since docket.jobs was last
	// vacuumed, which under a sustained backlog grow by thousands a second;
	// between head reads, a claim that follows a full claim begins where
	// that one began, in each project, stepping over only the entries after
	// it. A job that falls behind that position (of a higher priority than
	// the jobs being claimed, queued again, or whose enqueue committed after
	// later jobs were claimed) waits for the next head read: at most Rescan,
	// or until a claim finds fewer jobs past the positions than it asked
	// for, and reads the rest from the head at once. A negative value
	// means every claim reads from the head, each taking the first due jobs
	// (docs/worker.md, "Where a claim begins").
	Rescan time.Duration
}

func (b Batching) withDefaults() Batching {
	switch {
	case b.Window == 0:
		b.Window = 2 * time.Millisecond
	case b.Window < 0:
		b.Window = 0
	}
	switch {
	case b.Rescan == 0:
		b.Rescan = 100 * time.Millisecond
	case b.Rescan < 0:
		b.Rescan = 0
	}
	if b.Idle == 0 {
		b.Idle = 30 * time.Second
	}
	return b
}

// perQueue is the most jobs one batch of a queue of n handlers holds.
func (b Batching) perQueue(n int) int {
	if b.Max > 0 {
		return b.Max
	}
	return min(jobs.MaxClaimBatch, max(1, (n+1)/2))
}

// batchLifetime bounds how long one batch claims before it hands on to a
// new one, so no River job runs for ever (River rescues a job it thinks
// stuck) and a busy queue's batches move between processes.
const batchLifetime = 5 * time.Minute

// batchArgs are a batch's River args.
type batchArgs struct {
	Queue string `json:"queue"`
}

func (batchArgs) Kind() string { return BatchKind }

// batchWorker is River's worker for batches.
type batchWorker struct {
	river.WorkerDefaults[batchArgs]
	w *Client
}

// Work runs one batch of its queue until the queue has been idle for
// Batching.Idle, the batch's lifetime is over, or the worker stops. It
// returns an error to River only when it could not reach the database;
// every job it claimed is settled (or released) before it returns.
func (b *batchWorker) Work(ctx context.Context, rj *river.Job[batchArgs]) error {
	q := b.w.queueOf(rj.Args.Queue)
	if q == nil {
		return river.JobCancel(fmt.Errorf("worker does not serve queue %q", rj.Args.Queue))
	}
	b.w.batchBegan(ctx, rj.ID)
	defer b.w.alive.ended(rj.ID)
	return b.w.runBatch(ctx, q)
}

// queueState is what the worker's batches of one queue share in this
// process.
type queueState struct {
	name       string
	slots      chan struct{} // one per handler that may run at once
	batchMax   int           // the most jobs one batch of the queue holds
	maxBatches int

	mu         sync.Mutex
	running    int
	insertedAt time.Time                    // when this process last asked River for a batch not yet started
	wake       chan struct{}                // closed, and replaced, when work arrives
	from       map[string]jobclaim.Position // where the next claim begins, by project; nil: at the head
	headAt     time.Time                    // when a claim last read the queue from its head
}

// claimFrom is where a claim at now begins: nil, the head, when the last
// head read is rescan or more ago (and is then taken to be now).
func (q *queueState) claimFrom(now time.Time, rescan time.Duration) map[string]jobclaim.Position {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.from == nil || now.Sub(q.headAt) >= rescan {
		q.from, q.headAt = nil, now
		return nil
	}
	return q.from
}

// claimed records a claim that asked for asked jobs and took got: the next
// claim begins, in each project of got, at the first job this one took
// there (positions of other projects stay), unless this claim took fewer
// than it asked for, when the next reads from the head. Of two claims that
// ran together, the last to finish sets the positions: a position may move
// back, which costs a few index entries, never a job.
func (q *queueState) claimed(asked int, got []jobs.Job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(got) < asked {
		q.from = nil
		return
	}
	firsts := make(map[string]jobclaim.Position, 1)
	for _, j := range got {
		at := jobclaim.Position{Priority: j.Priority, AvailableAt: j.AvailableAt, ID: j.ID}
		if cur, ok := firsts[j.Project]; !ok || at.Before(cur) {
			firsts[j.Project] = at
		}
	}
	// A new map: claims in flight keep reading the one they were given.
	next := make(map[string]jobclaim.Position, len(q.from)+len(firsts))
	maps.Copy(next, q.from)
	maps.Copy(next, firsts)
	q.from = next
}

// signal wakes the batches waiting for work.
func (q *queueState) signal() {
	q.mu.Lock()
	close(q.wake)
	q.wake = make(chan struct{})
	q.mu.Unlock()
}

// woken is the channel the next signal closes.
func (q *queueState) woken() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wake
}

// outcome is a finished handler's report to its batch (or to RunJob).
type outcome struct {
	job     jobs.Job
	success *jobs.Completion // a success without writes, for the batch to record
	event   Event            // the success's event, to emit once recorded; else the event emitted
	until   time.Time        // when the success's lease expires: it is held until recorded or then
	attempt *attempt         // the success's telemetry, ended once recorded
	// err is why the attempt did not succeed, as the handler had it: its
	// error unchanged, a *panicError, its WritesFunc's error, or the
	// refusal of its completion record. Nil for a success, and for an
	// outcome the handler did not decide (a lost lease, an abandoned
	// success), which event.Err says.
	err error
}

// batch is one running batch's state.
type batch struct {
	w        *Client
	q        *queueState
	ctx      context.Context // River's job context: cancelled only by a hard stop
	inflight int
	done     chan outcome
	work     chan claimedJob             // to a runner idle between jobs; closed when the batch ends
	runners  sync.WaitGroup              // the batch's runners, which end with it
	pending  []outcome                   // successes not yet recorded
	lates    sync.WaitGroup              // successes being recorded late (goLate), which the batch outlives
	first    time.Time                   // when the oldest pending success arrived
	links    map[int64]trace.SpanContext // of the jobs claimed and not yet started, when the worker traces
}

// runBatch is a batch's loop: record what finished and claim what fits, in
// one transaction; run what it claimed; wait for handlers, work or the
// window; end when idle, old, or stopped, once nothing it holds is running.
func (w *Client) runBatch(ctx context.Context, q *queueState) error {
	q.mu.Lock()
	q.running++
	q.insertedAt = time.Time{}
	q.mu.Unlock()
	b := &batch{w: w, q: q, ctx: ctx, done: make(chan outcome, q.batchMax), work: make(chan claimedJob)}
	defer func() {
		close(b.work) // the batch returns with nothing running: its runners are idle, and end
		b.runners.Wait()
		b.lates.Wait()
	}()
	began, idleSince := time.Now(), time.Now()
	var failures int
	// drained: the batch's last claim took fewer jobs than it asked for, so
	// the queue held no more due jobs it could see; claiming again finds
	// nothing until work arrives (a signal since: prev closes), the poll
	// interval passes, or the batch commits successes anyway (the claim
	// rides along, and takes the jobs those successes made ready).
	drained := false
	var prev <-chan struct{}
	// claimAfter: a drained batch woken while its handlers run waits until
	// then (the window) for one to finish, so its claim rides with that
	// success's commit rather than taking a transaction of its own. (A
	// batch's own commits notify only the jobs its claim left: see
	// heldWakes.)
	var claimAfter time.Time
	running := true
	stopRunning := func() {
		if running {
			running = false
			q.mu.Lock()
			q.running--
			q.mu.Unlock()
		}
	}
	defer stopRunning()
	for {
		// Taken before the claim looks, so work that arrives after it looked
		// is never missed: its signal closes this channel.
		if prev != nil {
			select {
			case <-prev:
				if drained && b.inflight > 0 && w.cfg.Batch.Window > 0 {
					claimAfter = time.Now().Add(w.cfg.Batch.Window)
				}
				drained = false
			default:
			}
		}
		wake := q.woken()
		prev = wake
		b.drain()
		closing := w.quitting() || ctx.Err() != nil || time.Since(began) > batchLifetime
		free := 0
		if !closing {
			free = b.freeSlots()
		}
		window := !closing && len(b.pending) > 0 && b.inflight > 0 && w.cfg.Batch.Window > 0 &&
			time.Since(b.first) < w.cfg.Batch.Window && len(b.pending) < b.inflight
		// Claim when a quarter of the batch is free, or when nothing runs.
		commit := len(b.pending) > 0 && !window
		claim := free > 0 && (b.inflight == 0 || free >= max(1, q.batchMax/4)) && (!drained || commit) &&
			(commit || !time.Now().Before(claimAfter))
		if !claim {
			for range free {
				<-q.slots
			}
			free = 0
		}
		if commit || claim {
			// A drained batch claims only because it commits: its claim is
			// worth a round trip when the successes made jobs due.
			claimed, err := b.commit(free, drained)
			if err != nil {
				failures++
				w.emit(Event{Type: EventError, Err: err})
				if failures == 1 {
					w.log.WarnContext(ctx, "docket worker: a batch could not reach the database; holding its outcomes and trying again",
						"queue", q.name, "held", len(b.pending), "running", b.inflight, "err", err)
				}
				for _, j := range claimed { // a claim in doubt, read back and held
					b.start(j)
				}
				b.settleAlone()
				if failures >= 5 && b.inflight == 0 && len(b.pending) == 0 {
					return fmt.Errorf("batch of queue %s: %w", q.name, err)
				}
				b.pause(min(time.Duration(failures)*100*time.Millisecond, holdMaxRetry))
				continue
			}
			if failures > 0 {
				w.log.WarnContext(ctx, "docket worker: a batch reached the database again", "queue", q.name, "failed_tries", failures)
			}
			failures = 0
			if claim {
				drained, claimAfter = len(claimed) < free, time.Time{}
			}
			if len(claimed) > 0 {
				idleSince = time.Now()
				if len(claimed) == free {
					w.moreBatches(q) // the queue may hold more than this batch can take
				}
				for _, j := range claimed {
					b.start(j)
				}
				continue
			}
		}
		if b.inflight == 0 && len(b.pending) == 0 {
			if closing {
				if !w.quitting() && ctx.Err() == nil {
					stopRunning()
					w.moreBatches(q) // hand on to a fresh batch
				}
				return nil
			}
			if time.Since(idleSince) >= w.cfg.Batch.Idle {
				stopRunning()
				select {
				case <-wake: // work arrived as this batch gave up: hand it on
					w.moreBatches(q)
				default:
				}
				return nil
			}
		}
		if b.wait(window, idleSince, claimAfter, wake) {
			drained = false // the poll's floor: look again
		}
	}
}

// freeSlots takes, without waiting, as many handler slots as the batch may
// fill now and returns how many it took.
func (b *batch) freeSlots() int {
	n := 0
	for b.inflight+n < b.q.batchMax {
		select {
		case b.q.slots <- struct{}{}:
			n++
			continue
		default:
		}
		break
	}
	return n
}

// commit records the pending successes and claims up to free jobs, in one
// transaction: one commit for both. A claim riding along (the batch found
// its queue drained) is made only when the successes made jobs due
// (docket.job_wake_pending: wake-ups held for the claim); any other job
// made due since the batch drained comes with a wake-up of its own. It
// gives back the slots it took but did not fill. When the commit's outcome
// is in doubt (the connection was lost at COMMIT), the jobs it claimed are
// read back: those held under its tokens are the batch's, and run; the
// successes stay pending, to be recorded again (a quiet no-op when they
// were).
func (b *batch) commit(free int, rideAlong bool) ([]jobs.Job, error) {
	w := b.w
	pending := b.pending
	completions := completionsOf(pending)
	var (
		refusals   []error
		claimed    []jobs.Job
		committing bool // the transaction's work is done: an error now is the commit's
		claimRan   bool // the claim's statement ran
	)
	// The outcomes are recorded even as the worker stops.
	ctx := context.WithoutCancel(b.ctx)
	var begin db.Beginner = w.pool
	if free > 0 {
		// The jobs the successes make due are most often the claim's: the
		// transaction holds its wake-ups, and the claim notifies only
		// those it left (job_wake_release, sql/definitions/jobs.sql).
		begin = heldWakes{w.pool}
	}
	err := db.WithTx(ctx, begin, func(tx pgx.Tx) error {
		var err error
		if len(completions) > 0 {
			if refusals, err = w.jobs.CompleteManyTx(ctx, tx, completions); err != nil {
				return err
			}
		}
		if free > 0 {
			// The claim under a savepoint: when Stop began while it ran
			// (and may have released jobs it would take again), it is
			// undone and the successes still commit. Otherwise the commit
			// keeps it: no RELEASE, one round trip fewer. A claim riding
			// along asks, in the savepoint's round trip, whether the
			// successes made any job due; when none, it is not made.
			due := true
			sp := &pgx.Batch{}
			sp.Queue("SAVEPOINT docket_claim")
			if rideAlong && len(completions) > 0 {
				sp.Queue("SELECT docket.job_wake_pending()").QueryRow(func(r pgx.Row) error { return r.Scan(&due) })
			}
			if err := tx.SendBatch(ctx, sp).Close(); err != nil {
				return err
			}
			if !due {
				committing = true
				return nil
			}
			claimRan = true
			from := b.q.claimFrom(time.Now(), w.cfg.Batch.Rescan)
			if claimed, err = w.store.ClaimQueueTx(ctx, tx, b.q.name, free, w.decoders, w.leases, from); err != nil {
				return err
			}
			if from != nil && len(claimed) < free {
				// Past the positions the queue is drained: what is behind
				// them, read from the head, before the batch waits as a
				// drained one does.
				var more []jobs.Job
				if more, err = w.store.ClaimQueueTx(ctx, tx, b.q.name, free-len(claimed), w.decoders, w.leases, nil); err != nil {
					return err
				}
				claimed = append(claimed, more...)
			}
			b.q.claimed(free, claimed)
			if b.links, err = w.linksOf(ctx, tx, claimed); err != nil {
				return err
			}
			if w.testHookClaimed != nil {
				w.testHookClaimed(b.q.name, len(claimed))
			}
			if w.quitting() {
				claimed = nil
				// The rollback undoes the claim's notifications too: the
				// jobs the successes made due are notified now.
				if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT docket_claim; SELECT docket.job_wake_flush()"); err != nil {
					return err
				}
			}
		}
		committing = true
		return nil
	})
	if err != nil {
		if committing && !definite(err) && len(claimed) > 0 {
			claimed = b.heldClaims(claimed)
		} else {
			claimed = nil // rolled back with the transaction
		}
	}
	for range free - len(claimed) {
		<-b.q.slots
	}
	if err != nil {
		return claimed, err
	}
	if claimRan && w.testHookClaim != nil {
		w.testHookClaim(b.q.name, free, len(claimed))
	}
	for i, p := range pending {
		if errors.Is(refusals[i], db.ErrStaleClaim) && b.lateable(p) {
			b.goLate(p) // its lease expired while it was held
			continue
		}
		w.settled(p, refusals[i])
	}
	b.pending = nil
	return claimed, nil
}

// heldWakes begins a transaction that holds its wake-ups until its claim
// (docket.wake): one round trip, as a plain BEGIN is.
type heldWakes struct{ pool *pgxpool.Pool }

func (h heldWakes) Begin(ctx context.Context) (pgx.Tx, error) {
	return h.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL docket.wake = 'held'"})
}

// completionsOf is what recording the successes pending takes.
func completionsOf(pending []outcome) []jobs.Completion {
	out := make([]jobs.Completion, len(pending))
	for i, p := range pending {
		out[i] = *p.success
	}
	return out
}

// heldClaims reads back jobs whose claim's commit is in doubt, in one read,
// and returns those the claim holds: claimed under the token it was given.
// It tries while their leases last; jobs it cannot read are not run (their
// leases expire and the sweep moves them on, as after a crash).
func (b *batch) heldClaims(claimed []jobs.Job) []jobs.Job {
	w := b.w
	ids := make([]int64, len(claimed))
	until := claimed[0].LeaseExpiresAt
	for i, j := range claimed {
		ids[i] = j.ID
		until = minTime(until, j.LeaseExpiresAt)
	}
	var got []jobs.Job
	_ = w.hold(b.ctx, claimed[0], until, heldOutcome{what: "claim read back", write: func(tctx context.Context) error {
		var err error
		got, err = w.jobs.GetMany(tctx, ids)
		return err
	}})
	// A claim is its lease generation, counted once a claim, and its
	// holder: the token is not read back, docket stores only its digest.
	type claim struct {
		generation int64
		holder     access.Actor
	}
	stored := make(map[int64]claim, len(got))
	for _, g := range got {
		if g.State == jobs.Claimed {
			stored[g.ID] = claim{g.LeaseGeneration, g.ClaimedBy}
		}
	}
	held := claimed[:0]
	for _, j := range claimed {
		if c, ok := stored[j.ID]; ok && c == (claim{j.LeaseGeneration, j.ClaimedBy}) {
			held = append(held, j)
		}
	}
	w.log.WarnContext(b.ctx, "docket worker: a claim's commit was in doubt; read its jobs back", "queue", b.q.name,
		"claimed", len(claimed), "held", len(held))
	return held
}

// settleAlone records the pending successes in a transaction of their own,
// after the batch's transaction failed (a success already recorded is a
// quiet no-op): in one statement, or each alone when something in the batch
// refuses the whole of it (a result over the bound, say), so the others are
// recorded. Those it cannot record stay pending, held for the next try,
// until their leases expire or the worker stops hard.
func (b *batch) settleAlone() {
	if len(b.pending) == 0 {
		return
	}
	w := b.w
	ctx := context.WithoutCancel(b.ctx)
	errs := make([]error, len(b.pending)) // per success: nil, a refusal, or why it is not recorded yet
	refusals, err := w.jobs.CompleteMany(ctx, completionsOf(b.pending))
	switch {
	case err == nil:
		copy(errs, refusals)
	case permanent(err):
		for i, p := range b.pending {
			_, errs[i] = w.jobs.CompleteWith(ctx, *p.success, nil)
		}
	default:
		for i := range errs {
			errs[i] = err
		}
	}
	held := b.pending[:0]
	var abandoned []int64
	for i, p := range b.pending {
		switch {
		case errors.Is(errs[i], db.ErrStaleClaim) && b.lateable(p):
			b.goLate(p)
		case errs[i] == nil || permanent(errs[i]):
			w.settled(p, errs[i])
		case b.lateable(p):
			b.goLate(p)
		case w.gone(b.ctx, p.until, false) != "":
			w.held.abandon(p.job, "success", p.until)
			p.event.Type, p.event.Err = EventError, errors.Join(errAbandoned, errs[i])
			p.attempt.end(p.event, "")
			w.emit(p.event)
			abandoned = append(abandoned, p.job.ID)
		default:
			held = append(held, p)
		}
	}
	if len(abandoned) > 0 {
		w.log.WarnContext(b.ctx, "docket worker: abandoned successes the database did not take before their leases expired",
			"queue", b.q.name, "jobs", len(abandoned), "first", abandoned[:min(len(abandoned), 10)], "next", afterGone)
	}
	b.pending = held
}

// lateable reports whether pending success p is to be recorded late: its
// lease has expired by the worker's clock, the worker has not stopped hard,
// and the success has a late form (see heldSuccess).
func (b *batch) lateable(p outcome) bool {
	return b.ctx.Err() == nil && b.w.cfg.LateOutcomes >= 0 && p.success.Record == nil && b.w.expired(p.until)
}

// goLate hands pending success p, whose lease expired before the batch
// could record it, to a hold of its own (see hold), which records it late
// once the lease sweep has made its job uncertain, while the batch goes on.
// The batch ends only once it is settled.
func (b *batch) goLate(p outcome) {
	w := b.w
	b.lates.Add(1)
	go func() {
		defer b.lates.Done()
		err := w.hold(b.ctx, p.job, p.until, w.heldSuccess(*p.success))
		if err == nil || permanent(err) {
			w.settled(p, err)
			return
		}
		p.event.Type, p.event.Err = EventError, err // abandoned: hold logged it
		p.attempt.end(p.event, "")
		w.emit(p.event)
	}()
}

// settled emits the event of a recorded success, or of its refusal, and
// returns it. A success whose completion record storage refused
// ([db.ErrInvalidArgument]: a record its rule refuses, or none for a job
// that requests an output) is the handler's bug: its attempt fails,
// retryably, with storage's reason, while its lease lasts.
func (w *Client) settled(p outcome, refusal error) Event {
	e := p.event
	if recordRefused(refusal) {
		ctx := context.WithValue(context.Background(), attemptKey{}, p.attempt)
		return w.fail(ctx, p.job, e, jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "completion record: " + refusal.Error(),
			Spent: p.success.Spent}, p.until)
	}
	if refusal != nil {
		e.Type, e.Err = EventLeaseLost, refusal
		w.log.WarnContext(context.Background(), "docket worker: success refused", "job", p.job.ID, "kind", p.job.Kind, "err", refusal)
	} else {
		e.Type, e.State = EventSucceeded, string(jobs.Succeeded)
	}
	p.attempt.end(e, "")
	w.emit(e)
	return e
}

// recordRefused reports whether err, an element's refusal by the completion
// of a batch, is its completion record's.
func recordRefused(err error) bool {
	return errors.Is(err, db.ErrInvalidArgument)
}

// start runs claimed job j's handler on one of the batch's runners: one idle
// between jobs, or a new one.
func (b *batch) start(j jobs.Job) {
	b.inflight++
	c := claimedJob{job: j, link: b.links[j.ID]}
	select {
	case b.work <- c: // a runner between jobs takes it
	default:
		b.runners.Add(1)
		go b.runner(c)
	}
}

// claimedJob is a job a batch hands to a runner, with the trace context of
// its claim.
type claimedJob struct {
	job  jobs.Job
	link trace.SpanContext
}

// runner runs handlers for its batch, one job at a time, until the batch
// ends. A batch keeps its runners between jobs rather than starting a
// goroutine per job: a new goroutine's stack is grown by copying as its
// handler's calls deepen, again for every job, which cost the worker about
// a tenth of its CPU in a burn-down of no-op jobs.
func (b *batch) runner(c claimedJob) {
	defer b.runners.Done()
	for {
		o := b.w.run(b.ctx, c.job, c.link)
		<-b.q.slots
		b.done <- o
		var ok bool
		if c, ok = <-b.work; !ok {
			return
		}
	}
}

// drain takes the outcomes of handlers that have finished, without waiting.
func (b *batch) drain() {
	for {
		select {
		case o := <-b.done:
			b.finished(o)
		default:
			return
		}
	}
}

func (b *batch) finished(o outcome) {
	b.inflight--
	if o.success != nil {
		if len(b.pending) == 0 {
			b.first = time.Now()
		}
		b.pending = append(b.pending, o)
	}
}

// wait blocks until a handler finishes, work arrives, the window closes,
// the poll interval passes or the worker stops. It reports whether its
// timer fired.
func (b *batch) wait(window bool, idleSince, claimAfter time.Time, wake <-chan struct{}) bool {
	w := b.w
	d := w.cfg.PollInterval
	if !claimAfter.IsZero() {
		d = min(d, time.Until(claimAfter))
	}
	if window {
		d = min(d, w.cfg.Batch.Window-time.Since(b.first))
	} else if b.inflight == 0 {
		d = min(d, w.cfg.Batch.Idle-time.Since(idleSince))
	}
	if b.ctx.Err() != nil || w.quitting() {
		// Stopping: only the handlers still running matter.
		if b.inflight > 0 {
			b.finished(<-b.done)
		}
		return false
	}
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case o := <-b.done:
		b.finished(o)
	case <-wake:
	case <-t.C:
		return true
	case <-w.quit:
	case <-b.ctx.Done():
	}
	return false
}

// pause waits d, or less when a handler finishes or the worker stops.
func (b *batch) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case o := <-b.done:
		b.finished(o)
	case <-t.C:
	case <-b.w.quit:
	}
}

// queueOf returns the state of served queue name, or nil.
func (w *Client) queueOf(name string) *queueState { return w.queueStates[name] }

// moreBatches asks River for another batch of q when fewer than its maximum
// run here and none asked for is still waiting to start (a request not
// started within a second, perhaps taken by another process, is made
// again).
func (w *Client) moreBatches(q *queueState) {
	if w.quitting() {
		return
	}
	q.mu.Lock()
	if q.running >= q.maxBatches || (!q.insertedAt.IsZero() && time.Since(q.insertedAt) < time.Second) {
		q.mu.Unlock()
		return
	}
	q.insertedAt = time.Now()
	q.mu.Unlock()
	_, err := w.river.Insert(context.Background(), batchArgs{Queue: q.name},
		&river.InsertOpts{Queue: q.name, MaxAttempts: batchMaxAttempts})
	if err != nil && !errors.Is(err, context.Canceled) {
		q.mu.Lock()
		q.insertedAt = time.Time{}
		q.mu.Unlock()
		w.emit(Event{Type: EventError, Err: err})
		w.log.WarnContext(context.Background(), "docket worker: starting a batch failed", "queue", q.name, "err", err)
	}
}

// batchMaxAttempts bounds River's retries of one batch: they cover
// infrastructure failures only (the database unreachable, say); docket's own
// attempts are the jobs'.
const batchMaxAttempts = 25
