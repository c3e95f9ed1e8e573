package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// evSucceeded returns a job completed with result {"total": 42}.
func evSucceeded(t *testing.T, e env) jobs.Job {
	t.Helper()
	ctx := t.Context()
	enq, err := e.client.Enqueue(ctx, spec(`{"invoice": 1}`))
	require.NoError(t, err)
	claimed, ok, err := e.client.ClaimID(ctx, enq.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	j, err := e.client.Complete(ctx, claimed.Lease(), json.RawMessage(`{"total": 42}`), nil)
	require.NoError(t, err)
	return j
}

// asOwner runs sql as the schema owner by hand, with its triggers switched
// off while it runs when off names any: what only the owner can do, and
// only by taking the rules down first.
func asOwner(t *testing.T, e env, off []string, sql string, args ...any) {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT docket.set_context('user:ana', $1)`, mRawAt); err != nil {
			return err
		}
		for _, table := range off {
			if _, err := tx.Exec(ctx, "ALTER TABLE "+table+" DISABLE TRIGGER USER"); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			return err
		}
		for _, table := range off {
			if _, err := tx.Exec(ctx, "ALTER TABLE "+table+" ENABLE TRIGGER USER"); err != nil {
				return err
			}
		}
		return nil
	}))
}

// TestVerifyDetectsARewrittenResult shows the way around the machine closed
// (its tables refuse a change by hand) and a finished job's result rewritten
// by the owner past the guard detected by Verify.
func TestVerifyDetectsARewrittenResult(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := evSucceeded(t, e)
	v, err := e.client.Verify(t.Context(), j.ID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)

	before := snapshot(t, e.Pool)
	err = testkit.Raw(t.Context(), e.Pool, ana, mRawAt, `UPDATE docket.job_states SET terminal = false WHERE state = 'succeeded'`)
	require.ErrorIs(t, err, db.ErrImmutable, "the machine's tables refuse a change by hand")
	require.ErrorContains(t, err, "changes only by migration")
	require.Equal(t, before, snapshot(t, e.Pool))

	asOwner(t, e, []string{"docket.jobs"}, `UPDATE docket.jobs SET result = '{"total": 4200}' WHERE id = $1`, j.ID)
	v, err = e.client.Verify(t.Context(), j.ID)
	require.NoError(t, err)
	require.False(t, v.OK)
	require.Contains(t, v.Problem, "no longer holds what event 2 recorded")
}

// TestVerifyJudgesByTheMachineAsMigrated shows an illegal history, made
// through a transition table rewritten to allow it, refused by Verify, and
// the rewritten table named.
func TestVerifyJudgesByTheMachineAsMigrated(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := evSucceeded(t, e)
	ctx := t.Context()
	// The owner says it is migrating, which it is not, and rewrites the
	// machine so a finished job may run again.
	require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		for _, sql := range []string{
			`SET LOCAL docket.migrating = 'on'`,
			`UPDATE docket.job_states SET terminal = false WHERE state = 'succeeded'`,
			`INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning) VALUES ('job', 'succeeded', 'queued', 'again')`,
		} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, testkit.Raw(ctx, e.Pool, ana, mRawAt,
		`UPDATE docket.jobs SET state = 'queued', result = NULL, finished_at = NULL, outcome_token = NULL WHERE id = $1`, j.ID))

	v, err := e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.False(t, v.OK)
	require.Equal(t, 3, v.BadSeq, "queued, claimed and succeeded, then queued again")
	require.Contains(t, v.Problem, "succeeded -> queued is not a move of the job machine as migrated")

	other := evSucceeded(t, e)
	v, err = e.client.Verify(ctx, other.ID)
	require.NoError(t, err)
	require.False(t, v.OK, "every job's verification reports the rewritten machine")
	require.Contains(t, v.Problem, "the job machine's tables were changed")
	require.Contains(t, v.Problem, "transition succeeded -> queued is not the machine's")
	require.Contains(t, v.Problem, "state succeeded is not initial and not terminal")
	require.False(t, headsOK(t, e, other.ID), "nor does a prune remove a job it cannot judge")
}

// TestARebuiltHistoryIsCaughtByExportedHeads shows TRUNCATE of a history
// refused, and a history the owner rebuilt past its triggers (recomputing
// every hash, so it verifies) caught by the chain head an auditor exported
// before.
func TestARebuiltHistoryIsCaughtByExportedHeads(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := evSucceeded(t, e)

	before := snapshot(t, e.Pool)
	err := testkit.Raw(ctx, e.Pool, ana, mRawAt, `TRUNCATE docket.job_events`)
	require.ErrorIs(t, err, db.ErrImmutable)
	require.Equal(t, before, snapshot(t, e.Pool))

	head := func() string {
		var h string
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT hash FROM docket.job_chain_heads WHERE job_id = $1`, j.ID).Scan(&h))
		return h
	}
	exported := head() // kept where the owner cannot write

	// The owner rewrites who completed the job and rebuilds the chain from
	// the rewritten event on, hashes and all.
	asOwner(t, e, []string{"docket.job_events"}, `
		WITH RECURSIVE chain AS (
			SELECT e.job_id, e.seq, e.prev_hash::bytea,
			       docket.job_event_hash(e.prev_hash, e.job_id, e.seq, e.from_state, e.to_state,
			           CASE WHEN e.to_state = 'succeeded' THEN 'svc:someone-else' ELSE e.actor END,
			           e.at, e.attempt, e.detail, e.lease_until, e.outcome, e.revision,
			           e.claimed_at, e.claimed_by, e.claim_token) AS hash
			FROM docket.job_events e WHERE e.job_id = $1 AND e.seq = 1
			UNION ALL
			SELECT e.job_id, e.seq, c.hash,
			       docket.job_event_hash(c.hash, e.job_id, e.seq, e.from_state, e.to_state,
			           CASE WHEN e.to_state = 'succeeded' THEN 'svc:someone-else' ELSE e.actor END,
			           e.at, e.attempt, e.detail, e.lease_until, e.outcome, e.revision,
			           e.claimed_at, e.claimed_by, e.claim_token)
			FROM docket.job_events e JOIN chain c ON e.job_id = c.job_id AND e.seq = c.seq + 1
		)
		UPDATE docket.job_events e
		SET actor = CASE WHEN e.to_state = 'succeeded' THEN 'svc:someone-else' ELSE e.actor END,
		    prev_hash = c.prev_hash, hash = c.hash
		FROM chain c WHERE e.job_id = c.job_id AND e.seq = c.seq`, j.ID)

	v, err := e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.True(t, v.OK, "a history rebuilt whole verifies on its own: %s", v.Problem)
	require.NotEqual(t, exported, head(), "but its head is not the one exported")
}

