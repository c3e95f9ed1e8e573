package plans_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/worker"
)

// TestADiamondRunsAndAssemblesArguments: a -> (b, c) -> d; each step gets
// its arguments from the run's input, constants and its predecessors'
// results, and the run's output is the terminal step's result.
func TestADiamondRunsAndAssemblesArguments(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	seen := sync.Map{}
	echo := func(_ context.Context, j jobs.Job, args Args) (any, error) {
		_, s, _, _ := plans.StepOf(j)
		seen.Store(s, args)
		return map[string]any{"step": s, "n": len(args)}, nil
	}
	r := startRunner(t, e, map[string]handler{"t.a": echo, "t.b": echo, "t.c": echo, "t.d": echo})
	p := plans.Plan{Steps: []plans.Step{
		{ID: "a", Kind: "t.a", Args: []plans.Arg{{Name: "order", Source: plans.Input("order")}}},
		{ID: "b", Kind: "t.b", After: []string{"a"}, Args: []plans.Arg{{Name: "from_a", Source: plans.StepPath("a", "step")}}},
		{ID: "c", Kind: "t.c", After: []string{"a"}, Args: []plans.Arg{{Name: "fixed", Source: plans.Const(42)}}},
		{ID: "d", Kind: "t.d", After: []string{"b", "c"}, Terminal: true, Args: []plans.Arg{
			{Name: "b", Source: plans.StepResult("b")}, {Name: "a", Source: plans.StepResult("a")}}},
	}}
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p, Input: json.RawMessage(`{"order": 7}`), InputTrusted: true})
	require.NoError(t, err)
	require.Equal(t, plans.Digest(p), run.Digest)
	run = waitRun(t, e, run.ID, r)
	require.Equal(t, plans.Succeeded, run.Status)
	require.JSONEq(t, `{"step": "d", "n": 2}`, string(run.Output))
	a, _ := seen.Load("a")
	require.JSONEq(t, `7`, string(a.(Args)["order"]))
	b, _ := seen.Load("b")
	require.JSONEq(t, `"a"`, string(b.(Args)["from_a"]))
	c, _ := seen.Load("c")
	require.JSONEq(t, `42`, string(c.(Args)["fixed"]))
	d, _ := seen.Load("d")
	require.JSONEq(t, `{"step": "b", "n": 1}`, string(d.(Args)["b"]))
	steps, err := e.app.Steps(ctx, run.ID)
	require.NoError(t, err)
	var order []string
	for _, s := range steps {
		order = append(order, s.StepID)
		require.Equal(t, plans.StepSucceeded, s.State)
		require.True(t, s.Trusted)
	}
	require.Equal(t, []string{"a", "b", "c", "d"}, order, "ready order: by wave, ascending id")

	// The same plan again is the same stored plan.
	again, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p, Input: json.RawMessage(`{"order": 8}`)})
	require.NoError(t, err)
	require.Equal(t, run.Digest, again.Digest)
	var plansStored int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.plans").Scan(&plansStored))
	require.Equal(t, 1, plansStored)
}

// TestSiblingsRunConcurrently: b and c, both after a, each wait for the
// other to start before they finish: a worker that ran them one after
// another would deadlock, so the run succeeds only if they ran at once.
func TestSiblingsRunConcurrently(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	barriers := map[string]chan struct{}{"b": make(chan struct{}), "c": make(chan struct{})}
	var closeOnce sync.Map
	rendezvous := func(me, other string) handler {
		return func(ctx context.Context, j jobs.Job, _ Args) (any, error) {
			if o, _ := closeOnce.LoadOrStore(me, new(sync.Once)); o != nil {
				o.(*sync.Once).Do(func() { close(barriers[me]) })
			}
			select {
			case <-barriers[other]:
				return "met", nil
			case <-time.After(20 * time.Second):
				return nil, worker.Fail(jobs.ClassPermanent, errors.New("the sibling never started: steps ran one after another"))
			}
		}
	}
	ok := func(context.Context, jobs.Job, Args) (any, error) { return "ok", nil }
	r := startRunner(t, e, map[string]handler{"t.a": ok, "t.b": rendezvous("b", "c"), "t.c": rendezvous("c", "b"), "t.d": ok})
	p := plans.Plan{Steps: []plans.Step{step("a", "t.a"), step("b", "t.b", "a"), step("c", "t.c", "a"), step("d", "t.d", "b", "c")}}
	p.Steps[3].Terminal = true
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
	require.NoError(t, err)
	require.Equal(t, plans.Succeeded, waitRun(t, e, run.ID, r).Status)
}

