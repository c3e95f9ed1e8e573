package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/show"
	"github.com/docket-dev/docket/plans"
)

// How much of a large graph plan show draws: the steps of one level, and
// the names in one list (predecessors, successors, arguments), before it
// counts the rest.
const (
	plansShowLevel = 10
	plansShowList  = 10
)

// How much of a constant argument plan show prints on a line (-o json has
// it whole); of the run's output, show.OutputShown.
const plansShowConst = 40

func (c *cli) plansCmd(args []string) (dbAction, error) {
	sub, rest, err := c.sub("plan", args)
	if err != nil {
		return nil, err
	}
	fs := c.flags("plan " + sub)
	switch sub {
	case "list":
		limit := fs.Int("limit", 50, "at most `N` runs, newest first")
		before := fs.Int64("before", 0, "only runs with a smaller `ID` (the last id of the previous page)")
		format := outputFlag(fs)
		project, err := c.listArgs(fs, rest, limit, before)
		if err != nil {
			return nil, err
		}
		f := plans.Filter{Project: project, Before: *before, Limit: *limit}
		return func(ctx context.Context, pool *pgxpool.Pool) error { return c.plansList(ctx, pool, f, *format) }, nil
	case "show":
		format := outputFlag(fs)
		pos, err := c.parse(fs, rest, "RUN")
		if err != nil {
			return nil, err
		}
		id, err := positiveID(fs, "RUN", pos[0], "run")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			v, err := c.readRun(ctx, pool, id)
			if err != nil {
				return err
			}
			if *format == formatJSON {
				return writeRunJSON(c.stdout, v)
			}
			return writeRunText(c.stdout, v)
		}, nil
	}
	return nil, usageOf(fs, "no such subcommand")
}

// plansList prints a page of a project's runs, newest first.
func (c *cli) plansList(ctx context.Context, pool *pgxpool.Pool, f plans.Filter, format string) error {
	cl, err := plans.NewClient(pool, plans.Config{Actor: c.actor, Clock: c.clock, Replica: c.replicaPool()})
	if err != nil {
		return err
	}
	list, err := cl.List(ctx, f)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		c.viewHint(ctx, pool, f.Project, "plan list")
	}
	if format == formatJSON {
		return writeSafeJSON(c.stdout, runListDoc{Project: f.Project, Runs: mapSlice(list, runJSONOf)})
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUN\tSTATUS\tPLAN\tVERSION\tCASE\tCREATED AT\tFINISHED AT")
	for _, r := range list {
		caseID, finished := "-", "-"
		if r.CaseID != 0 {
			caseID = strconv.FormatInt(r.CaseID, 10)
		}
		if r.FinishedAt != nil {
			finished = r.FinishedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Status, shortDigest(r.Digest), r.Version, caseID,
			r.CreatedAt.Format(time.RFC3339), finished)
	}
	return w.Flush()
}

// runView is what plan show reads of a run, from one snapshot.
type runView struct {
	run      plans.Run
	steps    []plans.RunStep
	versions []plans.Version
}

