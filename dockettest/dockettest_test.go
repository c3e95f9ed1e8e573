package dockettest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/dockettest"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// app enqueues and runs the jobs of project acme; sam holds nothing.
const project, ana, app, sam = testkit.Acme, testkit.Ana, testkit.App, testkit.Sam

type Invoice struct {
	Order int    `json:"order"`
	Mode  string `json:"mode,omitempty"`
}

type Receipt struct {
	Order int `json:"order"`
}

var (
	invoiceKind = jobs.MustKind[Invoice]("billing.invoice", 2)
	receiptKind = jobs.MustKind[Receipt]("billing.receipt", 1)
)

var errBusy = errors.New("gateway busy")

type env struct {
	testkit.Env
	w *worker.Client // enqueues as app in acme and runs the invoice handler, never started
}

// setup returns a database whose API runs as an application login
// (docket_app), and a worker client of app on a fake clock.
func setup(t *testing.T) env {
	t.Helper()
	e := testkit.Setup(t, ana, []string{project, testkit.Other},
		testkit.Join(testkit.Grants(app, project, access.JobCreate, access.JobClaim),
			testkit.Grants(app, testkit.Other, access.JobCreate))...)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		if j.Args.Mode == "busy" && j.Attempts == 1 {
			return errBusy
		}
		return nil
	}))
	w, err := worker.NewClient(e.API, worker.Config{Project: project, Actor: app, Registry: reg, Clock: e.Clock, Logger: testkit.Logger})
	require.NoError(t, err)
	return env{Env: e, w: w}
}

func (e env) spec(t *testing.T, order int, queue string, priority int) jobs.Spec {
	t.Helper()
	s, err := invoiceKind.Spec(Invoice{Order: order})
	require.NoError(t, err)
	s.Queue, s.Priority = queue, priority
	return s
}

func (e env) enqueueTx(t *testing.T, tx pgx.Tx, spec jobs.Spec) int64 {
	t.Helper()
	enq, err := e.w.EnqueueTx(t.Context(), tx, spec)
	require.NoError(t, err)
	return enq.Job.ID
}

func TestRequireEnqueuedTxSeesTheTransactionsJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	reader := e.w.Jobs()

	tx, err := e.API.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	id := e.enqueueTx(t, tx, e.spec(t, 42, "billing", 2))

	job := dockettest.RequireEnqueuedTx(ctx, t, reader, tx, invoiceKind, &dockettest.EnqueuedOpts{
		Queue: "billing", Priority: 2, State: jobs.Queued, AvailableAt: testkit.T0, MaxAttempts: jobs.DefaultRetryPolicy.MaxAttempts,
	})
	require.Equal(t, id, job.ID)
	require.Equal(t, Invoice{Order: 42}, job.Args)
	dockettest.RequireNotEnqueuedTx(ctx, t, reader, tx, receiptKind, nil)
	dockettest.RequireNotEnqueuedTx(ctx, t, reader, tx, invoiceKind, &dockettest.EnqueuedOpts{Queue: "default"})

	// Not committed: the pool does not see it; rolled back, it never was.
	dockettest.RequireNotEnqueued(ctx, t, reader, invoiceKind, nil)
	require.NoError(t, tx.Rollback(ctx))
	dockettest.RequireNotEnqueued(ctx, t, reader, invoiceKind, nil)

	_, err = e.w.Enqueue(ctx, e.spec(t, 43, "billing", 1))
	require.NoError(t, err)
	require.Equal(t, 43, dockettest.RequireEnqueued(ctx, t, reader, invoiceKind, nil).Args.Order)
}

func TestRequireEnqueuedFailuresSayWhy(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	reader := e.w.Jobs()

	require.Contains(t, failure(t, func(tb testing.TB) {
		dockettest.RequireEnqueued(ctx, tb, reader, invoiceKind, nil)
	}), "no job of kind billing.invoice (payload schema 2) in project acme visible to svc:app")

	_, err := e.w.Enqueue(ctx, e.spec(t, 1, "billing", 1))
	require.NoError(t, err)
	require.Contains(t, failure(t, func(tb testing.TB) {
		dockettest.RequireEnqueued(ctx, tb, reader, invoiceKind, &dockettest.EnqueuedOpts{Queue: "mail", Priority: 3})
	}), `does not match: queue is "billing", want "mail"; priority is 1, want 3`)
	require.Contains(t, failure(t, func(tb testing.TB) {
		dockettest.RequireNotEnqueued(ctx, tb, reader, invoiceKind, &dockettest.EnqueuedOpts{Queue: "billing"})
	}), "want no job of kind billing.invoice matching the options, found 1")

	_, err = e.w.Enqueue(ctx, e.spec(t, 2, "billing", 3))
	require.NoError(t, err)
	require.Contains(t, failure(t, func(tb testing.TB) {
		dockettest.RequireEnqueued(ctx, tb, reader, invoiceKind, nil)
	}), "2 jobs of kind billing.invoice match, want one")
	require.Equal(t, 2, dockettest.RequireEnqueued(ctx, t, reader, invoiceKind, &dockettest.EnqueuedOpts{Priority: 3}).Args.Order,
		"options single one out")

	// Another payload schema of the kind is not T's.
	v1 := jobs.MustKind[Invoice]("billing.invoice", 1)
	require.Contains(t, failure(t, func(tb testing.TB) {
		dockettest.RequireEnqueued(ctx, tb, reader, v1, nil)
	}), "no job of kind billing.invoice (payload schema 1)")
}

