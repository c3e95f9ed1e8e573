package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast of every jobs test: ana administers project acme; svc:app enqueues,
// claims, cancels and reconciles there; svc:nobody holds no grant.
const (
	project              = "acme"
	ana     access.Actor = "user:ana"
	app     access.Actor = "svc:app"
	nobody  access.Actor = "svc:nobody"
)

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

type env struct {
	pool   *pgxpool.Pool
	clock  *db.FakeClock
	client *jobs.Client // acts as app
}

// setup returns a fresh migrated database with project acme, app granted every
// job capability there, and a client acting as app on a fake clock at t0.
func setup(t testing.TB) env {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	clock := db.NewFakeClock(t0)
	_, err := projects.Create(ctx, pool, project, ana, clock.Now())
	require.NoError(t, err)
	for _, c := range []access.Capability{access.JobCreate, access.JobClaim, access.JobCancel, access.JobReconcile} {
		_, err := access.Allow(ctx, pool, access.Grant{Principal: app, Project: project, Capability: c}, ana, clock.Now())
		require.NoError(t, err)
	}
	return env{pool: pool, clock: clock, client: clientAs(t, pool, clock, app)}
}

// clientAs returns a client of project acme acting as actor.
func clientAs(t testing.TB, pool *pgxpool.Pool, clock db.Clock, actor access.Actor) *jobs.Client {
	t.Helper()
	c, err := jobs.NewClient(pool, jobs.Config{Project: project, Actor: actor, Clock: clock})
	require.NoError(t, err)
	return c
}

// spec is a minimal valid spec of kind billing.invoice.
func spec(payload string) jobs.Spec {
	return jobs.Spec{Kind: "billing.invoice", Payload: []byte(payload)}
}

// snapshot renders every job and job event, to show a refusal changed nothing.
func snapshot(t testing.TB, q db.DBTX) string {
	t.Helper()
	var s string
	require.NoError(t, q.QueryRow(context.Background(), `
		SELECT coalesce((SELECT string_agg(j::text, ';' ORDER BY id) FROM docket.jobs j), '') || '|' ||
		       coalesce((SELECT string_agg(e::text, ';' ORDER BY job_id, seq) FROM docket.job_events e), '')`).Scan(&s))
	return s
}
