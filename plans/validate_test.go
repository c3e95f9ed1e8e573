package plans_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/plans"
)

// st is a step of kind test.run after the given steps.
func st(id string, after ...string) plans.Step {
	return plans.Step{ID: id, Kind: "test.run", After: after}
}

func term(s plans.Step) plans.Step { s.Terminal = true; return s }

func with(s plans.Step, args ...plans.Arg) plans.Step { s.Args = append(s.Args, args...); return s }

func arg(name string, src plans.Source) plans.Arg { return plans.Arg{Name: name, Source: src} }

func plan(steps ...plans.Step) plans.Plan { return plans.Plan{Steps: steps} }

// knownKinds is a deployment knowing test.run and test.undo.
func knownKinds(kind string) bool { return kind == "test.run" || kind == "test.undo" }

func diamond() plans.Plan {
	return plan(
		with(st("fetch"), arg("url", plans.Input("url"))),
		with(st("check"), arg("threshold", plans.Const(4000))),
		with(term(st("post", "fetch", "check")),
			arg("body", plans.StepResult("fetch")),
			arg("ok", plans.StepPath("check", "ok")),
			arg("mode", plans.Const("strict"))),
	)
}

// chain is n steps, each after and sourcing its immediate predecessor.
func chain(n int) plans.Plan {
	steps := make([]plans.Step, n)
	for i := range steps {
		steps[i] = st(fmt.Sprintf("s%05d", i))
		if i > 0 {
			prev := steps[i-1].ID
			steps[i] = with(st(steps[i].ID, prev), arg("in", plans.StepResult(prev)))
		}
	}
	steps[n-1].Terminal = true
	return plans.Plan{Steps: steps}
}

// fan is a root, width steps after it, each sourcing a path of its
// result, and a sink after all of them sourcing some of them and,
// transitively, the root.
func fan(width int) plans.Plan {
	steps := []plans.Step{st("root")}
	var mids []string
	for i := range width {
		id := fmt.Sprintf("mid%03d", i)
		mids = append(mids, id)
		steps = append(steps, with(st(id, "root"), arg("part", plans.StepPath("root", "parts", fmt.Sprint(i)))))
	}
	sink := term(st("sink", mids...))
	for i := 0; i < width && i < 50; i++ {
		sink = with(sink, arg(fmt.Sprintf("p%03d", i), plans.StepResult(mids[i])))
	}
	sink = with(sink, arg("whole", plans.StepResult("root")))
	return plan(append(steps, sink)...)
}

// manyArgs is n constant arguments a00, a01, ..., then one more of each
// name in repeat.
func manyArgs(n int, repeat ...string) []plans.Arg {
	var args []plans.Arg
	for i := range n {
		args = append(args, arg(fmt.Sprintf("a%02d", i), plans.Const(i)))
	}
	for _, name := range repeat {
		args = append(args, arg(name, plans.Const(0)))
	}
	return args
}

type want struct {
	step  string
	class plans.ProblemClass
}

func got(ps []plans.Problem) []want {
	var w []want
	for _, p := range ps {
		w = append(w, want{p.Step, p.Class})
	}
	return w
}

