// Package testkit is the setup docket's own tests share: a fresh migrated
// database per test with its projects and grants, a fake clock at [T0],
// snapshots that show a refusal changed nothing, and SQL run by hand as an
// operator in psql would. It is for docket's tests only; users' tests have
// integration/pgtest.
package testkit

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/projects"
)

// T0 is where every test's fake clock starts: Monday 2 November 2026,
// 09:00 UTC, on a quarter hour.
var T0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

// Env is one test's database and clock.
type Env struct {
	// Pool is logged in as the schema owner: for setup, snapshots and SQL
	// by hand, which no other role may write.
	Pool *pgxpool.Pool
	// API is logged in as a member of docket_app and docket_worker bound to
	// every principal of the kinds tests act as (svc:*, user:*, worker:*),
	// as a service that enqueues and runs its jobs is: the API and the
	// tests' workers run on it.
	API   *pgxpool.Pool
	Clock *db.FakeClock
	// Admin created the projects and gave the grants.
	Admin access.Actor
}

// apiKinds are the principal kinds an env's API login is bound to.
var apiKinds = []access.Actor{"svc:*", "user:*", "worker:*"}

// Setup returns a fresh migrated database with projects created by admin,
// each grant given by admin, a docket_app and docket_worker login for the
// API, and a fake clock at [T0].
func Setup(t testing.TB, admin access.Actor, projectNames []string, grants ...access.Grant) Env {
	t.Helper()
	e := Env{Pool: pgtest.NewDB(t), Clock: db.NewFakeClock(T0), Admin: admin}
	require.NoError(t, populate(context.Background(), e.Pool, e.Clock, admin, projectNames, grants))
	e.API = e.WorkerLogin(t, apiKinds...).Pool
	return e
}

// Allow gives grants, as the env's admin at the clock's now.
func (e Env) Allow(t testing.TB, grants ...access.Grant) {
	t.Helper()
	require.NoError(t, populate(context.Background(), e.Pool, e.Clock, e.Admin, nil, grants))
}

// populate creates projects and gives grants, as admin at clock's now.
func populate(ctx context.Context, pool db.Pool, clock db.Clock, admin access.Actor, projectNames []string, grants []access.Grant) error {
	pc, err := projects.NewClient(pool, projects.Config{Actor: admin, Clock: clock})
	if err != nil {
		return err
	}
	for _, p := range projectNames {
		if _, err := pc.Create(ctx, p); err != nil {
			return err
		}
	}
	ac, err := access.NewClient(pool, access.Config{Actor: admin, Clock: clock})
	if err != nil {
		return err
	}
	for _, g := range grants {
		if _, err := ac.Allow(ctx, g); err != nil {
			return err
		}
	}
	return nil
}

// Grants returns a grant of each of caps to principal on project.
func Grants(principal access.Actor, project string, caps ...access.Capability) []access.Grant {
	out := make([]access.Grant, len(caps))
	for i, c := range caps {
		out[i] = access.Grant{Principal: principal, Project: project, Capability: c}
	}
	return out
}

// Join concatenates lists of grants.
func Join(lists ...[]access.Grant) []access.Grant {
	var out []access.Grant
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// tablePattern is a snapshot's table, with the columns to render or none
// for the whole row: docket.jobs or docket.jobs(id, state).
var tablePattern = regexp.MustCompile(`^([a-z_]+\.[a-z_]+)(?:\(([a-z_, ]+)\))?$`)

// Snapshot renders every row of tables, each "schema.table" or
// "schema.table(col, …)" to render only those columns, in a stable order:
// equal snapshots before and after a refused call show it changed nothing.
func Snapshot(t testing.TB, q db.DBTX, tables ...string) string {
	t.Helper()
	parts := make([]string, len(tables))
	for i, tbl := range tables {
		m := tablePattern.FindStringSubmatch(tbl)
		require.NotNil(t, m, "snapshot table %q", tbl)
		row := "x::text"
		if m[2] != "" {
			cols := strings.Split(m[2], ",")
			for j, c := range cols {
				cols[j] = "x." + strings.TrimSpace(c)
			}
			row = "row(" + strings.Join(cols, ", ") + ")::text"
		}
		parts[i] = fmt.Sprintf("coalesce((SELECT string_agg(%[1]s, ';' ORDER BY %[1]s) FROM %[2]s x), '')", row, m[1])
	}
	var s string
	require.NoError(t, q.QueryRow(context.Background(), "SELECT "+strings.Join(parts, " || '|' || ")).Scan(&s))
	return s
}

// Raw runs sql by hand, as an operator in psql would: in a transaction of
// its own, with the change context set to actor at at, committed when sql
// succeeds. Its error is translated as docket's own are.
func Raw(ctx context.Context, pool *pgxpool.Pool, actor access.Actor, at time.Time, sql string, args ...any) error {
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT docket.set_context($1, $2)`, string(actor), at); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
	return db.Translate(err, "raw")
}

// Listen listens on channel on a connection of pool of its own, and returns
// a function that reads the payloads notified on it since, in order, up to
// a sentinel the function sends itself: what every commit before the call
// notified, with no wait for a time to pass. The connection is released
// with the test.
func Listen(t testing.TB, pool *pgxpool.Pool, channel string) func() []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	t.Cleanup(conn.Release)
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
	require.NoError(t, err)
	return func() []string {
		t.Helper()
		sentinel := fmt.Sprintf("sentinel %p", conn)
		_, err := pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel, sentinel)
		require.NoError(t, err)
		got := []string{}
		for {
			n, err := conn.Conn().WaitForNotification(t.Context())
			require.NoError(t, err)
			if n.Payload == sentinel {
				return got
			}
			got = append(got, n.Payload)
		}
	}
}
