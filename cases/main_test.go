package cases_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/projects"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast of every cases test: ops administers projects acme and other;
// app admits cases and enqueues jobs in acme; vic holds case.view on acme;
// sweeper holds case.sweep, job.create and job.claim on acme; inbox delivers
// messages (message.deliver and job.create) to acme; sam holds nothing;
// rival holds case.admit on other only.
const (
	project              = "acme"
	other                = "other"
	ops     access.Actor = "user:ops"
	app     access.Actor = "svc:app"
	vic     access.Actor = "user:vic"
	sweeper access.Actor = "svc:sweeper"
	inbox   access.Actor = "svc:inbox"
	sam     access.Actor = "user:sam"
	rival   access.Actor = "svc:rival"
)

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

type env struct {
	pool  *pgxpool.Pool
	clock *db.FakeClock
	app   *cases.Client
}

// setup returns a fresh migrated database with projects acme and other, the
// cast's grants, and a client acting as app on a fake clock at t0.
func setup(t testing.TB) env {
	t.Helper()
	ctx := context.Background()
	e := env{pool: pgtest.NewDB(t), clock: db.NewFakeClock(t0)}
	for _, p := range []string{project, other} {
		_, err := projects.Create(ctx, e.pool, p, ops, e.clock.Now())
		require.NoError(t, err)
	}
	for _, g := range []access.Grant{
		{Principal: app, Project: project, Capability: access.CaseAdmit},
		{Principal: app, Project: project, Capability: access.JobCreate},
		{Principal: vic, Project: project, Capability: access.CaseView},
		{Principal: sweeper, Project: project, Capability: access.CaseSweep},
		{Principal: sweeper, Project: project, Capability: access.JobCreate},
		{Principal: sweeper, Project: project, Capability: access.JobClaim},
		{Principal: inbox, Project: project, Capability: access.MessageDeliver},
		{Principal: inbox, Project: project, Capability: access.JobCreate},
		{Principal: rival, Project: other, Capability: access.CaseAdmit},
	} {
		_, err := access.Allow(ctx, e.pool, g, ops, e.clock.Now())
		require.NoError(t, err)
	}
	e.app = e.as(t, app)
	return e
}

// as returns a client acting as actor on e's fake clock.
func (e env) as(t testing.TB, actor access.Actor) *cases.Client {
	t.Helper()
	c, err := cases.NewClient(e.pool, cases.Config{Actor: actor, Clock: e.clock})
	require.NoError(t, err)
	return c
}

// admit admits a case of kind supplier.switch in acme with keys, as app.
func (e env) admit(t testing.TB, keys ...cases.Key) cases.Admitted {
	t.Helper()
	a, err := e.app.Admit(context.Background(), cases.Admission{Project: project, Kind: "supplier.switch", Keys: keys})
	require.NoError(t, err)
	return a
}

// key is a correlation key.
func key(ns, v string) cases.Key { return cases.Key{Namespace: ns, Value: v} }

// snapshot renders every case, key, obligation, case event, message, wait,
// timer and job, to show a refusal changed nothing.
func snapshot(t testing.TB, q db.DBTX) string {
	t.Helper()
	var s string
	require.NoError(t, q.QueryRow(context.Background(), `
		SELECT coalesce((SELECT string_agg(x::text, ';' ORDER BY id) FROM docket.cases x), '') || '|' ||
		       coalesce((SELECT string_agg(x::text, ';' ORDER BY id) FROM docket.case_keys x), '') || '|' ||
		       coalesce((SELECT string_agg(x::text, ';' ORDER BY id) FROM docket.obligations x), '') || '|' ||
		       coalesce((SELECT string_agg(x::text, ';' ORDER BY id) FROM docket.case_events x), '') || '|' ||
		       coalesce((SELECT string_agg(x::text, ';' ORDER BY id) FROM docket.messages x), '') || '|' ||
		       coalesce((SELECT string_agg(x::text, ';' ORDER BY id) FROM docket.waits x), '') || '|' ||
		       coalesce((SELECT string_agg(x::text, ';' ORDER BY id) FROM docket.timers x), '') || '|' ||
		       coalesce((SELECT string_agg(x.id::text || x.state, ';' ORDER BY id) FROM docket.jobs x), '')`).Scan(&s))
	return s
}

// raw runs sql by hand, as an operator in psql would: in a transaction of
// its own with the change context set, committed when sql succeeds.
func raw(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) error {
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT docket.set_context('user:ops', '2026-11-03T09:00:00Z')`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
	return db.Translate(err, "raw")
}

// countEvents returns how many events of kind what case id has.
func countEvents(t testing.TB, q db.DBTX, id int64, what cases.EventKind) int {
	t.Helper()
	var n int
	require.NoError(t, q.QueryRow(context.Background(),
		`SELECT count(*) FROM docket.case_events WHERE case_id = $1 AND what = $2`, id, string(what)).Scan(&n))
	return n
}

// fixedCalendar resolves every spec "Nh" to from + N hours and refuses
// anything else: a test calendar, deterministic by construction.
type fixedCalendar struct{}

func (fixedCalendar) Resolve(from time.Time, spec string) (time.Time, error) {
	var h int
	if _, err := fmt.Sscanf(spec, "%dh", &h); err != nil || fmt.Sprintf("%dh", h) != spec {
		return time.Time{}, db.Refuse(db.ErrInvalidArgument, "calendar.resolve", fmt.Sprintf("spec %q is not Nh", spec))
	}
	return from.Add(time.Duration(h) * time.Hour), nil
}

func (fixedCalendar) Digest() string {
	return "sha256:0000000000000000000000000000000000000000000000000000000000000001"
}
