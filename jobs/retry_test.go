package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// retryMaxDraw is the largest draw below 1, the strongest shortening jitter
// can give.
var retryMaxDraw = math.Nextafter(1, 0)

// Backoff, computed by hand: base doubled per attempt, capped, shortened by
// jitter × draw, floored to whole microseconds.
func TestBackoffTable(t *testing.T) {
	t.Parallel()
	plain := jobs.RetryPolicy{Base: time.Second, Cap: time.Minute, Jitter: 0, MaxAttempts: 8}
	half := jobs.RetryPolicy{Base: time.Second, Cap: time.Minute, Jitter: 0.5, MaxAttempts: 8}
	full := jobs.RetryPolicy{Base: time.Second, Cap: time.Minute, Jitter: 1, MaxAttempts: 8}
	milli := jobs.RetryPolicy{Base: time.Millisecond, Cap: time.Second, Jitter: 0.5, MaxAttempts: 8}
	long := jobs.RetryPolicy{Base: jobs.MaxBackoffBase, Cap: jobs.MaxBackoffCap, MaxAttempts: 100}
	wide := jobs.RetryPolicy{Base: jobs.MinBackoffBase, Cap: jobs.MaxBackoffCap, MaxAttempts: 100}
	odd := jobs.RetryPolicy{Base: time.Second, Cap: 90 * time.Second, MaxAttempts: 10}
	flat := jobs.RetryPolicy{Base: 5 * time.Second, Cap: 5 * time.Second, MaxAttempts: 10}

	for _, c := range []struct {
		name    string
		p       jobs.RetryPolicy
		attempt int
		draw    float64
		want    time.Duration
	}{
		// Doubling, then the cap.
		{"first", plain, 1, 0, time.Second},
		{"second", plain, 2, 0, 2 * time.Second},
		{"third", plain, 3, 0, 4 * time.Second},
		{"sixth", plain, 6, 0, 32 * time.Second},
		{"seventh capped", plain, 7, 0, time.Minute},
		{"eighth capped", plain, 8, 0, time.Minute},
		{"cap not a power of two below", odd, 7, 0, 64 * time.Second},
		{"cap not a power of two", odd, 8, 0, 90 * time.Second},
		{"base equals cap", flat, 1, 0, 5 * time.Second},
		{"base equals cap later", flat, 9, 0, 5 * time.Second},
		// Attempts below 1 count as 1.
		{"attempt 0", plain, 0, 0, time.Second},
		{"attempt -7", plain, -7, 0, time.Second},
		{"attempt MinInt", plain, math.MinInt, 0, time.Second},
		// Huge attempts do not overflow: they stay at the cap.
		{"attempt 63", plain, 63, 0, time.Minute},
		{"attempt 64", plain, 64, 0, time.Minute},
		{"attempt 65", plain, 65, 0, time.Minute},
		{"attempt MaxInt", plain, math.MaxInt, 0, time.Minute},
		{"24h base, third", long, 3, 0, 96 * time.Hour},
		{"24h base, fourth capped at 7d", long, 4, 0, 7 * 24 * time.Hour},
		{"24h base, attempt 1000", long, 1000, 0, 7 * 24 * time.Hour},
		{"24h base, attempt MaxInt", long, math.MaxInt, 0, 7 * 24 * time.Hour},
		{"1ms base, attempt 30 (2^29 ms)", wide, 30, 0, 536870912 * time.Millisecond},
		{"1ms base, attempt 31 capped", wide, 31, 0, 7 * 24 * time.Hour},
		{"1ms base, attempt 63", wide, 63, 0, 7 * 24 * time.Hour},
		{"1ms base, attempt 64", wide, 64, 0, 7 * 24 * time.Hour},
		// No jitter: the draw does not matter.
		{"jitter 0 ignores the draw", plain, 3, 0.9, 4 * time.Second},
		// Jitter shortens by jitter × draw of the delay.
		{"half jitter, draw 0", half, 3, 0, 4 * time.Second},
		{"half jitter, draw 0.5", half, 3, 0.5, 3 * time.Second},
		{"half jitter, capped, draw 0.5", half, 7, 0.5, 45 * time.Second},
		{"half jitter, largest draw", half, 3, retryMaxDraw, 2 * time.Second},
		{"full jitter, draw 0.5", full, 1, 0.5, 500 * time.Millisecond},
		{"full jitter, draw 0.999", full, 1, 0.999, time.Millisecond},
		{"full jitter, largest draw", full, 1, retryMaxDraw, 0},
		// Whole microseconds by floor, not by rounding: 1000 µs × 0.5015 = 501.5 µs.
		{"floored to the microsecond", milli, 1, 0.997, 501 * time.Microsecond},
		// The draw is clamped to [0, 1].
		{"draw 1", half, 3, 1, 2 * time.Second},
		{"draw 7.5 clamped to 1", half, 3, 7.5, 2 * time.Second},
		{"draw +Inf clamped to 1", half, 3, math.Inf(1), 2 * time.Second},
		{"draw -0.5 clamped to 0", half, 3, -0.5, 4 * time.Second},
		{"draw -Inf clamped to 0", half, 3, math.Inf(-1), 4 * time.Second},
		{"draw NaN as 0", half, 3, math.NaN(), 4 * time.Second},
	} {
		require.Equal(t, c.want, c.p.Backoff(c.attempt, c.draw), "%s: %+v attempt %d draw %v", c.name, c.p, c.attempt, c.draw)
	}
}

func TestBackoffZeroAndPartialPolicies(t *testing.T) {
	t.Parallel()
	// The zero policy is DefaultRetryPolicy, jitter included.
	for attempt := -1; attempt <= 70; attempt++ {
		for _, draw := range []float64{0, 0.25, 0.5, 0.75, retryMaxDraw} {
			require.Equal(t, jobs.DefaultRetryPolicy.Backoff(attempt, draw), jobs.RetryPolicy{}.Backoff(attempt, draw),
				"attempt %d draw %v", attempt, draw)
		}
	}
	zero := jobs.RetryPolicy{}
	require.Equal(t, time.Second, zero.Backoff(1, 0))
	require.Equal(t, 512*time.Second, zero.Backoff(10, 0))
	require.Equal(t, 10*time.Minute, zero.Backoff(11, 0))
	require.Equal(t, 900*time.Millisecond, zero.Backoff(1, 0.5)) // the default jitter 0.2

	// Any other policy takes the default's Base, Cap and MaxAttempts where
	// zero, and its Jitter as given: zero means none.
	for _, c := range []struct {
		p       jobs.RetryPolicy
		attempt int
		draw    float64
		want    time.Duration
	}{
		{jobs.RetryPolicy{MaxAttempts: 3}, 1, 0.9, time.Second},
		{jobs.RetryPolicy{MaxAttempts: 3}, 4, 0.9, 8 * time.Second},
		{jobs.RetryPolicy{MaxAttempts: 3}, 11, 0.5, 10 * time.Minute},
		{jobs.RetryPolicy{Base: 2 * time.Second, MaxAttempts: 2}, 2, 0, 4 * time.Second},
		{jobs.RetryPolicy{Base: 2 * time.Second}, 10, 0, 10 * time.Minute},
		// A base above the default cap raises the cap to the base.
		{jobs.RetryPolicy{Base: 20 * time.Minute}, 1, 0, 20 * time.Minute},
		{jobs.RetryPolicy{Base: 20 * time.Minute}, 5, 0, 20 * time.Minute},
		{jobs.RetryPolicy{Cap: 4 * time.Second}, 3, 0, 4 * time.Second},
		{jobs.RetryPolicy{Cap: 4 * time.Second}, 4, 0, 4 * time.Second},
		{jobs.RetryPolicy{Cap: 4 * time.Second}, 2, 0.99, 2 * time.Second},
		{jobs.RetryPolicy{Jitter: 0.5}, 1, 0.5, 750 * time.Millisecond},
		{jobs.RetryPolicy{Jitter: 0.5}, 11, 0, 10 * time.Minute},
	} {
		require.Equal(t, c.want, c.p.Backoff(c.attempt, c.draw), "%+v attempt %d draw %v", c.p, c.attempt, c.draw)
	}
}

