package schedules_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/schedules"
	"github.com/docket-dev/docket/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast of every schedules test, the test kit's and one of its own: ops
// administers projects acme and other; app manages schedules and creates jobs
// in acme; vic holds schedule.view on acme; sweeper holds schedule.sweep,
// job.create and job.claim on acme; sam holds nothing; half holds
// schedule.manage on acme but not job.create.
const project, other = testkit.Acme, testkit.Other
const ops, app, vic, sweeper, sam = testkit.Ops, testkit.App, testkit.Vic, testkit.Sweeper, testkit.Sam
const half access.Actor = "svc:half"

var t0 = testkit.T0

type env struct {
	testkit.Env
	app *schedules.Client
}

// setup returns a fresh migrated database with projects acme and other, the
// cast's grants on acme, and a client acting as app on a fake clock at t0.
func setup(t testing.TB) env {
	t.Helper()
	k := testkit.Setup(t, ops, []string{project, other}, testkit.Join(
		testkit.Grants(app, project, access.ScheduleManage, access.JobCreate),
		testkit.Grants(vic, project, access.ScheduleView),
		testkit.Grants(sweeper, project, access.ScheduleSweep, access.JobCreate, access.JobClaim),
		testkit.Grants(half, project, access.ScheduleManage),
	)...)
	e := env{Env: k}
	e.app = e.as(t, app)
	return e
}

// as returns a client acting as actor on e's fake clock.
func (e env) as(t testing.TB, actor access.Actor) *schedules.Client {
	t.Helper()
	c, err := schedules.NewClient(e.API, schedules.Config{Actor: actor, Clock: e.Clock})
	require.NoError(t, err)
	return c
}

// Tick is the scheduled jobs' payload in these tests.
type Tick struct {
	N int `json:"n"`
}

var tickKind = jobs.MustKind[Tick]("report.tick", 1)

// spec is a schedule of tick jobs in acme.
func spec(name, cron, zone string) schedules.Spec {
	return schedules.Spec{Project: project, Name: name, Cron: cron, Zone: zone,
		Job:       schedules.Job{Kind: tickKind.Name(), Payload: json.RawMessage(`{"n": 1}`)},
		Unbounded: true, UnboundedReason: testReason}
}

// testReason is why the tests' schedules run forever.
const testReason = "runs for as long as the test"

// bounded makes s a bounded schedule: it drops Unbounded and its reason, for
// a test that sets End or MaxOccurrences.
func bounded(s *schedules.Spec) {
	s.Unbounded, s.UnboundedReason = false, ""
}

// sweeperWorker returns a worker client acting as sweeper on e's clock with
// the schedule sweep, not started: tests run its sweep with Client.Sweep.
func (e env) sweeperWorker(t testing.TB, limit int) *worker.Client {
	t.Helper()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, tickKind, func(context.Context, *jobs.Typed[Tick]) error { return nil }))
	w, err := worker.NewClient(e.API, worker.Config{
		Actor: sweeper, Registry: reg, Clock: e.Clock, Deployment: "test", Logger: testkit.Logger, SweepLimit: limit,
		Sweeps: []worker.Sweep{schedules.Sweep(time.Minute)},
	})
	require.NoError(t, err)
	return w
}

// runs returns schedule id's materialized occurrences as occ.
func (e env) runs(t testing.TB, id int64) []occ {
	t.Helper()
	rs, err := e.app.Runs(context.Background(), id)
	require.NoError(t, err)
	out := make([]occ, len(rs))
	for i, r := range rs {
		out[i] = occ{r.Local.Format("2006-01-02 15:04"), r.Fold, r.At.Format(time.RFC3339)}
	}
	return out
}

// snapshot renders every schedule, occurrence, schedule event and job, to
// show a refusal changed nothing.
func snapshot(t testing.TB, q db.DBTX) string {
	t.Helper()
	return testkit.Snapshot(t, q, "docket.schedules", "docket.schedule_occurrences", "docket.schedule_events", "docket.jobs(id, state)")
}
