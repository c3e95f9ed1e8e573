package access_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/lanes"
	"github.com/docket-dev/docket/schedules"
)

// readingCaps are the capabilities a watcher of a project holds: every
// .view one, and those whose holders read what they change.
var readingCaps = []access.Capability{
	access.JobView, access.CaseView, access.LaneView, access.ScheduleView, access.MessageDeliver,
	access.PlanRun, access.BatchRun, access.BudgetManage, access.RetentionManage, access.GrantManage,
}

// sharedRelations hold no project's data, and every login reads them whole:
// the machines (and their views), the capabilities, the error codes, the
// API's list and the migrations' records.
func shared(rel string) bool {
	switch strings.TrimPrefix(rel, "docket.") {
	case "machines", "machine_states", "machine_transitions", "capabilities", "error_codes", "api_functions",
		"goose_db_version", "definitions", "definition_objects":
		return true
	}
	return strings.HasSuffix(rel, "_states") || strings.HasSuffix(rel, "_transitions")
}

// tenancy is a database with the same kinds of rows in two projects, made by
// the owner, and a reader login of each project: its principal holds
// readingCaps there and nothing in the other.
type tenancy struct {
	testkit.Env
	acme, other testkit.Login
}

func setupTenancy(t *testing.T) tenancy {
	t.Helper()
	var grants []access.Grant
	for _, p := range []string{testkit.Acme, testkit.Other} {
		grants = append(grants, testkit.Grants(testkit.Ana, p, access.JobCreate, access.CaseAdmit, access.MessageDeliver,
			access.ScheduleManage, access.QuorumCreate)...)
	}
	grants = append(grants, testkit.Grants(testkit.Vic, testkit.Acme, readingCaps...)...)
	grants = append(grants, testkit.Grants(testkit.Bo, testkit.Other, readingCaps...)...)
	e := testkit.Setup(t, testkit.Ana, []string{testkit.Acme, testkit.Other}, grants...)
	for _, p := range []string{testkit.Acme, testkit.Other} {
		seed(t, e, p)
	}
	return tenancy{Env: e, acme: e.Login(t, testkit.ReaderRole, testkit.Vic), other: e.Login(t, testkit.ReaderRole, testkit.Bo)}
}

// seed makes, as the owner acting as Ana, jobs, a case with a key, an
// obligation and a wait, a message, a schedule and a lane in project p. The
// free text of each row names p.
func seed(t *testing.T, e testkit.Env, p string) {
	t.Helper()
	ctx := t.Context()
	payload := json.RawMessage(fmt.Sprintf(`{"secret": "payload-of-%s"}`, p))
	jc, err := jobs.NewClient(e.Pool, jobs.Config{Project: p, Actor: testkit.Ana, Clock: e.Clock})
	require.NoError(t, err)
	for i := range 2 {
		_, err := jc.Enqueue(ctx, jobs.Spec{Kind: "rls." + p, Payload: payload, IdempotencyKey: fmt.Sprintf("%s-%d", p, i)})
		require.NoError(t, err)
	}
	cc, err := cases.NewClient(e.Pool, cases.Config{Actor: testkit.Ana, Clock: e.Clock})
	require.NoError(t, err)
	key := cases.Key{Namespace: "order", Value: "order-of-" + p}
	c, err := cc.Admit(ctx, cases.Admission{Project: p, Kind: "rls." + p, Keys: []cases.Key{key}})
	require.NoError(t, err)
	_, err = cc.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "reply-of-" + p, Due: e.Clock.Now().Add(time.Hour)})
	require.NoError(t, err)
	_, err = cc.Await(ctx, c.ID, cases.WaitSpec{Name: "wait-of-" + p, Keys: []cases.Key{{Namespace: "reply", Value: "reply-of-" + p}},
		Deadline: e.Clock.Now().Add(time.Hour), OnArrival: cases.Continuation{Kind: "rls." + p}})
	require.NoError(t, err)
	_, err = cc.Deliver(ctx, cases.Delivery{Project: p, Producer: "producer-of-" + p, MessageID: "message-of-" + p,
		Keys: []cases.Key{{Namespace: "stray", Value: "stray-of-" + p}}, Payload: payload})
	require.NoError(t, err)
	sc, err := schedules.NewClient(e.Pool, schedules.Config{Actor: testkit.Ana, Clock: e.Clock})
	require.NoError(t, err)
	_, err = sc.Create(ctx, schedules.Spec{Project: p, Name: "schedule-of-" + p, Cron: "0 9 * * *", Zone: "UTC",
		Job: schedules.Job{Kind: "rls." + p, Payload: payload}, MaxOccurrences: 10})
	require.NoError(t, err)
	lc, err := lanes.NewClient(e.Pool, lanes.Config{Actor: testkit.Ana, Clock: e.Clock})
	require.NoError(t, err)
	q, err := lc.CreateQuorum(ctx, lanes.QuorumSpec{Project: p, Name: "quorum-of-" + p, Conductor: testkit.Ana})
	require.NoError(t, err)
	_, err = lc.Create(ctx, lanes.Spec{Quorum: q.ID, Name: "lane-of-" + p, Branch: "branch-of-" + p, Assignee: testkit.Ana,
		Task: "task-of-" + p})
	require.NoError(t, err)
}

