package plans_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
)

// TestTheRunGuardHoldsEveryWriter: the schema owner's own UPDATEs of runs
// are held to the run machine and the plan's versions -- a move the machine
// does not name, any change of a run that ended but the guard_seq that
// orders its outcomes, a plan changed without a recorded version -- while
// a running run's counters are written without asking the guard (it is
// called only for an update that could move a run). Each refusal leaves
// the runs as they were.
func TestTheRunGuardHoldsEveryWriter(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	one, two := chainOf("guard.run"), chainOf("guard.run", "guard.run")
	ended, err := e.app.Start(ctx, plans.Start{Project: project, Plan: one})
	require.NoError(t, err)
	running, err := e.app.Start(ctx, plans.Start{Project: project, Plan: two})
	require.NoError(t, err)
	other, err := e.app.Start(ctx, plans.Start{Project: project, Plan: one})
	require.NoError(t, err)

	// The one-step run succeeds through its job.
	complete(t, e, ended.ID, "a", `{"n": 1}`)
	got, err := e.app.Get(ctx, ended.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Succeeded, got.Status)

	refused := func(code, q string, args ...any) {
		t.Helper()
		ownerRefused(t, e, "docket.runs", code, "", q, args...)
	}
	refused("DK001", `UPDATE docket.runs SET status = 'compensated' WHERE id = $1`, running.ID)
	refused("DK001", `UPDATE docket.runs SET status = 'running' WHERE id = $1`, ended.ID)
	refused("DK001", `UPDATE docket.runs SET applied = applied + 1 WHERE id = $1`, ended.ID)
	refused("DK001", `UPDATE docket.runs SET output = '{"n": 2}' WHERE id = $1`, ended.ID)
	refused("DK015", `UPDATE docket.runs SET plan_id = (SELECT plan_id FROM docket.runs WHERE id = $2) WHERE id = $1`,
		running.ID, other.ID)
	refused("DK015", `UPDATE docket.runs SET version = version + 1 WHERE id = $1`, running.ID)

	// A run's terms (its input, replan limit and ceilings) hold for the
	// owner's writes too: each broken rule is the check violation naming
	// it, at an update of a ceiling and at an insert.
	broken := func(rule, q string, id int64) {
		t.Helper()
		ownerRefused(t, e, "docket.runs", "23514", rule, q, id)
	}
	for rule, set := range map[string]string{
		"runs_money_has_currency": `max_money = 5`,
		"runs_currency_valid":     `max_money = 5, currency = 'eur'`,
		"runs_max_steps_range":    `max_steps = -1`,
		"runs_max_effects_range":  `max_effects = -1`,
		"runs_max_money_range":    `max_money = -1, currency = 'EUR'`,
		"runs_max_call_range":     `max_call = -1`,
		"runs_max_parallel_range": `max_parallel = 0`,
		"runs_max_duration_range": `max_duration = interval '0'`,
		"runs_max_refusals_range": `max_refusals = 1000001`,
	} {
		broken(rule, `UPDATE docket.runs SET `+set+` WHERE id = $1`, running.ID)
	}
	// The input and the replan limit never change (runs_columns_immutable):
	// their rules are asked at a run's birth.
	for rule, values := range map[string]string{
		"runs_input_bounded":      `jsonb_build_object('s', repeat('x', 70000)), replan_limit, max_steps`,
		"runs_replan_limit_range": `input, 101, max_steps`,
		"runs_max_steps_range":    `input, replan_limit, 1000001`,
	} {
		broken(rule, `INSERT INTO docket.runs (project, plan_id, input, replan_limit, max_steps, input_trusted, created_by,
			created_at, updated_at)
			SELECT project, plan_id, `+values+`, input_trusted, created_by, created_at, updated_at
			FROM docket.runs WHERE id = $1`, running.ID)
	}

	// What the guard lets through: the guard_seq of a run that ended, and a
	// running run's counters.
	require.NoError(t, ownerExec(t, e, `UPDATE docket.runs SET guard_seq = guard_seq + 1 WHERE id = $1`, ended.ID))
	require.NoError(t, ownerExec(t, e, `UPDATE docket.runs SET guard_seq = guard_seq + 1, updated_at = updated_at WHERE id = $1`,
		running.ID))
}