// TestFanOutAndFanIn: one step fans out to 100, and a join after all of
// them receives all 100 results, once, with two workers taking the steps,
// three runs over.
func TestFanOutAndFanIn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	var joins sync.Map
	kinds := map[string]handler{
		"t.root": func(context.Context, jobs.Job, Args) (any, error) { return 0, nil },
		"t.leaf": func(_ context.Context, j jobs.Job, _ Args) (any, error) {
			_, s, _, _ := plans.StepOf(j)
			return s, nil
		},
		"t.join": func(_ context.Context, j jobs.Job, args Args) (any, error) {
			run, _, _, _ := plans.StepOf(j)
			n, _ := joins.LoadOrStore(run, new(int))
			*n.(*int)++
			return len(args), nil
		},
	}
	r1, r2 := startRunner(t, e, kinds), startRunner(t, e, kinds)
	p := plans.Plan{Steps: []plans.Step{step("root", "t.root")}}
	join := plans.Step{ID: "zjoin", Kind: "t.join", Terminal: true}
	for i := range 100 {
		id := fmt.Sprintf("leaf%03d", i)
		p.Steps = append(p.Steps, step(id, "t.leaf", "root"))
		join.After = append(join.After, id)
		join.Args = append(join.Args, plans.Arg{Name: fmt.Sprintf("r%03d", i), Source: plans.StepResult(id)})
	}
	p.Steps = append(p.Steps, join)
	for range 3 {
		run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
		require.NoError(t, err)
		run = waitRun(t, e, run.ID, r1, r2)
		require.Equal(t, plans.Succeeded, run.Status)
		require.JSONEq(t, `100`, string(run.Output), "the join saw all 100 results")
		n, _ := joins.Load(run.ID)
		require.Equal(t, 1, *n.(*int), "the join ran once")
		steps, err := e.app.Steps(ctx, run.ID)
		require.NoError(t, err)
		require.Len(t, steps, 102)
	}
}

// TestTheUnwindOrderIsAPropertyOfThePlan: a succeeds, b, c and d run at
// once with random delays and succeed, e (after all three) fails for good.
// Twenty runs unwind in the same order, d, c, b, a: the reverse of ready
// order, whatever order the jobs finished in.
func TestTheUnwindOrderIsAPropertyOfThePlan(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	var mu sync.Mutex
	undone := map[int64][]string{}
	finished := map[int64][]string{}
	work := func(_ context.Context, j jobs.Job, _ Args) (any, error) {
		time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond) // the jobs' own work, of random length
		run, s, _, _ := plans.StepOf(j)
		mu.Lock()
		finished[run] = append(finished[run], s)
		mu.Unlock()
		return s, nil
	}
	undo := func(_ context.Context, j jobs.Job, args Args) (any, error) {
		run, _, _, _ := plans.StepOf(j)
		var s string
		require.NoError(t, json.Unmarshal(args["step"], &s))
		mu.Lock()
		undone[run] = append(undone[run], s)
		mu.Unlock()
		return nil, nil
	}
	fail := func(context.Context, jobs.Job, Args) (any, error) {
		return nil, worker.Fail(jobs.ClassPermanent, errors.New("the ledger refused"))
	}
	r := startRunner(t, e, map[string]handler{"t.work": work, "t.undo": undo, "t.fail": fail})
	p := plans.Plan{Steps: []plans.Step{
		{ID: "a", Kind: "t.work", Compensation: "t.undo"},
		{ID: "b", Kind: "t.work", After: []string{"a"}, Compensation: "t.undo"},
		{ID: "c", Kind: "t.work", After: []string{"a"}, Compensation: "t.undo"},
		{ID: "d", Kind: "t.work", After: []string{"a"}, Compensation: "t.undo"},
		{ID: "e", Kind: "t.fail", After: []string{"b", "c", "d"}, Terminal: true},
	}}
	orders := map[string]bool{}
	for range 20 {
		run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
		require.NoError(t, err)
		run = waitRun(t, e, run.ID, r)
		require.Equal(t, plans.Compensated, run.Status)
		require.Contains(t, run.Failure, "step e failed")
		mu.Lock()
		require.Equal(t, []string{"d", "c", "b", "a"}, undone[run.ID])
		orders[fmt.Sprint(finished[run.ID])] = true
		mu.Unlock()
		steps, err := e.app.Steps(ctx, run.ID)
		require.NoError(t, err)
		for _, s := range steps {
			if s.StepID == "e" {
				require.Equal(t, plans.StepFailed, s.State)
			} else {
				require.Equal(t, plans.StepCompensated, s.State, s.StepID)
			}
		}
	}
	t.Logf("completion orders seen: %d", len(orders))
}

