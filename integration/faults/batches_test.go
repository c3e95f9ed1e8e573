//go:build unix

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/worker"
)

// The batch scenarios: a batch of one three-step plan (read → price →
// settle, every step repeatable) over N items, fed from a deterministic
// source in windowed passes, as a service feeds one: a pass admits at most a
// window of new items (batches.Client.Run with a maximum), and the next
// begins once no more than a window is in flight. Each item is reserved with
// its run in the transaction that admits it; the end of its run settles it
// (docket.runs_settle_batch_items, under the batch row's lock) and moves the
// cursor on.
//
// batch-kill SIGKILLs the worker mid-batch and starts another, and crashes
// the feeder: a pass is abandoned, its context cancelled while a page of new
// items is being admitted, and the feeding resumes from the cursor with a
// fresh client on a pool of its own, opening the batch again by name.
// batch-100k (long form only) runs 100,000 items through two workers with no
// fault, for the throughput and the cost of reading the census.
//
// Once the batch has completed, they check that:
//
//   - the census is exact: items = N = succeeded, none failed, quarantined
//     or in flight, the source read to its end, the cursor and the last key
//     at item N; and while it ran, every sample of the batch row agreed, in
//     one snapshot, with its items counted and its cursor computed from them
//     (the contiguous settled prefix);
//   - every item has exactly one run, and there are N runs in all: no item
//     reserved twice, none skipped (every key 1..N admitted);
//   - every run succeeded with its item's output, and each step of each run
//     has one job and one docket.run_steps row naming it;
//   - the price steps, which write in their completion, wrote exactly once,
//     of their last attempt, and no other job wrote;
//   - every job's history verifies.

// batchPlan is the plan every item runs: read its number, price it (the
// completion writes), settle it (the terminal, whose result is the run's
// output).
func batchPlan() plans.Plan {
	return plans.Plan{Steps: []plans.Step{
		{ID: "read", Kind: batchReadKind.Name(), Repeatable: true,
			Args: []plans.Arg{{Name: "n", Source: plans.Input("n")}}},
		{ID: "price", Kind: batchPriceKind.Name(), After: []string{"read"}, Repeatable: true,
			Args: []plans.Arg{
				{Name: "n", Source: plans.StepPath("read", "n")},
				{Name: "rate", Source: plans.StepPath("read", "rate")},
				{Name: "writes", Source: plans.Const(true)},
			}},
		{ID: "settle", Kind: batchSettleKind.Name(), After: []string{"price"}, Terminal: true, Repeatable: true,
			Args: []plans.Arg{
				{Name: "n", Source: plans.StepPath("read", "n")},
				{Name: "amount", Source: plans.StepResult("price")},
			}},
	}}
}

// batchPlanSteps is how many steps, so jobs, an item's run has.
const batchPlanSteps = 3

// batchRate is what read returns as the rate, and so each item's amount is
// its number times it.
const batchRate = 7

// The batch plan's step kinds.
var (
	batchReadKind   = jobs.MustKind[batchRead]("faults.batch.read", 1)
	batchPriceKind  = jobs.MustKind[batchPrice]("faults.batch.price", 1)
	batchSettleKind = jobs.MustKind[batchSettle]("faults.batch.settle", 1)
)

type batchRead struct {
	N int `json:"n"`
}

type batchPrice struct {
	N      int  `json:"n"`
	Rate   int  `json:"rate"`
	Writes bool `json:"writes"`
}

type batchSettle struct {
	N      int `json:"n"`
	Amount int `json:"amount"`
}

// batchWork is how long a step of item n works: 2-10 ms.
func batchWork(n int) time.Duration { return time.Duration(2+n%9) * time.Millisecond }

// handleBatchSteps registers the batch plan's step handlers in reg.
func (h *handler) handleBatchSteps(reg *worker.Registry) error {
	opts := worker.HandlerOptions{Lease: lease}
	if err := worker.HandleResult(reg, batchReadKind, h.batchRead, opts); err != nil {
		return err
	}
	if err := worker.HandleResult(reg, batchPriceKind, h.batchPrice, opts); err != nil {
		return err
	}
	return worker.HandleResult(reg, batchSettleKind, h.batchSettle, opts)
}

func (h *handler) batchRead(ctx context.Context, j *jobs.Typed[batchRead]) (worker.Result, error) {
	if err := h.planStep(ctx, j.Job, batchWork(j.Args.N)); err != nil {
		return worker.Result{}, err
	}
	return worker.Result{Value: json.RawMessage(fmt.Sprintf(`{"n": %d, "rate": %d}`, j.Args.N, batchRate))}, nil
}