// The assertions read as the client's actor: a job it may not see is not
// there, and the jobs of another project are not the client's.
func TestRequireEnqueuedReadsAsTheActor(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	_, err := e.w.Enqueue(ctx, e.spec(t, 1, "billing", 1))
	require.NoError(t, err)

	blind, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: sam, Clock: e.Clock})
	require.NoError(t, err)
	dockettest.RequireNotEnqueued(ctx, t, blind, invoiceKind, nil)
	other, err := jobs.NewClient(e.API, jobs.Config{Project: testkit.Other, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	dockettest.RequireNotEnqueued(ctx, t, other, invoiceKind, nil)
	dockettest.RequireEnqueued(ctx, t, e.w.Jobs(), invoiceKind, nil)
}

func TestRequireManyEnqueuedChecksOrderAndCount(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	reader := e.w.Jobs()
	tx, err := e.API.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()

	e.enqueueTx(t, tx, e.spec(t, 1, "billing", 1))
	receipt, err := receiptKind.Spec(Receipt{Order: 1})
	require.NoError(t, err)
	e.enqueueTx(t, tx, receipt)
	e.enqueueTx(t, tx, e.spec(t, 2, "billing", 4))
	other, err := jobs.MustKind[int]("billing.audit", 1).Spec(7)
	require.NoError(t, err)
	e.enqueueTx(t, tx, other) // a kind not asked about

	got := dockettest.RequireManyEnqueuedTx(ctx, t, reader, tx, []dockettest.Expected{
		dockettest.Expect(invoiceKind, &dockettest.EnqueuedOpts{Queue: "billing"}),
		dockettest.Expect(receiptKind, nil),
		dockettest.Expect(invoiceKind, &dockettest.EnqueuedOpts{Priority: 4}),
	})
	require.Len(t, got, 3)
	require.Equal(t, []string{"billing.invoice", "billing.receipt", "billing.invoice"}, []string{got[0].Kind, got[1].Kind, got[2].Kind})

	msg := failure(t, func(tb testing.TB) {
		dockettest.RequireManyEnqueuedTx(ctx, tb, reader, tx, []dockettest.Expected{
			dockettest.Expect(receiptKind, nil),
			dockettest.Expect(invoiceKind, &dockettest.EnqueuedOpts{Priority: 2}),
		})
	})
	require.Contains(t, msg, "#1: job 1 is of kind billing.invoice, want billing.receipt")
	require.Contains(t, msg, "#2: job 2 is of kind billing.receipt, want billing.invoice")
	require.Contains(t, msg, "#3: job 3 of kind billing.invoice is not expected")

	require.NoError(t, tx.Commit(ctx))
	dockettest.RequireManyEnqueued(ctx, t, reader, []dockettest.Expected{
		dockettest.Expect(receiptKind, nil),
	})
}

// WorkJob runs one job's handler as the worker would, on the fake clock: a
// retry is due only once the test moves the clock.
func TestWorkRunsOneJobOnTheFakeClock(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()

	busy, err := invoiceKind.Spec(Invoice{Order: 1, Mode: "busy"})
	require.NoError(t, err)
	run := dockettest.Work(ctx, t, e.w, busy)
	require.Equal(t, worker.EventFailed, run.Outcome)
	require.ErrorIs(t, run.Err, errBusy)
	require.Equal(t, jobs.Queued, run.Job.State)
	require.True(t, run.Job.AvailableAt.After(testkit.T0), "a backoff by the fake clock")

	require.Contains(t, failure(t, func(tb testing.TB) { dockettest.WorkJob(ctx, tb, e.w, run.Job.ID) }), "not due until")

	e.Clock.Set(run.Job.AvailableAt)
	run = dockettest.WorkJob(ctx, t, e.w, run.Job.ID)
	require.NoError(t, run.Err)
	require.Equal(t, jobs.Succeeded, run.Job.State)
	require.Equal(t, 2, run.Job.Attempts)
	require.Equal(t, e.Clock.Now(), run.Job.FinishedAt)
}

// failure runs fn with a testing.TB that records a failure instead of
// failing t, and returns the failure's message, or "" when fn passed.
func failure(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	ft := &fakeT{TB: t}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fn(ft)
	}()
	wg.Wait()
	ft.mu.Lock()
	defer ft.mu.Unlock()
	require.NotEmpty(t, ft.msg, "the assertion passed")
	return ft.msg
}

// fakeT is a testing.TB whose Fatal records the message and ends the
// goroutine, as testing's does.
type fakeT struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) { f.fail(fmt.Sprintf(format, args...)) }

func (f *fakeT) Fatal(args ...any) { f.fail(fmt.Sprint(args...)) }

func (f *fakeT) fail(msg string) {
	f.mu.Lock()
	f.msg = msg
	f.mu.Unlock()
	runtime.Goexit()
}
