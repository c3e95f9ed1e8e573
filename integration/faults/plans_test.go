//go:build unix

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/worker"
)

// The plan-kill scenario: runs of a plan that fans out and in, root → 20
// leaves → join, every step repeatable, while the worker is SIGKILLed mid-run
// and a new one started. A step's job completing records its result and
// admits the steps it makes ready in the job's own transaction
// (docket.jobs_advance_runs); the kill lands among those completions, many
// of them waiting in the worker to be recorded, some under way in the
// database. Once every run has ended, it checks that:
//
//   - every run succeeded, and its join received all 20 leaves' results
//     (the run's output); repeatable steps lost with the worker are queued
//     again, so none is lost;
//   - no step was enqueued twice: one job and one docket.run_steps row for
//     each step of each run, the row naming the job;
//   - the leaves that write in their completion wrote exactly once, of their
//     last attempt, and no other job wrote;
//   - every job's history verifies.
//
// Half the leaves return their result with writes (faults.inside), so their
// completions commit one by one, each in a transaction of its own; the other
// steps return a bare result, and a batch completes them together, steps of
// several runs in one statement, locking the runs' rows one after another:
// the report counts the deadlocks the database saw.

// planLeaves is how many leaves the plan fans out to.
const planLeaves = 20

// planSteps is how many steps, so jobs, a run of the plan has.
const planSteps = planLeaves + 2

// planRuns is how many runs the scenario starts in form f.
func planRuns(f form) int {
	if f.long {
		return 300
	}
	return 30
}

// The plan's step kinds.
var (
	planRootKind = jobs.MustKind[planRoot]("faults.plan.root", 1)
	planLeafKind = jobs.MustKind[planLeaf]("faults.plan.leaf", 1)
	planJoinKind = jobs.MustKind[map[string]json.RawMessage]("faults.plan.join", 1)
)

// planBase is what the root returns, and each leaf adds its index to.
const planBase = 100

// planRoot is the root's payload: how long it works.
type planRoot struct {
	WorkMS int `json:"work_ms"`
}

// planLeaf is a leaf's payload: the root's base, its index, how long it
// works, and whether its completion writes.
type planLeaf struct {
	Base   int  `json:"base"`
	Index  int  `json:"index"`
	WorkMS int  `json:"work_ms"`
	Writes bool `json:"writes"`
}

// planJoined is the join's result, and so the run's output: how many leaf
// results it received, and their sum.
type planJoined struct {
	Results int `json:"results"`
	Sum     int `json:"sum"`
}

// wantJoined is every run's output.
var wantJoined = planJoined{Results: planLeaves, Sum: planLeaves*planBase + planLeaves*(planLeaves-1)/2}

// fanPlan is the scenario's plan: root, then leaf00 .. leaf19 (each taking
// the root's base), then join, taking every leaf's result.
func fanPlan() plans.Plan {
	p := plans.Plan{Steps: []plans.Step{{ID: "root", Kind: planRootKind.Name(), Repeatable: true,
		Args: []plans.Arg{{Name: "work_ms", Source: plans.Const(20)}}}}}
	join := plans.Step{ID: "join", Kind: planJoinKind.Name(), Terminal: true, Repeatable: true}
	for i := range planLeaves {
		id := fmt.Sprintf("leaf%02d", i)
		p.Steps = append(p.Steps, plans.Step{ID: id, Kind: planLeafKind.Name(), After: []string{"root"}, Repeatable: true,
			Args: []plans.Arg{
				{Name: "base", Source: plans.StepPath("root", "base")},
				{Name: "index", Source: plans.Const(i)},
				{Name: "work_ms", Source: plans.Const(10 + i*2)},
				{Name: "writes", Source: plans.Const(i%2 == 0)},
			}})
		join.After = append(join.After, id)
		join.Args = append(join.Args, plans.Arg{Name: id, Source: plans.StepResult(id)})
	}
	return plans.Plan{Steps: append(p.Steps, join)}
}

// handlePlanSteps registers the plan's step handlers in reg.
func (h *handler) handlePlanSteps(reg *worker.Registry) error {
	opts := worker.HandlerOptions{Lease: lease}
	if err := worker.HandleResult(reg, planRootKind, h.planRoot, opts); err != nil {
		return err
	}
	if err := worker.HandleResult(reg, planLeafKind, h.planLeaf, opts); err != nil {
		return err
	}
	return worker.HandleResult(reg, planJoinKind, h.planJoin, opts)
}