// batchPrice returns the amount, and adds its faults.inside row in the
// completion transaction.
func (h *handler) batchPrice(ctx context.Context, j *jobs.Typed[batchPrice]) (worker.Result, error) {
	if err := h.planStep(ctx, j.Job, batchWork(j.Args.N)); err != nil {
		return worker.Result{}, err
	}
	res := worker.Result{Value: json.RawMessage(fmt.Sprint(j.Args.N * j.Args.Rate))}
	if j.Args.Writes {
		res.WritesFunc = func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO faults.inside (job_id, attempt, worker) VALUES ($1, $2, $3)", j.ID, j.Attempts, h.name)
			return err
		}
	}
	return res, nil
}

func (h *handler) batchSettle(ctx context.Context, j *jobs.Typed[batchSettle]) (worker.Result, error) {
	if err := h.planStep(ctx, j.Job, batchWork(j.Args.N)); err != nil {
		return worker.Result{}, err
	}
	return worker.Result{Value: json.RawMessage(fmt.Sprintf(`{"n": %d, "amount": %d}`, j.Args.N, j.Args.Amount))}, nil
}

// itemKey is item n's key: zero-padded, so that byte order is numeric order.
func itemKey(n int) string { return fmt.Sprintf("item%07d", n) }

// itemSource is the deterministic source of items 1..n, each trusted, with
// input {"n": i}. It counts the items it served, and times its pages: from
// the one call to the next in a pass is the page's admission (in one
// transaction, under the batch row's lock) and a read of the report.
type itemSource struct {
	n      int
	mu     sync.Mutex
	served int
	top    int       // the greatest item served
	called time.Time // the last call in this pass; zero before the first
	fresh  bool      // whether the last call served new items
	// The pages' admissions timed: those with new items, and those only
	// offering admitted items again.
	newPages, oldPages pageTimes
}

// pageTimes are the times of some pages' admissions.
type pageTimes struct {
	n              int
	total, slowest time.Duration
}

func (p pageTimes) String() string {
	if p.n == 0 {
		return "none"
	}
	return fmt.Sprintf("%d, mean %s, slowest %s", p.n, ms(p.total/time.Duration(p.n)), ms(p.slowest))
}

func (s *itemSource) Page(_ context.Context, after string, limit int) ([]batches.Item, bool, error) {
	from := 1
	if after != "" {
		if _, err := fmt.Sscanf(after, "item%07d", &from); err != nil {
			return nil, false, fmt.Errorf("key %q is not an item's: %w", after, err)
		}
		from++
	}
	var out []batches.Item
	for i := from; i <= s.n && len(out) < limit; i++ {
		out = append(out, batches.Item{Key: itemKey(i), Input: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)), Trusted: true})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if !s.called.IsZero() {
		p := &s.oldPages
		if s.fresh {
			p = &s.newPages
		}
		d := now.Sub(s.called)
		p.n, p.total, p.slowest = p.n+1, p.total+d, max(p.slowest, d)
	}
	s.called, s.served = now, s.served+len(out)
	s.fresh = from+len(out)-1 > s.top
	s.top = max(s.top, from+len(out)-1)
	return out, from+len(out) > s.n, nil
}

// pass says a new pass begins: the last page of the one before was timed
// by the report the pass returned, not here.
func (s *itemSource) pass() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.called = time.Time{}
}

func (s *itemSource) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served
}

// crashing is the source of a pass the feeder abandons: once it has served
// its second page holding new items (keys after last, the batch's last key
// when the pass began), it cancels the pass a moment later, while that page
// is being admitted.
type crashing struct {
	batches.Source
	last   string
	delay  time.Duration
	cancel context.CancelFunc

	newPages     int
	first, cut   string // the keys the page cut begins and ends with
	cutScheduled bool
}

func (c *crashing) Page(ctx context.Context, after string, limit int) ([]batches.Item, bool, error) {
	items, end, err := c.Source.Page(ctx, after, limit)
	if err != nil || len(items) == 0 || items[len(items)-1].Key <= c.last || c.cutScheduled {
		return items, end, err
	}
	if c.newPages++; c.newPages == 2 {
		c.first, c.cut, c.cutScheduled = items[0].Key, items[len(items)-1].Key, true
		time.AfterFunc(c.delay, c.cancel)
	}
	return items, end, err
}

