package worker_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// The environment that makes the test binary act as the worker process the
// crash tests kill: the database to work on, and the instant its clock
// stands at.
const (
	crashURLEnv = "DOCKET_WORKER_CRASH_URL"
	crashNowEnv = "DOCKET_WORKER_CRASH_NOW"
)

// crashStarted begins the line the crashing worker prints, with the job's
// id, when a handler starts.
const crashStarted = "started job "

// TestCrashWorkerProcess is the worker process [killMidHandlers] kills: a
// worker whose handlers say which job they started and then work until the
// process is killed.
func TestCrashWorkerProcess(t *testing.T) {
	url := os.Getenv(crashURLEnv)
	if url == "" {
		t.Skip("only runs as the worker process the crash tests kill")
	}
	now, err := time.Parse(time.RFC3339Nano, os.Getenv(crashNowEnv))
	require.NoError(t, err)
	ctx := context.Background()
	pool, err := db.Open(ctx, url)
	require.NoError(t, err)
	var out sync.Mutex
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		out.Lock()
		fmt.Fprintf(os.Stdout, "%s%d\n", crashStarted, j.ID)
		out.Unlock()
		<-ctx.Done() // working, until killed
		return ctx.Err()
	}))
	w, err := worker.NewClient(pool, worker.Config{
		Actor: app, Registry: reg, Clock: db.NewFakeClock(now), Deployment: "crashing",
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, Logger: testLogger,
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed, or the test that started it is gone
}

// A worker process killed in the middle of its handlers leaves their jobs
// claimed, and their dispatches running, until the leases expire. Then the
// lease sweep queues the repeatable job again with a new dispatch, and the
// next worker runs it once, as its second attempt; the other job becomes
// uncertain, because the dead worker may have done it, and nobody runs it
// again.
func TestCrashMidHandler(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	repSpec := invoiceSpec(t, 1, "safe to repeat")
	repSpec.Repeatable = true
	repSpec.Retry = jobs.RetryPolicy{Base: 10 * time.Millisecond}
	rep, err := e.client.Enqueue(ctx, repSpec)
	require.NoError(t, err)
	once, err := e.client.Enqueue(ctx, invoiceSpec(t, 2, "charges a card"))
	require.NoError(t, err)
	ids := []int64{rep.Job.ID, once.Job.ID}

	killMidHandlers(t, e, ids...)
	for _, id := range ids {
		j, err := e.client.Jobs().Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.Claimed, j.State, "job %d is held by the dead worker's lease", id)
		require.Equal(t, 1, j.Attempts)
	}
	var running int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.river_job WHERE kind = $1 AND state = 'running'`,
		worker.DispatchKind).Scan(&running))
	require.Equal(t, 2, running, "the dead worker's dispatches are left running")

	var runs [3]atomic.Int32 // by order
	rec := newRecorder()
	w := newCountingWorker(t, e, rec, runs[:])

	// Before the leases expire, the sweep moves nothing.
	moved, err := w.Sweep(ctx, worker.SweepLeases)
	require.NoError(t, err)
	require.Zero(t, moved)

	e.Clock.Advance(jobs.DefaultLease)
	moved, err = w.Sweep(ctx, worker.SweepLeases)
	require.NoError(t, err)
	require.Equal(t, 2, moved)
	r, err := e.client.Jobs().Get(ctx, rep.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, r.State)
	require.Contains(t, r.Diagnostic, "lease expired")
	require.Equal(t, jobs.Uncertain, jobState(t, e.Pool, once.Job.ID))
	require.Equal(t, 1, liveDispatches(t, e), "the sweep dispatched the repeatable job, and only it")

	e.Clock.Advance(time.Second) // past the requeued job's backoff
	startLater(t, w)
	rec.waitN(t, 1, is(worker.EventSucceeded, rep.Job.ID))

	r, err = e.client.Jobs().Get(ctx, rep.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, r.State)
	require.Equal(t, 2, r.Attempts)
	require.EqualValues(t, 1, runs[1].Load(), "the repeatable job ran once in the new worker")
	require.Equal(t, 1, rec.count(is(worker.EventStarted, rep.Job.ID)))

	o, err := e.client.Jobs().Get(ctx, once.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Uncertain, o.State)
	require.Equal(t, 1, o.Attempts)
	require.Contains(t, o.Diagnostic, "lease expired")
	require.Contains(t, o.Diagnostic, string(app))
	require.Zero(t, runs[2].Load(), "the uncertain job did not run again")
	require.Zero(t, rec.count(is(worker.EventStarted, once.Job.ID)))
	require.Zero(t, liveDispatches(t, e))

	for _, id := range ids {
		v, err := e.client.Jobs().Verify(ctx, id)
		require.NoError(t, err)
		require.True(t, v.OK, v.Problem)
	}
}

// An uncertain job left by a killed worker, which an operator finds was not
// done and queues again, runs on the next worker: the dispatch the dead
// process left running does not count as carrying it.
func TestCrashReconciledJobRunsAgain(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	once, err := e.client.Enqueue(ctx, invoiceSpec(t, 1, "charges a card"))
	require.NoError(t, err)
	id := once.Job.ID
	killMidHandlers(t, e, id)

	var runs [2]atomic.Int32
	rec := newRecorder()
	w := newCountingWorker(t, e, rec, runs[:])
	e.Clock.Advance(jobs.DefaultLease)
	moved, err := w.Sweep(ctx, worker.SweepLeases)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	require.Equal(t, jobs.Uncertain, jobState(t, e.Pool, id))

	j, err := e.client.Jobs().Reconcile(ctx, id, jobs.RunAgain, nil, "the card was not charged")
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, j.State)
	require.Zero(t, liveDispatches(t, e), "reconciling dispatches nothing itself")
	moved, err = w.Sweep(ctx, worker.SweepDispatch)
	require.NoError(t, err)
	require.Equal(t, 1, moved, "the dispatch sweep finds the queued job no live worker carries")

	startLater(t, w)
	rec.waitN(t, 1, is(worker.EventSucceeded, id))
	require.EqualValues(t, 1, runs[1].Load())
	require.Equal(t, jobs.Succeeded, jobState(t, e.Pool, id))
}

// killMidHandlers runs a worker process until it has started the handlers
// of all of ids, then kills it. The process is River's leader, as the only
// running worker, and stays so for River's leadership term after its death:
// the tests run the sweeps they need themselves rather than wait for that.
func killMidHandlers(t *testing.T, e env, ids ...int64) {
	t.Helper()
	ctx := t.Context()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashWorkerProcess$", "-test.v=false", "-test.count=1")
	child.Env = append(os.Environ(),
		crashURLEnv+"="+e.Pool.Config().ConnString(),
		crashNowEnv+"="+e.Clock.Now().Format(time.RFC3339Nano))
	var childErr bytes.Buffer
	child.Stderr = &childErr
	stdin, err := child.StdinPipe() // kept open: the worker works until killed
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	started := make(chan int64, len(ids))
	var other strings.Builder // anything else the child printed
	read := make(chan struct{})
	t.Cleanup(func() { // should the test stop before the kill
		_ = child.Process.Kill()
		<-read
		_ = child.Wait()
	})
	go func() {
		defer close(read)
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if id, ok := strings.CutPrefix(lines.Text(), crashStarted); ok {
				if n, err := strconv.ParseInt(id, 10, 64); err == nil {
					started <- n
					continue
				}
			}
			other.WriteString(lines.Text() + "\n")
		}
	}()
	var got []int64
	for len(got) < len(ids) {
		select {
		case id := <-started:
			got = append(got, id)
		case <-read:
			_ = child.Wait()
			t.Fatalf("the worker process ended before starting every job:\n%s%s", other.String(), childErr.String())
		case <-time.After(waitLimit):
			t.Fatalf("the worker process did not start every job within %v", waitLimit)
		}
	}
	require.ElementsMatch(t, ids, got)

	require.NoError(t, child.Process.Kill())
	<-read
	_ = child.Wait()
}

// newCountingWorker returns a worker, not started, on e's pool and clock
// whose handler counts its runs by order.
func newCountingWorker(t *testing.T, e env, rec *recorder, runs []atomic.Int32) *worker.Client {
	t.Helper()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		runs[j.Args.Order].Add(1)
		return nil
	}))
	w, err := worker.NewClient(e.API, worker.Config{
		Actor: app, Registry: reg, Clock: e.Clock, Deployment: "test",
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		SweepEvery: 50 * time.Millisecond, OnEvent: rec.add, Logger: testLogger,
	})
	require.NoError(t, err)
	return w
}

// startLater starts w, made by newCountingWorker, and stops it when the test
// ends.
func startLater(t *testing.T, w *worker.Client) {
	t.Helper()
	testkit.Start(t, w)
}
