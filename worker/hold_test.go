package worker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// writesOnce registers a handler that counts its runs (its effect outside
// the completion) and returns a success whose writes insert one invoice row,
// calling cut first in the completion's transaction on its first try.
func writesOnce(t *testing.T, e env, cut func(ctx context.Context, tx pgx.Tx) error) (*worker.Registry, *atomic.Int32) {
	t.Helper()
	_, err := e.Pool.Exec(t.Context(), "CREATE TABLE IF NOT EXISTS invoices (order_id int PRIMARY KEY); GRANT INSERT, SELECT ON invoices TO docket_app")
	require.NoError(t, err)
	var runs, tries atomic.Int32
	reg := worker.NewRegistry()
	require.NoError(t, worker.HandleResult(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) (worker.Result, error) {
		runs.Add(1)
		return worker.Result{WritesFunc: func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO invoices (order_id) VALUES ($1)", j.Args.Order); err != nil {
				return err
			}
			if tries.Add(1) == 1 && cut != nil {
				return cut(ctx, tx)
			}
			return nil
		}}, nil
	}))
	return reg, &runs
}

// requireRecordedOnce checks that job id succeeded at its first attempt,
// that its handler ran once, that its completion writes are there once,
// and that its history verifies.
func requireRecordedOnce(t *testing.T, e env, id int64, order int, runs *atomic.Int32) {
	t.Helper()
	ctx := t.Context()
	j, err := e.client.Jobs().Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, j.State)
	require.Equal(t, 1, j.Attempts, "the success was recorded, not turned into a retry")
	require.EqualValues(t, 1, runs.Load(), "the handler ran once")
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM invoices WHERE order_id = $1", order).Scan(&n))
	require.Equal(t, 1, n, "the completion writes are there exactly once")
	v, err := e.client.Jobs().Verify(ctx, id)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
}

// TestAConnectionCutInsideTheCompletionWritesIsRecordedOnce cuts the
// connection inside the transaction that records a success with writes (the
// backend is terminated): nothing committed, and the worker, which knows the
// handler succeeded, records the success on a new connection, with its
// writes once, rather than failing the attempt and running a job that must
// not run twice again.
func TestAConnectionCutInsideTheCompletionWritesIsRecordedOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	reg, runs := writesOnce(t, e, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT pg_terminate_backend(pg_backend_pid())")
		return err
	})
	enq, err := e.client.Enqueue(ctx, invoiceSpec(t, 7, ""))
	require.NoError(t, err)
	require.False(t, enq.Job.Repeatable)
	rec := newRecorder()
	startWorker(t, e, reg, rec, nil)
	rec.waitN(t, 1, is(worker.EventSucceeded, enq.Job.ID))
	require.Zero(t, rec.count(is(worker.EventFailed, enq.Job.ID)))
	requireRecordedOnce(t, e, enq.Job.ID, 7, runs)
}

// TestACommitCutAtCOMMITIsRecordedOnce terminates the backend at COMMIT of
// the transaction that records a success with writes (a deferred trigger of
// the writes' table), so the worker cannot tell whether it committed: it
// tries again under the same lease, first renewing it, which finds the job
// still its own, and records the success with its writes once.
func TestACommitCutAtCOMMITIsRecordedOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	reg, runs := writesOnce(t, e, nil)
	_, err := e.Pool.Exec(ctx, `
		CREATE SEQUENCE public.invoice_commits;
		GRANT USAGE ON SEQUENCE public.invoice_commits TO docket_app;
		CREATE FUNCTION public.cut_first_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
		    IF nextval('public.invoice_commits') = 1 THEN
		        PERFORM pg_terminate_backend(pg_backend_pid());
		    END IF;
		    RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER cut_first_commit AFTER INSERT ON public.invoices
		    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.cut_first_commit();`)
	require.NoError(t, err)
	enq, err := e.client.Enqueue(ctx, invoiceSpec(t, 8, ""))
	require.NoError(t, err)
	rec := newRecorder()
	startWorker(t, e, reg, rec, nil)
	rec.waitN(t, 1, is(worker.EventSucceeded, enq.Job.ID))
	requireRecordedOnce(t, e, enq.Job.ID, 8, runs)
}