func TestValidateRefusals(t *testing.T) {
	ok := st("a")
	cases := []struct {
		name  string
		plan  plans.Plan
		lim   plans.Limits
		want  want
		match string // in the reason
	}{
		{"empty", plan(), plans.Limits{}, want{"", plans.ProblemEmpty}, "no steps"},
		{"no terminal", plan(ok), plans.Limits{}, want{"", plans.ProblemNoTerminal}, "no terminal"},
		{"invalid id", plan(term(st("Bad"))), plans.Limits{}, want{"Bad", plans.ProblemInvalidID}, `"Bad"`},
		{"id too long", plan(term(st("a" + strings.Repeat("b", 63)))), plans.Limits{}, want{"a" + strings.Repeat("b", 63), plans.ProblemInvalidID}, "invalid id"},
		{"missing id", plan(term(st(""))), plans.Limits{}, want{"#0", plans.ProblemInvalidID}, "missing id"},
		{"duplicate id", plan(ok, term(st("a"))), plans.Limits{}, want{"a", plans.ProblemDuplicateID}, "indexes 0, 1"},
		{"unknown predecessor", plan(ok, term(st("b", "a", "x", "x"))), plans.Limits{}, want{"b", plans.ProblemUnknownPredecessor}, `unknown predecessor x`},
		{"cycle", plan(st("b", "a"), term(st("a", "b"))), plans.Limits{}, want{"a", plans.ProblemCycle}, "cycle: a -> b -> a"},
		{"self cycle", plan(term(st("a", "a"))), plans.Limits{}, want{"a", plans.ProblemCycle}, "cycle: a -> a"},
		{"source not predecessor", plan(ok, term(with(st("b"), arg("x", plans.StepResult("a"))))), plans.Limits{}, want{"b", plans.ProblemSourceNotPredecessor}, "sourced from step a, not a predecessor"},
		{"source is a successor", plan(with(st("a"), arg("x", plans.StepPath("b", "k"))), term(st("b", "a"))), plans.Limits{}, want{"a", plans.ProblemSourceNotPredecessor}, "sourced from step b"},
		{"source is itself", plan(term(with(st("a"), arg("x", plans.StepResult("a"))))), plans.Limits{}, want{"a", plans.ProblemSourceNotPredecessor}, "the step itself"},
		{"source does not exist", plan(ok, term(with(st("b", "a"), arg("x", plans.StepResult("zz"))))), plans.Limits{}, want{"b", plans.ProblemSourceNotPredecessor}, "which no step of the plan is"},
		{"source is a sibling", plan(ok, st("b", "a"), term(with(st("c", "a"), arg("x", plans.StepResult("b"))))), plans.Limits{}, want{"c", plans.ProblemSourceNotPredecessor}, "sourced from step b"},
		{"unknown kind", plan(term(plans.Step{ID: "a", Kind: "foo.bar"})), plans.Limits{}, want{"a", plans.ProblemUnknownKind}, "unknown kind foo.bar"},
		{"unknown compensation kind", plan(term(plans.Step{ID: "a", Kind: "test.run", Compensation: "foo.undo"})), plans.Limits{}, want{"a", plans.ProblemUnknownKind}, "unknown compensation kind foo.undo"},
		{"invalid kind", plan(term(plans.Step{ID: "a", Kind: "Foo..bar"})), plans.Limits{}, want{"a", plans.ProblemInvalidKind}, `invalid kind "Foo..bar"`},
		{"missing kind", plan(term(plans.Step{ID: "a"})), plans.Limits{}, want{"a", plans.ProblemInvalidKind}, "missing kind"},
		{"invalid compensation kind", plan(term(plans.Step{ID: "a", Kind: "test.run", Compensation: "undo!"})), plans.Limits{}, want{"a", plans.ProblemInvalidKind}, "invalid compensation kind"},
		{"arg name", plan(term(with(st("a"), arg("Name", plans.Const(1))))), plans.Limits{}, want{"a", plans.ProblemInvalidArg}, `invalid argument name "Name"`},
		{"arg name empty", plan(term(with(st("a"), arg("", plans.Const(1))))), plans.Limits{}, want{"a", plans.ProblemInvalidArg}, "no name"},
		{"arg name repeated", plan(term(with(st("a"), arg("x", plans.Const(1)), arg("x", plans.Const(2)), arg("x", plans.Const(3))))), plans.Limits{}, want{"a", plans.ProblemInvalidArg}, "more than once"},
		{"arg name repeated among many", plan(term(with(st("a"), manyArgs(20, "a07")...))), plans.Limits{}, want{"a", plans.ProblemInvalidArg}, "argument a07: name given more than once"},
		{"source kind", plan(term(with(st("a"), arg("x", plans.Source{Kind: "env"})))), plans.Limits{}, want{"a", plans.ProblemInvalidArg}, `unknown source kind "env"`},
		{"source kind missing", plan(term(with(st("a"), arg("x", plans.Source{})))), plans.Limits{}, want{"a", plans.ProblemInvalidArg}, "missing source kind"},
		{"step source names no step", plan(ok, term(with(st("b", "a"), arg("x", plans.StepResult(""))))), plans.Limits{}, want{"b", plans.ProblemInvalidArg}, "a step source names no step"},
		{"path source names no step", plan(ok, term(with(st("b", "a"), arg("x", plans.StepPath("", "k"))))), plans.Limits{}, want{"b", plans.ProblemInvalidArg}, "a path source names no step"},
		{"path source with no path", plan(ok, term(with(st("b", "a"), arg("x", plans.StepPath("a"))))), plans.Limits{}, want{"b", plans.ProblemInvalidArg}, "with no path"},
		{"step source with a path", plan(ok, term(with(st("b", "a"), arg("x", plans.Source{Kind: plans.FromStepResult, Step: "a", Path: []string{"k"}})))), plans.Limits{}, want{"b", plans.ProblemInvalidArg}, "carries no path"},
		{"empty path segment", plan(ok, term(with(st("b", "a"), arg("x", plans.StepPath("a", "k", ""))))), plans.Limits{}, want{"b", plans.ProblemInvalidArg}, "path segment 1 is empty"},
		{"empty input segment", plan(term(with(st("a"), arg("x", plans.Input("", "k"))))), plans.Limits{}, want{"a", plans.ProblemInvalidArg}, "path segment 0 is empty"},
		{"input names a step", plan(term(with(st("a"), arg("x", plans.Source{Kind: plans.FromRunInput, Step: "a"})))), plans.Limits{}, want{"a", plans.ProblemInvalidArg}, "an input source names no step"},
		{"constant not JSON", plan(term(with(st("a"), arg("x", plans.Source{Kind: plans.FromConstant, Value: json.RawMessage(`{"a":`)})))), plans.Limits{}, want{"a", plans.ProblemInvalidArg}, "not valid JSON"},
		{"constant missing", plan(term(with(st("a"), arg("x", plans.Source{Kind: plans.FromConstant})))), plans.Limits{}, want{"a", plans.ProblemInvalidArg}, "no value"},
		{"constant with a path", plan(term(with(st("a"), arg("x", plans.Source{Kind: plans.FromConstant, Path: []string{"k"}, Value: json.RawMessage(`1`)})))), plans.Limits{}, want{"a", plans.ProblemInvalidArg}, "names no step and no path"},
		{"input with a value", plan(term(with(st("a"), arg("x", plans.Source{Kind: plans.FromRunInput, Value: json.RawMessage(`1`)})))), plans.Limits{}, want{"a", plans.ProblemInvalidArg}, "carries no value"},
		{"too many steps", plan(ok, st("b"), term(st("c", "a", "b"))), plans.Limits{MaxSteps: 2}, want{"", plans.ProblemBounds}, "3 steps, over the bound of 2"},
		{"too wide", plan(ok, st("b"), st("c"), term(st("d", "a", "b", "c"))), plans.Limits{MaxWidth: 2}, want{"", plans.ProblemBounds}, "level 0 of the graph has 3 steps"},
		{"too many args", plan(term(with(st("a"), arg("x", plans.Const(1)), arg("y", plans.Const(2))))), plans.Limits{MaxArgs: 1}, want{"a", plans.ProblemBounds}, "2 arguments"},
		{"constant too large", plan(term(with(st("a"), arg("x", plans.Source{Kind: plans.FromConstant, Value: json.RawMessage(`[ 1, 2, 3 ]`)})))), plans.Limits{MaxArgBytes: 6}, want{"a", plans.ProblemBounds}, "constant of 7 bytes"},
		{"path too large", plan(term(with(st("a"), arg("x", plans.Input("abc", "def"))))), plans.Limits{MaxArgBytes: 5}, want{"a", plans.ProblemBounds}, "path of 6 bytes"},
		{"too many predecessors", plan(ok, st("b"), term(st("c", "a", "b", "a"))), plans.Limits{MaxAfter: 1}, want{"c", plans.ProblemBounds}, "2 predecessors"},
	}
	seen := map[plans.ProblemClass]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := plans.Validate(c.plan, knownKinds, c.lim)
			if len(ps) != 1 || got(ps)[0] != c.want {
				t.Fatalf("problems %v, want exactly one %v", ps, c.want)
			}
			if !strings.Contains(ps[0].Reason, c.match) {
				t.Errorf("reason %q does not say %q", ps[0].Reason, c.match)
			}
			seen[c.want.class] = true
		})
	}
	for _, class := range []plans.ProblemClass{
		plans.ProblemEmpty, plans.ProblemBounds, plans.ProblemInvalidID, plans.ProblemDuplicateID,
		plans.ProblemInvalidKind, plans.ProblemUnknownKind, plans.ProblemInvalidArg,
		plans.ProblemUnknownPredecessor, plans.ProblemCycle, plans.ProblemSourceNotPredecessor,
		plans.ProblemNoTerminal,
	} {
		if !seen[class] {
			t.Errorf("no case of class %s", class)
		}
	}
}

