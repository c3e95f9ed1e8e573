package budgets_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/budgets"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const project = testkit.Acme
const ops, app, treasurer = testkit.Ops, testkit.App, access.Actor("user:treasurer")

type env struct {
	testkit.Env
	plans     *plans.Client
	jobs      *jobs.Client
	treasurer *budgets.Client
}

func setup(t testing.TB) env {
	t.Helper()
	e := env{Env: testkit.Setup(t, ops, []string{project}, testkit.Join(
		testkit.Grants(app, project, access.PlanRun, access.JobCreate, access.JobClaim, access.JobCancel),
		testkit.Grants(treasurer, project, access.BudgetManage, access.PlanRun),
	)...)}
	var err error
	e.plans, err = plans.NewClient(e.API, plans.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	e.jobs, err = jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	e.treasurer, err = budgets.NewClient(e.API, budgets.Config{Actor: treasurer, Clock: e.Clock})
	require.NoError(t, err)
	return e
}

// chain is n steps, each after the one before, the last terminal.
func chain(n int) plans.Plan {
	var p plans.Plan
	for i := range n {
		s := plans.Step{ID: fmt.Sprintf("s%02d", i), Kind: "b.pay", Args: []plans.Arg{}}
		if i > 0 {
			s.After = []string{fmt.Sprintf("s%02d", i-1)}
		}
		s.Terminal = i == n-1
		p.Steps = append(p.Steps, s)
	}
	return p
}

// admitted returns the run's steps in flight (admitted, job not finished).
func admitted(t testing.TB, e env, run int64) []plans.RunStep {
	t.Helper()
	steps, err := e.plans.Steps(context.Background(), run)
	require.NoError(t, err)
	var out []plans.RunStep
	for _, s := range steps {
		if s.State == plans.StepAdmitted {
			out = append(out, s)
		}
	}
	return out
}

// finish completes step s's job reporting spent.
func finish(t testing.TB, e env, s plans.RunStep, spent budgets.Spent) {
	t.Helper()
	ctx := context.Background()
	j, ok, err := e.jobs.ClaimID(ctx, s.JobID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	res, err := budgets.Report(map[string]string{"step": s.StepID}, spent)
	require.NoError(t, err)
	_, err = e.jobs.Complete(ctx, j.Lease(), res, nil)
	require.NoError(t, err)
}

// drain finishes the run's steps one at a time, each spending spent, until
// none is in flight.
func drain(t testing.TB, e env, run int64, spent budgets.Spent) int {
	t.Helper()
	n := 0
	for {
		fl := admitted(t, e, run)
		if len(fl) == 0 {
			return n
		}
		finish(t, e, fl[0], spent)
		n++
	}
}

var eur = func(n int64) budgets.Money { return budgets.Money{Amount: n, Currency: "EUR"} }

// TestAMoneyCeilingExhaustsAndAResumeGoesOn: ten steps of 100 each under a
// ceiling of 450 with calls of at most 100 exhaust after four (a fifth could
// carry the run to 500); completed work stands; a raise to 1,000, recorded,
// resumes it to the end, exactly at the ceiling.
func TestAMoneyCeilingExhaustsAndAResumeGoesOn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	run, err := e.plans.Start(ctx, plans.Start{Project: project, Plan: chain(10),
		Budget: budgets.Budget{MaxMoney: eur(450), MaxCall: 100}})
	require.NoError(t, err)
	require.Equal(t, 4, drain(t, e, run.ID, budgets.Spent{Money: 100, Effects: 1}))
	got, err := e.plans.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Exhausted, got.Status)
	require.Contains(t, got.Exhausted, "money: 400 of 450 EUR spent")
	require.Equal(t, budgets.Spent{Money: 400, Effects: 4}, got.Spent, "the tally is what the steps reported")
	require.LessOrEqual(t, got.Spent.Money, int64(450), "within the ceiling: every call kept to MaxCall")

	_, err = e.treasurer.Resume(ctx, run.ID, budgets.Budget{MaxMoney: eur(300)})
	require.ErrorIs(t, err, db.ErrInvalidArgument, "a resume raises, never lowers")
	st, err := e.treasurer.Resume(ctx, run.ID, budgets.Budget{MaxMoney: eur(1000)})
	require.NoError(t, err)
	require.Equal(t, "running", st.Status)
	require.Equal(t, 6, drain(t, e, run.ID, budgets.Spent{Money: 100, Effects: 1}))
	got, err = e.plans.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Succeeded, got.Status)
	require.Equal(t, int64(1000), got.Spent.Money)

	var what, detail, actor string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT what, detail::text, actor FROM docket.run_budget_events
		WHERE run_id = $1 AND what = 'raised'`, run.ID).Scan(&what, &detail, &actor))
	require.Equal(t, string(treasurer), actor)
	require.Contains(t, detail, `"from": {"money": 450`)
	require.Contains(t, detail, `"to": {"money": 1000`)
	require.Contains(t, detail, `money: 400 of 450 EUR`)
}

// TestACompensatedRunCannotResume: an exhausted run that is cancelled
// unwinds, and a resume is refused.
func TestACompensatedRunCannotResume(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	run, err := e.plans.Start(ctx, plans.Start{Project: project, Plan: chain(5), Budget: budgets.Budget{MaxSteps: 2}})
	require.NoError(t, err)
	require.Equal(t, 2, drain(t, e, run.ID, budgets.Spent{}))
	got, err := e.plans.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Exhausted, got.Status)
	require.Contains(t, got.Exhausted, "steps: 2 of 2 admitted")
	got, err = e.plans.Cancel(ctx, run.ID, "not worth more")
	require.NoError(t, err)
	require.Equal(t, plans.Compensated, got.Status)
	_, err = e.treasurer.Resume(ctx, run.ID, budgets.Budget{MaxSteps: 10})
	require.ErrorIs(t, err, db.ErrTerminal)
	noGrant, err := budgets.NewClient(e.API, budgets.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	_, err = noGrant.Resume(ctx, run.ID, budgets.Budget{MaxSteps: 10})
	require.ErrorIs(t, err, db.ErrNotPermitted)
}

// TestAnEffectsCeiling: an exact count of effects exhausts the run.
func TestAnEffectsCeiling(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	run, err := e.plans.Start(ctx, plans.Start{Project: project, Plan: chain(6), Budget: budgets.Budget{MaxEffects: 3}})
	require.NoError(t, err)
	require.Equal(t, 3, drain(t, e, run.ID, budgets.Spent{Effects: 1}))
	got, err := e.plans.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Exhausted, got.Status)
	require.Equal(t, int64(3), got.Spent.Effects)
}

// TestMaxParallelHoldsUnderAWideReadySet: 40 steps ready at once, three at
// a time in flight, never more, admitted in ready order.
func TestMaxParallelHoldsUnderAWideReadySet(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	p := plans.Plan{Steps: []plans.Step{{ID: "root", Kind: "b.pay", Args: []plans.Arg{}}}}
	join := plans.Step{ID: "zz", Kind: "b.pay", Terminal: true, Args: []plans.Arg{}}
	for i := range 40 {
		id := fmt.Sprintf("w%02d", i)
		p.Steps = append(p.Steps, plans.Step{ID: id, Kind: "b.pay", After: []string{"root"}, Args: []plans.Arg{}})
		join.After = append(join.After, id)
	}
	p.Steps = append(p.Steps, join)
	run, err := e.plans.Start(ctx, plans.Start{Project: project, Plan: p, Budget: budgets.Budget{MaxParallel: 3}})
	require.NoError(t, err)
	most := 0
	for {
		fl := admitted(t, e, run.ID)
		if len(fl) == 0 {
			break
		}
		require.LessOrEqual(t, len(fl), 3, "never more than three in flight")
		most = max(most, len(fl))
		finish(t, e, fl[0], budgets.Spent{})
	}
	require.Equal(t, 3, most, "three at a time while the ready set is wide")
	got, err := e.plans.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Succeeded, got.Status)
	steps, err := e.plans.Steps(ctx, run.ID)
	require.NoError(t, err)
	for i := 1; i <= 40; i++ {
		require.Equal(t, fmt.Sprintf("w%02d", i-1), steps[i].StepID, "admitted in ready order")
	}
}

// TestTheQuotaHoldsUnder32ConcurrentAdmissions: a quota of 10,000 EUR a day
// and runs whose worst case is 1,000 (a ceiling of 900 and one call of 100
// in flight): of 32 admissions at once exactly ten are admitted, the others
// refused, and the period never holds more than its quota.
func TestTheQuotaHoldsUnder32ConcurrentAdmissions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	require.NoError(t, e.treasurer.SetQuota(ctx, budgets.Quota{Project: project, Amount: eur(10000), Period: 24 * time.Hour,
		Anchor: testkit.T0.Truncate(24 * time.Hour)}))
	release := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			_, errs[i] = e.plans.Start(ctx, plans.Start{Project: project, Plan: chain(3),
				Input:  json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)),
				Budget: budgets.Budget{MaxMoney: eur(900), MaxCall: 100, MaxParallel: 1}})
		}()
	}
	close(release)
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.ErrorIs(t, err, db.ErrNotPermitted)
		require.ErrorContains(t, err, "past its quota")
	}
	require.Equal(t, 10, ok)
	var held int64
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT sum(amount) FROM docket.budget_reservations`).Scan(&held))
	require.Equal(t, int64(10000), held)

	// A run that ends gives back what it did not spend.
	var first int64
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT min(run_id) FROM docket.budget_reservations`).Scan(&first))
	require.Equal(t, 3, drain(t, e, first, budgets.Spent{Money: 100}))
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT sum(amount) FROM docket.budget_reservations`).Scan(&held))
	require.Equal(t, int64(9300), held, "the ended run holds the 300 it spent")
	_, err := e.plans.Start(ctx, plans.Start{Project: project, Plan: chain(3),
		Budget: budgets.Budget{MaxMoney: eur(600), MaxCall: 100, MaxParallel: 1}})
	require.NoError(t, err, "700 fits in the 700 given back")
}