// feeding is how a scenario feeds its batch.
type feeding struct {
	items  int // N
	window int // the most new items a pass admits
	page   int // items a page
	// crashes are the passes (from 1) the feeder abandons mid-page, each
	// followed by a resume with a fresh client.
	crashes []int
	// timeAt are the numbers of items admitted at which the census read is
	// timed: the first pass to reach each is followed by censusReads reads.
	timeAt []int
}

// censusReads is how many reports a timing of the census reads.
const censusReads = 300

// censusTiming is the mean and the slowest of censusReads reads of the
// report, at a number of items admitted.
type censusTiming struct {
	items, inFlight int
	mean, slowest   time.Duration
}

func (c censusTiming) String() string {
	return fmt.Sprintf("census read (batches.Client.Get) at %d items admitted (%d in flight): mean %s, slowest %s over %d reads",
		c.items, c.inFlight, us(c.mean), us(c.slowest), censusReads)
}

// us shows d in microseconds' precision.
func us(d time.Duration) string { return d.Round(time.Microsecond).String() }

// timeCensus reads batch id's report censusReads times with bc.
func timeCensus(ctx context.Context, bc *batches.Client, id int64) (censusTiming, error) {
	var c censusTiming
	var total time.Duration
	for range censusReads {
		began := time.Now()
		r, err := bc.Get(ctx, id)
		took := time.Since(began)
		if err != nil {
			return c, err
		}
		total += took
		c.slowest = max(c.slowest, took)
		c.items, c.inFlight = r.Items, r.InFlight
	}
	c.mean = total / censusReads
	return c, nil
}

// feeder feeds a batch in a goroutine of its own: it reports through its
// fields once done is closed.
type feeder struct {
	url  string // app's login
	name string // the batch's
	plan plans.Plan
	id   int64
	how  feeding
	src  *itemSource

	done chan struct{}
	// What it did, once done.
	err     error
	began   time.Time // the first pass began
	fed     time.Time // the source was read to its end
	passes  int
	clients int // the clients it fed with: one, and one more after each crash
	retries []string
	crashed []string
	timings []censusTiming
}

// feederRetries is how many passes in a row may fail, other than the ones
// abandoned on purpose, before the feeder gives up.
const feederRetries = 20

// start starts the feeder in a goroutine of its own.
func (f *feeder) start(ctx context.Context) {
	f.done = make(chan struct{})
	go func() {
		defer close(f.done)
		f.err = f.feed(ctx)
	}()
}

// failed returns the feeder's error once it has ended with one.
func (f *feeder) failed() error {
	select {
	case <-f.done:
		return f.err
	default:
		return nil
	}
}

// client opens a pool and a client of the feeder's own, and opens the batch
// by name: a feeder starting afresh, as after a crash.
func (f *feeder) client(ctx context.Context) (*pgxpool.Pool, *batches.Client, error) {
	pool, err := db.Open(ctx, f.url)
	if err != nil {
		return nil, nil, err
	}
	bc, err := batches.NewClient(pool, batches.Config{Actor: app})
	if err == nil {
		var b batches.Report
		if b, err = bc.Open(ctx, project, f.name, f.plan); err == nil && b.ID != f.id {
			err = fmt.Errorf("opening batch %s again returned batch %d; it is %d", f.name, b.ID, f.id)
		}
	}
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	f.clients++
	return pool, bc, nil
}

