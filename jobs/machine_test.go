package jobs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// The job state machine, proved against real Postgres: every (from, to) pair
// through a hand-written UPDATE and through the Go API, terminal and immutable
// rows, births, the append-only history and its verification.

// mPair is one (from, to) move of the machine.
type mPair struct{ from, to jobs.State }

func (p mPair) String() string { return string(p.from) + "->" + string(p.to) }

// mLegalPairs reads docket.job_transitions.
func mLegalPairs(t testing.TB, q db.DBTX) map[mPair]bool {
	t.Helper()
	rows, err := q.Query(t.Context(), `SELECT from_state, to_state FROM docket.job_transitions`)
	require.NoError(t, err)
	legal := map[mPair]bool{}
	for rows.Next() {
		var from, to string
		require.NoError(t, rows.Scan(&from, &to))
		legal[mPair{jobs.State(from), jobs.State(to)}] = true
	}
	require.NoError(t, rows.Err())
	return legal
}

// mOpts shape the job build drives into a source state.
type mOpts struct {
	maxAttempts int // 0: 2, so a claimed job has an attempt left
	repeatable  bool
	// ownDB asks for a database of its own: the call sweeps every job in it.
	ownDB bool
	// budget is the job's; an uncertain job is built with an attempt that
	// spent its effects ceiling.
	budget jobs.Budget
	// expired builds an uncertain job by its lease's expiry and the sweep
	// (the job's lease holder may record its outcome late), not by its
	// holder's uncertain failure; it sweeps every job in the database.
	expired bool
}

// mBuild drives a new job into state from through the API alone, and returns
// it with the lease its last claim held (stale unless it is claimed; a lease
// with a random token when it was never claimed).
func mBuild(t testing.TB, e env, from jobs.State, o mOpts) (jobs.Job, jobs.Lease) {
	t.Helper()
	ctx := t.Context()
	if o.maxAttempts == 0 {
		o.maxAttempts = 2
	}
	s := spec(`{"invoice": 7}`)
	s.Retry = jobs.RetryPolicy{MaxAttempts: o.maxAttempts}
	s.Repeatable = o.repeatable
	s.Budget = o.budget
	if from == jobs.Exhausted && s.Budget.IsZero() {
		s.Budget = jobs.Budget{Effects: 1}
	}
	enq, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	j := enq.Job
	lease := jobs.Lease{JobID: j.ID, Token: uuid.New()}
	switch from {
	case jobs.Queued:
		return j, lease
	case jobs.Exhausted:
		// Parked by an operator, with nothing spent: the API's own ways in
		// (a failure over budget, a claim over quota, a reconcile) are calls
		// of mAPICalls, and this job may leave by any legal move.
		require.NoError(t, mOperatorExec(t, e.Pool, e.Clock.Now(), `UPDATE docket.jobs SET state = 'exhausted' WHERE id = $1`, j.ID))
		j, err = e.client.Get(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, from, j.State)
		return j, lease
	}
	claim := func() {
		t.Helper()
		c, ok, err := e.client.ClaimID(ctx, j.ID, jobs.ClaimOptions{})
		require.NoError(t, err)
		require.True(t, ok, "job %d is not claimable", j.ID)
		j, lease = c, c.Lease()
	}
	claim()
	switch from {
	case jobs.Claimed:
	case jobs.Succeeded:
		j, err = e.client.Complete(ctx, lease, nil, nil)
	case jobs.Failed:
		j, err = e.client.Fail(ctx, lease, jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "bad invoice"})
	case jobs.Dead:
		for err == nil && j.State != jobs.Dead {
			// A negative RetryAfter retries at once, so no clock is needed.
			j, err = e.client.Fail(ctx, lease, jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "try again", RetryAfter: -1})
			if err == nil && j.State == jobs.Queued {
				claim()
			}
		}
	case jobs.Uncertain:
		require.False(t, o.repeatable, "a repeatable job is never uncertain")
		if o.expired {
			e.Clock.Advance(j.LeaseExpiresAt.Sub(e.Clock.Now()))
			var swept []jobs.Job
			swept, err = e.client.ExpireLeases(ctx, 10)
			require.Len(t, swept, 1)
			j = swept[0]
			e.Clock.Advance(time.Second)
			break
		}
		j, err = e.client.Fail(ctx, lease, jobs.Failure{Class: jobs.ClassUncertain, Diagnostic: "timed out",
			Spent: jobs.Spend{Effects: o.budget.Effects}})
	case jobs.Cancelled:
		j, err = e.client.Cancel(ctx, j.ID, "no longer wanted")
	default:
		t.Fatalf("unknown state %q", from)
	}
	require.NoError(t, err)
	require.Equal(t, from, j.State)
	return j, lease
}

// mOperatorExec runs sql by hand as ana at at, as an operator in psql would.
func mOperatorExec(t testing.TB, pool *pgxpool.Pool, at time.Time, sql string, args ...any) error {
	t.Helper()
	return testkit.Raw(t.Context(), pool, ana, at, sql, args...)
}

// mRequireRefused asserts err is the database's refusal with SQLSTATE code,
// matching sentinel.
func mRequireRefused(t testing.TB, err error, sentinel error, code string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, sentinel)
	var de *db.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, code, de.Code, "%v", err)
}

// mOwnClock returns shared's database with a fake clock of its own at t0 and
// a client acting as app on it, so subtests sharing a database can each move
// their own time.
func mOwnClock(t testing.TB, shared env) env {
	t.Helper()
	clock := db.NewFakeClock(t0)
	kit := shared.Env
	kit.Clock = clock
	return env{Env: kit, client: clientAs(t, shared.API, clock, app)}
}

func mHistory(t testing.TB, e env, id int64) []jobs.Event {
	t.Helper()
	h, err := e.client.History(t.Context(), id)
	require.NoError(t, err)
	return h
}

func mRequireVerifies(t testing.TB, e env, id int64, events int) {
	t.Helper()
	v, err := e.client.Verify(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, jobs.Verification{OK: true, Events: events}, v)
}

// mRequireOneMove asserts job id's history is before plus exactly one event
// from → to, by actor at the instant at, counting the job's attempts, and
// that the whole history still verifies.
//
// A claim is the exception: one event per attempt, so a claim is on the row
// alone, and the history is before, unchanged, until the attempt ends.
func mRequireOneMove(t testing.TB, e env, id int64, before []jobs.Event, from, to jobs.State, actor string, at time.Time) {
	t.Helper()
	after := mHistory(t, e, id)
	if to == jobs.Claimed && from != jobs.Claimed {
		require.Equal(t, before, after, "a claim writes no event")
		job, err := e.client.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, jobs.Claimed, job.State)
		require.Equal(t, at, job.ClaimedAt)
		require.Equal(t, before[len(before)-1].Attempt+1, job.Attempts)
		mRequireVerifies(t, e, id, len(after))
		return
	}
	require.Len(t, after, len(before)+1, "one move, one event")
	require.Equal(t, before, after[:len(before)], "earlier events are untouched")
	ev := after[len(before)]
	job, err := e.client.Get(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, to, job.State)
	require.Equal(t, len(after), ev.Seq)
	require.Equal(t, from, ev.From)
	require.Equal(t, to, ev.To)
	require.Equal(t, actor, string(ev.Actor))
	require.Equal(t, at, ev.At)
	require.Equal(t, job.Attempts, ev.Attempt)
	require.Equal(t, before[len(before)-1].Hash, ev.PrevHash)
	require.Equal(t, from == jobs.Claimed, ev.EndsAttempt(), "an event from claimed names the claim it ends")
	mRequireVerifies(t, e, id, len(after))
}

