package plans_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// wide is n steps ready at once (w00..), and a terminal join after them all.
func wide(n int) plans.Plan {
	var p plans.Plan
	join := plans.Step{ID: "zz", Kind: "b.pay", Terminal: true, Args: []plans.Arg{}}
	for i := range n {
		id := fmt.Sprintf("w%02d", i)
		p.Steps = append(p.Steps, plans.Step{ID: id, Kind: "b.pay", Args: []plans.Arg{}})
		join.After = append(join.After, id)
	}
	p.Steps = append(p.Steps, join)
	return p
}

// finishAll claims the steps' jobs and completes them at once, released
// together on a barrier, each reporting spent.
func finishAll(t testing.TB, e env, steps []plans.RunStep, spent budgets.Spent) {
	t.Helper()
	finishAllAt(t, e, steps, spent, pgx.ReadCommitted)
}

// finishAllAt is finishAll with each completion in a transaction of
// isolation iso, retried when it fails to serialize.
func finishAllAt(t testing.TB, e env, steps []plans.RunStep, spent budgets.Spent, iso pgx.TxIsoLevel) {
	t.Helper()
	ctx := context.Background()
	jc := jobsAs(t, e)
	leases := make([]jobs.Lease, len(steps))
	for i, s := range steps {
		j, ok, err := jc.ClaimID(ctx, s.JobID, jobs.ClaimOptions{})
		require.NoError(t, err)
		require.True(t, ok)
		leases[i] = j.Lease()
	}
	res, err := budgets.Report(map[string]string{}, spent)
	require.NoError(t, err)
	start := make(chan struct{})
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, l := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				var tx pgx.Tx
				tx, errs[i] = e.API.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
				if errs[i] != nil {
					return
				}
				if _, errs[i] = jc.CompleteTx(ctx, tx, l, res); errs[i] == nil {
					errs[i] = db.Translate(tx.Commit(ctx), "test.commit")
				}
				_ = tx.Rollback(ctx)
				if !errors.Is(errs[i], db.ErrSerialization) {
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// TestAnEffectsCeilingIsExactUnderAWideReadySet: six steps ready at once
// under MaxEffects 2, each reporting one effect: two are admitted (each
// taking its slot), the others wait for a slot, and the run is exhausted
// at exactly 2 effects however the two complete, at every isolation
// level. Steps that report none
// give their slots back, and the run goes on two at a time to its end.
func TestAnEffectsCeilingIsExactUnderAWideReadySet(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	for round := range 6 {
		run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: wide(6), InputTrusted: true,
			Budget: budgets.Budget{MaxEffects: 2}})
		require.NoError(t, err)
		fl := inFlight(t, e, run.ID)
		require.Len(t, fl, 2, "round %d: two slots, two admitted", round)
		iso := []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable}[round%3]
		finishAllAt(t, e, fl, budgets.Spent{Effects: 1}, iso)
		got, err := e.app.Get(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, plans.Exhausted, got.Status)
		require.Equal(t, int64(2), got.Spent.Effects, "exactly the ceiling")
		require.Contains(t, got.Exhausted, "effects: 2 of 2")
		require.Empty(t, inFlight(t, e, run.ID))
		steps, err := e.app.Steps(ctx, run.ID)
		require.NoError(t, err)
		require.Len(t, steps, 2, "the other four were never admitted")
	}

	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: wide(6), InputTrusted: true,
		Budget: budgets.Budget{MaxEffects: 2}})
	require.NoError(t, err)
	for {
		fl := inFlight(t, e, run.ID)
		if len(fl) == 0 {
			break
		}
		require.LessOrEqual(t, len(fl), 2, "never more steps in flight than effect slots")
		finishAll(t, e, fl, budgets.Spent{})
	}
	got, err := e.app.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Succeeded, got.Status, "steps that spent nothing gave their slots back")
	require.Equal(t, int64(0), got.Spent.Effects)
}