// TestBudgetRefusals: malformed ceilings are refused before anything is
// stored.
func TestBudgetRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	for name, b := range map[string]budgets.Budget{
		"negative":        {MaxSteps: -1},
		"no currency":     {MaxMoney: budgets.Money{Amount: 10}},
		"bad currency":    {MaxMoney: budgets.Money{Amount: 10, Currency: "eur"}},
		"call, no money":  {MaxCall: 5},
		"too many in fly": {MaxParallel: 10001},
	} {
		_, err := e.plans.Start(ctx, plans.Start{Project: project, Plan: chain(2), Budget: b})
		require.ErrorIs(t, err, db.ErrInvalidArgument, name)
	}
	err := e.treasurer.SetQuota(ctx, budgets.Quota{Project: project, Amount: eur(-1), Period: time.Hour, Anchor: testkit.T0})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	err = e.treasurer.SetQuota(ctx, budgets.Quota{Project: project, Amount: eur(1), Period: time.Second, Anchor: testkit.T0})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	noGrant, err := budgets.NewClient(e.API, budgets.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	err = noGrant.SetQuota(ctx, budgets.Quota{Project: project, Amount: eur(1), Period: time.Hour, Anchor: testkit.T0})
	require.ErrorIs(t, err, db.ErrNotPermitted)
	var runs int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.runs`).Scan(&runs))
	require.Zero(t, runs)
}

// TestAResumeReservesInItsOwnPeriod: with a quota of 1,000 a day, run A
// (worst case 600) and run B (400) fill day 1, and A is exhausted having
// spent 500. Resumed on day 2 to a worst case of 1,000, A reserves its 500
// still to spend on day 2, and day 1 keeps the 500 it spent there: day 1
// holds 900, not 1,400, and day 2 has room for a run of 500 but not one of
// 501.
func TestAResumeReservesInItsOwnPeriod(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	day1 := testkit.T0.Truncate(24 * time.Hour)
	require.NoError(t, e.treasurer.SetQuota(ctx, budgets.Quota{Project: project, Amount: eur(1000), Period: 24 * time.Hour, Anchor: day1}))
	a, err := e.plans.Start(ctx, plans.Start{Project: project, Plan: chain(10),
		Budget: budgets.Budget{MaxMoney: eur(500), MaxCall: 100, MaxParallel: 1}})
	require.NoError(t, err)
	_, err = e.plans.Start(ctx, plans.Start{Project: project, Plan: chain(1),
		Budget: budgets.Budget{MaxMoney: eur(300), MaxCall: 100, MaxParallel: 1}})
	require.NoError(t, err, "400 more fills the day")
	require.Equal(t, 5, drain(t, e, a.ID, budgets.Spent{Money: 100}))
	got, err := e.plans.Get(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Exhausted, got.Status)

	e.Clock.Set(day1.Add(36 * time.Hour))
	_, err = e.treasurer.Resume(ctx, a.ID, budgets.Budget{MaxMoney: eur(900)})
	require.NoError(t, err)
	held := func(start time.Time) int64 {
		var n int64
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT coalesce(sum(amount), 0) FROM docket.budget_reservations
			WHERE period_start = $1`, start).Scan(&n))
		return n
	}
	require.Equal(t, int64(900), held(day1), "day 1: A's 500 spent, B's 400")
	require.Equal(t, int64(500), held(day1.Add(24*time.Hour)), "day 2: what A may still spend")

	_, err = e.plans.Start(ctx, plans.Start{Project: project, Plan: chain(1),
		Budget: budgets.Budget{MaxMoney: eur(402), MaxCall: 100, MaxParallel: 1}})
	require.ErrorIs(t, err, db.ErrNotPermitted, "502 does not fit in day 2's 500 left")
	_, err = e.plans.Start(ctx, plans.Start{Project: project, Plan: chain(1),
		Budget: budgets.Budget{MaxMoney: eur(400), MaxCall: 100, MaxParallel: 1}})
	require.NoError(t, err, "500 does")
}