// TestAForgedOutcomeIsRefusedToTheApp shows a docket_app login refused the
// hand-written claimed -> succeeded with a forged result that the lease
// protocol exists to prevent (42501), and the job untouched.
func TestAForgedOutcomeIsRefusedToTheApp(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	_, err := e.client.Enqueue(ctx, spec(`{"invoice": 1}`))
	require.NoError(t, err)
	claimed, err := e.client.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, claimed, 1)

	before := snapshot(t, e.Pool)
	err = testkit.Raw(ctx, e.API, app, mRawAt, `UPDATE docket.jobs SET state = 'succeeded', result = '{"forged": true}',
		finished_at = $2, claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL WHERE id = $1`,
		claimed[0].ID, mRawAt)
	require.ErrorIs(t, err, db.ErrNotPermitted)
	require.Equal(t, before, snapshot(t, e.Pool))
}

// TestTimeNeverRunsBackwardsInAHistory shows a completion by a caller whose
// clock is behind the job's claim refused (DK016), alone and in a batch, and
// so the owner's hand-written move dated before the job's last event, each
// changing nothing; then the completion on time recorded, and the history
// verifying.
func TestTimeNeverRunsBackwardsInAHistory(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	enq, err := e.client.Enqueue(ctx, spec(`{"invoice": 1}`))
	require.NoError(t, err)
	e.Clock.Set(t0.Add(time.Hour))
	claimed, ok, err := e.client.ClaimID(ctx, enq.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)

	before := snapshot(t, e.Pool)
	behind := clientAs(t, e.API, db.NewFakeClock(t0.Add(time.Minute)), app)
	_, err = behind.Complete(ctx, claimed.Lease(), nil, nil)
	require.ErrorIs(t, err, db.ErrClockSkew, "a completion dated before its claim")
	require.Equal(t, before, snapshot(t, e.Pool), "the refusal changed nothing")
	errs, err := behind.CompleteMany(ctx, []jobs.Completion{{Lease: claimed.Lease()}})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], db.ErrClockSkew, "and in a batch")
	require.Equal(t, before, snapshot(t, e.Pool), "the refusal changed nothing")

	// The owner's hand-written change dated before the job's last event is
	// refused as well.
	err = testkit.Raw(ctx, e.Pool, app, t0.Add(time.Minute),
		`UPDATE docket.jobs SET state = 'cancelled', claim_token = NULL, claimed_by = NULL, claimed_at = NULL,
		     lease_expires_at = NULL, finished_at = $2 WHERE id = $1`, claimed.ID, t0.Add(2*time.Hour))
	require.ErrorIs(t, err, db.ErrClockSkew, "an event before the one before it")
	require.Equal(t, before, snapshot(t, e.Pool), "the refusal changed nothing")

	_, err = e.client.Complete(ctx, claimed.Lease(), nil, nil)
	require.NoError(t, err)
	h, err := e.client.History(ctx, claimed.ID)
	require.NoError(t, err)
	require.Len(t, h, 2)
	require.Equal(t, t0.Add(time.Hour), h[1].At, "the completion is recorded at its own instant")
	v, err := e.client.Verify(ctx, claimed.ID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
}

