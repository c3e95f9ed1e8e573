package plans

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// Limits bound the size and shape of a plan. A field of zero or less takes
// its value from [DefaultLimits].
type Limits struct {
	// MaxSteps is the most steps a plan may have.
	MaxSteps int
	// MaxWidth is the most steps in one level of the graph, a level being
	// the steps whose longest chain of predecessors has the same length:
	// a bound on how many steps can be ready at once.
	MaxWidth int
	// MaxArgs is the most arguments one step may have.
	MaxArgs int
	// MaxArgBytes bounds one argument's source: the bytes of a constant's
	// compacted JSON, and the sum of the lengths of a path's segments.
	MaxArgBytes int
	// MaxAfter is the most distinct steps one step's After may name.
	MaxAfter int
}

// DefaultLimits are the bounds a plan is held to unless the deployment sets
// others.
var DefaultLimits = Limits{
	MaxSteps:    10000,
	MaxWidth:    1000,
	MaxArgs:     1000,
	MaxArgBytes: 16384,
	MaxAfter:    1000,
}

// resolved returns l with every field of zero or less set from DefaultLimits.
func (l Limits) resolved() Limits {
	def := func(v, d int) int {
		if v <= 0 {
			return d
		}
		return v
	}
	return Limits{
		MaxSteps:    def(l.MaxSteps, DefaultLimits.MaxSteps),
		MaxWidth:    def(l.MaxWidth, DefaultLimits.MaxWidth),
		MaxArgs:     def(l.MaxArgs, DefaultLimits.MaxArgs),
		MaxArgBytes: def(l.MaxArgBytes, DefaultLimits.MaxArgBytes),
		MaxAfter:    def(l.MaxAfter, DefaultLimits.MaxAfter),
	}
}

// ProblemClass says what kind of fault a [Problem] is.
type ProblemClass string

// The classes of [Problem] that [Validate] reports.
const (
	// ProblemEmpty: the plan has no steps.
	ProblemEmpty ProblemClass = "empty"
	// ProblemBounds: the plan is over one of its [Limits]: too many steps,
	// too wide a level, too many arguments or predecessors of one step, or
	// too large a constant or path.
	ProblemBounds ProblemClass = "bounds"
	// ProblemInvalidID: a step's id is missing or malformed.
	ProblemInvalidID ProblemClass = "invalid_id"
	// ProblemDuplicateID: two or more steps share an id.
	ProblemDuplicateID ProblemClass = "duplicate_id"
	// ProblemInvalidKind: a step's kind or compensation kind is missing or
	// malformed.
	ProblemInvalidKind ProblemClass = "invalid_kind"
	// ProblemUnknownKind: a step's kind or compensation kind is well formed
	// but not one the deployment knows.
	ProblemUnknownKind ProblemClass = "unknown_kind"
	// ProblemInvalidArg: an argument is malformed: a bad or repeated name, a
	// missing or unknown source kind, a step or path source naming no step,
	// a path with an empty segment, fields its source kind does not carry,
	// or a constant that is missing or not valid JSON.
	ProblemInvalidArg ProblemClass = "invalid_arg"
	// ProblemUnknownPredecessor: After names an id no step of the plan has.
	ProblemUnknownPredecessor ProblemClass = "unknown_predecessor"
	// ProblemCycle: steps wait for one another in a cycle. A cycle is
	// reported once, at its lowest id, as the shortest cycle through that
	// step in the order the steps would run: in "a -> b -> a", b waits
	// for a and a for b.
	ProblemCycle ProblemClass = "cycle"
	// ProblemSourceNotPredecessor: an argument is sourced from a step that
	// is not among the step's predecessors, direct or transitive: another
	// step, the step itself, or an id no step has.
	ProblemSourceNotPredecessor ProblemClass = "source_not_predecessor"
	// ProblemInvalidWait: a waiting step's [Wait] is malformed: an unknown
	// type, a sleep with no instant or both, an await without a kind, key,
	// value source or deadline, a task without decisions, audience, title,
	// deadline or a whole expiry policy, or a kind or compensation a
	// waiting step does not have.
	ProblemInvalidWait ProblemClass = "invalid_wait"
	// ProblemNoTerminal: no step is terminal, so the run could never be
	// said to have finished.
	ProblemNoTerminal ProblemClass = "no_terminal"
)

