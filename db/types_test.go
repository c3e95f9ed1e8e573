package db_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/integration/pgtest"
)

// The Go types sqlc.yaml maps Postgres types to survive a round trip through
// pgx: what generated code sends and scans is what the columns hold.
func TestTypeOverridesRoundTrip(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	ctx := t.Context()

	at := time.Date(2026, 3, 29, 1, 30, 0, 123456000, time.UTC)
	lease := 90*time.Second + 250*time.Millisecond
	id := uuid.New()
	payload := json.RawMessage(`{"invoice": 42, "lines": [1, 2]}`)

	var (
		gotAt      time.Time
		gotLease   time.Duration
		gotID      uuid.UUID
		gotPayload json.RawMessage
		leaseText  string
	)
	err := pool.QueryRow(ctx, `SELECT $1::timestamptz, $2::interval, $3::uuid, $4::jsonb, $2::interval::text`,
		at, lease, id, payload).Scan(&gotAt, &gotLease, &gotID, &gotPayload, &leaseText)
	require.NoError(t, err)
	require.True(t, at.Equal(gotAt))
	require.Equal(t, lease, gotLease)
	require.Equal(t, "00:01:30.25", leaseText)
	require.Equal(t, id, gotID)
	require.JSONEq(t, string(payload), string(gotPayload))

	var nullAt *time.Time
	var nullLease *time.Duration
	require.NoError(t, pool.QueryRow(ctx, `SELECT NULL::timestamptz, NULL::interval`).Scan(&nullAt, &nullLease))
	require.Nil(t, nullAt)
	require.Nil(t, nullLease)
}