// planStep is what every step's handler does first, as the workload's
// handler does: says it started, works, and has its outside effect.
func (h *handler) planStep(ctx context.Context, j jobs.Job, work time.Duration) error {
	h.out.Say(lineStarted, j.ID, j.Attempts)
	select {
	case <-time.After(work):
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return h.outsideEffect(ctx, j.ID, j.Attempts)
}

func (h *handler) planRoot(ctx context.Context, j *jobs.Typed[planRoot]) (worker.Result, error) {
	if err := h.planStep(ctx, j.Job, time.Duration(j.Args.WorkMS)*time.Millisecond); err != nil {
		return worker.Result{}, err
	}
	return worker.Result{Value: json.RawMessage(fmt.Sprintf(`{"base": %d}`, planBase))}, nil
}

// planLeaf returns base + index; a leaf that writes adds its faults.inside
// row in the completion transaction.
func (h *handler) planLeaf(ctx context.Context, j *jobs.Typed[planLeaf]) (worker.Result, error) {
	if err := h.planStep(ctx, j.Job, time.Duration(j.Args.WorkMS)*time.Millisecond); err != nil {
		return worker.Result{}, err
	}
	res := worker.Result{Value: json.RawMessage(fmt.Sprint(j.Args.Base + j.Args.Index))}
	if j.Args.Writes {
		res.WritesFunc = func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO faults.inside (job_id, attempt, worker) VALUES ($1, $2, $3)", j.ID, j.Attempts, h.name)
			return err
		}
	}
	return res, nil
}

// planJoin counts and sums the leaves' results it received. A result
// missing or not a number fails it for good, which unwinds the run.
func (h *handler) planJoin(ctx context.Context, j *jobs.Typed[map[string]json.RawMessage]) (worker.Result, error) {
	if err := h.planStep(ctx, j.Job, 20*time.Millisecond); err != nil {
		return worker.Result{}, err
	}
	var out planJoined
	for i := range planLeaves {
		var n int
		if err := json.Unmarshal(j.Args[fmt.Sprintf("leaf%02d", i)], &n); err != nil {
			return worker.Result{}, worker.Fail(jobs.ClassPermanent, fmt.Errorf("the result of leaf%02d: %w", i, err))
		}
		out.Results++
		out.Sum += n
	}
	b, err := json.Marshal(out)
	if err != nil {
		return worker.Result{}, err
	}
	return worker.Result{Value: b}, nil
}

// The plan-kill scenario's checks, as a failure names them.
const (
	checkRunsSucceeded = "every run succeeded with all its results"
	checkStepsOnce     = "no step enqueued twice"
)

// planKill runs the plan-kill scenario into res.
func planKill(t *testing.T, f form, res *result) {
	n := planRuns(f)
	res.jobs = n * planSteps
	r := newRig(t)
	ctx := t.Context()
	env := testkit.Env{Pool: r.owner, Clock: db.NewFakeClock(time.Now()), Admin: ana}
	env.Allow(t, testkit.Grants(app, project, access.PlanRun)...)
	pc, err := plans.NewClient(r.login.Pool, plans.Config{Actor: app})
	require.NoError(t, err)
	p := fanPlan()
	for range n {
		_, err := pc.Start(ctx, plans.Start{Project: project, Plan: p, InputTrusted: true})
		require.NoError(t, err)
	}

	r.startWorker()
	r.cleared = time.Now()
	const share = 0.25
	r.waitSucceeded(int(share*float64(res.jobs)), runLimit)
	s := span{since: r.cleared, began: time.Now()}
	in := killWorker(r, 0, f)
	s.cleared, s.effective = time.Now(), in.effective
	s.what = fmt.Sprintf("fault 1 at %.0f%%, %s", share*100, in.what)
	r.cleared = s.cleared
	r.waitRuns()
	r.settle()
	for _, c := range r.children {
		select {
		case <-c.Done():
		default:
			c.Terminate(stopBound)
		}
	}

	v := r.check(startedAny(r.children))
	// Only the leaves that write have completion writes: check them so.
	v.wrongInside = r.strings(ctx, `
		SELECT format('job %s %s after %s attempts (writes %s): %s inside rows, of attempts %s', j.id, j.state, j.attempts,
		              coalesce(j.payload ->> 'writes', 'false'), count(i.job_id),
		              coalesce(array_agg(i.attempt ORDER BY i.attempt) FILTER (WHERE i.job_id IS NOT NULL), '{}'))
		FROM docket.jobs j LEFT JOIN faults.inside i ON i.job_id = j.id
		GROUP BY j.id
		HAVING CASE WHEN j.state = 'succeeded' AND j.payload ->> 'writes' = 'true' THEN count(i.job_id) <> 1 OR bool_or(i.attempt <> j.attempts)
		            ELSE count(i.job_id) > 0 END
		ORDER BY j.id`)
	res.verdict = v
	res.recoveries = append(res.recoveries, measure(s, r.successes()))
	res.events, res.warns = tally(r.children)
	for _, c := range r.children {
		if c.Races() > 0 {
			r.fail(checkRaces, "worker %s: the race detector reported %d data races:\n%s", c.Name, c.Races(), c.StderrTail())
		}
	}
	r.judge(v, res.jobs, false)
	res.notes = append(res.notes, r.checkRuns(n))
	res.failed = r.failed
	res.log(t.Logf)
}

