package projects_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/projects"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast of every projects test: ana and bo create and move projects
// through clients; ops edits the tables by hand, as an operator in psql.
const ana, bo, ops = testkit.Ana, testkit.Bo, testkit.Ops

var t0 = testkit.T0

// byHand is when ops's hand-written SQL runs.
var byHand = time.Date(2026, 11, 2, 12, 0, 0, 0, time.UTC)

// setup returns a fresh migrated database with no project yet, with its
// fake clock at t0, and a client acting as ana on it.
func setup(t testing.TB) (testkit.Env, *projects.Client) {
	t.Helper()
	k := testkit.Setup(t, ana, nil)
	_, pc := testkit.Clients(t, k.Pool, k.Clock, ana)
	return k, pc
}

// snapshot renders every project row and event, to show a refusal changed
// nothing.
func snapshot(t testing.TB, q db.DBTX) string {
	t.Helper()
	return testkit.Snapshot(t, q, "docket.projects", "docket.project_events")
}

// asOperator runs sql by hand as ops at byHand.
func asOperator(ctx context.Context, pool *pgxpool.Pool, sql string) error {
	return testkit.Raw(ctx, pool, ops, byHand, sql)
}