// Problem is one fault of a plan: the step it is in and why the plan is
// refused.
type Problem struct {
	// Step is the id of the step at fault, "#i" for the step at index i
	// of Steps when it has no id, or "" for a fault of the plan as a
	// whole.
	Step string
	// Class says what kind of fault it is.
	Class ProblemClass
	// Reason says what is wrong, naming the arguments, steps and bounds
	// involved.
	Reason string
}

// String renders the problem as "step ID: reason", or "plan: reason" for a
// fault of the whole plan.
func (p Problem) String() string {
	if p.Step == "" {
		return "plan: " + p.Reason
	}
	return "step " + showID(p.Step) + ": " + p.Reason
}

// Invalid is the refusal of a plan, listing every problem found in it. It
// matches [db.ErrInvalidArgument] with [errors.Is].
type Invalid struct {
	// Problems are the plan's faults, in the order [Validate] returns
	// them.
	Problems []Problem
}

// Error lists every problem, separated by "; ".
func (e *Invalid) Error() string {
	var b strings.Builder
	b.WriteString("invalid plan: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Is reports whether target is [db.ErrInvalidArgument].
func (e *Invalid) Is(target error) bool { return target == db.ErrInvalidArgument }

// Check validates p as [Validate] does and returns nil when it is valid, or
// an [*Invalid] listing every problem.
func Check(p Plan, known func(kind string) bool, lim Limits) error {
	if problems := Validate(p, known, lim); len(problems) > 0 {
		return &Invalid{Problems: problems}
	}
	return nil
}

// Order returns the ids of p's steps in ready order: the order in which
// they run when each step succeeds before the next starts, the lowest id of
// every ready step running first. It refuses, with an [*Invalid] that
// matches [db.ErrInvalidArgument], a plan for which that order is not
// defined: one with a missing, malformed or repeated id, a predecessor
// that names no step, or a cycle. It checks nothing else; see [Validate].
func Order(p Plan) ([]string, error) {
	v := newValidator(p, nil, DefaultLimits)
	for i := range p.Steps {
		v.id(i)
	}
	g := v.graph()
	problems := slices.DeleteFunc(v.sorted(), func(pr Problem) bool {
		switch pr.Class {
		case ProblemInvalidID, ProblemDuplicateID, ProblemUnknownPredecessor, ProblemCycle:
			return false
		}
		return true
	})
	if len(problems) > 0 {
		return nil, &Invalid{Problems: problems}
	}
	ids := make([]string, len(g.order))
	for i, s := range g.order {
		ids[i] = p.Steps[s].ID
	}
	return ids, nil
}

// Validate returns every problem of p, sorted by step, then class, then
// reason; none for a valid plan. known reports whether the deployment knows
// a job kind; it is asked about every well-formed kind and compensation
// kind, and when it is nil no kind is unknown. Validate has no side effects
// and reads nothing but its arguments.
//
// Its cost is linear in the size of p, plus one pass over the graph for
// every 64 distinct steps that arguments are sourced from without the
// sourcing step naming them in After. A plan of more than lim.MaxSteps
// steps is refused for that, and its arguments' sources are not checked
// beyond After.
func Validate(p Plan, known func(kind string) bool, lim Limits) []Problem {
	if len(p.Steps) == 0 {
		return []Problem{{Class: ProblemEmpty, Reason: "no steps: a plan has at least one"}}
	}
	v := newValidator(p, known, lim)
	if n := len(p.Steps); n > v.lim.MaxSteps {
		v.plan(ProblemBounds, fmt.Sprintf("%d steps, over the bound of %d", n, v.lim.MaxSteps))
	}
	terminal := false
	for i := range p.Steps {
		v.step(i)
		terminal = terminal || p.Steps[i].Terminal
	}
	if !terminal {
		v.plan(ProblemNoTerminal, "no terminal step: mark the steps that end the run Terminal")
	}
	g := v.graph()
	g.width()
	if len(p.Steps) <= v.lim.MaxSteps {
		g.sources()
	}
	return v.sorted()
}

// validID reports whether id is a well-formed step id: 1-63 characters of
// [a-z0-9._-], starting with a letter.
func validID(id string) bool { return validName(id, "._-") }

// validArg reports whether name is a well-formed argument name: 1-63
// characters of [a-z0-9_], starting with a letter.
func validArg(name string) bool { return validName(name, "_") }

// validName reports whether s is 1-63 characters of [a-z0-9] and extra,
// starting with a letter.
func validName(s, extra string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && strings.IndexByte(extra, c) < 0 {
			return false
		}
	}
	return true
}

// validator accumulates the problems of one plan.
type validator struct {
	p        Plan
	known    func(string) bool
	lim      Limits
	problems []Problem
	index    map[string]int32 // the first step with each non-empty id
	repeated map[string]bool  // ids more than one step has
	argSeen  map[string]int   // scratch: the argument names of a step with many
	buf      bytes.Buffer     // scratch: compacted constants
	queries  []query          // step-sourced arguments to check against the graph
}

// query is an argument of step v sourced from step u, to be checked
// against the graph.
type query struct {
	v, u int32
	arg  string
}

func newValidator(p Plan, known func(string) bool, lim Limits) *validator {
	v := &validator{p: p, known: known, lim: lim.resolved(), index: make(map[string]int32, len(p.Steps))}
	var dups map[string][]int
	for i, s := range p.Steps {
		if s.ID == "" {
			continue
		}
		first, ok := v.index[s.ID]
		if !ok {
			v.index[s.ID] = int32(i)
			continue
		}
		if dups == nil {
			dups = map[string][]int{}
			v.repeated = map[string]bool{}
		}
		if dups[s.ID] == nil {
			dups[s.ID] = []int{int(first)}
		}
		dups[s.ID] = append(dups[s.ID], i)
		v.repeated[s.ID] = true
	}
	for id, at := range dups {
		idx := make([]string, len(at))
		for i, n := range at {
			idx[i] = strconv.Itoa(n)
		}
		v.problems = append(v.problems, Problem{Step: id, Class: ProblemDuplicateID,
			Reason: fmt.Sprintf("duplicate id: %d steps have it, at indexes %s", len(at), strings.Join(idx, ", "))})
	}
	return v
}

// name is how problems name step i: its id, or "#i" when it has none.
func (v *validator) name(i int) string {
	if id := v.p.Steps[i].ID; id != "" {
		return id
	}
	return "#" + strconv.Itoa(i)
}

// add records a problem of step i. A step whose id others share is told
// apart by its index.
func (v *validator) add(i int, class ProblemClass, reason string) {
	if v.repeated[v.p.Steps[i].ID] {
		reason += fmt.Sprintf(" (the step at index %d)", i)
	}
	v.problems = append(v.problems, Problem{Step: v.name(i), Class: class, Reason: reason})
}

// plan records a problem of the plan as a whole.
func (v *validator) plan(class ProblemClass, reason string) {
	v.problems = append(v.problems, Problem{Class: class, Reason: reason})
}

// sorted returns the problems by step, class and reason, without repeats.
func (v *validator) sorted() []Problem {
	slices.SortFunc(v.problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Class, b.Class), cmp.Compare(a.Reason, b.Reason))
	})
	return slices.Compact(v.problems)
}

