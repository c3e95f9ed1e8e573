package plans_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/tasks"
)

// The waiting cast: app starts runs (and so may not approve their tasks);
// bo is a second person who approves; sweeper runs the sweeps; rita works
// in the other project only.
const bo, sweeper = testkit.Bo, testkit.Sweeper
const rita access.Actor = "user:rita"

type waitEnv struct {
	env
	cases   *cases.Client // app: delivers messages
	sweeps  *cases.Client // sweeper: fires timers
	bo, app *tasks.Client
}

func setupWaits(t testing.TB) waitEnv {
	t.Helper()
	e := waitEnv{env: setup(t)}
	e.Allow(t, testkit.Join(
		testkit.Grants(app, project, access.MessageDeliver),
		testkit.Grants(bo, project, access.TaskReview),
		testkit.Grants(sweeper, project, access.CaseSweep, access.JobCreate),
		testkit.Grants(rita, testkit.Other, access.TaskReview, access.CaseSweep, access.JobCreate, access.MessageDeliver,
			access.CaseAdmit, access.PlanRun),
	)...)
	var err error
	e.cases, err = cases.NewClient(e.API, cases.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	e.sweeps, err = cases.NewClient(e.API, cases.Config{Actor: sweeper, Clock: e.Clock})
	require.NoError(t, err)
	e.bo, err = tasks.NewClient(e.API, tasks.Config{Actor: bo, Clock: e.Clock})
	require.NoError(t, err)
	e.app, err = tasks.NewClient(e.API, tasks.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	return e
}

// suspended waits until run id is suspended, and returns it.
func suspended(t testing.TB, e waitEnv, id int64) plans.Run {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		run, err := e.env.app.Get(context.Background(), id)
		require.NoError(t, err)
		if run.Suspended {
			return run
		}
		require.Equal(t, plans.Running, run.Status, "run %d ended before it suspended: %s", id, run.Failure)
		if time.Now().After(deadline) {
			t.Fatalf("run %d never suspended", id)
		}
		time.Sleep(10 * time.Millisecond) // polls the worker's progress; the clock is the env's
	}
}

// liveJobs counts the run's jobs that are queued or held, and the leases
// held on them.
func liveJobs(t testing.TB, e waitEnv, id int64) (jobsLive, leases int) {
	t.Helper()
	require.NoError(t, e.Pool.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE state IN ('queued', 'claimed', 'retryable')),
		       count(*) FILTER (WHERE lease_expires_at IS NOT NULL)
		FROM docket.jobs WHERE params ->> 'run_id' = $1::bigint::text`, id).Scan(&jobsLive, &leases))
	return jobsLive, leases
}

// TestASleepingStepSuspendsTheRunUntilTheTimerSweep: a -> nap (three days)
// -> c. After a, the run is suspended on nap's timer, holding no job and no
// lease; a sweep before the instant fires nothing; moving the clock three
// days on, one sweep fires it, and c runs.
func TestASleepingStepSuspendsTheRunUntilTheTimerSweep(t *testing.T) {
	t.Parallel()
	e := setupWaits(t)
	ctx := t.Context()
	var ran sync.Map
	did := func(_ context.Context, j jobs.Job, _ Args) (any, error) {
		_, s, _, _ := plans.StepOf(j)
		ran.Store(s, true)
		return map[string]any{"step": s}, nil
	}
	r := startRunner(t, e.env, map[string]handler{"t.a": did, "t.c": did})
	p := plans.Plan{Steps: []plans.Step{
		step("a", "t.a"),
		{ID: "nap", After: []string{"a"}, Wait: plans.Sleep(72 * time.Hour)},
		{ID: "c", Kind: "t.c", After: []string{"nap"}, Terminal: true},
	}}
	run, err := e.env.app.Start(ctx, plans.Start{Project: project, Plan: p})
	require.NoError(t, err)
	run = suspended(t, e, run.ID)
	require.Equal(t, plans.Running, run.Status)
	live, leases := liveJobs(t, e, run.ID)
	require.Zero(t, live, "a suspended run holds no job")
	require.Zero(t, leases, "a suspended run holds no lease")
	waits, err := e.env.app.Waits(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, waits, 1)
	nap := stepOf(t, e.env, run.ID, "nap")
	require.Equal(t, plans.StepWaiting, nap.State)
	require.Equal(t, plans.WaitSleep, nap.Wait)
	require.Zero(t, nap.JobID)
	require.Equal(t, plans.WaitSleep, waits[0].Type)
	require.True(t, waits[0].Suspended)
	require.Equal(t, nap.AdmittedAt.Add(72*time.Hour), waits[0].WakeAt)
	_, ok := ran.Load("c")
	require.False(t, ok)

	// Not yet: a sweep an hour early fires nothing.
	e.Clock.Advance(71 * time.Hour)
	fired, err := e.sweeps.FireTimers(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, fired)
	require.True(t, suspended(t, e, run.ID).Suspended)

	e.Clock.Advance(time.Hour)
	fired, err = e.sweeps.FireTimers(ctx, 100)
	require.NoError(t, err)
	require.Len(t, fired, 1)
	require.Equal(t, run.ID, fired[0].RunID)
	require.Equal(t, "nap", fired[0].StepID)
	run = waitRun(t, e.env, run.ID, r)
	require.Equal(t, plans.Succeeded, run.Status)
	require.False(t, run.Suspended)
	nap = stepOf(t, e.env, run.ID, "nap")
	require.Equal(t, plans.StepSucceeded, nap.State)
	var res struct {
		WakeAt time.Time `json:"wake_at"`
	}
	require.NoError(t, json.Unmarshal(nap.Result, &res))
	require.True(t, res.WakeAt.Equal(waits[0].WakeAt), "the step's result is the instant it was due")

	// A timer fires once.
	fired, err = e.sweeps.FireTimers(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, fired)
}

// awaitPlan is one step awaiting a payment for the run's order.
func awaitPlan() plans.Plan {
	return plans.Plan{Steps: []plans.Step{
		{ID: "pay", Terminal: true, Wait: plans.AwaitMessage("payment", "order", plans.Input("order"), 24*time.Hour)},
	}}
}

func payment(id, order string) cases.Delivery {
	return cases.Delivery{Project: project, Producer: "bank", MessageID: id,
		Keys:    []cases.Key{{Namespace: "kind", Value: "payment"}, {Namespace: "order", Value: order}},
		Payload: json.RawMessage(fmt.Sprintf(`{"paid": %q}`, order))}
}

// requirePaid checks that run id succeeded with message msg as its
// awaiting step's result, consumed once, by the step's wait.
func requirePaid(t testing.TB, e waitEnv, id int64, msg int64, order string) {
	t.Helper()
	ctx := context.Background()
	run, err := e.env.app.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, plans.Succeeded, run.Status)
	var out struct {
		ID      int64           `json:"id"`
		Payload json.RawMessage `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(run.Output, &out))
	require.Equal(t, msg, out.ID)
	require.JSONEq(t, fmt.Sprintf(`{"paid": %q}`, order), string(out.Payload))
	m, err := e.cases.Message(ctx, msg)
	require.NoError(t, err)
	require.Equal(t, cases.Consumed, m.Status)
	var consumers, satisfied int
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM docket.messages WHERE id = $1 AND consumed_by IS NOT NULL),
		       (SELECT count(*) FROM docket.waits WHERE run_id = $2 AND status = 'satisfied' AND satisfied_by = $1)`,
		msg, id).Scan(&consumers, &satisfied))
	require.Equal(t, 1, consumers)
	require.Equal(t, 1, satisfied)
}

// TestAnAwaitingStepConsumesItsMessageOnce: the message arrives after the
// wait registered, before it (buffered, met at registration), and twice
// (a producer's retry): consumed once each time, and the step's result is
// the message.
func TestAnAwaitingStepConsumesItsMessageOnce(t *testing.T) {
	t.Parallel()
	e := setupWaits(t)
	ctx := t.Context()

	t.Run("after", func(t *testing.T) {
		run, err := e.env.app.Start(ctx, plans.Start{Project: project, Plan: awaitPlan(), Input: json.RawMessage(`{"order": "o-1"}`)})
		require.NoError(t, err)
		require.True(t, run.Suspended)
		waits, err := e.env.app.Waits(ctx, run.ID)
		require.NoError(t, err)
		require.Len(t, waits, 1)
		require.Equal(t, []string{"kind:payment", "order:o-1"}, waits[0].Keys)
		live, leases := liveJobs(t, e, run.ID)
		require.Zero(t, live+leases)
		d, err := e.cases.Deliver(ctx, payment("m-1", "o-1"))
		require.NoError(t, err)
		require.Equal(t, cases.Consumed, d.Status)
		requirePaid(t, e, run.ID, d.ID, "o-1")
	})

	t.Run("before", func(t *testing.T) {
		d, err := e.cases.Deliver(ctx, payment("m-2", "o-2"))
		require.NoError(t, err)
		require.Equal(t, cases.Buffered, d.Status)
		run, err := e.env.app.Start(ctx, plans.Start{Project: project, Plan: awaitPlan(), Input: json.RawMessage(`{"order": "o-2"}`)})
		require.NoError(t, err)
		require.Equal(t, plans.Succeeded, run.Status, "the buffered message meets the wait as it registers")
		requirePaid(t, e, run.ID, d.ID, "o-2")
	})

	t.Run("deadline", func(t *testing.T) {
		run, err := e.env.app.Start(ctx, plans.Start{Project: project, Plan: awaitPlan(), Input: json.RawMessage(`{"order": "o-late"}`)})
		require.NoError(t, err)
		e.Clock.Advance(24 * time.Hour)
		var moved int
		require.NoError(t, e.API.QueryRow(ctx, `SELECT count(*) FROM docket.wait_expire_due(100, $1, $2)`,
			string(sweeper), e.Clock.Now()).Scan(&moved))
		require.Equal(t, 1, moved)
		run, err = e.env.app.Get(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, plans.Compensated, run.Status, "no message by the deadline fails the step")
		require.Contains(t, run.Failure, "step pay failed: wait step.pay: no message on kind:payment, order:o-late before its deadline")
		// Late, it is buffered as any unmatched message, and wakes nothing.
		d, err := e.cases.Deliver(ctx, payment("m-late", "o-late"))
		require.NoError(t, err)
		require.Equal(t, cases.Buffered, d.Status)
	})

	t.Run("duplicate", func(t *testing.T) {
		run, err := e.env.app.Start(ctx, plans.Start{Project: project, Plan: awaitPlan(), Input: json.RawMessage(`{"order": "o-3"}`)})
		require.NoError(t, err)
		first, err := e.cases.Deliver(ctx, payment("m-3", "o-3"))
		require.NoError(t, err)
		again, err := e.cases.Deliver(ctx, payment("m-3", "o-3"))
		require.NoError(t, err)
		require.True(t, again.Duplicate)
		require.Equal(t, first.ID, again.ID)
		requirePaid(t, e, run.ID, first.ID, "o-3")
		// Another payment for the order wakes nothing: the step consumed one.
		other, err := e.cases.Deliver(ctx, payment("m-4", "o-3"))
		require.NoError(t, err)
		require.Equal(t, cases.Buffered, other.Status)
		requirePaid(t, e, run.ID, first.ID, "o-3")
	})
}

// approvalPlan opens a task for bo (and app, its starter, who may not
// answer it), deciding reject at its deadline, then ships.
func approvalPlan() plans.Plan {
	return plans.Plan{Steps: []plans.Step{
		{ID: "approve", Args: []plans.Arg{{Name: "amount", Source: plans.Input("amount")}},
			Wait: plans.Approval(plans.TaskSpec{Title: "Approve the refund", Decisions: []string{"approve", "reject"},
				Audience: []access.Actor{app, bo}, Within: 48 * time.Hour, AutoDecision: "reject"})},
		{ID: "ship", After: []string{"approve"}, Terminal: true, Wait: plans.Sleep(time.Hour)},
	}}
}

// taskOf is the task run id's step waits on.
func taskOf(t testing.TB, e waitEnv, id int64) int64 {
	t.Helper()
	waits, err := e.env.app.Waits(t.Context(), id)
	require.NoError(t, err)
	require.Len(t, waits, 1)
	require.Equal(t, plans.WaitTask, waits[0].Type)
	require.NotZero(t, waits[0].TaskID)
	return waits[0].TaskID
}

func decision(t testing.TB, e waitEnv, run int64) (string, bool) {
	t.Helper()
	var d struct {
		Decision  string `json:"decision"`
		Automatic bool   `json:"automatic"`
	}
	require.NoError(t, json.Unmarshal(stepOf(t, e.env, run, "approve").Result, &d))
	return d.Decision, d.Automatic
}

// expireTasks runs the task expiry sweep once, as sweeper.
func expireTasks(t testing.TB, e waitEnv) (int, error) {
	var n int
	err := e.API.QueryRow(context.Background(), `SELECT count(*) FROM docket.task_expire_due(100, $1, $2)`,
		string(sweeper), e.Clock.Now()).Scan(&n)
	return n, err
}

// TestATaskStepHasFourEyes: the run's starter may not answer its task
// (DK008, nothing changed); a second person's decision resumes the run
// with it; an expiry resumes another with the declared decision.
func TestATaskStepHasFourEyes(t *testing.T) {
	t.Parallel()
	e := setupWaits(t)
	ctx := t.Context()

	run, err := e.env.app.Start(ctx, plans.Start{Project: project, Plan: approvalPlan(), Input: json.RawMessage(`{"amount": 40}`)})
	require.NoError(t, err)
	require.True(t, run.Suspended)
	id := taskOf(t, e, run.ID)
	task, err := e.bo.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, run.ID, task.RunID)
	require.Equal(t, "approve", task.StepID)
	require.Contains(t, task.Excluded, app, "whoever started the run is excluded")
	require.JSONEq(t, `{"amount": 40}`, string(task.Proposal))

	before := snapshot(t, e)
	_, err = e.app.Decide(ctx, id, "approve", "my own refund")
	require.ErrorIs(t, err, db.ErrExcludedActor)
	_, err = e.app.Claim(ctx, id, time.Hour)
	require.ErrorIs(t, err, db.ErrExcludedActor)
	require.Equal(t, before, snapshot(t, e))

	decided, err := e.bo.Decide(ctx, id, "approve", "fine")
	require.NoError(t, err)
	require.Equal(t, tasks.Decided, decided.Status)
	got, auto := decision(t, e, run.ID)
	require.Equal(t, "approve", got)
	require.False(t, auto)
	run, err = e.env.app.Get(ctx, run.ID)
	require.NoError(t, err)
	require.True(t, run.Suspended, "now sleeping in ship")
	require.Equal(t, plans.StepWaiting, stepOf(t, e.env, run.ID, "ship").State)

	// A retried opening finds the same task: one per (run, step).
	var again int64
	require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT docket.set_context($1, $2)`, string(app), e.Clock.Now()); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT (docket.task_open_step(r, 'approve', p.wait, '{}')).id FROM docket.runs r
			JOIN docket.plan_steps p ON p.plan_id = r.plan_id AND p.step_id = 'approve' WHERE r.id = $1`, run.ID).Scan(&again)
	}))
	require.Equal(t, id, again)
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.tasks WHERE run_id = $1`, run.ID).Scan(&n))
	require.Equal(t, 1, n)

	// The expiry: nobody answers; at the deadline the declared decision.
	late, err := e.env.app.Start(ctx, plans.Start{Project: project, Plan: approvalPlan(), Input: json.RawMessage(`{"amount": 9}`)})
	require.NoError(t, err)
	e.Clock.Advance(48 * time.Hour)
	moved, err := expireTasks(t, e)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	got, auto = decision(t, e, late.ID)
	require.Equal(t, "reject", got)
	require.True(t, auto)
	require.Equal(t, plans.StepSucceeded, stepOf(t, e.env, late.ID, "approve").State)
}

