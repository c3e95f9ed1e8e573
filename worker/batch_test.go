package worker_test

// The edges of a batch's loop: a notification that arrives while it claims,
// a commit that fails after a claim, and a Stop that races a claim; and the
// goroutines a batch runs its handlers on.

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/worker"
)

// TestNotificationDuringAClaimWakesTheBatch enqueues each job of a chain
// while the worker's batch, its last claim made and found empty, reports the
// previous job's success, and waits until the notification has been
// delivered: the batch must still wake for it, since nothing else will for
// an hour.
func TestNotificationDuringAClaimWakesTheBatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error { return nil }))
	lc, err := e.Pool.Acquire(ctx)
	require.NoError(t, err)
	ear := lc.Hijack() // the test's own ear on the channel
	t.Cleanup(func() { _ = ear.Close(context.Background()) })
	_, err = ear.Exec(ctx, "LISTEN "+worker.NotifyChannel)
	require.NoError(t, err)

	const chain = 10
	first, err := e.client.Enqueue(ctx, invoiceSpec(t, 0, ""))
	require.NoError(t, err)
	rec := newRecorder()
	next := make(chan int64, chain)
	w := newWorker(t, e, reg, nil, func(c *worker.Config) {
		notifiedOnly(c)
		c.OnEvent = func(ev worker.Event) {
			// Called by the batch, after the transaction that recorded
			// the success and claimed nothing more.
			if ev.Type == worker.EventSucceeded && len(next) < chain-1 {
				enq, err := e.client.Enqueue(context.Background(), invoiceSpec(t, len(next)+1, ""))
				if err == nil {
					next <- enq.Job.ID
					wctx, cancel := context.WithTimeout(context.Background(), waitLimit)
					_, _ = ear.WaitForNotification(wctx)
					cancel()
				}
			}
			rec.add(ev)
		}
	})
	testkit.Start(t, w)
	rec.waitN(t, 1, is(worker.EventSucceeded, first.Job.ID))
	for range chain - 1 {
		var id int64
		select {
		case id = <-next:
		case <-time.After(waitLimit):
			t.Fatal("the chain stopped")
		}
		rec.waitN(t, 1, is(worker.EventSucceeded, id))
	}
}

// TestCommitFailureAfterAClaimKeepsTheSlots makes the commit of the batch's
// first claim fail (a deferred constraint trigger stands in for a connection
// lost at COMMIT, or a serialization failure): the claim is rolled back, and
// the batch must try again with the handler slot the claim had taken (with
// one handler allowed, a slot lost would stop the queue for good).
func TestCommitFailureAfterAClaimKeepsTheSlots(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	_, err := e.Pool.Exec(ctx, `
		CREATE SEQUENCE public.claim_commits;
		CREATE FUNCTION public.fail_first_claim_commit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
		BEGIN
		    IF NEW.state = 'claimed' AND nextval('public.claim_commits') = 1 THEN
		        RAISE EXCEPTION 'the first claim''s commit fails';
		    END IF;
		    RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER fail_first_claim_commit AFTER UPDATE ON docket.jobs
		    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.fail_first_claim_commit();`)
	require.NoError(t, err)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error { return nil }))
	enq, err := e.client.Enqueue(ctx, invoiceSpec(t, 1, ""))
	require.NoError(t, err)
	rec := newRecorder()
	startWorker(t, e, reg, rec, func(c *worker.Config) {
		c.Queues = map[string]int{jobs.DefaultQueue: 1}
		c.Batch.Max = 1
	})
	rec.waitN(t, 1, func(ev worker.Event) bool { return ev.Type == worker.EventError })
	rec.waitN(t, 1, is(worker.EventSucceeded, enq.Job.ID))
	require.Equal(t, jobs.Succeeded, jobState(t, e.Pool, enq.Job.ID))
}