// mRawMove is an operator's UPDATE moving job $1 to state $2 at instant $3,
// with every other column set as the target state requires, so only the
// machine can object: a claim gets a fresh lease, one more attempt and one
// more lease generation; a terminal state a finished_at; no other state a
// lease or a result. A move to the state the job is already in is spelled
// with a new lease generation, the only way to make it a move rather than a
// non-move (see TestMachineNonMovesRecordNoEvent), but for queued → queued,
// which is a pin: a change of the revisions the job may run under. A dead job has used every
// attempt, so dead → queued and dead → claimed cannot satisfy the CHECKs as
// well; the guard, a BEFORE trigger, must refuse them first with DK001.
const mRawMove = `
UPDATE docket.jobs SET
    state = $2::text,
    attempts = attempts + CASE WHEN $2::text = 'claimed' THEN 1 ELSE 0 END,
    lease_generation = lease_generation + CASE WHEN $2::text = 'claimed' OR ($2::text = state AND state <> 'queued') THEN 1 ELSE 0 END,
    revisions = CASE WHEN $2::text = 'queued' AND state = 'queued' THEN '{r-raw}'::text[] ELSE revisions END,
    claim_token = CASE WHEN $2::text = 'claimed' THEN gen_random_uuid() END,
    claimed_by = CASE WHEN $2::text = 'claimed' THEN 'user:ana' END,
    claimed_at = CASE WHEN $2::text = 'claimed' THEN $3::timestamptz END,
    lease_expires_at = CASE WHEN $2::text = 'claimed' THEN $3::timestamptz + lease END,
    result = NULL,
    finished_at = CASE WHEN $2::text IN ('succeeded', 'failed', 'dead', 'cancelled') THEN $3::timestamptz END,
    updated_at = greatest(updated_at, $3::timestamptz)
WHERE id = $1`

// mRawAt is the instant operators give set_context: distinct from anything the
// fake clock says, so an event's at shows where it came from.
var mRawAt = t0.Add(7*time.Hour + 123*time.Microsecond)

// TestMachineRawUpdateEveryPair: a hand-written UPDATE moves a job along
// docket.job_transitions and nowhere else. Each legal pair records exactly one
// event attributed to the change context; every illegal pair is refused with
// DK001 and changes nothing.
func TestMachineRawUpdateEveryPair(t *testing.T) {
	t.Parallel()
	e := setup(t)
	legal := mLegalPairs(t, e.Pool)
	for _, from := range jobs.States {
		t.Run(string(from), func(t *testing.T) {
			t.Parallel()
			for _, to := range jobs.States {
				p := mPair{from, to}
				t.Run("to_"+string(to), func(t *testing.T) {
					t.Parallel()
					j, _ := mBuild(t, e, from, mOpts{})
					before := mHistory(t, e, j.ID)
					snap := snapshotOf(t, e.Pool, j.ID)

					err := mOperatorExec(t, e.Pool, mRawAt, mRawMove, j.ID, string(to), mRawAt)

					if legal[p] {
						require.NoError(t, err, "%v is in docket.job_transitions", p)
						mRequireOneMove(t, e, j.ID, before, from, to, string(ana), mRawAt)
						return
					}
					mRequireRefused(t, err, db.ErrIllegalTransition, "DK001")
					require.Equal(t, snap, snapshotOf(t, e.Pool, j.ID), "a refused move changes nothing")
				})
			}
		})
	}
}

// TestMachineRawClaimCountsAttemptAndGeneration: a move into claimed is a
// claim, which counts exactly one attempt and one lease generation
// (jobs_guard: "attempts and lease generation move only by a claim, one at a
// time"; job_verify checks the same of the history). A hand-written claim that
// counts anything else is refused with DK001.
func TestMachineRawClaimCountsAttemptAndGeneration(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const claim = `
		UPDATE docket.jobs SET state = 'claimed', attempts = attempts + $2::integer,
		       lease_generation = lease_generation + $3::bigint, claim_token = gen_random_uuid(),
		       claimed_by = 'user:ana', claimed_at = $4::timestamptz, lease_expires_at = $4::timestamptz + lease,
		       updated_at = $4::timestamptz
		WHERE id = $1`
	for _, c := range []struct {
		name                  string
		attempts, generations int
	}{
		{"neither_counted", 0, 0},
		{"attempt_only", 1, 0},
		{"generation_only", 0, 1},
		{"two_of_each", 2, 2},
		{"attempt_not_counted_twice_generations", 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			j, _ := mBuild(t, e, jobs.Queued, mOpts{maxAttempts: 5})
			snap := snapshotOf(t, e.Pool, j.ID)
			err := mOperatorExec(t, e.Pool, mRawAt, claim, j.ID, c.attempts, c.generations, mRawAt)
			mRequireRefused(t, err, db.ErrIllegalTransition, "DK001")
			require.Equal(t, snap, snapshotOf(t, e.Pool, j.ID))
			mRequireVerifies(t, e, j.ID, 1)
		})
	}
}

// mWant is what one API call on a job in one source state must do.
type mWant struct {
	move    bool  // the job moves to the call's target, with one event
	refusal error // the sentinel it is refused with, changing nothing
	na      bool  // the source state cannot be built for this call
	// neither: a quiet no-op (an idempotent repeat, or nothing to claim)
}

var (
	wMove     = mWant{move: true}
	wNoop     = mWant{}
	wNA       = mWant{na: true}
	wStale    = mWant{refusal: db.ErrStaleClaim}
	wTerminal = mWant{refusal: db.ErrTerminal}
	wIllegal  = mWant{refusal: db.ErrIllegalTransition}
)

// mByState lists a call's wants in the order of jobs.States: queued, claimed,
// succeeded, failed, dead, uncertain, cancelled, exhausted.
func mByState(q, c, s, f, d, u, x, h mWant) map[jobs.State]mWant {
	return map[jobs.State]mWant{
		jobs.Queued: q, jobs.Claimed: c, jobs.Succeeded: s, jobs.Failed: f, jobs.Dead: d, jobs.Uncertain: u, jobs.Cancelled: x,
		jobs.Exhausted: h,
	}
}

// mAPICall is one way the API moves a job toward a state. run gets the job in
// its source state and the lease its last claim held; it returns the job the
// call returned (the zero Job when the call found nothing to do).
type mAPICall struct {
	name string
	to   jobs.State
	opts mOpts
	run  func(t *testing.T, e env, j jobs.Job, l jobs.Lease) (jobs.Job, error)
	want map[jobs.State]mWant
}

