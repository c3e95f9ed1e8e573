package isolation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/budgets"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/tasks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast: ops administers acme; app admits cases, runs plans and claims
// their jobs; inbox delivers messages; treasurer sets quotas; rita and rob
// review tasks.
const project = testkit.Acme
const ops, app = testkit.Ops, testkit.App
const inbox, treasurer, pat, rita, rob access.Actor = "svc:inbox", "user:treasurer", "user:pat", "user:rita", "user:rob"

var t0 = testkit.T0

var grants = testkit.Join(
	testkit.Grants(app, project, access.CaseAdmit, access.JobCreate, access.JobClaim, access.PlanRun, access.BatchRun),
	testkit.Grants(inbox, project, access.MessageDeliver, access.JobCreate),
	testkit.Grants(treasurer, project, access.BudgetManage, access.PlanRun),
	testkit.Grants(pat, project, access.TaskReview),
	testkit.Grants(rita, project, access.TaskReview),
	testkit.Grants(rob, project, access.TaskReview),
)

// env is one race's database and the clients of its cast, all on the
// test kit's docket_app login.
type env struct {
	testkit.Env
	cases  *cases.Client
	inbox  *cases.Client
	plans  *plans.Client
	jobs   *jobs.Client
	quota  *budgets.Client
	rita   *tasks.Client
	rob    *tasks.Client
	opener *tasks.Client
	batch  *batches.Client
}