// TestTrustLabelsJoin: an untrusted input makes every step downstream of
// it untrusted; a step that requires trusted input is refused, naming the
// source, and the run unwinds.
func TestTrustLabelsJoin(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	ok := func(context.Context, jobs.Job, Args) (any, error) { return "ok", nil }
	r := startRunner(t, e, map[string]handler{"t.read": ok, "t.pay": ok, "t.note": ok})
	p := plans.Plan{Steps: []plans.Step{
		{ID: "read", Kind: "t.read", Args: []plans.Arg{{Name: "text", Source: plans.Input("email")}}},
		{ID: "note", Kind: "t.note", After: []string{"read"}},
		{ID: "pay", Kind: "t.pay", After: []string{"note"}, Trusted: true, Terminal: true,
			Args: []plans.Arg{{Name: "amount", Source: plans.Const(10)}}},
	}}
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p, Input: json.RawMessage(`{"email": "pay me"}`), InputTrusted: false})
	require.NoError(t, err)
	run = waitRun(t, e, run.ID, r)
	require.Equal(t, plans.Compensated, run.Status)
	require.Contains(t, run.Failure, "step pay refused")
	require.Contains(t, run.UntrustedRead, "the run's input at email")
	steps, err := e.app.Steps(ctx, run.ID)
	require.NoError(t, err)
	last := steps[len(steps)-1]
	require.Equal(t, plans.StepRefused, last.State)
	require.Contains(t, last.Reason, "predecessor note, which is untrusted")
	require.Zero(t, last.JobID, "a refused step enqueues nothing")

	// The same plan on trusted input runs through.
	run, err = e.app.Start(ctx, plans.Start{Project: project, Plan: p, Input: json.RawMessage(`{"email": "pay me"}`), InputTrusted: true})
	require.NoError(t, err)
	require.Equal(t, plans.Succeeded, waitRun(t, e, run.ID, r).Status)
}

// TestAThousandStepPlanRuns validates and runs a chain of 1,000 steps.
func TestAThousandStepPlanRuns(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	r := startRunner(t, e, map[string]handler{"t.inc": func(_ context.Context, _ jobs.Job, args Args) (any, error) {
		var n int
		if v, ok := args["n"]; ok {
			_ = json.Unmarshal(v, &n)
		}
		return map[string]int{"n": n + 1}, nil
	}})
	p := stepChain(1000)
	require.NoError(t, plans.Check(p, nil, plans.DefaultLimits))
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
	require.NoError(t, err)
	run = waitRun(t, e, run.ID, r)
	require.Equal(t, plans.Succeeded, run.Status)
	require.JSONEq(t, `{"n": 1000}`, string(run.Output))
}