func mAPICalls() []mAPICall {
	claimID := func(t *testing.T, e env, j jobs.Job, _ jobs.Lease) (jobs.Job, error) {
		got, ok, err := e.client.ClaimID(t.Context(), j.ID, jobs.ClaimOptions{})
		if !ok {
			return jobs.Job{}, err
		}
		return got, err
	}
	expire := func(t *testing.T, e env, j jobs.Job, _ jobs.Lease) (jobs.Job, error) {
		e.Clock.Advance(j.LeaseDuration)
		swept, err := e.client.ExpireLeases(t.Context(), 100)
		for _, s := range swept {
			if s.ID == j.ID {
				return s, err
			}
		}
		return jobs.Job{}, err
	}
	release := func(t *testing.T, e env, _ jobs.Job, l jobs.Lease) (jobs.Job, error) {
		return e.client.Release(t.Context(), l, time.Time{}, "handing it back")
	}
	fail := func(class jobs.FailureClass) func(*testing.T, env, jobs.Job, jobs.Lease) (jobs.Job, error) {
		return func(t *testing.T, e env, _ jobs.Job, l jobs.Lease) (jobs.Job, error) {
			return e.client.Fail(t.Context(), l, jobs.Failure{Class: class, Diagnostic: "boom"})
		}
	}
	reconcile := func(o jobs.Outcome) func(*testing.T, env, jobs.Job, jobs.Lease) (jobs.Job, error) {
		return func(t *testing.T, e env, j jobs.Job, _ jobs.Lease) (jobs.Job, error) {
			return e.client.Reconcile(t.Context(), j.ID, o, nil, "checked the ledger")
		}
	}
	pin := func(t *testing.T, e env, j jobs.Job, _ jobs.Lease) (jobs.Job, error) {
		got, err := e.client.Pin(t.Context(), []int64{j.ID}, []string{"r1"})
		if err != nil {
			return jobs.Job{}, err
		}
		return got[0], nil
	}
	last := mOpts{maxAttempts: 1}
	repeatable := mOpts{repeatable: true}
	sweep := mOpts{ownDB: true}
	sweepRepeatable := mOpts{repeatable: true, ownDB: true}
	sweepRepeatableLast := mOpts{repeatable: true, maxAttempts: 1, ownDB: true}
	oneEffect := mOpts{budget: jobs.Budget{Effects: 1}}
	lateLast := mOpts{maxAttempts: 1, expired: true, ownDB: true}
	money := mOpts{budget: jobs.Budget{Money: 100, Currency: "EUR"}, ownDB: true} // its quota is the database's
	return []mAPICall{
		{"Pin", jobs.Queued, mOpts{}, pin,
			mByState(wMove, wIllegal, wIllegal, wIllegal, wIllegal, wIllegal, wIllegal, wIllegal)},
		{"ClaimID", jobs.Claimed, mOpts{}, claimID,
			mByState(wMove, wNoop, wNoop, wNoop, wNoop, wNoop, wNoop, wNoop)},
		{"ClaimIDAfterExpiry", jobs.Claimed, repeatable,
			func(t *testing.T, e env, j jobs.Job, l jobs.Lease) (jobs.Job, error) {
				e.Clock.Advance(j.LeaseDuration)
				return claimID(t, e, j, l)
			},
			mByState(wMove, wMove, wNoop, wNoop, wNoop, wNA, wNoop, wNoop)},
		{"Release", jobs.Queued, mOpts{}, release,
			mByState(wStale, wMove, wStale, wStale, wStale, wStale, wStale, wStale)},
		{"ReleaseLastAttempt", jobs.Dead, last, release,
			mByState(wStale, wMove, wStale, wStale, wStale, wStale, wStale, wStale)},
		{"FailRetryable", jobs.Queued, mOpts{}, fail(jobs.ClassRetryable),
			mByState(wStale, wMove, wTerminal, wTerminal, wNoop, wStale, wStale, wStale)},
		{"FailRetryableLastAttempt", jobs.Dead, last, fail(jobs.ClassRetryable),
			mByState(wStale, wMove, wTerminal, wTerminal, wNoop, wStale, wStale, wStale)},
		{"FailPermanent", jobs.Failed, mOpts{}, fail(jobs.ClassPermanent),
			mByState(wStale, wMove, wTerminal, wNoop, wTerminal, wStale, wStale, wStale)},
		{"FailUncertain", jobs.Uncertain, mOpts{}, fail(jobs.ClassUncertain),
			mByState(wStale, wMove, wTerminal, wTerminal, wTerminal, wStale, wStale, wStale)},
		{"FailUncertainRepeatable", jobs.Queued, repeatable, fail(jobs.ClassUncertain),
			mByState(wStale, wMove, wTerminal, wTerminal, wNoop, wNA, wStale, wStale)},
		{"Complete", jobs.Succeeded, mOpts{},
			func(t *testing.T, e env, _ jobs.Job, l jobs.Lease) (jobs.Job, error) {
				return e.client.Complete(t.Context(), l, nil, nil)
			},
			mByState(wStale, wMove, wNoop, wTerminal, wTerminal, wStale, wStale, wStale)},
		{"Cancel", jobs.Cancelled, mOpts{},
			func(t *testing.T, e env, j jobs.Job, _ jobs.Lease) (jobs.Job, error) {
				return e.client.Cancel(t.Context(), j.ID, "no longer wanted")
			},
			mByState(wMove, wMove, wTerminal, wTerminal, wTerminal, wMove, wNoop, wMove)},
		// ReconcileTx: "a job that is not uncertain with ErrIllegalTransition,
		// or that finished otherwise with ErrTerminal": a job that finished
		// without passing through uncertain is not reconciled after the fact,
		// even to the outcome it has.
		{"ReconcileDidSucceed", jobs.Succeeded, mOpts{}, reconcile(jobs.DidSucceed),
			mByState(wIllegal, wIllegal, wTerminal, wTerminal, wTerminal, wMove, wTerminal, wIllegal)},
		{"ReconcileDidFail", jobs.Failed, mOpts{}, reconcile(jobs.DidFail),
			mByState(wIllegal, wIllegal, wTerminal, wTerminal, wTerminal, wMove, wTerminal, wIllegal)},
		{"ReconcileRunAgain", jobs.Queued, mOpts{}, reconcile(jobs.RunAgain),
			mByState(wIllegal, wIllegal, wTerminal, wTerminal, wTerminal, wMove, wTerminal, wIllegal)},
		{"FailRetryableOverBudget", jobs.Exhausted, oneEffect,
			func(t *testing.T, e env, _ jobs.Job, l jobs.Lease) (jobs.Job, error) {
				return e.client.Fail(t.Context(), l, jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "boom", Spent: jobs.Spend{Effects: 1}})
			},
			mByState(wStale, wMove, wTerminal, wTerminal, wNoop, wStale, wStale, wStale)},
		{"ReconcileRunAgainOverBudget", jobs.Exhausted, oneEffect, reconcile(jobs.RunAgain),
			mByState(wIllegal, wIllegal, wTerminal, wTerminal, wTerminal, wMove, wTerminal, wIllegal)},
		{"ClaimIDOverQuota", jobs.Exhausted, money,
			func(t *testing.T, e env, j jobs.Job, l jobs.Lease) (jobs.Job, error) {
				// A quota of less than the job's ceiling: no claim can reserve it.
				_, err := e.Pool.Exec(t.Context(), `INSERT INTO docket.budget_quotas (project, currency, period, anchor, amount, updated_by, updated_at)
					VALUES ($1, 'EUR', interval '1 day', $2, 50, 'user:ana', $2) ON CONFLICT DO NOTHING`, project, t0)
				require.NoError(t, err)
				if _, err := claimID(t, e, j, l); err != nil {
					return jobs.Job{}, err
				}
				got, err := e.client.Get(t.Context(), j.ID)
				if err != nil || got.State == j.State {
					return jobs.Job{}, err
				}
				return got, nil
			},
			mByState(wMove, wNoop, wNoop, wNoop, wNoop, wNoop, wNoop, wNoop)},
		{"Resume", jobs.Queued, oneEffect,
			func(t *testing.T, e env, j jobs.Job, _ jobs.Lease) (jobs.Job, error) {
				return e.client.Resume(t.Context(), j.ID, jobs.Ceilings{Effects: 5})
			},
			mByState(wIllegal, wIllegal, wTerminal, wTerminal, wTerminal, wIllegal, wTerminal, wMove)},
		// FailLate: "a job the lease's expiry did not leave uncertain ... with
		// ErrStaleClaim".
		{"FailLateLastAttempt", jobs.Dead, lateLast,
			func(t *testing.T, e env, _ jobs.Job, l jobs.Lease) (jobs.Job, error) {
				return e.client.FailLate(t.Context(), l, jobs.Failure{Diagnostic: "gateway refused"})
			},
			mByState(wStale, wStale, wStale, wStale, wStale, wMove, wStale, wStale)},
		{"ExpireLeases", jobs.Uncertain, sweep, expire,
			mByState(wNoop, wMove, wNoop, wNoop, wNoop, wNoop, wNoop, wNoop)},
		{"ExpireLeasesRepeatable", jobs.Queued, sweepRepeatable, expire,
			mByState(wNoop, wMove, wNoop, wNoop, wNoop, wNA, wNoop, wNoop)},
		{"ExpireLeasesRepeatableLastAttempt", jobs.Dead, sweepRepeatableLast, expire,
			mByState(wNoop, wMove, wNoop, wNoop, wNoop, wNA, wNoop, wNoop)},
	}
}