func TestValidateReportsEverything(t *testing.T) {
	p := plan(
		st("a", "c"),
		st("b", "a"),
		st("c", "b"),
		plans.Step{ID: "x", Kind: "foo.bar", After: []string{"nope"}},
		with(st("y"), arg("Bad", plans.Const(1)), arg("v", plans.StepResult("a"))),
		st("y"),
	)
	ps := plans.Validate(p, knownKinds, plans.DefaultLimits)
	w := []want{
		{"", plans.ProblemNoTerminal},
		{"a", plans.ProblemCycle},
		{"x", plans.ProblemUnknownKind},
		{"x", plans.ProblemUnknownPredecessor},
		{"y", plans.ProblemDuplicateID},
		{"y", plans.ProblemInvalidArg},
		{"y", plans.ProblemSourceNotPredecessor},
	}
	if !slices.Equal(got(ps), w) {
		t.Fatalf("problems\n%v\nwant\n%v", ps, w)
	}
	err := plans.Check(p, knownKinds, plans.DefaultLimits)
	msg := err.Error()
	for _, s := range []string{
		"plan: no terminal step",
		"step a: cycle: a -> b -> c -> a",
		"step x: unknown kind foo.bar",
		"step x: unknown predecessor nope",
		"step y: duplicate id",
		`step y: invalid argument name "Bad"`,
		"step y: argument v: sourced from step a, not a predecessor (the step at index 4)",
	} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not say %q", msg, s)
		}
	}
	if n := strings.Count(msg, "; "); n != len(w)-1 {
		t.Errorf("error lists %d problems, want %d: %s", n+1, len(w), msg)
	}

	// The answer does not depend on the order of the steps.
	for range 20 {
		q := plans.Plan{Steps: slices.Clone(p.Steps)}
		rand.Shuffle(len(q.Steps), func(i, j int) { q.Steps[i], q.Steps[j] = q.Steps[j], q.Steps[i] })
		qs := plans.Validate(q, knownKinds, plans.DefaultLimits)
		// Only the duplicate's index may differ.
		if !slices.Equal(got(qs), w) {
			t.Fatalf("shuffled: %v", qs)
		}
		if qs[1] != ps[1] {
			t.Fatalf("shuffled: cycle reported as %v, was %v", qs[1], ps[1])
		}
	}
}

