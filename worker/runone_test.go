package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

var (
	errDeclined = errors.New("card declined")
	errBusy     = errors.New("gateway busy")
	errLost     = errors.New("no answer")
)

var receiptKind = jobs.MustKind[Invoice]("billing.receipt", 1)

// runOneSetup returns an env and a client, never started, that runs the
// invoice handler as app; the handler answers by the payload's mode.
func runOneSetup(t *testing.T, rec *recorder) (env, *worker.Client) {
	t.Helper()
	e := setup(t)
	reg := worker.NewRegistry()
	require.NoError(t, worker.HandleResult(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) (worker.Result, error) {
		switch j.Args.Mode {
		case "decline":
			return worker.Result{}, worker.Fail(jobs.ClassPermanent, errDeclined)
		case "busy":
			return worker.Result{}, errBusy
		case "later":
			return worker.Result{}, worker.RetryAfter(time.Hour, errBusy)
		case "lost":
			return worker.Result{}, worker.Fail(jobs.ClassUncertain, errLost)
		case "panic":
			panic("the handler's bug")
		case "cancelled":
			_, err := e.client.Jobs().Cancel(ctx, j.ID, "withdrawn while it ran")
			return worker.Result{}, err
		case "bad writes":
			return worker.Result{WritesFunc: func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "SELECT 1/0")
				return err
			}}, nil
		}
		return worker.Result{
			Value: mustJSON(map[string]int{"charged": j.Args.Order}),
			WritesFunc: func(ctx context.Context, tx pgx.Tx) error {
				spec, err := receiptKind.Spec(j.Args)
				if err != nil {
					return err
				}
				_, err = e.client.EnqueueTx(ctx, tx, spec)
				return err
			},
		}, nil
	}, worker.HandlerOptions{Revision: "r7", Lease: time.Minute}))
	return e, newWorker(t, e, reg, rec, nil)
}

func enqueue(t *testing.T, e env, spec jobs.Spec) int64 {
	t.Helper()
	enq, err := e.client.Enqueue(t.Context(), spec)
	require.NoError(t, err)
	return enq.Job.ID
}

// A success is recorded with its result and the writes of its completion
// transaction, under a claim like the worker's, and the worker's events are
// reported.
func TestRunJobRecordsSuccessWithItsWrites(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	e, w := runOneSetup(t, rec)
	id := enqueue(t, e, invoiceSpec(t, 7, ""))

	run, err := w.RunJob(t.Context(), id)
	require.NoError(t, err)
	require.NoError(t, run.Err)
	require.Equal(t, worker.EventSucceeded, run.Outcome)
	require.Equal(t, jobs.Succeeded, run.Job.State)
	require.Equal(t, 1, run.Job.Attempts)
	require.JSONEq(t, `{"charged": 7}`, string(run.Job.Result))
	require.Equal(t, testkit.T0, run.Job.FinishedAt, "the fake clock's instant")
	history, err := e.client.Jobs().History(t.Context(), id)
	require.NoError(t, err)
	require.Len(t, history, 2, "one event per attempt")
	require.Equal(t, jobs.Claimed, history[1].From)
	require.Equal(t, jobs.Succeeded, history[1].To)
	require.Equal(t, app, history[1].ClaimedBy)
	require.Equal(t, app, history[1].Actor)

	receipts, err := e.client.Jobs().List(t.Context(), jobs.Filter{Kind: receiptKind.Name()})
	require.NoError(t, err)
	require.Len(t, receipts, 1, "the writes committed with the success")
	require.Equal(t, 1, rec.count(is(worker.EventStarted, id)))
	require.Equal(t, 1, rec.count(is(worker.EventSucceeded, id)))

	v, err := e.client.Jobs().Verify(t.Context(), id)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
}

// Each failure class ends the job where the worker would, and the run
// carries the handler's own error.
func TestRunJobClassifiesFailuresAsTheWorkerDoes(t *testing.T) {
	t.Parallel()
	e, w := runOneSetup(t, nil)
	for _, c := range []struct {
		mode  string
		state jobs.State
		err   error
	}{
		{"decline", jobs.Failed, errDeclined},
		{"busy", jobs.Queued, errBusy},
		{"lost", jobs.Uncertain, errLost},
		{"panic", jobs.Queued, worker.ErrHandlerPanic},
	} {
		id := enqueue(t, e, invoiceSpec(t, 1, c.mode))
		run, err := w.RunJob(t.Context(), id)
		require.NoError(t, err, c.mode)
		require.Equal(t, worker.EventFailed, run.Outcome, c.mode)
		require.Equal(t, c.state, run.Job.State, c.mode)
		require.ErrorIs(t, run.Err, c.err, c.mode)
		require.Contains(t, run.Job.Diagnostic, "[r7] ", c.mode)
	}

	id := enqueue(t, e, invoiceSpec(t, 1, "panic"))
	run, err := w.RunJob(t.Context(), id)
	require.NoError(t, err)
	require.ErrorContains(t, run.Err, "the handler's bug")

	id = enqueue(t, e, invoiceSpec(t, 1, "bad writes"))
	run, err = w.RunJob(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, run.Job.State)
	require.ErrorContains(t, run.Err, "division by zero")
	require.Contains(t, run.Job.Diagnostic, "completion writes")
}