func setup(t testing.TB) env {
	t.Helper()
	e := env{Env: testkit.Setup(t, ops, []string{project}, grants...)}
	var err error
	e.cases, err = cases.NewClient(e.API, cases.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	e.inbox, err = cases.NewClient(e.API, cases.Config{Actor: inbox, Clock: e.Clock})
	require.NoError(t, err)
	e.plans, err = plans.NewClient(e.API, plans.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	e.jobs, err = jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	e.quota, err = budgets.NewClient(e.API, budgets.Config{Actor: treasurer, Clock: e.Clock})
	require.NoError(t, err)
	e.batch, err = batches.NewClient(e.API, batches.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	for _, c := range []struct {
		to    **tasks.Client
		actor access.Actor
	}{{&e.rita, rita}, {&e.rob, rob}, {&e.opener, app}} {
		*c.to, err = tasks.NewClient(e.API, tasks.Config{Actor: c.actor, Clock: e.Clock})
		require.NoError(t, err)
	}
	return e
}

// admit admits a case of acme under key.
func (e env) admit(t testing.TB, key string) cases.Case {
	t.Helper()
	a, err := e.cases.Admit(context.Background(), cases.Admission{Project: project, Kind: "supplier.switch",
		Keys: []cases.Key{{Namespace: "supplier", Value: key}}})
	require.NoError(t, err)
	return a.Case
}

// count runs a count query as the owner.
func (e env) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// subject is what a race's two sessions act on, made before they start.
type subject struct {
	c     cases.Case
	task  tasks.Task
	run   int64
	batch int64
	leads [2]jobs.Lease // the leases of two jobs that end at once
}

// A race is one cross-table rule attacked from one side: session 1 takes
// its snapshot (read), session 2 does its write and commits (second),
// then session 1 writes (first) and commits.
type race struct {
	name    string
	prepare func(t testing.TB, e env) subject
	read    func(ctx context.Context, tx pgx.Tx, e env, s subject) error
	second  func(ctx context.Context, e env, s subject) error
	first   func(ctx context.Context, tx pgx.Tx, e env, s subject) error
	// refusal is what session 1 gets under READ COMMITTED, where it waits
	// for session 2 and sees its write; nil when it then succeeds, acting
	// on what session 2 wrote.
	refusal error
	// holds checks the rule's invariant on the rows afterwards.
	holds func(t testing.TB, e env, s subject)
	// snapshot lists the tables a refusal leaves unchanged.
	snapshot []string
}

var caseTables = []string{"docket.cases", "docket.obligations", "docket.waits", "docket.timers", "docket.tasks",
	"docket.case_events", "docket.case_keys", "docket.messages", "docket.runs", "docket.jobs"}

func readCase(ctx context.Context, tx pgx.Tx, e env, s subject) error {
	_, err := e.cases.GetTx(ctx, tx, s.c.ID)
	return err
}

func openCase(t testing.TB, e env) subject { return subject{c: e.admit(t, "S-1")} }

// closedOwesNothing: no closed case has a pending obligation, a waiting
// wait, an open task or a timer that has not fired.
func closedOwesNothing(t testing.TB, e env, _ subject) {
	t.Helper()
	require.Zero(t, e.count(t, `SELECT count(*) FROM docket.cases c JOIN docket.obligations o ON o.case_id = c.id
		WHERE c.status = 'closed' AND o.state = 'pending'`), "a closed case owes an obligation")
	require.Zero(t, e.count(t, `SELECT count(*) FROM docket.cases c JOIN docket.waits w ON w.case_id = c.id
		WHERE c.status = 'closed' AND w.status = 'waiting'`), "a closed case waits")
	require.Zero(t, e.count(t, `SELECT count(*) FROM docket.cases c JOIN docket.tasks k ON k.case_id = c.id
		WHERE c.status = 'closed' AND k.status IN ('pending', 'escalated')`), "a closed case has an open task")
	require.Zero(t, e.count(t, `SELECT count(*) FROM docket.cases c JOIN docket.timers m ON m.case_id = c.id
		JOIN docket.jobs j ON j.id = m.job_id WHERE c.status = 'closed' AND j.state = 'queued'`), "a closed case has a timer set")
	require.Zero(t, e.count(t, `SELECT count(*) FROM docket.cases c JOIN docket.runs r ON r.case_id = c.id
		WHERE c.status = 'closed' AND r.created_at >= c.closed_at`), "a run started on a closed case")
}

func closeCase(ctx context.Context, e env, s subject) error {
	_, err := e.cases.Close(ctx, s.c.ID)
	return err
}

func closeCaseTx(ctx context.Context, tx pgx.Tx, e env, s subject) error {
	_, err := e.cases.CloseTx(ctx, tx, s.c.ID)
	return err
}

func obligation(name string) cases.ObligationSpec {
	return cases.ObligationSpec{Name: name, Due: t0.Add(time.Hour)}
}

func reply(name, key string) cases.WaitSpec {
	return cases.WaitSpec{Name: name, Keys: []cases.Key{{Namespace: "document", Value: key}}, Deadline: t0.Add(48 * time.Hour),
		OnArrival: cases.Continuation{Kind: "supplier.reply"}}
}

func message(id, key string) cases.Delivery {
	return cases.Delivery{Project: project, Producer: "supplier:4711", MessageID: id,
		Keys: []cases.Key{{Namespace: "document", Value: key}}, Payload: json.RawMessage(`{"accepted":true}`)}
}

func taskSpec(key string) tasks.Spec {
	return tasks.Spec{Key: key, Title: "Release payment " + key, Summary: "A supplier asks for 4,200 EUR.",
		Decisions: []string{"approve", "reject"}, AudienceCapabilities: []access.Capability{access.TaskReview},
		Proposer: pat, Deadline: t0.Add(24 * time.Hour), Expiry: tasks.Escalate([]access.Actor{ops}, nil, 48*time.Hour),
		Continuation: cases.Continuation{Kind: "payment.decided"}}
}

// unmatched: no buffered message and waiting wait share a key.
func unmatched(t testing.TB, e env, _ subject) {
	t.Helper()
	require.Zero(t, e.count(t, `SELECT count(*) FROM docket.messages m JOIN docket.waits w ON m.keys @> w.keys
		WHERE m.status = 'buffered' AND w.status = 'waiting'`), "a message and a wait on its keys both left unmatched")
	require.Zero(t, e.count(t, `SELECT count(*) FROM (SELECT satisfied_by FROM docket.waits WHERE satisfied_by IS NOT NULL
		GROUP BY satisfied_by HAVING count(*) > 1) x`), "a message consumed twice")
}

// quotaOf1000 sets acme's EUR quota to 1000 a day; each budget below
// reserves a worst case of 600, so one run fits, two do not. It starts a
// run of the plan without a budget first, so that the plan is stored and
// the race is the quota's alone.
func quotaOf1000(t testing.TB, e env) subject {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, e.quota.SetQuota(ctx, budgets.Quota{Project: project,
		Amount: budgets.Money{Amount: 1000, Currency: "EUR"}, Period: 24 * time.Hour, Anchor: t0.Truncate(24 * time.Hour)}))
	_, err := e.plans.Start(ctx, plans.Start{Project: project, Plan: chain("q"), Input: json.RawMessage(`{"i": 0}`)})
	require.NoError(t, err)
	return openCase(t, e)
}

func budgeted(i int) plans.Start {
	return plans.Start{Project: project, Plan: chain("q"), Input: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)),
		Budget: budgets.Budget{MaxMoney: budgets.Money{Amount: 500, Currency: "EUR"}, MaxCall: 100, MaxParallel: 1}}
}