// clockReadings returns the instants run read, as journaled, and at which
// boundary of which step.
func clockReadings(t testing.TB, e env, run int64) []string {
	t.Helper()
	rows, err := e.Pool.Query(t.Context(), `SELECT format('%s %s %s', detail ->> 'boundary', detail ->> 'step', to_char(at AT TIME ZONE 'UTC', 'HH24:MI'))
		FROM docket.run_budget_events WHERE run_id = $1 AND what = 'clock' ORDER BY id`, run)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// TestAWallClockCeilingIsReadAtStepBoundaries: a run with MaxDuration reads
// the caller's clock at each step boundary, journaled; the distance between
// the extremes it read reaching the ceiling exhausts it at the next
// admission (the step in flight was not interrupted), which is not a
// failure: cancelled, it unwinds. A run without the ceiling reads nothing.
func TestAWallClockCeilingIsReadAtStepBoundaries(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	start := e.Clock.Now()
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: chain(5), InputTrusted: true,
		Budget: budgets.Budget{MaxDuration: 10 * time.Minute}})
	require.NoError(t, err)
	e.Clock.Advance(4 * time.Minute)
	finishAll(t, e, inFlight(t, e, run.ID), budgets.Spent{})
	got, err := e.app.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Running, got.Status, "4 of 10 minutes")
	require.Equal(t, 4*time.Minute, got.Elapsed)

	e.Clock.Advance(6 * time.Minute)
	finishAll(t, e, inFlight(t, e, run.ID), budgets.Spent{})
	got, err = e.app.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Exhausted, got.Status, "10 of 10 minutes: the next step is not admitted")
	require.Contains(t, got.Exhausted, "wall clock: 00:10:00 elapsed of 00:10:00")
	require.Equal(t, 10*time.Minute, got.Elapsed)
	require.Equal(t, 10*time.Minute, got.Budget.MaxDuration)
	require.Empty(t, inFlight(t, e, run.ID))
	h := func(d time.Duration) string { return start.Add(d).UTC().Format("15:04") }
	require.Equal(t, []string{
		"admit s00000 " + h(0),
		"settle s00000 " + h(4*time.Minute), "admit s00001 " + h(4*time.Minute),
		"settle s00001 " + h(10*time.Minute), "admit s00002 " + h(10*time.Minute),
	}, clockReadings(t, e, run.ID), "every reading journaled, each the caller's instant")

	got, err = e.app.Cancel(ctx, run.ID, "too slow")
	require.NoError(t, err)
	require.Equal(t, plans.Compensated, got.Status, "exhausted is not failed: it unwinds when cancelled")

	other, err := e.app.Start(ctx, plans.Start{Project: project, Plan: chain(2), InputTrusted: true,
		Budget: budgets.Budget{MaxSteps: 10}})
	require.NoError(t, err)
	e.Clock.Advance(time.Hour)
	finishAll(t, e, inFlight(t, e, other.ID), budgets.Spent{})
	require.Empty(t, clockReadings(t, e, other.ID), "no ceiling, no reading")
}

// TestARefusalCeiling: steps that require trusted input and would get the
// run's untrusted input are refused by policy and counted. Without a
// ceiling the first refusal unwinds the run; under MaxRefusals a refusal
// stops its own branch and the run goes on, until the refusals reach the
// ceiling and exhaust it; a run whose every branch left was refused
// unwinds.
func TestARefusalCeiling(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	fromInput := []plans.Arg{{Name: "v", Source: plans.Input("v")}}
	p := plans.Plan{Steps: []plans.Step{
		{ID: "p1", Kind: "b.pay", Trusted: true, Args: fromInput},
		{ID: "p2", Kind: "b.pay", Trusted: true, Args: fromInput},
		{ID: "z", Kind: "b.pay", Terminal: true, Args: fromInput},
	}}
	input := json.RawMessage(`{"v": 1}`)

	none, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p, Input: input, Budget: budgets.Budget{MaxSteps: 10}})
	require.NoError(t, err)
	require.Equal(t, plans.Unwinding, none.Status, "without a ceiling the first refusal unwinds (z, admitted, runs to its end)")
	require.Contains(t, none.Failure, "step p1 refused")

	tolerant, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p, Input: input, Budget: budgets.Budget{MaxRefusals: 3}})
	require.NoError(t, err)
	require.Equal(t, plans.Running, tolerant.Status, "two refusals of three: the run goes on")
	require.Equal(t, 2, tolerant.Refusals)
	fl := inFlight(t, e, tolerant.ID)
	require.Len(t, fl, 1)
	require.Equal(t, "z", fl[0].StepID)
	finishAll(t, e, fl, budgets.Spent{})
	got, err := e.app.Get(ctx, tolerant.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Succeeded, got.Status, "its terminal step succeeded")

	capped, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p, Input: input, Budget: budgets.Budget{MaxRefusals: 2}})
	require.NoError(t, err)
	require.Equal(t, plans.Exhausted, capped.Status, "the second refusal reaches the ceiling")
	require.Equal(t, "refusals: 2 of 2 steps refused by policy", capped.Exhausted)
	require.Empty(t, inFlight(t, e, capped.ID), "z was never admitted")
	var detail string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT detail::text FROM docket.run_budget_events WHERE run_id = $1 AND what = 'exhausted'`,
		capped.ID).Scan(&detail))
	require.Contains(t, detail, `"refusals": 2`)

	blocked := plans.Plan{Steps: []plans.Step{
		{ID: "p1", Kind: "b.pay", Trusted: true, Args: fromInput},
		{ID: "z", Kind: "b.pay", After: []string{"p1"}, Terminal: true, Args: []plans.Arg{}},
	}}
	stuck, err := e.app.Start(ctx, plans.Start{Project: project, Plan: blocked, Input: input, Budget: budgets.Budget{MaxRefusals: 5}})
	require.NoError(t, err)
	require.Equal(t, plans.Compensated, stuck.Status, "nothing else can run: it unwinds")
	require.Contains(t, stuck.Failure, "step p1 refused")
	require.Contains(t, stuck.Failure, "nothing else can run")
}
