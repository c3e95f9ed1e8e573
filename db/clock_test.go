package db_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
)

func TestFakeClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 29, 0, 59, 59, 999_999_999, time.FixedZone("CET", 3600))
	c := db.NewFakeClock(start)
	require.Equal(t, start.UTC().Truncate(time.Microsecond), c.Now())
	require.Equal(t, time.UTC, c.Now().Location())

	require.Equal(t, start.Add(time.Hour).UTC().Truncate(time.Microsecond), c.Advance(time.Hour))
	c.Set(start)
	require.Equal(t, start.UTC().Truncate(time.Microsecond), c.Now())
	c.Advance(-time.Minute)
	require.Equal(t, start.Add(-time.Minute).UTC().Truncate(time.Microsecond), c.Now())
}

func TestFakeClockConcurrentAdvance(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := db.NewFakeClock(start)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			c.Advance(time.Second)
			_ = c.Now()
		})
	}
	wg.Wait()
	require.Equal(t, start.Add(50*time.Second), c.Now())
}

func TestSystemClockMatchesPostgresPrecision(t *testing.T) {
	t.Parallel()
	now := db.SystemClock{}.Now()
	require.Equal(t, now, now.Truncate(time.Microsecond))
	require.Equal(t, time.UTC, now.Location())
}

func mustParse(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}