// outage makes every write that finishes or fails a claimed job fail at
// commit while public.outage has a row: the database refusing the worker's
// outcomes as an unreachable one would.
func outage(t *testing.T, e env) (end func()) {
	t.Helper()
	ctx := t.Context()
	_, err := e.Pool.Exec(ctx, `
		CREATE TABLE public.outage (on_since integer);
		INSERT INTO public.outage VALUES (1);
		CREATE FUNCTION public.refuse_outcomes() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
		BEGIN
		    IF OLD.state = 'claimed' AND NEW.state <> 'claimed' AND EXISTS (SELECT 1 FROM public.outage) THEN
		        RAISE EXCEPTION 'the database is away';
		    END IF;
		    RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER refuse_outcomes AFTER UPDATE ON docket.jobs
		    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.refuse_outcomes();`)
	require.NoError(t, err)
	return func() {
		_, err := e.Pool.Exec(context.Background(), "DELETE FROM public.outage")
		require.NoError(t, err)
	}
}

// TestOutcomesAreHeldThroughAnOutage has the database refuse a batch's
// successes and two failures for a while: the worker holds them and records
// them when it can, instead of leaving the jobs to expire into uncertain
// though it knew what happened. Each handler runs once, and the logs tell
// the spell as one: a warning when the first outcome is held, and one that
// sums up the spell when the last is recorded, not a line per job.
func TestOutcomesAreHeldThroughAnOutage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	end := outage(t, e)
	var runs atomic.Int32
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		runs.Add(1)
		if j.Args.Mode == "fail" {
			return errors.New("the gateway said no")
		}
		return nil
	}))
	ok1, err := e.client.Enqueue(ctx, invoiceSpec(t, 1, ""))
	require.NoError(t, err)
	ok2, err := e.client.Enqueue(ctx, invoiceSpec(t, 2, ""))
	require.NoError(t, err)
	bad1, err := e.client.Enqueue(ctx, invoiceSpec(t, 3, "fail"))
	require.NoError(t, err)
	bad2, err := e.client.Enqueue(ctx, invoiceSpec(t, 4, "fail"))
	require.NoError(t, err)
	rec := newRecorder()
	logs := &lockedBuffer{}
	startWorker(t, e, reg, rec, func(c *worker.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	// Every outcome failed to be recorded at least once, and is held.
	rec.waitN(t, 4, func(ev worker.Event) bool { return ev.Type == worker.EventError })
	rec.waitN(t, 1, is(worker.EventError, bad1.Job.ID))
	rec.waitN(t, 1, is(worker.EventError, bad2.Job.ID))
	for _, id := range []int64{ok1.Job.ID, ok2.Job.ID, bad1.Job.ID, bad2.Job.ID} {
		require.Equal(t, jobs.Claimed, jobState(t, e.Pool, id), "nothing recorded during the outage")
	}
	end()
	rec.waitN(t, 1, is(worker.EventSucceeded, ok1.Job.ID))
	rec.waitN(t, 1, is(worker.EventSucceeded, ok2.Job.ID))
	rec.waitN(t, 1, is(worker.EventFailed, bad1.Job.ID))
	rec.waitN(t, 1, is(worker.EventFailed, bad2.Job.ID))
	require.Equal(t, jobs.Succeeded, jobState(t, e.Pool, ok1.Job.ID))
	require.Equal(t, jobs.Succeeded, jobState(t, e.Pool, ok2.Job.ID))
	for _, id := range []int64{bad1.Job.ID, bad2.Job.ID} {
		failed, err := e.client.Jobs().Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.Queued, failed.State, "a retryable failure, recorded late")
		require.Equal(t, 1, failed.Attempts)
		require.Contains(t, failed.Diagnostic, "the gateway said no")
	}
	require.EqualValues(t, 4, runs.Load(), "each handler ran once")

	// The failures were held in one spell: one warning opened it, one
	// summed it up, naming both jobs.
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "recording an outcome failed"), out)
	require.Equal(t, 1, strings.Count(out, "held outcomes settled"), out)
	require.Contains(t, out, "held=2 recorded=2 late=0 refused=0 abandoned=0", out)
	require.Contains(t, out, fmt.Sprint(bad1.Job.ID), out)
	require.Contains(t, out, fmt.Sprint(bad2.Job.ID), out)
}

