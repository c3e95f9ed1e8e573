package plans_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/budgets"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
)

// advancePlans are the plans the two ways of advancing runs are held to:
// chains, fan-out and fan-in, arguments from the input, constants, paths
// and a step before the predecessor, two terminal steps, a step that
// requires trusted input, results labelled untrusted, a failing step with
// compensations, and a waiting step -- what the set takes and what it
// leaves to the row path.
func advancePlans() []plans.Plan {
	s := func(id string, after []string, args ...plans.Arg) plans.Step {
		if args == nil {
			args = []plans.Arg{}
		}
		return plans.Step{ID: id, Kind: "adv.run", After: after, Args: args}
	}
	arg := func(name string, src plans.Source) plans.Arg { return plans.Arg{Name: name, Source: src} }
	chain := plans.Plan{Steps: []plans.Step{
		s("a", nil, arg("x", plans.Input("x"))),
		s("b", []string{"a"}, arg("n", plans.StepPath("a", "n")), arg("k", plans.Const(7))),
		s("c", []string{"b"}, arg("all", plans.StepResult("b")), arg("first", plans.StepPath("a", "n"))),
	}}
	chain.Steps[2].Terminal = true
	fan := plans.Plan{Steps: []plans.Step{s("root", nil)}}
	join := s("join", nil)
	for i := range 4 {
		id := fmt.Sprintf("leaf%d", i)
		fan.Steps = append(fan.Steps, s(id, []string{"root"}, arg("n", plans.StepPath("root", "n"))))
		join.After = append(join.After, id)
		join.Args = append(join.Args, arg(id, plans.StepPath(id, "n")))
	}
	join.Terminal = true
	fan.Steps = append(fan.Steps, join)
	twoEnds := plans.Plan{Steps: []plans.Step{
		s("a", nil, arg("in", plans.Input())),
		s("t1", []string{"a"}, arg("n", plans.StepPath("a", "n"))),
		s("x", []string{"a"}),
		s("t2", []string{"x"}, arg("n", plans.StepPath("x", "n"))),
		s("y", []string{"t1"}),
	}}
	twoEnds.Steps[1].Terminal, twoEnds.Steps[3].Terminal = true, true
	guarded := plans.Plan{Steps: []plans.Step{
		s("a", nil, arg("x", plans.Input("x"))),
		s("b", []string{"a"}, arg("n", plans.StepPath("a", "n"))),
		s("sure", []string{"b"}),
		s("end", []string{"sure"}),
	}}
	guarded.Steps[2].Trusted, guarded.Steps[3].Terminal = true, true
	labelled := plans.Plan{Steps: []plans.Step{
		s("a", nil),
		s("untrusted", []string{"a"}),
		s("b", []string{"untrusted"}, arg("u", plans.StepPath("untrusted", "n"))),
		s("c", []string{"b"}),
	}}
	labelled.Steps[1].Kind, labelled.Steps[3].Terminal = "adv.untrusted", true
	failing := plans.Plan{Steps: []plans.Step{
		s("a", nil), s("b", []string{"a"}), s("c", []string{"b"}), s("d", []string{"c"}),
	}}
	failing.Steps[0].Compensation, failing.Steps[1].Compensation = "adv.undo", "adv.undo"
	failing.Steps[2].Kind, failing.Steps[3].Terminal = "adv.fail", true
	waiting := plans.Plan{Steps: []plans.Step{
		s("a", nil), s("b", []string{"a"}), s("nap", []string{"a"}), s("c", []string{"b", "nap"}),
	}}
	waiting.Steps[2].Kind, waiting.Steps[2].Wait = "", &plans.Wait{Type: plans.WaitSleep, For: 3600}
	waiting.Steps[3].Terminal = true
	// Three first steps: a start admits them together, each with its own
	// arguments (a path of the input that is not there reads null), one
	// repeatable, one with a compensation, one requiring trusted input.
	roots := plans.Plan{Steps: []plans.Step{
		s("r3", nil, arg("k", plans.Const("three")), arg("x", plans.Input("x"))),
		s("r1", nil, arg("gone", plans.Input("nowhere", "deep"))),
		s("r2", nil, arg("all", plans.Input()), arg("k", plans.Const(2))),
		s("end", []string{"r1", "r2", "r3"}, arg("n", plans.StepPath("r2", "n"))),
	}}
	roots.Steps[0].Repeatable, roots.Steps[1].Compensation, roots.Steps[2].Trusted = true, "adv.undo", true
	roots.Steps[3].Terminal = true
	return []plans.Plan{chain, fan, twoEnds, guarded, labelled, failing, waiting, roots}
}

