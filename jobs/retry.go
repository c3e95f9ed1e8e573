package jobs

import (
	"fmt"
	"math"
	"time"

	"github.com/docket-dev/docket/db"
)

// RetryPolicy says how often a job is attempted and how long it waits between
// a retryable failure and its next attempt. It is plain data, stored with the
// job when it is enqueued.
//
// The zero RetryPolicy means [DefaultRetryPolicy]. In any other policy a zero
// Base, Cap or MaxAttempts takes the default's value and Jitter is used as
// given, so a policy of {MaxAttempts: 3} makes three attempts (two retries)
// without jitter.
type RetryPolicy struct {
	// Base is the delay after the first failed attempt; each further attempt
	// doubles it. 1 ms .. 24 h. Defaults to 1 s.
	Base time.Duration
	// Cap bounds the delay. Base .. 7 days. Defaults to 10 minutes, or Base
	// when that is longer.
	Cap time.Duration
	// Jitter shortens each delay by up to this fraction of itself, drawn at
	// random, so jobs that failed together do not retry together. 0..1.
	Jitter float64
	// MaxAttempts bounds the claims of the job: a retryable failure of attempt
	// MaxAttempts makes it dead. 1..100. Defaults to 5.
	MaxAttempts int
}

// DefaultRetryPolicy is the policy of a job enqueued without one.
var DefaultRetryPolicy = RetryPolicy{Base: time.Second, Cap: 10 * time.Minute, Jitter: 0.2, MaxAttempts: 5}

// The bounds of a [RetryPolicy]. docket.jobs' constraints enforce the same.
const (
	MinBackoffBase  = time.Millisecond
	MaxBackoffBase  = 24 * time.Hour
	MaxBackoffCap   = 7 * 24 * time.Hour
	MaxAttemptsMax  = 100
	MaxRetryAfter   = 24 * time.Hour // a peer's retry-after hint is clamped to 0 .. MaxRetryAfter
	DefaultAttempts = 5
)

// resolved returns p with its defaults applied.
func (p RetryPolicy) resolved() RetryPolicy {
	if p == (RetryPolicy{}) {
		return DefaultRetryPolicy
	}
	if p.Base == 0 {
		p.Base = DefaultRetryPolicy.Base
	}
	if p.Cap == 0 {
		p.Cap = max(DefaultRetryPolicy.Cap, p.Base)
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultRetryPolicy.MaxAttempts
	}
	return p
}

// Validate refuses, with [db.ErrInvalidArgument], a policy outside its bounds
// once defaults are applied.
func (p RetryPolicy) Validate() error {
	p = p.resolved()
	switch {
	case p.Base < MinBackoffBase || p.Base > MaxBackoffBase:
		return invalid("retry policy base %v is outside %v .. %v", p.Base, MinBackoffBase, MaxBackoffBase)
	case p.Cap < p.Base || p.Cap > MaxBackoffCap:
		return invalid("retry policy cap %v is outside base (%v) .. %v", p.Cap, p.Base, MaxBackoffCap)
	case math.IsNaN(p.Jitter) || p.Jitter < 0 || p.Jitter > 1:
		return invalid("retry policy jitter %v is outside 0..1", p.Jitter)
	case p.MaxAttempts < 1 || p.MaxAttempts > MaxAttemptsMax:
		return invalid("max attempts %d is outside 1..%d", p.MaxAttempts, MaxAttemptsMax)
	}
	return nil
}

// Backoff returns the delay before the next attempt after failed attempt
// number attempt (1 for the first), given draw, a random number in [0, 1):
// Base doubled attempt-1 times, capped at Cap, then shortened by
// Jitter×draw of itself, in whole microseconds. It is pure: the database
// computes the same value (docket.job_backoff) with its own draw. Attempts
// below 1 count as 1; draw is clamped to [0, 1].
func (p RetryPolicy) Backoff(attempt int, draw float64) time.Duration {
	p = p.resolved()
	attempt = min(max(attempt, 1), 64)
	if math.IsNaN(draw) {
		draw = 0
	}
	draw = min(max(draw, 0), 1)
	base := p.Base.Microseconds()
	ceiling := p.Cap.Microseconds()
	raw := ceiling
	if shift := attempt - 1; shift < 63 && base <= ceiling>>shift {
		raw = min(base<<shift, ceiling)
	}
	shortened := float64(raw) * float64(1-float64(p.Jitter*draw))
	return time.Duration(math.Floor(shortened)) * time.Microsecond
}

func invalid(format string, args ...any) error {
	return db.Refuse(db.ErrInvalidArgument, "job.validate", fmt.Sprintf(format, args...))
}