// TestARunNamesAPlanAndAProjectThatExist: a run's project and plan, and a
// version's plans, are checked as the foreign keys they were checked them
// (23503, the same constraint names), for the owner's writes too, each
// refusal leaving the table as it was; and a start locks neither the plan's
// row nor the project's (a frozen plan and a project are never deleted),
// which every start of the plan would share.
func TestARunNamesAPlanAndAProjectThatExist(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: chainOf("refs.run")})
	require.NoError(t, err)

	insertRun := `INSERT INTO docket.runs (project, plan_id, input, input_trusted, replan_limit, created_by, created_at, updated_at)
		SELECT %s, %s, input, input_trusted, replan_limit, created_by, created_at, updated_at FROM docket.runs WHERE id = $1`
	ownerRefused(t, e, "docket.runs", "23503", "runs_plan_id_fkey",
		fmt.Sprintf(insertRun, "project", "(SELECT max(id) + 1 FROM docket.plans)"), run.ID)
	ownerRefused(t, e, "docket.runs", "23503", "runs_project_fkey",
		fmt.Sprintf(insertRun, "'nowhere'", "plan_id"), run.ID)
	insertVersion := `INSERT INTO docket.run_versions (run_id, version, plan_id, predecessor, reason, actor, at)
		SELECT id, 2, %s, %s, 'a replan', created_by, created_at FROM docket.runs WHERE id = $1`
	ownerRefused(t, e, "docket.run_versions", "23503", "run_versions_plan_id_fkey",
		fmt.Sprintf(insertVersion, "(SELECT max(id) + 1 FROM docket.plans)", "plan_id"), run.ID)
	ownerRefused(t, e, "docket.run_versions", "23503", "run_versions_predecessor_fkey",
		fmt.Sprintf(insertVersion, "plan_id", "(SELECT max(id) + 1 FROM docket.plans)"), run.ID)
	// What names a run names one that exists (since migration 55, as the
	// foreign keys did; which run a row names never changes).
	ownerRefused(t, e, "docket.run_versions", "23503", "run_versions_run_id_fkey",
		`INSERT INTO docket.run_versions (run_id, version, plan_id, predecessor, reason, actor, at)
		SELECT id + 1000, 2, plan_id, plan_id, 'a replan', created_by, created_at FROM docket.runs WHERE id = $1`, run.ID)
	ownerRefused(t, e, "docket.run_steps", "23503", "run_steps_run_id_fkey",
		`INSERT INTO docket.run_steps (run_id, step_id, version, kind, state, ready_seq, args, trusted, admitted_at, updated_at)
		SELECT run_id + 1000, step_id, version, kind, 'refused', ready_seq, args, trusted, admitted_at, updated_at
		FROM docket.run_steps WHERE run_id = $1`, run.ID)
	ownerRefused(t, e, "docket.run_budget_events", "23503", "run_budget_events_run_id_fkey",
		`INSERT INTO docket.run_budget_events (run_id, what, detail, actor, at)
		SELECT id + 1000, 'raised', '{}', created_by, created_at FROM docket.runs WHERE id = $1`, run.ID)
	ownerRefused(t, e, "docket.budget_reservations", "23503", "budget_reservations_run_id_fkey",
		`INSERT INTO docket.budget_reservations (run_id, project, currency, period_start, amount)
		SELECT id + 1000, project, 'EUR', created_at, 0 FROM docket.runs WHERE id = $1`, run.ID)

	// A start not yet committed holds neither the plan's row nor the
	// project's: another transaction takes both FOR UPDATE without waiting.
	tx, err := e.API.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = e.app.StartTx(ctx, tx, plans.Start{Project: project, Plan: chainOf("refs.run")})
	require.NoError(t, err)
	other, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(ctx) }()
	_, err = other.Exec(ctx, `SELECT 1 FROM docket.plans WHERE id = (SELECT plan_id FROM docket.runs WHERE id = $1) FOR UPDATE NOWAIT`, run.ID)
	require.NoError(t, err, "a start holds its plan's row")
	_, err = other.Exec(ctx, `SELECT 1 FROM docket.projects WHERE name = $1 FOR UPDATE NOWAIT`, project)
	require.NoError(t, err, "a start holds its project's row")
}

