package jobs_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// seqRead is how many rows of table this transaction has read by
// sequential scans so far.
func seqRead(t testing.TB, tx pgx.Tx, table string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, tx.QueryRow(t.Context(),
		"SELECT coalesce(sum(seq_tup_read), 0)::bigint FROM pg_stat_xact_user_tables WHERE relid = $1::regclass", table).Scan(&n))
	return n
}

// TestAClaimReadsItsJobsByKeyWhateverTheTableWas: a session keeps the plan
// of a claim's update from its first claim (a generic plan). Made when the
// table held one job, that plan read the whole table at every later claim
// of the session, a worker's for its life; the claim, and the completion
// in its transaction, now find their jobs by key whatever the table held
// when the session first claimed.
func TestAClaimReadsItsJobsByKeyWhateverTheTableWas(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	conn, err := e.API.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	claimer := cqClient(t, e, project, app)
	claimOne := func() (int64, int) {
		var read int64
		var got []jobs.Job
		require.NoError(t, db.WithTx(ctx, conn, func(tx pgx.Tx) error {
			var err error
			if got, err = cqStore(claimer).ClaimQueueTx(ctx, tx, "default", 1, nil, nil, nil); err != nil {
				return err
			}
			refusals, err := claimer.CompleteManyTx(ctx, tx, []jobs.Completion{{Lease: got[0].Lease()}})
			require.NoError(t, err)
			require.NoError(t, refusals[0])
			read = seqRead(t, tx, "docket.jobs")
			return nil
		}))
		return read, len(got)
	}
	_, err = e.client.Enqueue(ctx, spec(`{}`))
	require.NoError(t, err)
	_, n := claimOne() // the session's plans, made with one job in the table
	require.Equal(t, 1, n)
	specs := make([]jobs.Spec, 3000)
	for i := range specs {
		specs[i] = spec(fmt.Sprintf(`{"n": %d}`, i))
	}
	_, err = e.client.EnqueueMany(ctx, specs)
	require.NoError(t, err)
	for range 3 {
		read, n := claimOne()
		require.Equal(t, 1, n)
		require.Zero(t, read, "rows of docket.jobs read by sequential scans to claim and complete one job")
	}
}
