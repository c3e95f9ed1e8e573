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
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast of every cases test, the test kit's and two of its own: ops
// administers projects acme and other; app admits cases and enqueues jobs in
// acme; vic holds case.view on acme; sweeper holds case.sweep, job.create and
// job.claim on acme; inbox delivers messages (message.deliver and job.create)
// to acme; sam holds nothing; rival holds case.admit on other only.
const project, other = testkit.Acme, testkit.Other
const ops, app, vic, sweeper, sam = testkit.Ops, testkit.App, testkit.Vic, testkit.Sweeper, testkit.Sam
const inbox, rival access.Actor = "svc:inbox", "svc:rival"

var t0 = testkit.T0

// byHand is the instant raw's changes are made at: a day after t0.
var byHand = t0.Add(24 * time.Hour)

// grants are the cast's grants.
var grants = testkit.Join(
	testkit.Grants(app, project, access.CaseAdmit, access.JobCreate),
	testkit.Grants(vic, project, access.CaseView),
	testkit.Grants(sweeper, project, access.CaseSweep, access.JobCreate, access.JobClaim),
	testkit.Grants(inbox, project, access.MessageDeliver, access.JobCreate),
	testkit.Grants(rival, other, access.CaseAdmit),
)

type env struct {
	testkit.Env // gives further grants, as ops
	app         *cases.Client
}

// setup returns a fresh migrated database with projects acme and other, the
// cast's grants, and a client acting as app on a fake clock at t0.
func setup(t testing.TB) env {
	t.Helper()
	k := testkit.Setup(t, ops, []string{project, other}, grants...)
	e := env{Env: k}
	e.app = e.as(t, app)
	return e
}

// as returns a client acting as actor on e's fake clock.
func (e env) as(t testing.TB, actor access.Actor) *cases.Client {
	t.Helper()
	c, err := cases.NewClient(e.API, cases.Config{Actor: actor, Clock: e.Clock})
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
// timer and job (its id and state), to show a refusal changed nothing.
func snapshot(t testing.TB, q db.DBTX) string {
	t.Helper()
	return testkit.Snapshot(t, q, "docket.cases", "docket.case_keys", "docket.obligations", "docket.case_events",
		"docket.messages", "docket.waits", "docket.timers", "docket.jobs(id, state)")
}

// raw runs sql by hand, as ops would in psql at byHand: in a transaction of
// its own, committed when sql succeeds.
func raw(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) error {
	return testkit.Raw(ctx, pool, ops, byHand, sql, args...)
}

// sweeperWorker returns a worker acting as sweeper on clock, running reg's
// handlers and quick to start their batches, not started; edit, when not
// nil, shapes the rest of its config.
func sweeperWorker(t testing.TB, e env, clock db.Clock, reg *worker.Registry, edit func(*worker.Config)) *worker.Client {
	t.Helper()
	cfg := worker.Config{
		Actor: sweeper, Registry: reg, Clock: clock, Deployment: "test", Logger: testkit.Logger,
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
	}
	if edit != nil {
		edit(&cfg)
	}
	w, err := worker.NewClient(e.API, cfg)
	require.NoError(t, err)
	return w
}

// jobsChannel is the channel docket notifies, with a job's queue, when a
// transaction that makes the job due now commits: worker.NotifyChannel.
const jobsChannel = "docket_jobs"

// notices listens on jobsChannel on a connection of its own, as a worker
// does.
type notices struct {
	conn  *pgx.Conn
	pool  *pgxpool.Pool // notifies the marks since reads up to
	marks int
}

// listen returns notices listening on e's database from now on.
func listen(t testing.TB, e env) *notices {
	t.Helper()
	ctx := context.Background()
	pc, err := e.API.Acquire(ctx)
	require.NoError(t, err)
	conn := pc.Hijack() // a listening connection is not given back
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, "LISTEN "+jobsChannel)
	require.NoError(t, err)
	return &notices{conn: conn, pool: e.Pool}
}

// since returns the payloads notified on jobsChannel since listen or the
// last call, in commit order. It notifies a mark of its own last and reads up
// to it: notifications arrive in the order their transactions committed, so
// whatever comes before the mark committed before it, and it never waits on
// a notice that is not coming.
func (n *notices) since(t testing.TB) []string {
	t.Helper()
	n.marks++
	mark := fmt.Sprintf("mark %d", n.marks)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := n.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, jobsChannel, mark)
	require.NoError(t, err)
	got := []string{}
	for {
		note, err := n.conn.WaitForNotification(ctx)
		require.NoError(t, err, "waiting for %s", mark)
		if note.Payload == mark {
			return got
		}
		got = append(got, note.Payload)
	}
}

// countEvents returns how many events of kind what case id has.
func countEvents(t testing.TB, q db.DBTX, id int64, what cases.EventType) int {
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
