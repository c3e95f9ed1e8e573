package distribution_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/integration/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// referenceTables are the docket tables that would be reference tables, a
// copy on every node, rather than distributed by project: small, global or
// read by nearly every call, and written rarely. Every other docket table
// but River's is counted as would-be distributed.
var referenceTables = []string{
	// Who may do what where: read by every check of a grant, the claim and
	// the sweeps, which read grants by principal across projects.
	"projects", "project_events", "grants", "grant_events", "actor_bindings", "actor_binding_events",
	"retention_policies", "retention_events",
	// What docket is: machines, codes, capabilities, its API, its settings.
	"machines", "machine_states", "machine_transitions", "error_codes", "capabilities", "api_functions", "settings",
	// Keyed by kind, schema and deployment; jobs_undecodable joins it to the jobs.
	"job_decoders",
	// docket's migration bookkeeping.
	"goose_db_version", "definitions", "definition_objects",
}

// coordinatorFunctions are the API functions that write global tables only
// (the reference tables above) and so need no project to be delegated by: on
// a distributed database they run where the reference tables are written.
var coordinatorFunctions = []string{
	"project_create", "project_set_status", // p_name is the project, a row of docket.projects
	"actor_bind", "actor_unbind", // a login's bindings, in docket.actor_bindings
	"job_decoders_register", // a deployment's decoders, in docket.job_decoders
}

// nodeLocal are the functions whose effect stays on the node that calls
// them: a notification reaches the node's listeners, a setting the node's
// session, an advisory lock the node's lock table, a transaction id the
// node's transaction.
var nodeLocal = []string{
	"pg_notify", "set_config",
	"pg_advisory_lock", "pg_advisory_lock_shared", "pg_advisory_xact_lock", "pg_advisory_xact_lock_shared",
	"pg_try_advisory_lock", "pg_try_advisory_lock_shared", "pg_try_advisory_xact_lock", "pg_try_advisory_xact_lock_shared",
	"pg_current_xact_id", "pg_current_xact_id_if_assigned", "txid_current", "txid_current_if_assigned",
}

// A count: what it counts, its offenders as the catalog has them now and
// as the record has them, and what would take an offender off.
type count struct {
	name     string
	of       string // the whole it is a part of, e.g. "of 36 would-be distributed tables"
	found    []string
	recorded []string
	remedy   string
}

// TestWhatStandsBeforeDistribution counts, on a freshly migrated database,
// what stands between docket and a database distributed by project, and
// holds each count to its record: something new is refused, something gone
// must be taken out of the record (and its figure lowered in
// docs/scaling.md).
func TestWhatStandsBeforeDistribution(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)

	distributed, noProject := tables(t, pool)
	unique, uniqueAll := uniqueIndexes(t, pool, distributed)
	fks, fksAll := foreignKeys(t, pool, distributed)
	api, apiAll := apiFunctions(t, pool)
	volatile, local := bodies(t, pool)
	counts := []count{
		{"tables without project", fmt.Sprintf("of %d would-be distributed tables", len(distributed)), noProject, recordedTables,
			"give it a project column, or name it in referenceTables if every node is to hold it whole"},
		{"unique indexes without project", fmt.Sprintf("of %d on would-be distributed tables", uniqueAll), unique, recordedUniqueIndexes,
			"put project among its key columns"},
		{"foreign keys without project", fmt.Sprintf("of %d reaching a would-be distributed table", fksAll), fks, recordedForeignKeys,
			"pair project with project, as in REFERENCES docket.cases (id, project)"},
		{"statement triggers with transition tables", "", transitionTriggers(t, pool), recordedTransitionTriggers,
			"check row by row, or in the function that writes"},
		{"API functions without p_project", fmt.Sprintf("of %d overloads", apiAll), api, recordedAPIFunctions,
			"take the project as p_project, or name the function in coordinatorFunctions if it writes reference tables only"},
		{"UPDATE statements calling a volatile function", "", volatile, recordedVolatileUpdates,
			"draw the value before the statement, or pass it in"},
		{"functions calling what acts on one node", "", local, recordedNodeLocal,
			"keep the effect in a table of the project's, or pass the value in"},
	}
	for _, c := range counts {
		t.Logf("%-48s %3d %s", c.name, len(c.found), c.of)
	}
	for _, c := range counts {
		var added, gone []string
		for _, f := range c.found {
			if !slices.Contains(c.recorded, f) {
				added = append(added, f)
			}
		}
		for _, r := range c.recorded {
			if !slices.Contains(c.found, r) {
				gone = append(gone, r)
			}
		}
		if len(added) > 0 {
			t.Errorf("%s: %d, recorded %d; what is new stands in the way of distribution by project "+
				"(docs/scaling.md, \"Distributed Postgres\"): %s; or, if it must be so, add it to the record and raise "+
				"the figure in docs/scaling.md:\n\t%s",
				c.name, len(c.found), len(c.recorded), c.remedy, strings.Join(added, "\n\t"))
		}
		if len(gone) > 0 {
			t.Errorf("%s: %d, recorded %d; no longer in the way, so take them out of the record and lower the figure "+
				"in docs/scaling.md:\n\t%s", c.name, len(c.found), len(c.recorded), strings.Join(gone, "\n\t"))
		}
		if testing.Verbose() && (len(added) > 0 || len(gone) > 0) {
			t.Logf("the record of %s as found:\n%s", c.name, goList(c.found))
		}
	}
}

