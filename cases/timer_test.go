package cases_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// TestTimerRecordsItsDueInstant: a timer is a queued job of the case
// available at its instant, whose params record that instant; setting it
// again is a no-op, setting it with another continuation is refused, and
// closing the case cancels it (with an event) while a claimed one is left to
// run.
func TestTimerRecordsItsDueInstant(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	wake := t0.Add(72 * time.Hour)
	remind := cases.Continuation{Kind: "supplier.remind", Payload: json.RawMessage(`{"n":1}`)}

	tm, err := e.app.SleepUntil(ctx, c.ID, "reminder", wake, remind)
	require.NoError(t, err)
	require.Equal(t, wake, tm.WakeAt)
	require.Equal(t, c.ID, tm.CaseID)
	j := jobOf(t, e, tm.JobID)
	require.Equal(t, jobs.Queued, j.State)
	require.Equal(t, wake, j.AvailableAt)
	require.Equal(t, c.ID, j.CaseID)
	w, err := cases.WakeOf(j)
	require.NoError(t, err)
	require.Equal(t, cases.Wake{Reason: cases.WakeTimer, CaseID: c.ID, Timer: "reminder", At: wake}, w)

	e.Clock.Advance(time.Minute)
	again, err := e.app.SleepUntil(ctx, c.ID, "reminder", wake, remind)
	require.NoError(t, err)
	require.Equal(t, tm, again, "the same timer again is a retry")
	var timerJobs int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.jobs WHERE case_id = $1`, c.ID).Scan(&timerJobs))
	require.Equal(t, 1, timerJobs)

	before := snapshot(t, e.Pool)
	_, err = e.app.SleepUntil(ctx, c.ID, "reminder", wake, cases.Continuation{Kind: "supplier.remind", Payload: json.RawMessage(`{"n":2}`)})
	require.ErrorIs(t, err, db.ErrIdempotencyConflict)
	require.Equal(t, before, snapshot(t, e.Pool))

	// A second timer whose job a worker has claimed: closing leaves it be.
	running, err := e.app.SleepUntil(ctx, c.ID, "nudge", t0, remind)
	require.NoError(t, err)
	require.NoError(t, raw(ctx, e.Pool, `UPDATE docket.jobs SET state = 'claimed', claim_token = gen_random_uuid(), claimed_by = 'svc:w',
		claimed_at = '2026-11-03T09:00:00Z', lease_expires_at = '2026-11-03T10:00:00Z', attempts = 1, lease_generation = lease_generation + 1
		WHERE id = $1`, running.JobID))

	_, err = e.app.Close(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Cancelled, jobOf(t, e, tm.JobID).State)
	require.Contains(t, jobOf(t, e, tm.JobID).Diagnostic, "closed before the timer fired")
	require.Equal(t, jobs.Claimed, jobOf(t, e, running.JobID).State, "a timer already firing is not cancelled")
	timers, err := e.app.Timers(ctx, c.ID)
	require.NoError(t, err)
	require.Len(t, timers, 2)
	require.Equal(t, jobs.Cancelled, timers[0].JobState)
	require.Equal(t, 3, countEvents(t, e.Pool, c.ID, cases.EventTimer), "two set, one cancelled")

	_, err = e.app.SleepUntil(ctx, c.ID, "later", wake.Add(time.Hour), remind)
	require.ErrorIs(t, err, db.ErrCaseClosed)
}

// Reply is the arrival continuation's payload in these tests.
type Reply struct {
	Step string `json:"step"`
}

var replyKind = jobs.MustKind[Reply]("supplier.reply", 1)

// Remind is the timers' payload in these tests.
type Remind struct {
	N int `json:"n"`
}

var remindKind = jobs.MustKind[Remind]("supplier.remind", 1)

// handled is what a handler saw of one run of a job.
type handled struct {
	id   int64
	wake cases.Wake
	err  error
}

// nextRun returns the next run reported on runs, failing t after 30 s.
func nextRun(t *testing.T, runs <-chan handled, what string) handled {
	t.Helper()
	select {
	case r := <-runs:
		require.NoError(t, r.err, what)
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not run", what)
		return handled{}
	}
}

// requireSucceeds waits for job id to succeed: a worker records a success
// with its next claim, a moment after the handler returns.
func requireSucceeds(t *testing.T, e env, id int64) {
	t.Helper()
	require.Eventually(t, func() bool { return jobOf(t, e, id).State == jobs.Succeeded }, 30*time.Second, 10*time.Millisecond,
		"job %d did not succeed", id)
	require.Equal(t, 1, jobOf(t, e, id).Attempts, "job %d ran once", id)
}

// TestContinuationRunsWhenTheMatchCommits: the continuation a delivery
// enqueues is a job due at once, and the commit of the delivery's
// transaction notifies the workers of its queue; a delivery rolled back
// leaves neither job nor notice. A started worker runs each continuation,
// with its message attached, whether it was enqueued before the worker
// started or while it ran.
func TestContinuationRunsWhenTheMatchCommits(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"), key("document", "DOC-2"))
	in := e.as(t, inbox)
	heard := listen(t, e)
	for _, doc := range []string{"DOC-1", "DOC-2"} {
		spec := reply(key("document", doc))
		spec.Name = "reply-" + strings.ToLower(doc)
		_, err := e.app.Await(ctx, c.ID, spec)
		require.NoError(t, err)
	}
	require.Empty(t, heard.since(t), "a wait with nothing to run yet wakes nobody")

	early, err := in.Deliver(ctx, message("m-2", key("document", "DOC-2")))
	require.NoError(t, err)
	require.NotZero(t, early.ContinuationJobID)
	j := jobOf(t, e, early.ContinuationJobID)
	require.Equal(t, jobs.Queued, j.State)
	require.Equal(t, e.Clock.Now(), j.AvailableAt, "due at once")
	require.Equal(t, []string{"default"}, heard.since(t), "its commit woke the workers of its queue")

	// A delivery that fails after the match takes its job, and the notice,
	// with it.
	var rolledBack int64
	err = db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		d, err := in.DeliverTx(ctx, tx, message("m-1", key("document", "DOC-1")))
		require.NoError(t, err)
		require.NotZero(t, d.ContinuationJobID)
		rolledBack = d.ContinuationJobID
		require.Empty(t, heard.since(t), "nobody hears of a job before its transaction commits")
		return errors.New("the caller's own write failed")
	})
	require.Error(t, err)
	require.Empty(t, heard.since(t), "nor after it rolls back")
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.jobs WHERE id = $1`, rolledBack).Scan(&n))
	require.Zero(t, n)

	runs := make(chan handled, 4)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, replyKind, func(_ context.Context, j *jobs.Typed[Reply]) error {
		w, err := cases.WakeOf(j.Job)
		if err == nil && j.Args.Step != "confirm" {
			err = fmt.Errorf("step %q", j.Args.Step)
		}
		runs <- handled{j.ID, w, err}
		return err
	}))
	testkit.Start(t, sweeperWorker(t, e, e.Clock, reg, nil))
	r := nextRun(t, runs, "the continuation enqueued before the worker started")
	require.Equal(t, early.ContinuationJobID, r.id)
	require.Equal(t, cases.WakeMessage, r.wake.Reason)
	require.Equal(t, early.ConsumedBy, r.wake.WaitID)
	require.Equal(t, "m-2", r.wake.Message.MessageID)
	requireSucceeds(t, e, early.ContinuationJobID)

	d, err := in.Deliver(ctx, message("m-1", key("document", "DOC-1")))
	require.NoError(t, err)
	require.NotZero(t, d.ContinuationJobID)
	r = nextRun(t, runs, "the continuation enqueued while the worker ran")
	require.Equal(t, d.ContinuationJobID, r.id)
	require.Equal(t, cases.WakeMessage, r.wake.Reason)
	require.Equal(t, d.ConsumedBy, r.wake.WaitID)
	require.Equal(t, "m-1", r.wake.Message.MessageID)
	require.JSONEq(t, `{"accepted":true}`, string(r.wake.Message.Payload))
	requireSucceeds(t, e, d.ContinuationJobID)
	require.Empty(t, runs, "each continuation ran once")
}

