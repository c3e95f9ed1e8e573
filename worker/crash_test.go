package worker_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// The lines the crashing worker prints, each followed by a job's id: a
// handler started, and will work until the process is killed; a handler is
// about to return its success; the worker recorded a success.
const (
	crashStarted   = "started job "
	crashFinished  = "finished job "
	crashSucceeded = "succeeded job "
)

// The crashing worker's handler modes besides working until killed: "quick"
// succeeds at once; "late" succeeds once crashQuick successes are recorded.
const crashQuick = 2

// crashBatch is the crashing worker's batch: one batch of up to eight jobs,
// whose successes wait up to 100 ms for others to record with.
var crashBatch = worker.Batching{Max: 8, Window: 100 * time.Millisecond}

// TestCrashWorkerProcess is the worker process [killWhen] kills: a worker
// whose handlers say which job they started and then work until the process
// is killed, or, in modes "quick" and "late", say they finished and succeed;
// the worker says which successes it recorded.
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
	say := func(what string, id int64) {
		out.Lock()
		fmt.Fprintf(os.Stdout, "%s%d\n", what, id)
		out.Unlock()
	}
	var succeeded atomic.Int32
	quickDone := make(chan struct{})
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		switch j.Args.Mode {
		case "late":
			select {
			case <-quickDone:
			case <-ctx.Done():
				return ctx.Err()
			}
			fallthrough
		case "quick":
			say(crashFinished, j.ID)
			return nil
		}
		say(crashStarted, j.ID)
		<-ctx.Done() // working, until killed
		return ctx.Err()
	}))
	w, err := worker.NewClient(pool, worker.Config{
		Actor: app, Registry: reg, Clock: db.NewFakeClock(now), Deployment: "crashing",
		Queues: map[string]int{jobs.DefaultQueue: crashBatch.Max}, Batch: crashBatch,
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, Logger: testLogger,
		OnEvent: func(ev worker.Event) {
			if ev.Type == worker.EventSucceeded {
				say(crashSucceeded, ev.JobID)
				if succeeded.Add(1) == crashQuick {
					close(quickDone)
				}
			}
		},
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed, or the test that started it is gone
}

// A worker process killed in the middle of its handlers leaves their jobs
// claimed, and its batch running in River, until the leases expire. Then the
// lease sweep queues the repeatable job again, due after its backoff, and the
// next worker runs it once, as its second attempt; the other job becomes
// uncertain, because the dead worker may have done it, and nobody runs it
// again. No docket job ever had a River row of its own.
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
	require.Equal(t, 1, runningBatches(t, e), "the dead worker's batch, holding both, is left running")
	require.Zero(t, perJobRiverRows(t, e.Pool))

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
	require.True(t, r.AvailableAt.After(e.Clock.Now()), "the repeatable job waits its backoff")

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
	require.Zero(t, perJobRiverRows(t, e.Pool))

	for _, id := range ids {
		v, err := e.client.Jobs().Verify(ctx, id)
		require.NoError(t, err)
		require.True(t, v.OK, v.Problem)
	}
}

// An uncertain job left by a killed worker, which an operator finds was not
// done and queues again, runs on the next worker, already waiting: the
// reconciliation's commit notifies it (its poll is an hour away), and the
// batch the dead process left running does not hold the job.
func TestCrashReconciledJobRunsAgain(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	once, err := e.client.Enqueue(ctx, invoiceSpec(t, 1, "charges a card"))
	require.NoError(t, err)
	id := once.Job.ID
	killMidHandlers(t, e, id)
	require.Equal(t, 1, runningBatches(t, e), "the dead worker's batch is left running")

	var runs [3]atomic.Int32
	rec := newRecorder()
	w := newCountingWorker(t, e, rec, runs[:], notifiedOnly)
	// A job queued before the start runs at once; then the worker's batch
	// waits for notifications.
	warm, err := e.client.Enqueue(ctx, invoiceSpec(t, 2, "warm up"))
	require.NoError(t, err)
	startLater(t, w)
	rec.waitN(t, 1, is(worker.EventSucceeded, warm.Job.ID))
	waitListening(t, w)

	e.Clock.Advance(jobs.DefaultLease)
	moved, err := w.Sweep(ctx, worker.SweepLeases)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	require.Equal(t, jobs.Uncertain, jobState(t, e.Pool, id))
	require.Zero(t, rec.count(is(worker.EventStarted, id)), "an uncertain job is not run")

	j, err := e.client.Jobs().Reconcile(ctx, id, jobs.RunAgain, nil, "the card was not charged")
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, j.State)
	rec.waitN(t, 1, is(worker.EventSucceeded, id))
	require.EqualValues(t, 1, runs[1].Load())
	j, err = e.client.Jobs().Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, j.State)
	require.Equal(t, 2, j.Attempts)
}