// step checks step i on its own: its id, kinds and arguments. It queues
// the arguments sourced from steps for the graph's check.
func (v *validator) step(i int) {
	s := v.p.Steps[i]
	v.id(i)
	if s.Wait != nil {
		for _, r := range waitProblems(s) {
			v.add(i, ProblemInvalidWait, r)
		}
	} else {
		v.kind(i, "kind", s.Kind)
	}
	if s.Compensation != "" && s.Wait == nil {
		v.kind(i, "compensation kind", s.Compensation)
	}
	if len(s.Args) > v.lim.MaxArgs {
		v.add(i, ProblemBounds, fmt.Sprintf("%d arguments, over the bound of %d", len(s.Args), v.lim.MaxArgs))
	}
	many := len(s.Args) > 16
	if many {
		if v.argSeen == nil {
			v.argSeen = map[string]int{}
		}
		clear(v.argSeen)
	}
	for j, a := range s.Args {
		switch {
		case a.Name == "":
			v.add(i, ProblemInvalidArg, "argument with no name: want 1-63 characters of [a-z0-9_], starting with a letter")
		case !validArg(a.Name):
			v.add(i, ProblemInvalidArg, fmt.Sprintf("invalid argument name %s: want 1-63 characters of [a-z0-9_], starting with a letter", quote(a.Name)))
		}
		if a.Name != "" && v.repeatedArg(s.Args, j, many) {
			v.add(i, ProblemInvalidArg, fmt.Sprintf("argument %s: name given more than once", showArg(a.Name)))
		}
		v.source(i, a)
	}
}