// advanceRuns starts advanceRuns' runs in e -- each plan six times, its
// input trusted every other time -- and drives them to rest: each round
// claims every queued job and settles, in one transaction, those a
// deterministic choice picks (by run, step and round, never by job id), the
// successes in one CompleteMany statement, so that a round ends jobs of many
// runs at once, some of one run together, some out of ready order. It
// returns every run's records, normalized: what must be the same however
// the runs were advanced.
func advanceRuns(t *testing.T, e env) []string {
	t.Helper()
	ctx := t.Context()
	jc := jobsAs(t, e)
	var runs []int64
	for i, p := range advancePlans() {
		for k := range 6 {
			run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p,
				Input: json.RawMessage(fmt.Sprintf(`{"x": %d, "plan": %d}`, k, i)), InputTrusted: k%2 == 0})
			require.NoError(t, err)
			runs = append(runs, run.ID)
		}
	}
	index := map[int64]int{}
	for i, id := range runs {
		index[id] = i
	}
	type held struct {
		lease jobs.Lease
		job   jobs.Job
	}
	holding := map[string]held{}
	pick := func(key string, round int) bool {
		h := fnv.New32a()
		_, _ = fmt.Fprintf(h, "%s/%d", key, round)
		return h.Sum32()%3 != 0
	}
	for round := 0; round < 60; round++ {
		e.Clock.Advance(time.Second) // each round at an instant of its own
		var queued []int64
		rows, err := e.Pool.Query(ctx, `SELECT id FROM docket.jobs WHERE project = $1 AND state = 'queued' ORDER BY id`, project)
		require.NoError(t, err)
		queued, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		if len(queued) == 0 && len(holding) == 0 {
			return advanceSnapshot(t, e, runs)
		}
		for _, id := range queued {
			j, ok, err := jc.ClaimID(ctx, id, jobs.ClaimOptions{})
			require.NoError(t, err)
			require.True(t, ok)
			var params struct {
				Run        int64  `json:"run_id"`
				Step       string `json:"step"`
				Compensate string `json:"compensates"`
			}
			require.NoError(t, json.Unmarshal(j.Params, &params))
			key := fmt.Sprintf("%03d/%s/%s/%t", index[params.Run], params.Step, j.Kind, params.Compensate != "")
			holding[key] = held{j.Lease(), j}
		}
		keys := make([]string, 0, len(holding))
		for k := range holding {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var done []jobs.Completion
		tx, err := e.API.Begin(ctx)
		require.NoError(t, err)
		for _, k := range keys {
			h := holding[k]
			if !pick(k, round) && round < 50 {
				continue
			}
			delete(holding, k)
			switch h.job.Kind {
			case "adv.fail":
				_, err := jc.FailTx(ctx, tx, h.lease, jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "no"})
				require.NoError(t, err)
			case "adv.untrusted":
				done = append(done, jobs.Completion{Lease: h.lease, Result: json.RawMessage(`{"n": 5, "trust": "untrusted"}`)})
			default:
				done = append(done, jobs.Completion{Lease: h.lease,
					Result: json.RawMessage(fmt.Sprintf(`{"n": %d, "got": %s}`, len(h.job.Payload), h.job.Payload))})
			}
		}
		if len(done) > 0 {
			refusals, err := jc.CompleteManyTx(ctx, tx, done)
			require.NoError(t, err)
			for _, r := range refusals {
				require.NoError(t, r)
			}
		}
		require.NoError(t, tx.Commit(ctx))
	}
	t.Fatal("the runs did not come to rest in 60 rounds")
	return nil
}