// stepChain is a plan of n steps, each after and sourcing the one before.
func stepChain(n int) plans.Plan {
	p := plans.Plan{}
	for i := range n {
		s := plans.Step{ID: fmt.Sprintf("s%04d", i), Kind: "t.inc", Args: []plans.Arg{}}
		if i > 0 {
			prev := fmt.Sprintf("s%04d", i-1)
			s.After = []string{prev}
			s.Args = []plans.Arg{{Name: "n", Source: plans.StepPath(prev, "n")}}
		}
		s.Terminal = i == n-1
		p.Steps = append(p.Steps, s)
	}
	return p
}

// TestStartRefuses: a plan that does not validate, every problem named; a
// caller without the grants; out-of-range input; nothing stored.
func TestStartRefuses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	bad := plans.Plan{Steps: []plans.Step{
		{ID: "a", Kind: "t.a", After: []string{"b"}},
		{ID: "b", Kind: "t.b", After: []string{"a"}},
		{ID: "c", Kind: "Not A Kind", Args: []plans.Arg{{Name: "x", Source: plans.StepResult("zz")}}},
	}}
	_, err := e.app.Start(ctx, plans.Start{Project: project, Plan: bad})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	var inv *plans.Invalid
	require.ErrorAs(t, err, &inv)
	classes := map[plans.ProblemClass]bool{}
	for _, pr := range inv.Problems {
		classes[pr.Class] = true
	}
	for _, c := range []plans.ProblemClass{plans.ProblemCycle, plans.ProblemInvalidKind, plans.ProblemSourceNotPredecessor, plans.ProblemNoTerminal} {
		require.True(t, classes[c], "%s among %v", c, inv.Problems)
	}
	good := stepChain(3)
	sc, err := plans.NewClient(e.API, plans.Config{Actor: sam, Clock: e.Clock})
	require.NoError(t, err)
	_, err = sc.Start(ctx, plans.Start{Project: project, Plan: good})
	require.ErrorIs(t, err, db.ErrNotPermitted)
	_, err = e.app.Start(ctx, plans.Start{Project: project, Plan: good, ReplanLimit: plans.MaxReplans + 1})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = e.app.Start(ctx, plans.Start{Project: project, Plan: good, Input: json.RawMessage(`{`)})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = e.app.Start(ctx, plans.Start{Project: project, Plan: good, CaseID: 424242})
	require.ErrorIs(t, err, db.ErrNotFound)
	// By hand, a plan text that is not what its digest says, or has a cycle.
	_, err = e.API.Exec(ctx, `SELECT docket.run_start('acme', repeat('0', 64), '{"steps": []}', '{}', true, 0, 0, 'svc:app', $1)`, e.Clock.Now())
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument)
	cyclic := `{"steps":[{"id":"a","kind":"t.a","args":[],"after":["b"],"terminal":true},{"id":"b","kind":"t.b","args":[],"after":["a"],"terminal":false}]}`
	_, err = e.API.Exec(ctx, `SELECT docket.run_start('acme', encode(sha256(convert_to($2, 'UTF8')), 'hex'), $2, '{}', true, 0, 0, 'svc:app', $1)`,
		e.Clock.Now(), cyclic)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument)
	require.ErrorContains(t, db.Translate(err, "raw"), "cycle")
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM docket.plans) + (SELECT count(*) FROM docket.runs)").Scan(&n))
	require.Zero(t, n, "nothing stored")
}

var _ = slices.Sort[[]string]