// repeatedArg reports whether args[j] is the second argument with its name;
// many says to count names in argSeen rather than look back.
func (v *validator) repeatedArg(args []Arg, j int, many bool) bool {
	name := args[j].Name
	if many {
		v.argSeen[name]++
		return v.argSeen[name] == 2
	}
	n := 0
	for _, a := range args[:j] {
		if a.Name == name {
			n++
		}
	}
	return n == 1
}

// id checks the id of step i.
func (v *validator) id(i int) {
	switch id := v.p.Steps[i].ID; {
	case id == "":
		v.add(i, ProblemInvalidID, "missing id: want 1-63 characters of [a-z0-9._-], starting with a letter")
	case !validID(id):
		v.add(i, ProblemInvalidID, fmt.Sprintf("invalid id %s: want 1-63 characters of [a-z0-9._-], starting with a letter", quote(id)))
	}
}

// kind checks one kind of step i; what says which ("kind", "compensation
// kind").
func (v *validator) kind(i int, what, kind string) {
	switch {
	case kind == "":
		v.add(i, ProblemInvalidKind, "missing "+what)
	case !jobs.ValidKind(kind):
		v.add(i, ProblemInvalidKind, fmt.Sprintf("invalid %s %s: want dot-separated segments of [a-z0-9_-] starting with a letter, at most %d characters", what, quote(kind), jobs.MaxKindLen))
	case v.known != nil && !v.known(kind):
		v.add(i, ProblemUnknownKind, fmt.Sprintf("unknown %s %s", what, kind))
	}
}

// source checks the source of argument a of step i.
func (v *validator) source(i int, a Arg) {
	src := a.Source
	bad := func(class ProblemClass, format string, args ...any) {
		v.add(i, class, fmt.Sprintf("argument %s: ", showArg(a.Name))+fmt.Sprintf(format, args...))
	}
	noValue := func() {
		if len(src.Value) > 0 {
			bad(ProblemInvalidArg, "a %s source carries no value", src.Kind)
		}
	}
	path := func() {
		size := 0
		for j, seg := range src.Path {
			if seg == "" {
				bad(ProblemInvalidArg, "path segment %d is empty", j)
			}
			size += len(seg)
		}
		if size > v.lim.MaxArgBytes {
			bad(ProblemBounds, "path of %d bytes, over the bound of %d", size, v.lim.MaxArgBytes)
		}
	}
	fromStep := func() {
		if src.Step == "" {
			bad(ProblemInvalidArg, "a %s source names no step", src.Kind)
			return
		}
		u, ok := v.index[src.Step]
		if !ok {
			bad(ProblemSourceNotPredecessor, "sourced from step %s, which no step of the plan is", showID(src.Step))
			return
		}
		v.queries = append(v.queries, query{v: int32(i), u: u, arg: a.Name})
	}
	switch src.Kind {
	case FromStepResult:
		if len(src.Path) > 0 {
			bad(ProblemInvalidArg, "a step source carries no path: use a path source")
		}
		noValue()
		fromStep()
	case FromStepPath:
		if len(src.Path) == 0 {
			bad(ProblemInvalidArg, "a path source with no path: use a step source for the whole result")
		}
		path()
		noValue()
		fromStep()
	case FromRunInput:
		if src.Step != "" {
			bad(ProblemInvalidArg, "an input source names no step")
		}
		path()
		noValue()
	case FromConstant:
		if src.Step != "" || len(src.Path) > 0 {
			bad(ProblemInvalidArg, "a constant names no step and no path")
		}
		switch {
		case len(src.Value) == 0:
			bad(ProblemInvalidArg, "a constant with no value")
		case !json.Valid(src.Value):
			bad(ProblemInvalidArg, "constant is not valid JSON")
		default:
			v.buf.Reset()
			_ = json.Compact(&v.buf, src.Value) // valid, so it compacts
			if n := v.buf.Len(); n > v.lim.MaxArgBytes {
				bad(ProblemBounds, "constant of %d bytes of JSON, over the bound of %d", n, v.lim.MaxArgBytes)
			}
		}
	case "":
		bad(ProblemInvalidArg, "missing source kind: want step, path, input or const")
	default:
		bad(ProblemInvalidArg, "unknown source kind %s: want step, path, input or const", quote(string(src.Kind)))
	}
}

