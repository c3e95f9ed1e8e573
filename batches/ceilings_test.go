package batches_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/budgets"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/plans"
)

// TestAnItemInFlightNeedsAttention: a batch whose source was read to its
// end, with an item still in flight, needs attention; once nothing is in
// flight and nothing failed, it does not.
func TestAnItemInFlightNeedsAttention(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	b, err := e.app.Open(ctx, project, "stuck", twoSteps)
	require.NoError(t, err)
	r, err := e.app.Run(ctx, b.ID, numbers{1}, 10, 0)
	require.NoError(t, err)
	require.True(t, r.SourceDone)
	require.Equal(t, 1, r.InFlight)
	require.Equal(t, batches.Running, r.Status)
	require.True(t, r.NeedsAttention(), "read to its end, one item stuck in flight")

	events := startWorker(t, e, echo, echo)
	r = waitFor(t, e, b.ID, events, func(r batches.Report) bool { return r.Status == batches.Completed })
	require.False(t, r.NeedsAttention())
}

// TestEachItemRunsUnderItsOwnBudget: a batch's item ceilings are each
// item's run's own; an item at its ceiling is exhausted alone, counted in
// the census, and needs attention; a cancelled one leaves the count as it
// settles. Opening the batch again with other ceilings is refused.
func TestEachItemRunsUnderItsOwnBudget(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	ceilings := budgets.Budget{MaxSteps: 1, MaxDuration: time.Hour}
	b, err := e.app.Open(ctx, project, "capped", twoSteps, batches.ItemBudget(ceilings))
	require.NoError(t, err)
	require.Equal(t, ceilings, b.ItemBudget)
	_, err = e.app.Open(ctx, project, "capped", twoSteps, batches.ItemBudget(budgets.Budget{MaxSteps: 2}))
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "item ceilings")
	_, err = e.app.Open(ctx, project, "bad", twoSteps, batches.ItemBudget(budgets.Budget{MaxSteps: -1}))
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	again, err := e.app.Open(ctx, project, "capped", twoSteps, batches.ItemBudget(ceilings))
	require.NoError(t, err, "the same ceilings resume it")
	require.Equal(t, b.ID, again.ID)

	events := startWorker(t, e, echo, echo)
	_, err = e.app.Run(ctx, b.ID, numbers{3}, 10, 0)
	require.NoError(t, err)
	r := waitFor(t, e, b.ID, events, func(r batches.Report) bool { return r.Exhausted == 3 })
	require.Equal(t, 3, r.InFlight, "exhausted items are in flight: not settled")
	require.Equal(t, 0, r.Failed)
	require.True(t, r.NeedsAttention())

	items, err := e.app.NeedingAttention(ctx, b.ID, "", 10)
	require.NoError(t, err)
	require.Len(t, items, 3)
	pc, err := plans.NewClient(e.API, plans.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	for _, it := range items {
		run, err := pc.Get(ctx, it.RunID)
		require.NoError(t, err)
		require.Equal(t, plans.Exhausted, run.Status)
		require.Equal(t, ceilings, run.Budget, "the item's run has the batch's item ceilings")
		require.Contains(t, run.Exhausted, "steps: 1 of 1 admitted")
	}
	var distinctRuns int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(DISTINCT run_id) FROM docket.batch_items WHERE batch_id = $1`, b.ID).
		Scan(&distinctRuns))
	require.Equal(t, 3, distinctRuns, "a budget each: one item's ceiling is not another's")

	_, err = pc.Cancel(ctx, items[0].RunID, "not worth it")
	require.NoError(t, err)
	r, err = e.app.Get(ctx, b.ID)
	require.NoError(t, err)
	require.Equal(t, 2, r.Exhausted)
	require.Equal(t, 2, r.InFlight)
	require.Equal(t, 1, r.Failed)
	var census string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT format('%s/%s/%s', exhausted, in_flight, failed) FROM docket.batches WHERE id = $1`,
		b.ID).Scan(&census))
	require.Equal(t, "2/2/1", census)
}
