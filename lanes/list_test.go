package lanes_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/lanes"
)

// List returns exactly the lanes the actor may read, silently: all of them
// with lane.view, else those of the quorums it conducts and those assigned
// to it; nothing, and no error, to a stranger.
func TestListShowsWhatEachRoleMaySee(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const bo access.Actor = "user:bo"
	mk := func(c *lanes.Client, q lanes.Quorum, n string, assignee access.Actor) int64 {
		l, err := c.Create(ctx, lanes.Spec{Quorum: q.ID, Name: n, Branch: "b/" + n, Assignee: assignee, Task: "T-" + n})
		require.NoError(t, err)
		return l.ID
	}
	web1 := mk(e.as(t, cond), e.web, "web1", ann)
	web2 := mk(e.as(t, cond), e.web, "web2", bo)
	api1 := mk(e.as(t, cond2), e.api, "api1", ann)
	api2 := mk(e.as(t, cond2), e.api, "api2", cond) // cond works in cond2's quorum

	// A lane of another project, which lane.view on acme does not reach.
	require.NoError(t, e.raw(ctx, `SELECT docket.project_create('globex', 'user:ops', '2026-11-03T09:00:00Z')`))
	require.NoError(t, e.raw(ctx, `SELECT docket.grant_add('user:ops', 'globex', 'quorum.create', 'user:ops', '2026-11-03T09:00:00Z')`))
	gq, err := e.as(t, ops).CreateQuorum(ctx, lanes.QuorumSpec{Project: "globex", Name: "web", Conductor: cond})
	require.NoError(t, err)
	mk(e.as(t, cond), gq, "g1", ann)

	for _, tc := range []struct {
		actor access.Actor
		want  []int64
	}{
		{cond, []int64{web1, web2, api2}},
		{cond2, []int64{api1, api2}},
		{ann, []int64{web1, api1}},
		{bo, []int64{web2}},
		{vic, []int64{web1, web2, api1, api2}},
		{sam, []int64{}},
		{ops, []int64{}}, // creating quorums is not reading lanes
	} {
		got, err := e.as(t, tc.actor).List(ctx, lanes.Filter{Project: project})
		require.NoError(t, err, tc.actor)
		require.Equal(t, tc.want, ids(got), tc.actor)
		for _, id := range tc.want {
			_, err := e.as(t, tc.actor).Get(ctx, id)
			require.NoError(t, err, "%s reads lane %d", tc.actor, id)
		}
	}

	// Filters and pages.
	got, err := e.as(t, vic).List(ctx, lanes.Filter{Project: project, Quorum: "api"})
	require.NoError(t, err)
	require.Equal(t, []int64{api1, api2}, ids(got))
	_, err = e.as(t, cond).SetState(ctx, web2, lanes.InProgress, "")
	require.NoError(t, err)
	got, err = e.as(t, vic).List(ctx, lanes.Filter{Project: project, State: lanes.InProgress})
	require.NoError(t, err)
	require.Equal(t, []int64{web2}, ids(got))
	got, err = e.as(t, vic).List(ctx, lanes.Filter{Project: project, Review: lanes.Submitted})
	require.NoError(t, err)
	require.Empty(t, got)
	var all []int64
	after := int64(0)
	for {
		page, err := e.as(t, vic).List(ctx, lanes.Filter{Project: project, After: after, Limit: 3})
		require.NoError(t, err)
		all = append(all, ids(page)...)
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].ID
	}
	require.Equal(t, []int64{web1, web2, api1, api2}, all)
	got, err = e.as(t, vic).List(ctx, lanes.Filter{Project: "globex"})
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = e.as(t, vic).List(ctx, lanes.Filter{Project: "no such project"})
	require.NoError(t, err)
	require.Empty(t, got)

	for _, f := range []lanes.Filter{
		{},
		{Project: project, Limit: -1},
		{Project: project, Limit: db.MaxPage + 1},
		{Project: project, After: -1},
		{Project: project, State: "merged"},
		{Project: project, Review: "rejected"},
	} {
		_, err := e.as(t, vic).List(ctx, f)
		require.ErrorIs(t, err, db.ErrInvalidArgument, "%+v", f)
	}
	_, err = e.as(t, vic).List(ctx, lanes.Filter{Project: project, Limit: db.MaxPage})
	require.NoError(t, err)
}

func ids(ls []lanes.Lane) []int64 {
	out := []int64{}
	for _, l := range ls {
		out = append(out, l.ID)
	}
	return out
}
