package jobs_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

func TestLifecycleIsRecordedAndVerifies(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()

	enq, err := e.client.Enqueue(ctx, spec(`{"invoice": 7}`))
	require.NoError(t, err)
	require.False(t, enq.Duplicate)
	j := enq.Job
	require.Equal(t, jobs.Queued, j.State)
	require.Equal(t, t0, j.AvailableAt)
	require.Equal(t, jobs.DefaultRetryPolicy, j.Retry)
	require.Equal(t, jobs.DefaultLease, j.LeaseDuration)

	e.clock.Advance(time.Second)
	claimed, err := e.client.Claim(ctx, "default", jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	c := claimed[0]
	require.Equal(t, jobs.Claimed, c.State)
	require.Equal(t, 1, c.Attempts)
	require.Equal(t, int64(1), c.LeaseGeneration)
	require.Equal(t, app, c.ClaimedBy)
	require.Equal(t, t0.Add(time.Second+jobs.DefaultLease), c.LeaseExpiresAt)

	e.clock.Advance(time.Minute)
	r, err := e.client.Renew(ctx, c.Lease(), 10*time.Minute)
	require.NoError(t, err)
	require.Equal(t, e.clock.Now().Add(10*time.Minute), r.LeaseExpiresAt)

	done, err := e.client.Complete(ctx, c.Lease(), []byte(`{"paid": true}`), nil)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, done.State)
	require.Equal(t, e.clock.Now(), done.FinishedAt)
	require.JSONEq(t, `{"paid": true}`, string(done.Result))

	// Completing again with the same result is a quiet no-op.
	again, err := e.client.Complete(ctx, c.Lease(), []byte(`{"paid":true}`), nil)
	require.NoError(t, err)
	require.Equal(t, done, again)

	hist, err := e.client.History(ctx, e.pool, j.ID)
	require.NoError(t, err)
	require.Len(t, hist, 3)
	require.Equal(t, []jobs.State{jobs.Queued, jobs.Claimed, jobs.Succeeded}, []jobs.State{hist[0].To, hist[1].To, hist[2].To})
	require.Equal(t, jobs.State(""), hist[0].From)
	require.Equal(t, hist[0].Hash, hist[1].PrevHash)

	v, err := e.client.Verify(ctx, e.pool, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Verification{OK: true, Events: 3}, v)
}

// A job's project and an event's job are checked once per statement rather
// than by foreign keys; a hand-written INSERT is still refused.
func TestReferencesAreCheckedForHandInserts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	before := snapshot(t, e.pool)

	err := db.WithTx(ctx, e.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT docket.set_context('user:ana', $1)`, t0); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO docket.jobs (project, kind, payload, available_at, created_by, created_at, updated_at)
			VALUES ('nope', 'billing.invoice', '{}', $1, 'user:ana', $1, $1)`, t0)
		return db.Translate(err, "insert")
	})
	require.ErrorIs(t, err, db.ErrMissingReference)
	require.ErrorContains(t, err, "project 'nope' does not exist")

	err = db.WithTx(ctx, e.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO docket.job_events (job_id, seq, to_state, actor, at, attempt, prev_hash, hash)
			VALUES (424242, 1, 'queued', 'user:ana', $1, 0, decode(repeat('00', 32), 'hex'), decode(repeat('00', 32), 'hex'))`, t0)
		return db.Translate(err, "insert")
	})
	require.ErrorIs(t, err, db.ErrMissingReference)
	require.Equal(t, before, snapshot(t, e.pool))
}