// TestAJobNeverFinishesBeforeItWasCreated shows the owner's hand-written
// finish before the job's creation refused, and the job as it was.
func TestAJobNeverFinishesBeforeItWasCreated(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := evSucceeded(t, e)
	before := snapshot(t, e.Pool)
	err := db.WithTx(t.Context(), e.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), `ALTER TABLE docket.jobs DISABLE TRIGGER USER`); err != nil {
			return err
		}
		_, err := tx.Exec(t.Context(), `UPDATE docket.jobs SET finished_at = created_at - interval '1 second' WHERE id = $1`, j.ID)
		return err
	})
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument, "even past the guard, the row's own check holds")
	require.ErrorContains(t, err, "jobs_finished_not_before_created")
	require.Equal(t, before, snapshot(t, e.Pool))
}

// TestAnEventOfNoJobIsRefused shows the owner's hand-written event of a job
// that does not exist refused (23503, job_events_job_exists), and nothing
// written: the check stands for a statement by hand, though the jobs
// triggers' own inserts skip it.
func TestAnEventOfNoJobIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	evSucceeded(t, e)
	before := snapshot(t, e.Pool)
	err := db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT docket.set_context('user:ana', $1)`, mRawAt); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, outcome, prev_hash, hash)
			SELECT 999999, 1, NULL, 'queued', 'user:ana', $1, 0, sha256(''), sha256(''), sha256('')`, mRawAt)
		return err
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23503", pgErr.Code)
	require.Equal(t, "job_events_job_exists", pgErr.ConstraintName)
	require.Equal(t, before, snapshot(t, e.Pool))
}

// headsOK says whether docket.job_heads, the check a prune runs before it
// removes a job, passes job id.
func headsOK(t *testing.T, e env, id int64) bool {
	t.Helper()
	var ok bool
	require.NoError(t, e.Pool.QueryRow(t.Context(), `SELECT ok FROM docket.job_heads(ARRAY[$1::bigint])`, id).Scan(&ok))
	return ok
}

// rehash recomputes job id's chain by hand, as the owner past the guards:
// every prev_hash and hash made to fit the events as they now read, so that
// the chain links and only the history's own rules can catch a rewrite.
func rehash(t *testing.T, e env, id int64) {
	t.Helper()
	asOwner(t, e, []string{"docket.job_events"}, fmt.Sprintf(`DO $$
DECLARE r record; prev bytea := decode(repeat('00', 32), 'hex');
BEGIN
    FOR r IN SELECT * FROM docket.job_events WHERE job_id = %d ORDER BY seq LOOP
        UPDATE docket.job_events SET prev_hash = prev,
               hash = docket.job_event_hash(prev, r.job_id, r.seq, r.from_state, r.to_state, r.actor, r.at, r.attempt,
                                            r.detail, r.lease_until, r.outcome, r.revision,
                                            r.claimed_at, r.claimed_by, r.claim_token)
        WHERE job_id = r.job_id AND seq = r.seq RETURNING hash INTO prev;
    END LOOP;
END $$`, id))
}