// TestStopClaimsNothingAfterItsReleases stops a worker past its deadline
// right after its handlers started, while its batch's next claim, decided
// before the stop, may still be under way: that claim must not take the jobs
// the stop has just released. Each job keeps the one attempt it spent, and a
// job of two attempts is not made dead by the stop (a claim decided before
// the stop may run after the releases: it is undone). Fifteen rounds, each on
// a queue of its own, as the race is narrow.
func TestStopClaimsNothingAfterItsReleases(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		<-ctx.Done()
		return ctx.Err()
	}))
	for round := range 15 {
		queue := fmt.Sprintf("round-%d", round)
		var ids []int64
		for i := range inFlight {
			s := invoiceSpec(t, i, "")
			s.Queue, s.Retry = queue, jobs.RetryPolicy{MaxAttempts: 2}
			enq, err := e.client.Enqueue(ctx, s)
			require.NoError(t, err)
			ids = append(ids, enq.Job.ID)
		}
		rec := newRecorder()
		w := startWorker(t, e, reg, rec, func(c *worker.Config) { c.Queues = map[string]int{queue: 100} })
		rec.waitN(t, inFlight, is(worker.EventStarted, 0))
		past, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, w.Stop(past), context.Canceled)
		for _, id := range ids {
			j, err := e.client.Jobs().Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, jobs.Queued, j.State, "round %d, job %d (%s)", round, id, j.Diagnostic)
			require.Equal(t, 1, j.Attempts, "round %d, job %d was claimed again after its release", round, id)
		}
		require.Equal(t, inFlight, rec.count(is(worker.EventStarted, 0)), "round %d: no handler started after the stop", round)
	}
}

// A batch runs its handlers on goroutines it keeps between jobs, and they
// end with it: 300 jobs through 10 handlers run on a few goroutines, not one
// each, and none of the batch's is left once the worker has stopped. Not
// parallel: it reads every goroutine of the test process, and the other
// tests' workers run batches too.
func TestABatchKeepsItsHandlerGoroutines(t *testing.T) {
	e := setup(t)
	var mu sync.Mutex
	ranOn := map[string]bool{}
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		mu.Lock()
		ranOn[goroutineID()] = true
		mu.Unlock()
		return nil
	}))
	const jobCount, handlers = 300, 10
	enqueueInvoices(t, e, jobCount)
	rec := newRecorder()
	w := newWorker(t, e, reg, rec, func(cfg *worker.Config) { cfg.Queues = map[string]int{"default": handlers} })
	require.NoError(t, w.Start(t.Context()))
	rec.waitN(t, jobCount, is(worker.EventSucceeded, 0))
	require.NoError(t, w.Stop(t.Context()))

	mu.Lock()
	defer mu.Unlock()
	require.LessOrEqual(t, len(ranOn), 3*handlers, "handlers ran on %d goroutines for %d jobs", len(ranOn), jobCount)
	buf := make([]byte, 8<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	require.NotContains(t, stacks, "worker.(*batch).runner", "a batch's runner outlived the worker")
}

// goroutineID is the calling goroutine's number, as its stack trace gives it.
func goroutineID() string {
	buf := make([]byte, 64)
	line := string(buf[:runtime.Stack(buf, false)])
	return strings.Fields(line)[1] // "goroutine 123 [running]:"
}

// TestDrainedBatchClaimsOnlyWhenWoken runs one job whose handler waits: the
// claim that took it asked for more and found none, so the batch must not
// claim again while the handler runs (nothing woke it, its poll is an hour
// away); nor with the commit of the job's success, which made no job due.
func TestDrainedBatchClaimsOnlyWhenWoken(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	release := make(chan struct{})
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error {
		<-release
		return nil
	}))
	// Enqueued before the worker listens: its notification is not heard,
	// and the batch the worker starts with claims it.
	enq, err := e.client.Enqueue(ctx, invoiceSpec(t, 0, ""))
	require.NoError(t, err)
	rec := newRecorder()
	w := newWorker(t, e, reg, rec, notifiedOnly)
	var (
		mu     sync.Mutex
		claims []int // jobs taken by each claim, in order
		took   = make(chan struct{})
	)
	worker.OnClaim(w, func(_ string, _, n int) {
		mu.Lock()
		defer mu.Unlock()
		claims = append(claims, n)
		if n > 0 {
			close(took)
		}
	})
	testkit.Start(t, w)
	select {
	case <-took:
	case <-time.After(waitLimit):
		t.Fatal("the job was not claimed")
	}
	close(release)
	rec.waitN(t, 1, is(worker.EventSucceeded, enq.Job.ID))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1}, claims, "a claim that took the job, and none with its success, which made nothing due")
}