// graph is a plan's dependency graph over step indexes, and its
// condensation: every step not on a cycle is a component of its own, and
// the components are numbered in topological order.
type graph struct {
	v     *validator
	preds [][]int32 // the distinct steps each step's After resolves to
	succ  []int32   // the steps waiting for each step: succ[succAt[i]:succAt[i+1]]
	succ0 []int32
	order []int32 // the steps not on or after a cycle, in ready order
	level []int32 // for each step in order, the length of its longest chain of predecessors
	comp  []int32 // each step's component
	// members of the components after len(order): the steps on or after a
	// cycle, grouped by strongly connected component.
	members [][]int32
	cyclic  []bool // whether each component after len(order) is a cycle
}

// graph resolves After, reporting unknown predecessors and oversized
// After, orders the steps (Kahn's algorithm, lowest id first) and reports
// each cycle among the steps left over.
func (v *validator) graph() *graph {
	steps := v.p.Steps
	n := len(steps)
	g := &graph{v: v, preds: make([][]int32, n)}
	stamp := make([]int32, n)
	edges := 0
	for i, s := range steps {
		var unknown []string
		for _, a := range s.After {
			j, ok := v.index[a]
			if !ok {
				if !slices.Contains(unknown, a) {
					unknown = append(unknown, a)
					v.add(i, ProblemUnknownPredecessor, fmt.Sprintf("unknown predecessor %s: no step has that id", showID(a)))
				}
				continue
			}
			if stamp[j] == int32(i)+1 {
				continue
			}
			stamp[j] = int32(i) + 1
			g.preds[i] = append(g.preds[i], j)
		}
		if d := len(g.preds[i]) + len(unknown); d > v.lim.MaxAfter {
			v.add(i, ProblemBounds, fmt.Sprintf("%d predecessors, over the bound of %d", d, v.lim.MaxAfter))
		}
		edges += len(g.preds[i])
	}

	// Successors, in one array.
	g.succ0 = make([]int32, n+1)
	for _, ps := range g.preds {
		for _, j := range ps {
			g.succ0[j+1]++
		}
	}
	for i := range n {
		g.succ0[i+1] += g.succ0[i]
	}
	g.succ = make([]int32, edges)
	fill := slices.Clone(g.succ0[:n])
	for i, ps := range g.preds {
		for _, j := range ps {
			g.succ[fill[j]] = int32(i)
			fill[j]++
		}
	}

	// Kahn's algorithm, the lowest ready id first.
	less := func(a, b int32) bool {
		if c := strings.Compare(steps[a].ID, steps[b].ID); c != 0 {
			return c < 0
		}
		return a < b
	}
	waiting := make([]int32, n)
	ready := &minHeap{less: less}
	for i := range n {
		waiting[i] = int32(len(g.preds[i]))
		if waiting[i] == 0 {
			ready.push(int32(i))
		}
	}
	g.comp = make([]int32, n)
	for i := range g.comp {
		g.comp[i] = -1
	}
	g.order = make([]int32, 0, n)
	g.level = make([]int32, 0, n)
	for ready.len() > 0 {
		s := ready.pop()
		lvl := int32(0)
		for _, p := range g.preds[s] {
			lvl = max(lvl, g.level[g.comp[p]]+1)
		}
		g.comp[s] = int32(len(g.order))
		g.order = append(g.order, s)
		g.level = append(g.level, lvl)
		for _, w := range g.succOf(s) {
			if waiting[w]--; waiting[w] == 0 {
				ready.push(w)
			}
		}
	}
	if len(g.order) < n {
		g.cycles()
	}
	return g
}

func (g *graph) succOf(i int32) []int32 { return g.succ[g.succ0[i]:g.succ0[i+1]] }

