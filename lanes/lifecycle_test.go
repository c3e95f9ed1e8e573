package lanes_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/lanes"
)

// A lane from creation to merge: every change returns the lane as it now
// stands and appends exactly one event, attributed and timed by the caller.
func TestLaneLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c, a := e.as(t, cond), e.as(t, ann)

	require.Equal(t, lanes.Quorum{ID: e.web.ID, Project: project, Name: "web", Conductor: cond, CreatedBy: ops, CreatedAt: t0}, e.web)

	base := e.lane(t, "schema")
	e.Clock.Advance(time.Minute)
	l, err := c.Create(ctx, lanes.Spec{
		Quorum: e.web.ID, Name: "login", Branch: "feature/login", Assignee: ann, Task: "https://tracker.example/WEB-7",
		DependsOn: []int64{base.ID},
	})
	require.NoError(t, err)
	require.Equal(t, lanes.Lane{
		ID: l.ID, QuorumID: e.web.ID, Quorum: "web", Project: project, Conductor: cond, Name: "login",
		Branch: "feature/login", Assignee: ann, Task: "https://tracker.example/WEB-7", DependsOn: []int64{base.ID},
		State: lanes.Open, Review: lanes.NotSubmitted, CreatedBy: cond, CreatedAt: t0.Add(time.Minute), UpdatedAt: t0.Add(time.Minute),
	}, l)
	require.False(t, l.Merged())

	step := func(want lanes.State, review lanes.Review, got lanes.Lane, err error) {
		t.Helper()
		require.NoError(t, err)
		require.Equal(t, want, got.State)
		require.Equal(t, review, got.Review)
		require.Equal(t, e.Clock.Now(), got.UpdatedAt)
	}
	e.Clock.Advance(time.Minute)
	l, err = c.SetState(ctx, l.ID, lanes.InProgress, "ann starts")
	step(lanes.InProgress, lanes.NotSubmitted, l, err)
	e.Clock.Advance(time.Minute)
	l, err = a.Submit(ctx, l.ID, "ready for a look")
	step(lanes.InProgress, lanes.Submitted, l, err)
	e.Clock.Advance(time.Minute)
	l, err = c.RequestChanges(ctx, l.ID, "rename the handler")
	step(lanes.InProgress, lanes.ChangesRequested, l, err)
	e.Clock.Advance(time.Minute)
	l, err = a.Submit(ctx, l.ID, "renamed")
	step(lanes.InProgress, lanes.Submitted, l, err)
	e.Clock.Advance(time.Minute)
	l, err = c.Approve(ctx, l.ID, "")
	step(lanes.InProgress, lanes.Approved, l, err)

	// Not done yet: no merge.
	_, err = c.Merge(ctx, l.ID, commitA)
	require.ErrorIs(t, err, db.ErrIllegalTransition)

	e.Clock.Advance(time.Minute)
	l, err = c.SetState(ctx, l.ID, lanes.Done, "")
	step(lanes.Done, lanes.Approved, l, err)
	e.Clock.Advance(time.Minute)
	merged, err := c.Merge(ctx, l.ID, commitA)
	require.NoError(t, err)
	require.True(t, merged.Merged())
	require.Equal(t, commitA, merged.MergeCommit)
	require.Equal(t, e.Clock.Now(), merged.MergedAt)
	require.Equal(t, cond, merged.MergedBy)

	// The same merge again is a quiet no-op; another commit is refused.
	e.Clock.Advance(time.Minute)
	again, err := c.Merge(ctx, l.ID, commitA)
	require.NoError(t, err)
	require.Equal(t, merged, again)
	_, err = c.Merge(ctx, l.ID, commitB)
	require.ErrorIs(t, err, db.ErrTerminal)
	require.ErrorContains(t, err, commitA)

	got, err := c.Get(ctx, l.ID)
	require.NoError(t, err)
	require.Equal(t, merged, got)

	history, err := a.History(ctx, l.ID)
	require.NoError(t, err)
	type ev struct {
		Axis     lanes.EventType
		From, To string
		Actor    string
		Minute   int
		Detail   string
	}
	var evs []ev
	for _, h := range history {
		require.Equal(t, l.ID, h.LaneID)
		evs = append(evs, ev{h.Type, h.From, h.To, string(h.Actor), int(h.At.Sub(t0) / time.Minute), h.Detail})
	}
	require.Equal(t, []ev{
		{lanes.EventCreated, "", "open", "user:cond", 1,
			"lane login in quorum " + name("%d", e.web.ID) + ": branch feature/login, assignee user:ann, task https://tracker.example/WEB-7"},
		{lanes.EventDependency, "", name("%d", base.ID), "user:cond", 1, name("depends on lane %d", base.ID)},
		{lanes.EventExecution, "open", "in_progress", "user:cond", 2, "ann starts"},
		{lanes.EventReview, "none", "submitted", "user:ann", 3, "ready for a look"},
		{lanes.EventReview, "submitted", "changes_requested", "user:cond", 4, "rename the handler"},
		{lanes.EventReview, "changes_requested", "submitted", "user:ann", 5, "renamed"},
		{lanes.EventReview, "submitted", "approved", "user:cond", 6, ""},
		{lanes.EventExecution, "in_progress", "done", "user:cond", 7, ""},
		{lanes.EventMerge, "unmerged", "merged", "user:cond", 8, "commit " + commitA},
	}, evs)

	// A merged lane is finished on every axis.
	_, err = c.SetState(ctx, l.ID, lanes.Cancelled, "")
	require.ErrorIs(t, err, db.ErrIllegalTransition)
	_, err = a.Submit(ctx, l.ID, "")
	require.ErrorIs(t, err, db.ErrIllegalTransition)
	require.Equal(t, len(history), eventCount(t, e.Pool, l.ID))
}

// Moving one axis never moves another.
func TestAxesAreIndependent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.as(t, cond)
	l := e.drive(t, e.lane(t, "a").ID, lanes.InProgress, lanes.Submitted)

	for _, to := range []lanes.State{lanes.Cancelled} {
		got, err := c.SetState(ctx, l.ID, to, "")
		require.NoError(t, err)
		require.Equal(t, lanes.Submitted, got.Review, "an execution move leaves review")
		require.False(t, got.Merged())
	}
	// Review still moves on a cancelled lane: the axes are independent.
	got, err := c.Approve(ctx, l.ID, "")
	require.NoError(t, err)
	require.Equal(t, lanes.Cancelled, got.State, "a verdict leaves execution")
	_, err = c.Merge(ctx, l.ID, commitA)
	require.ErrorIs(t, err, db.ErrIllegalTransition, "a cancelled lane is never merged")
}
