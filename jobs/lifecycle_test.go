package jobs_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