// advanceSnapshot is runs' records as lines, run ids replaced by their
// order of starting and job ids by their order within the run.
func advanceSnapshot(t *testing.T, e env, runs []int64) []string {
	t.Helper()
	var out []string
	for i, id := range runs {
		var line string
		require.NoError(t, e.Pool.QueryRow(t.Context(), `
			SELECT concat_ws(' | ', r.status, r.applied, r.admitted, r.refusals, r.untrusted_read, r.output, r.failure,
			                 r.updated_at, r.finished_at, r.guard_seq)
			FROM docket.runs r WHERE r.id = $1`, id).Scan(&line))
		out = append(out, fmt.Sprintf("run %d: %s", i, line))
		rows, err := e.Pool.Query(t.Context(), `
			SELECT concat_ws(' | ', s.step_id, s.state, s.ready_seq, s.args, s.trusted, s.result, s.result_trusted, s.reason,
			                 s.effect_slot, s.admitted_at, s.updated_at, s.wait, s.job_id IS NOT NULL,
			                 j.kind, j.payload, j.params - 'run_id', j.idempotency_key, j.state, j.repeatable, j.case_id,
			                 j.created_by, j.available_at, c.kind, c.state,
			                 CASE WHEN s.job_id IS NOT NULL THEN rank() OVER (PARTITION BY s.job_id IS NULL ORDER BY s.job_id) END)
			FROM docket.run_steps s
			LEFT JOIN docket.jobs j ON j.id = s.job_id
			LEFT JOIN docket.jobs c ON c.id = s.compensation_job_id
			WHERE s.run_id = $1 ORDER BY s.ready_seq`, id)
		require.NoError(t, err)
		steps, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		for _, s := range steps {
			out = append(out, fmt.Sprintf("  step: %s", strings.ReplaceAll(s, fmt.Sprintf("run:%d:", id), "run:#:")))
		}
	}
	return out
}

// advanceAs returns e with its API logged in afresh with docket.advance
// set to how ("row", "set", or "" for the default) in every session.
func advanceAs(t testing.TB, e env, how string) env {
	t.Helper()
	if how == "" {
		return e
	}
	cfg := e.API.Config()
	cfg.ConnConfig.RuntimeParams["docket.advance"] = how
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e.API = pool
	e.app, err = plans.NewClient(e.API, plans.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	return e
}

// TestTheSetAdvancesRunsAsTheRowPathDoes: the same runs, driven the same
// way, reach the same records whether their successes are advanced one at
// a time (docket.advance = 'row'), set-based for batches (the default) or
// set-based for every success ('set'): steps, arguments, trust labels,
// ready order, jobs, run counters, outputs and instants alike.
func TestTheSetAdvancesRunsAsTheRowPathDoes(t *testing.T) {
	t.Parallel()
	snaps := map[string][]string{}
	for _, how := range []string{"row", "", "set"} {
		e := advanceAs(t, setup(t), how)
		snaps[how] = advanceRuns(t, e)
	}
	require.NotEmpty(t, snaps["row"])
	require.Equal(t, snaps["row"], snaps[""], "the default's records differ from the row path's")
	require.Equal(t, snaps["row"], snaps["set"], "the set's records differ from the row path's")
	joined := strings.Join(snaps["row"], "\n")
	for _, want := range []string{"succeeded", "compensated", "refused", "waiting", "untrusted"} {
		require.Contains(t, joined, want, "the runs reach %s", want)
	}
}

// TestTheSetTakesWhatItCan: the set advances the successes it can decide
// alone -- here a chain's first step -- and leaves to the row path a run
// with a ceiling, a success whose successor waits and one that reports
// spend; what it leaves it does not touch.
func TestTheSetTakesWhatItCan(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	chain := chainOf("adv.run", "adv.run")
	nap := plans.Plan{Steps: []plans.Step{step("a", "adv.run"), step("b", "", "a")}}
	nap.Steps[1].Wait, nap.Steps[1].Terminal = &plans.Wait{Type: plans.WaitSleep, For: 60}, true
	starts := []plans.Start{
		{Project: project, Plan: chain},
		{Project: project, Plan: chain, Budget: budgets.Budget{MaxSteps: 10}},
		{Project: project, Plan: nap},
		{Project: project, Plan: chain},
	}
	var ids []int64
	var results []string
	for i, s := range starts {
		run, err := e.app.Start(ctx, s)
		require.NoError(t, err)
		steps, err := e.app.Steps(ctx, run.ID)
		require.NoError(t, err)
		ids = append(ids, steps[0].JobID)
		results = append(results, map[bool]string{true: `{"n": 1, "spent": {"effects": 1}}`, false: `{"n": 1}`}[i == 3])
	}
	before := ceilingsSnapshot(t, e)
	tx, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	require.Equal(t, []int64{ids[0]}, takeSet(t, e, tx, ids, results))
	var steps []string
	rows, err := tx.Query(ctx, `SELECT s.step_id || ':' || s.state FROM docket.run_steps s ORDER BY s.run_id, s.ready_seq`)
	require.NoError(t, err)
	steps, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"a:succeeded", "b:admitted", "a:admitted", "a:admitted", "a:admitted"}, steps,
		"the chain's first step succeeded and its second admitted; the others untouched")
	// What it left is as it was, seen inside its transaction.
	leftOf := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		var left string
		require.NoError(t, q.QueryRow(ctx, `SELECT string_agg(concat_ws(' ', r.id, r.status, r.applied, r.admitted, r.updated_at, s.state,
			s.result, s.updated_at, j.state), ';' ORDER BY r.id)
			FROM docket.runs r JOIN docket.run_steps s ON s.run_id = r.id JOIN docket.jobs j ON j.id = s.job_id
			WHERE s.job_id = ANY ($1)`, ids[1:]).Scan(&left))
		return left
	}
	inside := leftOf(tx)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, leftOf(e.Pool), inside)
	require.Equal(t, before, ceilingsSnapshot(t, e))
}

