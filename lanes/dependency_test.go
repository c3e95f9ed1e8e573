package lanes_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/lanes"
)

// Dependencies are validated when the lane is created: each must be a lane of
// the same quorum, named once. A refusal names the offending lane and writes
// nothing.
func TestDependenciesValidatedAtCreation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.as(t, cond)
	a := e.lane(t, "a")
	b := e.lane(t, "b", a.ID)
	other, err := e.as(t, cond2).Create(ctx, lanes.Spec{Quorum: e.api.ID, Name: "other", Branch: "main", Assignee: ann, Task: "API-1"})
	require.NoError(t, err)
	before := snapshot(t, e.Pool)

	for _, tc := range []struct {
		name string
		deps []int64
		want error
		lane int64 // the lane the message must name
	}{
		{"another quorum's lane", []int64{a.ID, other.ID}, db.ErrInvalidDependency, other.ID},
		{"an unknown lane", []int64{999999}, db.ErrInvalidDependency, 999999},
		{"a negative id", []int64{-1}, db.ErrInvalidDependency, -1},
		{"a lane named twice", []int64{a.ID, b.ID, a.ID}, db.ErrInvalidDependency, a.ID},
		{"65 lanes", make([]int64, lanes.MaxDependencies+1), db.ErrInvalidArgument, 0},
	} {
		_, err := c.Create(ctx, lanes.Spec{Quorum: e.web.ID, Name: "c", Branch: "main", Assignee: ann, Task: "T", DependsOn: tc.deps})
		require.ErrorIs(t, err, tc.want, tc.name)
		if tc.lane != 0 {
			require.ErrorContains(t, err, name("dependency lane %d ", tc.lane), tc.name)
		}
		require.Equal(t, before, snapshot(t, e.Pool), tc.name)
	}

	// 64 dependencies, at the bound, are accepted.
	var deps []int64
	for i := range lanes.MaxDependencies {
		deps = append(deps, e.lane(t, name("d%d", i)).ID)
	}
	l, err := c.Create(ctx, lanes.Spec{Quorum: e.web.ID, Name: "c", Branch: "main", Assignee: ann, Task: "T", DependsOn: deps})
	require.NoError(t, err)
	require.Equal(t, deps, l.DependsOn)
	require.Equal(t, 1+lanes.MaxDependencies, eventCount(t, e.Pool, l.ID), "a creation event and one per dependency")
	// The bound holds by hand too: a 65th dependency is refused.
	before = snapshot(t, e.Pool)
	err = e.raw(ctx, `INSERT INTO docket.lane_dependencies (lane_id, depends_on) VALUES ($1, $2)`, l.ID, a.ID)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "at most 64")
	require.Equal(t, before, snapshot(t, e.Pool))
	got, err := c.Get(ctx, b.ID)
	require.NoError(t, err)
	require.Equal(t, []int64{a.ID}, got.DependsOn)
}

// A lane depends only on older lanes, so no writer, psql included, can make a
// cycle: not through itself, not through a later lane. A hand-written
// dependency is held to the same rules and recorded.
func TestNoCycleCanBeWritten(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	a := e.lane(t, "a")
	b := e.lane(t, "b", a.ID)
	cc := e.lane(t, "c", b.ID)
	other, err := e.as(t, cond2).Create(ctx, lanes.Spec{Quorum: e.api.ID, Name: "other", Branch: "main", Assignee: ann, Task: "API-1"})
	require.NoError(t, err)
	before := snapshot(t, e.Pool)

	for _, tc := range []struct {
		name           string
		lane, dependOn int64
		says           string
	}{
		{"itself", a.ID, a.ID, "not older than it"},
		{"a cycle a -> c -> b -> a", a.ID, cc.ID, "not older than it"},
		{"a two-cycle a -> b -> a", a.ID, b.ID, "not older than it"},
		{"another quorum", other.ID, a.ID, "not a lane of its quorum"},
		{"an unknown lane", cc.ID, 999999, "not a lane of its quorum"},
	} {
		err := e.raw(ctx, `INSERT INTO docket.lane_dependencies (lane_id, depends_on) VALUES ($1, $2)`, tc.lane, tc.dependOn)
		require.ErrorIs(t, err, db.ErrInvalidDependency, tc.name)
		require.ErrorContains(t, err, name("dependency lane %d is %s", tc.dependOn, tc.says), tc.name)
		require.Equal(t, before, snapshot(t, e.Pool), tc.name)
	}
	// A quorum given by hand must be the lane's own.
	err = e.raw(ctx, `INSERT INTO docket.lane_dependencies (lane_id, depends_on, quorum_id) VALUES ($1, $2, $3)`, cc.ID, a.ID, e.api.ID)
	require.ErrorIs(t, err, db.ErrInvalidDependency)

	// A later, legal dependency by hand is recorded like any change.
	require.NoError(t, e.raw(ctx, `INSERT INTO docket.lane_dependencies (lane_id, depends_on) VALUES ($1, $2)`, cc.ID, a.ID))
	got, err := e.as(t, vic).Get(ctx, cc.ID)
	require.NoError(t, err)
	require.Equal(t, []int64{a.ID, b.ID}, got.DependsOn)
	h, err := e.as(t, vic).History(ctx, cc.ID)
	require.NoError(t, err)
	last := h[len(h)-1]
	require.Equal(t, lanes.EventDependency, last.Type)
	require.Equal(t, name("%d", a.ID), last.To)
	require.Equal(t, ops, last.Actor)
}
