package cases_test

import (
	"context"
	"encoding/json"
	"errors"
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

// TestContinuationIsDispatchedWithTheMatch: with a Dispatcher, the
// continuation a delivery enqueues gets its River dispatch in the same
// transaction, and a worker runs it with the message attached; without one,
// it waits for the dispatch sweep.
func TestContinuationIsDispatchedWithTheMatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"), key("document", "DOC-2"))
	wc, err := worker.NewClient(e.API, worker.Config{Project: project, Actor: inbox, Clock: e.Clock, Logger: testkit.Logger})
	require.NoError(t, err)
	dispatching, err := cases.NewClient(e.API, cases.Config{Actor: inbox, Clock: e.Clock, Dispatcher: wc})
	require.NoError(t, err)
	plain := e.as(t, inbox)

	for _, doc := range []string{"DOC-1", "DOC-2"} {
		spec := reply(key("document", doc))
		spec.Name = "reply-" + strings.ToLower(doc)
		_, err := e.app.Await(ctx, c.ID, spec)
		require.NoError(t, err)
	}
	undispatched, err := plain.Deliver(ctx, message("m-2", key("document", "DOC-2")))
	require.NoError(t, err)
	require.NotZero(t, undispatched.ContinuationJobID)
	require.Zero(t, dispatchesOn(t, e.Pool, undispatched.ContinuationJobID), "no dispatcher: the dispatch sweep's to do")

	// A delivery that fails after the match takes its dispatch with it.
	err = db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		d, err := dispatching.DeliverTx(ctx, tx, message("m-1", key("document", "DOC-1")))
		require.NoError(t, err)
		require.Equal(t, 1, dispatchesOn(t, tx, d.ContinuationJobID))
		return errors.New("the caller's own write failed")
	})
	require.Error(t, err)
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.river_job WHERE kind = $1`, worker.DispatchKind).Scan(&n))
	require.Zero(t, n)

	d, err := dispatching.Deliver(ctx, message("m-1", key("document", "DOC-1")))
	require.NoError(t, err)
	require.Equal(t, 1, dispatchesOn(t, e.Pool, d.ContinuationJobID))

	woke := make(chan cases.Wake, 1)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, replyKind, func(_ context.Context, j *jobs.Typed[Reply]) error {
		require.Equal(t, "confirm", j.Args.Step)
		w, err := cases.WakeOf(j.Job)
		require.NoError(t, err)
		woke <- w
		return nil
	}))
	w := sweeperWorker(t, e, e.Clock, reg, func(c *worker.Config) { c.SweepEvery = time.Hour })
	testkit.Start(t, w)
	select {
	case got := <-woke:
		require.Equal(t, cases.WakeMessage, got.Reason)
		require.Equal(t, d.ConsumedBy, got.WaitID)
		require.Equal(t, "m-1", got.Message.MessageID)
		require.JSONEq(t, `{"accepted":true}`, string(got.Message.Payload))
	case <-time.After(30 * time.Second):
		t.Fatal("the continuation did not run")
	}
}

// dispatchesOn counts, on q, the River dispatches of docket job id.
func dispatchesOn(t testing.TB, q db.DBTX, id int64) int {
	t.Helper()
	var n int
	require.NoError(t, q.QueryRow(context.Background(),
		`SELECT count(*) FROM docket.river_job WHERE kind = $1 AND (args ->> 'job_id')::bigint = $2`,
		worker.DispatchKind, id).Scan(&n))
	return n
}

// TestTimerIsDispatchedOnce: with a Dispatcher, a timer's job gets one River
// dispatch, in the transaction that sets it; setting it again adds none.
func TestTimerIsDispatchedOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	wc, err := worker.NewClient(e.API, worker.Config{Project: project, Actor: app, Clock: e.Clock, Logger: testkit.Logger})
	require.NoError(t, err)
	client, err := cases.NewClient(e.API, cases.Config{Actor: app, Clock: e.Clock, Dispatcher: wc})
	require.NoError(t, err)
	remind := cases.Continuation{Kind: "supplier.remind"}
	tm, err := client.SleepUntil(ctx, c.ID, "reminder", t0.Add(time.Hour), remind)
	require.NoError(t, err)
	require.Equal(t, 1, dispatchesOn(t, e.Pool, tm.JobID))
	again, err := client.SleepUntil(ctx, c.ID, "reminder", t0.Add(time.Hour), remind)
	require.NoError(t, err)
	require.Equal(t, tm.ID, again.ID)
	require.Equal(t, 1, dispatchesOn(t, e.Pool, tm.JobID), "a retry dispatches nothing new")
}
