package testkit

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
)

// SettleOnNewSession claims and completes n due jobs of queue through c,
// batch at a time, each batch in one transaction (ClaimTx, then
// CompleteManyTx with result: nil for none), on a new connection of cfg,
// after one job alone when first is set, and returns the time the n took.
// A session keeps the generic plans its first statements make: comparing a
// session that began with one job against one that did not shows what a
// plan made for one row costs the batches after it.
func SettleOnNewSession(tb testing.TB, cfg *pgx.ConnConfig, c *jobs.Client, queue string, result json.RawMessage,
	first bool, n, batch int) time.Duration {
	tb.Helper()
	ctx := tb.Context()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(tb, err)
	defer func() { _ = conn.Close(ctx) }()
	settle := func(limit int) {
		tx, err := conn.Begin(ctx)
		require.NoError(tb, err)
		defer func() { _ = tx.Rollback(ctx) }()
		claimed, err := c.ClaimTx(ctx, tx, queue, jobs.ClaimOptions{Limit: limit})
		require.NoError(tb, err)
		require.Len(tb, claimed, limit)
		done := make([]jobs.Completion, len(claimed))
		for i, j := range claimed {
			done[i] = jobs.Completion{Lease: j.Lease(), Result: result}
		}
		refused, err := c.CompleteManyTx(ctx, tx, done)
		require.NoError(tb, err)
		require.Equal(tb, make([]error, limit), refused)
		require.NoError(tb, tx.Commit(ctx))
	}
	if first {
		settle(1)
	}
	began := time.Now()
	for range n / batch {
		settle(batch)
	}
	return time.Since(began)
}