// TestADecisionRacingTheExpirySettlesOnce: bo's decision and the expiry
// sweep, released together past the deadline, settle the task once and
// the step once, with the task's decision, again and again.
func TestADecisionRacingTheExpirySettlesOnce(t *testing.T) {
	t.Parallel()
	e := setupWaits(t)
	ctx := t.Context()
	for i := range 8 {
		run, err := e.env.app.Start(ctx, plans.Start{Project: project, Plan: approvalPlan(), Input: json.RawMessage(fmt.Sprintf(`{"amount": %d}`, i))})
		require.NoError(t, err)
		id := taskOf(t, e, run.ID)
		e.Clock.Advance(48 * time.Hour)
		start := make(chan struct{})
		var wg sync.WaitGroup
		var decideErr, sweepErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, decideErr = e.bo.Decide(ctx, id, "approve", "")
		}()
		go func() {
			defer wg.Done()
			<-start
			_, sweepErr = expireTasks(t, e)
		}()
		close(start)
		wg.Wait()
		require.NoError(t, sweepErr)
		if decideErr != nil {
			require.ErrorIs(t, decideErr, db.ErrAlreadyAnswered, "the loser is told the task was settled first")
		}
		task, err := e.bo.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, tasks.Decided, task.Status)
		got, auto := decision(t, e, run.ID)
		require.Equal(t, task.Decision, got)
		require.Equal(t, task.Automatic, auto)
		var settles, consumed int
		require.NoError(t, e.Pool.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM docket.task_events WHERE task_id = $1 AND what = 'decided'),
			       (SELECT count(*) FROM docket.messages WHERE producer = 'docket.task' AND message_id = $1::text)`,
			id).Scan(&settles, &consumed))
		require.Equal(t, 1, settles)
		require.Equal(t, 1, consumed)
		require.Equal(t, plans.StepWaiting, stepOf(t, e.env, run.ID, "ship").State)
	}
}

// waitAllPlan waits on all three at once: a sleep, a payment and a task.
func waitAllPlan() plans.Plan {
	return plans.Plan{Steps: []plans.Step{
		{ID: "nap", Wait: plans.Sleep(time.Hour)},
		{ID: "pay", Wait: plans.AwaitMessage("payment", "order", plans.Input("order"), 24*time.Hour)},
		{ID: "approve", Wait: plans.Approval(plans.TaskSpec{Title: "Approve", Decisions: []string{"approve"},
			Audience: []access.Actor{bo}, Within: time.Hour, AutoDecision: "approve"})},
		{ID: "done", After: []string{"nap", "pay", "approve"}, Terminal: true, Wait: plans.Sleep(time.Hour)},
	}}
}

// TestCancellingAWaitingRunClosesWhatItWaitsOn: a cancelled run's task is
// withdrawn, its timer disarmed and its wait withdrawn; a message arriving
// later stays buffered, a timer sweep later fires nothing, a decision is
// refused, and the run stays compensated.
func TestCancellingAWaitingRunClosesWhatItWaitsOn(t *testing.T) {
	t.Parallel()
	e := setupWaits(t)
	ctx := t.Context()
	run, err := e.env.app.Start(ctx, plans.Start{Project: project, Plan: waitAllPlan(), Input: json.RawMessage(`{"order": "o-9"}`)})
	require.NoError(t, err)
	require.True(t, run.Suspended)
	waits, err := e.env.app.Waits(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, waits, 3)
	var taskID int64
	for _, w := range waits {
		if w.TaskID != 0 {
			taskID = w.TaskID
		}
	}

	run, err = e.env.app.Cancel(ctx, run.ID, "changed our mind")
	require.NoError(t, err)
	require.Equal(t, plans.Compensated, run.Status)
	require.False(t, run.Suspended)
	for _, id := range []string{"nap", "pay", "approve"} {
		require.Equal(t, plans.StepCancelled, stepOf(t, e.env, run.ID, id).State, id)
	}
	task, err := e.bo.Get(ctx, taskID)
	require.NoError(t, err)
	require.Equal(t, tasks.Withdrawn, task.Status)
	var waiting, armed int
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM docket.waits WHERE run_id = $1 AND status = 'waiting'),
		       (SELECT count(*) FROM docket.timers WHERE run_id = $1 AND disarmed_at IS NULL)`, run.ID).Scan(&waiting, &armed))
	require.Zero(t, waiting, "its subscriptions are retired")
	require.Zero(t, armed, "its timer is disarmed")

	before := testkit.Snapshot(t, e.Pool, "docket.waits", "docket.tasks", "docket.timers", "docket.runs", "docket.run_steps")
	d, err := e.cases.Deliver(ctx, payment("m-9", "o-9"))
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, d.Status, "a later message wakes nothing")
	e.Clock.Advance(2 * time.Hour)
	fired, err := e.sweeps.FireTimers(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, fired)
	_, err = e.bo.Decide(ctx, taskID, "approve", "")
	require.ErrorIs(t, err, db.ErrAlreadyAnswered)
	moved, err := expireTasks(t, e)
	require.NoError(t, err)
	require.Zero(t, moved)
	require.Equal(t, before, testkit.Snapshot(t, e.Pool, "docket.waits", "docket.tasks", "docket.timers", "docket.runs", "docket.run_steps"))
	run, err = e.env.app.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Compensated, run.Status)
}