// cycles finds the strongly connected components of the steps Kahn's
// algorithm left (Tarjan's algorithm), numbers them after the ordered
// steps in topological order, and reports each cycle.
func (g *graph) cycles() {
	n := len(g.preds)
	idx := make([]int32, n)
	low := make([]int32, n)
	for i := range idx {
		idx[i] = -1
	}
	onStack := make([]bool, n)
	var stack []int32
	var sccs [][]int32 // in reverse topological order
	type frame struct{ s, e int32 }
	counter := int32(0)
	for r := range int32(n) {
		if g.comp[r] >= 0 || idx[r] >= 0 {
			continue
		}
		idx[r], low[r] = counter, counter
		counter++
		stack = append(stack, r)
		onStack[r] = true
		call := []frame{{r, g.succ0[r]}}
		for len(call) > 0 {
			top := len(call) - 1
			s := call[top].s
			if e := call[top].e; e < g.succ0[s+1] {
				call[top].e++
				w := g.succ[e]
				switch {
				case idx[w] < 0:
					idx[w], low[w] = counter, counter
					counter++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, g.succ0[w]})
				case onStack[w]:
					low[s] = min(low[s], idx[w])
				}
				continue
			}
			if low[s] == idx[s] {
				var scc []int32
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					scc = append(scc, w)
					if w == s {
						break
					}
				}
				sccs = append(sccs, scc)
			}
			call = call[:top]
			if top > 0 {
				u := call[top-1].s
				low[u] = min(low[u], low[s])
			}
		}
	}
	base := int32(len(g.order))
	g.members = make([][]int32, len(sccs))
	g.cyclic = make([]bool, len(sccs))
	for t, scc := range sccs {
		c := len(sccs) - 1 - t
		g.members[c] = scc
		for _, s := range scc {
			g.comp[s] = base + int32(c)
		}
	}
	for c, scc := range g.members {
		if len(scc) > 1 || slices.Contains(g.preds[scc[0]], scc[0]) {
			g.cyclic[c] = true
			g.reportCycle(base+int32(c), scc)
		}
	}
}

// reportCycle reports the component c, whose steps are scc, as the
// shortest cycle through its lowest id, naming any other steps of the
// component after it.
func (g *graph) reportCycle(c int32, scc []int32) {
	v := g.v
	steps := v.p.Steps
	byID := func(a, b int32) int {
		return cmp.Or(strings.Compare(steps[a].ID, steps[b].ID), cmp.Compare(a, b))
	}
	start := slices.MinFunc(scc, byID)
	parent := make(map[int32]int32, len(scc))
	parent[start] = -1
	queue := []int32{start}
	var next []int32
	last := int32(-1)
	for len(queue) > 0 && last < 0 {
		x := queue[0]
		queue = queue[1:]
		next = append(next[:0], g.succOf(x)...)
		slices.SortFunc(next, byID)
		for _, w := range next {
			if g.comp[w] != c {
				continue
			}
			if w == start {
				last = x
				break
			}
			if _, seen := parent[w]; !seen {
				parent[w] = x
				queue = append(queue, w)
			}
		}
	}
	var path []int32
	for s := last; s >= 0; s = parent[s] {
		path = append(path, s)
	}
	slices.Reverse(path)
	names := make([]string, 0, len(path)+1)
	onPath := make(map[int32]bool, len(path))
	for _, s := range path {
		names = append(names, showID(v.name(int(s))))
		onPath[s] = true
	}
	names = append(names, names[0])
	reason := "cycle: " + strings.Join(names, " -> ")
	var others []int32
	for _, s := range scc {
		if !onPath[s] {
			others = append(others, s)
		}
	}
	if len(others) > 0 {
		slices.SortFunc(others, byID)
		on := make([]string, len(others))
		for i, s := range others {
			on[i] = showID(v.name(int(s)))
		}
		reason += fmt.Sprintf(" (%s also on cycles with these steps)", strings.Join(on, ", "))
	}
	v.add(int(start), ProblemCycle, reason)
}

// width reports every level of the graph with more steps than the bound.
func (g *graph) width() {
	if len(g.level) == 0 {
		return
	}
	count := make([]int, slices.Max(g.level)+1)
	for _, l := range g.level {
		count[l]++
	}
	for l, c := range count {
		if c > g.v.lim.MaxWidth {
			g.v.plan(ProblemBounds, fmt.Sprintf("level %d of the graph has %d steps, over the bound of %d", l, c, g.v.lim.MaxWidth))
		}
	}
}