// TestTheSetTakesARunWhole: the set takes several successes of one run
// together -- a fan's two leaves, given out of ready order, are applied
// and admit its join once -- but not successes that finish their run
// together (one at a time, the run would finish at the first and leave the
// other recorded, not applied): those it leaves to the row path, untouched.
func TestTheSetTakesARunWhole(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	fan := plans.Plan{Steps: []plans.Step{step("root", "adv.run"), step("l1", "adv.run", "root"), step("l2", "adv.run", "root"),
		step("join", "adv.run", "l1", "l2")}}
	fan.Steps[3].Terminal = true
	ends := plans.Plan{Steps: []plans.Step{step("a", "adv.run"), step("t1", "adv.run", "a"), step("t2", "adv.run", "a")}}
	ends.Steps[1].Terminal, ends.Steps[2].Terminal = true, true
	var runs []int64
	for _, p := range []plans.Plan{fan, ends} {
		run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
		require.NoError(t, err)
		runs = append(runs, run.ID)
	}
	jobOf := func(run int64, id string) int64 { return stepOf(t, e, run, id).JobID }
	succeed := func(ids ...int64) []int64 {
		tx, err := e.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		results := make([]string, len(ids))
		for i := range results {
			results[i] = `{"n": 1}`
		}
		took := takeSet(t, e, tx, ids, results)
		require.NoError(t, tx.Commit(ctx))
		slices.Sort(took)
		return took
	}
	state := func(run int64) string {
		var s string
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT r.status || ' ' || r.applied || '/' || r.admitted || ': ' ||
			string_agg(s.step_id || ' ' || s.state, ', ' ORDER BY s.ready_seq)
			FROM docket.runs r JOIN docket.run_steps s ON s.run_id = r.id WHERE r.id = $1 GROUP BY r.id`, run).Scan(&s))
		return s
	}
	first := []int64{jobOf(runs[0], "root"), jobOf(runs[1], "a")}
	require.ElementsMatch(t, first, succeed(first...))
	require.Equal(t, "running 1/3: root succeeded, l1 admitted, l2 admitted", state(runs[0]))
	require.Equal(t, "running 1/3: a succeeded, t1 admitted, t2 admitted", state(runs[1]))

	l1, l2 := jobOf(runs[0], "l1"), jobOf(runs[0], "l2")
	require.Equal(t, []int64{min(l1, l2), max(l1, l2)}, succeed(l2, jobOf(runs[1], "t2"), l1, jobOf(runs[1], "t1")))
	require.Equal(t, "running 3/4: root succeeded, l1 succeeded, l2 succeeded, join admitted", state(runs[0]))
	require.Equal(t, "running 1/3: a succeeded, t1 admitted, t2 admitted", state(runs[1]))
}

// takeSet calls run_steps_succeeded_set in tx, as app at the test's
// instant, with jobs ids succeeding with results, and returns what it took.
func takeSet(t testing.TB, e env, tx pgx.Tx, ids []int64, results []string) []int64 {
	t.Helper()
	ctx := context.Background()
	_, err := tx.Exec(ctx, `SELECT docket.set_context($1, $2)`, string(app), e.Clock.Now())
	require.NoError(t, err)
	var took []int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT docket.run_steps_succeeded_set($1, $2::jsonb[])`, ids, results).Scan(&took))
	return took
}