// A prune removes only jobs whose history verifies, and it judges as Verify
// does: each history rewritten by the owner, its chain re-hashed to link,
// or the job's own revision or pin rewritten, is refused by both
// docket.job_verify and docket.job_heads, the prune's check.
func TestChainHeadsRefuseWhatVerifyRefuses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	require.NoError(t, e.client.RegisterDecoders(ctx, "billing@r1", runs("r1").Decoders))
	pinned := func() int64 {
		in, err := e.client.Enqueue(ctx, spec(`{"pinned": 1}`))
		require.NoError(t, err)
		_, err = e.client.Pin(ctx, []int64{in.Job.ID}, []string{"r1"})
		require.NoError(t, err)
		return in.Job.ID
	}
	revised := func() int64 {
		j := claimAs(t, e, "r1")
		_, err := e.client.Complete(ctx, j.Lease(), nil, nil)
		require.NoError(t, err)
		return j.ID
	}
	succeeded := func() int64 { return evSucceeded(t, e).ID }
	for _, c := range []struct {
		name    string
		job     func() int64
		table   string // the table rewritten
		rewrite string // of job $1
		rehash  bool
		problem string // what Verify says
	}{
		{"attempts counted without a claim", succeeded, "docket.job_events",
			`UPDATE docket.job_events SET attempt = 2 WHERE job_id = $1 AND seq = 2`, true, "attempts count claims only"},
		{"time running backwards", succeeded, "docket.job_events",
			`UPDATE docket.job_events SET at = at - interval '1 day' WHERE job_id = $1 AND seq = 2`, true, "time ran backwards"},
		{"a claim before the event before", succeeded, "docket.job_events",
			`UPDATE docket.job_events SET claimed_at = claimed_at - interval '1 day' WHERE job_id = $1 AND seq = 2`, true, "time ran backwards"},
		{"a move from another state than the last", succeeded, "docket.job_events",
			`UPDATE docket.job_events SET from_state = 'uncertain', claimed_at = NULL, claimed_by = NULL, claim_token = NULL
			 WHERE job_id = $1 AND seq = 2`, true, "does not follow the previous to_state"},
		{"a claim named on a move from elsewhere", succeeded, "docket.job_events",
			`UPDATE docket.job_events SET from_state = 'uncertain' WHERE job_id = $1 AND seq = 2`, true, "names a claim but moves from uncertain"},
		{"a history that starts elsewhere than queued", succeeded, "docket.job_events",
			`UPDATE docket.job_events SET to_state = 'claimed' WHERE job_id = $1 AND seq = 1`, true, "not the initial state queued"},
		{"a move the machine does not have", succeeded, "docket.job_events",
			`UPDATE docket.job_events SET from_state = 'queued', attempt = 0, claimed_at = NULL, claimed_by = NULL, claim_token = NULL
			 WHERE job_id = $1 AND seq = 2`, true, "is not a move of the job machine"},
		{"the job's claimed revision", revised, "docket.jobs",
			`UPDATE docket.jobs SET claimed_revision = 'r2' WHERE id = $1`, false, "claimed revision r2 is not r1"},
		{"the job's pin", pinned, "docket.jobs",
			`UPDATE docket.jobs SET revisions = '{r1,r2}' WHERE id = $1`, false, "is not what its last pin recorded"},
		{"an event's contents", succeeded, "docket.job_events",
			`UPDATE docket.job_events SET actor = 'svc:mallory' WHERE job_id = $1 AND seq = 2`, false, "the row was altered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := c.job()
			v, err := e.client.Verify(ctx, id)
			require.NoError(t, err)
			require.True(t, v.OK, v.Problem)
			require.True(t, headsOK(t, e, id), "the prune's check refuses a history Verify passes")

			asOwner(t, e, []string{c.table}, c.rewrite, id)
			if c.rehash {
				rehash(t, e, id)
			}
			v, err = e.client.Verify(ctx, id)
			require.NoError(t, err)
			require.False(t, v.OK)
			require.Contains(t, v.Problem, c.problem)
			require.False(t, headsOK(t, e, id), "the prune's check passes a history Verify refuses (%s)", v.Problem)
		})
	}
}
