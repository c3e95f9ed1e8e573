package jobs_test

import (
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// budgeted is a spec with budget b.
func budgeted(payload string, b jobs.Budget) jobs.Spec {
	s := spec(payload)
	s.Budget = b
	return s
}

var euros = func(n int64) jobs.Budget { return jobs.Budget{Money: n, Currency: "EUR"} }

// TestAnAttemptOverItsCeilingExhaustsTheJob: a job with a money ceiling of
// 1,000 whose attempt fails reporting 1,500 spent is exhausted, not failed
// and not retried, and says which ceiling; nobody claims it. A raise to
// 3,000, recorded with who made it, queues it again; it succeeds, and its
// history verifies.
func TestAnAttemptOverItsCeilingExhaustsTheJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := claimed(t, e, budgeted(`{"invoice": 1}`, euros(1000)))
	require.Equal(t, euros(1000), j.Budget)

	got, err := e.client.Fail(ctx, j.Lease(), jobs.Failure{Diagnostic: "the card network timed out", Spent: jobs.Spend{Money: 1500}})
	require.NoError(t, err)
	require.Equal(t, jobs.Exhausted, got.State)
	require.Equal(t, jobs.Spend{Money: 1500}, got.Spent)
	require.Equal(t, "exhausted: money: 1500 of 1000 EUR spent; the attempt failed: the card network timed out", got.Diagnostic)
	require.True(t, got.FinishedAt.IsZero(), "exhausted is not finished")
	_, ok, err := e.client.ClaimID(ctx, j.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.False(t, ok, "an exhausted job is claimed by nobody")

	e.Clock.Advance(time.Minute)
	resumed, err := e.client.Resume(ctx, j.ID, jobs.Ceilings{Money: 3000})
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, resumed.State)
	require.Equal(t, euros(3000), resumed.Budget)
	require.Equal(t, e.Clock.Now(), resumed.AvailableAt, "due at once")
	history, err := e.client.History(ctx, j.ID)
	require.NoError(t, err)
	last := history[len(history)-1]
	require.Equal(t, jobs.Exhausted, last.From)
	require.Equal(t, jobs.Queued, last.To)
	require.Equal(t, "resumed by "+string(app)+": money 1000 -> 3000 EUR", last.Detail)
	again, err := e.client.Resume(ctx, j.ID, jobs.Ceilings{Money: 3000})
	require.NoError(t, err, "the same resume again is a quiet no-op")
	require.Equal(t, resumed, again)

	c, ok, err := e.client.ClaimID(ctx, j.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	done, err := e.client.CompleteWith(ctx, jobs.Completion{Lease: c.Lease(), Spent: jobs.Spend{Money: 700}}, nil)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, done.State)
	require.Equal(t, jobs.Spend{Money: 2200}, done.Spent)
	v, err := e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
}

// TestASuccessStandsWhateverItSpent: an attempt that succeeded reporting
// more than the ceiling succeeded; what it spent is recorded.
func TestASuccessStandsWhateverItSpent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := claimed(t, e, budgeted(`{"invoice": 2}`, jobs.Budget{Effects: 1}))
	errs, err := e.client.CompleteMany(ctx, []jobs.Completion{{Lease: j.Lease(), Spent: jobs.Spend{Effects: 3, Money: 12}}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	got, err := e.client.Get(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, got.State)
	require.Equal(t, jobs.Spend{Effects: 3, Money: 12}, got.Spent)
}

// TestAnEffectsCeilingCountsEveryAttempt: two effects allowed; the first
// failed attempt spends one and the job is retried; the second spends the
// other and the job is exhausted, though it has attempts left. On the last
// attempt the job is dead as ever.
func TestAnEffectsCeilingCountsEveryAttempt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	s := budgeted(`{"invoice": 3}`, jobs.Budget{Effects: 2})
	s.Retry = jobs.RetryPolicy{MaxAttempts: 5}
	j := claimed(t, e, s)
	got, err := e.client.Fail(ctx, j.Lease(), jobs.Failure{Diagnostic: "one sent", Spent: jobs.Spend{Effects: 1}, RetryAfter: -1})
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, got.State)
	j, ok, err := e.client.ClaimID(ctx, j.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	got, err = e.client.Fail(ctx, j.Lease(), jobs.Failure{Diagnostic: "another sent", Spent: jobs.Spend{Effects: 1}})
	require.NoError(t, err)
	require.Equal(t, jobs.Exhausted, got.State)
	require.Contains(t, got.Diagnostic, "effects: 2 of 2 spent")

	last := budgeted(`{"invoice": 4}`, jobs.Budget{Effects: 1})
	last.Retry = jobs.RetryPolicy{MaxAttempts: 1}
	l := claimed(t, e, last)
	got, err = e.client.Fail(ctx, l.Lease(), jobs.Failure{Diagnostic: "sent", Spent: jobs.Spend{Effects: 1}})
	require.NoError(t, err)
	require.Equal(t, jobs.Dead, got.State, "no attempt left: dead, whatever the budget")
}