// TestALongSpellNamesEveryJobItHeld holds more outcomes in one spell than
// one line names: every job is still named at WARN, the first ones as
// their line fills while the outage lasts, the rest in the summary, so an
// operator searching the log for a job finds its held outcome.
func TestALongSpellNamesEveryJobItHeld(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	end := outage(t, e)
	const n = 64 // more than a line names
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error {
		return errors.New("the gateway said no") // a failure is held job by job
	}))
	var ids []int64
	for i := range n {
		enq, err := e.client.Enqueue(ctx, invoiceSpec(t, i+1, "fail"))
		require.NoError(t, err)
		ids = append(ids, enq.Job.ID)
	}
	rec := newRecorder()
	logs := &lockedBuffer{}
	startWorker(t, e, reg, rec, func(c *worker.Config) {
		c.Queues = map[string]int{jobs.DefaultQueue: n}
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	for _, id := range ids {
		rec.waitN(t, 1, is(worker.EventError, id))
	}
	end()
	for _, id := range ids {
		rec.waitN(t, 1, is(worker.EventFailed, id))
	}

	named := map[int64]int{}
	lists := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		m := jobsList.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		lists++
		for _, f := range strings.Fields(m[1]) {
			var id int64
			_, err := fmt.Sscan(f, &id)
			require.NoError(t, err)
			named[id]++
		}
	}
	require.GreaterOrEqual(t, lists, 2, "a full line, then the summary:\n%s", logs.String())
	for _, id := range ids {
		require.Equal(t, 1, named[id], "job %d is named once at WARN:\n%s", id, logs.String())
	}
	require.Contains(t, logs.String(), fmt.Sprintf("held=%d recorded=%d", n, n))
}

// jobsList finds the jobs a WARN line of held outcomes names.
var jobsList = regexp.MustCompile(`level=WARN .* jobs="?\[([\d ]*)\]`)

// lockedBuffer is a bytes.Buffer a worker's goroutines may log into.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestEveryWorkerSweeps runs two workers with a short sweep period, both
// sweeping, and shows an expired lease they both see moved on once (their
// sweeps skip what the other holds locked). That a dead worker's leases are
// swept in time whoever led River is shown by the fault suite's kill
// scenario (integration/faults), which kills the worker that led and starts
// another, which must not wait for the dead leader's term to end.
func TestEveryWorkerSweeps(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	enq, err := e.client.Enqueue(ctx, invoiceSpec(t, 1, ""))
	require.NoError(t, err)
	// An external holder takes the job and vanishes.
	held, err := e.client.Jobs().Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, held, 1)
	e.Clock.Advance(jobs.DefaultLease + time.Second)

	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error { return nil }))
	var sweeps [2]atomic.Int32
	for i := range sweeps {
		rec := newRecorder()
		startWorker(t, e, reg, rec, func(c *worker.Config) {
			c.SweepEvery = 10 * time.Millisecond
			c.Queues = map[string]int{"elsewhere": 1}
			c.OnEvent = func(ev worker.Event) {
				if ev.Type == worker.EventSweep && ev.Sweep == worker.SweepLeases {
					sweeps[i].Add(1)
				}
				rec.add(ev)
			}
		})
		rec.waitN(t, 2, func(ev worker.Event) bool { return ev.Type == worker.EventSweep && ev.Sweep == worker.SweepLeases })
	}
	require.Positive(t, sweeps[0].Load())
	require.Positive(t, sweeps[1].Load())
	j, err := e.client.Jobs().Get(ctx, enq.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Uncertain, j.State, "moved on once, by whichever swept first")
	v, err := e.client.Jobs().Verify(ctx, enq.Job.ID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
	require.Equal(t, 2, v.Events, "queued; claimed and uncertain: one move, one event")
}
