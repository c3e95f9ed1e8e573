package replica

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
)

// A standby's lag is the caller's instant less its last replayed commit,
// never negative; a standby that replayed nothing has an unknown lag; a
// primary has none.
func TestLagOf(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	replayed := at.Add(-1500 * time.Millisecond)
	ahead := at.Add(time.Second)

	l := lagOf(at, true, &replayed)
	require.Equal(t, db.Lag{Replica: true, At: at, Replayed: replayed, Behind: 1500 * time.Millisecond}, l)
	require.True(t, l.Known())
	require.Equal(t, "replica, at most 1.5s behind", l.String())

	l = lagOf(at, true, &ahead)
	require.Equal(t, time.Duration(0), l.Behind, "the primary's clock ahead of the caller's")
	require.Equal(t, ahead, l.Replayed)

	l = lagOf(at, true, nil)
	require.False(t, l.Known())
	require.Equal(t, "replica, lag unknown", l.String())

	l = lagOf(at, false, &replayed)
	require.Equal(t, db.Lag{At: at}, l, "a promoted standby still reports its last replay")
	require.True(t, l.Known())
	require.Equal(t, "primary", l.String())
}

// Without a replica the reads go to the pool, and the lag is the primary's,
// said without asking.
func TestNoReplica(t *testing.T) {
	t.Parallel()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	r := New(nil, nil)
	require.Nil(t, r.DB)
	l, err := r.Lag(t.Context(), clock, "test.lag")
	require.NoError(t, err)
	require.Equal(t, db.Lag{At: clock.Now()}, l)
}