// TestAnotherProjectCannotSeeOrSettleAStepsWaits: rita, holding every
// grant in the other project, sees none of a run's wait, timer and task in
// acme, cannot answer the task, and her sweeps and deliveries move nothing
// of it.
func TestAnotherProjectCannotSeeOrSettleAStepsWaits(t *testing.T) {
	t.Parallel()
	e := setupWaits(t)
	ctx := t.Context()
	run, err := e.env.app.Start(ctx, plans.Start{Project: project, Plan: waitAllPlan(), Input: json.RawMessage(`{"order": "o-5"}`)})
	require.NoError(t, err)
	taskID := int64(0)
	waits, err := e.env.app.Waits(ctx, run.ID)
	require.NoError(t, err)
	for _, w := range waits {
		if w.TaskID != 0 {
			taskID = w.TaskID
		}
	}
	login := e.Login(t, testkit.AppRole, rita)
	var seen int
	require.NoError(t, login.Pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM docket.waits) + (SELECT count(*) FROM docket.timers) + (SELECT count(*) FROM docket.tasks)
		     + (SELECT count(*) FROM docket.run_steps) + (SELECT count(*) FROM docket.run_waits)`).Scan(&seen))
	require.Zero(t, seen, "RLS hides another project's steps' waits, timers and tasks")

	ritaTasks, err := tasks.NewClient(login.Pool, tasks.Config{Actor: rita, Clock: e.Clock})
	require.NoError(t, err)
	ritaCases, err := cases.NewClient(login.Pool, cases.Config{Actor: rita, Clock: e.Clock})
	require.NoError(t, err)
	ritaPlans, err := plans.NewClient(login.Pool, plans.Config{Actor: rita, Clock: e.Clock})
	require.NoError(t, err)

	e.Clock.Advance(2 * time.Hour)
	before := snapshot(t, e)
	_, err = ritaTasks.Get(ctx, taskID)
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = ritaTasks.Decide(ctx, taskID, "approve", "")
	require.ErrorIs(t, err, db.ErrNotFound)
	rw, err := ritaPlans.Waits(ctx, run.ID)
	require.NoError(t, err)
	require.Empty(t, rw)
	_, err = ritaPlans.Cancel(ctx, run.ID, "")
	require.ErrorIs(t, err, db.ErrNotFound)
	fired, err := ritaCases.FireTimers(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, fired)
	var moved int
	require.NoError(t, login.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.task_expire_due(100, $1, $2)`,
		string(rita), e.Clock.Now()).Scan(&moved))
	require.Zero(t, moved)
	require.NoError(t, login.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.wait_expire_due(100, $1, $2)`,
		string(rita), e.Clock.Now().Add(48*time.Hour)).Scan(&moved))
	require.Zero(t, moved)
	_, err = ritaCases.Deliver(ctx, cases.Delivery{Project: project, Producer: "bank", MessageID: "x",
		Keys: []cases.Key{{Namespace: "kind", Value: "payment"}, {Namespace: "order", Value: "o-5"}}})
	require.ErrorIs(t, err, db.ErrNotPermitted)
	require.Equal(t, before, snapshot(t, e))
}

// TestASweepOfStepTimersIsARangeScan: with 20,000 step timers of which 100
// are due and 5,000 fired, the timer sweep's batch comes from the partial
// index of armed timers by instant, and the sweep reads and fires the 100
// due ones only.
func TestASweepOfStepTimersIsARangeScan(t *testing.T) {
	t.Parallel()
	e := setupWaits(t)
	ctx := t.Context()
	run, err := e.env.app.Start(ctx, plans.Start{Project: project, Plan: plans.Plan{Steps: []plans.Step{
		{ID: "nap", Terminal: true, Wait: plans.Sleep(time.Hour)}}}})
	require.NoError(t, err)
	// Copies of the run, each suspended in nap: 100 due at T0+1h, the
	// rest later, 5,000 of them fired already.
	_, err = e.Pool.Exec(ctx, `
		WITH r AS (
			INSERT INTO docket.runs (project, plan_id, input, input_trusted, replan_limit, admitted, created_by, created_at, updated_at)
			SELECT project, plan_id, input, input_trusted, replan_limit, 1, created_by, created_at, updated_at
			FROM docket.runs, generate_series(1, 20000) WHERE id = $1
			RETURNING id, created_at
		), s AS (
			INSERT INTO docket.run_steps (run_id, step_id, version, kind, state, ready_seq, args, trusted, admitted_at, updated_at, wait)
			SELECT id, 'nap', 1, 'docket.wait.sleep', 'waiting', 1, '{}', true, created_at, created_at, 'sleep' FROM r
			RETURNING run_id, admitted_at
		)
		INSERT INTO docket.timers (project, run_id, step_id, name, wake_at, created_by, created_at)
		SELECT $2, run_id, 'nap', 'step.nap', admitted_at + CASE WHEN run_id % 200 = 0 THEN interval '1 hour' ELSE interval '2 days' END,
		       'svc:app', admitted_at FROM s`, run.ID, project)
	require.NoError(t, err)
	_, err = e.Pool.Exec(ctx, `UPDATE docket.timers SET fired_at = created_at + interval '1 second'
		WHERE id IN (SELECT id FROM docket.timers WHERE run_id % 200 <> 0 AND run_id <> $1 ORDER BY id LIMIT 5000)`, run.ID)
	require.NoError(t, err)
	_, err = e.Pool.Exec(ctx, `ANALYZE docket.timers`)
	require.NoError(t, err)
	now := testkit.T0.Add(time.Hour)
	text := pgtest.Explain(t, e.Pool, timerSweepQuery, now, string(sweeper))
	t.Logf("timer sweep plan at 20,000 step timers, 101 due:\n%s", text)
	require.Regexp(t, `Index Scan using timers_armed_idx on timers \(actual [^)]*rows=101 loops=1\)`, text)
	require.NotContains(t, text, "Seq Scan")

	const stats = `SELECT pg_stat_get_xact_tuples_returned('docket.timers_armed_idx'::regclass),
		pg_stat_get_xact_numscans('docket.timers'::regclass)`
	var before, after [2]int64
	var fired int
	require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, stats).Scan(&before[0], &before[1]); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM docket.timer_fire_due(10000, $1, $2)`, string(sweeper), now).Scan(&fired); err != nil {
			return err
		}
		return tx.QueryRow(ctx, stats).Scan(&after[0], &after[1])
	}))
	require.Equal(t, 101, fired)
	require.EqualValues(t, 101, after[0]-before[0], "the sweep reads the due entries of timers_armed_idx, no more")
	require.Zero(t, after[1]-before[1], "the sweep never scans docket.timers")
}