// goList writes a record as a Go string list, filling lines of up to 110
// columns.
func goList(items []string) string {
	var b strings.Builder
	line := 0
	for _, it := range items {
		q := fmt.Sprintf("%q,", it)
		if line > 0 && line+1+len(q) > 110-8 {
			line = 0
		}
		if line == 0 {
			b.WriteString("\n\t")
		} else {
			b.WriteString(" ")
			line++
		}
		b.WriteString(q)
		line += len(q)
	}
	return b.String()
}

// collect runs a query of one text column.
func collect(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// tables returns the would-be distributed tables, and those of them without
// a project column. Every reference table must exist.
func tables(t *testing.T, pool *pgxpool.Pool) (distributed, noProject []string) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.relname::text,
		       EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'project' AND NOT a.attisdropped)
		FROM pg_class c
		WHERE c.relnamespace = 'docket'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND c.relname NOT LIKE 'river\_%'
		ORDER BY 1`)
	require.NoError(t, err)
	type table struct {
		Name    string
		Project bool
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[table])
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, tb := range all {
		seen[tb.Name] = true
		if slices.Contains(referenceTables, tb.Name) {
			continue
		}
		distributed = append(distributed, tb.Name)
		if !tb.Project {
			noProject = append(noProject, tb.Name)
		}
	}
	for _, r := range referenceTables {
		require.True(t, seen[r], "reference table %s does not exist: take it out of referenceTables", r)
	}
	require.Greater(t, len(distributed), 20, "docket's tables")
	return distributed, noProject
}

// uniqueIndexes returns the unique and exclusion indexes of the would-be
// distributed tables whose key columns leave out project, as table.index,
// and how many such indexes those tables have in all.
func uniqueIndexes(t *testing.T, pool *pgxpool.Pool, distributed []string) (offenders []string, all int) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.relname || '.' || ic.relname,
		       EXISTS (SELECT 1 FROM unnest((i.indkey::int2[])[0:i.indnkeyatts - 1]) k
		               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k WHERE a.attname = 'project')
		FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid
		WHERE c.relnamespace = 'docket'::regnamespace AND NOT c.relispartition AND c.relname = ANY ($1)
		  AND (i.indisunique OR i.indisexclusion)
		ORDER BY 1`, distributed)
	require.NoError(t, err)
	type index struct {
		Name    string
		Project bool
	}
	indexes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[index])
	require.NoError(t, err)
	for _, ix := range indexes {
		if !ix.Project {
			offenders = append(offenders, ix.Name)
		}
	}
	return offenders, len(indexes)
}

