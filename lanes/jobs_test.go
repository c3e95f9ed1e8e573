package lanes_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/lanes"
)

// A job names its lane; the lane shows its jobs. Claiming ignores the lane,
// and completing or failing the job moves neither the lane's state nor its
// review.
func TestJobsOfALane(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const worker access.Actor = "svc:worker"
	e.Env.Allow(t, testkit.Grants(worker, project, access.JobCreate, access.JobClaim)...)
	w, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: worker, Clock: e.Clock})
	require.NoError(t, err)

	l := e.drive(t, e.lane(t, "l").ID, lanes.InProgress, lanes.Submitted)
	before, err := e.as(t, cond).Get(ctx, l.ID)
	require.NoError(t, err)
	historyBefore := mustHistory(t, e.as(t, cond), l.ID)

	var ids []int64
	for i := range 3 {
		enq, err := w.Enqueue(ctx, jobs.Spec{Kind: "build.run", Payload: []byte(name(`{"n": %d}`, i)), LaneID: l.ID})
		require.NoError(t, err)
		require.Equal(t, l.ID, enq.Job.LaneID)
		ids = append(ids, enq.Job.ID)
	}
	// The worker is neither conductor nor assignee, and claims all the same.
	claimed, err := w.Claim(ctx, "default", jobs.ClaimOptions{Limit: 3})
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	_, err = w.Complete(ctx, claimed[0].Lease(), []byte(`{"ok": true}`), nil)
	require.NoError(t, err)
	_, err = w.Fail(ctx, claimed[1].Lease(), jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "broken"})
	require.NoError(t, err)

	after, err := e.as(t, cond).Get(ctx, l.ID)
	require.NoError(t, err)
	require.Equal(t, before, after, "the lane did not move")
	require.Equal(t, historyBefore, mustHistory(t, e.as(t, cond), l.ID))

	for _, reader := range []access.Actor{cond, ann, vic} {
		refs, err := e.as(t, reader).Jobs(ctx, l.ID, lanes.Page{})
		require.NoError(t, err, reader)
		require.Len(t, refs, 3)
		require.Equal(t, []jobs.State{jobs.Succeeded, jobs.Failed, jobs.Claimed}, []jobs.State{refs[0].State, refs[1].State, refs[2].State})
		require.Equal(t, ids[0], refs[0].ID)
		require.Equal(t, "build.run", refs[0].Kind)
	}
	page, err := e.as(t, vic).Jobs(ctx, l.ID, lanes.Page{After: ids[0], Limit: 1})
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, ids[1], page[0].ID)
	page, err = e.as(t, vic).Jobs(ctx, l.ID, lanes.Page{After: ids[2]})
	require.NoError(t, err)
	require.Empty(t, page)
	_, err = e.as(t, sam).Jobs(ctx, l.ID, lanes.Page{})
	require.ErrorIs(t, err, db.ErrNotFound)
	for _, p := range []lanes.Page{{Limit: -1}, {Limit: db.MaxPage + 1}, {After: -1}} {
		_, err = e.as(t, vic).Jobs(ctx, l.ID, p)
		require.ErrorIs(t, err, db.ErrInvalidArgument)
	}

	// A job names only an existing lane of its own project.
	require.NoError(t, e.raw(ctx, `SELECT docket.project_create('globex', 'user:ops', '2026-11-03T09:00:00Z')`))
	e.Env.Allow(t, testkit.Grants(worker, "globex", access.JobCreate)...)
	g, err := jobs.NewClient(e.API, jobs.Config{Project: "globex", Actor: worker, Clock: e.Clock})
	require.NoError(t, err)
	_, err = g.Enqueue(ctx, jobs.Spec{Kind: "build.run", Payload: []byte(`{}`), LaneID: l.ID})
	require.ErrorIs(t, err, db.ErrMissingReference)
	_, err = w.Enqueue(ctx, jobs.Spec{Kind: "build.run", Payload: []byte(`{}`), LaneID: 999999})
	require.ErrorIs(t, err, db.ErrMissingReference)
	_, err = g.EnqueueMany(ctx, []jobs.Spec{{Kind: "build.run", Payload: []byte(`{}`), LaneID: l.ID}})
	require.ErrorIs(t, err, db.ErrMissingReference)
}