// TestBudgetRefusalsChangeNothing: malformed budgets and spend reports, a
// resume by someone without budget.manage, a lowered or insufficient
// ceiling, a resume of a job that is not exhausted, and a resume by
// another project's login are each refused with their sentinel, and the
// database is as it was.
func TestBudgetRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, "beta")
	ctx := t.Context()
	ex := claimed(t, e, budgeted(`{"invoice": 5}`, euros(100)))
	_, err := e.client.Fail(ctx, ex.Lease(), jobs.Failure{Diagnostic: "spent it", Spent: jobs.Spend{Money: 100}})
	require.NoError(t, err)
	held := claimed(t, e, budgeted(`{"invoice": 6}`, euros(100)))
	before := snapshot(t, e.Pool)

	for _, b := range []jobs.Budget{{Effects: -1}, {Money: 5}, {Currency: "EUR"}, {Money: 5, Currency: "eur"}, {Money: -5, Currency: "EUR"}} {
		_, err := e.client.Enqueue(ctx, budgeted(`{}`, b))
		require.ErrorIs(t, err, db.ErrInvalidArgument, "%+v", b)
	}
	// The database refuses what Go would, for a caller of its own.
	for _, b := range []string{`{"money": 999.5, "currency": "EUR"}`, `{"money": 0, "currency": "EUR"}`, `{"effects": "2"}`,
		`{"money": 5}`, `{"effects": 1, "seconds": 5}`, `[1]`} {
		err := testkit.Raw(ctx, e.API, app, e.Clock.Now(), `SELECT FROM docket.job_enqueue_one($1, $2, $3, 'billing.invoice', 'default', 1::smallint,
			'{}', 1, '', NULL, 5, false, false, interval '5 minutes', interval '1 second', interval '1 hour', 0, NULL, '{}', '', 0, 0, '',
			NULL, NULL, $4::jsonb)`, project, string(app), e.Clock.Now(), b)
		require.ErrorIs(t, err, db.ErrInvalidArgument, b)
		require.ErrorContains(t, err, "invalid budget", b)
	}
	_, err = e.client.Fail(ctx, held.Lease(), jobs.Failure{Spent: jobs.Spend{Money: -1}})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = e.client.CompleteWith(ctx, jobs.Completion{Lease: held.Lease(), Spent: jobs.Spend{Effects: -1}}, nil)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = e.client.CompleteMany(ctx, []jobs.Completion{{Lease: held.Lease(), Spent: jobs.Spend{Money: -1}}})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	err = testkit.Raw(ctx, e.API, app, e.Clock.Now(), `SELECT FROM docket.job_complete_many(ARRAY[$1::bigint], ARRAY[$2::uuid], '{null}',
		$3, $4, NULL, NULL, '{0}', '{-5}')`, held.ID, held.Lease().Token, string(app), e.Clock.Now())
	require.ErrorIs(t, err, db.ErrInvalidArgument)

	for _, c := range []struct {
		id   int64
		to   jobs.Ceilings
		want error
	}{
		{ex.ID, jobs.Ceilings{Money: 50}, db.ErrInvalidArgument},      // lowered
		{ex.ID, jobs.Ceilings{Money: 100}, db.ErrInvalidArgument},     // still at what was spent
		{ex.ID, jobs.Ceilings{Effects: 10}, db.ErrInvalidArgument},    // a ceiling it has not
		{ex.ID, jobs.Ceilings{Money: -1}, db.ErrInvalidArgument},      // malformed
		{held.ID, jobs.Ceilings{Money: 500}, db.ErrIllegalTransition}, // not exhausted
		{ex.ID + 1000, jobs.Ceilings{Money: 500}, db.ErrNotFound},
	} {
		_, err := e.client.Resume(ctx, c.id, c.to)
		require.ErrorIs(t, err, c.want, "%+v", c)
	}

	// Without budget.manage: refused. Another project's login does not
	// even see the job.
	clerk := access.Actor("user:clerk")
	e.Allow(t, testkit.Grants(clerk, project, access.JobCreate, access.JobCancel)...)
	_, err = clientAs(t, e.Login(t, testkit.AppRole, clerk).Pool, e.Clock, clerk).Resume(ctx, ex.ID, jobs.Ceilings{Money: 500})
	require.ErrorIs(t, err, db.ErrNotPermitted)
	mallory := access.Actor("user:mallory")
	e.Allow(t, testkit.Grants(mallory, "beta", access.BudgetManage, access.JobCreate, access.JobClaim)...)
	foreign := e.Login(t, testkit.AppRole, mallory)
	_, err = clientAs(t, foreign.Pool, e.Clock, mallory).Resume(ctx, ex.ID, jobs.Ceilings{Money: 500})
	require.ErrorIs(t, err, db.ErrNotFound)
	var seen int
	require.NoError(t, foreign.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.jobs_exhausted`).Scan(&seen))
	require.Zero(t, seen, "another project's login sees none of acme's exhausted jobs")

	require.Equal(t, before, snapshot(t, e.Pool), "refusals change nothing")
}

// TestAnotherBudgetIsAnotherRequest: the same idempotency key with another
// budget is a conflict naming it; with the same budget, a duplicate.
func TestAnotherBudgetIsAnotherRequest(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	s := budgeted(`{"invoice": 8}`, euros(100))
	s.IdempotencyKey = "inv-8"
	first, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	dup, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.Equal(t, first.Job.ID, dup.Job.ID)
	for _, b := range []jobs.Budget{euros(200), {}, {Money: 100, Currency: "USD"}, {Effects: 1, Money: 100, Currency: "EUR"}} {
		s.Budget = b
		_, err := e.client.Enqueue(ctx, s)
		require.ErrorIs(t, err, db.ErrIdempotencyConflict, "%+v", b)
		require.ErrorContains(t, err, "budget")
		_, err = e.client.EnqueueMany(ctx, []jobs.Spec{s})
		require.ErrorIs(t, err, db.ErrIdempotencyConflict, "%+v", b)
	}
}

// setQuota gives project acme a quota of amount EUR a day, from t0's day,
// as the owner.
func setQuota(t *testing.T, e env, amount int64) {
	t.Helper()
	_, err := e.Pool.Exec(t.Context(), `INSERT INTO docket.budget_quotas (project, currency, period, anchor, amount, updated_by, updated_at)
		VALUES ($1, 'EUR', interval '1 day', $2, $3, 'user:ana', $2)
		ON CONFLICT (project, currency) DO UPDATE SET amount = EXCLUDED.amount`, project, t0.Truncate(24*time.Hour), amount)
	require.NoError(t, err)
}

// reserved is what job id's reservations hold, in all.
func reserved(t *testing.T, e env, id int64) int64 {
	t.Helper()
	var n int64
	require.NoError(t, e.Pool.QueryRow(t.Context(), `SELECT coalesce(sum(amount), 0) FROM docket.budget_reservations WHERE job_id = $1`, id).Scan(&n))
	return n
}

// TestAClaimReservesInTheQuota: with 1,500 EUR a day, a claim of a job
// whose ceiling is 1,000 reserves 1,000; a second such job's claim finds no
// room and leaves it exhausted, saying so. The first attempt's end shrinks
// its reservation to the 200 it spent, and the second, resumed, is claimed.
// The next day a claim reserves in the next day's period.
func TestAClaimReservesInTheQuota(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	setQuota(t, e, 1500)
	a := claimed(t, e, budgeted(`{"a": 1}`, euros(1000)))
	require.Equal(t, int64(1000), reserved(t, e, a.ID))
	b, err := e.client.Enqueue(ctx, budgeted(`{"b": 1}`, euros(1000)))
	require.NoError(t, err)
	_, ok, err := e.client.ClaimID(ctx, b.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.False(t, ok)
	got, err := e.client.Get(ctx, b.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Exhausted, got.State)
	require.Contains(t, got.Diagnostic, "past its quota")
	require.Zero(t, reserved(t, e, b.Job.ID))

	_, err = e.client.Fail(ctx, a.Lease(), jobs.Failure{Diagnostic: "declined", Spent: jobs.Spend{Money: 200}, RetryAfter: -1})
	require.NoError(t, err)
	require.Equal(t, int64(200), reserved(t, e, a.ID), "an ended attempt holds what it spent")
	_, err = e.client.Resume(ctx, b.Job.ID, jobs.Ceilings{})
	require.NoError(t, err, "a job the quota stopped resumes as it was")
	bj, ok, err := e.client.ClaimID(ctx, b.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok, "200 + 1,000 fits in 1,500")
	_, err = e.client.CompleteWith(ctx, jobs.Completion{Lease: bj.Lease(), Spent: jobs.Spend{Money: 1000}}, nil)
	require.NoError(t, err)

	// The next day: a's retry reserves its 800 left there; the 200 it spent
	// stays on the first day.
	e.Clock.Advance(24 * time.Hour)
	a, ok, err = e.client.ClaimID(ctx, a.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	rows, err := e.Pool.Query(ctx, `SELECT period_start, amount FROM docket.budget_reservations WHERE job_id = $1 ORDER BY period_start`, a.ID)
	require.NoError(t, err)
	type held struct {
		Start  time.Time
		Amount int64
	}
	periods, err := pgx.CollectRows(rows, pgx.RowToStructByPos[held])
	require.NoError(t, err)
	for i := range periods {
		periods[i].Start = periods[i].Start.UTC()
	}
	day := t0.Truncate(24 * time.Hour)
	require.Equal(t, []held{{day, 200}, {day.Add(24 * time.Hour), 800}}, periods)
}

// TestTheQuotaHoldsUnderConcurrentClaims: ten jobs of 1,000 each, claimed at
// once by ten goroutines under a quota of 5,000: exactly five are claimed,
// the others exhausted, and the period holds 5,000. Repeated.
func TestTheQuotaHoldsUnderConcurrentClaims(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		e := setup(t)
		ctx := t.Context()
		setQuota(t, e, 5000)
		ids := make([]int64, 10)
		for i := range ids {
			enq, err := e.client.Enqueue(ctx, budgeted(`{}`, euros(1000)))
			require.NoError(t, err)
			ids[i] = enq.Job.ID
		}
		release := make(chan struct{})
		var wg sync.WaitGroup
		won := make([]bool, len(ids))
		errs := make([]error, len(ids))
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-release
				_, won[i], errs[i] = e.client.ClaimID(ctx, id, jobs.ClaimOptions{})
			}()
		}
		close(release)
		wg.Wait()
		n := 0
		for i := range ids {
			require.NoError(t, errs[i])
			if won[i] {
				n++
			}
		}
		require.Equal(t, 5, n, "round %d", round)
		var total int64
		var exhausted int
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT (SELECT sum(amount) FROM docket.budget_reservations),
			(SELECT count(*) FROM docket.jobs WHERE state = 'exhausted')`).Scan(&total, &exhausted))
		require.Equal(t, int64(5000), total)
		require.Equal(t, 5, exhausted)
	}
}