// relations returns every docket table and view but River's, from the
// catalog, and whether it has a project column.
func relations(t *testing.T, pool *pgxpool.Pool) map[string]bool {
	t.Helper()
	rows, err := pool.Query(t.Context(), `
		SELECT c.oid::regclass::text,
		       EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'project' AND NOT a.attisdropped)
		FROM pg_class c
		WHERE c.relnamespace = 'docket'::regnamespace AND c.relkind IN ('r', 'p', 'v') AND c.relname NOT LIKE 'river\_%'`)
	require.NoError(t, err)
	out := map[string]bool{}
	for rows.Next() {
		var rel string
		var project bool
		require.NoError(t, rows.Scan(&rel, &project))
		out[rel] = project
	}
	require.NoError(t, rows.Err())
	require.Greater(t, len(out), 60, "the migrations' tables and the definitions' views are there")
	return out
}

// rowsOf renders every row of rel that pool sees, one string each.
func rowsOf(t *testing.T, pool *pgxpool.Pool, rel, where string) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), "SELECT x::text FROM "+rel+" x "+where)
	require.NoError(t, err, "read %s", rel)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err, "read %s", rel)
	return out
}

// TestEveryRelationShowsOnlyItsProjects walks every docket table and view
// from the catalog, so that new ones are covered without an edit, with the
// same rows made in two projects: the reader login of each project reads
// what it holds grants for and never a row of the other. A relation with a
// project column shows each reader exactly its project's rows, all of them;
// one without shows the two readers rows no one of which the other sees.
func TestEveryRelationShowsOnlyItsProjects(t *testing.T) {
	t.Parallel()
	k := setupTenancy(t)
	seen := map[string]int{}
	for rel, hasProject := range relations(t, k.Pool) {
		if shared(rel) {
			continue
		}
		acme := rowsOf(t, k.acme.Pool, rel, "")
		other := rowsOf(t, k.other.Pool, rel, "")
		for _, r := range acme {
			require.NotContains(t, other, r, "%s: a row both projects' readers see", rel)
		}
		seen[rel] = len(acme)
		if !hasProject {
			continue
		}
		for _, x := range []struct {
			login   testkit.Login
			project string
			got     []string
		}{{k.acme, testkit.Acme, acme}, {k.other, testkit.Other, other}} {
			want := rowsOf(t, k.Pool, rel, "WHERE x.project = '"+x.project+"'")
			require.ElementsMatch(t, want, x.got, "%s: %s's reader sees its project's rows, and only those", rel, x.project)
		}
	}
	// The walk saw data: each kind of row seeded is read by its project's reader.
	for _, rel := range []string{"docket.jobs", "docket.job_events", "docket.cases", "docket.case_keys", "docket.case_events",
		"docket.obligations", "docket.waits", "docket.messages", "docket.schedules", "docket.schedule_events",
		"docket.quorums", "docket.lanes", "docket.lane_events", "docket.grants", "docket.projects",
		"docket.jobs_due", "docket.waits_waiting", "docket.messages_buffered", "docket.lanes_open", "docket.obligations_due"} {
		require.Positive(t, seen[rel], "%s: acme's reader reads acme's rows", rel)
	}
}

