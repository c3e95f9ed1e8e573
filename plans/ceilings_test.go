package plans_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/budgets"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
)

// jobsAs is a jobs client of acme acting as app, on the test's clock.
func jobsAs(t testing.TB, e env) *jobs.Client {
	t.Helper()
	jc, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	return jc
}

// inFlight returns the run's admitted steps whose jobs have not ended.
func inFlight(t testing.TB, e env, run int64) []plans.RunStep {
	t.Helper()
	steps, err := e.app.Steps(context.Background(), run)
	require.NoError(t, err)
	var out []plans.RunStep
	for _, s := range steps {
		if s.State == plans.StepAdmitted {
			out = append(out, s)
		}
	}
	return out
}

// ceilingsSnapshot renders the runs, their steps, budget events and jobs,
// to show a refusal changed nothing.
func ceilingsSnapshot(t testing.TB, e env) string {
	t.Helper()
	return testkit.Snapshot(t, e.Pool, "docket.runs", "docket.run_steps", "docket.run_budget_events", "docket.jobs")
}

// TestASpendReportIsWholeMinorUnitsOrRefused: a step's result whose spend
// report is not whole numbers of 0 or more (money in integer minor units)
// is refused as invalid input, alone or in a batch, and changes nothing; a
// good report is counted.
func TestASpendReportIsWholeMinorUnitsOrRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	jc := jobsAs(t, e)
	p := plans.Plan{Steps: []plans.Step{
		{ID: "a", Kind: "b.pay", Args: []plans.Arg{}},
		{ID: "b", Kind: "b.pay", Terminal: true, Args: []plans.Arg{}},
	}}
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p, InputTrusted: true,
		Budget: budgets.Budget{MaxMoney: budgets.Money{Amount: 1000, Currency: "EUR"}}})
	require.NoError(t, err)
	fl := inFlight(t, e, run.ID)
	require.Len(t, fl, 2)
	ja, ok, err := jc.ClaimID(ctx, fl[0].JobID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	jb, ok, err := jc.ClaimID(ctx, fl[1].JobID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	before := ceilingsSnapshot(t, e)
	for _, bad := range []string{
		`{"spent": {"money": 999.5}}`,
		`{"spent": {"money": -1}}`,
		`{"spent": {"money": "12"}}`,
		`{"spent": {"effects": 1.25}}`,
		`{"spent": {"effects": null}}`,
		`{"spent": {"cost": 12}}`,
		`{"spent": 12}`,
		`{"spent": {"money": 1e30}}`,
	} {
		_, err := jc.Complete(ctx, ja.Lease(), json.RawMessage(bad), nil)
		require.ErrorIs(t, err, db.ErrInvalidArgument, bad)
		require.ErrorContains(t, err, "invalid spend report", bad)
		errs, err := jc.CompleteMany(ctx, []jobs.Completion{{Lease: ja.Lease(), Result: json.RawMessage(bad)}})
		require.NoError(t, err, "a bad report fails its element, not the batch: %s", bad)
		require.ErrorIs(t, errs[0], db.ErrInvalidArgument, bad)
		require.Equal(t, before, ceilingsSnapshot(t, e), "%s changed nothing", bad)
	}
	// In a batch, the good element completes beside the refused one.
	errs, err := jc.CompleteMany(ctx, []jobs.Completion{
		{Lease: ja.Lease(), Result: json.RawMessage(`{"spent": {"money": 999.5}}`)},
		{Lease: jb.Lease(), Result: json.RawMessage(`{"spent": {"money": 120, "effects": 1}}`)},
	})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], db.ErrInvalidArgument)
	require.NoError(t, errs[1])
	_, err = jc.Complete(ctx, ja.Lease(), json.RawMessage(`{"spent": {"money": 999}}`), nil)
	require.NoError(t, err)
	got, err := e.app.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, budgets.Spent{Money: 1119, Effects: 1}, got.Spent)
}
