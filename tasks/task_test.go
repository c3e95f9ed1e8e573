package tasks_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/tasks"
)

// TestOpeningTwiceGivesOneTask: the same key on the same terms returns the
// task, on other terms is refused; a closed case takes no task.
func TestOpeningTwiceGivesOneTask(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.admit(t, "P-1")
	first, err := e.app.Open(ctx, c.ID, spec(e, "approve-release"))
	require.NoError(t, err)
	require.True(t, first.Created)
	require.Equal(t, tasks.Pending, first.Status)
	require.ElementsMatch(t, []access.Actor{pat, root, app}, first.Excluded, "proposer, acting-for and the case's admitter")
	again, err := e.app.Open(ctx, c.ID, spec(e, "approve-release"))
	require.NoError(t, err)
	require.False(t, again.Created)
	require.Equal(t, first.ID, again.ID)

	before := snapshot(t, e)
	changed := spec(e, "approve-release")
	changed.Title = "Something else"
	_, err = e.app.Open(ctx, c.ID, changed)
	require.ErrorIs(t, err, db.ErrIdempotencyConflict)

	_, err = e.cases.Close(ctx, c.ID)
	require.NoError(t, err)
	after := snapshot(t, e)
	_, err = e.app.Open(ctx, c.ID, spec(e, "another"))
	require.ErrorIs(t, err, db.ErrCaseClosed)
	require.Equal(t, after, snapshot(t, e))
	require.NotEqual(t, before, after, "closing withdrew the task")
}

// TestFourEyes: the proposer, the case's admitter and the principal the
// work acts for are refused at claim and at decide, though two of them hold
// task.review; a principal outside the audience sees nothing.
func TestFourEyes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	task := e.open(t, "P-1", nil)
	before := snapshot(t, e)
	for _, who := range []access.Actor{pat, app, root} {
		c := e.as(t, who)
		_, err := c.Claim(ctx, task.ID, 0)
		require.ErrorIs(t, err, db.ErrExcludedActor, who)
		_, err = c.Decide(ctx, task.ID, "approve", "")
		require.ErrorIs(t, err, db.ErrExcludedActor, who)
		got, err := c.Get(ctx, task.ID)
		require.NoError(t, err, "%s sees its task and why it may not answer it", who)
		require.Equal(t, task.ID, got.ID)
		list, err := c.Worklist(ctx, project, false, tasks.Page{})
		require.NoError(t, err)
		require.Empty(t, list, "an excluded principal's worklist does not offer it")
	}
	for _, who := range []access.Actor{sam, boss} {
		c := e.as(t, who)
		_, err := c.Get(ctx, task.ID)
		require.ErrorIs(t, err, db.ErrNotFound, who)
		_, err = c.Claim(ctx, task.ID, 0)
		require.ErrorIs(t, err, db.ErrNotFound, who)
		_, err = c.Decide(ctx, task.ID, "approve", "")
		require.ErrorIs(t, err, db.ErrNotFound, who)
	}
	require.Equal(t, before, snapshot(t, e))

	// Rita, who is none of them, may.
	list, err := e.as(t, rita).Worklist(ctx, project, false, tasks.Page{})
	require.NoError(t, err)
	require.Len(t, list, 1)
	claimed, err := e.as(t, rita).Claim(ctx, task.ID, 0)
	require.NoError(t, err)
	require.Equal(t, rita, claimed.Claim.Holder)
	decided, err := e.as(t, rita).Decide(ctx, task.ID, "approve", "invoice matches the order")
	require.NoError(t, err)
	require.Equal(t, tasks.Decided, decided.Status)
	require.Equal(t, rita, decided.DecidedBy)
	require.Nil(t, decided.Claim)
}

// TestADecisionIsDeliveredToTheTasksWait: deciding consumes the task's
// wait with a message and enqueues its continuation once, which reads the
// decision back; a second answer is refused.
func TestADecisionIsDeliveredToTheTasksWait(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	task := e.open(t, "P-1", nil)
	_, err := e.as(t, rita).Decide(ctx, task.ID, "reject", "amount above the limit")
	require.NoError(t, err)
	js := e.continuations(t, task)
	require.Len(t, js, 1)
	require.Equal(t, jobs.Queued, js[0].State)
	require.Equal(t, "payment.decided", js[0].Kind)
	d, err := tasks.DecisionOf(js[0])
	require.NoError(t, err)
	require.Equal(t, tasks.Decision{TaskID: task.ID, Key: "P-1", Decision: "reject", Note: "amount above the limit",
		DecidedBy: rita, At: t0}, d)

	before := snapshot(t, e)
	_, err = e.as(t, rob).Decide(ctx, task.ID, "approve", "")
	require.ErrorIs(t, err, db.ErrAlreadyAnswered)
	_, err = e.as(t, rob).Claim(ctx, task.ID, 0)
	require.ErrorIs(t, err, db.ErrAlreadyAnswered)
	require.Equal(t, before, snapshot(t, e))

	hist, err := e.as(t, rita).History(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"opened", "decided"}, whats(hist))
}