// foreignKeys returns the foreign keys that reach a would-be distributed
// table without pairing project with project, as table.constraint, and how
// many foreign keys reach such a table in all. A key from a distributed
// table to a reference table is not counted: every node holds the
// reference table.
func foreignKeys(t *testing.T, pool *pgxpool.Pool, distributed []string) (offenders []string, all int) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.relname || '.' || con.conname,
		       c.relname = ANY ($1) AND EXISTS (
		           SELECT 1 FROM unnest(con.conkey, con.confkey) k(l, r)
		           JOIN pg_attribute la ON la.attrelid = con.conrelid AND la.attnum = k.l
		           JOIN pg_attribute ra ON ra.attrelid = con.confrelid AND ra.attnum = k.r
		           WHERE la.attname = 'project' AND ra.attname = 'project')
		FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid JOIN pg_class f ON f.oid = con.confrelid
		WHERE con.contype = 'f' AND con.connamespace = 'docket'::regnamespace AND con.conparentid = 0
		  AND NOT c.relispartition AND f.relname = ANY ($1)
		ORDER BY 1`, distributed)
	require.NoError(t, err)
	type key struct {
		Name    string
		Project bool
	}
	keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[key])
	require.NoError(t, err)
	for _, k := range keys {
		if !k.Project {
			offenders = append(offenders, k.Name)
		}
	}
	return offenders, len(keys)
}

// transitionTriggers returns the statement triggers with transition tables
// of every docket table but River's, as table.trigger.
func transitionTriggers(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	return collect(t, pool, `
		SELECT c.relname || '.' || tg.tgname
		FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
		WHERE c.relnamespace = 'docket'::regnamespace AND NOT c.relispartition AND c.relname NOT LIKE 'river\_%'
		  AND NOT tg.tgisinternal AND tg.tgparentid = 0 AND tg.tgtype & 1 = 0
		  AND (tg.tgoldtable IS NOT NULL OR tg.tgnewtable IS NOT NULL)
		ORDER BY 1`)
}

// apiFunctions returns the overloads of docket.api_functions with no
// argument named p_project, but for the coordinator functions, by name (by
// signature when the name has overloads), and how many overloads the API
// has in all.
func apiFunctions(t *testing.T, pool *pgxpool.Pool) (offenders []string, all int) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT p.oid::regprocedure::text, p.proname::text,
		       'p_project' = ANY (coalesce(p.proargnames[1:p.pronargs], '{}'))
		FROM pg_proc p JOIN docket.api_functions a ON a.name = p.proname
		WHERE p.pronamespace = 'docket'::regnamespace
		ORDER BY 1`)
	require.NoError(t, err)
	type function struct {
		Signature, Name string
		Project         bool
	}
	functions, err := pgx.CollectRows(rows, pgx.RowToStructByPos[function])
	require.NoError(t, err)
	require.NotEmpty(t, functions, "docket.api_functions lists the API")
	overloads := map[string]int{}
	for _, f := range functions {
		overloads[f.Name]++
	}
	for _, f := range functions {
		if !f.Project && !slices.Contains(coordinatorFunctions, f.Name) {
			if overloads[f.Name] > 1 {
				offenders = append(offenders, strings.TrimPrefix(f.Signature, "docket."))
			} else {
				offenders = append(offenders, f.Name)
			}
		}
	}
	for _, c := range coordinatorFunctions {
		require.Positive(t, overloads[c], "coordinator function %s is not in docket.api_functions: take it out of coordinatorFunctions", c)
	}
	return offenders, len(functions)
}

var (
	// comment is a line comment of SQL or PL/pgSQL.
	comment = regexp.MustCompile(`--[^\n]*`)
	// literal is a string literal, with its doubled quotes.
	literal = regexp.MustCompile(`'(?:[^']|'')*'`)
	// update is an UPDATE statement's head, with its target, or an upsert's
	// DO UPDATE; not FOR UPDATE or a trigger's event.
	update = regexp.MustCompile(`(?i)\b(?:UPDATE\s+(?:ONLY\s+)?([\w."]+)(?:\s+(?:AS\s+)?\w+)?|DO\s+UPDATE)\s+SET\b`)
	// call is a call of a function by its name, schema-qualified or not.
	call = regexp.MustCompile(`\b(\w+)\s*\(`)
)

// statement returns the statement of src around the UPDATE at [at, end):
// back to the previous semicolon or a block's word (THEN, ELSE, LOOP, BEGIN,
// DECLARE) outside every parenthesis the UPDATE is not in, so the WITH
// queries before it are included, and on to the next semicolon.
func statement(src string, at, end int) string {
	start, depth, least := 0, 0, 0
	for i := at - 1; i >= 0 && start == 0; i-- {
		switch src[i] {
		case ')':
			depth++
		case '(':
			depth--
			least = min(least, depth)
		case ';':
			start = i + 1
		default:
			if depth == least && blockWordEndsAt(src, i) {
				start = i + 1
			}
		}
	}
	if stop := strings.IndexByte(src[end:], ';'); stop >= 0 {
		return src[start : end+stop]
	}
	return src[start:]
}