// TestTimerRunsOnceDue: a timer's job is due at the timer's instant, so
// setting a timer for later wakes nobody (a worker's poll finds the job once
// it is due), and setting it again enqueues nothing new; a timer for an
// instant already come is due at once, and its commit wakes the workers of
// its queue. A started worker runs each once, the later one when the clock
// reaches it.
func TestTimerRunsOnceDue(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	heard := listen(t, e)
	remind := cases.Continuation{Kind: remindKind.Name(), Payload: json.RawMessage(`{"n":1}`)}
	wakeAt := t0.Add(time.Hour)
	later, err := e.app.SleepUntil(ctx, c.ID, "reminder", wakeAt, remind)
	require.NoError(t, err)
	again, err := e.app.SleepUntil(ctx, c.ID, "reminder", wakeAt, remind)
	require.NoError(t, err)
	require.Equal(t, later, again)
	require.Equal(t, 1, continuations(t, e, c.ID, remindKind.Name()), "a retry enqueues nothing new")
	require.Empty(t, heard.since(t), "a job not yet due wakes nobody")

	now, err := e.app.SleepUntil(ctx, c.ID, "nudge", e.Clock.Now(), remind)
	require.NoError(t, err)
	require.Equal(t, []string{"default"}, heard.since(t), "a job due at once wakes the workers of its queue")

	runs := make(chan handled, 4)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, remindKind, func(_ context.Context, j *jobs.Typed[Remind]) error {
		w, err := cases.WakeOf(j.Job)
		runs <- handled{j.ID, w, err}
		return err
	}))
	testkit.Start(t, sweeperWorker(t, e, e.Clock, reg, func(c *worker.Config) { c.PollInterval = 20 * time.Millisecond }))
	r := nextRun(t, runs, "the timer due at once")
	require.Equal(t, now.JobID, r.id)
	require.Equal(t, cases.Wake{Reason: cases.WakeTimer, CaseID: c.ID, Timer: "nudge", At: t0}, r.wake)
	requireSucceeds(t, e, now.JobID)
	require.Never(t, func() bool { return jobOf(t, e, later.JobID).State != jobs.Queued }, 200*time.Millisecond, 20*time.Millisecond,
		"a timer is not run before its instant")

	e.Clock.Set(wakeAt)
	r = nextRun(t, runs, "the timer, at its instant")
	require.Equal(t, later.JobID, r.id)
	require.Equal(t, cases.Wake{Reason: cases.WakeTimer, CaseID: c.ID, Timer: "reminder", At: wakeAt}, r.wake)
	requireSucceeds(t, e, later.JobID)
	require.Empty(t, runs, "each timer ran once")
}