// A partial policy is stored with its defaults applied: what Backoff computes
// in Go is what the database computes from the job's columns.
func TestPartialRetryPolicyIsStoredResolved(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct {
		given, stored jobs.RetryPolicy
	}{
		{jobs.RetryPolicy{}, jobs.DefaultRetryPolicy},
		{jobs.RetryPolicy{MaxAttempts: 3}, jobs.RetryPolicy{Base: time.Second, Cap: 10 * time.Minute, Jitter: 0, MaxAttempts: 3}},
		{jobs.RetryPolicy{Base: 20 * time.Minute}, jobs.RetryPolicy{Base: 20 * time.Minute, Cap: 20 * time.Minute, Jitter: 0, MaxAttempts: 5}},
		{jobs.RetryPolicy{Cap: 4 * time.Second, Jitter: 0.3}, jobs.RetryPolicy{Base: time.Second, Cap: 4 * time.Second, Jitter: 0.3, MaxAttempts: 5}},
	} {
		s := spec(`{}`)
		s.Retry = c.given
		j := retryEnqueue(t, e, s)
		require.Equal(t, c.stored, j.Retry, "given %+v", c.given)
	}
}

// backoffInBounds reports whether a policy and draw lie within the bounds
// docket.jobs enforces (base 1 ms .. 24 h, cap base .. 7 d, jitter 0..1) and a
// draw random() can give ([0, 1)).
func backoffInBounds(attempt int, baseMicros, capMicros int64, jitter, draw float64) bool {
	return attempt >= math.MinInt32 && attempt <= math.MaxInt32 && // SQL's p_attempt is an integer
		baseMicros >= jobs.MinBackoffBase.Microseconds() && baseMicros <= jobs.MaxBackoffBase.Microseconds() &&
		capMicros >= baseMicros && capMicros <= jobs.MaxBackoffCap.Microseconds() &&
		jitter >= 0 && jitter <= 1 && // false for NaN
		draw >= 0 && draw < 1
}

// RetryPolicy.Backoff is documented to compute exactly what
// docket.job_backoff computes: the database draws at random, so any
// difference would be a delay Go cannot predict or explain.
func FuzzBackoffMatchesDatabase(f *testing.F) {
	const (
		ms   = int64(1000)
		sec  = 1000 * ms
		day  = 86400 * sec
		week = 7 * day
	)
	for _, s := range []struct {
		attempt      int
		base, ceil   int64
		jitter, draw float64
	}{
		{1, sec, 600 * sec, 0.2, 0.5},
		{0, ms, ms, 0, 0},
		{-5, ms, week, 1, 0.999999},
		{math.MaxInt32, day, week, 0.5, retryMaxDraw},
		{math.MinInt32, day, week, 0.5, 0},
		{63, ms, week, 0, 0},
		{64, ms, week, 0, 0},
		{65, ms, week, 0.7, 0.3},
		{30, ms, week, 0.3, 0.1},
		{31, ms, week, 0.3, 0.1},
		{7, sec, 60 * sec, 0.5, 0.5},
		{8, sec, 90 * sec, 0.5, 0.5},
		{1, ms, sec, 0.5, 0.997},
		{1, ms, sec, 0.1, 0.1},
		{3, 1234567, 98765432, 0.123456789, 0.987654321},
		{1, sec, sec, 1, retryMaxDraw},
		// jitter × draw underflows to 0 in IEEE arithmetic; Postgres's
		// float8mul refuses that (22003) instead.
		{1, sec, sec, math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat64},
		{1, sec, sec, 0.3, math.SmallestNonzeroFloat64},
		{20, 1001, week - 1, 0.999999999, 0.000000001},
		{4, day, week, 0.2, 0.5},
		{3, day, week, 1, 0.5},
		{12, 1000003, 3 * day, 0.33, 0.66},
	} {
		f.Add(s.attempt, s.base, s.ceil, s.jitter, s.draw)
	}
	pool := pgtest.NewDB(f)
	f.Fuzz(func(t *testing.T, attempt int, baseMicros, capMicros int64, jitter, draw float64) {
		t.Parallel()
		if !backoffInBounds(attempt, baseMicros, capMicros, jitter, draw) {
			t.Skip("outside the bounds docket.jobs enforces")
		}
		p := jobs.RetryPolicy{
			Base:        time.Duration(baseMicros) * time.Microsecond,
			Cap:         time.Duration(capMicros) * time.Microsecond,
			Jitter:      jitter,
			MaxAttempts: jobs.DefaultAttempts,
		}
		inGo := p.Backoff(attempt, draw)
		call := fmt.Sprintf("docket.job_backoff(%d, %d µs, %d µs, jitter %s, draw %s)", attempt, baseMicros, capMicros,
			strconv.FormatFloat(jitter, 'g', -1, 64), strconv.FormatFloat(draw, 'g', -1, 64))
		var inSQL time.Duration
		err := pool.QueryRow(context.Background(), `SELECT docket.job_backoff($1, $2, $3, $4, $5)`,
			int32(attempt), p.Base, p.Cap, jitter, draw).Scan(&inSQL)
		require.NoError(t, err, "%s refused; Go computes %d µs", call, inGo.Microseconds())
		require.Equal(t, inSQL, inGo, "%s: SQL %d µs, Go %d µs", call, inSQL.Microseconds(), inGo.Microseconds())
	})
}

