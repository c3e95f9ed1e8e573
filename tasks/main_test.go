package tasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/tasks"
	"github.com/docket-dev/docket/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast: ops administers acme and other; app admits cases, opens tasks
// and runs their continuations in acme (and so is excluded from every
// task of its cases); pat proposes (task.review, excluded by name); root is
// who the work acts for (task.review, excluded as acting-for); rita and rob
// review (task.review); boss is whom escalation adds; sweeper runs the
// sweeps; sam holds nothing; vic views cases.
const project, other = testkit.Acme, testkit.Other
const ops, app, sam, vic, sweeper = testkit.Ops, testkit.App, testkit.Sam, testkit.Vic, testkit.Sweeper
const pat, root, rita, rob, boss access.Actor = "user:pat", "user:root", "user:rita", "user:rob", "user:boss"

var t0 = testkit.T0

var grants = testkit.Join(
	testkit.Grants(app, project, access.CaseAdmit, access.JobCreate, access.JobClaim),
	testkit.Grants(pat, project, access.TaskReview),
	testkit.Grants(root, project, access.TaskReview),
	testkit.Grants(rita, project, access.TaskReview),
	testkit.Grants(rob, project, access.TaskReview),
	testkit.Grants(vic, project, access.CaseView),
	testkit.Grants(sweeper, project, access.CaseSweep, access.JobCreate, access.JobClaim),
	testkit.Grants(rita, other, access.TaskReview),
)

type env struct {
	testkit.Env
	app   *tasks.Client
	cases *cases.Client
}

func setup(t testing.TB) env {
	t.Helper()
	e := env{Env: testkit.Setup(t, ops, []string{project, other}, grants...)}
	e.app = e.as(t, app)
	var err error
	e.cases, err = cases.NewClient(e.API, cases.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	return e
}

func (e env) as(t testing.TB, actor access.Actor) *tasks.Client {
	t.Helper()
	c, err := tasks.NewClient(e.API, tasks.Config{Actor: actor, Clock: e.Clock})
	require.NoError(t, err)
	return c
}

// admit admits a case of acme under key.
func (e env) admit(t testing.TB, key string) cases.Case {
	t.Helper()
	a, err := e.cases.Admit(context.Background(), cases.Admission{Project: project, Kind: "payment.release",
		Keys: []cases.Key{{Namespace: "payment", Value: key}}})
	require.NoError(t, err)
	return a.Case
}

// spec is a four-eyes approval of a payment, proposed by pat for root, due
// a day after the clock's now, escalating to boss two days later.
func spec(e env, key string) tasks.Spec {
	return tasks.Spec{
		Key: key, Title: "Release payment " + key, Summary: "A supplier asks for 4,200 EUR.",
		Proposal:  json.RawMessage(`{"amount_minor": 420000, "currency": "EUR"}`),
		Evidence:  json.RawMessage(`{"invoice": "INV-1"}`),
		Decisions: []string{"approve", "reject"}, AudienceCapabilities: []access.Capability{access.TaskReview},
		Proposer: pat, ActingFor: []access.Actor{root}, Deadline: e.Clock.Now().Add(24 * time.Hour),
		Expiry:       tasks.Escalate([]access.Actor{boss}, nil, 48*time.Hour),
		Continuation: cases.Continuation{Kind: "payment.decided"},
	}
}

// open admits a case under key and opens spec's task on it.
func (e env) open(t testing.TB, key string, edit func(*tasks.Spec)) tasks.Task {
	t.Helper()
	c := e.admit(t, key)
	s := spec(e, key)
	if edit != nil {
		edit(&s)
	}
	o, err := e.app.Open(context.Background(), c.ID, s)
	require.NoError(t, err)
	require.True(t, o.Created)
	return o.Task
}

// sweeperWorker is a worker acting as sweeper with the expiry sweep, not
// started: tests run the sweep with Client.Sweep.
func (e env) sweeperWorker(t testing.TB) *worker.Client {
	t.Helper()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, jobs.MustKind[struct{}]("payment.decided", 1), func(context.Context, *jobs.Typed[struct{}]) error { return nil }))
	w, err := worker.NewClient(e.API, worker.Config{Actor: sweeper, Registry: reg, Clock: e.Clock, Logger: testkit.Logger,
		Deployment: "test", Sweeps: []worker.Sweep{tasks.ExpirySweep(time.Minute)}})
	require.NoError(t, err)
	return w
}

// continuations returns the continuation jobs of task t's wait.
func (e env) continuations(t testing.TB, task tasks.Task) []jobs.Job {
	t.Helper()
	jc, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	var ids []int64
	rows, err := e.Pool.Query(context.Background(), `SELECT id FROM docket.jobs WHERE case_id = $1 AND idempotency_key = $2 ORDER BY id`,
		task.CaseID, fmt.Sprintf("wait:%d:satisfied", task.WaitID))
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	out, err := jc.GetMany(context.Background(), ids)
	require.NoError(t, err)
	return out
}

// snapshot renders every table a task call writes.
func snapshot(t testing.TB, e env) string {
	t.Helper()
	return testkit.Snapshot(t, e.Pool, "docket.tasks", "docket.task_events", "docket.waits(id, status)",
		"docket.messages(id, status)", "docket.jobs(id, state)")
}
