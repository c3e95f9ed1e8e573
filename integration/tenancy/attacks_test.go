package tenancy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/plans"
)

// code is err's SQLSTATE, or "" when it has none.
func code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// exec runs sql on pool in a transaction of its own, after the change
// context (actor at now) when actor is not empty.
func exec(pool *pgxpool.Pool, actor access.Actor, now time.Time, sql string, args ...any) error {
	ctx := context.Background()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if actor != "" {
			if _, err := tx.Exec(ctx, `SELECT docket.set_context($1, $2)`, string(actor), now); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
}

// TestSchedulesAndDecodersCheckTheirCaller: a login with no grant on the
// victim's project cannot finish its schedule, cannot hold its schedule's
// lock by naming the victim's actor, and cannot overwrite its deployment's
// decoders; nothing changes.
func TestSchedulesAndDecodersCheckTheirCaller(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	login := w.Login(t, testkit.AppRole, attacker)
	now := w.Clock.Now()
	before := everything(t, w.Pool)

	err := exec(login.Pool, "", now, `SELECT docket.schedule_advance($1, $2, '{}', '{}', '{}', '{}', $3, NULL, $4, $2)`,
		w.ids["schedule"], now, now.Add(17*time.Hour), string(attacker))
	require.Equal(t, "P0002", code(err), "finishing another project's schedule: %v", err)

	err = exec(login.Pool, "", now, `SELECT docket.schedule_lock($1, $2)`, w.ids["schedule"], string(victim))
	require.Equal(t, "DK009", code(err), "holding another service's schedule lock by naming its actor: %v", err)

	err = exec(login.Pool, "", now, `SELECT docket.job_decoders_register($1, '{attacker.work}', '{1}', $2, $3, '{evil}')`,
		deployment, string(attacker), now)
	require.Equal(t, "DK009", code(err), "overwriting another login's deployment: %v", err)
	require.ErrorContains(t, err, "is registered by login role")

	require.Equal(t, before, everything(t, w.Pool), "refused attacks change nothing")

	// The victim's own login registers for its deployment again.
	own := w.Login(t, testkit.AppRole, victim)
	require.Error(t, exec(own.Pool, "", now, `SELECT docket.job_decoders_register($1, '{victim.work}', '{1}', $2, $3)`,
		deployment, string(victim), now), "another login of the victim's is another login")
	require.NoError(t, exec(w.Pool, "", now, `SELECT docket.job_decoders_register($1, '{victim.work}', '{1}', $2, $3)`,
		deployment, string(victim), now), "the owner may")
}

// openTask opens, as the victim, a task on the victim's case proposed by
// user:ana for user:bob to review, deciding automatically or escalating at
// its deadline as policy says, and returns its id.
func openTask(t *testing.T, w world, key, policy string) int64 {
	t.Helper()
	escalateTo, escalateFor, auto := "{user:boss}", any("1 day"), any(nil)
	if policy == "decide" {
		escalateTo, escalateFor, auto = "{}", nil, "approve"
	}
	var id int64
	require.NoError(t, w.Pool.QueryRow(context.Background(), `
		SELECT id FROM docket.task_open($1, $2, 'Approve', 'ana proposes', '{}', '{}', '{approve,reject}',
			'{user:ana,user:bob}', '{}', 'user:ana', '{}', $3, $4, $5, '{}', $6, $7,
			'victim.decided', 'default', '{}', 1, 5, $8, $9)`,
		w.ids["case"], key, w.Clock.Now().Add(time.Hour), policy, escalateTo, escalateFor, auto, string(victim), w.Clock.Now()).Scan(&id))
	return id
}

// TestOnePersonManyNames: a login bound by name to user:ana and user:bob is
// one person, so bob may neither claim nor answer ana's proposal; nothing
// changes.
func TestOnePersonManyNames(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	task := openTask(t, w, "four-eyes", "escalate")
	both := w.Login(t, testkit.AppRole, "user:ana", "user:bob")
	now := w.Clock.Now()
	before := everything(t, w.Pool)

	err := exec(both.Pool, "", now, `SELECT docket.task_claim($1, '30 minutes', 'user:bob', $2)`, task, now)
	require.Equal(t, "DK008", code(err), "claiming one's own proposal under another name: %v", err)
	err = exec(both.Pool, "", now, `SELECT docket.task_decide($1, 'approve', NULL, 'user:bob', $2)`, task, now)
	require.Equal(t, "DK008", code(err), "approving one's own proposal under another name: %v", err)
	require.ErrorContains(t, err, "the same person")
	var listed int
	require.NoError(t, both.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM docket.task_worklist('victim', 'user:bob', $1, false, NULL, NULL, 100)`, now).Scan(&listed))
	require.Zero(t, listed, "the worklist offers nobody their own proposal")
	require.Equal(t, before, everything(t, w.Pool), "refused attacks change nothing")
}

// TestAGatewayActsForManyPersons: a login bound to the whole kind user:*
// authenticates people itself; through it, bob answers ana's proposal.
func TestAGatewayActsForManyPersons(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	task := openTask(t, w, "gateway", "escalate")
	gateway := w.Login(t, testkit.AppRole, "user:*")
	now := w.Clock.Now()
	err := exec(gateway.Pool, "", now, `SELECT docket.task_decide($1, 'approve', NULL, 'user:ana', $2)`, task, now)
	require.Equal(t, "DK008", code(err), "ana still may not answer her own proposal: %v", err)
	require.NoError(t, exec(gateway.Pool, "", now, `SELECT docket.task_decide($1, 'approve', NULL, 'user:bob', $2)`, task, now))
}

// TestReplansCannotWidenWhatARunEnqueues: a principal holding plan.run but
// not job.create replans the victim's run; a successor bringing in a job
// kind no plan of the run declared is refused, and nothing changes; one
// using only declared kinds is taken.
func TestReplansCannotWidenWhatARunEnqueues(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	const planner access.Actor = "svc:planner"
	w.Allow(t, access.Grant{Principal: planner, Project: victimProject, Capability: access.Capability("plan.run")})
	login := w.Login(t, testkit.AppRole, planner)
	now := w.Clock.Now()
	replan := func(p plans.Plan) error {
		return exec(login.Pool, "", now, `SELECT docket.run_replan($1, $2, $3, $4, 'the supplier changed', $5, $6)`,
			w.ids["run"], plans.Digest(victimPlan), plans.Digest(p), string(plans.Canonical(p)), string(planner), now)
	}
	a := plans.Step{ID: "a", Kind: "victim.step", Args: []plans.Arg{}}
	before := everything(t, w.Pool)
	err := replan(plans.Plan{Steps: []plans.Step{a, {ID: "b", Kind: "victim.evil", After: []string{"a"}, Terminal: true, Args: []plans.Arg{}}}})
	require.Equal(t, "DK009", code(err), "a new kind by plan.run alone: %v", err)
	require.ErrorContains(t, err, "brings in job kind victim.evil")
	err = replan(plans.Plan{Steps: []plans.Step{{ID: "a", Kind: "victim.step", Compensation: "victim.undo", Terminal: true, Args: []plans.Arg{}}}})
	require.Equal(t, "DK009", code(err), "a new compensation kind by plan.run alone: %v", err)
	require.Equal(t, before, everything(t, w.Pool), "refused replans change nothing")

	require.NoError(t, replan(plans.Plan{Steps: []plans.Step{a, {ID: "b", Kind: "victim.step", After: []string{"a"}, Terminal: true, Args: []plans.Arg{}}}}),
		"declared kinds only")
	var evil int
	require.NoError(t, w.Pool.QueryRow(context.Background(), `SELECT count(*) FROM docket.jobs WHERE kind = 'victim.evil'`).Scan(&evil))
	require.Zero(t, evil)
}

// TestOwnerSQLMeetsThePlanRunAndTaskRules: the owner's hand-written SQL
// cannot add a step to a stored plan, repoint a run at another plan without
// a version record, or decide a task automatically as its proposer against
// its policy; each is refused and nothing changes.
func TestOwnerSQLMeetsThePlanRunAndTaskRules(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	ctx := context.Background()
	now := w.Clock.Now()
	other := plans.Plan{Steps: []plans.Step{{ID: "x", Kind: "victim.step", Terminal: true, Args: []plans.Arg{}}}}
	var otherRun, plan, otherPlan int64
	require.NoError(t, w.Pool.QueryRow(ctx, `SELECT id, plan_id FROM docket.run_start('victim', $1, $2, '{}', true, 0, 1, $3, $4)`,
		plans.Digest(other), string(plans.Canonical(other)), string(victim), now).Scan(&otherRun, &otherPlan))
	require.NoError(t, w.Pool.QueryRow(ctx, `SELECT plan_id FROM docket.runs WHERE id = $1`, w.ids["run"]).Scan(&plan))
	const sweeper access.Actor = "svc:sweeper"
	w.Allow(t, access.Grant{Principal: sweeper, Project: victimProject, Capability: access.Capability("case.sweep")},
		access.Grant{Principal: sweeper, Project: victimProject, Capability: access.JobCreate})
	escalating := openTask(t, w, "owner-escalates", "escalate")
	deciding := openTask(t, w, "owner-decides", "decide")
	before := everything(t, w.Pool)

	err := exec(w.Pool, victim, now, `INSERT INTO docket.plan_steps (plan_id, step_id, kind, args, after, terminal, compensation, trusted, repeatable)
		VALUES ($1, 'z', 'victim.evil', '[]', '{}', true, NULL, false, false)`, plan)
	require.Equal(t, "DK015", code(err), "a step injected into a stored plan: %v", err)
	err = exec(w.Pool, victim, now, `INSERT INTO docket.plan_deps (plan_id, step_id, after_id) VALUES ($1, 'a', 'a')`, plan)
	require.Contains(t, []string{"DK015", "23503"}, code(err), "an edge injected into a stored plan: %v", err)

	err = exec(w.Pool, victim, now, `UPDATE docket.runs SET plan_id = $2 WHERE id = $1`, w.ids["run"], otherPlan)
	require.Equal(t, "DK015", code(err), "a run repointed: %v", err)
	err = exec(w.Pool, victim, now, `UPDATE docket.runs SET plan_id = $2, version = version + 1 WHERE id = $1`, w.ids["run"], otherPlan)
	require.Equal(t, "DK015", code(err), "a run repointed with no version record: %v", err)

	decide := `UPDATE docket.tasks SET status = 'decided', decision = 'approve', decided_by = $2, automatic = true,
		settled_at = $3, updated_at = $3 WHERE id = $1`
	err = exec(w.Pool, victim, now.Add(2*time.Hour), decide, escalating, "user:ana", now.Add(2*time.Hour))
	require.Equal(t, "DK008", code(err), "an automatic decision by the proposer: %v", err)
	err = exec(w.Pool, victim, now.Add(2*time.Hour), decide, escalating, string(sweeper), now.Add(2*time.Hour))
	require.Equal(t, "DK015", code(err), "an automatic decision where the policy escalates: %v", err)
	err = exec(w.Pool, victim, now, decide, deciding, string(sweeper), now)
	require.Equal(t, "DK015", code(err), "an automatic decision before the deadline: %v", err)
	err = exec(w.Pool, victim, now.Add(2*time.Hour), decide, deciding, "svc:nobody", now.Add(2*time.Hour))
	require.Equal(t, "DK009", code(err), "an automatic decision by a principal that does not sweep: %v", err)

	require.Equal(t, before, everything(t, w.Pool), "refused owner SQL changes nothing")

	// The sweep makes the decision its policy declares; a sweeper the task
	// excludes (the victim admitted its case) leaves it to another.
	var decided int
	require.NoError(t, w.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.task_expire_due(10, $1, $2) WHERE status = 'decided'`,
		string(victim), now.Add(2*time.Hour)).Scan(&decided))
	require.Zero(t, decided, "an excluded sweeper")
	require.NoError(t, w.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.task_expire_due(10, $1, $2) WHERE status = 'decided'`,
		string(sweeper), now.Add(2*time.Hour)).Scan(&decided))
	require.Equal(t, 1, decided)
}

// TestKeysAreNFC: a key that differs from a held one only in its Unicode
// normalization is refused, not a second case; the tables refuse a key
// not in NFC from the owner's SQL too.
func TestKeysAreNFC(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	own := w.Login(t, testkit.AppRole, victim)
	now := w.Clock.Now()
	nfc, nfd := norm.NFC.String("café"), norm.NFD.String("café")
	require.NotEqual(t, nfc, nfd)
	require.NoError(t, exec(own.Pool, "", now, `SELECT docket.case_admit('victim', 'victim.case', '{customer}', ARRAY[$1], $2, $3)`,
		nfc, string(victim), now))
	before := everything(t, w.Pool)

	err := exec(own.Pool, "", now, `SELECT docket.case_admit('victim', 'victim.case', '{customer}', ARRAY[$1], $2, $3)`,
		nfd, string(victim), now)
	require.Equal(t, "DK010", code(err), "an NFD key: %v", err)
	require.ErrorContains(t, err, "NFC")
	err = exec(own.Pool, "", now, `SELECT docket.message_store('victim', 'victim.producer', 'm-nfd', '{customer}', ARRAY[$1], '{}', NULL, $2, $3)`,
		nfd, string(victim), now)
	require.Equal(t, "DK010", code(err), "a message filed under an NFD key: %v", err)
	err = exec(own.Pool, "", now, `SELECT docket.job_enqueue_one('victim', $2, $3, 'victim.work', 'default', 1::smallint, '{}', 1, $1,
		$3, 5, false, false, '5 minutes', '1 second', '10 minutes', 0.2, NULL, '{}', NULL, 0, 0, NULL)`, nfd, string(victim), now)
	require.Contains(t, []string{"DK010", "23514"}, code(err), "an NFD idempotency key: %v", err)

	var caseID int64
	require.NoError(t, w.Pool.QueryRow(context.Background(), `SELECT case_id FROM docket.case_keys WHERE value = $1`, nfc).Scan(&caseID))
	err = exec(w.Pool, victim, now, `INSERT INTO docket.case_keys (case_id, project, namespace, value, claimed_at)
		VALUES ($1, 'victim', 'other', $2, $3)`, caseID, nfd, now)
	require.Equal(t, "23514", code(err), "the owner's NFD key: %v", err)
	require.ErrorContains(t, err, "case_keys_value_nfc")
	require.Equal(t, before, everything(t, w.Pool), "refused keys change nothing")
}

// TestOperatorActionsStayInTheirProject: a login with every grant on its
// own project cannot pause or resume the victim's queue, retry the victim's
// finished job, or retry or cancel the victim's jobs in bulk, naming the
// victim's project or its own actor; nothing changes. The victim's own
// login can.
func TestOperatorActionsStayInTheirProject(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	ctx := context.Background()
	now := w.Clock.Now()
	v, a := string(victim), string(attacker)
	var queued, cancelled int64
	require.NoError(t, w.Pool.QueryRow(ctx, `SELECT id FROM docket.job_enqueue_one('victim', $1, $2, 'victim.work', 'mail', 1::smallint,
		'{}', 1, '', $2, 5, false, false, '5 minutes', '1 second', '10 minutes', 0.2, NULL, '{}', NULL, 0, 0, NULL)`, v, now).Scan(&queued))
	require.NoError(t, w.Pool.QueryRow(ctx, `SELECT id FROM docket.job_enqueue_one('victim', $1, $2, 'victim.work', 'mail', 1::smallint,
		'{}', 1, '', $2, 5, false, false, '5 minutes', '1 second', '10 minutes', 0.2, NULL, '{}', NULL, 0, 0, NULL)`, v, now).Scan(&cancelled))
	_, err := w.Pool.Exec(ctx, `SELECT docket.job_cancel($1, 'done', $2, $3)`, cancelled, v, now)
	require.NoError(t, err)
	_, err = w.Pool.Exec(ctx, `SELECT docket.queue_pause('victim', 'default', 'hold', $1, $2)`, v, now)
	require.NoError(t, err)
	login := w.Login(t, testkit.AppRole, attacker)
	before := everything(t, w.Pool)

	for _, c := range []struct {
		sql  string
		args []any
		code string
	}{
		{`SELECT docket.queue_resume('victim', 'default', NULL, $1, $2)`, []any{a, now}, "DK009"},
		{`SELECT docket.queue_pause('victim', 'mail', NULL, $1, $2)`, []any{a, now}, "DK009"},
		{`SELECT docket.queue_pause('victim', 'mail', NULL, $1, $2)`, []any{v, now}, "DK009"},
		{`SELECT docket.job_retry($1, $2, $3)`, []any{cancelled, a, now}, "DK009"},
		{`SELECT docket.job_retry($1, $2, $3)`, []any{cancelled, v, now}, "DK009"},
		{`SELECT docket.job_retry_count('victim', '', '', '', NULL, NULL, $1, $2)`, []any{a, now}, "DK009"},
		{`SELECT docket.job_retry_matching('victim', '', '', '', NULL, NULL, 100, $1, $2)`, []any{a, now}, "DK009"},
		{`SELECT docket.job_cancel_count('victim', '', '', '', NULL, NULL, $1, $2)`, []any{a, now}, "DK009"},
		{`SELECT docket.job_cancel_matching('victim', '', '', '', NULL, NULL, 'x', 100, $1, $2)`, []any{a, now}, "DK009"},
		{`SELECT docket.job_cancel_matching('victim', '', '', '', NULL, NULL, 'x', 100, $1, $2)`, []any{v, now}, "DK009"},
	} {
		err := exec(login.Pool, "", now, c.sql, c.args...)
		require.Equal(t, c.code, code(err), "%s as %v: %v", c.sql, c.args[len(c.args)-2], err)
	}
	var n int
	require.NoError(t, login.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.queue_list('victim', $1)`, a).Scan(&n))
	require.Zero(t, n, "the victim's queues are not listed to the attacker")
	require.NoError(t, login.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.queues`).Scan(&n))
	require.Zero(t, n, "nor readable")
	require.NoError(t, login.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.queue_events`).Scan(&n))
	require.Zero(t, n, "nor their history")
	require.Equal(t, before, everything(t, w.Pool), "refused operator actions change nothing")

	// The victim's own login may.
	own := w.Login(t, testkit.AppRole, victim)
	require.NoError(t, exec(own.Pool, "", now, `SELECT docket.job_retry($1, $2, $3)`, cancelled, v, now))
	require.NoError(t, exec(own.Pool, "", now, `SELECT docket.queue_resume('victim', 'default', NULL, $1, $2)`, v, now))
	require.NoError(t, own.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.queue_events`).Scan(&n))
	require.Equal(t, 2, n, "the victim reads its queue's history")
}