// Retryable failures queue the job again after exactly the policy's backoff,
// it is not claimable a microsecond earlier, and the failure of attempt
// max_attempts makes it dead.
func TestRetryableFailureBacksOffThenDies(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	s := spec(`{"invoice": 1}`)
	s.Retry = jobs.RetryPolicy{Base: time.Second, Cap: time.Minute, Jitter: 0, MaxAttempts: 4}
	j := retryEnqueue(t, e, s)

	delays := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	for i, delay := range delays {
		attempt := i + 1
		c := retryClaimNext(t, e, j.ID)
		require.Equal(t, attempt, c.Attempts)
		now := e.Clock.Now()
		f, err := e.client.Fail(ctx, c.Lease(), jobs.Failure{Diagnostic: fmt.Sprintf("timeout %d", attempt)})
		require.NoError(t, err)
		require.Equal(t, jobs.Queued, f.State)
		require.Equal(t, now.Add(delay), f.AvailableAt, "attempt %d", attempt)
		require.Equal(t, s.Retry.Backoff(attempt, 0), delay)
		require.Equal(t, attempt, f.Attempts)
		require.Equal(t, fmt.Sprintf("timeout %d", attempt), f.Diagnostic)
		require.True(t, f.FinishedAt.IsZero())
		require.Equal(t, jobs.Lease{}, f.Lease())
		var retryAt time.Time
		var diagnostic string
		require.NoError(t, e.API.QueryRow(ctx, `SELECT retry_at, diagnostic FROM docket.jobs_retrying WHERE id = $1`, j.ID).
			Scan(&retryAt, &diagnostic), "an app login finds the retryable failure in jobs_retrying")
		require.Equal(t, f.AvailableAt, retryAt.UTC())
		require.Equal(t, f.Diagnostic, diagnostic)

		// One microsecond before it is due, nobody can claim it.
		e.Clock.Set(f.AvailableAt.Add(-time.Microsecond))
		got, err := e.client.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: 10})
		require.NoError(t, err)
		require.Empty(t, got, "attempt %d: claimed before available_at", attempt)
		_, ok, err := e.client.ClaimID(ctx, j.ID, jobs.ClaimOptions{})
		require.NoError(t, err)
		require.False(t, ok)
		e.Clock.Set(f.AvailableAt)
	}

	c := retryClaimNext(t, e, j.ID)
	require.Equal(t, 4, c.Attempts)
	now := e.Clock.Now()
	dead, err := e.client.Fail(ctx, c.Lease(), jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "timeout 4"})
	require.NoError(t, err)
	require.Equal(t, jobs.Dead, dead.State)
	require.Equal(t, now, dead.FinishedAt)
	require.Equal(t, 4, dead.Attempts)
	require.Equal(t, "timeout 4", dead.Diagnostic)

	e.Clock.Advance(24 * time.Hour)
	got, err := e.client.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got)
	var inDead int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.jobs_dead WHERE id = $1 AND finished_at = $2`, j.ID, now).Scan(&inDead))
	require.Equal(t, 1, inDead)
	var retrying int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.jobs_retrying WHERE id = $1`, j.ID).Scan(&retrying))
	require.Zero(t, retrying, "a dead job retries no more")

	// One event per attempt, each from claimed.
	require.Equal(t, []jobs.State{jobs.Queued, jobs.Queued, jobs.Queued, jobs.Queued, jobs.Dead}, retryHistory(t, e, j.ID))
	v, err := e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
}

// With jitter 0.5 the database's random draw shortens each delay d by up to
// half: available_at lies in [now + d/2, now + d] (d/2 itself only through the
// floor to whole microseconds of a draw within 2 µs/d of 1).
func TestRetryableFailureJitter(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	policy := jobs.RetryPolicy{Base: time.Second, Cap: time.Minute, Jitter: 0.5, MaxAttempts: 4}
	const n = 25
	specs := make([]jobs.Spec, n)
	for i := range specs {
		specs[i] = spec(fmt.Sprintf(`{"n": %d}`, i))
		specs[i].Retry = policy
	}
	_, err := e.client.EnqueueMany(ctx, specs)
	require.NoError(t, err)

	for attempt := 1; attempt <= 3; attempt++ {
		d := policy.Backoff(attempt, 0)
		require.Equal(t, time.Second<<(attempt-1), d)
		require.Equal(t, d/2, policy.Backoff(attempt, retryMaxDraw))
		claimed, err := e.client.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: n})
		require.NoError(t, err)
		require.Len(t, claimed, n)
		now := e.Clock.Now()
		shortened := 0
		for _, c := range claimed {
			require.Equal(t, attempt, c.Attempts)
			f, err := e.client.Fail(ctx, c.Lease(), jobs.Failure{Diagnostic: "flaky"})
			require.NoError(t, err)
			require.Equal(t, jobs.Queued, f.State)
			delay := f.AvailableAt.Sub(now)
			require.GreaterOrEqual(t, delay, d/2, "attempt %d: delay %v below d/2", attempt, delay)
			require.LessOrEqual(t, delay, d, "attempt %d: delay %v above d", attempt, delay)
			if delay < d {
				shortened++
			}
		}
		require.Positive(t, shortened, "attempt %d: jitter 0.5 shortened none of %d delays", attempt, n)
		e.Clock.Advance(d)
	}
}

func TestPermanentFailureFails(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := retryEnqueue(t, e, spec(`{"invoice": 2}`))
	c := retryClaimNext(t, e, j.ID)
	now := e.Clock.Now()
	f, err := e.client.Fail(ctx, c.Lease(), jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "no such customer", RetryAfter: time.Minute})
	require.NoError(t, err)
	require.Equal(t, jobs.Failed, f.State)
	require.Equal(t, now, f.FinishedAt)
	require.Equal(t, 1, f.Attempts) // attempts left do not matter
	require.Equal(t, "no such customer", f.Diagnostic)

	e.Clock.Advance(time.Hour)
	got, err := e.client.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, []jobs.State{jobs.Queued, jobs.Failed}, retryHistory(t, e, j.ID))
}