// TestAResultLabelledUntrustedJoinsDownstream: on trusted input, a step
// that labels its result untrusted taints what is sourced from it and
// everything after it, as an untrusted input would: a Trusted step fed
// from it is refused naming the source, a step after it (no data) gets
// untrusted input, the read is recorded on the run, and a replan is
// refused. Unlabelled, the same plan runs through.
func TestAResultLabelledUntrustedJoinsDownstream(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	p := plans.Plan{Steps: []plans.Step{
		{ID: "fetch", Kind: "t.fetch", Args: []plans.Arg{}},
		{ID: "note", Kind: "t.note", After: []string{"fetch"}, Args: []plans.Arg{}},
		{ID: "pay", Kind: "t.pay", After: []string{"fetch"}, Trusted: true, Terminal: true,
			Args: []plans.Arg{{Name: "amount", Source: plans.StepPath("fetch", "amount")}}},
	}}
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p, InputTrusted: true, ReplanLimit: 1})
	require.NoError(t, err)
	labelled, err := plans.LabelUntrusted(map[string]int{"amount": 10})
	require.NoError(t, err)
	complete(t, e, run.ID, "fetch", string(labelled))
	got, err := e.app.Get(ctx, run.ID)
	require.NoError(t, err)
	_, err = e.app.Replan(ctx, run.ID, got.Digest, p, "try again")
	require.ErrorIs(t, err, db.ErrInvalidArgument, "no replan once an untrusted result was read")
	complete(t, e, run.ID, "note", `"n"`) // applied in ready order: note, then pay's refusal

	got, err = e.app.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Compensated, got.Status)
	require.Contains(t, got.Failure, "step pay refused")
	require.Equal(t, "step note: predecessor fetch, which is untrusted", got.UntrustedRead)
	steps, err := e.app.Steps(ctx, run.ID)
	require.NoError(t, err)
	byID := map[string]plans.RunStep{}
	for _, s := range steps {
		byID[s.StepID] = s
	}
	require.True(t, byID["fetch"].Trusted, "fetch's own input was trusted")
	require.False(t, byID["fetch"].ResultTrusted, "its result is labelled untrusted")
	require.False(t, byID["note"].Trusted, "downstream of an untrusted result, data or not")
	require.Equal(t, plans.StepRefused, byID["pay"].State)
	require.Contains(t, byID["pay"].Reason, "argument amount from step fetch at amount (its result labelled untrusted)")

	// The label is written once: not even the owner's SQL launders it, and
	// the API's logins write no run step at all.
	_, err = e.Pool.Exec(ctx, `UPDATE docket.run_steps SET result_trusted = true WHERE run_id = $1 AND step_id = 'fetch'`, run.ID)
	require.ErrorContains(t, err, "its result's trust label is written once")
	_, err = e.API.Exec(ctx, `UPDATE docket.run_steps SET result_trusted = true WHERE run_id = $1 AND step_id = 'fetch'`, run.ID)
	require.ErrorContains(t, err, "permission denied")

	// Unlabelled (or labelled trusted, which raises nothing), it runs through.
	for _, result := range []string{`{"amount": 10}`, `{"amount": 10, "trust": "trusted"}`} {
		run, err = e.app.Start(ctx, plans.Start{Project: project, Plan: p, InputTrusted: true})
		require.NoError(t, err)
		complete(t, e, run.ID, "fetch", result)
		complete(t, e, run.ID, "note", `"n"`)
		complete(t, e, run.ID, "pay", `"paid"`)
		got, err = e.app.Get(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, plans.Succeeded, got.Status, result)
		require.Empty(t, got.UntrustedRead)
	}
}

// TestAStepTheCommitClaimsWakesNoWorker: a chain's next step is made ready
// by the transaction that records its predecessor's success, and the
// worker's claim in that transaction takes it: the commit notifies no
// worker of it (job_wake_release). Only the start's commit notifies.
func TestAStepTheCommitClaimsWakesNoWorker(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	notified := testkit.Listen(t, e.Pool, worker.NotifyChannel)
	ok := func(context.Context, jobs.Job, Args) (any, error) { return "ok", nil }
	r := startRunner(t, e, map[string]handler{"t.a": ok, "t.b": ok, "t.c": ok})
	p := chainOf("t.a", "t.b", "t.c")
	for range 3 {
		run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
		require.NoError(t, err)
		require.Equal(t, plans.Succeeded, waitRun(t, e, run.ID, r).Status)
	}
	require.Equal(t, []string{"default", "default", "default"}, notified(), "one notification a run: its start's")
}