// blockWordEndsAt reports whether a PL/pgSQL word after which a statement
// begins (THEN, ELSE, LOOP, BEGIN, DECLARE) ends at src[i].
func blockWordEndsAt(src string, i int) bool {
	if i+1 < len(src) && isWord(src[i+1]) {
		return false
	}
	for _, w := range []string{"then", "else", "loop", "begin", "declare"} {
		if j := i + 1 - len(w); j >= 0 && strings.EqualFold(src[j:i+1], w) && (j == 0 || !isWord(src[j-1])) {
			return true
		}
	}
	return false
}

// isWord reports whether c may be part of an SQL word.
func isWord(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// scannable is a function's body without its comments, and with every
// string literal emptied.
func scannable(src string) string {
	return literal.ReplaceAllString(comment.ReplaceAllString(src, ""), "''")
}

// volatileUpdates returns the UPDATE statements of function name's body src
// (made scannable) that call one of the volatile functions, as "name: UPDATE
// target, calling names", numbered when there are more than one.
func volatileUpdates(name, src string, volatileNames map[string]bool) []string {
	var hits []string
	for _, m := range update.FindAllStringSubmatchIndex(src, -1) {
		var calls []string
		for _, c := range call.FindAllStringSubmatch(statement(src, m[0], m[1]), -1) {
			if n := strings.ToLower(c[1]); volatileNames[n] && !slices.Contains(calls, n) {
				calls = append(calls, n)
			}
		}
		if len(calls) == 0 {
			continue
		}
		target := "DO UPDATE"
		if m[2] >= 0 {
			target = "UPDATE " + src[m[2]:m[3]]
		}
		slices.Sort(calls)
		hits = append(hits, fmt.Sprintf("%s, calling %s", target, strings.Join(calls, ", ")))
	}
	for i, h := range hits {
		if len(hits) > 1 {
			hits[i] = fmt.Sprintf("%s #%d: %s", name, i+1, h)
		} else {
			hits[i] = name + ": " + h
		}
	}
	return hits
}

// bodies scans the bodies of docket's functions (River's aside), comments
// and string literals left out: the UPDATE statements that call a volatile
// function, as "function: UPDATE target, calling names" (numbered when a
// function has more than one), and the functions that call a node-local
// one, as "function: names" (a function's overloads as one).
func bodies(t *testing.T, pool *pgxpool.Pool) (volatile, local []string) {
	t.Helper()
	ctx := context.Background()
	volatileNames := map[string]bool{}
	for _, n := range collect(t, pool, `
		SELECT DISTINCT proname::text FROM pg_proc
		WHERE provolatile = 'v' AND (pronamespace = 'pg_catalog'::regnamespace
		      OR (pronamespace = 'docket'::regnamespace AND proname NOT LIKE 'river\_%'))
		  AND prorettype <> 'trigger'::regtype`) {
		volatileNames[n] = true
	}
	require.True(t, volatileNames["gen_random_uuid"], "pg_catalog's volatile functions")
	rows, err := pool.Query(ctx, `
		SELECT p.proname::text, p.prosrc
		FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace = 'docket'::regnamespace AND p.proname NOT LIKE 'river\_%' AND l.lanname IN ('sql', 'plpgsql')
		ORDER BY 1, p.oid::regprocedure::text`)
	require.NoError(t, err)
	type function struct{ Name, Source string }
	functions, err := pgx.CollectRows(rows, pgx.RowToStructByPos[function])
	require.NoError(t, err)
	require.NotEmpty(t, functions)
	localCalls := map[string][]string{}
	for _, f := range functions {
		src := scannable(f.Source)
		volatile = append(volatile, volatileUpdates(f.Name, src, volatileNames)...)
		for _, c := range call.FindAllStringSubmatch(src, -1) {
			if n := strings.ToLower(c[1]); slices.Contains(nodeLocal, n) && !slices.Contains(localCalls[f.Name], n) {
				localCalls[f.Name] = append(localCalls[f.Name], n)
			}
		}
	}
	for name, calls := range localCalls {
		slices.Sort(calls)
		local = append(local, name+": "+strings.Join(calls, ", "))
	}
	slices.Sort(volatile)
	slices.Sort(local)
	return volatile, local
}

// The record: what stood in the way when each figure was last set.
var (
	recordedTables = []string{
		"batch_items", "case_events", "job_completions", "job_events", "job_intake_receipts",
		"job_token_rekeys", "job_traces", "lane_dependencies", "lane_events", "match_slots", "plan_deps",
		"plan_steps", "run_budget_events", "run_steps", "run_versions", "schedule_events",
		"schedule_occurrences", "task_events",
	}
	recordedUniqueIndexes = []string{
		"batch_items.batch_items_pkey", "batch_items.batch_items_run_id_key", "batches.batches_pkey",
		"budget_reservations.budget_reservations_job_period", "budget_reservations.budget_reservations_pkey",
		"budget_reservations.budget_reservations_run_period", "case_events.case_events_pkey",
		"case_keys.case_keys_pkey", "cases.cases_pkey", "job_completions.job_completions_pkey",
		"job_events.job_events_pkey", "job_intake_receipts.job_intake_receipts_pkey",
		"job_token_rekeys.job_token_rekeys_pkey", "job_traces.job_traces_pkey", "jobs.jobs_pkey",
		"lane_dependencies.lane_dependencies_pkey", "lane_events.lane_events_pkey",
		"lanes.lanes_id_quorum_key", "lanes.lanes_name_key", "lanes.lanes_pkey",
		"match_slots.match_slots_pkey", "messages.messages_consumed_by_key", "messages.messages_pkey",
		"obligations.obligations_pending_name", "obligations.obligations_pkey", "plan_deps.plan_deps_pkey",
		"plan_steps.plan_steps_pkey", "plans.plans_pkey", "prunes.prunes_pkey", "quorums.quorums_pkey",
		"run_budget_events.run_budget_events_pkey", "run_steps.run_steps_compensation_job_key",
		"run_steps.run_steps_job_key", "run_steps.run_steps_pkey", "run_steps.run_steps_ready_seq_key",
		"run_versions.run_versions_pkey", "runs.runs_pkey", "schedule_events.schedule_events_pkey",
		"schedule_occurrences.schedule_occurrences_identity",
		"schedule_occurrences.schedule_occurrences_pkey", "schedules.schedules_pkey",
		"task_events.task_events_pkey", "tasks.tasks_case_key", "tasks.tasks_pkey", "tasks.tasks_step_key",
		"tasks.tasks_wait_key", "timers.timers_case_name_wake_key", "timers.timers_job_key",
		"timers.timers_pkey", "timers.timers_step_key", "waits.waits_pkey", "waits.waits_satisfied_by_key",
		"waits.waits_step_key", "waits.waits_waiting_name",
	}
	recordedForeignKeys = []string{
		"batch_items.batch_items_batch_id_fkey", "batches.batches_plan_id_fkey",
		"case_events.case_events_case_id_fkey", "lane_dependencies.lane_dependencies_depends_on_fkey",
		"lane_dependencies.lane_dependencies_lane_fkey", "lane_events.lane_events_lane_id_fkey",
		"messages.messages_consumed_by_fkey", "plan_deps.plan_deps_plan_id_after_id_fkey",
		"plan_deps.plan_deps_plan_id_step_id_fkey", "plan_steps.plan_steps_plan_id_fkey",
		"schedule_events.schedule_events_schedule_id_fkey",
		"schedule_occurrences.schedule_occurrences_schedule_id_fkey", "task_events.task_events_task_id_fkey",
		"tasks.tasks_step_fkey", "tasks.tasks_wait_id_fkey", "timers.timers_step_fkey",
		"waits.waits_satisfied_by_fkey", "waits.waits_step_fkey",
	}
	recordedTransitionTriggers = []string{
		"job_events.job_events_check", "job_intake.job_intake_apply", "jobs.jobs_advance_runs",
		"jobs.jobs_record_insert", "jobs.jobs_record_update", "jobs.jobs_release_references", "plan_deps.plan_deps_declared",
		"plan_steps.plan_steps_declared",
	}
	recordedAPIFunctions = []string{
		"batch_admit", "batch_get", "batch_items_needing_attention", "case_close", "case_put_state",
		"case_reopen", "history_upkeep", "job_cancel", "job_census", "job_claim_id", "job_claim_queue",
		"job_complete", "job_complete_many", "job_completion_record", "job_expire_leases", "job_fail",
		"job_intake_take", "job_late_outcome", "job_pin", "job_pruned", "job_reconcile", "job_release",
		"job_renew", "job_resume", "job_retry", "job_trace_put", "job_verify", "lane_create", "lane_merge", "lane_review",
		"lane_set_state", "message_dead_letter_due", "message_offer", "obligation_breach_due",
		"obligation_register", "obligation_settle", "prune_run", "prune_verify", "run_cancel", "run_get",
		"run_replan", "run_resume", "run_steps_of", "run_versions_of", "run_waits_of", "schedule_advance",
		"schedule_break", "schedule_due", "schedule_lock", "schedule_set_status", "schedule_update",
		"task_claim", "task_decide", "task_expire_due", "task_get", "task_history", "task_open",
		"task_release", "timer_fire_due", "timer_set", "wait_expire_due", "wait_register", "wait_withdraw",
	}
	recordedVolatileUpdates = []string{
		"job_expire_leases: UPDATE docket.jobs, calling random",
		"job_late_outcome: UPDATE docket.jobs, calling job_retry_delay",
		"job_take: UPDATE docket.jobs, calling gen_random_uuid",
		"run_unwind: UPDATE docket.run_steps, calling run_enqueue",
		"task_claim: UPDATE docket.tasks, calling gen_random_uuid",
	}
	recordedNodeLocal = []string{
		"batch_lock: pg_advisory_xact_lock", "history_partitions_drop: set_config",
		"history_partitions_ensure: set_config", "job_decoders_register: pg_advisory_xact_lock",
		"job_intake_apply: pg_current_xact_id", "job_intake_take: pg_current_xact_id_if_assigned",
		"job_reference_check: pg_current_xact_id",
		"job_trace_put: pg_current_xact_id", "job_wake_hold: set_config",
		"job_wake_release: pg_notify, set_config", "jobs_advance_runs: set_config", "jobs_record_insert: pg_notify",
		"jobs_record_update: pg_notify",
		"lane_review: set_config", "lane_set_state: set_config", "message_lock_keys: pg_advisory_xact_lock",
		"prune_run: pg_current_xact_id", "pruning: pg_current_xact_id_if_assigned", "queue_set: pg_notify",
		"set_context: set_config",
		"timer_set: pg_advisory_xact_lock", "timer_set_caseless: pg_advisory_xact_lock",
	}
)

// TestTheScanFindsVolatileUpdates shows what the text scan of function
// bodies takes for an UPDATE calling a volatile function, and what not.
func TestTheScanFindsVolatileUpdates(t *testing.T) {
	t.Parallel()
	volatileNames := map[string]bool{"random": true, "gen_random_uuid": true, "clock_timestamp": true}
	for _, c := range []struct {
		src  string
		want []string
	}{
		{"UPDATE docket.t SET a = gen_random_uuid() WHERE b;", []string{"f: UPDATE docket.t, calling gen_random_uuid"}},
		{"UPDATE docket.t AS x SET a = 1; UPDATE docket.u y SET a = random();", []string{"f: UPDATE docket.u, calling random"}},
		{"PERFORM 1 FROM docket.t FOR UPDATE; UPDATE docket.t SET a = 1;", nil},
		{"SELECT random() FROM docket.t FOR NO KEY UPDATE SKIP LOCKED;", nil},
		{"WITH f AS (SELECT random() r) UPDATE docket.t SET a = f.r FROM f;", []string{"f: UPDATE docket.t, calling random"}},
		{"RETURN QUERY WITH a AS (SELECT CASE WHEN x THEN 1 ELSE 2 END v, gen_random_uuid() u), " +
			"b AS (UPDATE docket.t SET u = a.u FROM a RETURNING *) SELECT * FROM b;", []string{"f: UPDATE docket.t, calling gen_random_uuid"}},
		{"IF random() > 0.5 THEN UPDATE docket.t SET a = 1; ELSE UPDATE docket.t SET a = clock_timestamp(); END IF;",
			[]string{"f: UPDATE docket.t, calling clock_timestamp"}},
		{"INSERT INTO docket.t VALUES (1) ON CONFLICT (a) DO UPDATE SET b = clock_timestamp();",
			[]string{"f: DO UPDATE, calling clock_timestamp"}},
		{"RAISE 'UPDATE docket.t SET a = random()'; -- UPDATE docket.t SET a = random()\nRETURN;", nil},
		{"UPDATE docket.t SET a = random(); UPDATE docket.u SET a = gen_random_uuid();",
			[]string{"f #1: UPDATE docket.t, calling random", "f #2: UPDATE docket.u, calling gen_random_uuid"}},
	} {
		require.Equal(t, c.want, volatileUpdates("f", scannable(c.src), volatileNames), "%s", c.src)
	}
}