// TestClaimsAreLeased: a claim keeps the task out of other worklists and
// answers until it is released or its lease runs out.
func TestClaimsAreLeased(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	task := e.open(t, "P-1", nil)
	held, err := e.as(t, rita).Claim(ctx, task.ID, 10*time.Minute)
	require.NoError(t, err)
	list, err := e.as(t, rob).Worklist(ctx, project, false, tasks.Page{})
	require.NoError(t, err)
	require.Empty(t, list, "claimed: out of the queue")
	mine, err := e.as(t, rita).Worklist(ctx, project, true, tasks.Page{})
	require.NoError(t, err)
	require.Len(t, mine, 1)
	_, err = e.as(t, rob).Claim(ctx, task.ID, 0)
	require.ErrorIs(t, err, db.ErrStaleClaim)
	_, err = e.as(t, rob).Decide(ctx, task.ID, "approve", "")
	require.ErrorIs(t, err, db.ErrStaleClaim)
	b, err := e.as(t, rob).Backlog(ctx, project)
	require.NoError(t, err)
	require.Equal(t, tasks.Backlog{Project: project, Pending: 1, Claimed: 1, AwaitingExpiry: 1, NextDeadline: ptr(task.Deadline)}, b)

	released, err := e.as(t, rita).Release(ctx, held)
	require.NoError(t, err)
	require.Nil(t, released.Claim)
	_, err = e.as(t, rita).Release(ctx, held)
	require.ErrorIs(t, err, db.ErrStaleClaim, "released once")

	held, err = e.as(t, rob).Claim(ctx, task.ID, time.Minute)
	require.NoError(t, err)
	e.Clock.Advance(time.Minute)
	retaken, err := e.as(t, rita).Claim(ctx, task.ID, 0)
	require.NoError(t, err, "rob walked away: the lease ran out")
	require.Equal(t, rita, retaken.Claim.Holder)
	_, err = e.as(t, rob).Release(ctx, held)
	require.ErrorIs(t, err, db.ErrStaleClaim)

	hist, err := e.as(t, rita).History(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"opened", "claimed", "released", "claimed", "claimed"}, whats(hist))
}

// TestEscalation: past its deadline an escalating task is queued to the
// wider audience with its claim released and a new deadline, and the sweep
// does not fire it again.
func TestEscalation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	task := e.open(t, "P-1", nil)
	_, err := e.as(t, rita).Claim(ctx, task.ID, 24*time.Hour)
	require.NoError(t, err)
	w := e.sweeperWorker(t)
	e.Clock.Advance(24*time.Hour - time.Second)
	n, err := w.Sweep(ctx, tasks.SweepExpiry)
	require.NoError(t, err)
	require.Zero(t, n, "not due yet")

	e.Clock.Advance(time.Second)
	n, err = w.Sweep(ctx, tasks.SweepExpiry)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err := e.as(t, boss).Get(ctx, task.ID)
	require.NoError(t, err, "boss is in the audience now")
	require.Equal(t, tasks.Escalated, got.Status)
	require.Nil(t, got.Claim, "rita's claim was released")
	require.Equal(t, task.Deadline.Add(48*time.Hour), got.Deadline)
	require.False(t, got.AwaitsExpiry())
	require.True(t, got.Queued(e.Clock.Now()))
	list, err := e.as(t, boss).Worklist(ctx, project, false, tasks.Page{})
	require.NoError(t, err)
	require.Len(t, list, 1)

	e.Clock.Advance(100 * time.Hour)
	n, err = w.Sweep(ctx, tasks.SweepExpiry)
	require.NoError(t, err)
	require.Zero(t, n, "its policy fired once")
	decided, err := e.as(t, boss).Decide(ctx, task.ID, "approve", "")
	require.NoError(t, err)
	require.Equal(t, tasks.Decided, decided.Status)
	hist, err := e.as(t, boss).History(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"opened", "claimed", "escalated", "decided"}, whats(hist))
}

// TestAutomaticDecision: a task whose opening signed an automatic decision
// is decided so at its deadline; its event and its continuation say it was
// automatic and who signed it.
func TestAutomaticDecision(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	task := e.open(t, "P-1", func(s *tasks.Spec) { s.Expiry = tasks.DecideAutomatically("reject") })
	e.Clock.Advance(25 * time.Hour)
	n, err := e.sweeperWorker(t).Sweep(ctx, tasks.SweepExpiry)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err := e.as(t, rita).Get(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, tasks.Decided, got.Status)
	require.Equal(t, "reject", got.Decision)
	require.True(t, got.Automatic)
	require.Equal(t, sweeper, got.DecidedBy)
	hist, err := e.as(t, rita).History(ctx, task.ID)
	require.NoError(t, err)
	var detail struct {
		Decision  string `json:"decision"`
		Automatic bool   `json:"automatic"`
		SignedBy  string `json:"signed_by"`
	}
	require.NoError(t, json.Unmarshal(hist[len(hist)-1].Detail, &detail))
	require.Equal(t, "reject", detail.Decision)
	require.True(t, detail.Automatic)
	require.Equal(t, string(app), detail.SignedBy)
	js := e.continuations(t, task)
	require.Len(t, js, 1)
	d, err := tasks.DecisionOf(js[0])
	require.NoError(t, err)
	require.True(t, d.Automatic)
	require.Equal(t, app, d.SignedBy)
	require.Equal(t, "reject", d.Decision)
}

// TestClosingTheCaseWithdrawsItsTasks: a case that closes before anybody
// answered withdraws its task, claim and all; answering it then is DK007.
func TestClosingTheCaseWithdrawsItsTasks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	task := e.open(t, "P-1", nil)
	_, err := e.as(t, rita).Claim(ctx, task.ID, 0)
	require.NoError(t, err)
	_, err = e.cases.Close(ctx, task.CaseID)
	require.NoError(t, err)
	got, err := e.as(t, rita).Get(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, tasks.Withdrawn, got.Status)
	require.Nil(t, got.Claim)
	_, err = e.as(t, rita).Decide(ctx, task.ID, "approve", "")
	require.ErrorIs(t, err, db.ErrAlreadyAnswered)
	require.Empty(t, e.continuations(t, task))
	n, err := e.sweeperWorker(t).Sweep(ctx, tasks.SweepExpiry)
	require.NoError(t, err)
	require.Zero(t, n)
}

func whats(es []tasks.Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.What
	}
	return out
}

func ptr[T any](v T) *T { return &v }