// sources reports every argument sourced from a step that is not a
// predecessor of its own. A source After names directly needs no search;
// the others are decided on the condensation, for 64 source steps at a
// time, by one pass in topological order marking which of them reach each
// component.
func (g *graph) sources() {
	v := g.v
	var open []query
	stamp := make([]int32, len(g.preds))
	last := int32(-1)
	for _, q := range v.queries {
		if q.v != last {
			last = q.v
			for _, p := range g.preds[q.v] {
				stamp[p] = q.v + 1
			}
		}
		cu, cv := g.comp[q.u], g.comp[q.v]
		switch {
		case q.u == q.v:
			g.refuse(q, "the step itself")
		case stamp[q.u] == q.v+1:
		case cu == cv && g.isCyclic(cu):
		case cu >= cv:
			g.refuse(q, "not a predecessor")
		default:
			open = append(open, q)
		}
	}
	if len(open) == 0 {
		return
	}
	slices.SortFunc(open, func(a, b query) int {
		return cmp.Or(cmp.Compare(g.comp[a.u], g.comp[b.u]), cmp.Compare(a.u, b.u))
	})
	reach := make([]uint64, len(g.comp))
	bit := map[int32]uint64{}
	for len(open) > 0 {
		clear(bit)
		n := 0
		lo, hi := g.comp[open[0].u], int32(0)
		for n < len(open) {
			u := open[n].u
			if _, ok := bit[u]; !ok {
				if len(bit) == 64 {
					break
				}
				bit[u] = 1 << len(bit)
			}
			hi = max(hi, g.comp[open[n].v])
			n++
		}
		batch := open[:n]
		open = open[n:]
		clear(reach[lo : hi+1])
		for u, b := range bit {
			reach[g.comp[u]] |= b
		}
		for c := lo; c <= hi; c++ {
			for _, s := range g.membersOf(c) {
				for _, p := range g.preds[s] {
					if cp := g.comp[p]; cp != c && cp >= lo {
						reach[c] |= reach[cp]
					}
				}
			}
		}
		for _, q := range batch {
			if reach[g.comp[q.v]]&bit[q.u] == 0 {
				g.refuse(q, "not a predecessor")
			}
		}
	}
}

func (g *graph) refuse(q query, what string) {
	g.v.add(int(q.v), ProblemSourceNotPredecessor,
		fmt.Sprintf("argument %s: sourced from step %s, %s", showArg(q.arg), showID(g.v.name(int(q.u))), what))
}

func (g *graph) isCyclic(c int32) bool {
	base := int32(len(g.order))
	return c >= base && g.cyclic[c-base]
}

func (g *graph) membersOf(c int32) []int32 {
	if base := int32(len(g.order)); c >= base {
		return g.members[c-base]
	}
	return g.order[c : c+1]
}

// minHeap is a binary heap of step indexes ordered by less.
type minHeap struct {
	s    []int32
	less func(a, b int32) bool
}

func (h *minHeap) len() int { return len(h.s) }

func (h *minHeap) push(x int32) {
	h.s = append(h.s, x)
	for i := len(h.s) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(h.s[i], h.s[p]) {
			break
		}
		h.s[i], h.s[p] = h.s[p], h.s[i]
		i = p
	}
}

func (h *minHeap) pop() int32 {
	top := h.s[0]
	n := len(h.s) - 1
	h.s[0] = h.s[n]
	h.s = h.s[:n]
	for i := 0; ; {
		m, l, r := i, 2*i+1, 2*i+2
		if l < n && h.less(h.s[l], h.s[m]) {
			m = l
		}
		if r < n && h.less(h.s[r], h.s[m]) {
			m = r
		}
		if m == i {
			break
		}
		h.s[i], h.s[m] = h.s[m], h.s[i]
		i = m
	}
	return top
}

// showID renders a step id for a message: as it is when well formed or of
// the form "#i", quoted and cut short otherwise.
func showID(id string) string {
	if validID(id) || isIndexName(id) {
		return id
	}
	return quote(id)
}

// showArg renders an argument name for a message.
func showArg(name string) string {
	if validArg(name) {
		return name
	}
	return quote(name)
}

func isIndexName(s string) bool {
	if len(s) < 2 || s[0] != '#' {
		return false
	}
	_, err := strconv.ParseUint(s[1:], 10, 31)
	return err == nil
}

// quote quotes s, cut to its first 64 bytes.
func quote(s string) string {
	const most = 64
	if len(s) <= most {
		return strconv.Quote(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}