// readRun reads run id, its steps and its plan's versions in one read-only
// repeatable-read transaction, so that they agree with each other.
func (c *cli) readRun(ctx context.Context, pool *pgxpool.Pool, id int64) (runView, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return runView{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	cl, err := plans.NewClient(tx, plans.Config{Actor: c.actor, Clock: c.clock})
	if err != nil {
		return runView{}, err
	}
	var v runView
	if v.run, err = cl.Get(ctx, id); err != nil {
		return runView{}, err
	}
	if v.steps, err = cl.Steps(ctx, id); err != nil {
		return runView{}, err
	}
	if v.versions, err = cl.Versions(ctx, id); err != nil {
		return runView{}, err
	}
	return v, nil
}

// planGraph is the plan a run runs now, laid out for drawing.
type planGraph struct {
	version plans.Version
	nodes   map[string]*planNode
	// levels holds the step ids of each level (the length of the longest
	// chain of predecessors), each level in ready order.
	levels [][]string
	// stale are the steps the run admitted under an earlier version that
	// this one no longer has, in ready order.
	stale []plans.RunStep
}

// planNode is one step of the plan, with where the run has it.
type planNode struct {
	step  plans.Step
	level int
	succ  []string       // the steps after it, in ready order
	run   *plans.RunStep // nil: not admitted
}

// graphOf lays out the version of v's plan the run runs now.
func graphOf(v runView) (planGraph, error) {
	g := planGraph{nodes: map[string]*planNode{}}
	found := false
	for _, ver := range v.versions {
		if ver.Version == v.run.Version {
			g.version, found = ver, true
		}
	}
	if !found {
		return planGraph{}, fmt.Errorf("run %d: version %d of its plan is not on record", v.run.ID, v.run.Version)
	}
	order, err := plans.Order(g.version.Plan)
	if err != nil {
		return planGraph{}, fmt.Errorf("run %d: version %d of its plan: %w", v.run.ID, v.run.Version, err)
	}
	for _, s := range g.version.Plan.Steps {
		g.nodes[s.ID] = &planNode{step: s}
	}
	for _, id := range order {
		n := g.nodes[id]
		for _, p := range n.step.After {
			pn := g.nodes[p]
			n.level = max(n.level, pn.level+1)
			pn.succ = append(pn.succ, id)
		}
		for len(g.levels) <= n.level {
			g.levels = append(g.levels, nil)
		}
		g.levels[n.level] = append(g.levels[n.level], id)
	}
	for i := range v.steps {
		s := &v.steps[i]
		if n, ok := g.nodes[s.StepID]; ok {
			n.run = s
		} else {
			g.stale = append(g.stale, *s)
		}
	}
	return g, nil
}

// writeRunText prints the run, the graph of its plan and the plan's
// versions.
func writeRunText(out io.Writer, v runView) error {
	g, err := graphOf(v)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	r := v.run
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "run\t%d\n", r.ID)
	fmt.Fprintf(w, "project\t%s\n", r.Project)
	if r.CaseID != 0 {
		fmt.Fprintf(w, "case\t%d\n", r.CaseID)
	}
	if r.Suspended {
		fmt.Fprintf(w, "status\t%s, suspended: its steps wait (a timer, a message or a task), none runs\n", r.Status)
	} else {
		fmt.Fprintf(w, "status\t%s\n", r.Status)
	}
	fmt.Fprintf(w, "plan\t%s\n", shortDigest(r.Digest))
	fmt.Fprintf(w, "digest\t%s\n", r.Digest)
	fmt.Fprintf(w, "version\t%d of %d\n", r.Version, len(v.versions))
	fmt.Fprintf(w, "input\t%s (%d bytes of JSON; --json shows it)\n", trustText(r.InputTrusted), len(r.Input))
	fmt.Fprintf(w, "replan limit\t%d (%d used)\n", r.ReplanLimit, r.Version-1)
	if !r.Budget.Zero() {
		fmt.Fprintf(w, "budget\t%s\n", show.Budget(r.Budget))
		fmt.Fprintf(w, "spent\t%s\n", show.Spent(r.Budget, r.Spent))
	}
	if r.Exhausted != "" {
		fmt.Fprintf(w, "exhausted\t%s\n", show.Printable(r.Exhausted))
	}
	if r.UntrustedRead != "" {
		fmt.Fprintf(w, "untrusted read\t%s\n", show.Printable(r.UntrustedRead))
	}
	if r.Failure != "" {
		fmt.Fprintf(w, "failure\t%s\n", show.Printable(r.Failure))
	}
	fmt.Fprintf(w, "output\t%s\n", show.Dash(show.Output(r.Output, "--json shows it whole")))
	fmt.Fprintf(w, "created\t%s by %s\n", r.CreatedAt.Format(time.RFC3339Nano), r.CreatedBy)
	finished := "-"
	if r.FinishedAt != nil {
		finished = r.FinishedAt.UTC().Format(time.RFC3339Nano)
	}
	fmt.Fprintf(w, "finished\t%s\n", finished)
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(&b, "\ngraph of version %d: %s in %s\n", g.version.Version, count(len(g.nodes), "step"), count(len(g.levels), "level"))
	for level, ids := range g.levels {
		fmt.Fprintf(&b, "level %d (%s)\n", level, count(len(ids), "step"))
		writeLevel(&b, g, r, ids)
	}
	if len(g.stale) > 0 {
		fmt.Fprintf(&b, "\nadmitted under earlier versions, not in version %d:\n", g.version.Version)
		for i := range g.stale {
			writeStep(&b, staleNode(v, &g.stale[i]), r, false)
		}
	}

	fmt.Fprintln(&b)
	w = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VERSION\tDIGEST\tPREDECESSOR\tREASON\tACTOR\tAT")
	for _, ver := range v.versions {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", ver.Version, shortDigest(ver.Digest), show.Dash(shortDigest(ver.Predecessor)),
			show.Dash(show.Printable(ver.Reason)), ver.Actor, ver.At.Format(time.RFC3339Nano))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	_, err = out.Write(b.Bytes())
	return err
}