// A worker process killed in the middle of a batch holding eight jobs leaves
// every one of them to the lease rules. Two quick handlers succeeded and
// their successes were recorded; four handlers still work; two late ones
// have just finished, their successes most likely waiting in the batch's
// window (fewer successes than running handlers) and lost with the process.
// A recorded success stands and nothing runs its job again; a job still
// claimed when its lease expires runs again if it is repeatable and becomes
// uncertain if not, whether or not its handler had finished. No job is
// completed twice, and every history verifies.
func TestCrashMidBatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	type job struct {
		id    int64
		order int
		mode  string
		rep   bool
	}
	modes := []string{"quick", "quick", "late", "late", "works", "works", "works", "works"}
	require.Len(t, modes, crashBatch.Max, "the batch holds them all")
	var all []job
	var want []string
	for order, mode := range modes {
		rep := order%2 == 0
		s := invoiceSpec(t, order, mode)
		s.Repeatable = rep
		s.Retry = jobs.RetryPolicy{Base: 10 * time.Millisecond}
		enq, err := e.client.Enqueue(ctx, s)
		require.NoError(t, err)
		all = append(all, job{id: enq.Job.ID, order: order, mode: mode, rep: rep})
		switch mode {
		case "quick":
			want = append(want, fmt.Sprintf("%s%d", crashSucceeded, enq.Job.ID))
		case "late":
			want = append(want, fmt.Sprintf("%s%d", crashFinished, enq.Job.ID))
		default:
			want = append(want, fmt.Sprintf("%s%d", crashStarted, enq.Job.ID))
		}
	}
	killWhen(t, e, want...)

	require.Equal(t, 1, runningBatches(t, e), "the dead worker's one batch is left running")
	recorded := map[int64]bool{} // successes the batch recorded before the kill
	lost := 0                    // late successes lost with the process
	for _, j := range all {
		got, err := e.client.Jobs().Get(ctx, j.id)
		require.NoError(t, err)
		require.Equal(t, 1, got.Attempts, "job %d", j.id)
		switch {
		case j.mode == "quick":
			require.Equal(t, jobs.Succeeded, got.State, "job %d: its success was recorded", j.id)
			recorded[j.id] = true
		case j.mode == "late" && got.State == jobs.Succeeded:
			recorded[j.id] = true
		default:
			if j.mode == "late" {
				lost++
			}
			require.Equal(t, jobs.Claimed, got.State, "job %d is held by the dead worker's lease", j.id)
		}
	}
	t.Logf("late successes lost with the process: %d of 2", lost)

	runs := make([]atomic.Int32, crashBatch.Max)
	rec := newRecorder()
	w := newCountingWorker(t, e, rec, runs)
	moved, err := w.Sweep(ctx, worker.SweepLeases)
	require.NoError(t, err)
	require.Zero(t, moved, "no lease has expired yet")
	e.Clock.Advance(jobs.DefaultLease)
	moved, err = w.Sweep(ctx, worker.SweepLeases)
	require.NoError(t, err)
	require.Equal(t, len(all)-len(recorded), moved, "every job still claimed is moved on")

	e.Clock.Advance(time.Second) // past the requeued jobs' backoff
	startLater(t, w)
	var again []int64
	for _, j := range all {
		if j.rep && !recorded[j.id] {
			again = append(again, j.id)
			rec.waitN(t, 1, is(worker.EventSucceeded, j.id))
		}
	}
	require.NotEmpty(t, again)
	sctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	require.NoError(t, w.Stop(sctx))

	for _, j := range all {
		got, err := e.client.Jobs().Get(ctx, j.id)
		require.NoError(t, err)
		var succeededEvents int
		require.NoError(t, e.Pool.QueryRow(ctx,
			"SELECT count(*) FROM docket.job_events WHERE job_id = $1 AND to_state = 'succeeded'", j.id).Scan(&succeededEvents))
		switch {
		case recorded[j.id]:
			require.Equal(t, jobs.Succeeded, got.State, "job %d", j.id)
			require.Equal(t, 1, got.Attempts, "job %d", j.id)
			require.Zero(t, runs[j.order].Load(), "job %d, recorded, did not run again", j.id)
			require.Equal(t, 1, succeededEvents, "job %d", j.id)
		case j.rep:
			require.Equal(t, jobs.Succeeded, got.State, "job %d", j.id)
			require.Equal(t, 2, got.Attempts, "job %d ran again, as its second attempt", j.id)
			require.EqualValues(t, 1, runs[j.order].Load(), "job %d", j.id)
			require.Equal(t, 1, succeededEvents, "job %d completed once", j.id)
		default:
			require.Equal(t, jobs.Uncertain, got.State, "job %d may have been done: it is uncertain", j.id)
			require.Equal(t, 1, got.Attempts, "job %d", j.id)
			require.Contains(t, got.Diagnostic, "lease expired")
			require.Zero(t, runs[j.order].Load(), "job %d did not run again", j.id)
			require.Zero(t, succeededEvents, "job %d", j.id)
		}
		v, err := e.client.Jobs().Verify(ctx, j.id)
		require.NoError(t, err)
		require.True(t, v.OK, v.Problem)
	}
	var claimed int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.jobs WHERE state = 'claimed'").Scan(&claimed))
	require.Zero(t, claimed)
	require.Zero(t, perJobRiverRows(t, e.Pool))
}