// feed runs passes until the source has been read to its end.
func (f *feeder) feed(ctx context.Context) error {
	pool, bc, err := f.client(ctx)
	if err != nil {
		return err
	}
	defer func() { pool.Close() }()
	f.began = time.Now()
	failing := 0
	timed := 0
	for pass := 1; ; pass++ {
		f.passes = pass
		f.src.pass()
		if len(f.crashed) < len(f.how.crashes) && pass == f.how.crashes[len(f.crashed)] {
			if err := f.crash(ctx, bc, pass); err != nil {
				return err
			}
			pool.Close()
			if pool, bc, err = f.client(ctx); err != nil {
				return err
			}
			continue
		}
		r, err := bc.Run(ctx, f.id, f.src, f.how.page, f.how.window)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			f.retries = append(f.retries, fmt.Sprintf("pass %d: %v", pass, err))
			if failing++; failing > feederRetries {
				return fmt.Errorf("%d passes in a row failed, the last: %w", failing, err)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		failing = 0
		for timed < len(f.how.timeAt) && r.Items >= f.how.timeAt[timed] {
			c, err := timeCensus(ctx, bc, f.id)
			if err != nil {
				return err
			}
			f.timings = append(f.timings, c)
			timed++
		}
		if r.SourceDone {
			f.fed = time.Now()
			return nil
		}
		// The next window once no more than a window is in flight.
		deadline := time.Now().Add(runLimit)
		for r.InFlight > f.how.window {
			if time.Now().After(deadline) {
				return fmt.Errorf("pass %d: %d items still in flight after %v", pass, r.InFlight, runLimit)
			}
			time.Sleep(poll)
			if r, err = bc.Get(ctx, f.id); err != nil {
				return err
			}
		}
	}
}

// crash runs pass as one the feeder abandons: cancelled while it admits its
// second page of new items. It notes what the batch kept of the pass.
func (f *feeder) crash(ctx context.Context, bc *batches.Client, pass int) error {
	before, err := bc.Get(ctx, f.id)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	src := &crashing{Source: f.src, last: before.LastKey, delay: 5 * time.Millisecond, cancel: cancel}
	_, runErr := bc.Run(pctx, f.id, src, f.how.page, f.how.window)
	cancel()
	after, err := bc.Get(ctx, f.id)
	if err != nil {
		return err
	}
	var kept string
	switch {
	case !src.cutScheduled:
		kept = "it ended before a second page of new items"
	case after.LastKey == src.cut:
		kept = fmt.Sprintf("the page %s..%s in flight at the cut had committed", src.first, src.cut)
	case after.LastKey < src.first:
		kept = fmt.Sprintf("the page %s..%s in flight at the cut was rolled back", src.first, src.cut)
	default:
		return fmt.Errorf("pass %d abandoned: the batch's last key is %s, neither before nor the end of the page cut (%s..%s)",
			pass, after.LastKey, src.first, src.cut)
	}
	f.crashed = append(f.crashed, fmt.Sprintf("pass %d abandoned (%v), %d new items of it committed before the cut; %s; resumed from cursor %s with a fresh client",
		pass, runErr, after.Items-before.Items, kept, after.Cursor))
	return nil
}

// The batch scenarios' checks, as a failure names them.
const (
	checkCensus    = "the census is exact"
	checkItemsOnce = "every item has exactly one run"
	checkFeeder    = "the feeder fed the batch"
)

// batchSize is how many items the batch-kill scenario feeds in form f.
func batchSize(f form) int {
	if f.long {
		return 5000
	}
	return 500
}

// batchKill runs the batch-kill scenario into res.
func batchKill(t *testing.T, f form, res *result) {
	how := feeding{items: batchSize(f), window: 100, page: 50, crashes: []int{3}}
	kills := []float64{0.25}
	if f.long {
		how.crashes, kills = []int{10, 30}, []float64{0.25, 0.6}
	}
	playBatch(t, f, res, how, 1, kills)
}

// batchBig is how many items the batch-100k scenario feeds.
const batchBig = 100_000

// batch100k runs the batch-100k scenario into res: long form only.
func batch100k(t *testing.T, f form, res *result) {
	if !f.long {
		t.Skipf("batch-100k runs %d items for many minutes: long form only (-docket.faults.long)", batchBig)
	}
	how := feeding{items: batchBig, window: 1000, page: 250, timeAt: []int{1000, batchBig}}
	playBatch(t, f, res, how, 2, nil)
}

// feedLimit bounds the wait for the feeder to read a source of n items to
// its end: 20 items a second at the least, and runLimit more.
func feedLimit(n int) time.Duration { return runLimit + time.Duration(n/20)*time.Second }

// playBatch opens a batch of batchPlan, starts workers worker processes and
// feeds the batch as how says, SIGKILLing the newest worker and starting
// another once each share of kills of the items has succeeded; once the
// batch has completed it checks it and reports into res.
func playBatch(t *testing.T, f form, res *result, how feeding, workers int, kills []float64) {
	n := how.items
	res.jobs = n * batchPlanSteps
	r := newRig(t)
	ctx := t.Context()
	// The rig grants job.create and job.claim; a batch needs these too.
	env := testkit.Env{Pool: r.owner, Clock: db.NewFakeClock(time.Now()), Admin: ana}
	env.Allow(t, testkit.Grants(app, project, access.BatchRun, access.PlanRun)...)
	monitor, err := batches.NewClient(r.login.Pool, batches.Config{Actor: app})
	require.NoError(t, err)
	name := "settlement-" + res.name
	b, err := monitor.Open(ctx, project, name, batchPlan())
	require.NoError(t, err)

	for range workers {
		r.startWorker()
	}
	r.cleared = time.Now()
	// Both count every item or job: the bigger the batch, the rarer.
	watch := &censusWatch{r: r, id: b.ID, every: 250 * time.Millisecond}
	if n > 10_000 {
		watch.every = 10 * time.Second
	}
	fd := &feeder{url: r.login.URL, name: name, plan: batchPlan(), id: b.ID, how: how, src: &itemSource{n: n}}
	fd.start(ctx)

	var spans []span
	for i, share := range kills {
		r.waitBatch(monitor, watch, fd, runLimit, fmt.Sprintf("%.0f%% of the items to succeed", share*100),
			func(b batches.Report) bool { return b.Succeeded >= int(share*float64(n)) })
		s := span{since: r.cleared, began: time.Now()}
		in := killWorker(r, i, f)
		s.cleared, s.effective = time.Now(), in.effective
		s.what = fmt.Sprintf("fault %d at %.0f%% of the items, %s", i+1, share*100, in.what)
		spans = append(spans, s)
		r.cleared = s.cleared
	}
	r.waitBatch(monitor, watch, fd, feedLimit(n), "the source to be read to its end",
		func(b batches.Report) bool { return b.SourceDone })
	<-fd.done
	if fd.err != nil {
		r.fail(checkFeeder, "the feeder failed: %v (passes %d, failed passes %v)", fd.err, fd.passes, fd.retries)
		t.FailNow()
	}
	final := r.waitBatch(monitor, watch, fd, settleLimit, "the batch to complete",
		func(b batches.Report) bool { return b.Status == batches.Completed })
	completed := time.Now()
	if final.FinishedAt != nil {
		completed = *final.FinishedAt
	}
	var quiet censusTiming
	if len(how.timeAt) > 0 {
		quiet, err = timeCensus(ctx, monitor, b.ID)
		require.NoError(t, err)
	}
	r.settle()
	for _, c := range r.children {
		select {
		case <-c.Done():
		default:
			c.Terminate(stopBound)
		}
	}
	watch.sample()

	checked := time.Now()
	v := r.check(startedAny(r.children))
	v.wrongInside = r.insideByPayload(ctx)
	res.verdict = v
	successes := r.successes()
	for _, s := range spans {
		res.recoveries = append(res.recoveries, measure(s, successes))
	}
	res.events, res.warns = tally(r.children)
	for _, c := range r.children {
		if c.Races() > 0 {
			r.fail(checkRaces, "worker %s: the race detector reported %d data races:\n%s", c.Name, c.Races(), c.StderrTail())
		}
	}
	r.judge(v, res.jobs, false)
	took := completed.Sub(fd.began)
	res.notes = append(res.notes,
		fmt.Sprintf("throughput: %d items, workers %d, %s from the first pass to the batch's completion: %.0f items/s, %.0f jobs/s; the source read to its end after %s",
			n, workers, ms(took), float64(n)/took.Seconds(), float64(res.jobs)/took.Seconds(), ms(fd.fed.Sub(fd.began))),
		r.checkCensus(final, n),
		watch.String(),
		r.checkItems(b.ID, n))
	res.notes = append(res.notes, fd.report()...)
	for _, c := range fd.timings {
		res.notes = append(res.notes, c.String())
	}
	if len(how.timeAt) > 0 {
		res.notes = append(res.notes, quiet.String()+", the batch completed and the workers idle")
	}
	res.notes = append(res.notes, fmt.Sprintf("the checks took %s", ms(time.Since(checked))))
	res.failed = r.failed
	res.log(t.Logf)
}

// report is what the feeder did, for the report.
func (f *feeder) report() []string {
	out := []string{fmt.Sprintf("feeder: %d passes of up to %d new items in pages of %d, a pass once no more than %d were in flight; %d items served, %d of them offered again; %d clients; %d passes failed and were tried again%s",
		f.passes, f.how.window, f.how.page, f.how.window, f.src.count(), f.src.count()-f.how.items, f.clients, len(f.retries), firstOf(f.retries)),
		fmt.Sprintf("feeder: page admissions (each one transaction holding the batch row's lock, then a read of the report), all but each pass's last, timed: with new items %s; offering admitted items again %s",
			f.src.newPages, f.src.oldPages)}
	for _, c := range f.crashed {
		out = append(out, "feeder crash: "+c)
	}
	return out
}

// firstOf shows the first of what, if any.
func firstOf(what []string) string {
	if len(what) == 0 {
		return ""
	}
	return " (the first: " + what[0] + ")"
}

// waitBatch waits until done holds of the batch's report, read with bc,
// sampling its census with watch; it fails the test if that takes longer
// than limit or the feeder fails.
func (r *rig) waitBatch(bc *batches.Client, watch *censusWatch, fd *feeder, limit time.Duration, what string, done func(batches.Report) bool) batches.Report {
	r.t.Helper()
	deadline := time.Now().Add(limit)
	var last batches.Report
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(r.t.Context(), 5*time.Second)
		b, err := bc.Get(ctx, watch.id)
		cancel()
		if err == nil {
			if last = b; done(b) {
				return b
			}
			watch.progress(b)
		}
		lastErr = err
		if watch.due() {
			watch.sample()
			r.look() // notes the jobs claimed past the recovery bound
		}
		if err := fd.failed(); err != nil {
			r.fail(checkFeeder, "the feeder failed while the test waited for %s: %v", what, err)
			r.t.FailNow()
		}
		if time.Now().After(deadline) {
			r.fail(checkCensus, "waited %v for %s: the batch is %+v (%v; jobs: %s)", limit, what, last, lastErr, r.states())
			r.t.FailNow()
		}
		time.Sleep(poll)
	}
}