// staleNode is step s as the version it was admitted under has it.
func staleNode(v runView, s *plans.RunStep) *planNode {
	n := &planNode{step: plans.Step{ID: s.StepID, Kind: s.Kind, Compensation: s.Compensation}, run: s}
	for _, ver := range v.versions {
		if ver.Version != s.Version {
			continue
		}
		for _, st := range ver.Plan.Steps {
			if st.ID == s.StepID {
				n.step = st
			}
		}
	}
	return n
}

// writeLevel draws the steps of one level: the first plansShowLevel of
// them in ready order, then any other that failed, was refused, left an
// uncertain outcome or failed to compensate, and a count of the rest. When
// every step of the level has the same successors, one arrow after them
// all says so.
func writeLevel(b *bytes.Buffer, g planGraph, r plans.Run, ids []string) {
	shared := len(ids) > 1
	for _, id := range ids {
		shared = shared && slices.Equal(g.nodes[id].succ, g.nodes[ids[0]].succ)
	}
	var hidden []*planNode
	for i, id := range ids {
		n := g.nodes[id]
		if i < plansShowLevel || notable(n) {
			writeStep(b, n, r, !shared)
		} else {
			hidden = append(hidden, n)
		}
	}
	if len(hidden) > 0 {
		states := map[string]int{}
		var labels []string
		for _, n := range hidden {
			s := stateName(n, r)
			if states[s] == 0 {
				labels = append(labels, s)
			}
			states[s]++
		}
		summary := "all " + labels[0]
		if len(labels) > 1 {
			slices.SortStableFunc(labels, func(a, b string) int { return cmp.Compare(states[b], states[a]) })
			parts := make([]string, len(labels))
			for i, l := range labels {
				parts[i] = fmt.Sprintf("%d %s", states[l], l)
			}
			summary = strings.Join(parts, ", ")
		}
		fmt.Fprintf(b, "  … and %s at this level: %s..%s (%s)\n", count(len(hidden), "more step"), hidden[0].step.ID,
			hidden[len(hidden)-1].step.ID, summary)
	}
	if succ := g.nodes[ids[0]].succ; shared && len(succ) > 0 {
		fmt.Fprintf(b, "   └→ %s (each of this level)\n", listText(succ))
	}
}