// A killed worker process does not leave its batch running in River for
// River's rescuer: the batch's mark of life lapses three sweep periods after
// the process last made it, well within its jobs' lease, and the batches
// sweep of any worker then discards the row, saying why. Before that, the
// sweep leaves it be; the job it held is the lease sweep's, as ever.
func TestAKilledWorkersBatchIsDiscarded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	once, err := e.client.Enqueue(ctx, invoiceSpec(t, 1, "charges a card"))
	require.NoError(t, err)
	killMidHandlers(t, e, once.Job.ID)
	require.Equal(t, 1, runningBatches(t, e))

	w := newCountingWorker(t, e, newRecorder(), make([]atomic.Int32, 2))
	moved, err := w.Sweep(ctx, worker.SweepBatches)
	require.NoError(t, err)
	require.Zero(t, moved, "the dead process's mark has not lapsed yet")
	require.Equal(t, 1, runningBatches(t, e))

	e.Clock.Advance(3*time.Second + time.Millisecond) // three of its sweep periods
	moved, err = w.Sweep(ctx, worker.SweepBatches)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	require.Zero(t, runningBatches(t, e))
	var state, why string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT state, errors[array_length(errors, 1)] ->> 'error' FROM docket.river_job WHERE kind = $1`,
		worker.BatchKind).Scan(&state, &why))
	require.Equal(t, "discarded", state)
	require.Contains(t, why, "the process running this batch is gone")
	require.Less(t, 3*time.Second, jobs.DefaultLease, "well within the job's lease")

	require.Equal(t, jobs.Claimed, jobState(t, e.Pool, once.Job.ID), "the job is the lease sweep's")
	e.Clock.Advance(jobs.DefaultLease)
	moved, err = w.Sweep(ctx, worker.SweepLeases)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	require.Equal(t, jobs.Uncertain, jobState(t, e.Pool, once.Job.ID))
}

// runningBatches counts the River batches left running.
func runningBatches(t *testing.T, e env) int {
	t.Helper()
	var n int
	require.NoError(t, e.Pool.QueryRow(t.Context(), `SELECT count(*) FROM docket.river_job WHERE kind = $1 AND state = 'running'`,
		worker.BatchKind).Scan(&n))
	return n
}

// killMidHandlers runs a worker process until it has started the handlers
// of all of ids, then kills it.
func killMidHandlers(t *testing.T, e env, ids ...int64) {
	t.Helper()
	want := make([]string, len(ids))
	for i, id := range ids {
		want[i] = fmt.Sprintf("%s%d", crashStarted, id)
	}
	killWhen(t, e, want...)
}

// killWhen runs a worker process until it has printed every line of want,
// then kills it with SIGKILL. The process is River's leader, as the only
// running worker, and stays so for River's leadership term after its death:
// the tests run the sweeps they need themselves rather than wait for that.
func killWhen(t *testing.T, e env, want ...string) {
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
	said := make(chan string, len(want))
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
			line := lines.Text()
			if slices.Contains(want, line) {
				said <- line
				continue
			}
			other.WriteString(line + "\n")
		}
	}()
	var got []string
	deadline := time.After(waitLimit)
	for len(got) < len(want) {
		select {
		case line := <-said:
			got = append(got, line)
		case <-read:
			_ = child.Wait()
			t.Fatalf("the worker process ended before saying %q:\n%s%s", want, other.String(), childErr.String())
		case <-deadline:
			t.Fatalf("the worker process did not say all of %q within %v; it said %q", want, waitLimit, got)
		}
	}
	require.ElementsMatch(t, want, got)

	require.NoError(t, child.Process.Kill())
	<-read
	_ = child.Wait()
	// The kill ends the process, not at once its sessions: a transaction it
	// had under way (a batch recording successes, say) still ends, rolled
	// back or committed, when the server sees the connection gone. Wait for
	// that by taking every job's row lock, so the jobs are as the dead
	// process left them for good.
	lctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	require.NoError(t, db.WithTx(lctx, e.Pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(lctx, "SELECT id FROM docket.jobs FOR UPDATE")
		return err
	}), "the dead process's transactions end")
}

// newCountingWorker returns a worker, not started, on e's pool and clock
// whose handler counts its runs by order.
func newCountingWorker(t *testing.T, e env, rec *recorder, runs []atomic.Int32, tune ...func(*worker.Config)) *worker.Client {
	t.Helper()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		runs[j.Args.Order].Add(1)
		return nil
	}))
	return newWorker(t, e, reg, rec, func(c *worker.Config) {
		for _, f := range tune {
			f(c)
		}
	})
}

// startLater starts w, made by newCountingWorker, and stops it when the test
// ends.
func startLater(t *testing.T, w *worker.Client) {
	t.Helper()
	testkit.Start(t, w)
}
