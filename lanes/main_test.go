package lanes_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/lanes"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast of every lanes test, the test kit's and three of its own: ops
// administers project acme and may create quorums there; cond conducts quorum
// web, cond2 quorum api; ann is the assignee of the lanes; vic holds lane.view
// on acme; sam holds nothing.
const project, ops, vic, sam = testkit.Acme, testkit.Ops, testkit.Vic, testkit.Sam
const cond, cond2, ann access.Actor = "user:cond", "user:cond2", "user:ann"

// A commit pointer, and another.
const (
	commitA = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	commitB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
)

var t0 = testkit.T0

// t1 is a day after t0: when ops works by hand in these tests.
var t1 = t0.Add(24 * time.Hour)

type env struct {
	testkit.Env              // gives further grants, as ops
	web         lanes.Quorum // conducted by cond
	api         lanes.Quorum // conducted by cond2
}

// setup returns a fresh migrated database with project acme, quorums web
// (cond) and api (cond2), and vic granted lane.view on acme.
func setup(t testing.TB) env {
	t.Helper()
	ctx := context.Background()
	k := testkit.Setup(t, ops, []string{project},
		testkit.Join(testkit.Grants(ops, project, access.QuorumCreate), testkit.Grants(vic, project, access.LaneView))...)
	e := env{Env: k}
	o := e.as(t, ops)
	var err error
	e.web, err = o.CreateQuorum(ctx, lanes.QuorumSpec{Project: project, Name: "web", Conductor: cond})
	require.NoError(t, err)
	e.api, err = o.CreateQuorum(ctx, lanes.QuorumSpec{Project: project, Name: "api", Conductor: cond2})
	require.NoError(t, err)
	return e
}

// as returns a client acting as actor on e's fake clock.
func (e env) as(t testing.TB, actor access.Actor) *lanes.Client {
	t.Helper()
	c, err := lanes.NewClient(e.API, lanes.Config{Actor: actor, Clock: e.Clock})
	require.NoError(t, err)
	return c
}

// lane creates a lane named name in quorum web, assigned to ann, as cond.
func (e env) lane(t testing.TB, name string, deps ...int64) lanes.Lane {
	t.Helper()
	l, err := e.as(t, cond).Create(context.Background(), lanes.Spec{
		Quorum: e.web.ID, Name: name, Branch: "feature/" + name, Assignee: ann, Task: "WEB-" + name, DependsOn: deps,
	})
	require.NoError(t, err)
	return l
}

// drive moves lane id along legal moves, as cond (submit as ann), to
// execution state s and review r.
func (e env) drive(t testing.TB, id int64, s lanes.State, r lanes.Review) lanes.Lane {
	t.Helper()
	ctx := context.Background()
	c, a := e.as(t, cond), e.as(t, ann)
	l, err := c.Get(ctx, id)
	require.NoError(t, err)
	switch r {
	case lanes.NotSubmitted:
	case lanes.Submitted:
		l, err = a.Submit(ctx, id, "")
	case lanes.Approved, lanes.ChangesRequested:
		_, err = a.Submit(ctx, id, "")
		require.NoError(t, err)
		if r == lanes.Approved {
			l, err = c.Approve(ctx, id, "")
		} else {
			l, err = c.RequestChanges(ctx, id, "")
		}
	}
	require.NoError(t, err)
	var path []lanes.State
	switch s {
	case lanes.Open:
	case lanes.InProgress:
		path = []lanes.State{lanes.InProgress}
	case lanes.Done, lanes.Failed:
		path = []lanes.State{lanes.InProgress, s}
	case lanes.Cancelled:
		path = []lanes.State{lanes.Cancelled}
	}
	for _, to := range path {
		l, err = c.SetState(ctx, id, to, "")
		require.NoError(t, err)
	}
	require.Equal(t, s, l.State)
	require.Equal(t, r, l.Review)
	return l
}

// snapshot renders every quorum, lane, dependency and lane event, to show a
// refusal changed nothing.
func snapshot(t testing.TB, q db.DBTX) string {
	t.Helper()
	return testkit.Snapshot(t, q, "docket.quorums", "docket.lanes", "docket.lane_dependencies", "docket.lane_events")
}

// raw runs sql by hand on e's database, as ops at t1.
func (e env) raw(ctx context.Context, sql string, args ...any) error {
	return testkit.Raw(ctx, e.Pool, ops, t1, sql, args...)
}

// eventCount returns how many events lane id has.
func eventCount(t testing.TB, q db.DBTX, id int64) int {
	t.Helper()
	var n int
	require.NoError(t, q.QueryRow(context.Background(), `SELECT count(*) FROM docket.lane_events WHERE lane_id = $1`, id).Scan(&n))
	return n
}

func name(format string, args ...any) string { return fmt.Sprintf(format, args...) }