// An uncertain failure of a job that is not repeatable leaves it uncertain:
// not finished, claimable by nobody, listed for reconciliation.
func TestUncertainFailureIsLeftForReconciliation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := retryEnqueue(t, e, spec(`{"invoice": 3}`))
	c := retryClaimNext(t, e, j.ID)
	now := e.Clock.Now()
	u, err := e.client.Fail(ctx, c.Lease(), jobs.Failure{Class: jobs.ClassUncertain, Diagnostic: "connection reset after send"})
	require.NoError(t, err)
	require.Equal(t, jobs.Uncertain, u.State)
	require.False(t, u.State.Terminal())
	require.True(t, u.FinishedAt.IsZero())
	require.True(t, u.LeaseExpiresAt.IsZero())
	require.Equal(t, jobs.Lease{}, u.Lease())
	require.Equal(t, "connection reset after send", u.Diagnostic)

	var finishedNull bool
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT finished_at IS NULL FROM docket.jobs WHERE id = $1`, j.ID).Scan(&finishedNull))
	require.True(t, finishedNull)
	require.Equal(t, map[int64]time.Time{j.ID: now}, retryUncertain(t, e))

	e.Clock.Advance(24 * time.Hour)
	got, err := e.client.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got)
	_, ok, err := e.client.ClaimID(ctx, j.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.False(t, ok)
}

// A repeatable job's uncertain failure is retried like a retryable one:
// queued after the backoff, dead on its last attempt, never uncertain.
func TestUncertainFailureOfRepeatableJobIsRetried(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	s := spec(`{"invoice": 4}`)
	s.Repeatable = true
	s.Retry = jobs.RetryPolicy{Base: 3 * time.Second, Cap: time.Minute, Jitter: 0, MaxAttempts: 2}
	j := retryEnqueue(t, e, s)

	c := retryClaimNext(t, e, j.ID)
	now := e.Clock.Now()
	q, err := e.client.Fail(ctx, c.Lease(), jobs.Failure{Class: jobs.ClassUncertain, Diagnostic: "lost reply"})
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, q.State)
	require.Equal(t, now.Add(3*time.Second), q.AvailableAt)
	require.Empty(t, retryUncertain(t, e))

	e.Clock.Set(q.AvailableAt)
	c = retryClaimNext(t, e, j.ID)
	require.Equal(t, 2, c.Attempts)
	now = e.Clock.Now()
	d, err := e.client.Fail(ctx, c.Lease(), jobs.Failure{Class: jobs.ClassUncertain, Diagnostic: "lost reply again"})
	require.NoError(t, err)
	require.Equal(t, jobs.Dead, d.State)
	require.Equal(t, now, d.FinishedAt)
	require.Empty(t, retryUncertain(t, e))
}

// A positive RetryAfter replaces the backoff exactly, one over 24 h is
// clamped to 24 h, a negative one makes the job available at once; on the
// last attempt the job is dead whatever the hint.
func TestRetryAfterHint(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := retryEnqueue(t, e, spec(`{"invoice": 5}`)) // the default policy: 1 s base, jitter 0.2, 5 attempts

	for _, c := range []struct {
		hint, want time.Duration
	}{
		{90 * time.Second, 90 * time.Second},
		{1500*time.Millisecond + 7*time.Microsecond, 1500*time.Millisecond + 7*time.Microsecond},
		{48 * time.Hour, jobs.MaxRetryAfter},
		{-5 * time.Second, 0},
	} {
		l := retryClaimNext(t, e, j.ID)
		now := e.Clock.Now()
		f, err := e.client.Fail(ctx, l.Lease(), jobs.Failure{Diagnostic: "429", RetryAfter: c.hint})
		require.NoError(t, err)
		require.Equal(t, jobs.Queued, f.State)
		require.Equal(t, now.Add(c.want), f.AvailableAt, "hint %v", c.hint)
		e.Clock.Set(f.AvailableAt)
	}
	// The fifth and last attempt: dead, the hint notwithstanding.
	l := retryClaimNext(t, e, j.ID)
	require.Equal(t, 5, l.Attempts)
	f, err := e.client.Fail(ctx, l.Lease(), jobs.Failure{RetryAfter: time.Minute})
	require.NoError(t, err)
	require.Equal(t, jobs.Dead, f.State)
}

// docket.job_fail clamps a peer's hint itself, for callers other than the Go
// client.
func TestRetryAfterIsClampedInSQL(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	s := spec(`{"invoice": 6}`)
	s.Retry = jobs.RetryPolicy{MaxAttempts: 10}
	j := retryEnqueue(t, e, s)
	for _, c := range []struct {
		hint string
		want time.Duration
	}{
		{"48 hours", 24 * time.Hour},
		{"-5 seconds", 0},
		{"2 days 3 hours", 24 * time.Hour},
		{"00:00:01.000001", time.Second + time.Microsecond},
	} {
		l := retryClaimNext(t, e, j.ID)
		now := e.Clock.Now()
		var at time.Time
		require.NoError(t, e.Pool.QueryRow(ctx,
			`SELECT available_at FROM docket.job_fail($1, $2, 'retryable', NULL, $3::interval, $4, $5)`,
			j.ID, l.Lease().Token, c.hint, string(app), now).Scan(&at))
		require.Equal(t, now.Add(c.want), at.UTC(), "hint %s", c.hint)
		e.Clock.Set(at)
	}
}

// A jitter as small as a float64 can hold is within the bounds (0..1), and
// shortens nothing: 1 - jitter × draw is 1. Failing such a job, and sweeping
// its expired lease, must work whatever the database draws; here it draws
// below 0.5, where jitter × draw underflows to zero.
func TestTinyJitterNeverBreaksFailOrSweep(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	tiny := jobs.RetryPolicy{Base: time.Second, Cap: time.Minute, Jitter: math.SmallestNonzeroFloat64, MaxAttempts: 3}
	require.NoError(t, tiny.Validate())
	require.Equal(t, time.Second, tiny.Backoff(1, 0.25))
	s := spec(`"tiny jitter"`)
	s.Retry = tiny
	s.Repeatable = true
	j := retryEnqueue(t, e, s)
	require.Equal(t, tiny, j.Retry)

	c := retryClaimID(t, e, j.ID, jobs.ClaimOptions{Lease: 10 * time.Second})
	now := e.Clock.Now()
	tx := retryLowDrawTx(t, e)
	f, err := e.client.FailTx(ctx, tx, c.Lease(), jobs.Failure{Diagnostic: "flaky"})
	require.NoError(t, err, "failing a job whose jitter × draw underflows")
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, jobs.Queued, f.State)
	require.Equal(t, now.Add(time.Second), f.AvailableAt)

	// Its expired lease, beside an ordinary one: one sweep moves both.
	e.Clock.Set(f.AvailableAt)
	retryClaimID(t, e, j.ID, jobs.ClaimOptions{Lease: 10 * time.Second})
	other := retryEnqueue(t, e, spec(`"ordinary"`))
	retryClaimID(t, e, other.ID, jobs.ClaimOptions{Lease: 10 * time.Second})
	e.Clock.Advance(10 * time.Second)
	tx = retryLowDrawTx(t, e)
	moved, err := e.client.ExpireLeasesTx(ctx, tx, 100)
	require.NoError(t, err, "sweeping an expired lease of a job whose jitter × draw underflows")
	require.NoError(t, tx.Commit(ctx))
	require.ElementsMatch(t, []int64{j.ID, other.ID}, retryIDs(moved))
}

// retryLowDrawTx begins a transaction whose next random() is below 0.5.
func retryLowDrawTx(t *testing.T, e env) pgx.Tx {
	t.Helper()
	ctx := t.Context()
	for seed := -1.0; seed <= 1; seed += 0.125 {
		tx, err := e.Pool.Begin(ctx)
		require.NoError(t, err)
		var low bool
		require.NoError(t, tx.QueryRow(ctx, `SELECT setseed($1), random() < 0.5`, seed).Scan(nil, &low))
		if low {
			_, err = tx.Exec(ctx, `SELECT setseed($1)`, seed)
			require.NoError(t, err)
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			return tx
		}
		require.NoError(t, tx.Rollback(ctx))
	}
	t.Fatal("no seed in -1..1 gives a first draw below 0.5")
	return nil
}

// The lease-expiry sweep: a repeatable job with attempts left is queued after
// its backoff, one on its last attempt is dead, any other is uncertain; live
// leases are left alone, and a lease expires at lease_expires_at, not a
// microsecond before.
func TestExpireLeasesMovesExpiredJobsByKind(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	mk := func(payload string, repeatable bool, maxAttempts int) jobs.Job {
		s := spec(payload)
		s.Repeatable = repeatable
		s.Retry = jobs.RetryPolicy{Base: time.Second, Cap: time.Minute, Jitter: 0, MaxAttempts: maxAttempts}
		return retryEnqueue(t, e, s)
	}
	again := mk(`"again"`, true, 3)      // repeatable, attempts left
	last := mk(`"last"`, true, 1)        // repeatable, on its last attempt
	unsure := mk(`"unsure"`, false, 3)   // not repeatable
	live := mk(`"live"`, false, 3)       // lease still running
	liveRep := mk(`"live-rep"`, true, 3) // repeatable, lease still running

	// Bring "again" to its second attempt, so the sweep's backoff is 2 s.
	c := retryClaimID(t, e, again.ID, jobs.ClaimOptions{})
	f, err := e.client.Fail(ctx, c.Lease(), jobs.Failure{})
	require.NoError(t, err)
	e.Clock.Set(f.AvailableAt)

	short := jobs.ClaimOptions{Lease: 10 * time.Second}
	held := map[int64]jobs.Job{}
	for _, id := range []int64{again.ID, last.ID, unsure.ID} {
		held[id] = retryClaimID(t, e, id, short)
	}
	for _, id := range []int64{live.ID, liveRep.ID} {
		held[id] = retryClaimID(t, e, id, jobs.ClaimOptions{Lease: time.Minute})
	}
	require.Equal(t, 2, held[again.ID].Attempts)
	expiry := held[again.ID].LeaseExpiresAt

	e.Clock.Set(expiry.Add(-time.Microsecond))
	moved, err := e.client.ExpireLeases(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, moved, "swept a lease before it expired")

	e.Clock.Set(expiry)
	now := e.Clock.Now()
	moved, err = e.client.ExpireLeases(ctx, 100)
	require.NoError(t, err)
	byID := map[int64]jobs.Job{}
	for _, m := range moved {
		byID[m.ID] = m
	}
	require.Len(t, byID, 3)
	require.ElementsMatch(t, []int64{again.ID, last.ID, unsure.ID}, retryIDs(moved))

	q := byID[again.ID]
	require.Equal(t, jobs.Queued, q.State)
	require.Equal(t, now.Add(2*time.Second), q.AvailableAt)
	require.Equal(t, 2, q.Attempts)
	require.True(t, q.FinishedAt.IsZero())
	require.Contains(t, q.Diagnostic, "lease expired")

	d := byID[last.ID]
	require.Equal(t, jobs.Dead, d.State)
	require.Equal(t, now, d.FinishedAt)
	require.Equal(t, 1, d.Attempts)

	u := byID[unsure.ID]
	require.Equal(t, jobs.Uncertain, u.State)
	require.True(t, u.FinishedAt.IsZero())
	require.Equal(t, map[int64]time.Time{unsure.ID: now}, retryUncertain(t, e))

	for _, m := range moved {
		require.Equal(t, jobs.Lease{}, m.Lease())
		require.True(t, m.LeaseExpiresAt.IsZero())
		require.Empty(t, m.ClaimedBy)
		require.Equal(t, held[m.ID].LeaseGeneration, m.LeaseGeneration)
	}
	for _, id := range []int64{live.ID, liveRep.ID} {
		got, err := e.client.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.WithoutToken(held[id]), got, "a live lease was touched")
	}

	// The swept holder's token is stale; the job is claimable again after
	// its backoff, not before.
	_, err = e.client.Complete(ctx, held[again.ID].Lease(), nil, nil)
	require.ErrorIs(t, err, db.ErrStaleClaim)
	got, err := e.client.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got)
	e.Clock.Set(q.AvailableAt)
	got, err = e.client.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{again.ID}, retryIDs(got))
	require.Equal(t, 3, got[0].Attempts)

	// A sweep again finds nothing.
	moved, err = e.client.ExpireLeases(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, moved)
	for _, id := range []int64{again.ID, last.ID, unsure.ID, live.ID} {
		v, err := e.client.Verify(ctx, id)
		require.NoError(t, err)
		require.True(t, v.OK, v.Problem)
	}
}

// A sweep moves at most limit jobs, earliest expiry first.
func TestExpireLeasesIsBoundedEarliestFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	leases := []time.Duration{3 * time.Second, time.Second, 5 * time.Second, 2 * time.Second, 4 * time.Second}
	ids := make([]int64, len(leases))
	for i, lease := range leases {
		j := retryEnqueue(t, e, spec(fmt.Sprintf(`{"n": %d}`, i)))
		retryClaimID(t, e, j.ID, jobs.ClaimOptions{Lease: lease})
		ids[i] = j.ID
	}
	liveJob := retryEnqueue(t, e, spec(`"live"`))
	retryClaimID(t, e, liveJob.ID, jobs.ClaimOptions{Lease: time.Hour})

	e.Clock.Advance(5 * time.Second)
	for _, want := range [][]int64{{ids[1], ids[3]}, {ids[0], ids[4]}, {ids[2]}, {}} {
		moved, err := e.client.ExpireLeases(ctx, 2)
		require.NoError(t, err)
		require.ElementsMatch(t, want, retryIDs(moved))
	}
	j, err := e.client.Get(ctx, liveJob.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Claimed, j.State)

	for _, limit := range []int{0, -1, jobs.MaxSweepBatch + 1} {
		_, err := e.client.ExpireLeases(ctx, limit)
		require.ErrorIs(t, err, db.ErrInvalidArgument, "limit %d", limit)
	}
	for _, limit := range []int{0, jobs.MaxSweepBatch + 1} {
		_, err := e.Pool.Exec(ctx, `SELECT * FROM docket.job_expire_leases($1, 'svc:app', $2)`, limit, e.Clock.Now())
		require.ErrorIs(t, db.Translate(err, "sweep"), db.ErrInvalidArgument, "limit %d", limit)
	}
}

// A sweep skips the leases another open sweep holds instead of waiting for
// them; what a rolled-back sweep held is swept later, once.
func TestExpireLeasesSkipsLeasesAnotherSweepHolds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	all := retryClaimedBatch(t, e, 8, time.Second)
	e.Clock.Advance(time.Minute)

	tx1, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx1.Rollback(ctx) }()
	first, err := e.client.ExpireLeasesTx(ctx, tx1, 3)
	require.NoError(t, err)
	require.ElementsMatch(t, all[:3], retryIDs(first))

	tx2, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx2.Rollback(ctx) }()
	// Waiting for tx1's locks would be a bug: make it an error, not a hang.
	_, err = tx2.Exec(ctx, `SET LOCAL lock_timeout = '5s'`)
	require.NoError(t, err)
	second, err := e.client.ExpireLeasesTx(ctx, tx2, 100)
	require.NoError(t, err)
	require.ElementsMatch(t, all[3:], retryIDs(second))
	require.NoError(t, tx2.Commit(ctx))

	require.NoError(t, tx1.Rollback(ctx))
	third, err := e.client.ExpireLeases(ctx, 100)
	require.NoError(t, err)
	require.ElementsMatch(t, all[:3], retryIDs(third))
	retryRequireSweptOnce(t, e, all)
}

// Two sweepers released together, each sweeping in its own transactions,
// never move a job twice and together move each expired job exactly once.
func TestConcurrentSweepersMoveEachJobOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const rounds, perRound, limit = 4, 30, 4
	type result struct {
		ids []int64
		err error
	}
	for round := range rounds {
		all := retryClaimedBatch(t, e, perRound, time.Second)
		e.Clock.Advance(time.Minute)

		start := make(chan struct{})
		results := make(chan result, 2)
		for range 2 {
			tx, err := e.Pool.Begin(ctx)
			require.NoError(t, err)
			go func(tx pgx.Tx) {
				var r result
				defer func() { results <- r }()
				<-start
				for {
					moved, err := e.client.ExpireLeasesTx(ctx, tx, limit)
					if err == nil {
						err = tx.Commit(ctx)
					}
					if err != nil {
						_ = tx.Rollback(ctx)
						r.err = err
						return
					}
					if len(moved) == 0 {
						return
					}
					r.ids = append(r.ids, retryIDs(moved)...)
					if tx, err = e.Pool.Begin(ctx); err != nil {
						r.err = err
						return
					}
				}
			}(tx)
		}
		close(start)
		var swept []int64
		for range 2 {
			r := <-results
			require.NoError(t, r.err, "round %d", round)
			swept = append(swept, r.ids...)
		}
		slices.Sort(swept)
		require.Equal(t, all, swept, "round %d: each expired job moved exactly once", round)
		retryRequireSweptOnce(t, e, all)
	}
}

// Reconciling an uncertain job: to succeeded with a result, to failed, or
// queued to run again (claimable at once); RunAgain without attempts left is
// refused, and so is reconciling a job that is not uncertain.
func TestReconcileUncertainJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	uncertain := func(payload string, maxAttempts int) jobs.Job {
		s := spec(payload)
		s.Retry = jobs.RetryPolicy{MaxAttempts: maxAttempts}
		j := retryEnqueue(t, e, s)
		c := retryClaimNext(t, e, j.ID)
		u, err := e.client.Fail(ctx, c.Lease(), jobs.Failure{Class: jobs.ClassUncertain, Diagnostic: "timeout after send"})
		require.NoError(t, err)
		require.Equal(t, jobs.Uncertain, u.State)
		return u
	}
	done := uncertain(`"done"`, 3)
	notDone := uncertain(`"not done"`, 3)
	rerun := uncertain(`"rerun"`, 3)
	// Exhausted via the sweep: one attempt, its lease expired.
	s := spec(`"exhausted"`)
	s.Retry = jobs.RetryPolicy{MaxAttempts: 1}
	exhausted := retryEnqueue(t, e, s)
	retryClaimID(t, e, exhausted.ID, jobs.ClaimOptions{Lease: time.Second})
	e.Clock.Advance(time.Minute)
	moved, err := e.client.ExpireLeases(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{exhausted.ID}, retryIDs(moved))
	require.Equal(t, jobs.Uncertain, moved[0].State)
	require.Len(t, retryUncertain(t, e), 4)

	e.Clock.Advance(time.Minute)
	now := e.Clock.Now()
	s1, err := e.client.Reconcile(ctx, done.ID, jobs.DidSucceed, json.RawMessage(`{"sent": true}`), "provider shows it sent")
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, s1.State)
	require.JSONEq(t, `{"sent": true}`, string(s1.Result))
	require.Equal(t, now, s1.FinishedAt)
	require.Equal(t, "reconciled: provider shows it sent", s1.Diagnostic)
	// Settling again with the same outcome and result is a quiet no-op.
	s1again, err := e.client.Reconcile(ctx, done.ID, jobs.DidSucceed, json.RawMessage(`{"sent":true}`), "again")
	require.NoError(t, err)
	require.Equal(t, s1, s1again)

	f1, err := e.client.Reconcile(ctx, notDone.ID, jobs.DidFail, nil, "provider never saw it")
	require.NoError(t, err)
	require.Equal(t, jobs.Failed, f1.State)
	require.Equal(t, now, f1.FinishedAt)
	require.Nil(t, f1.Result)

	q1, err := e.client.Reconcile(ctx, rerun.ID, jobs.RunAgain, nil, "safe to resend")
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, q1.State)
	require.Equal(t, now, q1.AvailableAt)
	require.Equal(t, 1, q1.Attempts)
	require.True(t, q1.FinishedAt.IsZero())
	claimed, err := e.client.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{rerun.ID}, retryIDs(claimed))
	require.Equal(t, 2, claimed[0].Attempts)

	before := snapshot(t, e.Pool)
	_, err = e.client.Reconcile(ctx, exhausted.ID, jobs.RunAgain, nil, "try once more")
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.Equal(t, before, snapshot(t, e.Pool))
	require.Equal(t, map[int64]time.Time{exhausted.ID: moved[0].UpdatedAt}, retryUncertain(t, e))
	f2, err := e.client.Reconcile(ctx, exhausted.ID, jobs.DidFail, nil, "gave up")
	require.NoError(t, err)
	require.Equal(t, jobs.Failed, f2.State)
	require.Empty(t, retryUncertain(t, e))

	queued := retryEnqueue(t, e, spec(`"queued"`))
	before = snapshot(t, e.Pool)
	for _, o := range []jobs.Outcome{jobs.DidSucceed, jobs.DidFail, jobs.RunAgain} {
		_, err = e.client.Reconcile(ctx, queued.ID, o, nil, "not uncertain")
		require.ErrorIs(t, err, db.ErrIllegalTransition, "outcome %s", o)
	}
	// And a claimed one.
	_, err = e.client.Reconcile(ctx, rerun.ID, jobs.DidSucceed, nil, "still running")
	require.ErrorIs(t, err, db.ErrIllegalTransition)
	require.Equal(t, before, snapshot(t, e.Pool))

	for _, id := range []int64{done.ID, notDone.ID, rerun.ID, exhausted.ID} {
		v, err := e.client.Verify(ctx, id)
		require.NoError(t, err)
		require.True(t, v.OK, v.Problem)
	}
}

// The statements of docket.job_claim and docket.job_expire_leases read the
// partial indexes at 100,000 jobs, in the custom plans plpgsql makes at first
// and the generic plans it may switch to: the queued branch of the claim
// reads jobs_claim_idx, its takeover branch jobs_takeover_idx, the sweep
// jobs_lease_expiry_idx, and nothing scans docket.jobs sequentially.
func TestClaimAndSweepPlansUsePartialIndexes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fills a database with 100,000 jobs")
	}
	e := setup(t, "globex", "initech")
	ctx := t.Context()
	began := time.Now()
	now := retryFillJobs(t, e)
	t.Logf("filled 100,000 jobs in %v", time.Since(began))

	conn, err := e.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	claimSQL := retryFunctionStatement(t, conn, "job_claim",
		[]string{"p_project", "p_queue", "p_limit", "p_lease", "p_kinds", "p_schemas", "p_actor", "p_now", "p_revisions"})
	_, err = conn.Exec(ctx, `PREPARE retry_claim (text, text, integer, interval, text[], integer[], text, timestamptz, text[]) AS `+claimSQL)
	require.NoError(t, err)
	expireSQL := retryFunctionStatement(t, conn, "job_expire_leases", []string{"p_limit", "p_actor", "p_now"})
	_, err = conn.Exec(ctx, `PREPARE retry_expire (integer, text, timestamptz) AS `+expireSQL)
	require.NoError(t, err)

	at := "'" + now.Format(time.RFC3339Nano) + "'"
	type check struct {
		cte   string // the CTE whose plan must read index; "" for the whole statement
		index string
	}
	claimChecks := []check{{"queued", "jobs_claim_idx"}, {"expired", "jobs_takeover_idx"}}
	for _, c := range []struct {
		name, exec string
		checks     []check
	}{
		{"claim 10 of acme/default", `retry_claim('acme', 'default', 10, NULL, NULL, NULL, 'svc:app', ` + at + `, NULL)`, claimChecks},
		{"claim 1 of acme/default", `retry_claim('acme', 'default', 1, NULL, NULL, NULL, 'svc:app', ` + at + `, NULL)`, claimChecks},
		{"claim 1000 of globex/email", `retry_claim('globex', 'email', 1000, '1 minute', NULL, NULL, 'svc:app', ` + at + `, NULL)`, claimChecks},
		{"claim 10 of initech/bulk", `retry_claim('initech', 'bulk', 10, NULL, NULL, NULL, 'svc:app', ` + at + `, NULL)`, claimChecks},
		{"claim 10 of acme/default with decoders", `retry_claim('acme', 'default', 10, NULL, '{billing.invoice,sync.crm}', '{1,1}', 'svc:app', ` + at + `, NULL)`, claimChecks},
		{"claim 10 of acme/default with decoders and revisions", `retry_claim('acme', 'default', 10, NULL, '{billing.invoice,sync.crm}', '{1,1}', 'svc:app', ` + at + `, '{r1,r2}')`, claimChecks},
		{"sweep 100", `retry_expire(100, 'svc:sweeper', ` + at + `)`, []check{{"expired", "jobs_lease_expiry_idx"}}},
		{"sweep 10000", `retry_expire(10000, 'svc:sweeper', ` + at + `)`, []check{{"expired", "jobs_lease_expiry_idx"}}},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			_, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode)
			require.NoError(t, err)
			plan, text := retryExplain(t, conn, `EXECUTE `+c.exec)
			for _, ck := range c.checks {
				node := plan
				if ck.cte != "" {
					node = plan.find("CTE " + ck.cte)
					require.NotNil(t, node, "%s (%s): no CTE %s in the plan:\n%s", c.name, mode, ck.cte, text)
				}
				require.Contains(t, node.indexes("jobs"), ck.index,
					"%s (%s): CTE %s does not read %s:\n%s", c.name, mode, ck.cte, ck.index, text)
			}
			require.Empty(t, plan.seqScans("jobs"), "%s (%s): a sequential scan of docket.jobs:\n%s", c.name, mode, text)
		}
	}
}

// retryPlanNode is a node of EXPLAIN (FORMAT JSON) output.
type retryPlanNode struct {
	NodeType     string          `json:"Node Type"`
	RelationName string          `json:"Relation Name"`
	IndexName    string          `json:"Index Name"`
	SubplanName  string          `json:"Subplan Name"`
	Plans        []retryPlanNode `json:"Plans"`
}

// find returns the node named subplan (e.g. "CTE queued"), or nil.
func (n *retryPlanNode) find(subplan string) *retryPlanNode {
	if n.SubplanName == subplan {
		return n
	}
	for i := range n.Plans {
		if f := n.Plans[i].find(subplan); f != nil {
			return f
		}
	}
	return nil
}

// indexes returns the indexes read under n to reach relation: index scans on
// it, and bitmap index scans under bitmap heap scans of it.
func (n *retryPlanNode) indexes(relation string) []string {
	var out []string
	var walk func(n *retryPlanNode, underHeap bool)
	walk = func(n *retryPlanNode, underHeap bool) {
		switch n.NodeType {
		case "Index Scan", "Index Only Scan":
			if n.RelationName == relation {
				out = append(out, n.IndexName)
			}
		case "Bitmap Index Scan":
			if underHeap {
				out = append(out, n.IndexName)
			}
		}
		heap := n.NodeType == "Bitmap Heap Scan" && n.RelationName == relation || underHeap && n.NodeType != "Bitmap Heap Scan"
		for i := range n.Plans {
			walk(&n.Plans[i], heap)
		}
	}
	walk(n, false)
	return out
}

// seqScans returns the sequential scans of relation under n.
func (n *retryPlanNode) seqScans(relation string) []string {
	var out []string
	if n.NodeType == "Seq Scan" && n.RelationName == relation {
		out = append(out, "Seq Scan on "+relation)
	}
	for i := range n.Plans {
		out = append(out, n.Plans[i].seqScans(relation)...)
	}
	return out
}

// retryExplain returns the plan of stmt, parsed, and as text to show.
func retryExplain(t *testing.T, conn *pgxpool.Conn, stmt string) (*retryPlanNode, string) {
	t.Helper()
	var raw []byte
	require.NoError(t, conn.QueryRow(t.Context(), `EXPLAIN (FORMAT JSON) `+stmt).Scan(&raw))
	var plans []struct {
		Plan retryPlanNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &plans))
	require.Len(t, plans, 1)
	rows, err := conn.Query(t.Context(), `EXPLAIN `+stmt)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return &plans[0].Plan, strings.Join(lines, "\n")
}

// retryFunctionStatement returns the statement after RETURN QUERY in the
// body of docket.<name>, with its parameters params renamed $1, $2, … in
// order: the statement plpgsql plans, with the parameters it binds.
func retryFunctionStatement(t *testing.T, conn *pgxpool.Conn, name string, params []string) string {
	t.Helper()
	var body string
	require.NoError(t, conn.QueryRow(t.Context(),
		`SELECT prosrc FROM pg_proc WHERE proname = $1 AND pronamespace = 'docket'::regnamespace`, name).Scan(&body))
	m := regexp.MustCompile(`(?s)RETURN QUERY\s+(.*?);\s*END\s*$`).FindStringSubmatch(body)
	require.NotNil(t, m, "no RETURN QUERY statement in docket.%s", name)
	index := map[string]int{}
	for i, p := range params {
		index[p] = i + 1
	}
	var unknown []string
	stmt := regexp.MustCompile(`\bp_[a-z_]+\b`).ReplaceAllStringFunc(m[1], func(p string) string {
		i, ok := index[p]
		if !ok {
			unknown = append(unknown, p)
			return p
		}
		return "$" + strconv.Itoa(i)
	})
	require.Empty(t, unknown, "docket.%s: unknown parameters in:\n%s", name, m[1])
	return stmt
}

// retryFillJobs fills e's database with 100,000 jobs in its three projects
// (acme, globex and initech) and four queues, created one every 25.92 s over
// the 30 days before the instant it returns, and worked oldest first: the
// oldest 6,000 settled (succeeded, some failed, dead, uncertain or
// cancelled), the next 3,000 claimed (a tenth of them holding leases that
// expired an hour ago), the other 91,000 queued, a tenth of those scheduled up
// to three days ahead. Everything goes through the guards and the history
// triggers, as a hand-written UPDATE in psql would.
func retryFillJobs(t *testing.T, e env) time.Time {
	t.Helper()
	ctx := t.Context()
	now := t0.Add(30 * 24 * time.Hour)
	// The inserts, in four concurrent transactions; id = g.
	const insert = `
		INSERT INTO docket.jobs (id, project, kind, queue, priority, payload, available_at, repeatable, max_attempts,
		                         created_by, created_at, updated_at)
		OVERRIDING SYSTEM VALUE
		SELECT g, x.project,
		       CASE x.queue WHEN 'default' THEN (ARRAY['billing.invoice', 'sync.crm'])[1 + g % 2]
		                    WHEN 'email' THEN 'email.send' WHEN 'reports' THEN 'report.build' ELSE 'bulk.import' END,
		       x.queue, x.priority, jsonb_build_object('n', g, 'customer', 'c-' || (g % 977)),
		       CASE WHEN g > 9000 AND g % 10 = 0 THEN $1::timestamptz + (1 + g % 72) * interval '1 hour' ELSE x.created_at END,
		       g % 10 < 3 AND g % 100 <> 97, CASE WHEN g % 100 = 96 THEN 1 ELSE 5 END,
		       'svc:app', x.created_at, x.created_at
		FROM generate_series($2::integer, $3::integer) g
		CROSS JOIN LATERAL (SELECT
		    CASE WHEN g % 10 < 5 THEN 'acme' WHEN g % 10 < 8 THEN 'globex' ELSE 'initech' END AS project,
		    CASE WHEN abs(hashint4(g)::bigint) % 20 < 12 THEN 'default' WHEN abs(hashint4(g)::bigint) % 20 < 17 THEN 'email'
		         WHEN abs(hashint4(g)::bigint) % 20 < 19 THEN 'reports' ELSE 'bulk' END AS queue,
		    CASE WHEN abs(hashint4(-g)::bigint) % 100 < 70 THEN 1 WHEN abs(hashint4(-g)::bigint) % 100 < 90 THEN 2
		         WHEN abs(hashint4(-g)::bigint) % 100 < 97 THEN 3 ELSE 4 END::smallint AS priority,
		    $1::timestamptz - (100000 - g) * interval '25.92 seconds' AS created_at) x
		ORDER BY g`
	const chunks, total = 4, 100000
	errs := make(chan error, chunks)
	for c := range chunks {
		go func(lo, hi int) {
			errs <- testkit.Raw(ctx, e.Pool, ana, now, insert, now, lo, hi)
		}(c*total/chunks+1, (c+1)*total/chunks)
	}
	for range chunks {
		require.NoError(t, <-errs)
	}

	for _, stmt := range []string{
		`SELECT setval(pg_get_serial_sequence('docket.jobs', 'id'), 100000)`,
		// Withdrawn before anyone claimed them.
		`UPDATE docket.jobs SET state = 'cancelled', diagnostic = 'cancelled: superseded',
		        finished_at = created_at + interval '1 minute', updated_at = created_at + interval '1 minute'
		 WHERE id <= 6000 AND id % 100 = 98`,
		// Claimed: the history, and 3,000 still held, a tenth of them by
		// leases that expired an hour ago.
		`UPDATE docket.jobs SET state = 'claimed', claim_token = gen_random_uuid(), claimed_by = 'svc:worker-' || (id % 8),
		        claimed_at = c.at, lease_expires_at = c.at + lease, lease_generation = 1, attempts = 1,
		        updated_at = greatest(updated_at, c.at)
		 FROM (SELECT j.id AS job, CASE WHEN j.id <= 6000 THEN j.available_at + (j.id % 30) * interval '1 second'
		                                WHEN j.id % 10 = 0 THEN $1::timestamptz - interval '65 minutes'
		                                ELSE $1::timestamptz - (j.id % 240) * interval '1 second' END AS at
		       FROM docket.jobs j WHERE j.id <= 9000 AND j.state = 'queued') c
		 WHERE id = c.job`,
		// The history settles.
		`UPDATE docket.jobs SET
		        state = CASE id % 100 WHEN 94 THEN 'failed' WHEN 95 THEN 'failed' WHEN 96 THEN 'dead'
		                              WHEN 97 THEN 'uncertain' ELSE 'succeeded' END,
		        result = CASE WHEN id % 100 NOT IN (94, 95, 96, 97) THEN '{"ok": true}'::jsonb END,
		        diagnostic = CASE id % 100 WHEN 94 THEN 'no such customer' WHEN 95 THEN 'invalid address'
		                                   WHEN 96 THEN 'timeout' WHEN 97 THEN 'connection reset after send' END,
		        finished_at = CASE WHEN id % 100 <> 97 THEN claimed_at + (1 + id % 50) * interval '1 second' END,
		        updated_at = claimed_at + (1 + id % 50) * interval '1 second',
		        claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL
		 WHERE id <= 6000 AND state = 'claimed'`,
	} {
		var args []any
		if strings.Contains(stmt, "$1") {
			args = []any{now}
		}
		require.NoError(t, testkit.Raw(ctx, e.Pool, ana, now, stmt, args...), stmt)
	}
	_, err := e.Pool.Exec(ctx, `ANALYZE docket.jobs`)
	require.NoError(t, err)

	var mix string
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT string_agg(state || ' ' || n, ', ' ORDER BY state) FROM (SELECT state, count(*) AS n FROM docket.jobs GROUP BY state) s`).Scan(&mix))
	t.Logf("job mix: %s", mix)
	var n, expired, due int
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE state = 'claimed' AND lease_expires_at <= $1),
		       count(*) FILTER (WHERE state = 'queued' AND available_at <= $1)
		FROM docket.jobs`, now).Scan(&n, &expired, &due))
	require.Equal(t, total, n)
	require.Equal(t, 300, expired)
	require.Equal(t, 81900, due)
	return now
}

func retryEnqueue(t *testing.T, e env, s jobs.Spec) jobs.Job {
	t.Helper()
	enq, err := e.client.Enqueue(t.Context(), s)
	require.NoError(t, err)
	require.False(t, enq.Duplicate)
	return enq.Job
}

// retryClaimID claims job id now with opts, which must succeed.
func retryClaimID(t *testing.T, e env, id int64, opts jobs.ClaimOptions) jobs.Job {
	t.Helper()
	j, ok, err := e.client.ClaimID(t.Context(), id, opts)
	require.NoError(t, err)
	require.True(t, ok, "job %d is not claimable at %v", id, e.Clock.Now())
	return j
}

// retryClaimNext claims from the default queue, which must hand out job id
// and nothing else.
func retryClaimNext(t *testing.T, e env, id int64) jobs.Job {
	t.Helper()
	got, err := e.client.Claim(t.Context(), jobs.DefaultQueue, jobs.ClaimOptions{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{id}, retryIDs(got), "at %v", e.Clock.Now())
	return got[0]
}

// retryClaimedBatch enqueues n jobs, half of them repeatable, and claims each
// for lease, a microsecond apart so their leases expire in id order. It
// returns their ids, ascending.
func retryClaimedBatch(t *testing.T, e env, n int, lease time.Duration) []int64 {
	t.Helper()
	specs := make([]jobs.Spec, n)
	for i := range specs {
		specs[i] = spec(fmt.Sprintf(`{"batch": %d, "n": %d}`, e.Clock.Now().UnixMicro(), i))
		specs[i].Repeatable = i%2 == 0
		specs[i].Retry = jobs.RetryPolicy{Base: time.Second, Cap: time.Minute, Jitter: 0.2, MaxAttempts: 3}
	}
	receipts, err := e.client.EnqueueMany(t.Context(), specs)
	require.NoError(t, err)
	ids := make([]int64, n)
	for i, r := range receipts {
		retryClaimID(t, e, r.ID, jobs.ClaimOptions{Lease: lease})
		e.Clock.Advance(time.Microsecond)
		ids[i] = r.ID
	}
	slices.Sort(ids)
	return ids
}

// retryRequireSweptOnce checks that each of ids left claimed exactly once,
// by an expiry, and is no longer claimed.
func retryRequireSweptOnce(t *testing.T, e env, ids []int64) {
	t.Helper()
	rows, err := e.Pool.Query(t.Context(), `
		SELECT j.id, j.state, j.repeatable,
		       (SELECT count(*) FROM docket.job_events ev WHERE ev.job_id = j.id AND ev.from_state = 'claimed')
		FROM docket.jobs j WHERE j.id = ANY($1) ORDER BY j.id`, ids)
	require.NoError(t, err)
	type row struct {
		ID         int64
		State      string
		Repeatable bool
		Left       int
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	require.Len(t, got, len(ids))
	for _, r := range got {
		require.Equal(t, 1, r.Left, "job %d left claimed %d times", r.ID, r.Left)
		want := "uncertain"
		if r.Repeatable {
			want = "queued"
		}
		require.Equal(t, want, r.State, "job %d", r.ID)
	}
}

// retryUncertain returns docket.jobs_uncertain as id → uncertain_since.
func retryUncertain(t *testing.T, e env) map[int64]time.Time {
	t.Helper()
	rows, err := e.Pool.Query(t.Context(), `SELECT id, uncertain_since FROM docket.jobs_uncertain`)
	require.NoError(t, err)
	out := map[int64]time.Time{}
	for rows.Next() {
		var id int64
		var since time.Time
		require.NoError(t, rows.Scan(&id, &since))
		out[id] = since.UTC()
	}
	require.NoError(t, rows.Err())
	return out
}

func retryHistory(t *testing.T, e env, id int64) []jobs.State {
	t.Helper()
	hist, err := e.client.History(t.Context(), id)
	require.NoError(t, err)
	states := make([]jobs.State, len(hist))
	for i, ev := range hist {
		states[i] = ev.To
	}
	return states
}

func retryIDs(js []jobs.Job) []int64 {
	ids := make([]int64, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	return ids
}
