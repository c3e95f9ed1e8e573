package jobs_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast of every jobs test, from the test kit's: ana administers project
// acme; app enqueues, claims, cancels, reconciles and pins there; nobody holds no
// grant.
const project, ana, app, nobody = testkit.Acme, testkit.Ana, testkit.App, testkit.Nobody

var t0 = testkit.T0

type env struct {
	testkit.Env
	client *jobs.Client // acts as app
}

// setup returns a fresh migrated database with project acme and the more
// projects named, app granted every job capability on acme, and a client
// acting as app on a fake clock at t0.
func setup(t testing.TB, more ...string) env {
	t.Helper()
	k := testkit.Setup(t, ana, append([]string{project}, more...),
		testkit.Grants(app, project, access.JobCreate, access.JobClaim, access.JobCancel, access.JobReconcile, access.JobPin,
			access.BudgetManage)...)
	return env{Env: k, client: clientAs(t, k.API, k.Clock, app)}
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
	return testkit.Snapshot(t, q, "docket.jobs", "docket.job_events")
}

// snapshotOf renders jobs ids and their events, like snapshot but for a few
// jobs only: for databases other subtests share.
func snapshotOf(t testing.TB, q db.DBTX, ids ...int64) string {
	t.Helper()
	var s string
	require.NoError(t, q.QueryRow(t.Context(), `
		SELECT coalesce((SELECT string_agg(j::text, ';' ORDER BY id) FROM docket.jobs j WHERE id = ANY($1)), '') || '|' ||
		       coalesce((SELECT string_agg(e::text, ';' ORDER BY job_id, seq) FROM docket.job_events e WHERE job_id = ANY($1)), '')`,
		ids).Scan(&s))
	return s
}