// TestDrainedBatchWokenWhileRunningClaims runs a job whose handler waits
// for a second job's handler: the second is enqueued while the first runs,
// in a batch whose last claim found the queue drained. Its notification
// must bring a claim within the window, without the first's success to
// ride with (that never comes until the second has run).
func TestDrainedBatchWokenWhileRunningClaims(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	secondRan := make(chan struct{})
	started := make(chan struct{})
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(_ context.Context, j *jobs.Typed[Invoice]) error {
		if j.Args.Order == 0 {
			close(started)
			<-secondRan
			return nil
		}
		close(secondRan)
		return nil
	}))
	first, err := e.client.Enqueue(ctx, invoiceSpec(t, 0, ""))
	require.NoError(t, err)
	rec := newRecorder()
	w := newWorker(t, e, reg, rec, notifiedOnly)
	testkit.Start(t, w)
	waitListening(t, w)
	select {
	case <-started:
	case <-time.After(waitLimit):
		t.Fatal("the first job did not start")
	}
	second, err := e.client.Enqueue(ctx, invoiceSpec(t, 1, ""))
	require.NoError(t, err)
	rec.waitN(t, 1, is(worker.EventSucceeded, second.Job.ID))
	rec.waitN(t, 1, is(worker.EventSucceeded, first.Job.ID))
}

