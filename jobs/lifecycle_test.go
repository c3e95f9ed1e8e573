package jobs_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
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

	e.Clock.Advance(time.Second)
	claimed, err := e.client.Claim(ctx, "default", jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	c := claimed[0]
	require.Equal(t, jobs.Claimed, c.State)
	require.Equal(t, 1, c.Attempts)
	require.Equal(t, int64(1), c.LeaseGeneration)
	require.Equal(t, app, c.ClaimedBy)
	require.Equal(t, t0.Add(time.Second+jobs.DefaultLease), c.LeaseExpiresAt)

	e.Clock.Advance(time.Minute)
	r, err := e.client.Renew(ctx, c.Lease(), 10*time.Minute)
	require.NoError(t, err)
	require.Equal(t, e.Clock.Now().Add(10*time.Minute), r.LeaseExpiresAt)

	done, err := e.client.Complete(ctx, c.Lease(), []byte(`{"paid": true}`), nil)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, done.State)
	require.Equal(t, e.Clock.Now(), done.FinishedAt)
	require.JSONEq(t, `{"paid": true}`, string(done.Result))

	// Completing again with the same result is a quiet no-op.
	again, err := e.client.Complete(ctx, c.Lease(), []byte(`{"paid":true}`), nil)
	require.NoError(t, err)
	require.Equal(t, done, again)

	hist, err := e.client.History(ctx, j.ID)
	require.NoError(t, err)
	// One event per attempt: the claim is written with the completion.
	require.Len(t, hist, 2)
	require.Equal(t, []jobs.State{jobs.Queued, jobs.Succeeded}, []jobs.State{hist[0].To, hist[1].To})
	require.Equal(t, jobs.State(""), hist[0].From)
	require.Equal(t, jobs.Claimed, hist[1].From)
	require.True(t, hist[1].EndsAttempt())
	require.Equal(t, c.ClaimedAt, hist[1].ClaimedAt)
	require.Equal(t, app, hist[1].ClaimedBy)
	require.Equal(t, 1, hist[1].Attempt)
	require.Equal(t, hist[0].Hash, hist[1].PrevHash)

	v, err := e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Verification{OK: true, Events: 2}, v)
}

// A job's project and an event's job are checked once per statement rather
// than by foreign keys; a hand-written INSERT is still refused.
func TestReferencesAreCheckedForHandInserts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	before := snapshot(t, e.Pool)

	err := testkit.Raw(ctx, e.Pool, ana, t0, `INSERT INTO docket.jobs (project, kind, payload, available_at, created_by, created_at, updated_at)
		VALUES ('nope', 'billing.invoice', '{}', $1, 'user:ana', $1, $1)`, t0)
	require.ErrorIs(t, err, db.ErrMissingReference)
	require.ErrorContains(t, err, "project 'nope' does not exist")

	err = db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO docket.job_events (job_id, seq, to_state, actor, at, attempt, outcome, prev_hash, hash)
			VALUES (424242, 1, 'queued', 'user:ana', $1, 0, decode(repeat('00', 32), 'hex'), decode(repeat('00', 32), 'hex'),
			        decode(repeat('00', 32), 'hex'))`, t0)
		return db.Translate(err, "insert")
	})
	require.ErrorIs(t, err, db.ErrMissingReference)
	require.Equal(t, before, snapshot(t, e.Pool))
}

// A holder whose lease was taken over and whose job the new holder finished
// is told its claim is stale, even when it reports the same outcome, and its
// writes in the completion transaction roll back.
func TestStaleHolderCannotCompleteAFinishedJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	// The service's own table, which its docket_app login writes.
	_, err := e.Pool.Exec(ctx, `CREATE TABLE outputs (job_id bigint); GRANT INSERT, SELECT ON outputs TO docket_app`)
	require.NoError(t, err)
	s := spec(`{"n": 1}`)
	s.Repeatable = true
	_, err = e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	first, err := e.client.Claim(ctx, "default", jobs.ClaimOptions{})
	require.NoError(t, err)
	e.Clock.Advance(jobs.DefaultLease)
	second, err := e.client.Claim(ctx, "default", jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, second, 1)
	_, err = e.client.Complete(ctx, second[0].Lease(), nil, nil)
	require.NoError(t, err)

	_, err = e.client.Complete(ctx, first[0].Lease(), nil, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO outputs VALUES ($1)`, first[0].ID)
		return err
	})
	require.ErrorIs(t, err, db.ErrStaleClaim)
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM outputs`).Scan(&n))
	require.Zero(t, n, "the stale holder's writes rolled back")

	// The holder that finished it may repeat itself.
	_, err = e.client.Complete(ctx, second[0].Lease(), nil, nil)
	require.NoError(t, err)
	errs, err := e.client.CompleteMany(ctx, []jobs.Completion{{Lease: first[0].Lease()}})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], db.ErrStaleClaim)
}

// An actor without grants on a project sees none of its jobs, cannot sweep
// its leases, and cannot hold its rows locked by trying to claim one by id.
func TestActorWithoutGrantsSeesAndHoldsNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	other := clientAs(t, e.API, e.Clock, nobody)
	enq, err := e.client.Enqueue(ctx, spec(`{"secret": 1}`))
	require.NoError(t, err)
	id := enq.Job.ID

	_, err = other.Get(ctx, id)
	require.ErrorIs(t, err, db.ErrNotFound)
	list, err := other.List(ctx, jobs.Filter{})
	require.NoError(t, err)
	require.Empty(t, list)
	hist, err := other.History(ctx, id)
	require.NoError(t, err)
	require.Empty(t, hist)
	_, err = other.Verify(ctx, id)
	require.ErrorIs(t, err, db.ErrNotFound)

	// A claim by id in a long transaction locks nothing.
	tx, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, ok, err := other.ClaimIDTx(ctx, tx, id, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.False(t, ok)
	got, err := e.client.Claim(ctx, "default", jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, got, 1, "the job was not held by the unauthorised claimant")

	// Its lease expires; a sweep by the unauthorised actor moves nothing.
	e.Clock.Advance(jobs.DefaultLease)
	before := snapshot(t, e.Pool)
	moved, err := other.ExpireLeases(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, moved)
	require.Equal(t, before, snapshot(t, e.Pool))
	moved, err = e.client.ExpireLeases(ctx, 100)
	require.NoError(t, err)
	require.Len(t, moved, 1)
}

// TestGetManyReadsWhatGetWould reads a batch of jobs in one call: the ones
// the actor may read, in id order; unknown ids and other projects' jobs are
// left out, and an oversized batch is refused.
func TestGetManyReadsWhatGetWould(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	a, err := e.client.Enqueue(ctx, spec(`{"n": 1}`))
	require.NoError(t, err)
	b, err := e.client.Enqueue(ctx, spec(`{"n": 2}`))
	require.NoError(t, err)
	got, err := e.client.GetMany(ctx, []int64{b.Job.ID, 999999, a.Job.ID})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, []int64{a.Job.ID, b.Job.ID}, []int64{got[0].ID, got[1].ID})
	one, err := e.client.Get(ctx, a.Job.ID)
	require.NoError(t, err)
	require.Equal(t, one, got[0])

	stranger := clientAs(t, e.API, e.Clock, nobody)
	none, err := stranger.GetMany(ctx, []int64{a.Job.ID, b.Job.ID})
	require.NoError(t, err)
	require.Empty(t, none, "jobs the actor may not read are left out")

	_, err = e.client.GetMany(ctx, make([]int64, jobs.MaxSweepBatch+1))
	require.ErrorIs(t, err, db.ErrInvalidArgument)
}