// TestMachineAPIEveryPair: every API call that moves a job, on a job in each
// of the 7 states. A call moves the job only along docket.job_transitions,
// recording one event attributed to the client's actor at its clock's now;
// otherwise it is a quiet no-op or refused with the sentinel its doc names,
// changing nothing. Every legal pair is reached through some call.
func TestMachineAPIEveryPair(t *testing.T) {
	t.Parallel()
	legal := mLegalPairs(t, setup(t).Pool)
	calls := mAPICalls()

	reached := map[mPair]bool{}
	for _, c := range calls {
		require.Len(t, c.want, len(jobs.States), c.name)
		for from, w := range c.want {
			if w.move {
				p := mPair{from, c.to}
				require.True(t, legal[p], "%s on a %s job would move it %v, not in docket.job_transitions", c.name, from, p)
				reached[p] = true
			}
		}
	}
	require.Equal(t, legal, reached, "every legal pair is reached through the API")

	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var shared env
			if !c.opts.ownDB {
				shared = setup(t)
			}
			for _, from := range jobs.States {
				w := c.want[from]
				if w.na {
					continue
				}
				t.Run(string(from), func(t *testing.T) {
					t.Parallel()
					var e env
					if c.opts.ownDB {
						e = setup(t)
					} else {
						e = mOwnClock(t, shared)
					}
					j, l := mBuild(t, e, from, c.opts)
					before := mHistory(t, e, j.ID)
					snap := snapshotOf(t, e.Pool, j.ID)

					got, err := c.run(t, e, j, l)

					switch {
					case w.move:
						require.NoError(t, err)
						require.Equal(t, j.ID, got.ID)
						require.Equal(t, c.to, got.State)
						mRequireOneMove(t, e, j.ID, before, from, c.to, string(app), e.Clock.Now())
					case w.refusal != nil:
						require.ErrorIs(t, err, w.refusal)
						require.Equal(t, snap, snapshotOf(t, e.Pool, j.ID), "a refusal changes nothing")
					default:
						require.NoError(t, err)
						require.Equal(t, snap, snapshotOf(t, e.Pool, j.ID), "a no-op changes nothing")
					}
				})
			}
		})
	}
}

// TestMachineTerminalRowsNeverChange: any UPDATE of a succeeded, failed, dead
// or cancelled job is refused with DK001, even one that writes a column's own
// value or touches only priority.
func TestMachineTerminalRowsNeverChange(t *testing.T) {
	t.Parallel()
	updates := []struct{ name, set string }{
		{"state_to_itself", "state = state"},
		{"priority_to_itself", "priority = priority"},
		{"priority_only", "priority = 4"},
		{"every_column_to_itself", "(state, priority, queue, available_at, result, diagnostic, finished_at, updated_at) = " +
			"(state, priority, queue, available_at, result, diagnostic, finished_at, updated_at)"},
		{"diagnostic", "diagnostic = 'rewritten'"},
		{"queue", "queue = 'other'"},
		{"available_at", "available_at = available_at + interval '1 hour'"},
		{"updated_at", "updated_at = updated_at + interval '1 second'"},
		{"finished_at", "finished_at = finished_at + interval '1 second'"},
		{"lease_policy", "lease = interval '1 hour'"},
	}
	for _, from := range jobs.States {
		if !from.Terminal() {
			continue
		}
		t.Run(string(from), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			j, _ := mBuild(t, e, from, mOpts{})
			snap := snapshot(t, e.Pool)
			for _, u := range updates {
				t.Run(u.name, func(t *testing.T) {
					t.Parallel()
					err := mOperatorExec(t, e.Pool, mRawAt, `UPDATE docket.jobs SET `+u.set+` WHERE id = $1`, j.ID)
					mRequireRefused(t, err, db.ErrIllegalTransition, "DK001")
					require.Equal(t, snap, snapshot(t, e.Pool))
				})
			}
		})
	}
}