// TestAStartWhoseFirstStepCannotRunEnds: a run whose first step is refused
// at its start (it requires trusted input; the input is not) or fails at
// its admission (a message wait whose correlation value makes no key)
// unwinds at once, in its start's transaction, and ends compensated, naming
// the step; a run whose first step runs or waits is left running.
func TestAStartWhoseFirstStepCannotRunEnds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	guarded := plans.Plan{Steps: []plans.Step{step("a", "guard.run")}}
	guarded.Steps[0].Args = []plans.Arg{{Name: "x", Source: plans.Input("x")}}
	guarded.Steps[0].Trusted, guarded.Steps[0].Terminal = true, true
	keyless := plans.Plan{Steps: []plans.Step{step("w", ""), step("b", "guard.run", "w")}}
	missing := plans.Input("missing")
	keyless.Steps[0].Wait = &plans.Wait{Type: plans.WaitMessage, MessageKind: "paid", Key: "order", Value: &missing, Within: 60}
	keyless.Steps[1].Terminal = true
	for _, c := range []struct {
		plan    plans.Plan
		trusted bool
		status  plans.Status
		failure string
	}{
		{guarded, false, plans.Compensated, "step a refused"},
		{keyless, true, plans.Compensated, "step w failed"},
		{guarded, true, plans.Running, ""},
	} {
		run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: c.plan, Input: json.RawMessage(`{"x": 1}`),
			InputTrusted: c.trusted})
		require.NoError(t, err)
		require.Equal(t, c.status, run.Status, "%+v", run)
		require.Contains(t, run.Failure, c.failure)
	}
}

// TestAStepsJobCarriesNoKey: a step's job is named by its step row, not by
// an idempotency key, so an enqueue under the key a step's job once carried
// (run:RUN:STEP, its kind) makes a job of its own rather than resolving to
// the run's; and a compensation job stays one step's (a second step naming
// it is refused, the steps unchanged).
func TestAStepsJobCarriesNoKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	p := chainOf("keys.run", "keys.run")
	r, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
	require.NoError(t, err)
	a := stepOf(t, e, r.ID, "a")
	jc := jobsAs(t, e)
	j, err := jc.Get(ctx, a.JobID)
	require.NoError(t, err)
	require.Empty(t, j.IdempotencyKey)
	mine, err := jc.Enqueue(ctx, jobs.Spec{Kind: "keys.run", Payload: json.RawMessage(`{}`),
		IdempotencyKey: fmt.Sprintf("run:%d:a", r.ID)})
	require.NoError(t, err)
	require.False(t, mine.Duplicate)
	require.NotEqual(t, a.JobID, mine.Job.ID, "an enqueue under a step's old key resolved to the step's job")

	complete(t, e, r.ID, "a", `{}`)
	require.NotZero(t, stepOf(t, e, r.ID, "b").JobID, "step b is admitted")
	require.NoError(t, ownerExec(t, e, `UPDATE docket.run_steps SET compensation_job_id = $2 WHERE run_id = $1 AND step_id = 'a'`,
		r.ID, mine.Job.ID))
	ownerRefused(t, e, "docket.run_steps", "23505", "run_steps_compensation_job_key",
		`UPDATE docket.run_steps SET compensation_job_id = $2 WHERE run_id = $1 AND step_id = 'b'`, r.ID, mine.Job.ID)
}