// writeStep draws one step: its state, id and kind, its predecessors, its
// arguments' sources, its compensation, its marks, and on lines of their
// own why it ended as it did and, with arrow, the steps after it.
func writeStep(b *bytes.Buffer, n *planNode, r plans.Run, arrow bool) {
	s := n.step
	fmt.Fprintf(b, "  [%s] %s  (%s)", headState(n, r), s.ID, s.Kind)
	if len(s.After) > 0 {
		fmt.Fprintf(b, " after %s", listText(s.After))
	}
	if len(s.Args) > 0 {
		args := make([]string, len(s.Args))
		for i, a := range s.Args {
			args[i] = a.Name + "=" + sourceText(a.Source)
		}
		fmt.Fprintf(b, "  args: %s", listText(args))
	}
	comp := s.Compensation
	if n.run != nil && n.run.Compensation != "" {
		comp = n.run.Compensation
	}
	if comp != "" {
		fmt.Fprintf(b, " ← compensation %s", comp)
		if n.run != nil && compensationStarted(n.run.State) {
			fmt.Fprintf(b, " [%s]", n.run.State)
		}
	}
	var marks []string
	if s.Terminal {
		marks = append(marks, "terminal")
	}
	if s.Trusted {
		marks = append(marks, "requires trusted input")
	}
	if s.Repeatable {
		marks = append(marks, "repeatable")
	}
	if n.run != nil {
		if !n.run.Trusted {
			marks = append(marks, "!untrusted")
		}
		if n.run.Version != r.Version {
			marks = append(marks, fmt.Sprintf("admitted under version %d", n.run.Version))
		}
		if n.run.JobID != 0 {
			marks = append(marks, fmt.Sprintf("job %d", n.run.JobID))
		}
		if n.run.CompensationJobID != 0 {
			marks = append(marks, fmt.Sprintf("compensation job %d", n.run.CompensationJobID))
		}
	}
	for _, m := range marks {
		b.WriteString("  " + m)
	}
	b.WriteString("\n")
	if n.run != nil && n.run.Reason != "" {
		fmt.Fprintf(b, "      reason: %s\n", show.Printable(n.run.Reason))
	}
	if arrow && len(n.succ) > 0 {
		fmt.Fprintf(b, "   └→ %s\n", listText(n.succ))
	}
}

// headState is the state a step's line opens with: where the run has it,
// or, once its compensation has started, the outcome of its own job (the
// compensation's state follows the compensation kind). A step not admitted
// is waiting while the run runs, held while its budget is exhausted (a
// resume may admit it), and not run once it no longer admits.
func headState(n *planNode, r plans.Run) string {
	if n.run == nil {
		return show.NotAdmitted(r)
	}
	if compensationStarted(n.run.State) {
		return forwardOutcome(n.run)
	}
	return string(n.run.State)
}

// stateName is where the run has a step, as [plans.RunStep] says, or
// waiting, held or not run when it has not admitted it (see headState).
func stateName(n *planNode, r plans.Run) string {
	if n.run == nil {
		return show.NotAdmitted(r)
	}
	return string(n.run.State)
}

// forwardOutcome is the outcome of a compensated step's own job. An unwind
// compensates succeeded and uncertain steps only; the record keeps a
// result only a success sets, and, until the compensation fails, a reason
// only an uncertain outcome sets. A step with neither a result nor that
// certainty is shown as completed: succeeded or uncertain.
func forwardOutcome(s *plans.RunStep) string {
	switch {
	case s.Result != nil:
		return string(plans.StepSucceeded)
	case s.Reason == "" && s.State != plans.StepCompensationFailed:
		return string(plans.StepSucceeded)
	}
	return "completed"
}

func compensationStarted(s plans.StepState) bool {
	return s == plans.StepCompensating || s == plans.StepCompensated || s == plans.StepCompensationFailed
}

// notable says whether a step is shown whatever the size of its level.
func notable(n *planNode) bool {
	if n.run == nil {
		return false
	}
	switch n.run.State {
	case plans.StepFailed, plans.StepRefused, plans.StepUncertain, plans.StepCompensationFailed, plans.StepWaiting:
		return true
	}
	return false
}