// TestAResumeRaisesTheWallClockAndRefusalCeilings: a run exhausted by its
// wall-clock ceiling resumes when the ceiling is raised, and goes on to
// the end; a resume that would lower either of the newer ceilings is
// refused. The raise is recorded.
func TestAResumeRaisesTheWallClockAndRefusalCeilings(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	run, err := e.plans.Start(ctx, plans.Start{Project: project, Plan: chain(3), InputTrusted: true,
		Budget: budgets.Budget{MaxDuration: 10 * time.Minute, MaxRefusals: 5}})
	require.NoError(t, err)
	e.Clock.Advance(10 * time.Minute)
	require.Equal(t, 1, drain(t, e, run.ID, budgets.Spent{}))
	got, err := e.plans.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Exhausted, got.Status)

	_, err = e.treasurer.Resume(ctx, run.ID, budgets.Budget{MaxDuration: 5 * time.Minute})
	require.ErrorIs(t, err, db.ErrInvalidArgument, "a resume raises, never lowers")
	_, err = e.treasurer.Resume(ctx, run.ID, budgets.Budget{MaxRefusals: 2})
	require.ErrorIs(t, err, db.ErrInvalidArgument, "a resume raises, never lowers")
	st, err := e.treasurer.Resume(ctx, run.ID, budgets.Budget{MaxDuration: time.Hour, MaxRefusals: 6})
	require.NoError(t, err)
	require.Equal(t, "running", st.Status)
	require.Equal(t, 2, drain(t, e, run.ID, budgets.Spent{}))
	got, err = e.plans.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Succeeded, got.Status)
	require.Equal(t, time.Hour, got.Budget.MaxDuration)
	var detail string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT detail::text FROM docket.run_budget_events
		WHERE run_id = $1 AND what = 'raised'`, run.ID).Scan(&detail))
	require.Contains(t, detail, `"to": {"money": null, "steps": null, "effects": null, "duration": "01:00:00"`)
	require.Contains(t, detail, `"refusals": 6`)
}