// TestATimerNeedsNoCase: a timer of the project, of no case, is a queued
// job of no case available at its instant; setting it again is a retry,
// with another continuation a conflict, and one without case.admit on the
// project is refused, nothing written.
func TestATimerNeedsNoCase(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	wake := t0.Add(72 * time.Hour)
	remind := cases.Continuation{Kind: "supplier.remind", Payload: json.RawMessage(`{"n":1}`)}
	tm, err := e.app.SetTimer(ctx, project, "nightly", wake, remind)
	require.NoError(t, err)
	require.Zero(t, tm.CaseID)
	require.Equal(t, project, tm.Project)
	require.Equal(t, wake, tm.WakeAt)
	j := jobOf(t, e, tm.JobID)
	require.Equal(t, jobs.Queued, j.State)
	require.Equal(t, wake, j.AvailableAt)
	require.Zero(t, j.CaseID)
	w, err := cases.WakeOf(j)
	require.NoError(t, err)
	require.Equal(t, cases.Wake{Reason: cases.WakeTimer, Timer: "nightly", At: wake}, w)

	again, err := e.app.SetTimer(ctx, project, "nightly", wake, remind)
	require.NoError(t, err)
	require.Equal(t, tm, again, "the same timer again is a retry")
	before := snapshot(t, e.Pool)
	_, err = e.app.SetTimer(ctx, project, "nightly", wake, cases.Continuation{Kind: "supplier.remind", Payload: json.RawMessage(`{"n":2}`)})
	require.ErrorIs(t, err, db.ErrIdempotencyConflict)
	_, err = e.as(t, vic).SetTimer(ctx, project, "nightly-2", wake, remind)
	require.ErrorIs(t, err, db.ErrNotPermitted)
	_, err = e.as(t, rival).SetTimer(ctx, project, "nightly-2", wake, remind)
	require.ErrorIs(t, err, db.ErrNotPermitted)
	require.Equal(t, before, snapshot(t, e.Pool))
	// A step's timers are the timer sweep's; a timer of no case is its job's.
	fired, err := e.as(t, sweeper).FireTimers(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, fired)
}
