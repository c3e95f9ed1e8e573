package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/budgets"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/worker"
)

// The plans tests' grants: svc:app starts runs and runs their steps;
// user:vic views acme's cases, and so may read its runs; user:sam holds
// nothing.
func setupPlans(t *testing.T) (harness, *plans.Client) {
	t.Helper()
	h := setup(t,
		testkit.Grants(app, project, access.PlanRun, access.JobCreate, access.JobClaim),
		testkit.Grants(vic, project, access.CaseView))
	cl, err := plans.NewClient(h.API, plans.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	return h, cl
}

// stepArgs is what a step's job carries: its assembled arguments.
type stepArgs map[string]json.RawMessage

// stepFunc is what a step kind does in a test: its result, or an error.
type stepFunc func(step string, args stepArgs) (any, error)

// startSteps starts a worker, as app, running each kind with its func, and
// stops it when the test ends.
func startSteps(t *testing.T, h harness, kinds map[string]stepFunc) {
	t.Helper()
	reg := worker.NewRegistry()
	for kind, fn := range kinds {
		require.NoError(t, worker.HandleResult(reg, jobs.MustKind[stepArgs](kind, 1),
			func(_ context.Context, j *jobs.Typed[stepArgs]) (worker.Result, error) {
				_, step, _, _ := plans.StepOf(j.Job)
				v, err := fn(step, j.Args)
				if err != nil {
					return worker.Result{}, err
				}
				b, err := json.Marshal(v)
				return worker.Result{Value: b}, err
			}))
	}
	w, err := worker.NewClient(h.API, worker.Config{
		Actor: app, Registry: reg, Clock: h.Clock, Deployment: "test", Logger: testkit.Logger,
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 20 * time.Millisecond, PollInterval: 20 * time.Millisecond,
		SweepEvery: time.Hour,
	})
	require.NoError(t, err)
	testkit.Start(t, w)
}

// waitEnded polls run id until it has ended, and returns it.
func waitEnded(t *testing.T, cl *plans.Client, id int64) plans.Run {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		run, err := cl.Get(t.Context(), id)
		require.NoError(t, err)
		switch run.Status {
		case plans.Succeeded, plans.Compensated, plans.Failed:
			return run
		}
		if time.Now().After(deadline) {
			steps, _ := cl.Steps(t.Context(), id)
			t.Fatalf("run %d still %s: %+v", id, run.Status, steps)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// requireLines requires each of lines, as a whole line, in out.
func requireLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		require.Regexp(t, `(?m)^`+l+`$`, out)
	}
}

// TestPlansShowADiamond: a -> (b, c) -> d, replanned once before it ran,
// then run to the end; plans show prints the run, its graph by level with
// each step's state and sources, and both versions.
func TestPlansShowADiamond(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, cl := setupPlans(t)
	diamond := func(fixed int) plans.Plan {
		return plans.Plan{Steps: []plans.Step{
			{ID: "a", Kind: "t.a", Args: []plans.Arg{{Name: "order", Source: plans.Input("order")}}},
			{ID: "b", Kind: "t.b", After: []string{"a"}, Args: []plans.Arg{{Name: "from_a", Source: plans.StepPath("a", "step")}}},
			{ID: "c", Kind: "t.c", After: []string{"a"}, Compensation: "t.undo",
				Args: []plans.Arg{{Name: "fixed", Source: plans.Const(fixed)}, {Name: "odd", Source: plans.Input("x.y", "z")}}},
			{ID: "d", Kind: "t.d", After: []string{"b", "c"}, Terminal: true, Trusted: true, Args: []plans.Arg{
				{Name: "b", Source: plans.StepResult("b")}, {Name: "a", Source: plans.StepResult("a")}}},
		}}
	}
	v1, v2 := diamond(41), diamond(42)
	run, err := cl.Start(ctx, plans.Start{Project: project, Plan: v1, Input: json.RawMessage(`{"order": 7}`), InputTrusted: true,
		ReplanLimit: 3})
	require.NoError(t, err)
	id := fmt.Sprint(run.ID)

	// Before any step ran: a admitted, the rest waiting.
	r := h.as(t, app, "plans", "show", id)
	require.Equal(t, 0, r.code, r.stderr)
	requireLines(t, r.stdout,
		`status\s+running`,
		`finished\s+-`,
		`  \[admitted\] a  \(t\.a\)  args: order=input\.order  job \d+`,
		`  \[waiting\] b  \(t\.b\) after a  args: from_a=a\.step`,
	)

	_, err = cl.Replan(ctx, run.ID, plans.Digest(v1), v2, "c's constant was wrong")
	require.NoError(t, err)
	echo := func(step string, args stepArgs) (any, error) {
		return map[string]any{"step": step, "n": len(args)}, nil
	}
	startSteps(t, h, map[string]stepFunc{
		"t.a": echo, "t.b": echo, "t.c": echo,
		"t.d": func(step string, _ stepArgs) (any, error) {
			return map[string]any{"step": step, "note": "done\u202e\x1b[2J"}, nil
		},
	})
	run = waitEnded(t, cl, run.ID)
	require.Equal(t, plans.Succeeded, run.Status)

	r = h.as(t, app, "plans", "show", id)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("plans show %s:\n%s", id, r.stdout)
	d1, d2 := plans.Digest(v1), plans.Digest(v2)
	requireLines(t, r.stdout,
		`run\s+`+id,
		`project\s+acme`,
		`status\s+succeeded`,
		`plan\s+`+d2[:12],
		`digest\s+`+d2,
		`version\s+2 of 2`,
		`input\s+trusted \(12 bytes of JSON; --json shows it\)`,
		`replan limit\s+3 \(1 used\)`,
		`output\s+\{"note":"done\x{FFFD}\\u001b\[2J","step":"d"\}`,
		`created\s+\S+ by svc:app`,
		`finished\s+\S+Z`,

		`graph of version 2: 4 steps in 3 levels`,
		`level 0 \(1 step\)`,
		`  \[succeeded\] a  \(t\.a\)  args: order=input\.order  admitted under version 1  job \d+`,
		`   └→ b, c`,
		`level 1 \(2 steps\)`,
		`  \[succeeded\] b  \(t\.b\) after a  args: from_a=a\.step  job \d+`,
		`  \[succeeded\] c  \(t\.c\) after a  args: fixed=42, odd=input\["x\.y"\]\.z ← compensation t\.undo  job \d+`,
		`level 2 \(1 step\)`,
		`  \[succeeded\] d  \(t\.d\) after b, c  args: a=a, b=b  terminal  requires trusted input  job \d+`,

		`VERSION\s+DIGEST\s+PREDECESSOR\s+REASON\s+ACTOR\s+AT`,
		`1\s+`+d1[:12]+`\s+-\s+-\s+svc:app\s+\S+`,
		`2\s+`+d2[:12]+`\s+`+d1[:12]+`\s+c's constant was wrong\s+svc:app\s+\S+`,
	)
	requireLines(t, r.stdout, `   └→ d \(each of this level\)`)
	require.NotContains(t, r.stdout, "!untrusted")
	require.NotContains(t, r.stdout, "untrusted read")
	require.NotContains(t, r.stdout, "failure")
	require.NotContains(t, r.stdout, "budget", "a run without ceilings shows none")
	require.NotContains(t, r.stdout, "\u202e")
	// The graph lists each level in ready order, levels in turn.
	require.Regexp(t, `(?s)level 0.*\] a .*level 1.*\] b .*\] c .*level 2.*\] d `, r.stdout)

	// A viewer of acme's cases reads it too, the same.
	rv := h.as(t, vic, "plans", "show", id)
	require.Equal(t, 0, rv.code, rv.stderr)
	require.Equal(t, r.stdout, rv.stdout)

	// --json: the run, its steps and its versions, whole.
	r = h.as(t, app, "plans", "show", "--json", id)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `done\u202e`, "bidirectional formatting escaped")
	var doc struct {
		Run struct {
			ID           int64           `json:"id"`
			Status       string          `json:"status"`
			Digest       string          `json:"digest"`
			Version      int             `json:"version"`
			InputTrusted bool            `json:"input_trusted"`
			Output       json.RawMessage `json:"output"`
		} `json:"run"`
		Levels [][]string `json:"levels"`
		Steps  []struct {
			Step     string          `json:"step"`
			State    string          `json:"state"`
			ReadySeq int             `json:"ready_seq"`
			Args     json.RawMessage `json:"args"`
			Trusted  bool            `json:"trusted"`
		} `json:"steps"`
		Versions []struct {
			Version     int        `json:"version"`
			Digest      string     `json:"digest"`
			Predecessor string     `json:"predecessor"`
			Reason      string     `json:"reason"`
			Plan        plans.Plan `json:"plan"`
		} `json:"versions"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	require.Equal(t, run.ID, doc.Run.ID)
	require.Equal(t, "succeeded", doc.Run.Status)
	require.Equal(t, d2, doc.Run.Digest)
	require.Equal(t, 2, doc.Run.Version)
	require.True(t, doc.Run.InputTrusted)
	require.JSONEq(t, `{"step": "d", "note": "done\u202e\u001b[2J"}`, string(doc.Run.Output))
	require.Equal(t, [][]string{{"a"}, {"b", "c"}, {"d"}}, doc.Levels)
	require.Len(t, doc.Steps, 4)
	for i, s := range doc.Steps {
		require.Equal(t, []string{"a", "b", "c", "d"}[i], s.Step)
		require.Equal(t, "succeeded", s.State)
		require.Equal(t, i+1, s.ReadySeq)
		require.True(t, s.Trusted)
	}
	require.JSONEq(t, `{"fixed": 42, "odd": null}`, string(doc.Steps[2].Args))
	require.Len(t, doc.Versions, 2)
	require.Equal(t, d1, doc.Versions[0].Digest)
	require.Empty(t, doc.Versions[0].Predecessor)
	require.Equal(t, d1, doc.Versions[1].Predecessor)
	require.Equal(t, "c's constant was wrong", doc.Versions[1].Reason)
	require.Equal(t, d2, plans.Digest(doc.Versions[1].Plan))

	// Refusals: a run the actor may not read, or none, or an actor that is
	// no actor: one line, exit 1, nothing of the run shown.
	for _, args := range [][]string{
		{"--as", string(sam), "plans", "show", id},
		{"--as", string(sam), "plans", "show", "--json", id},
		{"--as", string(app), "plans", "show", "999999"},
		{"--as", "nobody", "plans", "show", id},
	} {
		r := h.run(t, args...)
		requireRefused(t, r, exitError, args)
		require.NotContains(t, r.stderr, "t.a")
	}
	r = h.as(t, sam, "plans", "show", id)
	require.Equal(t, fmt.Sprintf("docket plan show: plan.get: run %s not found or not visible to %s\n", id, sam), r.stderr)
}

// TestPlansShowAnUnwind: e fails for good after a, read, b and c
// succeeded; they are compensated in reverse, and f, after e, never runs.
// plans show marks what read's untrusted input reached, shows the failure
// and reasons without the terminal controls they carry, and each
// compensation's state.
func TestPlansShowAnUnwind(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, cl := setupPlans(t)
	ok := func(step string, _ stepArgs) (any, error) { return step, nil }
	startSteps(t, h, map[string]stepFunc{
		"t.work": ok,
		"t.undo": func(string, stepArgs) (any, error) { return nil, nil },
		"t.fail": func(string, stepArgs) (any, error) {
			return nil, worker.Fail(jobs.ClassPermanent, errors.New("the ledger\x1b[2J refused\u202e"))
		},
	})
	p := plans.Plan{Steps: []plans.Step{
		{ID: "a", Kind: "t.work", Compensation: "t.undo", Args: []plans.Arg{{Name: "amount", Source: plans.Const(10)}}},
		{ID: "read", Kind: "t.work", Compensation: "t.undo", Args: []plans.Arg{{Name: "text", Source: plans.Input("email")}}},
		{ID: "b", Kind: "t.work", After: []string{"a"}, Compensation: "t.undo"},
		{ID: "c", Kind: "t.work", After: []string{"a", "read"}, Compensation: "t.undo"},
		{ID: "e", Kind: "t.fail", After: []string{"b", "c"}},
		{ID: "f", Kind: "t.work", After: []string{"e"}, Terminal: true},
	}}
	run, err := cl.Start(ctx, plans.Start{Project: project, Plan: p, Input: json.RawMessage(`{"email": "pay me"}`)})
	require.NoError(t, err)
	run = waitEnded(t, cl, run.ID)
	require.Equal(t, plans.Compensated, run.Status)

	id := fmt.Sprint(run.ID)
	r := h.as(t, app, "plans", "show", id)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("plans show %s:\n%s", id, r.stdout)
	comp := regexp.QuoteMeta(` ← compensation t.undo [compensated]`) + `  `
	requireLines(t, r.stdout,
		`status\s+compensated`,
		`input\s+untrusted \(\d+ bytes of JSON; --json shows it\)`,
		`untrusted read\s+step read: argument text from the run's input at email`,
		`failure\s+step e failed: .*the ledger\x{FFFD}\[2J refused\x{FFFD}.*`,
		`output\s+-`,
		`finished\s+\S+Z`,
		`graph of version 1: 6 steps in 4 levels`,
		`  \[succeeded\] a  \(t\.work\)  args: amount=10`+comp+`job \d+  compensation job \d+`,
		`  \[succeeded\] read  \(t\.work\)  args: text=input\.email`+comp+`!untrusted  job \d+  compensation job \d+`,
		`   └→ b, c`,
		`   └→ c`,
		`  \[succeeded\] b  \(t\.work\) after a`+comp+`job \d+  compensation job \d+`,
		`  \[succeeded\] c  \(t\.work\) after a, read`+comp+`!untrusted  job \d+  compensation job \d+`,
		`  \[failed\] e  \(t\.fail\) after b, c  !untrusted  job \d+`,
		`      reason: .*the ledger\x{FFFD}\[2J refused\x{FFFD}.*`,
		`   └→ f`,
		`  \[not run\] f  \(t\.work\) after e  terminal`,
		`1\s+\S{12}\s+-\s+-\s+svc:app\s+\S+`,
	)
	require.NotContains(t, r.stdout, "\x1b")
	require.NotContains(t, r.stdout, "\u202e")
	require.NotContains(t, r.stdout, "[waiting]", "a finished run waits for nothing")
}