// TestABatchOfSuccessesIsAdvancedSetBased: the completion trigger hands a
// statement's successes to the set (run_steps_succeeded_set), which reads
// the runs in a few statements for all of them, where the one-at-a-time
// path reads each run again in each of its steps. The equivalence test
// above shows both reach the same records, so it cannot tell whether the
// set was taken at all; the reads of runs by key in the completing
// statement (pg_stat_xact_user_tables) do.
func TestABatchOfSuccessesIsAdvancedSetBased(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	jc := jobsAs(t, e)
	p := chainOf("adv.set", "adv.set")
	// runReads starts two runs, claims their first steps and records both
	// successes in one statement, in a transaction begun by begin, and
	// returns how many index scans of runs that statement made.
	runReads := func(begin string) int64 {
		var ids []int64
		for range 2 {
			run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
			require.NoError(t, err)
			ids = append(ids, stepOf(t, e, run.ID, "a").JobID)
		}
		var reads int64
		require.NoError(t, db.WithTx(ctx, beginner{e.API, begin}, func(tx pgx.Tx) error {
			batch := make([]jobs.Completion, len(ids))
			for i, id := range ids {
				j, ok, err := jc.ClaimIDTx(ctx, tx, id, jobs.ClaimOptions{})
				require.NoError(t, err)
				require.True(t, ok)
				batch[i] = jobs.Completion{Lease: j.Lease(), Result: []byte(`"ok"`)}
			}
			read := func() (n int64) {
				require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(sum(idx_scan), 0)::bigint FROM pg_stat_xact_user_tables
					WHERE schemaname = 'docket' AND relname = 'runs'`).Scan(&n))
				return n
			}
			before := read()
			refusals, err := jc.CompleteManyTx(ctx, tx, batch)
			require.NoError(t, err)
			for _, r := range refusals {
				require.NoError(t, r)
			}
			reads = read() - before
			return nil
		}))
		return reads
	}
	set, row := runReads("BEGIN"), runReads("BEGIN; SET LOCAL docket.advance = 'row'")
	require.Less(t, set, row, "the default reads the runs as the one-at-a-time path does: the set was not taken")
}

// beginner begins a transaction on pool with a begin statement of its own.
type beginner struct {
	pool  *pgxpool.Pool
	begin string
}

func (b beginner) Begin(ctx context.Context) (pgx.Tx, error) {
	return b.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: b.begin})
}

// TestAStartAdmitsItsFirstStepsTogether: a run whose first steps are all
// jobs it may run is born with them counted, and they are admitted by one
// insert of their jobs and one of their steps, so the start never writes
// its run again; one that is not (a first step refused for untrusted input)
// is admitted one at a time, as every start is under docket.advance =
// 'row'. The equivalence test above shows both reach the same records.
func TestAStartAdmitsItsFirstStepsTogether(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	p := plans.Plan{Steps: []plans.Step{
		{ID: "a", Kind: "adv.roots", Args: []plans.Arg{{Name: "x", Source: plans.Input("x")}}},
		{ID: "b", Kind: "adv.roots", Args: []plans.Arg{}},
		{ID: "c", Kind: "adv.roots", Args: []plans.Arg{}, Trusted: true},
		{ID: "end", Kind: "adv.roots", After: []string{"a", "b", "c"}, Args: []plans.Arg{}, Terminal: true},
	}}
	// writes starts a run in a transaction begun by begin and returns the
	// updates of runs the start made.
	writes := func(begin string, trusted bool) int64 {
		var n, id int64
		require.NoError(t, db.WithTx(ctx, beginner{e.API, begin}, func(tx pgx.Tx) error {
			run, err := e.app.StartTx(ctx, tx, plans.Start{Project: project, Plan: p, Input: json.RawMessage(`{"x": 1}`),
				InputTrusted: trusted})
			require.NoError(t, err)
			id = run.ID
			return tx.QueryRow(ctx, `SELECT coalesce(sum(n_tup_upd), 0)::bigint FROM pg_stat_xact_user_tables
				WHERE schemaname = 'docket' AND relname = 'runs'`).Scan(&n)
		}))
		var admitted, steps int
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT r.admitted, (SELECT count(*) FROM docket.run_steps s WHERE s.run_id = r.id)
			FROM docket.runs r WHERE r.id = $1`, id).Scan(&admitted, &steps))
		require.Equal(t, []int{3, 3}, []int{admitted, steps}, "the first steps admitted and counted")
		return n
	}
	require.Zero(t, writes("BEGIN", true), "a start with every first step a job wrote its run again: it admitted them one at a time")
	require.EqualValues(t, 3, writes("BEGIN; SET LOCAL docket.advance = 'row'", true), "one write of the run for each step admitted")
	require.Positive(t, writes("BEGIN", false), "a start that refuses a first step admits them one at a time")
}
