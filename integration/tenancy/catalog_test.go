package tenancy_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/plans"
)

const (
	victimProject   = "victim"
	attackerProject = "attacker"
	victim          = access.Actor("svc:victim")
	attacker        = access.Actor("svc:attacker")
	deployment      = "victim-deploy"
)

// victimPlan is the plan the victim's run and batch run.
var victimPlan = plans.Plan{Steps: []plans.Step{{ID: "a", Kind: "victim.step", Terminal: true, Args: []plans.Arg{}}}}

// records are the ids of one record of each kind in the victim's project.
type records map[string]int64

// world is a database with a victim project holding one record of each
// kind, its principal holding every capability there, and an attacker's
// project where the attacker holds every capability too.
type world struct {
	testkit.Env
	ids records
}

// setupWorld makes the world: the victim's records are made through the
// API by the owner acting as the victim, and its decoders registered by a
// login of its own.
func setupWorld(t *testing.T) world {
	t.Helper()
	ctx := context.Background()
	e := testkit.Setup(t, testkit.Ana, []string{victimProject, attackerProject})
	var caps []string
	rows, err := e.Pool.Query(ctx, `SELECT name FROM docket.capabilities ORDER BY name`)
	require.NoError(t, err)
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		caps = append(caps, c)
	}
	require.NoError(t, rows.Err())
	for _, c := range caps {
		e.Allow(t, access.Grant{Principal: victim, Project: victimProject, Capability: access.Capability(c)},
			access.Grant{Principal: attacker, Project: attackerProject, Capability: access.Capability(c)})
	}
	w := world{Env: e, ids: records{}}
	now := e.Clock.Now()
	one := func(name, sql string, args ...any) {
		t.Helper()
		var id int64
		require.NoError(t, e.Pool.QueryRow(ctx, sql, args...).Scan(&id), "the victim's %s", name)
		w.ids[name] = id
	}
	v := string(victim)
	one("job", `SELECT id FROM docket.job_enqueue_one('victim', $1, $2, 'victim.work', 'default', 1::smallint, '{}', 1, 'victim-key',
		$2, 5, false, false, '5 minutes', '1 second', '10 minutes', 0.2, NULL, '{}', NULL, 0, 0, NULL)`, v, now)
	var token uuid.UUID
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT claim_token FROM docket.job_claim_id($1, '5 minutes', '{victim.work}', '{1}', $2, $3)`,
		w.ids["job"], v, now).Scan(&token), "the victim claims its job")
	one("case", `SELECT id FROM docket.case_admit('victim', 'victim.case', '{order}', '{o-1}', $1, $2)`, v, now)
	one("obligation", `SELECT id FROM docket.obligation_register($1, 'sla', $2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, $3, $4)`,
		w.ids["case"], now.Add(24*time.Hour), v, now)
	one("timer", `SELECT id FROM docket.timer_set($1, 'remind', $2, 'victim.timer', 'default', '{}', 1, 5, $3, $4)`,
		w.ids["case"], now.Add(time.Hour), v, now)
	one("wait", `SELECT id FROM docket.wait_register($1, 'reply', '{order}', '{o-1}', $2, 'victim.arrived', 'default', '{}', 1, 5,
		NULL, NULL, NULL, NULL, NULL, $3, $4)`, w.ids["case"], now.Add(24*time.Hour), v, now)
	one("message", `SELECT id FROM docket.message_store('victim', 'victim.producer', 'm-1', '{order}', '{o-2}', '{}', NULL, $1, $2)`, v, now)
	one("task", `SELECT id FROM docket.task_open($1, 'approve-1', 'Approve', 'the victim''s task', '{}', '{}', '{approve,reject}',
		'{user:reviewer}', '{}', 'user:proposer', '{}', $2, 'escalate', '{user:boss}', '{}', '1 day', NULL,
		'victim.decided', 'default', '{}', 1, 5, $3, $4)`, w.ids["case"], now.Add(24*time.Hour), v, now)
	one("quorum", `SELECT id FROM docket.quorum_create('victim', 'q1', $1, $1, $2)`, v, now)
	one("lane", `SELECT id FROM docket.lane_create($1, 'l1', 'main', $2, 'T-1', '{}', $2, $3)`, w.ids["quorum"], v, now)
	one("schedule", `SELECT id FROM docket.schedule_create('victim', 'nightly', '0 2 * * *', 'UTC', false, 'victim.nightly', 'default',
		'{}', 1, 5, 'one', 10, '1 hour', $1, NULL, NULL, 'the victim''s nightly runs forever', $2, $3, $1)`, now, now.Add(17*time.Hour), v)
	canonical, digest := string(plans.Canonical(victimPlan)), plans.Digest(victimPlan)
	one("run", `SELECT id FROM docket.run_start('victim', $1, $2, '{}', true, 0, 1, $3, $4)`, digest, canonical, v, now)
	one("batch", `SELECT id FROM docket.batch_open('victim', 'b1', $1, $2, $3, $4)`, digest, canonical, v, now)
	_, err = e.Pool.Exec(ctx, `SELECT docket.batch_admit($1, '{item-1}', ARRAY['{}'::jsonb], '{true}', false, $2, $3)`, w.ids["batch"], v, now)
	require.NoError(t, err, "the victim's batch item")
	_, err = e.Pool.Exec(ctx, `SELECT docket.retention_set('victim', '30 days', '30 days', '30 days', '30 days', '30 days', $1, $2)`, v, now)
	require.NoError(t, err, "the victim's retention")
	_, err = e.Pool.Exec(ctx, `SELECT docket.budget_quota_set('victim', 'EUR', '1 month', $2, 1000, $1, $2)`, v, now)
	require.NoError(t, err, "the victim's quota")
	own := e.Login(t, testkit.AppRole, victim)
	_, err = own.Pool.Exec(ctx, `SELECT docket.job_decoders_register($1, '{victim.work}', '{1}', $2, $3)`, deployment, v, now)
	require.NoError(t, err, "the victim's decoders")
	return w
}

// argument is one argument of an API function, from pg_proc.
type argument struct {
	name, typ string
}

// apiFunction is a function of docket.api_functions, with its arguments.
type apiFunction struct {
	signature string
	name      string
	args      []argument
}

// apiFunctions reads every API function and its arguments from the catalog.
func apiFunctions(t *testing.T, pool *pgxpool.Pool) []apiFunction {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT p.oid::regprocedure::text, p.proname::text,
		       coalesce(p.proargnames[1:p.pronargs], '{}'),
		       ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY x(t, i) ORDER BY i)
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		JOIN docket.api_functions a ON a.name = p.proname
		WHERE n.nspname = 'docket'
		ORDER BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	var out []apiFunction
	for rows.Next() {
		var f apiFunction
		var names, types []string
		require.NoError(t, rows.Scan(&f.signature, &f.name, &names, &types))
		for i, typ := range types {
			a := argument{typ: typ}
			if i < len(names) {
				a.name = names[i]
			}
			f.args = append(f.args, a)
		}
		out = append(out, f)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, out, "docket.api_functions lists the API")
	return out
}

// idOf names, by the prefix of a function's name, which record its p_id is.
var idOf = map[string]string{
	"job": "job", "case": "case", "lane": "lane", "message": "message", "obligation": "obligation", "run": "run",
	"schedule": "schedule", "task": "task", "wait": "wait", "batch": "batch", "timer": "timer", "quorum": "quorum",
}

// value derives argument a of function f as a literal for actor, naming the
// victim's records; ok is false when it cannot be derived.
func (w world) value(f apiFunction, a argument, actor access.Actor) (v *string, ok bool) {
	lit := func(s string) (*string, bool) { return &s, true }
	now := w.Clock.Now()
	at := func(d time.Duration) (*string, bool) { return lit(now.Add(d).Format(time.RFC3339Nano)) }
	id := func(name string) (*string, bool) { return lit(fmt.Sprint(w.ids[name])) }
	ids := func(name string) (*string, bool) { return lit(fmt.Sprintf("{%d}", w.ids[name])) }
	null := func() (*string, bool) { return nil, true }
	digest, canonical := plans.Digest(victimPlan), string(plans.Canonical(victimPlan))

	switch a.name + " " + a.typ {
	case "p_actor text":
		return lit(string(actor))
	case "p_now timestamp with time zone", "p_available_at timestamp with time zone", "p_anchor timestamp with time zone",
		"p_starts_at timestamp with time zone", "p_expected_cursor timestamp with time zone":
		return at(0)
	case "p_deadline timestamp with time zone", "p_due_at timestamp with time zone", "p_wake_at timestamp with time zone":
		return at(24 * time.Hour)
	case "p_next_due_at timestamp with time zone", "p_cursor timestamp with time zone":
		return at(17 * time.Hour)
	case "p_ends_at timestamp with time zone", "p_after_deadline timestamp with time zone",
		"p_since timestamp with time zone", "p_until timestamp with time zone":
		return null()
	case "p_id bigint":
		prefix, _, _ := strings.Cut(f.name, "_")
		if rec, known := idOf[prefix]; known {
			return id(rec)
		}
		return nil, false
	case "p_case_id bigint", "p_addressee bigint":
		return id("case")
	case "p_lane_id bigint":
		return id("lane")
	case "p_quorum_id bigint":
		return id("quorum")
	case "p_run bigint":
		return id("run")
	case "p_batch bigint":
		return id("batch")
	case "p_generation bigint":
		return lit("1")
	case "p_prune bigint", "p_expected_version bigint":
		return lit("1")
	case "p_after_id bigint":
		return lit("0")
	case "p_amount bigint", "p_max_call bigint", "p_max_effects bigint", "p_max_money bigint", "p_max_occurrences bigint",
		"p_item_max_call bigint", "p_item_max_effects bigint", "p_item_max_money bigint":
		return lit("100")
	case "p_spent_effects bigint", "p_spent_money bigint":
		return lit("0")
	case "p_spent_effects bigint[]", "p_spent_money bigint[]":
		return lit("{0}")
	case "p_budget jsonb":
		return lit(`{"money": 100, "currency": "EUR"}`)
	case "p_budgets jsonb[]":
		return lit(`{"{\"money\": 100, \"currency\": \"EUR\"}"}`)
	case "p_ids bigint[]":
		return ids("job")
	case "p_case_ids bigint[]":
		return ids("case")
	case "p_lane_ids bigint[]":
		return lit("{0}")
	case "p_depends_on bigint[]":
		return lit("{}")
	case "p_project text":
		return lit(victimProject)
	case "p_kind text", "p_job_kind text":
		return lit("victim.work")
	case "p_arrival_kind text":
		return lit("victim.arrived")
	case "p_kinds text[]":
		return lit("{victim.work}")
	case "p_queue text", "p_job_queue text", "p_arrival_queue text":
		return lit("default")
	case "p_queues text[]":
		return lit("{default}")
	case "p_key text":
		return lit("victim-key")
	case "p_keys text[]":
		return lit("{item-1}")
	case "p_namespaces text[]":
		return lit("{order}")
	case "p_values text[]":
		return lit("{o-1}")
	case "p_name text":
		return lit("sla")
	case "p_deployment text":
		return lit(deployment)
	case "p_principal text":
		return lit(string(attacker))
	case "p_capability text":
		return lit("job.create")
	case "p_role text":
		return lit("docket_app")
	case "p_status text":
		return lit("paused")
	case "p_state text":
		if f.name == "lane_set_state" {
			return lit("in_progress")
		}
		return lit("met")
	case "p_state jsonb", "p_result jsonb", "p_payload jsonb", "p_job_payload jsonb", "p_arrival_payload jsonb",
		"p_input jsonb", "p_proposal jsonb", "p_evidence jsonb":
		return lit("{}")
	case "p_params jsonb", "p_escalation_payload jsonb", "p_timeout_payload jsonb":
		return null()
	case "p_decision text":
		return lit("approve")
	case "p_note text", "p_reason text", "p_diagnostic text", "p_title text", "p_summary text":
		return lit("x")
	case "p_review text":
		return lit("approved")
	case "p_commit text":
		return lit("0123abcd")
	case "p_outcome text":
		return lit("succeeded")
	case "p_class text":
		return lit("retryable")
	case "p_revision text", "p_after text", "p_rule text", "p_calendar_digest text", "p_escalation_kind text", "p_unbounded_reason text",
		"p_escalation_queue text", "p_timeout_kind text", "p_timeout_queue text", "p_auto_decision text",
		"p_compensation_kind text", "p_output text", "p_output_kind text", "p_root text", "p_tracestate text":
		return null()
	case "p_revisions text[]":
		return null()
	case "p_from_projects text[]": // a claim's positions, naming the victim's project
		return lit("{" + victimProject + "}")
	case "p_from_priorities smallint[]", "p_from_ids bigint[]":
		return lit("{1}")
	case "p_from_at timestamp with time zone[]":
		return lit("{" + now.Format(time.RFC3339Nano) + "}")
	case "p_digest text", "p_predecessor text":
		return lit(digest)
	case "p_canonical text":
		return lit(canonical)
	case "p_cron text":
		return lit("0 2 * * *")
	case "p_zone text":
		return lit("UTC")
	case "p_catch_up text":
		return lit("one")
	case "p_producer text":
		return lit("victim.producer")
	case "p_message_id text":
		return lit("m-1")
	case "p_traceparent text":
		return lit("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	case "p_assignee text", "p_conductor text":
		return lit(string(victim))
	case "p_branch text":
		return lit("main")
	case "p_task_ref text":
		return lit("T-1")
	case "p_decisions text[]":
		return lit("{approve}")
	case "p_audience text[]":
		return lit("{" + string(actor) + "}")
	case "p_audience_caps text[]", "p_escalate_caps text[]", "p_acting_for text[]", "p_inputs text[]":
		return lit("{}")
	case "p_escalate_to text[]":
		return lit("{user:boss}")
	case "p_proposer text":
		return lit("user:proposer")
	case "p_on_expiry text":
		return lit("escalate")
	case "p_currency text", "p_item_currency text":
		return lit("EUR")
	case "p_compensation_kinds text[]", "p_outputs text[]", "p_output_kinds text[]", "p_roots text[]", "p_assets text[]":
		return lit("{NULL}")
	case "p_locals timestamp without time zone[]":
		return lit("{2026-11-03 02:00:00}")
	case "p_dues timestamp with time zone[]":
		return lit("{2026-11-03 02:00:00+00}")
	case "p_skipped jsonb[]":
		return lit("{}")
	case "p_folds integer[]":
		return lit("{0}")
	case "p_heads bytea[]":
		return lit(`{"\\x00"}`)
	}
	// What any argument of its type may be.
	switch a.typ {
	case "integer", "smallint":
		return lit("1")
	case "boolean":
		return lit("false")
	case "interval":
		return lit("5 minutes")
	case "double precision":
		return lit("0.2")
	case "uuid":
		return lit(uuid.NewString())
	case "integer[]", "smallint[]":
		return lit("{1}")
	case "boolean[]":
		return lit("{true}")
	case "jsonb[]":
		return lit(`{"{}"}`)
	case "interval[]":
		return lit(`{"5 minutes"}`)
	case "double precision[]":
		return lit("{0.2}")
	case "timestamp with time zone[]":
		return lit("{" + now.Format(time.RFC3339Nano) + "}")
	case "uuid[]":
		return lit("{" + uuid.NewString() + "}")
	}
	return nil, false
}

// sqlstate is a refusal's code, which a function of many elements reports
// for each.
var sqlstate = regexp.MustCompile(`^[0-9A-Z]{5}$`)

// call calls f as actor on pool with the arguments derived for it; refused
// is the error, nothing reports whether every value of every row it
// returned is NULL, false, zero, a refusal's code or what the call was
// given.
func (w world) call(t *testing.T, pool *pgxpool.Pool, f apiFunction, actor access.Actor) (nothing bool, rows [][]any, refused error) {
	t.Helper()
	params := make([]string, len(f.args))
	values := make([]any, len(f.args))
	for i, a := range f.args {
		v, ok := w.value(f, a, actor)
		require.True(t, ok, "%s: argument %s (%s) cannot be derived: say what it is in tenancy's value", f.signature, a.name, a.typ)
		params[i] = fmt.Sprintf("$%d::text::%s", i+1, a.typ)
		if v != nil {
			values[i] = *v
		}
	}
	// What the call was given, element by element: a row may echo it.
	given := map[string]bool{}
	for _, v := range values {
		if v, ok := v.(string); ok {
			given[v] = true
			for _, e := range strings.Split(strings.Trim(v, "{}"), ",") {
				given[e] = true
			}
		}
	}
	sql := fmt.Sprintf("SELECT * FROM docket.%s(%s)", f.name, strings.Join(params, ", "))
	r, err := pool.Query(context.Background(), sql, values...)
	if err != nil {
		return true, nil, err
	}
	defer r.Close()
	nothing = true
	for r.Next() {
		vals, err := r.Values()
		if err != nil {
			return true, nil, err
		}
		rows = append(rows, vals)
		for _, v := range vals {
			switch x := v.(type) {
			case nil:
			case bool:
				nothing = nothing && !x
			case int16, int32, int64:
				nothing = nothing && (fmt.Sprint(x) == "0" || given[fmt.Sprint(x)])
			case string:
				nothing = nothing && (given[x] || sqlstate.MatchString(x))
			default:
				nothing = false
			}
		}
	}
	if err := r.Err(); err != nil {
		return true, nil, err
	}
	return nothing, rows, nil
}

// everything is a digest of every docket table, walked from pg_class: each
// table's name, its row count and an md5 of its rows, and the count of
// every row of them all.
func everything(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
		SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'docket' AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var tbl string
		require.NoError(t, rows.Scan(&tbl))
		tables = append(tables, tbl)
	}
	require.NoError(t, rows.Err())
	require.Greater(t, len(tables), 30, "docket's tables")
	var b strings.Builder
	var total int64
	for _, tbl := range tables {
		var n int64
		var sum string
		require.NoError(t, pool.QueryRow(ctx, fmt.Sprintf(
			`SELECT count(*), coalesce(md5(string_agg(x::text, E'\n' ORDER BY x::text)), '') FROM %s x`, tbl)).Scan(&n, &sum))
		total += n
		fmt.Fprintf(&b, "%s %d %s\n", tbl, n, sum)
	}
	fmt.Fprintf(&b, "rows %d\n", total)
	return b.String()
}

// TestNoFunctionReachesAnotherProject calls every API function as a login
// bound to a principal with no grant on the victim's project, naming the
// victim's records: each is refused or answers nothing, and no docket table
// changes.
func TestNoFunctionReachesAnotherProject(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	login := w.Login(t, testkit.AppRole, attacker)
	before := everything(t, w.Pool)
	for _, f := range apiFunctions(t, w.Pool) {
		nothing, rows, refused := w.call(t, login.Pool, f, attacker)
		if refused == nil {
			require.True(t, nothing, "%s answered the attacker with another project's records: %v", f.signature, rows)
		}
		require.Equal(t, before, everything(t, w.Pool), "%s changed the database (refused: %v)", f.signature, refused)
	}
}

// TestEveryFunctionChecksItsCaller calls every API function as a login
// naming an actor it is not bound to -- the victim's own, which holds every
// grant: each is refused as not permitted (DK009), or not executable by
// the login's group (42501), and no docket table changes.
func TestEveryFunctionChecksItsCaller(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	login := w.Login(t, testkit.AppRole, attacker)
	before := everything(t, w.Pool)
	for _, f := range apiFunctions(t, w.Pool) {
		_, rows, refused := w.call(t, login.Pool, f, victim)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(refused, &pgErr), "%s let a login act as an actor it is not bound to: %v", f.signature, rows)
		require.Contains(t, []string{"DK009", "42501"}, pgErr.Code, "%s: %s", f.signature, pgErr.Message)
	}
	require.Equal(t, before, everything(t, w.Pool), "refused calls change nothing")
}