// TestPlansShowAFanOut: a root fans out to 30 steps joined by one; plans
// show draws the first 10 of the level and counts the rest, and cuts the
// lists of the root's successors and the join's predecessors and
// arguments.
func TestPlansShowAFanOut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, cl := setupPlans(t)
	ok := func(step string, _ stepArgs) (any, error) { return step, nil }
	startSteps(t, h, map[string]stepFunc{"t.root": ok, "t.leaf": ok, "t.join": ok})
	p := plans.Plan{Steps: []plans.Step{{ID: "root", Kind: "t.root"}}}
	join := plans.Step{ID: "join", Kind: "t.join", Terminal: true}
	for i := range 30 {
		leaf := fmt.Sprintf("leaf%02d", i)
		p.Steps = append(p.Steps, plans.Step{ID: leaf, Kind: "t.leaf", After: []string{"root"}})
		join.After = append(join.After, leaf)
		join.Args = append(join.Args, plans.Arg{Name: fmt.Sprintf("r%02d", i), Source: plans.StepResult(leaf)})
	}
	p.Steps = append(p.Steps, join)
	run, err := cl.Start(ctx, plans.Start{Project: project, Plan: p, InputTrusted: true})
	require.NoError(t, err)
	run = waitEnded(t, cl, run.ID)
	require.Equal(t, plans.Succeeded, run.Status)

	r := h.as(t, app, "plans", "show", fmt.Sprint(run.ID))
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("plans show %d:\n%s", run.ID, r.stdout)
	requireLines(t, r.stdout,
		`graph of version 1: 32 steps in 3 levels`,
		`level 1 \(30 steps\)`,
		`  \[succeeded\] leaf00  \(t\.leaf\) after root  job \d+`,
		`  \[succeeded\] leaf09  \(t\.leaf\) after root  job \d+`,
		`  … and 20 more steps at this level: leaf10\.\.leaf29 \(all succeeded\)`,
		`   └→ join \(each of this level\)`,
		`   └→ leaf00, leaf01, leaf02, leaf03, leaf04, leaf05, leaf06, leaf07, leaf08, leaf09, … and 20 more`,
		`  \[succeeded\] join  \(t\.join\) after leaf00, leaf01, .*, leaf09, … and 20 more  args: r00=leaf00, .*, r09=leaf09, … and 20 more  terminal  job \d+`,
	)
	require.NotContains(t, r.stdout, "leaf10 ")
	require.NotContains(t, r.stdout, "   └→ join\n", "one arrow for the level")
	require.Equal(t, 34, strings.Count(r.stdout, "\n"), r.stdout)
}