// censusWatch samples a batch's row against its items while it runs: the
// counts, the last key and the cursor, in one snapshot. The waits for the
// batch look at the jobs as often.
type censusWatch struct {
	r      *rig
	id     int64
	every  time.Duration
	last   time.Time
	n      int
	drifts []string
	// When progress last logged, and the items succeeded then.
	logged    time.Time
	succeeded int
}

// progress logs how far the batch is, once a minute for a big one.
func (w *censusWatch) progress(b batches.Report) {
	if w.every < 10*time.Second {
		return
	}
	now := time.Now()
	if w.logged.IsZero() {
		w.logged = now
		return
	}
	if d := now.Sub(w.logged); d >= time.Minute {
		w.r.t.Logf("batch %d: %d items admitted, %d in flight, %d succeeded: %.0f items/s over the last %s",
			b.ID, b.Items, b.InFlight, b.Succeeded, float64(b.Succeeded-w.succeeded)/d.Seconds(), ms(d))
		w.logged, w.succeeded = now, b.Succeeded
	}
}

// due reports whether every has passed since the last sample.
func (w *censusWatch) due() bool { return time.Since(w.last) >= w.every }

// sample compares the batch's row with its items, once.
func (w *censusWatch) sample() {
	w.last = time.Now()
	ctx, cancel := context.WithTimeout(w.r.t.Context(), 10*time.Second)
	defer cancel()
	var drift []string
	rows, err := w.r.owner.Query(ctx, censusDrift, w.id)
	if err == nil {
		drift, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return // the cluster is busy or down: no sample
	}
	w.n++
	if len(drift) > 0 {
		w.drifts = append(w.drifts, drift...)
	}
}