// RunJob runs the job through the client's own run, the code a started
// worker's batch runs for each job, which hands back the handler's error
// in its outcome: it builds no second client (no River client, no registry)
// per call, however the attempt ends.
func TestRunJobRunsOnTheClientItselfAndBuildsNoSecondClient(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	e, w := runOneSetup(t, rec)
	built := worker.RiverClients(e.API)
	require.Equal(t, int64(2), built, "the test's insert-only client and w")

	for _, mode := range []string{"", "decline", "busy", "panic", "bad writes"} {
		id := enqueue(t, e, invoiceSpec(t, 1, mode))
		run, err := w.RunJob(t.Context(), id)
		require.NoError(t, err, mode)
		if mode == "" {
			require.Equal(t, worker.EventSucceeded, run.Outcome)
			continue
		}
		require.Equal(t, worker.EventFailed, run.Outcome, mode)
		require.Error(t, run.Err, mode)
	}
	// A job that requests an output, whose handler records none: the
	// attempt fails with the record's refusal.
	s := invoiceSpec(t, 2, "")
	s.Output = jobs.OutputRef{Asset: "invoice/2"}
	id := enqueue(t, e, s)
	run, err := w.RunJob(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, worker.EventFailed, run.Outcome)
	require.ErrorIs(t, run.Err, db.ErrInvalidArgument)
	require.ErrorContains(t, run.Err, "must record the output it produced")
	require.Equal(t, jobs.Queued, run.Job.State)

	require.Equal(t, built, worker.RiverClients(e.API), "RunJob built no client")
	require.Equal(t, 6, rec.count(func(ev worker.Event) bool { return ev.Type == worker.EventStarted }),
		"each attempt reported once, to the client's own OnEvent")
}

// A retry is due when the fake clock says so: RunJob refuses it before,
// and runs it once the clock has moved to its AvailableAt.
func TestRunJobRunsARetryWhenTheClockAllows(t *testing.T) {
	t.Parallel()
	e, w := runOneSetup(t, nil)
	id := enqueue(t, e, invoiceSpec(t, 3, "later"))

	run, err := w.RunJob(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, run.Job.State)
	require.Equal(t, testkit.T0.Add(time.Hour), run.Job.AvailableAt, "RetryAfter's wait")

	before := testkit.Snapshot(t, e.Pool, "docket.jobs", "docket.job_events")
	_, err = w.RunJob(t.Context(), id)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "not due until")
	require.Equal(t, before, testkit.Snapshot(t, e.Pool, "docket.jobs", "docket.job_events"))

	e.Clock.Set(run.Job.AvailableAt)
	run, err = w.RunJob(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, run.Job.State, "still later")
	require.Equal(t, 2, run.Job.Attempts)
}

// A job cancelled while its handler ran is not the handler's to complete:
// the success is refused as a started worker's would be.
func TestRunJobReportsALostLease(t *testing.T) {
	t.Parallel()
	e, w := runOneSetup(t, nil)
	id := enqueue(t, e, invoiceSpec(t, 1, "cancelled"))

	run, err := w.RunJob(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, worker.EventLeaseLost, run.Outcome)
	require.Equal(t, jobs.Cancelled, run.Job.State)
	require.Error(t, run.Err)
}

// What RunJob cannot run it refuses, saying why and changing nothing.
func TestRunJobRefusals(t *testing.T) {
	t.Parallel()
	e, w := runOneSetup(t, nil)
	ctx := t.Context()
	done := enqueue(t, e, invoiceSpec(t, 1, ""))
	_, err := w.RunJob(ctx, done)
	require.NoError(t, err)

	other, err := worker.NewClient(e.API, worker.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	unknownKind := enqueue(t, e, jobs.Spec{Kind: "billing.other", Payload: mustJSON(1)})
	external := invoiceSpec(t, 2, "")
	external.External = true
	externalID := enqueue(t, e, external)
	held := enqueue(t, e, invoiceSpec(t, 3, ""))
	_, ok, err := e.client.Jobs().ClaimID(ctx, held, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	future := invoiceSpec(t, 4, "")
	future.AvailableAt = testkit.T0.Add(time.Minute)
	futureID := enqueue(t, e, future)

	v2, err := jobs.MustKind[Invoice]("billing.invoice", 2).Spec(Invoice{Order: 6})
	require.NoError(t, err)
	newer := enqueue(t, e, v2)

	e.Allow(t, testkit.Grants(testkit.Vic, project, access.JobCreate)...)
	noClaim := newWorker(t, e, mustRegistry(t), nil, func(c *worker.Config) { c.Actor = testkit.Vic })
	due := enqueue(t, e, invoiceSpec(t, 5, ""))

	before := testkit.Snapshot(t, e.Pool, "docket.jobs", "docket.job_events")
	for _, c := range []struct {
		name string
		w    *worker.Client
		id   int64
		want error
		says string
	}{
		{"no handlers", other, due, db.ErrInvalidArgument, "no handler to run"},
		{"unknown job", w, 1 << 40, db.ErrNotFound, ""},
		{"finished", w, done, db.ErrTerminal, "succeeded"},
		{"no handler for the kind", w, unknownKind, db.ErrInvalidArgument, "billing.other"},
		{"external", w, externalID, db.ErrInvalidArgument, "External"},
		{"payload schema not decoded", w, newer, db.ErrRefusedRevision, "schema 2"},
		{"held", w, held, db.ErrInvalidArgument, "held by a claim of svc:app"},
		{"not due", w, futureID, db.ErrInvalidArgument, "not due until 2026-11-02T09:01:00Z"},
		{"no job.claim", noClaim, due, db.ErrNotPermitted, "job.claim"},
	} {
		_, err := c.w.RunJob(ctx, c.id)
		require.ErrorIs(t, err, c.want, c.name)
		require.ErrorContains(t, err, c.says, c.name)
	}
	require.Equal(t, before, testkit.Snapshot(t, e.Pool, "docket.jobs", "docket.job_events"))
}

func mustRegistry(t *testing.T) *worker.Registry {
	t.Helper()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error { return nil }))
	return reg
}