// TestAClaimTheStopOvertakesIsUndone: a batch records a success and claims
// the next job in one transaction; when Stop begins while that claim runs,
// the claim is undone (the job stays queued, as if never claimed: no
// attempt, no lease generation, no event) and the success still commits.
func TestAClaimTheStopOvertakesIsUndone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error { return nil }))
	const queue = "overtaken"
	var ids []int64
	for i := range 2 {
		s := invoiceSpec(t, i, "")
		s.Queue = queue
		enq, err := e.client.Enqueue(ctx, s)
		require.NoError(t, err)
		ids = append(ids, enq.Job.ID)
	}
	rec := newRecorder()
	w := newWorker(t, e, reg, rec, func(c *worker.Config) { c.Queues = map[string]int{queue: 1} })
	stopped := make(chan error, 1)
	var claims atomic.Int32
	worker.OnClaimed(w, func(q string, took int) {
		// The first claim takes the first job; the second, in the
		// transaction that records its success, the other: the stop
		// begins while it runs.
		if q != queue || took == 0 || claims.Add(1) != 2 {
			return
		}
		go func() { stopped <- w.Stop(context.Background()) }()
		<-worker.Quit(w)
	})
	testkit.Start(t, w)
	require.NoError(t, <-stopped)

	first, err := e.client.Jobs().Get(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, first.State)
	second, err := e.client.Jobs().Get(ctx, ids[1])
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, second.State)
	require.Zero(t, second.Attempts, "the undone claim counted an attempt")
	var generation, events int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT j.lease_generation, (SELECT count(*) FROM docket.job_events v WHERE v.job_id = j.id)
		FROM docket.jobs j WHERE j.id = $1`, ids[1]).Scan(&generation, &events))
	require.Zero(t, generation)
	require.Equal(t, 1, events, "the second job has its birth event only")
	require.Zero(t, rec.count(is(worker.EventStarted, ids[1])))
}

// TestASuccessorRidesWithItsPredecessorsCommit runs a three-step chain
// through one batch that finds new work by notifications only: the first
// step's job is claimed when its start wakes the batch, each successor by
// the transaction that records its predecessor's success (the batch, its
// queue drained, claims with that commit because the success made a job
// due), and the last success, which makes nothing due, claims nothing.
func TestASuccessorRidesWithItsPredecessorsCommit(t *testing.T) {
	t.Parallel()
	k := testkit.Setup(t, ana, []string{project},
		testkit.Grants(app, project, access.JobCreate, access.JobClaim, access.PlanRun)...)
	ctx := t.Context()
	type stepArgs map[string]json.RawMessage
	kind := jobs.MustKind[stepArgs]("ride.step", 1)
	reg := worker.NewRegistry()
	require.NoError(t, worker.HandleResult(reg, kind, func(context.Context, *jobs.Typed[stepArgs]) (worker.Result, error) {
		return worker.Result{Value: json.RawMessage(`{"n": 1}`)}, nil
	}))
	rec := newRecorder()
	w := newWorker(t, env{Env: k}, reg, rec, notifiedOnly)
	var (
		mu     sync.Mutex
		claims []int // jobs taken by each claim, in order
		first  = make(chan struct{})
	)
	worker.OnClaim(w, func(_ string, _, n int) {
		mu.Lock()
		defer mu.Unlock()
		if claims == nil {
			close(first)
		}
		claims = append(claims, n)
	})
	testkit.Start(t, w)
	waitListening(t, w)
	// The batch the worker starts with claims once, finding nothing.
	select {
	case <-first:
	case <-time.After(waitLimit):
		t.Fatal("the worker's first batch did not claim")
	}
	mu.Lock()
	require.Equal(t, []int{0}, claims)
	claims = claims[:0]
	mu.Unlock()
	pl, err := plans.NewClient(k.API, plans.Config{Actor: app, Clock: k.Clock})
	require.NoError(t, err)
	chain := plans.Plan{Steps: []plans.Step{
		{ID: "a", Kind: "ride.step", Args: []plans.Arg{}},
		{ID: "b", Kind: "ride.step", After: []string{"a"}, Args: []plans.Arg{{Name: "n", Source: plans.StepPath("a", "n")}}},
		{ID: "c", Kind: "ride.step", After: []string{"b"}, Args: []plans.Arg{{Name: "n", Source: plans.StepPath("b", "n")}},
			Terminal: true},
	}}
	run, err := pl.Start(ctx, plans.Start{Project: project, Plan: chain})
	require.NoError(t, err)
	rec.waitN(t, 3, is(worker.EventSucceeded, 0))
	got, err := pl.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Succeeded, got.Status)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1, 1, 1}, claims, "the start's claim, then one with each success that made a step due")
}

// TestAJobBehindTheClaimsPositionWaitsForTheHead: a batch's claims begin
// where its last full claim began, so a job enqueued behind that position (a
// backdated one, here) is not taken while the backlog past the position
// lasts: when it starts, the backlog past the position is claimed, the
// straggler taken by the claim that found too little past the position and
// read the rest from the queue's head in the same transaction, without
// waiting for a notification or the poll. With
// Batch.Rescan negative every claim reads from the head, and the job,
// first in the claim order, starts before the backlog's last.
func TestAJobBehindTheClaimsPositionWaitsForTheHead(t *testing.T) {
	t.Parallel()
	const straggler = 100
	for _, tc := range []struct {
		name   string
		rescan time.Duration
	}{{"positions", time.Minute}, {"every claim from the head", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx := t.Context()
			gate := make(chan struct{})
			var (
				mu     sync.Mutex
				starts []int   // the jobs' orders, as their handlers start
				past   []int64 // the backlog past the first claim's position
				queued = -1    // how many of past were queued as the straggler started
			)
			reg := worker.NewRegistry()
			require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
				mu.Lock()
				starts = append(starts, j.Args.Order)
				mu.Unlock()
				if j.Args.Order < 2 {
					<-gate
				}
				if j.Args.Order == straggler {
					var n int
					if err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.jobs WHERE id = ANY ($1) AND state = 'queued'`,
						past).Scan(&n); err != nil {
						return err
					}
					mu.Lock()
					queued = n
					mu.Unlock()
				}
				return nil
			}))
			// The backlog, enqueued before the worker listens: its first
			// claim, from the head, takes orders 0 and 1, which wait.
			for i := range 4 {
				s := invoiceSpec(t, i, "")
				s.Priority = 2
				enq, err := e.client.Enqueue(ctx, s)
				require.NoError(t, err)
				if i >= 2 {
					past = append(past, enq.Job.ID)
				}
			}
			took := make(chan int, 16)
			rec := newRecorder()
			w := newWorker(t, e, reg, rec, func(cfg *worker.Config) {
				notifiedOnly(cfg)
				cfg.Queues = map[string]int{"default": 2}
				cfg.Batch.Max, cfg.Batch.Rescan = 2, tc.rescan
			})
			worker.OnClaim(w, func(_ string, _, n int) { took <- n })
			testkit.Start(t, w)
			select {
			case n := <-took:
				require.Equal(t, 2, n, "the first claim takes two of the backlog")
			case <-time.After(waitLimit):
				t.Fatal("nothing was claimed")
			}
			// Behind the first claim's position: a job due a minute earlier.
			s := invoiceSpec(t, straggler, "")
			s.Priority, s.AvailableAt = 2, testkit.T0.Add(-time.Minute)
			late, err := e.client.Enqueue(ctx, s)
			require.NoError(t, err)
			close(gate)
			rec.waitN(t, 1, is(worker.EventSucceeded, late.Job.ID))
			rec.waitN(t, 5, is(worker.EventSucceeded, 0))

			mu.Lock()
			defer mu.Unlock()
			require.ElementsMatch(t, []int{0, 1}, starts[:2])
			at := func(order int) int { return slices.Index(starts, order) }
			if tc.rescan > 0 {
				require.Zero(t, queued, "behind the position: taken once the backlog past it is, %v", starts)
				require.Greater(t, at(straggler), 2, "after the first claim and the backlog's next, %v", starts)
			} else {
				require.Less(t, at(straggler), at(3), "from the head: before the backlog's last, %v", starts)
			}
		})
	}
}