func (w *censusWatch) String() string {
	return fmt.Sprintf("census sampled against the items %d times while the batch ran (one snapshot each): %d disagreed%s",
		w.n, len(w.drifts), firstOf(w.drifts))
}

// censusDrift returns, in one snapshot, what of batch $1's row disagrees
// with its items: a count, the last key, or the cursor (the greatest key
// such that it and every key before it is settled).
const censusDrift = `
	WITH b AS (
	    SELECT * FROM docket.batches WHERE id = $1
	), i AS (
	    SELECT count(*) AS items, count(*) FILTER (WHERE status = 'reserved') AS in_flight,
	           count(*) FILTER (WHERE status = 'succeeded') AS succeeded, count(*) FILTER (WHERE status = 'failed') AS failed,
	           count(*) FILTER (WHERE status = 'quarantined') AS quarantined, max(key) AS last_key,
	           min(key) FILTER (WHERE status = 'reserved') AS first_reserved
	    FROM docket.batch_items WHERE batch_id = $1
	), want AS (
	    SELECT i.*, CASE WHEN i.first_reserved IS NULL THEN i.last_key
	                     ELSE (SELECT max(key) FROM docket.batch_items WHERE batch_id = $1 AND key < i.first_reserved) END AS cursor
	    FROM i
	)
	SELECT format('at %s: the row says items %s, in flight %s, succeeded %s, failed %s, quarantined %s, last key %s, cursor %s; the items say %s, %s, %s, %s, %s, %s, %s',
	              clock_timestamp(), b.items, b.in_flight, b.succeeded, b.failed, b.quarantined, coalesce(b.last_key, '-'), coalesce(b.cursor, '-'),
	              w.items, w.in_flight, w.succeeded, w.failed, w.quarantined, coalesce(w.last_key, '-'), coalesce(w.cursor, '-'))
	FROM b, want w
	WHERE (b.items, b.in_flight, b.succeeded, b.failed, b.quarantined) IS DISTINCT FROM
	      (w.items, w.in_flight, w.succeeded, w.failed, w.quarantined)
	   OR b.last_key IS DISTINCT FROM w.last_key OR b.cursor IS DISTINCT FROM w.cursor`

