package schedules_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
	"github.com/docket-dev/docket/schedules"
	"github.com/docket-dev/docket/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast of every schedules test: ops administers projects acme and
// other; app manages schedules and creates jobs in acme; vic holds
// schedule.view on acme; sweeper holds schedule.sweep, job.create and
// job.claim on acme; sam holds nothing; half holds schedule.manage on acme
// but not job.create.
const (
	project              = "acme"
	other                = "other"
	ops     access.Actor = "user:ops"
	app     access.Actor = "svc:app"
	vic     access.Actor = "user:vic"
	sweeper access.Actor = "svc:sweeper"
	sam     access.Actor = "user:sam"
	half    access.Actor = "svc:half"
)

// t0 is a Monday, 09:00 UTC, on a quarter hour.
var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

type env struct {
	pool  *pgxpool.Pool
	clock *db.FakeClock
	app   *schedules.Client
}

func setup(t testing.TB) env {
	t.Helper()
	ctx := context.Background()
	e := env{pool: pgtest.NewDB(t), clock: db.NewFakeClock(t0)}
	for _, p := range []string{project, other} {
		_, err := projects.Create(ctx, e.pool, p, ops, e.clock.Now())
		require.NoError(t, err)
	}
	for _, g := range []access.Grant{
		{Principal: app, Project: project, Capability: access.ScheduleManage},
		{Principal: app, Project: project, Capability: access.JobCreate},
		{Principal: vic, Project: project, Capability: access.ScheduleView},
		{Principal: sweeper, Project: project, Capability: access.ScheduleSweep},
		{Principal: sweeper, Project: project, Capability: access.JobCreate},
		{Principal: sweeper, Project: project, Capability: access.JobClaim},
		{Principal: half, Project: project, Capability: access.ScheduleManage},
	} {
		_, err := access.Allow(ctx, e.pool, g, ops, e.clock.Now())
		require.NoError(t, err)
	}
	e.app = e.as(t, app)
	return e
}

func (e env) as(t testing.TB, actor access.Actor) *schedules.Client {
	t.Helper()
	c, err := schedules.NewClient(e.pool, schedules.Config{Actor: actor, Clock: e.clock})
	require.NoError(t, err)
	return c
}

// Tick is the scheduled jobs' payload in these tests.
type Tick struct {
	N int `json:"n"`
}

var tickKind = jobs.MustKind[Tick]("report.tick", 1)

var testLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// spec is a schedule of tick jobs in acme.
func spec(name, cron, zone string) schedules.Spec {
	return schedules.Spec{Project: project, Name: name, Cron: cron, Zone: zone,
		Job: schedules.Job{Kind: tickKind.Name(), Payload: json.RawMessage(`{"n": 1}`)}}
}

// sweeperWorker returns a worker acting as sweeper on e's clock with the
// schedule sweep, not started: tests run its sweep with Worker.Sweep.
func (e env) sweeperWorker(t testing.TB, limit int) *worker.Worker {
	t.Helper()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, tickKind, func(context.Context, *jobs.Typed[Tick]) error { return nil }))
	w, err := worker.New(e.pool, worker.Config{
		Actor: sweeper, Registry: reg, Clock: e.clock, Deployment: "test", Logger: testLogger, SweepLimit: limit,
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
	var s string
	require.NoError(t, q.QueryRow(context.Background(), `
		SELECT coalesce((SELECT string_agg(x::text, ';' ORDER BY id) FROM docket.schedules x), '') || '|' ||
		       coalesce((SELECT string_agg(x::text, ';' ORDER BY id) FROM docket.schedule_occurrences x), '') || '|' ||
		       coalesce((SELECT string_agg(x::text, ';' ORDER BY id) FROM docket.schedule_events x), '') || '|' ||
		       coalesce((SELECT string_agg(x.id::text || x.state, ';' ORDER BY id) FROM docket.jobs x), '')`).Scan(&s))
	return s
}