// withinQuota: the period never holds more than its quota.
func withinQuota(t testing.TB, e env, _ subject) {
	t.Helper()
	require.LessOrEqual(t, e.count(t, `SELECT coalesce(sum(amount), 0) FROM docket.budget_reservations`), 1000)
}

// chain is a one-step plan whose step kind is prefix.pay.
func chain(prefix string) plans.Plan {
	return plans.Plan{Steps: []plans.Step{{ID: "s00", Kind: prefix + ".pay", Args: []plans.Arg{}, Terminal: true}}}
}

// fork is a plan of a and b, then c after both.
func fork() plans.Plan {
	return plans.Plan{Steps: []plans.Step{
		{ID: "a", Kind: "f.work", Args: []plans.Arg{}},
		{ID: "b", Kind: "f.work", Args: []plans.Arg{}},
		{ID: "c", Kind: "f.join", Args: []plans.Arg{}, After: []string{"a", "b"}, Terminal: true},
	}}
}

// forkRunning starts fork and claims the jobs of a and b.
func forkRunning(t testing.TB, e env) subject {
	t.Helper()
	ctx := context.Background()
	r, err := e.plans.Start(ctx, plans.Start{Project: project, Plan: fork(), Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	steps, err := e.plans.Steps(ctx, r.ID)
	require.NoError(t, err)
	s := openCase(t, e)
	s.run = r.ID
	for i, id := range []string{"a", "b"} {
		var jobID int64
		for _, st := range steps {
			if st.StepID == id {
				jobID = st.JobID
			}
		}
		require.NotZero(t, jobID, "step %s has no job", id)
		j, ok, err := e.jobs.ClaimID(ctx, jobID, jobs.ClaimOptions{Lease: time.Hour})
		require.NoError(t, err)
		require.True(t, ok)
		s.leads[i] = j.Lease()
	}
	return s
}

// joined: once a and b succeeded, c was admitted, once.
func joined(t testing.TB, e env, s subject) {
	t.Helper()
	done := e.count(t, `SELECT count(*) FROM docket.run_steps WHERE run_id = $1 AND step_id IN ('a', 'b') AND state = 'succeeded'`, s.run)
	c := e.count(t, `SELECT count(*) FROM docket.run_steps WHERE run_id = $1 AND step_id = 'c'`, s.run)
	if done == 2 {
		require.Equal(t, 1, c, "a and b succeeded and c was not admitted")
	} else {
		require.Zero(t, c)
	}
}

// claimStep claims the job of step id of run.
func claimStep(t testing.TB, e env, run int64, id string) jobs.Lease {
	t.Helper()
	ctx := context.Background()
	steps, err := e.plans.Steps(ctx, run)
	require.NoError(t, err)
	for _, st := range steps {
		if st.StepID == id {
			j, ok, err := e.jobs.ClaimID(ctx, st.JobID, jobs.ClaimOptions{Lease: time.Hour})
			require.NoError(t, err)
			require.True(t, ok)
			return j.Lease()
		}
	}
	t.Fatalf("run %d has no step %s", run, id)
	return jobs.Lease{}
}

// batchOfTwo opens a batch of the one-step plan over items k1 and k2 and
// claims the job of each item's run.
func batchOfTwo(t testing.TB, e env) subject {
	t.Helper()
	ctx := context.Background()
	s := openCase(t, e)
	b, err := e.batch.Open(ctx, project, "pair", chain("b"))
	require.NoError(t, err)
	s.batch = b.ID
	items, err := e.batch.Admit(ctx, b.ID, []batches.Item{{Key: "k1", Input: json.RawMessage(`{}`)},
		{Key: "k2", Input: json.RawMessage(`{}`)}}, true)
	require.NoError(t, err)
	require.Len(t, items, 2)
	for i, it := range items {
		require.NotZero(t, it.RunID, "item %s", it.Key)
		s.leads[i] = claimStep(t, e, it.RunID, "s00")
	}
	return s
}

// countsAgree: the batch's counters are its items' states, and its cursor
// is the contiguous settled prefix.
func countsAgree(t testing.TB, e env, s subject) {
	t.Helper()
	require.Zero(t, e.count(t, `SELECT count(*) FROM docket.batches b WHERE b.id = $1 AND (
		b.in_flight <> (SELECT count(*) FROM docket.batch_items i WHERE i.batch_id = b.id AND i.status = 'reserved')
		OR b.succeeded <> (SELECT count(*) FROM docket.batch_items i WHERE i.batch_id = b.id AND i.status = 'succeeded')
		OR b.cursor IS DISTINCT FROM (SELECT max(i.key) FROM docket.batch_items i WHERE i.batch_id = b.id AND i.status <> 'reserved'
			AND NOT EXISTS (SELECT 1 FROM docket.batch_items r WHERE r.batch_id = b.id AND r.status = 'reserved' AND r.key < i.key))
		OR (b.status = 'completed') <> (b.in_flight = 0))`, s.batch), "the batch's counters or cursor disagree with its items")
}

// openTask admits a case and opens a task on it.
func openTask(t testing.TB, e env) subject {
	t.Helper()
	s := openCase(t, e)
	o, err := e.opener.Open(context.Background(), s.c.ID, taskSpec("T-1"))
	require.NoError(t, err)
	s.task = o.Task
	return s
}

// decidedOnce: a task has at most one decision.
func decidedOnce(t testing.TB, e env, s subject) {
	t.Helper()
	require.LessOrEqual(t, e.count(t, `SELECT count(*) FROM docket.task_events WHERE task_id = $1 AND what = 'decided'`, s.task.ID), 1)
}

var races = []race{
	{
		name: "close over a new obligation", prepare: openCase, read: readCase,
		second: func(ctx context.Context, e env, s subject) error {
			_, err := e.cases.RegisterObligation(ctx, s.c.ID, obligation("ack"))
			return err
		},
		first: closeCaseTx, refusal: db.ErrObligationsOutstanding, holds: closedOwesNothing, snapshot: caseTables,
	},
	{
		name: "obligation on a case just closed", prepare: openCase, read: readCase, second: closeCase,
		first: func(ctx context.Context, tx pgx.Tx, e env, s subject) error {
			_, err := e.cases.RegisterObligationTx(ctx, tx, s.c.ID, obligation("ack"))
			return err
		},
		refusal: db.ErrCaseClosed, holds: closedOwesNothing, snapshot: caseTables,
	},
	{
		name: "close over a new wait", prepare: openCase, read: readCase,
		second: func(ctx context.Context, e env, s subject) error {
			_, err := e.cases.Await(ctx, s.c.ID, reply("reply", "DOC-1"))
			return err
		},
		first: closeCaseTx, holds: closedOwesNothing,
	},
	{
		name: "wait on a case just closed", prepare: openCase, read: readCase, second: closeCase,
		first: func(ctx context.Context, tx pgx.Tx, e env, s subject) error {
			_, err := e.cases.AwaitTx(ctx, tx, s.c.ID, reply("reply", "DOC-1"))
			return err
		},
		refusal: db.ErrCaseClosed, holds: closedOwesNothing, snapshot: caseTables,
	},
	{
		name: "close over a new timer", prepare: openCase, read: readCase,
		second: func(ctx context.Context, e env, s subject) error {
			_, err := e.cases.SleepUntil(ctx, s.c.ID, "chase", t0.Add(time.Hour), cases.Continuation{Kind: "supplier.chase"})
			return err
		},
		first: closeCaseTx, holds: closedOwesNothing,
	},
	{
		name: "timer on a case just closed", prepare: openCase, read: readCase, second: closeCase,
		first: func(ctx context.Context, tx pgx.Tx, e env, s subject) error {
			_, err := e.cases.SleepUntilTx(ctx, tx, s.c.ID, "chase", t0.Add(time.Hour), cases.Continuation{Kind: "supplier.chase"})
			return err
		},
		refusal: db.ErrCaseClosed, holds: closedOwesNothing, snapshot: caseTables,
	},
	{
		name: "close over a new task", prepare: openCase, read: readCase,
		second: func(ctx context.Context, e env, s subject) error {
			_, err := e.opener.Open(ctx, s.c.ID, taskSpec("T-1"))
			return err
		},
		first: closeCaseTx, holds: closedOwesNothing,
	},
	{
		name: "task on a case just closed", prepare: openCase, read: readCase, second: closeCase,
		first: func(ctx context.Context, tx pgx.Tx, e env, s subject) error {
			_, err := e.opener.OpenTx(ctx, tx, s.c.ID, taskSpec("T-1"))
			return err
		},
		refusal: db.ErrCaseClosed, holds: closedOwesNothing, snapshot: caseTables,
	},
	{
		name: "run on a case just closed", prepare: openCase, read: readCase, second: closeCase,
		first: func(ctx context.Context, tx pgx.Tx, e env, s subject) error {
			_, err := e.plans.StartTx(ctx, tx, plans.Start{Project: project, Plan: chain("r"), Input: json.RawMessage(`{}`), CaseID: s.c.ID})
			return err
		},
		refusal: db.ErrCaseClosed, holds: closedOwesNothing, snapshot: caseTables,
	},
	{
		name: "delivery after a new wait", prepare: openCase, read: readCase,
		second: func(ctx context.Context, e env, s subject) error {
			_, err := e.cases.Await(ctx, s.c.ID, reply("reply", "DOC-7"))
			return err
		},
		first: func(ctx context.Context, tx pgx.Tx, e env, s subject) error {
			_, err := e.inbox.DeliverTx(ctx, tx, message("m-1", "DOC-7"))
			return err
		},
		holds: unmatched,
	},
	{
		name: "wait after a new delivery", prepare: openCase, read: readCase,
		second: func(ctx context.Context, e env, s subject) error {
			_, err := e.inbox.Deliver(ctx, message("m-1", "DOC-7"))
			return err
		},
		first: func(ctx context.Context, tx pgx.Tx, e env, s subject) error {
			_, err := e.cases.AwaitTx(ctx, tx, s.c.ID, reply("reply", "DOC-7"))
			return err
		},
		holds: unmatched,
	},
	{
		name: "quota over a new reservation", prepare: quotaOf1000, read: readCase,
		second: func(ctx context.Context, e env, s subject) error {
			_, err := e.plans.Start(ctx, budgeted(1))
			return err
		},
		first: func(ctx context.Context, tx pgx.Tx, e env, s subject) error {
			_, err := e.plans.StartTx(ctx, tx, budgeted(2))
			return err
		},
		refusal: db.ErrNotPermitted, holds: withinQuota,
		snapshot: []string{"docket.runs", "docket.budget_reservations", "docket.jobs", "docket.run_steps"},
	},
	{
		name: "join over a sibling's outcome", prepare: forkRunning, read: readCase,
		second: func(ctx context.Context, e env, s subject) error {
			_, err := e.jobs.Complete(ctx, s.leads[0], json.RawMessage(`{}`), nil)
			return err
		},
		first: func(ctx context.Context, tx pgx.Tx, e env, s subject) error {
			_, err := e.jobs.CompleteTx(ctx, tx, s.leads[1], json.RawMessage(`{}`))
			return err
		},
		holds: joined,
	},
	{
		name: "batch item settling beside another", prepare: batchOfTwo, read: readCase,
		second: func(ctx context.Context, e env, s subject) error {
			_, err := e.jobs.Complete(ctx, s.leads[0], json.RawMessage(`{}`), nil)
			return err
		},
		first: func(ctx context.Context, tx pgx.Tx, e env, s subject) error {
			_, err := e.jobs.CompleteTx(ctx, tx, s.leads[1], json.RawMessage(`{}`))
			return err
		},
		holds: countsAgree,
	},
	{
		name: "decision over a decision", prepare: openTask,
		read: func(ctx context.Context, tx pgx.Tx, e env, s subject) error {
			_, err := e.rob.GetTx(ctx, tx, s.task.ID)
			return err
		},
		second: func(ctx context.Context, e env, s subject) error {
			_, err := e.rita.Decide(ctx, s.task.ID, "approve", "")
			return err
		},
		first: func(ctx context.Context, tx pgx.Tx, e env, s subject) error {
			_, err := e.rob.DecideTx(ctx, tx, s.task.ID, "reject", "")
			return err
		},
		refusal: db.ErrAlreadyAnswered, holds: decidedOnce,
		snapshot: []string{"docket.tasks", "docket.task_events", "docket.waits", "docket.messages", "docket.jobs"},
	},
}

var levels = []struct {
	name string
	iso  pgx.TxIsoLevel
}{
	{"read committed", pgx.ReadCommitted},
	{"repeatable read", pgx.RepeatableRead},
	{"serializable", pgx.Serializable},
}

// session1 runs one attempt of session 1 at level iso: its snapshot, then
// (after between, which may be nil) its write and its commit.
func session1(ctx context.Context, e env, r race, s subject, iso pgx.TxIsoLevel, between func() error) error {
	tx, err := e.API.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := r.read(ctx, tx, e, s); err != nil {
		return fmt.Errorf("first read: %w", err)
	}
	if between != nil {
		if err := between(); err != nil {
			return fmt.Errorf("session 2: %w", err)
		}
	}
	if err := r.first(ctx, tx, e, s); err != nil {
		return err
	}
	return db.Translate(tx.Commit(ctx), "commit")
}

// TestEveryCrossTableRuleHoldsAtEveryIsolationLevel races each rule's two
// sides with session 2's commit between session 1's snapshot and its write:
// under READ COMMITTED session 1 waits and sees it (a refusal, or it acts
// on it); under REPEATABLE READ and SERIALIZABLE it fails with
// db.ErrSerialization and writes nothing, and run again it decides as READ
// COMMITTED does. The rule's invariant holds on the rows in every case.
func TestEveryCrossTableRuleHoldsAtEveryIsolationLevel(t *testing.T) {
	t.Parallel()
	for _, r := range races {
		for _, lvl := range levels {
			t.Run(r.name+"/"+lvl.name, func(t *testing.T) {
				t.Parallel()
				e := setup(t)
				ctx := t.Context()
				s := r.prepare(t, e)
				var before string
				err := session1(ctx, e, r, s, lvl.iso, func() error {
					if err := r.second(ctx, e, s); err != nil {
						return err
					}
					if r.snapshot != nil {
						before = testkit.Snapshot(t, e.Pool, r.snapshot...)
					}
					return nil
				})
				r.holds(t, e, s)
				if lvl.iso == pgx.ReadCommitted {
					if r.refusal == nil {
						require.NoError(t, err)
						return
					}
					require.ErrorIs(t, err, r.refusal)
					require.Equal(t, before, testkit.Snapshot(t, e.Pool, r.snapshot...), "a refusal changed something")
					return
				}
				require.ErrorIs(t, err, db.ErrSerialization)
				require.True(t, db.Retryable(err))
				if r.snapshot != nil {
					require.Equal(t, before, testkit.Snapshot(t, e.Pool, r.snapshot...), "a serialization failure changed something")
				}
				// Run again from its first read, session 1 sees session
				// 2's commit and decides as under READ COMMITTED.
				err = session1(ctx, e, r, s, lvl.iso, nil)
				r.holds(t, e, s)
				if r.refusal == nil {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, r.refusal)
					require.False(t, db.Retryable(err))
				}
			})
		}
	}
}

// TestAQuotaOfNNeverEndsOverN releases admissions together against a quota
// of 3,000 a day, each with a worst case of 600, at each isolation level:
// every transaction takes its snapshot before the barrier, and one that
// fails with db.ErrSerialization is run again from its first read. In every
// round exactly five are admitted, the others refused with
// db.ErrNotPermitted, and the period never holds more than its quota.
func TestAQuotaOfNNeverEndsOverN(t *testing.T) {
	t.Parallel()
	const admissions, rounds, quota, fits = 10, 3, 3000, 5
	for _, lvl := range levels {
		t.Run(lvl.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx := t.Context()
			anchor := t0.Truncate(24 * time.Hour)
			require.NoError(t, e.quota.SetQuota(ctx, budgets.Quota{Project: project,
				Amount: budgets.Money{Amount: quota, Currency: "EUR"}, Period: 24 * time.Hour, Anchor: anchor}))
			_, err := e.plans.Start(ctx, plans.Start{Project: project, Plan: chain("q"), Input: json.RawMessage(`{}`)})
			require.NoError(t, err)
			c := e.admit(t, "Q-1")
			// A login pool of its own, with a connection for each admission
			// (the env's has four).
			cfg := e.API.Config().Copy()
			cfg.MaxConns = admissions + 2
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			retried := 0
			for round := range rounds {
				release := make(chan struct{})
				var ready, done sync.WaitGroup
				errs := make([]error, admissions)
				tries := make([]int, admissions)
				for i := range admissions {
					ready.Add(1)
					done.Add(1)
					go func() {
						defer done.Done()
						waited := false
						barrier := func() {
							if !waited {
								waited = true
								ready.Done()
								<-release
							}
						}
						defer barrier()
						for attempt := 0; ; attempt++ {
							tries[i]++
							errs[i] = admitOnce(ctx, e, pool, c.ID, lvl.iso, round*admissions+i, barrier)
							if !db.Retryable(errs[i]) || attempt == 50 {
								return
							}
						}
					}()
				}
				ready.Wait()
				close(release)
				done.Wait()
				admitted := 0
				for i, err := range errs {
					retried += tries[i] - 1
					if err == nil {
						admitted++
						continue
					}
					require.ErrorIs(t, err, db.ErrNotPermitted, "admission %d", i)
				}
				require.Equal(t, fits, admitted, "round %d", round)
				held := e.count(t, `SELECT coalesce(sum(amount), 0) FROM docket.budget_reservations WHERE period_start = $1`,
					anchor.Add(time.Duration(round)*24*time.Hour))
				require.Equal(t, quota, held, "round %d", round)
				e.Clock.Advance(24 * time.Hour)
			}
			t.Logf("%s: %d admissions in %d rounds, %d attempts run again after a serialization failure", lvl.name,
				admissions*rounds, rounds, retried)
		})
	}
}

// admitOnce runs one admission at level iso in a transaction of its own on
// pool (e's API login): a first read (its snapshot), then barrier, then the
// budgeted start and the commit.
func admitOnce(ctx context.Context, e env, pool *pgxpool.Pool, caseID int64, iso pgx.TxIsoLevel, i int, barrier func()) error {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := e.cases.GetTx(ctx, tx, caseID); err != nil {
		return err
	}
	barrier()
	if _, err := e.plans.StartTx(ctx, tx, budgeted(i)); err != nil {
		return err
	}
	return db.Translate(tx.Commit(ctx), "commit")
}