// waitRuns waits until no run is running or unwinding, and fails the test
// if that takes longer than settleLimit.
func (r *rig) waitRuns() {
	r.t.Helper()
	deadline := time.Now().Add(settleLimit)
	open := -1
	for {
		ctx, cancel := context.WithTimeout(r.t.Context(), 5*time.Second)
		err := r.owner.QueryRow(ctx, "SELECT count(*) FROM docket.runs WHERE status IN ('running', 'unwinding')").Scan(&open)
		cancel()
		if err == nil && open == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.fail(checkRunsSucceeded, "%d runs had not ended within %v of the fault clearing (jobs: %s)", open, settleLimit, r.states())
			return
		}
		time.Sleep(poll)
	}
}

// checkRuns checks the n runs: each succeeded with the join's output, and
// each step of each has exactly one job and one run_steps row, the row
// naming the job. It returns the report's line of counts.
func (r *rig) checkRuns(n int) string {
	r.t.Helper()
	ctx := r.t.Context()
	want, err := json.Marshal(wantJoined)
	require.NoError(r.t, err)
	var runs, succeeded, steps, jobsOf, rerun, effectsTwice, deadlocks int
	require.NoError(r.t, r.owner.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM docket.runs),
			(SELECT count(*) FROM docket.runs WHERE status = 'succeeded'),
			(SELECT count(*) FROM docket.run_steps),
			(SELECT count(*) FROM docket.jobs WHERE params ? 'run_id'),
			(SELECT count(*) FROM docket.run_steps s JOIN docket.jobs j ON j.id = s.job_id WHERE j.attempts > 1),
			(SELECT count(*) FROM (SELECT 1 FROM faults.outside GROUP BY job_id HAVING count(*) > 1) x),
			(SELECT deadlocks FROM pg_stat_database WHERE datname = current_database())`).
		Scan(&runs, &succeeded, &steps, &jobsOf, &rerun, &effectsTwice, &deadlocks))
	if runs != n {
		r.fail(checkRunsSucceeded, "%d runs stored; %d started", runs, n)
	}
	failEach(r, checkRunsSucceeded, "runs", r.strings(ctx, `
		SELECT format('run %s %s: output %s%s', id, status, coalesce(output::text, 'none'), coalesce('; ' || failure, ''))
		FROM docket.runs
		WHERE status <> 'succeeded' OR output IS DISTINCT FROM '`+string(want)+`'::jsonb
		ORDER BY id`))
	// Every step of every run's plan: its jobs (by the run and step their
	// params name) and its run_steps rows, and whether the row names a job
	// of that run and step.
	failEach(r, checkStepsOnce, "steps", r.strings(ctx, `
		WITH want AS (
		    SELECT r.id AS run_id, s.step_id FROM docket.runs r JOIN docket.plan_steps s ON s.plan_id = r.plan_id
		), enqueued AS (
		    SELECT (params ->> 'run_id')::bigint AS run_id, params ->> 'step' AS step_id, count(*) AS jobs,
		           array_agg(id ORDER BY id) AS ids
		    FROM docket.jobs WHERE params ? 'run_id' GROUP BY 1, 2
		), recorded AS (
		    SELECT run_id, step_id, count(*) AS rows, min(job_id) AS job_id, bool_and(state = 'succeeded') AS succeeded
		    FROM docket.run_steps GROUP BY 1, 2
		)
		SELECT format('run %s step %s: %s jobs %s, %s run_steps rows naming job %s (succeeded %s)%s', run_id, step_id,
		              coalesce(e.jobs, 0), coalesce(e.ids, '{}'), coalesce(x.rows, 0), coalesce(x.job_id::text, 'none'),
		              coalesce(x.succeeded::text, '-'), CASE WHEN w.run_id IS NULL THEN ', not a step of its plan' ELSE '' END)
		FROM want w FULL JOIN enqueued e USING (run_id, step_id) FULL JOIN recorded x USING (run_id, step_id)
		WHERE w.run_id IS NULL OR coalesce(e.jobs, 0) <> 1 OR coalesce(x.rows, 0) <> 1 OR x.job_id IS DISTINCT FROM e.ids[1]
		   OR NOT x.succeeded
		ORDER BY run_id, step_id`))
	return fmt.Sprintf("runs %d, succeeded %d; steps %d; jobs %d; steps whose job ran more than once %d (outside effects of two attempts or more: %d); deadlocks in the database %d",
		runs, succeeded, steps, jobsOf, rerun, effectsTwice, deadlocks)
}

// failEach fails the test for a check that found offending runs or steps
// (what), naming the first few.
func failEach(r *rig, check, what string, offenders []string) {
	r.t.Helper()
	if len(offenders) == 0 {
		return
	}
	more := ""
	if len(offenders) > examples {
		more = fmt.Sprintf("\n\t… and %d more", len(offenders)-examples)
	}
	r.fail(check, "%d %s fail it:\n\t%s%s", len(offenders), what, strings.Join(offenders[:min(examples, len(offenders))], "\n\t"), more)
}
