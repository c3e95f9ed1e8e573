package jobs_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
)

// oldShape rewrites job id's history, as the owner past the guards, into the
// shape docket wrote before one event per attempt (00046): each claim an
// event of its own, from the state before it to claimed, at the claim's
// instant, by its holder, holding its lease, and the event that ended the
// attempt naming no claim; a claim still open gets its event too. The chain
// is hashed afresh, as it was written then.
func oldShape(t *testing.T, e env, id int64) {
	t.Helper()
	asOwner(t, e, []string{"docket.job_events"}, fmt.Sprintf(`DO $$
DECLARE
    r record;
    j docket.jobs;
    prev bytea := decode(repeat('00', 32), 'hex');
    prev_state text;
    s integer := 0;
BEGIN
    SELECT * INTO j FROM docket.jobs WHERE id = %[1]d;
    CREATE TEMP TABLE new_shape ON COMMIT DROP AS SELECT * FROM docket.job_events WHERE job_id = %[1]d;
    DELETE FROM docket.job_events WHERE job_id = %[1]d;
    FOR r IN SELECT * FROM new_shape ORDER BY seq LOOP
        IF r.claimed_at IS NOT NULL AND prev_state IS DISTINCT FROM 'claimed' THEN
            s := s + 1;
            INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until,
                                           outcome, revision, prev_hash, hash)
            SELECT r.job_id, s, prev_state, 'claimed', r.claimed_by, r.claimed_at,
                   r.attempt - CASE WHEN r.to_state = 'claimed' THEN 1 ELSE 0 END, 'claimed by ' || r.claimed_by,
                   r.lease_until, sha256('what the claim left the job holding'), r.revision, prev,
                   docket.job_event_hash(prev, r.job_id, s, prev_state, 'claimed', r.claimed_by, r.claimed_at,
                                         r.attempt - CASE WHEN r.to_state = 'claimed' THEN 1 ELSE 0 END,
                                         'claimed by ' || r.claimed_by, r.lease_until,
                                         sha256('what the claim left the job holding'), r.revision)
            RETURNING hash INTO prev;
        END IF;
        s := s + 1;
        INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until,
                                       outcome, revision, prev_hash, hash)
        VALUES (r.job_id, s, r.from_state, r.to_state, r.actor, r.at, r.attempt, r.detail, r.lease_until, r.outcome,
                r.revision, prev,
                docket.job_event_hash(prev, r.job_id, s, r.from_state, r.to_state, r.actor, r.at, r.attempt, r.detail,
                                      r.lease_until, r.outcome, r.revision))
        RETURNING hash INTO prev;
        prev_state := r.to_state;
    END LOOP;
    IF j.state = 'claimed' AND prev_state <> 'claimed' THEN
        s := s + 1;
        INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until,
                                       outcome, revision, prev_hash, hash)
        VALUES (j.id, s, prev_state, 'claimed', j.claimed_by, j.claimed_at, j.attempts,
                'claimed by ' || j.claimed_by || ', lease generation ' || j.lease_generation, j.lease_expires_at,
                docket.job_outcome('claimed', j.result, j.diagnostic, j.claimed_by, j.claim_token, j.lease_generation,
                                   j.attempts, 0, NULL, j.spent_effects, j.spent_money),
                j.claimed_revision, prev,
                docket.job_event_hash(prev, j.id, s, prev_state, 'claimed', j.claimed_by, j.claimed_at, j.attempts,
                                      'claimed by ' || j.claimed_by || ', lease generation ' || j.lease_generation,
                                      j.lease_expires_at,
                                      docket.job_outcome('claimed', j.result, j.diagnostic, j.claimed_by, j.claim_token,
                                                         j.lease_generation, j.attempts, 0, NULL, j.spent_effects,
                                                         j.spent_money),
                                      j.claimed_revision));
    END IF;
END $$`, id))
}

// A history written before one event per attempt, with each claim an event
// of its own, still verifies, by job_verify and by the prune's check; so
// does one that goes on in the new shape: an attempt claimed then and ended
// now, and the attempts after it.
func TestHistoriesOfTheOldShapeVerify(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	requireOK := func(id int64, events int, why string) {
		t.Helper()
		v, err := e.client.Verify(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.Verification{OK: true, Events: events}, v, why)
		var ok bool
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT ok FROM docket.job_heads(ARRAY[$1::bigint])`, id).Scan(&ok))
		if e, _ := e.client.Get(ctx, id); e.State != jobs.Claimed {
			require.True(t, ok, "the prune's check: %s", why)
		}
	}

	// Finished in the old shape: queued, claimed, succeeded.
	done := evSucceeded(t, e)
	requireOK(done.ID, 2, "the new shape")
	oldShape(t, e, done.ID)
	h, err := e.client.History(ctx, done.ID)
	require.NoError(t, err)
	require.Equal(t, []jobs.State{jobs.Queued, jobs.Claimed, jobs.Succeeded}, []jobs.State{h[0].To, h[1].To, h[2].To})
	require.False(t, h[2].EndsAttempt())
	requireOK(done.ID, 3, "the old shape")

	// Retried in the old shape, then claimed then (its claim an event) and
	// ended, retried and finished in the new.
	s := spec(`{"invoice": 2}`)
	s.Retry = jobs.RetryPolicy{Base: time.Second, MaxAttempts: 4}
	enq, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	c := mClaimOne(t, e)
	_, err = e.client.Fail(ctx, c.Lease(), jobs.Failure{Diagnostic: "gateway timeout"})
	require.NoError(t, err)
	e.Clock.Advance(time.Second)
	c = mClaimOne(t, e)
	oldShape(t, e, enq.Job.ID) // queued, claimed, queued, claimed: held across the upgrade
	requireOK(enq.Job.ID, 4, "an old-shape history with its claim held")
	_, err = e.client.Fail(ctx, c.Lease(), jobs.Failure{Diagnostic: "gateway timeout again"})
	require.NoError(t, err)
	h, err = e.client.History(ctx, enq.Job.ID)
	require.NoError(t, err)
	require.Len(t, h, 5)
	require.Equal(t, jobs.Claimed, h[3].To, "the claim made before the upgrade")
	require.True(t, h[4].EndsAttempt(), "the event ending it names it all the same")
	require.Equal(t, c.ClaimedAt, h[4].ClaimedAt)
	requireOK(enq.Job.ID, 5, "an attempt claimed in the old shape and ended in the new")
	e.Clock.Advance(time.Minute)
	c = mClaimOne(t, e)
	requireOK(enq.Job.ID, 5, "a claim open in the new shape after old-shape events")
	_, err = e.client.Complete(ctx, c.Lease(), json.RawMessage(`{"paid": true}`), nil)
	require.NoError(t, err)
	requireOK(enq.Job.ID, 6, "and the attempt that ends it")
}
