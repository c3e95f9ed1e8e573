package jobs_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// TestJobViewReadsAndChangesNothing: an application login acting as vic,
// who holds job.view only, reads the project's jobs, their history and its
// verification as app does, and is refused every change: enqueue, cancel
// and reconcile with db.ErrNotPermitted, while a claim, by queue or by id,
// and a lease sweep find nothing. The database is as it was.
func TestJobViewReadsAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const vic = testkit.Vic
	e.Allow(t, testkit.Grants(vic, project, access.JobView)...)
	login := e.Login(t, testkit.AppRole, vic)
	viewer := clientAs(t, login.Pool, e.Clock, vic)

	queued, err := e.client.Enqueue(ctx, spec(`{"n": 1}`))
	require.NoError(t, err)
	// An uncertain job, for reconcile: claimed, its lease run out, swept.
	doubt, err := e.client.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Queue: "doubt", Payload: []byte(`{"n": 2}`)})
	require.NoError(t, err)
	claimed, err := e.client.Claim(ctx, "doubt", jobs.ClaimOptions{Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	e.Clock.Advance(2 * time.Minute)
	swept, err := e.client.ExpireLeases(ctx, 10)
	require.NoError(t, err)
	require.Len(t, swept, 1)
	require.Equal(t, jobs.Uncertain, swept[0].State)

	for _, id := range []int64{queued.Job.ID, doubt.Job.ID} {
		want, err := e.client.Get(ctx, id)
		require.NoError(t, err)
		got, err := viewer.Get(ctx, id)
		require.NoError(t, err, "job.view reads job %d", id)
		require.Equal(t, want, got)
		wantHistory, err := e.client.History(ctx, id)
		require.NoError(t, err)
		history, err := viewer.History(ctx, id)
		require.NoError(t, err)
		require.NotEmpty(t, history)
		require.Equal(t, wantHistory, history)
		v, err := viewer.Verify(ctx, id)
		require.NoError(t, err)
		require.True(t, v.OK, v.Problem)
	}
	listed, err := viewer.List(ctx, jobs.Filter{})
	require.NoError(t, err)
	require.Len(t, listed, 2)
	many, err := viewer.GetMany(ctx, []int64{queued.Job.ID, doubt.Job.ID})
	require.NoError(t, err)
	require.Len(t, many, 2)
	uncertain, err := viewer.List(ctx, jobs.Filter{State: jobs.Uncertain})
	require.NoError(t, err)
	require.Len(t, uncertain, 1)

	before := snapshot(t, e.Pool)
	_, err = viewer.Enqueue(ctx, spec(`{"n": 3}`))
	require.ErrorIs(t, err, db.ErrNotPermitted, "enqueue needs job.create")
	_, err = viewer.Cancel(ctx, queued.Job.ID, "viewer")
	require.ErrorIs(t, err, db.ErrNotPermitted, "cancel needs job.cancel")
	_, err = viewer.Reconcile(ctx, doubt.Job.ID, jobs.DidSucceed, json.RawMessage(`{}`), "viewer")
	require.ErrorIs(t, err, db.ErrNotPermitted, "reconcile needs job.reconcile")
	got, err := viewer.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Empty(t, got, "a claim without job.claim finds nothing")
	_, ok, err := viewer.ClaimID(ctx, queued.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.False(t, ok, "a claim by id without job.claim finds nothing")
	moved, err := viewer.ExpireLeases(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, moved)
	require.Equal(t, before, snapshot(t, e.Pool), "the viewer changed nothing")

	// Revoked, the viewer reads nothing again.
	ac, err := access.NewClient(e.Pool, access.Config{Actor: ana, Clock: e.Clock})
	require.NoError(t, err)
	_, err = ac.Revoke(ctx, access.Grant{Principal: vic, Project: project, Capability: access.JobView})
	require.NoError(t, err)
	_, err = viewer.Get(ctx, queued.Job.ID)
	require.ErrorIs(t, err, db.ErrNotFound)
	history, err := viewer.History(ctx, queued.Job.ID)
	require.NoError(t, err)
	require.Empty(t, history)
	listed, err = viewer.List(ctx, jobs.Filter{})
	require.NoError(t, err)
	require.Empty(t, listed)
}

// TestReadByIDNamesTheActor: a job that is not there and a job the actor may
// not see get the same db.ErrNotFound, whose message names the job and the
// actor, so whoever reads it knows whose grants to check. (A pruned job's
// error names its prune instead: see retention's tests.)
func TestReadByIDNamesTheActor(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	enq, err := e.client.Enqueue(ctx, spec(`{}`))
	require.NoError(t, err)
	stranger := clientAs(t, e.API, e.Clock, nobody)
	for _, tc := range []struct {
		name  string
		c     *jobs.Client
		id    int64
		actor access.Actor
	}{
		{"unknown", e.client, enq.Job.ID + 1000, app},
		{"not visible", stranger, enq.Job.ID, nobody},
	} {
		_, err := tc.c.Get(ctx, tc.id)
		require.ErrorIs(t, err, db.ErrNotFound, tc.name)
		var pruned *jobs.PrunedError
		require.NotErrorAs(t, err, &pruned, tc.name)
		want := "job " + strconv.FormatInt(tc.id, 10) + " not found or not visible to " + string(tc.actor)
		require.Equal(t, "job.get: "+want, err.Error(), tc.name)
		_, err = tc.c.Verify(ctx, tc.id)
		require.ErrorIs(t, err, db.ErrNotFound, tc.name)
		require.ErrorContains(t, err, want, tc.name)
	}
}