// TestSpendingEditedByHandIsCaught: the owner's raw UPDATE of what a job
// spent, or of its ceilings, is refused (DK001) and changes nothing; made
// with the triggers off, verification finds it, for the outcome digest
// covers what was spent.
func TestSpendingEditedByHandIsCaught(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := claimed(t, e, budgeted(`{"invoice": 9}`, euros(1000)))
	_, err := e.client.Fail(ctx, j.Lease(), jobs.Failure{Diagnostic: "declined", Spent: jobs.Spend{Money: 300}, RetryAfter: -1})
	require.NoError(t, err)
	before := snapshot(t, e.Pool)
	for _, edit := range []string{
		`UPDATE docket.jobs SET spent_money = 0 WHERE id = $1`,
		`UPDATE docket.jobs SET spent_money = 2000 WHERE id = $1`,
		`UPDATE docket.jobs SET max_money = 5000 WHERE id = $1`,
		`UPDATE docket.jobs SET max_money = NULL, currency = NULL WHERE id = $1`,
	} {
		err := mOperatorExec(t, e.Pool, e.Clock.Now(), edit, j.ID)
		require.ErrorIs(t, err, db.ErrIllegalTransition, edit)
	}
	require.Equal(t, before, snapshot(t, e.Pool), "refused edits change nothing")

	tx, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	withTriggersOff(t, tx, `UPDATE docket.jobs SET spent_money = 0 WHERE id = $1`, j.ID)
	require.NoError(t, tx.Commit(ctx))
	v, err := e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.False(t, v.OK)
	require.Contains(t, v.Problem, "no longer holds what event")
}