// TestMachineImmutableColumns: what a job is never changes. An UPDATE of any
// immutable column of a queued job, to another value or to NULL, is refused
// with DK015 and changes no row and no event.
func TestMachineImmutableColumns(t *testing.T) {
	t.Parallel()
	e := setup(t, "beta")
	ctx := t.Context()
	s := spec(`{"invoice": 7}`)
	s.Params = []byte(`{"region": "eu"}`)
	s.Inputs = []string{"doc:1"}
	s.Output = jobs.OutputRef{Asset: "receipt", Kind: "application/pdf", Root: "receipts"}
	s.IdempotencyKey = "invoice-7"
	s.CompensationKind = "billing.void"
	s.Retry = jobs.RetryPolicy{MaxAttempts: 3}
	enq, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	id := enq.Job.ID
	snap := snapshot(t, e.Pool)

	changes := []struct{ column, value string }{
		{"project", "'beta'"},
		{"kind", "'billing.refund'"},
		{"payload", `'{"invoice": 8}'::jsonb`},
		{"payload_schema", "2"},
		{"params", `'{"region": "us"}'::jsonb`},
		{"params", "NULL"},
		{"inputs", "ARRAY['doc:2']"},
		{"inputs", "'{}'"},
		{"requested_output", "'invoice'"},
		{"requested_output", "NULL"},
		{"requested_kind", "'text/plain'"},
		{"requested_kind", "NULL"},
		{"target_root", "'archive'"},
		{"target_root", "NULL"},
		{"idempotency_key", "'invoice-8'"},
		{"idempotency_key", "NULL"},
		{"compensation_kind", "'billing.refund'"},
		{"compensation_kind", "NULL"},
		{"repeatable", "NOT repeatable"},
		{"external", "NOT external"},
		{"lane_id", "42"},
		{"case_id", "42"},
		{"max_attempts", "max_attempts + 1"},
		{"created_by", "'user:bob'"},
		{"created_at", "created_at - interval '1 hour'"},
	}
	for _, c := range changes {
		t.Run(c.column+"="+c.value, func(t *testing.T) {
			t.Parallel()
			err := mOperatorExec(t, e.Pool, mRawAt, `UPDATE docket.jobs SET `+c.column+` = `+c.value+` WHERE id = $1`, id)
			mRequireRefused(t, err, db.ErrImmutable, "DK015")
			require.Equal(t, snap, snapshot(t, e.Pool))
		})
	}
	t.Run("with_a_legal_move", func(t *testing.T) {
		t.Parallel()
		err := mOperatorExec(t, e.Pool, mRawAt,
			`UPDATE docket.jobs SET state = 'cancelled', finished_at = $2, payload = '{"invoice": 8}' WHERE id = $1`, id, mRawAt)
		mRequireRefused(t, err, db.ErrImmutable, "DK015")
		require.Equal(t, snap, snapshot(t, e.Pool))
	})
}

// TestMachineBirth: a job is born queued with no attempts and no lease
// generation. A hand-written INSERT of any other birth is refused with DK001
// and writes nothing; a proper one records one creation event.
func TestMachineBirth(t *testing.T) {
	t.Parallel()
	const insert = `
		INSERT INTO docket.jobs (project, kind, payload, available_at, created_by, created_at, updated_at,
		                         state, attempts, lease_generation, claim_token, claimed_by, claimed_at,
		                         lease_expires_at, finished_at)
		VALUES ('acme', 'billing.invoice', '{}', $1::timestamptz, 'user:ana', $1::timestamptz, $1::timestamptz,
		        $2::text, $3::integer, $4::bigint,
		        CASE WHEN $2::text = 'claimed' THEN gen_random_uuid() END,
		        CASE WHEN $2::text = 'claimed' THEN 'user:ana' END,
		        CASE WHEN $2::text = 'claimed' THEN $1::timestamptz END,
		        CASE WHEN $2::text = 'claimed' THEN $1::timestamptz + interval '5 minutes' END,
		        CASE WHEN $2::text IN ('succeeded', 'failed', 'dead', 'cancelled') THEN $1::timestamptz END)`
	type birth struct {
		state                 jobs.State
		attempts, generations int
	}
	var refused []birth
	for _, s := range jobs.States {
		if s != jobs.Queued {
			refused = append(refused, birth{s, 0, 0}, birth{s, 1, 1})
		}
	}
	refused = append(refused, birth{jobs.Queued, 1, 0}, birth{jobs.Queued, 0, 1}, birth{jobs.Queued, 1, 1})

	e := setup(t)
	snap := snapshot(t, e.Pool)
	for _, b := range refused {
		t.Run(string(b.state)+"_attempts_"+strconv.Itoa(b.attempts)+"_generation_"+strconv.Itoa(b.generations), func(t *testing.T) {
			t.Parallel()
			err := mOperatorExec(t, e.Pool, mRawAt, insert, mRawAt, string(b.state), b.attempts, b.generations)
			mRequireRefused(t, err, db.ErrIllegalTransition, "DK001")
			require.Equal(t, snap, snapshot(t, e.Pool))
		})
	}
	t.Run("queued_fresh", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		require.NoError(t, mOperatorExec(t, e.Pool, mRawAt, insert, mRawAt, "queued", 0, 0))
		var id int64
		require.NoError(t, e.Pool.QueryRow(t.Context(), `SELECT id FROM docket.jobs`).Scan(&id), "the only job")
		h := mHistory(t, e, id)
		require.Len(t, h, 1)
		require.Equal(t, jobs.State(""), h[0].From)
		require.Equal(t, jobs.Queued, h[0].To)
		require.Equal(t, ana, h[0].Actor)
		require.Equal(t, mRawAt, h[0].At)
		require.Equal(t, make([]byte, 32), h[0].PrevHash)
		mRequireVerifies(t, e, id, 1)
	})
}