// timerSweepQuery is the statement timer_fire_due runs to find its batch,
// for EXPLAIN.
const timerSweepQuery = `
	SELECT * FROM docket.timers
	WHERE run_id IS NOT NULL AND fired_at IS NULL AND disarmed_at IS NULL AND wake_at <= $1
	  AND docket.grant_check($2, project, 'case.sweep')
	ORDER BY wake_at, id
	LIMIT 10000
	FOR UPDATE SKIP LOCKED`

// TestTenThousandSleepingRunsResumeInOneSweep (DOCKET_MEASURE=1): 10,000
// runs suspended on a sleep, all resumed by one timer sweep; it logs the
// sweep's time and the rows it wrote.
func TestTenThousandSleepingRunsResumeInOneSweep(t *testing.T) {
	if os.Getenv("DOCKET_MEASURE") == "" {
		t.Skip("set DOCKET_MEASURE=1 to measure")
	}
	e := setupWaits(t)
	ctx := t.Context()
	p := plans.Plan{Steps: []plans.Step{
		{ID: "nap", Wait: plans.Sleep(time.Hour)},
		{ID: "wake", After: []string{"nap"}, Terminal: true, Wait: plans.Sleep(time.Hour)},
	}}
	const n = 10000
	began := time.Now()
	for range n / 500 {
		require.NoError(t, db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
			for range 500 {
				if _, err := e.env.app.StartTx(ctx, tx, plans.Start{Project: project, Plan: p}); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	t.Logf("started %d suspended runs in %s", n, time.Since(began))
	e.Clock.Advance(time.Hour)
	const stats = `SELECT coalesce(sum(n_tup_ins), 0), coalesce(sum(n_tup_upd), 0) FROM pg_stat_xact_user_tables`
	var ins0, upd0, ins1, upd1 int64
	var fired int
	var took time.Duration
	require.NoError(t, db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, stats).Scan(&ins0, &upd0); err != nil {
			return err
		}
		start := time.Now()
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM docket.timer_fire_due(10000, $1, $2)`,
			string(sweeper), e.Clock.Now()).Scan(&fired); err != nil {
			return err
		}
		took = time.Since(start)
		return tx.QueryRow(ctx, stats).Scan(&ins1, &upd1)
	}))
	require.Equal(t, n, fired)
	t.Logf("one sweep resumed %d runs in %s (%.1f µs a run): %d rows inserted, %d updated (%.1f a run)",
		fired, took, float64(took.Microseconds())/n, ins1-ins0, upd1-upd0, float64(ins1-ins0+upd1-upd0)/n)
	var waiting int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.run_steps WHERE step_id = 'wake' AND state = 'waiting'`).Scan(&waiting))
	require.Equal(t, n, waiting, "every run moved on to its next step")
}

// snapshot renders what a refusal must leave unchanged.
func snapshot(t testing.TB, e waitEnv) string {
	return testkit.Snapshot(t, e.Pool, "docket.waits", "docket.tasks", "docket.task_events", "docket.timers",
		"docket.messages", "docket.runs", "docket.run_steps", "docket.jobs(id, state)")
}

// TestACancelRacingTheAnswersClosesTheRunOnce: a cancel, a decision, a
// delivery and the timer sweep, released together on a run waiting on all
// three, again and again: none deadlocks or fails but as documented (a
// decision after the withdrawal is told the task was settled first), the
// run ends compensated, and nothing of it is left waiting or armed.
func TestACancelRacingTheAnswersClosesTheRunOnce(t *testing.T) {
	t.Parallel()
	e := setupWaits(t)
	ctx := t.Context()
	for i := range 6 {
		order := fmt.Sprintf("race-%d", i)
		run, err := e.env.app.Start(ctx, plans.Start{Project: project, Plan: waitAllPlan(), Input: json.RawMessage(fmt.Sprintf(`{"order": %q}`, order))})
		require.NoError(t, err)
		id := taskOf3(t, e, run.ID)
		e.Clock.Advance(time.Hour)
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for k, f := range []func() error{
			func() error { _, err := e.env.app.Cancel(ctx, run.ID, "race"); return err },
			func() error { _, err := e.bo.Decide(ctx, id, "approve", ""); return err },
			func() error { _, err := e.cases.Deliver(ctx, payment("m-"+order, order)); return err },
			func() error { _, err := e.sweeps.FireTimers(ctx, 100); return err },
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[k] = f()
			}()
		}
		close(start)
		wg.Wait()
		require.NoError(t, errs[0], "cancel")
		if errs[1] != nil {
			require.ErrorIs(t, errs[1], db.ErrAlreadyAnswered, "decision")
		}
		require.NoError(t, errs[2], "delivery")
		require.NoError(t, errs[3], "timer sweep")
		got, err := e.env.app.Get(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, plans.Compensated, got.Status)
		var waiting, armed, open int
		require.NoError(t, e.Pool.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM docket.waits WHERE run_id = $1 AND status = 'waiting'),
			       (SELECT count(*) FROM docket.timers WHERE run_id = $1 AND fired_at IS NULL AND disarmed_at IS NULL),
			       (SELECT count(*) FROM docket.tasks WHERE run_id = $1 AND status IN ('pending', 'escalated'))`,
			run.ID).Scan(&waiting, &armed, &open))
		require.Zero(t, waiting+armed+open)
		for _, s := range []string{"nap", "pay", "approve"} {
			st := stepOf(t, e.env, run.ID, s).State
			require.Contains(t, []plans.StepState{plans.StepSucceeded, plans.StepCancelled}, st, s)
		}
	}
}

// taskOf3 is the task of waitAllPlan's run id.
func taskOf3(t testing.TB, e waitEnv, id int64) int64 {
	t.Helper()
	waits, err := e.env.app.Waits(t.Context(), id)
	require.NoError(t, err)
	for _, w := range waits {
		if w.TaskID != 0 {
			return w.TaskID
		}
	}
	t.Fatalf("run %d opened no task", id)
	return 0
}