// TestAnAppLoginReadsOnlyItsProjects shows an application login, bound to a
// principal that enqueues in acme, reading acme's jobs and their history
// from the tables and views, and none of other's.
func TestAnAppLoginReadsOnlyItsProjects(t *testing.T) {
	t.Parallel()
	k := setupTenancy(t)
	k.Allow(t, testkit.Grants(testkit.App, testkit.Acme, access.JobCreate)...)
	app := k.Login(t, testkit.AppRole, testkit.App)
	for _, rel := range []string{"docket.jobs", "docket.jobs_due"} {
		got := rowsOf(t, app.Pool, rel, "")
		require.ElementsMatch(t, rowsOf(t, k.Pool, rel, "WHERE x.project = 'acme'"), got, "%s: acme's rows", rel)
		require.NotEmpty(t, got, rel)
	}
	require.NotEmpty(t, rowsOf(t, app.Pool, "docket.job_events", ""))
	for _, rel := range []string{"docket.cases", "docket.messages", "docket.schedules", "docket.lanes", "docket.waits"} {
		require.Empty(t, rowsOf(t, app.Pool, rel, ""), "%s: job.create reads no %s", rel, rel)
	}
}

// TestALeakyFunctionSeesNoOtherProject runs, as acme's reader, a cheap
// function that raises a NOTICE of every row it is given in the WHERE of a
// read of every docket table and view: Postgres applies the policies before
// it, so no notice names another project's row.
func TestALeakyFunctionSeesNoOtherProject(t *testing.T) {
	t.Parallel()
	k := setupTenancy(t)
	ctx := t.Context()
	cfg, err := pgx.ParseConfig(k.acme.URL)
	require.NoError(t, err)
	var mu sync.Mutex
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	// The function is dropped before the connection closes: a backend drops
	// its temporary objects as it exits, after the client has gone, and the
	// login role's drop at cleanup must not race it.
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `DROP FUNCTION IF EXISTS pg_temp.leak(text)`)
		_ = conn.Close(context.WithoutCancel(ctx))
	}()
	// Not LEAKPROOF (only a superuser may say so), just cheap, so the
	// planner would like to run it first.
	_, err = conn.Exec(ctx, `CREATE FUNCTION pg_temp.leak(text) RETURNS boolean
		LANGUAGE plpgsql COST 0.0000001 AS $$ BEGIN RAISE NOTICE 'leak: %', $1; RETURN true; END $$`)
	require.NoError(t, err)
	for rel := range relations(t, k.Pool) {
		_, err := conn.Exec(ctx, "SELECT * FROM "+rel+" x WHERE pg_temp.leak(x::text)")
		require.NoError(t, err, rel)
	}
	// The leak works: it saw acme's rows.
	require.NotEmpty(t, notices)
	require.True(t, containsAny(notices, "payload-of-acme"), "the function saw acme's payloads")
	for _, n := range notices {
		require.NotContains(t, n, "-of-other", "a notice names other's data")
		require.NotContains(t, n, "rls.other", "a notice names other's data")
	}
}

func containsAny(ss []string, sub string) bool {
	for _, s := range ss {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestEveryViewIsSecurityInvoker shows every docket view reading as its
// reader (security_invoker), so the tables' policies hold through it: a
// view read as its owner would show every project.
func TestEveryViewIsSecurityInvoker(t *testing.T) {
	t.Parallel()
	k := testkit.Setup(t, testkit.Ana, nil)
	rows, err := k.Pool.Query(t.Context(), `
		SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.relnamespace = 'docket'::regnamespace AND c.relkind = 'v'
		  AND NOT coalesce('security_invoker=true' = ANY (c.reloptions), false)`)
	require.NoError(t, err)
	owners, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, owners, "views read as their owner")
	var open []string
	rows, err = k.Pool.Query(t.Context(), `
		SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.relnamespace = 'docket'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname NOT LIKE 'river\_%'
		  AND NOT c.relrowsecurity`)
	require.NoError(t, err)
	open, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	// The one exception: the intake a bulk enqueue copies into (COPY FROM
	// refuses a table with row-level security). It is empty whenever no
	// statement on it runs, and its statement trigger checks every row as
	// the API does (jobs' intake tests).
	require.Equal(t, []string{"docket.job_intake"}, open, "tables without row-level security")
}