func TestValidateCycles(t *testing.T) {
	// Two cycles and a step after them; one component with a step off
	// the shortest cycle through its lowest id.
	p := plan(
		st("d", "e"), st("e", "d"),
		st("a", "b"), st("b", "a", "c"), st("c", "b"),
		with(term(st("z", "d", "a", "base")), arg("ok", plans.StepResult("base")), arg("bad", plans.StepResult("other"))),
		st("base"), st("other"),
	)
	ps := plans.Validate(p, nil, plans.Limits{})
	var reasons []string
	for _, pr := range ps {
		reasons = append(reasons, pr.String())
	}
	w := []string{
		"step a: cycle: a -> b -> a (c also on cycles with these steps)",
		"step d: cycle: d -> e -> d",
		"step z: argument bad: sourced from step other, not a predecessor",
	}
	if !slices.Equal(reasons, w) {
		t.Fatalf("problems\n%q\nwant\n%q", reasons, w)
	}
}

func TestValidateValid(t *testing.T) {
	for name, p := range map[string]plans.Plan{
		"diamond": diamond(),
		"chain":   chain(1000),
		"fan":     fan(100),
		"compensated": plan(term(plans.Step{ID: "a", Kind: "test.run", Compensation: "test.undo",
			Args: []plans.Arg{arg("all", plans.Input()), arg("n", plans.Const(nil))}})),
	} {
		t.Run(name, func(t *testing.T) {
			if ps := plans.Validate(p, knownKinds, plans.DefaultLimits); ps != nil {
				t.Fatalf("valid plan refused: %v", ps)
			}
			if err := plans.Check(p, nil, plans.Limits{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestValidateChainIsFast(t *testing.T) {
	p := chain(1000)
	start := time.Now()
	ps := plans.Validate(p, knownKinds, plans.DefaultLimits)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("1,000-step chain took %v", d)
	}
	if ps != nil {
		t.Fatal(ps)
	}
}

// TestValidateTransitiveSources sources steps far up a 10,000-step chain,
// which After does not name directly.
func TestValidateTransitiveSources(t *testing.T) {
	for name, from := range map[string]func(i int) int{
		"first":    func(int) int { return 0 },
		"two back": func(i int) int { return max(i-2, 0) },
		"half way": func(i int) int { return i / 2 },
		"random":   func(i int) int { return rand.IntN(i) },
	} {
		t.Run(name, func(t *testing.T) {
			p := chain(10000)
			for i := 2; i < len(p.Steps); i++ {
				p.Steps[i].Args = append(p.Steps[i].Args, arg("far", plans.StepResult(p.Steps[from(i)].ID)))
			}
			// One that is not a predecessor: the step after it.
			p.Steps[5000].Args = append(p.Steps[5000].Args, arg("later", plans.StepResult(p.Steps[5001].ID)))
			start := time.Now()
			ps := plans.Validate(p, knownKinds, plans.DefaultLimits)
			t.Logf("%v", time.Since(start))
			w := []want{{"s05000", plans.ProblemSourceNotPredecessor}}
			if !slices.Equal(got(ps), w) {
				t.Fatalf("problems %v, want %v", ps, w)
			}
		})
	}
}

func TestValidateWidth(t *testing.T) {
	p := fan(100)
	ps := plans.Validate(p, knownKinds, plans.Limits{MaxWidth: 99, MaxAfter: 100})
	if w := []want{{"", plans.ProblemBounds}}; !slices.Equal(got(ps), w) || !strings.Contains(ps[0].Reason, "level 1 of the graph has 100 steps") {
		t.Fatalf("problems %v", ps)
	}
	if ps := plans.Validate(p, knownKinds, plans.Limits{MaxAfter: 99}); !slices.Equal(got(ps), []want{{"sink", plans.ProblemBounds}}) {
		t.Fatalf("problems %v", ps)
	}
}

func TestCheckIsInvalidArgument(t *testing.T) {
	err := plans.Check(plan(st("a")), nil, plans.DefaultLimits)
	if !errors.Is(err, db.ErrInvalidArgument) {
		t.Fatalf("%v is not db.ErrInvalidArgument", err)
	}
	var inv *plans.Invalid
	if !errors.As(err, &inv) || len(inv.Problems) != 1 || inv.Problems[0].Class != plans.ProblemNoTerminal {
		t.Fatalf("%#v", err)
	}
	if errors.Is(err, db.ErrNotFound) {
		t.Error("an invalid plan matches db.ErrNotFound")
	}
	if err := plans.Check(diamond(), knownKinds, plans.DefaultLimits); err != nil {
		t.Fatal(err)
	}
}

func TestOrder(t *testing.T) {
	// The diamond, given in reverse: s2 post after s0 fetch and s1 check.
	p := plan(term(st("s2", "s0", "s1")), st("s1"), st("s0"))
	ids, err := plans.Order(p)
	if err != nil || !slices.Equal(ids, []string{"s0", "s1", "s2"}) {
		t.Fatalf("Order = %v, %v", ids, err)
	}
	// The lowest ready id runs first: a is not ready until c succeeded.
	ids, err = plans.Order(plan(st("a", "c"), st("c"), st("b"), st("d", "a")))
	if err != nil || !slices.Equal(ids, []string{"b", "c", "a", "d"}) {
		t.Fatalf("Order = %v, %v", ids, err)
	}
	ids, err = plans.Order(diamond())
	if err != nil || !slices.Equal(ids, []string{"check", "fetch", "post"}) {
		t.Fatalf("Order = %v, %v", ids, err)
	}
	ids, err = plans.Order(chain(1000))
	if err != nil || len(ids) != 1000 || !slices.IsSorted(ids) {
		t.Fatalf("Order of a chain: %d ids, %v", len(ids), err)
	}
	for name, bad := range map[string]plans.Plan{
		"cycle":     plan(st("a", "b"), st("b", "a")),
		"unknown":   plan(st("a", "x")),
		"duplicate": plan(st("a"), st("a")),
		"no id":     plan(st("")),
	} {
		if ids, err := plans.Order(bad); !errors.Is(err, db.ErrInvalidArgument) {
			t.Errorf("%s: Order = %v, %v", name, ids, err)
		}
	}
	// Order checks only what it needs.
	if _, err := plans.Order(plan(plans.Step{ID: "a"})); err != nil {
		t.Errorf("Order refused a step with no kind: %v", err)
	}
}

func BenchmarkValidate1000(b *testing.B) {
	for name, p := range map[string]plans.Plan{
		"chain":            chain(1000),
		"fan":              fan(1000),
		"chain-from-first": sourcedFromFirst(1000),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if ps := plans.Validate(p, knownKinds, plans.DefaultLimits); ps != nil {
					b.Fatal(ps)
				}
			}
		})
	}
}

func BenchmarkValidate10000(b *testing.B) {
	p := sourcedFromFirst(10000)
	for b.Loop() {
		if ps := plans.Validate(p, knownKinds, plans.DefaultLimits); ps != nil {
			b.Fatal(ps)
		}
	}
}

// sourcedFromFirst is a chain of n steps in which every step also sources
// the first.
func sourcedFromFirst(n int) plans.Plan {
	p := chain(n)
	for i := 2; i < n; i++ {
		p.Steps[i].Args = append(p.Steps[i].Args, arg("first", plans.StepResult(p.Steps[0].ID)))
	}
	return p
}

// TestValidateSourcesAgainstSearch compares the predecessor check with a
// plain search of the graph, on random graphs with and without cycles.
func TestValidateSourcesAgainstSearch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := 2 + r.IntN(150)
		cyclic := round%3 == 0
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("n%03d", r.IntN(1000)*1000+i) // not in index order
		}
		steps := make([]plans.Step, n)
		for i := range steps {
			steps[i] = st(ids[i])
			for range r.IntN(4) {
				j := r.IntN(n)
				if j < i || cyclic && r.IntN(4) == 0 {
					steps[i].After = append(steps[i].After, ids[j])
				}
			}
			for k := range r.IntN(4) {
				j := r.IntN(n)
				if i > 0 && r.IntN(3) > 0 {
					j = r.IntN(i) // earlier steps, more often predecessors
				}
				steps[i].Args = append(steps[i].Args, arg(fmt.Sprintf("x%d", k), plans.StepResult(ids[j])))
			}
		}
		steps[n-1].Terminal = true
		p := plans.Plan{Steps: steps}

		// Whether u precedes v: another step with a path to v.
		index := map[string]int{}
		for i, id := range ids {
			index[id] = i
		}
		precedes := func(u, v int) bool {
			if u == v {
				return false
			}
			seen := make([]bool, n)
			stack := []int{v}
			for len(stack) > 0 {
				x := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				for _, a := range steps[x].After {
					j := index[a]
					if j == u {
						return true
					}
					if !seen[j] {
						seen[j] = true
						stack = append(stack, j)
					}
				}
			}
			return false
		}
		var want []string
		for i, s := range steps {
			for _, a := range s.Args {
				if !precedes(index[a.Source.Step], i) {
					want = append(want, s.ID+" "+a.Name)
				}
			}
		}
		var got []string
		onCycle := map[string]bool{}
		for _, pr := range plans.Validate(p, nil, plans.DefaultLimits) {
			switch pr.Class {
			case plans.ProblemSourceNotPredecessor:
				got = append(got, pr.Step+" "+strings.Fields(pr.Reason)[1][:2])
			case plans.ProblemCycle:
				if !cyclic {
					t.Fatalf("round %d: %v", round, pr)
				}
				cycle, others, _ := strings.Cut(strings.TrimPrefix(pr.Reason, "cycle: "), " (")
				path := strings.Split(cycle, " -> ")
				if path[0] != pr.Step || path[len(path)-1] != pr.Step {
					t.Fatalf("round %d: %v", round, pr)
				}
				for k := 1; k < len(path); k++ {
					if !slices.Contains(steps[index[path[k]]].After, path[k-1]) {
						t.Fatalf("round %d: %v: %s does not wait for %s", round, pr, path[k], path[k-1])
					}
					onCycle[path[k]] = true
				}
				for _, f := range strings.FieldsFunc(others, func(r rune) bool { return r == ',' || r == ' ' }) {
					if strings.HasPrefix(f, "n") {
						onCycle[f] = true
					}
				}
			default:
				t.Fatalf("round %d: %v", round, pr)
			}
		}
		for i, id := range ids {
			cyc := false
			for _, a := range steps[i].After {
				cyc = cyc || a == id || precedes(i, index[a])
			}
			if cyc != onCycle[id] {
				t.Fatalf("round %d: step %s on a cycle %v, reported %v", round, id, cyc, onCycle[id])
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: refused sources\n%v\nwant\n%v", round, got, want)
		}
		if !cyclic {
			if _, err := plans.Order(p); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
