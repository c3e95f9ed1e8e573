package worker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// TestAHandlerOverItsBudgetExhaustsTheJob: a job with a money ceiling of
// 1,000 EUR whose handler reports 1,500 spent and fails ends exhausted, not
// failed and not retried; raised to 3,000 it runs again, spends 700 and
// succeeds, and the job holds 2,200 spent. Its history verifies.
func TestAHandlerOverItsBudgetExhaustsTheJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.Allow(t, testkit.Grants(app, project, access.BudgetManage)...)
	ctx := context.Background()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		if j.Attempts == 1 {
			// Two charges of 750, then the gateway fails.
			require.NoError(t, worker.ReportSpend(ctx, jobs.Spend{Money: 750, Effects: 1}))
			require.NoError(t, worker.ReportSpend(ctx, jobs.Spend{Money: 750, Effects: 1}))
			return errors.New("declined after charging")
		}
		require.Error(t, worker.ReportSpend(ctx, jobs.Spend{Money: -1}), "a negative report is refused")
		return worker.ReportSpend(ctx, jobs.Spend{Money: 700})
	}))
	s := invoiceSpec(t, 1, "")
	s.Retry = quickRetry
	s.Budget = jobs.Budget{Money: 1000, Currency: "EUR"}
	enq, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	rec := newRecorder()
	startWorker(t, e, reg, rec, nil)

	rec.waitN(t, 1, func(ev worker.Event) bool { return ev.JobID == enq.Job.ID && ev.State == string(jobs.Exhausted) })
	j, err := e.client.Jobs().Get(ctx, enq.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Exhausted, j.State)
	require.Equal(t, jobs.Spend{Effects: 2, Money: 1500}, j.Spent)
	require.Equal(t, 1, j.Attempts, "not retried")
	require.Contains(t, j.Diagnostic, "exhausted: money: 1500 of 1000 EUR spent; the attempt failed: declined after charging")

	_, err = e.client.Jobs().Resume(ctx, j.ID, jobs.Ceilings{Money: 3000})
	require.NoError(t, err)
	rec.waitN(t, 1, is(worker.EventSucceeded, j.ID))
	j, err = e.client.Jobs().Get(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, j.State)
	require.Equal(t, jobs.Spend{Effects: 2, Money: 2200}, j.Spent)
	v, err := e.client.Jobs().Verify(ctx, j.ID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
}

// TestReportSpendOutsideAHandler is refused.
func TestReportSpendOutsideAHandler(t *testing.T) {
	t.Parallel()
	require.Error(t, worker.ReportSpend(context.Background(), jobs.Spend{Money: 1}))
}