// TestMachineRowRules: the rules that tie a job's columns together hold for
// a hand-written INSERT or UPDATE as they do for the API. Each statement
// below breaks exactly one, and is refused with a check violation (23514)
// naming it, changing nothing. The statement triggers check eight of them,
// set-based, where table CHECK constraints did before migration 20 (the same
// refusals); the two that keep time from running backwards in a job's
// record are CHECKs still.
func TestMachineRowRules(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const insert = `
		INSERT INTO docket.jobs (project, kind, payload, available_at, created_by, created_at, updated_at,
		                         backoff_cap, requested_kind)
		VALUES ('acme', 'billing.invoice', '{}', $1::timestamptz, 'user:ana', $1::timestamptz, $1::timestamptz,
		        $2::interval, $3::text)`
	for _, c := range []struct {
		rule string
		from jobs.State
		sql  string // $1 the job's id, $2 the change context's instant; or, for INSERT, the insert's arguments
		args []any
	}{
		{"jobs_attempts_range", jobs.Queued, `UPDATE docket.jobs SET attempts = -1 WHERE id = $1`, nil},
		{"jobs_backoff_cap_range", jobs.Queued, `UPDATE docket.jobs SET backoff_cap = '8 days' WHERE id = $1`, nil},
		{"jobs_claimed_holds_lease", jobs.Queued,
			`UPDATE docket.jobs SET claim_token = gen_random_uuid(), claimed_by = 'user:ana', claimed_at = updated_at,
			        lease_expires_at = updated_at + lease WHERE id = $1`, nil},
		{"jobs_claimed_holds_lease", jobs.Claimed, `UPDATE docket.jobs SET claimed_by = NULL WHERE id = $1`, nil},
		{"jobs_finished_not_before_created", jobs.Queued,
			`UPDATE docket.jobs SET state = 'cancelled', finished_at = created_at - interval '1 day' WHERE id = $1`, nil},
		{"jobs_lease_after_claim", jobs.Claimed,
			`UPDATE docket.jobs SET lease_expires_at = claimed_at - interval '1 second' WHERE id = $1`, nil},
		{"jobs_outcome_token_only_finished", jobs.Queued, `UPDATE docket.jobs SET outcome_token = gen_random_uuid() WHERE id = $1`, nil},
		{"jobs_queued_has_attempts_left", jobs.Queued, `UPDATE docket.jobs SET attempts = max_attempts WHERE id = $1`, nil},
		{"jobs_result_only_succeeded", jobs.Queued, `UPDATE docket.jobs SET result = '{"ok": true}' WHERE id = $1`, nil},
		{"jobs_terminal_finished", jobs.Queued, `UPDATE docket.jobs SET finished_at = updated_at WHERE id = $1`, nil},
		{"jobs_terminal_finished", jobs.Claimed,
			`UPDATE docket.jobs SET state = 'succeeded', claim_token = NULL, claimed_by = NULL, claimed_at = NULL,
			        lease_expires_at = NULL WHERE id = $1`, nil},
		{"jobs_updated_not_before_created", jobs.Queued,
			`UPDATE docket.jobs SET updated_at = created_at - interval '1 second' WHERE id = $1`, nil},
		{"jobs_backoff_cap_range", "", insert, []any{mRawAt, "8 days", nil}},
		{"jobs_request_names_asset", "", insert, []any{mRawAt, "10 minutes", "image/png"}},
	} {
		t.Run(c.rule+"_"+string(c.from), func(t *testing.T) {
			t.Parallel()
			var err error
			if c.from == "" {
				// A database of its own: the whole of it must be unchanged,
				// and the other subtests add jobs to theirs meanwhile.
				own := setup(t)
				snap := snapshot(t, own.Pool)
				err = mOperatorExec(t, own.Pool, mRawAt, c.sql, c.args...)
				require.Equal(t, snap, snapshot(t, own.Pool), "a refused insert adds nothing")
			} else {
				j, _ := mBuild(t, e, c.from, mOpts{})
				snap := snapshotOf(t, e.Pool, j.ID)
				err = mOperatorExec(t, e.Pool, mRawAt, c.sql, j.ID)
				require.Equal(t, snap, snapshotOf(t, e.Pool, j.ID), "a refused update changes nothing")
			}
			mRequireRefused(t, err, db.ErrInvalidArgument, "23514")
			var de *db.Error
			require.ErrorAs(t, err, &de)
			require.Equal(t, c.rule, de.Constraint, "%v", err)
			require.Contains(t, err.Error(), `violates check constraint "`+c.rule+`"`)
		})
	}
}

// TestMachineAppendOnly: jobs are never deleted and their events never
// change: DELETE of a job, and UPDATE or DELETE of an event, are refused with
// DK015 and change nothing.
func TestMachineAppendOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j, _ := mBuild(t, e, jobs.Succeeded, mOpts{})
	snap := snapshot(t, e.Pool)
	for _, c := range []struct{ name, sql string }{
		{"delete_job", `DELETE FROM docket.jobs WHERE id = $1`},
		{"delete_all_jobs", `DELETE FROM docket.jobs WHERE id = $1 OR true`},
		{"update_event_detail", `UPDATE docket.job_events SET detail = 'forged' WHERE job_id = $1 AND seq = 2`},
		{"update_event_to_itself", `UPDATE docket.job_events SET actor = actor WHERE job_id = $1 AND seq = 1`},
		{"update_event_hash", `UPDATE docket.job_events SET hash = sha256(hash) WHERE job_id = $1`},
		{"delete_event", `DELETE FROM docket.job_events WHERE job_id = $1 AND seq = 1`},
		{"delete_last_event", `DELETE FROM docket.job_events WHERE job_id = $1 AND seq = 2`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := mOperatorExec(t, e.Pool, mRawAt, c.sql, j.ID)
			mRequireRefused(t, err, db.ErrImmutable, "DK015")
			require.Equal(t, snap, snapshot(t, e.Pool))
		})
	}
}

// mDocTransitions reads the "from → to | to" lines of a doc comment, dropping
// parenthesised notes.
func mDocTransitions(t testing.TB, doc string) map[mPair]bool {
	t.Helper()
	line := regexp.MustCompile(`^\s*([a-z]+)\s*→\s*(.+)$`)
	note := regexp.MustCompile(`\([^)]*\)`)
	known := map[jobs.State]bool{}
	for _, s := range jobs.States {
		known[s] = true
	}
	out := map[mPair]bool{}
	for _, l := range strings.Split(doc, "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		from := jobs.State(m[1])
		require.True(t, known[from], "doc names unknown state %q", from)
		for _, to := range strings.Split(note.ReplaceAllString(m[2], ""), "|") {
			p := mPair{from, jobs.State(strings.TrimSpace(to))}
			require.True(t, known[p.to], "doc names unknown state %q", p.to)
			require.False(t, out[p], "doc lists %v twice", p)
			out[p] = true
		}
	}
	return out
}

// TestMachineGoAgreesWithTables: jobs.States, State.Terminal and the initial
// state enqueueing gives agree with docket.job_states, and the transitions the
// package doc and the State doc list agree with docket.job_transitions.
func TestMachineGoAgreesWithTables(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()

	rows, err := e.Pool.Query(ctx, `SELECT state, initial, terminal FROM docket.job_states`)
	require.NoError(t, err)
	var states []jobs.State
	var initial []jobs.State
	for rows.Next() {
		var s string
		var init, term bool
		require.NoError(t, rows.Scan(&s, &init, &term))
		states = append(states, jobs.State(s))
		if init {
			initial = append(initial, jobs.State(s))
		}
		require.Equal(t, term, jobs.State(s).Terminal(), "Terminal() of %s", s)
	}
	require.NoError(t, rows.Err())
	require.ElementsMatch(t, states, jobs.States)
	seen := map[jobs.State]bool{}
	for _, s := range jobs.States {
		require.False(t, seen[s], "jobs.States lists %s twice", s)
		seen[s] = true
	}
	require.Equal(t, []jobs.State{jobs.Queued}, initial)
	enq, err := e.client.Enqueue(ctx, spec(`{}`))
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, enq.Job.State)

	legal := mLegalPairs(t, e.Pool)
	require.Len(t, legal, 20)

	fset := token.NewFileSet()
	docFile, err := parser.ParseFile(fset, "doc.go", nil, parser.ParseComments)
	require.NoError(t, err)
	require.NotNil(t, docFile.Doc)
	require.Equal(t, legal, mDocTransitions(t, docFile.Doc.Text()), "package doc (doc.go)")

	jobFile, err := parser.ParseFile(fset, "job.go", nil, parser.ParseComments)
	require.NoError(t, err)
	var stateDoc string
	for _, d := range jobFile.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, sp := range g.Specs {
			if ts := sp.(*ast.TypeSpec); ts.Name.Name == "State" {
				stateDoc = g.Doc.Text() + ts.Doc.Text()
			}
		}
	}
	require.NotEmpty(t, stateDoc)
	require.Equal(t, legal, mDocTransitions(t, stateDoc), "State doc (job.go)")
}