// TestPlansShowADroppedStep: a replan that drops a step already admitted;
// plans show lists it apart, as the version it was admitted under has it.
func TestPlansShowADroppedStep(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, cl := setupPlans(t)
	v1 := plans.Plan{Steps: []plans.Step{
		{ID: "x", Kind: "t.x", Args: []plans.Arg{{Name: "n", Source: plans.Const(1)}}},
		{ID: "y", Kind: "t.y", After: []string{"x"}, Terminal: true},
	}}
	v2 := plans.Plan{Steps: []plans.Step{{ID: "w", Kind: "t.y", Terminal: true}}}
	run, err := cl.Start(ctx, plans.Start{Project: project, Plan: v1, InputTrusted: true, ReplanLimit: 1})
	require.NoError(t, err)
	_, err = cl.Replan(ctx, run.ID, plans.Digest(v1), v2, "y is done elsewhere")
	require.NoError(t, err)
	ok := func(step string, _ stepArgs) (any, error) { return step, nil }
	startSteps(t, h, map[string]stepFunc{"t.x": ok, "t.y": ok})
	run = waitEnded(t, cl, run.ID)
	require.Equal(t, plans.Succeeded, run.Status)

	r := h.as(t, app, "plans", "show", fmt.Sprint(run.ID))
	require.Equal(t, 0, r.code, r.stderr)
	requireLines(t, r.stdout,
		`graph of version 2: 1 step in 1 level`,
		`  \[succeeded\] w  \(t\.y\)  terminal  job \d+`,
		`admitted under earlier versions, not in version 2:`,
		`  \[succeeded\] x  \(t\.x\)  args: n=1  admitted under version 1  job \d+`,
		`2\s+\S{12}\s+\S{12}\s+y is done elsewhere\s+svc:app\s+\S+`,
	)
	require.NotContains(t, r.stdout, "] y ")
}