// sourceText shows where an argument's value comes from: a step's result
// ("a"), a path in it ("a.total", `a["odd key"]`), the run's input
// ("input", "input.order") or a constant (its JSON, cut at plansShowConst
// characters).
func sourceText(s plans.Source) string {
	switch s.Kind {
	case plans.FromStepResult:
		return s.Step
	case plans.FromStepPath:
		return s.Step + pathText(s.Path)
	case plans.FromRunInput:
		return "input" + pathText(s.Path)
	case plans.FromConstant:
		var c bytes.Buffer
		if json.Compact(&c, s.Value) != nil {
			return "?"
		}
		return show.Printable(show.Cut(c.String(), plansShowConst))
	}
	return show.Printable(string(s.Kind)) + "?"
}

// pathText shows a path: plain segments after dots, any other quoted in
// brackets.
func pathText(path []string) string {
	var b strings.Builder
	for _, seg := range path {
		if plainSegment(seg) {
			b.WriteString("." + seg)
		} else {
			b.WriteString("[" + strconv.Quote(seg) + "]")
		}
	}
	return show.Printable(b.String())
}

func plainSegment(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// listText joins items, the first plansShowList of them and a count of
// the rest.
func listText(items []string) string {
	if len(items) <= plansShowList {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s, … and %d more", strings.Join(items[:plansShowList], ", "), len(items)-plansShowList)
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func trustText(trusted bool) string {
	if trusted {
		return "trusted"
	}
	return "untrusted"
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// count says n things: "1 step", "3 steps".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// The JSON documents of plan list and plan show.
type (
	runListDoc struct {
		Project string    `json:"project"`
		Runs    []runJSON `json:"runs"`
	}
	runDoc struct {
		Run runJSON `json:"run"`
		// Levels are the step ids of the current version's plan by level,
		// each level in ready order.
		Levels   [][]string    `json:"levels"`
		Steps    []stepJSON    `json:"steps"`
		Versions []versionJSON `json:"versions"`
	}
	runJSON struct {
		ID            int64           `json:"id"`
		Project       string          `json:"project"`
		CaseID        int64           `json:"case_id"`
		Status        plans.Status    `json:"status"`
		Suspended     bool            `json:"suspended"`
		Digest        string          `json:"digest"`
		Version       int             `json:"version"`
		Input         json.RawMessage `json:"input"`
		InputTrusted  bool            `json:"input_trusted"`
		ReplanLimit   int             `json:"replan_limit"`
		UntrustedRead string          `json:"untrusted_read"`
		Output        json.RawMessage `json:"output"`
		Failure       string          `json:"failure"`
		Budget        *budgetJSON     `json:"budget"`
		CreatedBy     access.Actor    `json:"created_by"`
		CreatedAt     time.Time       `json:"created_at"`
		UpdatedAt     time.Time       `json:"updated_at"`
		FinishedAt    *time.Time      `json:"finished_at"`
	}
	// budgetJSON is a run's ceilings (those it sets), what its steps
	// reported they spent, and why it is exhausted, if it is. Money is in
	// minor units of currency.
	budgetJSON struct {
		MaxSteps    int       `json:"max_steps"`
		MaxEffects  int64     `json:"max_effects"`
		MaxMoney    int64     `json:"max_money"`
		Currency    string    `json:"currency"`
		MaxCall     int64     `json:"max_call"`
		MaxParallel int       `json:"max_parallel"`
		Spent       spentJSON `json:"spent"`
		Exhausted   string    `json:"exhausted"`
	}
	spentJSON struct {
		Effects int64 `json:"effects"`
		Money   int64 `json:"money"`
	}
	stepJSON struct {
		Step              string          `json:"step"`
		Version           int             `json:"version"`
		Kind              string          `json:"kind"`
		State             plans.StepState `json:"state"`
		ReadySeq          int             `json:"ready_seq"`
		Args              json.RawMessage `json:"args"`
		Trusted           bool            `json:"trusted"`
		JobID             int64           `json:"job_id"`
		Result            json.RawMessage `json:"result"`
		Compensation      string          `json:"compensation"`
		CompensationJobID int64           `json:"compensation_job_id"`
		Reason            string          `json:"reason"`
		AdmittedAt        time.Time       `json:"admitted_at"`
		UpdatedAt         time.Time       `json:"updated_at"`
	}
	versionJSON struct {
		Version     int          `json:"version"`
		Digest      string       `json:"digest"`
		Predecessor string       `json:"predecessor"`
		Reason      string       `json:"reason"`
		Actor       access.Actor `json:"actor"`
		At          time.Time    `json:"at"`
		Plan        plans.Plan   `json:"plan"`
	}
)

// writeRunJSON prints v as one indented JSON document (see writeSafeJSON).
func writeRunJSON(out io.Writer, v runView) error {
	g, err := graphOf(v)
	if err != nil {
		return err
	}
	doc := runDoc{
		Run:      runJSONOf(v.run),
		Levels:   g.levels,
		Steps:    make([]stepJSON, len(v.steps)),
		Versions: make([]versionJSON, len(v.versions)),
	}
	if doc.Levels == nil {
		doc.Levels = [][]string{}
	}
	for i, s := range v.steps {
		doc.Steps[i] = stepJSON{Step: s.StepID, Version: s.Version, Kind: s.Kind, State: s.State, ReadySeq: s.ReadySeq,
			Args: s.Args, Trusted: s.Trusted, JobID: s.JobID, Result: s.Result, Compensation: s.Compensation,
			CompensationJobID: s.CompensationJobID, Reason: s.Reason, AdmittedAt: s.AdmittedAt, UpdatedAt: s.UpdatedAt}
	}
	for i, ver := range v.versions {
		doc.Versions[i] = versionJSON{Version: ver.Version, Digest: ver.Digest, Predecessor: ver.Predecessor,
			Reason: ver.Reason, Actor: ver.Actor, At: ver.At, Plan: ver.Plan}
	}
	return writeSafeJSON(out, doc)
}

// runJSONOf is run r as plan list and plan show print it.
func runJSONOf(r plans.Run) runJSON {
	out := runJSON{ID: r.ID, Project: r.Project, CaseID: r.CaseID, Status: r.Status, Suspended: r.Suspended, Digest: r.Digest, Version: r.Version,
		Input: r.Input, InputTrusted: r.InputTrusted, ReplanLimit: r.ReplanLimit, UntrustedRead: r.UntrustedRead,
		Output: r.Output, Failure: r.Failure, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		FinishedAt: utcPtr(r.FinishedAt)}
	if b := r.Budget; !b.Zero() {
		out.Budget = &budgetJSON{MaxSteps: b.MaxSteps, MaxEffects: b.MaxEffects, MaxMoney: b.MaxMoney.Amount,
			Currency: b.MaxMoney.Currency, MaxCall: b.MaxCall, MaxParallel: b.MaxParallel,
			Spent: spentJSON{Effects: r.Spent.Effects, Money: r.Spent.Money}, Exhausted: r.Exhausted}
	}
	return out
}

// writeSafeJSON prints doc as one indented JSON document. Characters that
// could drive a terminal (C1 controls, DEL, bidirectional formatting) are
// escaped as \u sequences, which only strings can hold.
func writeSafeJSON(out io.Writer, doc any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	var safe bytes.Buffer
	for _, c := range b.String() {
		if c >= 0x7f && unicode.IsControl(c) || unicode.Is(unicode.Bidi_Control, c) {
			fmt.Fprintf(&safe, `\u%04x`, c)
		} else {
			safe.WriteRune(c)
		}
	}
	_, err := out.Write(safe.Bytes())
	return err
}