// mVerifyShapes drive real histories of several shapes through the API and
// return the job and how many events it has.
var mVerifyShapes = []struct {
	name  string
	drive func(t *testing.T, e env) (id int64, events int)
}{
	{"retried_then_succeeded", mRetriedThenSucceeded},
	{"taken_over_after_lease_expiry", func(t *testing.T, e env) (int64, int) {
		ctx := t.Context()
		s := spec(`{"invoice": 7}`)
		s.Repeatable = true
		s.Lease = time.Minute
		enq, err := e.client.Enqueue(ctx, s)
		require.NoError(t, err)
		first := mClaimOne(t, e)
		e.Clock.Advance(time.Minute)
		second := mClaimOne(t, e)
		require.Equal(t, enq.Job.ID, second.ID)
		require.Equal(t, first.LeaseGeneration+1, second.LeaseGeneration)
		require.Equal(t, 2, second.Attempts)
		_, err = e.client.Complete(ctx, first.Lease(), nil, nil)
		require.ErrorIs(t, err, db.ErrStaleClaim, "the lost holder's lease is gone")
		_, err = e.client.Complete(ctx, second.Lease(), []byte(`{"paid": true}`), nil)
		require.NoError(t, err)
		// The takeover ends the first attempt (its event names the first
		// claim) and makes the second claim, which its completion ends.
		h := mHistory(t, e, second.ID)
		require.Equal(t, jobs.Claimed, h[1].From)
		require.Equal(t, jobs.Claimed, h[1].To)
		require.Equal(t, first.ClaimedAt, h[1].ClaimedAt)
		require.Equal(t, second.ClaimedAt, h[2].ClaimedAt)
		return second.ID, 3
	}},
	{"uncertain_then_reconciled", func(t *testing.T, e env) (int64, int) {
		ctx := t.Context()
		j, l := mBuild(t, e, jobs.Uncertain, mOpts{maxAttempts: 3})
		_, err := e.client.Reconcile(ctx, j.ID, jobs.RunAgain, nil, "not charged")
		require.NoError(t, err)
		c := mClaimOne(t, e)
		require.NotEqual(t, l.Token, c.Lease().Token)
		// The second attempt's worker is lost: its lease expires.
		e.Clock.Advance(c.LeaseDuration)
		swept, err := e.client.ExpireLeases(ctx, 10)
		require.NoError(t, err)
		require.Len(t, swept, 1)
		require.Equal(t, jobs.Uncertain, swept[0].State)
		done, err := e.client.Reconcile(ctx, j.ID, jobs.DidSucceed, []byte(`{"charged": true}`), "found the charge")
		require.NoError(t, err)
		require.Equal(t, jobs.Succeeded, done.State)
		return j.ID, 5
	}},
	{"cancelled_with_compensation", func(t *testing.T, e env) (int64, int) {
		ctx := t.Context()
		s := spec(`{"invoice": 7}`)
		s.CompensationKind = "billing.void"
		_, err := e.client.Enqueue(ctx, s)
		require.NoError(t, err)
		c := mClaimOne(t, e)
		e.Clock.Advance(time.Second)
		_, err = e.client.Cancel(ctx, c.ID, "customer left")
		require.NoError(t, err)
		comp, err := e.client.List(ctx, jobs.Filter{Kind: "billing.void"})
		require.NoError(t, err)
		require.Len(t, comp, 1)
		require.Equal(t, "compensate:"+strconv.FormatInt(c.ID, 10), comp[0].IdempotencyKey)
		mRequireVerifies(t, e, comp[0].ID, 1)
		return c.ID, 2
	}},
}

// mClaimOne claims the one due job of the default queue.
func mClaimOne(t testing.TB, e env) jobs.Job {
	t.Helper()
	got, err := e.client.Claim(t.Context(), jobs.DefaultQueue, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	return got[0]
}

// mRetriedThenSucceeded: queued; claimed, a retryable failure, queued again
// after its backoff; claimed, succeeded: three events, one per attempt.
func mRetriedThenSucceeded(t *testing.T, e env) (int64, int) {
	ctx := t.Context()
	s := spec(`{"invoice": 7}`)
	s.Retry = jobs.RetryPolicy{Base: time.Second, MaxAttempts: 3} // no jitter
	_, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	c := mClaimOne(t, e)
	failed, err := e.client.Fail(ctx, c.Lease(), jobs.Failure{Diagnostic: "gateway timeout"})
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, failed.State)
	require.Equal(t, e.Clock.Now().Add(time.Second), failed.AvailableAt)
	none, err := e.client.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Empty(t, none, "not due before its backoff")
	e.Clock.Advance(time.Second)
	c = mClaimOne(t, e)
	require.Equal(t, 2, c.Attempts)
	_, err = e.client.Complete(ctx, c.Lease(), []byte(`{"paid": true}`), nil)
	require.NoError(t, err)
	return c.ID, 3
}