// TestPlansShowAnExhaustedRun: a chain of two steps under a ceiling of one
// step: its first step's job, claimed and completed by hand, reports what
// it spent, and the run is exhausted before the second is admitted. plans
// show prints the ceilings, the spend and why, and the second step held.
func TestPlansShowAnExhaustedRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h, cl := setupPlans(t)
	jc, err := jobs.NewClient(h.API, jobs.Config{Project: project, Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	chain := plans.Plan{Steps: []plans.Step{
		{ID: "s00", Kind: "t.pay"},
		{ID: "s01", Kind: "t.pay", After: []string{"s00"}, Terminal: true},
	}}
	run, err := cl.Start(ctx, plans.Start{Project: project, Plan: chain, InputTrusted: true, Budget: budgets.Budget{MaxSteps: 1}})
	require.NoError(t, err)
	steps, err := cl.Steps(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, steps, 1)
	j, ok, err := jc.ClaimID(ctx, steps[0].JobID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	res, err := budgets.Report(map[string]string{"step": "s00"}, budgets.Spent{Effects: 2, Money: 150})
	require.NoError(t, err)
	_, err = jc.Complete(ctx, j.Lease(), res, nil)
	require.NoError(t, err)
	run, err = cl.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Exhausted, run.Status)

	id := fmt.Sprint(run.ID)
	r := h.as(t, app, "plans", "show", id)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("plans show %s:\n%s", id, r.stdout)
	requireLines(t, r.stdout,
		`status\s+exhausted`,
		`budget\s+steps 1`,
		`spent\s+effects 2, money 150`,
		`exhausted\s+steps: 1 of 1 admitted`,
		`finished\s+-`,
		`  \[succeeded\] s00  \(t\.pay\)  job \d+`,
		`  \[held\] s01  \(t\.pay\) after s00  terminal`,
	)

	r = h.as(t, app, "plans", "show", "--json", id)
	require.Equal(t, 0, r.code, r.stderr)
	var doc struct {
		Run struct {
			Status string          `json:"status"`
			Budget json.RawMessage `json:"budget"`
		} `json:"run"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	require.Equal(t, "exhausted", doc.Run.Status)
	require.JSONEq(t, `{"max_steps": 1, "max_effects": 0, "max_money": 0, "currency": "", "max_call": 0, "max_parallel": 0,
		"spent": {"effects": 2, "money": 150}, "exhausted": "steps: 1 of 1 admitted"}`, string(doc.Run.Budget),
		"a ceiling the run does not set is 0")

	// Every ceiling a run may set, in its currency; a run still running
	// is not exhausted.
	all, err := cl.Start(ctx, plans.Start{Project: project, Plan: chain, InputTrusted: true, Budget: budgets.Budget{MaxSteps: 5,
		MaxEffects: 7, MaxMoney: budgets.Money{Amount: 1000, Currency: "EUR"}, MaxCall: 100, MaxParallel: 2}})
	require.NoError(t, err)
	r = h.as(t, app, "plans", "show", fmt.Sprint(all.ID))
	require.Equal(t, 0, r.code, r.stderr)
	requireLines(t, r.stdout,
		`status\s+running`,
		`budget\s+steps 5, effects 7, money 1000 EUR, max call 100 EUR, max in flight 2`,
		`spent\s+effects 0, money 0 EUR`,
		`  \[waiting\] s01  \(t\.pay\) after s00  terminal`,
	)
	require.NotContains(t, r.stdout, "exhausted")
	r = h.as(t, app, "plans", "show", "--json", fmt.Sprint(all.ID))
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	require.JSONEq(t, `{"max_steps": 5, "max_effects": 7, "max_money": 1000, "currency": "EUR", "max_call": 100,
		"max_parallel": 2, "spent": {"effects": 0, "money": 0}, "exhausted": ""}`, string(doc.Run.Budget))
}

// TestPlansUsage: a wrong command line exits 2 before connecting.
func TestPlansUsage(t *testing.T) {
	t.Parallel()
	requireUsageErrors(t, [][]string{
		{"plans"},
		{"plans", "frob"},
		{"plans", "show"},
		{"plans", "show", "x"},
		{"plans", "show", "-1"},
		{"plans", "show", "0"},
		{"plans", "show", "1", "2"},
		{"plans", "show", "--json=maybe", "1"},
		{"plans", "show", "--frob", "1"},
	})
	r := docket(t, unreachable, "help")
	require.Contains(t, r.stdout, "plan show RUN [-o json]")
}