// checkCensus checks the completed batch's report: n items, all succeeded,
// the cursor at the last. It returns the report's line.
func (r *rig) checkCensus(b batches.Report, n int) string {
	r.t.Helper()
	last := itemKey(n)
	if b.Status != batches.Completed || !b.SourceDone || b.Items != n || b.Succeeded != n || b.Failed != 0 || b.Quarantined != 0 ||
		b.InFlight != 0 || b.LastKey != last || b.Cursor != last || b.NeedsAttention() {
		r.fail(checkCensus, "want %d items, all succeeded, the source read to its end, last key and cursor %s; the batch is %+v", n, last, b)
	}
	return fmt.Sprintf("census: %s, items %d: succeeded %d, failed %d, quarantined %d, in flight %d; last key %s, cursor %s, source read to its end %t",
		b.Status, b.Items, b.Succeeded, b.Failed, b.Quarantined, b.InFlight, b.LastKey, b.Cursor, b.SourceDone)
}

// checkItems checks that batch id has items 1..n, each with a run of its
// own that succeeded with its item's output, that those are all the runs,
// and that each step of each run has exactly one job and one run_steps row
// naming it. It returns the report's line of counts.
func (r *rig) checkItems(id int64, n int) string {
	r.t.Helper()
	ctx := r.t.Context()
	var items, withRun, distinct, runs, succeeded, steps, jobsOf, rerun, effectsTwice, deadlocks int
	require.NoError(r.t, r.owner.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM docket.batch_items WHERE batch_id = $1),
			(SELECT count(run_id) FROM docket.batch_items WHERE batch_id = $1),
			(SELECT count(DISTINCT run_id) FROM docket.batch_items WHERE batch_id = $1),
			(SELECT count(*) FROM docket.runs),
			(SELECT count(*) FROM docket.runs WHERE status = 'succeeded'),
			(SELECT count(*) FROM docket.run_steps),
			(SELECT count(*) FROM docket.jobs WHERE params ? 'run_id'),
			(SELECT count(*) FROM docket.run_steps s JOIN docket.jobs j ON j.id = s.job_id WHERE j.attempts > 1),
			(SELECT count(*) FROM (SELECT 1 FROM faults.outside GROUP BY job_id HAVING count(*) > 1) x),
			(SELECT deadlocks FROM pg_stat_database WHERE datname = current_database())`, id).
		Scan(&items, &withRun, &distinct, &runs, &succeeded, &steps, &jobsOf, &rerun, &effectsTwice, &deadlocks))
	if items != n || withRun != n || distinct != n || runs != n {
		r.fail(checkItemsOnce, "want %d items with %d distinct runs, and %d runs in all: %d items, %d with a run, %d distinct runs; %d runs",
			n, n, n, items, withRun, distinct, runs)
	}
	// Every key 1..n admitted, and no other.
	failEach(r, checkItemsOnce, "keys", r.stringsOf(ctx, `
		SELECT format('key %s: %s', coalesce(w.key, i.key), CASE WHEN i.key IS NULL THEN 'never admitted' ELSE 'not an item of the source' END)
		FROM (SELECT format('item%s', lpad(g::text, 7, '0')) COLLATE "C" AS key FROM generate_series(1, $2::int) g) w
		FULL JOIN (SELECT key FROM docket.batch_items WHERE batch_id = $1) i ON i.key = w.key
		WHERE w.key IS NULL OR i.key IS NULL
		ORDER BY 1`, id, n))
	// Each item's run succeeded with its item's output.
	failEach(r, checkRunsSucceeded, "items", r.stringsOf(ctx, `
		SELECT format('item %s %s: run %s %s, output %s%s', i.key, i.status, i.run_id, coalesce(r.status, 'missing'),
		              coalesce(r.output::text, 'none'), coalesce('; ' || r.failure, ''))
		FROM docket.batch_items i LEFT JOIN docket.runs r ON r.id = i.run_id
		WHERE i.batch_id = $1 AND (i.status <> 'succeeded' OR r.status IS DISTINCT FROM 'succeeded'
		   OR r.output IS DISTINCT FROM jsonb_build_object('n', substr(i.key, 5)::int, 'amount', substr(i.key, 5)::int * $2))
		ORDER BY i.key`, id, batchRate))
	failEach(r, checkStepsOnce, "steps", r.stringsOf(ctx, `
		WITH want AS (
		    SELECT r.id AS run_id, s.step_id FROM docket.runs r JOIN docket.plan_steps s ON s.plan_id = r.plan_id
		), enqueued AS (
		    SELECT (params ->> 'run_id')::bigint AS run_id, params ->> 'step' AS step_id, count(*) AS jobs,
		           array_agg(id ORDER BY id) AS ids
		    FROM docket.jobs WHERE params ? 'run_id' GROUP BY 1, 2
		), recorded AS (
		    SELECT run_id, step_id, count(*) AS rows, min(job_id) AS job_id, bool_and(state = 'succeeded') AS succeeded
		    FROM docket.run_steps GROUP BY 1, 2
		)
		SELECT format('run %s step %s: %s jobs %s, %s run_steps rows naming job %s (succeeded %s)%s', run_id, step_id,
		              coalesce(e.jobs, 0), coalesce(e.ids, '{}'), coalesce(x.rows, 0), coalesce(x.job_id::text, 'none'),
		              coalesce(x.succeeded::text, '-'), CASE WHEN w.run_id IS NULL THEN ', not a step of its plan' ELSE '' END)
		FROM want w FULL JOIN enqueued e USING (run_id, step_id) FULL JOIN recorded x USING (run_id, step_id)
		WHERE w.run_id IS NULL OR coalesce(e.jobs, 0) <> 1 OR coalesce(x.rows, 0) <> 1 OR x.job_id IS DISTINCT FROM e.ids[1]
		   OR NOT x.succeeded
		ORDER BY run_id, step_id`))
	var byStep string
	require.NoError(r.t, r.owner.QueryRow(ctx, `SELECT coalesce(string_agg(format('%s %s', step, n), ', ' ORDER BY step), 'none')
		FROM (SELECT params ->> 'step' AS step, count(*) AS n FROM docket.jobs WHERE params ? 'run_id' AND attempts > 1 GROUP BY 1) x`).Scan(&byStep))
	return fmt.Sprintf("items %d, with a run %d, distinct runs %d; runs %d, succeeded %d; steps %d; jobs %d; steps whose job ran more than once %d (%s; outside effects of two attempts or more: %d); deadlocks in the database %d",
		items, withRun, distinct, runs, succeeded, steps, jobsOf, rerun, byStep, effectsTwice, deadlocks)
}

// stringsOf runs query with args, which returns one text column, and
// returns its rows.
func (r *rig) stringsOf(ctx context.Context, query string, args ...any) []string {
	r.t.Helper()
	rows, err := r.owner.Query(ctx, query, args...)
	require.NoError(r.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(r.t, err)
	return out
}

// insideByPayload finds the jobs whose completion writes are not exactly
// once: a succeeded job whose payload says it writes has one faults.inside
// row, of its last attempt; no other job has any.
func (r *rig) insideByPayload(ctx context.Context) []string {
	return r.strings(ctx, `
		SELECT format('job %s %s after %s attempts (writes %s): %s inside rows, of attempts %s', j.id, j.state, j.attempts,
		              coalesce(j.payload ->> 'writes', 'false'), count(i.job_id),
		              coalesce(array_agg(i.attempt ORDER BY i.attempt) FILTER (WHERE i.job_id IS NOT NULL), '{}'))
		FROM docket.jobs j LEFT JOIN faults.inside i ON i.job_id = j.id
		GROUP BY j.id
		HAVING CASE WHEN j.state = 'succeeded' AND j.payload ->> 'writes' = 'true' THEN count(i.job_id) <> 1 OR bool_or(i.attempt <> j.attempts)
		            ELSE count(i.job_id) > 0 END
		ORDER BY j.id`)
}