// TestMachineVerify: Verify passes real histories of several shapes, and
// finds an event the table owner altered or deleted behind the append-only
// trigger, and a job row changed behind the machine's back.
func TestMachineVerify(t *testing.T) {
	t.Parallel()
	for _, shape := range mVerifyShapes {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			id, events := shape.drive(t, e)
			require.Len(t, mHistory(t, e, id), events)
			mRequireVerifies(t, e, id, events)
		})
	}

	// behindTheTriggers runs stmt (on job $1) as the table owner with table's
	// user triggers named by which disabled, then enables them again.
	behindTheTriggers := func(t *testing.T, e env, table, which, stmt string, id int64) {
		t.Helper()
		ctx := t.Context()
		require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `ALTER TABLE `+table+` DISABLE TRIGGER `+which); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, stmt, id)
			if err != nil {
				return err
			}
			require.Equal(t, int64(1), tag.RowsAffected())
			_, err = tx.Exec(ctx, `ALTER TABLE `+table+` ENABLE TRIGGER `+which)
			return err
		}))
	}

	for _, c := range []struct {
		name, set string
		altered   bool
	}{
		{"event_detail_altered", "detail = 'gateway fine'", true},
		{"event_actor_altered", "actor = 'user:mallory'", true},
		{"event_at_altered", "at = at + interval '1 microsecond'", true},
		// The control: an event rewritten with its own values is intact.
		{"event_rewritten_as_itself", "(detail, actor, at) = (detail, actor, at)", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			id, events := mRetriedThenSucceeded(t, e)
			behindTheTriggers(t, e, "docket.job_events", "job_events_append_only",
				`UPDATE docket.job_events SET `+c.set+` WHERE job_id = $1 AND seq = 3`, id)
			err := mOperatorExec(t, e.Pool, mRawAt, `UPDATE docket.job_events SET detail = detail WHERE job_id = $1`, id)
			mRequireRefused(t, err, db.ErrImmutable, "DK015") // the trigger is back

			v, err := e.client.Verify(t.Context(), id)
			require.NoError(t, err)
			if !c.altered {
				require.Equal(t, jobs.Verification{OK: true, Events: events}, v)
				return
			}
			require.False(t, v.OK)
			require.Equal(t, 3, v.BadSeq)
			require.Equal(t, 3, v.Events)
			require.Contains(t, v.Problem, "hash")
		})
	}

	t.Run("middle_event_deleted", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		id, _ := mRetriedThenSucceeded(t, e)
		behindTheTriggers(t, e, "docket.job_events", "job_events_refuse_delete",
			`DELETE FROM docket.job_events WHERE job_id = $1 AND seq = 2`, id)
		v, err := e.client.Verify(t.Context(), id)
		require.NoError(t, err)
		require.False(t, v.OK)
		require.Equal(t, 3, v.BadSeq, "the event after the gap")
		require.Contains(t, v.Problem, "missing")
	})

	t.Run("job_state_changed_behind_the_machine", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		j, _ := mBuild(t, e, jobs.Queued, mOpts{})
		behindTheTriggers(t, e, "docket.jobs", "USER",
			`UPDATE docket.jobs SET state = 'succeeded', finished_at = updated_at WHERE id = $1`, j.ID)
		err := mOperatorExec(t, e.Pool, mRawAt, `UPDATE docket.jobs SET priority = 2 WHERE id = $1`, j.ID)
		mRequireRefused(t, err, db.ErrIllegalTransition, "DK001") // the guard is back
		require.Len(t, mHistory(t, e, j.ID), 1, "no event was recorded")

		v, err := e.client.Verify(t.Context(), j.ID)
		require.NoError(t, err)
		require.False(t, v.OK)
		require.Equal(t, 0, v.BadSeq)
		require.Equal(t, 1, v.Events)
		require.Contains(t, v.Problem, "succeeded")
	})

	t.Run("unknown_job", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		_, err := e.client.Verify(t.Context(), 424242)
		require.ErrorIs(t, err, db.ErrNotFound)
	})
}

// TestMachineNonMovesRecordNoEvent: only moves are events. Renewing a lease
// (which counts itself on the row),
// changing a queued job's priority or writing a state as itself records
// nothing; one statement moving several jobs records exactly one event for
// each.
func TestMachineNonMovesRecordNoEvent(t *testing.T) {
	t.Parallel()
	shared := setup(t)

	nonMoves := []struct {
		name string
		from jobs.State
		set  string
		// took is true of the row once the statement took effect.
		took string
	}{
		// A renewal by hand counts itself, as job_renew does (one that does
		// not is refused: TestALeaseEditedByHandIsCaught).
		{"renew_lease", jobs.Claimed,
			"lease_expires_at = lease_expires_at + interval '10 minutes', renewals = renewals + 1, renewed_at = docket.context_now()",
			"lease_expires_at - claimed_at = lease + interval '10 minutes' AND renewals = 1"},
		{"priority", jobs.Queued, "priority = 3", "priority = 3"},
		{"priority_of_claimed", jobs.Claimed, "priority = 2", "priority = 2"},
		{"queued_state_as_itself", jobs.Queued, "state = 'queued', available_at = available_at + interval '1 hour'",
			"state = 'queued' AND available_at = created_at + interval '1 hour'"},
	}
	for _, c := range nonMoves {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := mOwnClock(t, shared)
			j, _ := mBuild(t, e, c.from, mOpts{})
			before := mHistory(t, e, j.ID)
			require.NoError(t, mOperatorExec(t, e.Pool, mRawAt, `UPDATE docket.jobs SET `+c.set+` WHERE id = $1`, j.ID))

			var took bool
			require.NoError(t, e.Pool.QueryRow(t.Context(), `SELECT `+c.took+` FROM docket.jobs WHERE id = $1`, j.ID).Scan(&took))
			require.True(t, took, "the statement took effect")
			require.Equal(t, before, mHistory(t, e, j.ID), "and recorded nothing")
			mRequireVerifies(t, e, j.ID, len(before))
		})
	}

	// An edit of what a transition recorded, here an uncertain job's
	// diagnostic, is no move and records nothing, but the history no longer
	// verifies: the job does not hold what its last event says.
	t.Run("uncertain_diagnostic_rewritten", func(t *testing.T) {
		t.Parallel()
		e := mOwnClock(t, shared)
		j, _ := mBuild(t, e, jobs.Uncertain, mOpts{})
		before := mHistory(t, e, j.ID)
		require.NoError(t, mOperatorExec(t, e.Pool, mRawAt, `UPDATE docket.jobs SET state = state, diagnostic = 'still unsure' WHERE id = $1`, j.ID))
		require.Equal(t, before, mHistory(t, e, j.ID), "recorded nothing")
		v, err := e.client.Verify(t.Context(), j.ID)
		require.NoError(t, err)
		require.False(t, v.OK)
		require.Equal(t, len(before), v.BadSeq)
		require.Contains(t, v.Problem, "no longer holds what event")
	})

	t.Run("api_renew", func(t *testing.T) {
		t.Parallel()
		e := mOwnClock(t, shared)
		j, l := mBuild(t, e, jobs.Claimed, mOpts{})
		before := mHistory(t, e, j.ID)
		e.Clock.Advance(time.Minute)
		r, err := e.client.Renew(t.Context(), l, time.Hour)
		require.NoError(t, err)
		require.Equal(t, e.Clock.Now().Add(time.Hour), r.LeaseExpiresAt)
		require.Equal(t, before, mHistory(t, e, j.ID))
	})

	t.Run("one_statement_many_moves", func(t *testing.T) {
		t.Parallel()
		e := mOwnClock(t, shared)
		var ids []int64
		befores := map[int64][]jobs.Event{}
		for range 3 {
			j, _ := mBuild(t, e, jobs.Queued, mOpts{})
			ids = append(ids, j.ID)
			befores[j.ID] = mHistory(t, e, j.ID)
		}
		other, _ := mBuild(t, e, jobs.Claimed, mOpts{})
		otherBefore := mHistory(t, e, other.ID)
		err := mOperatorExec(t, e.Pool, mRawAt, `
			UPDATE docket.jobs SET state = 'cancelled', finished_at = $2, diagnostic = 'swept by hand'
			WHERE id = ANY($1)`, ids, mRawAt)
		require.NoError(t, err)
		for _, id := range ids {
			mRequireOneMove(t, e, id, befores[id], jobs.Queued, jobs.Cancelled, string(ana), mRawAt)
		}
		require.Equal(t, otherBefore, mHistory(t, e, other.ID), "a job the statement did not move")
	})
}
