package db

import (
	"sync"
	"time"
)

// Clock is where docket's Go code reads the time it passes to the database as
// p_now. Storage decides nothing by the wall clock itself, so a test that
// controls the Clock controls every time-based decision; the database only
// bounds the instant for logins outside docket_clock ([ErrClockSkew]).
type Clock interface {
	// Now returns the current instant, truncated to the microsecond
	// precision Postgres stores.
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now in UTC truncated to microseconds.
func (SystemClock) Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// FakeClock is a [Clock] that moves only when told to. It is safe for
// concurrent use. The zero value is not usable; create one with
// [NewFakeClock].
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a clock standing at start (truncated to microseconds).
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start.UTC().Truncate(time.Microsecond)}
}

// Now returns the clock's current instant.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t (truncated to microseconds), forwards or back.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t.UTC().Truncate(time.Microsecond)
}

// Advance moves the clock forward by d and returns the new instant.
// A negative d moves it back.
func (c *FakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d).Truncate(time.Microsecond)
	return c.now
}
