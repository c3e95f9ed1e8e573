package retention_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/retention"
)

// partitions lists the ranged partitions of the job history by their lower
// bound (the one below every range, made by 00048, is left out).
func partitions(t testing.TB, e env) []int64 {
	t.Helper()
	rs, err := e.Pool.Query(t.Context(), `SELECT lo FROM docket.history_partitions() WHERE lo IS NOT NULL ORDER BY lo`)
	require.NoError(t, err)
	var los []int64
	for rs.Next() {
		var lo int64
		require.NoError(t, rs.Scan(&lo))
		los = append(los, lo)
	}
	require.NoError(t, rs.Err())
	return los
}

// narrowHistory makes the history's partitions width job ids wide, with
// ahead of them made ahead, and starts the job ids at a billion, a
// boundary of every such width.
func narrowHistory(t testing.TB, e env, width, ahead int) {
	t.Helper()
	_, err := e.Pool.Exec(t.Context(), `UPDATE docket.settings SET value = CASE name WHEN 'history_partition_width' THEN $1 ELSE $2 END
		WHERE name IN ('history_partition_width', 'history_partitions_ahead')`, fmt.Sprint(width), fmt.Sprint(ahead))
	require.NoError(t, err)
	_, err = e.Pool.Exec(t.Context(), `ALTER TABLE docket.jobs ALTER COLUMN id RESTART WITH 1000000000`)
	require.NoError(t, err)
}

// TestThePruneDropsAPartitionItEmptied fills three history partitions ten
// job ids wide: the first with jobs all past their horizon, the second
// half with such jobs and half with queued ones, the third with queued
// ones. One prune, as the pruner's login, removes all fifteen past their
// horizon and records them; the first partition is dropped whole, the
// second's pruned jobs lose their events row by row, and every job left
// still verifies.
func TestThePruneDropsAPartitionItEmptied(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 2, 24))
	ctx := t.Context()
	const base, width = 1_000_000_000, 10
	narrowHistory(t, e, width, 5)

	// The partitions are made ahead of the id sequence by the prune's upkeep.
	tx, err := e.API.Begin(ctx)
	require.NoError(t, err)
	up, err := e.pruner.MaintainHistoryTx(ctx, tx)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Positive(t, up.Made)
	require.Subset(t, partitions(t, e), []int64{base, base + width, base + 2*width})

	var gone, kept []jobs.Job
	for i := range 3 * width {
		switch {
		case i < width, i < width+width/2:
			gone = append(gone, finish(t, e, e.jobs, "", jobs.Cancelled))
		default:
			kept = append(kept, finish(t, e, e.jobs, "", jobs.Queued))
		}
	}
	require.Equal(t, int64(base), gone[0].ID)
	require.Equal(t, int64(base+3*width-1), kept[len(kept)-1].ID)

	// The prune leaves the first partition's events for the upkeep to drop
	// with it, and deletes those of the second's pruned jobs.
	e.Clock.Advance(time.Hour)
	tx, err = e.API.Begin(ctx)
	require.NoError(t, err)
	ps, err := e.pruner.PruneTx(ctx, tx, 100)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Len(t, ps, 1)
	require.Equal(t, len(gone), ps[0].Jobs)
	require.Equal(t, 2*len(gone), ps[0].JobEvents, "queued, cancelled")
	require.Equal(t, 2*width, rows(t, e, "docket.job_events", "job_id < $1", base+width))
	require.Zero(t, rows(t, e, "docket.job_events", "job_id BETWEEN $1 AND $2", base+width, base+width+width/2-1))
	require.Zero(t, rows(t, e, "docket.jobs", "id < $1", base+width))

	tx, err = e.API.Begin(ctx)
	require.NoError(t, err)
	up, err = e.pruner.MaintainHistoryTx(ctx, tx)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, 2, up.Dropped, "the first range's, and the one below every range, which the jobs' ids skipped")
	require.Zero(t, rows(t, e, "docket.job_events", "job_id < $1", base+width))

	los := partitions(t, e)
	require.NotContains(t, los, int64(base), "the partition the prune emptied is dropped whole")
	require.Contains(t, los, int64(base+width), "the partly pruned one stays")
	require.Contains(t, los, int64(base+2*width))
	for _, j := range gone {
		requirePruned(t, e, j.ID, ps[0].ID)
	}
	for _, j := range kept {
		requireKept(t, e, j.ID)
		require.Equal(t, 1, rows(t, e, "docket.job_events", "job_id = $1", j.ID))
	}

	// Nothing more to prune, nothing more to drop; the partly pruned
	// partition goes once its last jobs are pruned.
	for _, j := range kept[:width/2] {
		_, err := e.jobs.Cancel(ctx, j.ID, "not needed")
		require.NoError(t, err)
	}
	e.Clock.Advance(time.Hour)
	ps, err = e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, width/2, ps[0].Jobs)
	require.NotContains(t, partitions(t, e), int64(base+width))
	require.Contains(t, partitions(t, e), int64(base+2*width), "a partition with jobs left is kept")
	for _, j := range kept[width/2:] {
		requireKept(t, e, j.ID)
	}
}

// TestOneHistoryUpkeepAtATime runs the history's upkeep in two
// transactions at once: the second does nothing, at once, rather than wait
// for the first's partition locks (two upkeeps at once, each holding a
// dropped partition while trying the next, deadlocked); after the first
// commits, the next upkeep does the work. Then upkeeps released together,
// repeated, with prunes, all succeed.
func TestOneHistoryUpkeepAtATime(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 2, 24))
	ctx := t.Context()
	narrowHistory(t, e, 10, 5)

	first, err := e.API.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	up, err := e.pruner.MaintainHistoryTx(ctx, first)
	require.NoError(t, err)
	require.Positive(t, up.Made)

	// The first holds the upkeep's turn to its end: the width's row.
	var pgErr *pgconn.PgError
	_, err = e.Pool.Exec(ctx, `SELECT 1 FROM docket.settings WHERE name = 'history_partition_width' FOR UPDATE NOWAIT`)
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "55P03", pgErr.Code, "lock_not_available: the running upkeep holds it")

	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	second, err := e.API.Begin(wait)
	require.NoError(t, err)
	up, err = e.pruner.MaintainHistoryTx(wait, second)
	require.NoError(t, err, "the second upkeep does not wait for the first")
	require.Equal(t, retention.HistoryUpkeep{}, up)
	require.NoError(t, second.Commit(ctx))
	require.NoError(t, first.Rollback(ctx))

	up, err = e.pruner.MaintainHistory(ctx)
	require.NoError(t, err)
	require.Positive(t, up.Made, "the first rolled back: the next upkeep makes the partitions")

	// Prunes with their upkeep, released together, over partitions they
	// empty as they go.
	for round := range 5 {
		for range 30 {
			finish(t, e, e.jobs, "", jobs.Cancelled)
		}
		e.Clock.Advance(time.Hour)
		start := make(chan struct{})
		errs := make(chan error, 4)
		for range 4 {
			go func() {
				<-start
				_, err := e.pruner.Prune(ctx, 10)
				if err == nil {
					_, err = e.pruner.MaintainHistory(ctx)
				}
				errs <- err
			}()
		}
		close(start)
		for range 4 {
			require.NoError(t, <-errs, "round %d", round)
		}
	}
}

// historyIndexesLocked lists, by lower bound, the ranged partitions of the
// job history whose indexes transaction tx has opened (the one below every
// range as 0): a statement that reads a partition by its key locks the
// index it reads.
func historyIndexesLocked(t testing.TB, tx pgx.Tx) []int64 {
	t.Helper()
	var los []int64
	require.NoError(t, tx.QueryRow(t.Context(), `
		SELECT coalesce(array_agg(DISTINCT coalesce(h.lo, 0) ORDER BY coalesce(h.lo, 0)), '{}')
		FROM pg_locks l
		JOIN pg_index i ON i.indexrelid = l.relation
		JOIN docket.history_partitions() h ON h.part = i.indrelid
		WHERE l.locktype = 'relation' AND l.pid = pg_backend_pid()`).Scan(&los))
	return los
}

// historyScans counts, by history partition (by lower bound, the one below
// every range as 0), the scans of it, by index or whole, that the session
// has not yet reported: those of tx so far, and of the session's
// transactions before it that Postgres has not flushed to its statistics
// (it does so at most once a second). Compare two counts in one
// transaction: it flushes none while one runs.
func historyScans(t testing.TB, tx pgx.Tx) map[int64]int64 {
	t.Helper()
	rs, err := tx.Query(t.Context(), `
		SELECT coalesce(h.lo, 0), s.seq_scan + coalesce(s.idx_scan, 0)
		FROM pg_stat_xact_user_tables s
		JOIN docket.history_partitions() h ON h.part = s.relid`)
	require.NoError(t, err)
	scans := map[int64]int64{}
	for rs.Next() {
		var lo, n int64
		require.NoError(t, rs.Scan(&lo, &n))
		scans[lo] = n
	}
	require.NoError(t, rs.Err())
	return scans
}

// TestAnEventReadsOnlyItsJobsPartition completes jobs whose histories lie in
// partitions ten ids wide, seven made ahead: once its statements are
// planned, a session's completion reads its job's last event in that job's
// partition only, not in every partition of the history (it prepared a
// read of each, in every statement, when the jobs it moved were known only
// row by row), and a completion of jobs in three partitions at once reads
// those three. Every history still chains and verifies.
func TestAnEventReadsOnlyItsJobsPartition(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 2, 24))
	ctx := t.Context()
	const base, width = 1_000_000_000, 10
	narrowHistory(t, e, width, 7)
	_, err := e.pruner.MaintainHistory(ctx)
	require.NoError(t, err)
	require.Subset(t, partitions(t, e), []int64{base, base + width, base + 2*width, base + 3*width, base + 6*width})

	specs := make([]jobs.Spec, 3*width)
	for i := range specs {
		specs[i] = jobs.Spec{Kind: "report.build", Payload: json.RawMessage(`{"n": 1}`)}
	}
	receipts, err := e.jobs.EnqueueMany(ctx, specs)
	require.NoError(t, err)
	require.Equal(t, int64(base), receipts[0].ID)
	require.Equal(t, int64(base+3*width-1), receipts[len(receipts)-1].ID)

	// On one session, whose first completion plans the statements (and
	// planning opens every partition): one job of the last partition, then
	// one of the middle partition.
	conn, err := e.API.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	completeAll := func(tx pgx.Tx, claimed []jobs.Job) {
		refused, err := e.jobs.CompleteManyTx(ctx, tx, completions(claimed))
		require.NoError(t, err)
		require.Equal(t, make([]error, len(claimed)), refused)
	}
	completeOne := func(id int64) []int64 {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		j, ok, err := e.jobs.ClaimIDTx(ctx, tx, id, jobs.ClaimOptions{})
		require.NoError(t, err)
		require.True(t, ok)
		completeAll(tx, []jobs.Job{j})
		locked := historyIndexesLocked(t, tx)
		require.NoError(t, tx.Commit(ctx))
		return locked
	}
	completeOne(base + 3*width - 1)
	require.Equal(t, []int64{base + width}, completeOne(base+width+5))

	// The other 28, in three partitions, in one statement.
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	claimed, err := e.jobs.ClaimTx(ctx, tx, "default", jobs.ClaimOptions{Limit: 3 * width})
	require.NoError(t, err)
	require.Len(t, claimed, 3*width-2)
	completeAll(tx, claimed)
	require.Equal(t, []int64{base, base + width, base + 2*width}, historyIndexesLocked(t, tx))
	require.NoError(t, tx.Commit(ctx))

	for _, r := range receipts {
		requireKept(t, e, r.ID)
		require.Equal(t, 2, rows(t, e, "docket.job_events", "job_id = $1", r.ID), "queued, succeeded")
	}
}

// TestAPruneReadsOnlyItsJobsPartitions prunes jobs whose histories lie in
// partitions ten ids wide, seven made ahead, on one session whose plans are
// generic, as a long-lived session's are after five calls: once its first
// prune has planned the statements (planning opens every partition),
// verifying the jobs' chains and deleting their events read the partitions
// that hold them, not every partition of the history (= ANY of an array
// Postgres does not know as the statement starts searched each partition
// for every id). The second prune takes the rest of the first partition,
// whose events the upkeep drops with it, and five jobs of the second,
// whose events it deletes by row.
func TestAPruneReadsOnlyItsJobsPartitions(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 1, 1))
	ctx := t.Context()
	const base, width = 1_000_000_000, 10
	narrowHistory(t, e, width, 7)
	_, err := e.pruner.MaintainHistory(ctx)
	require.NoError(t, err)
	finishMany(t, e, "default", 3*width)
	require.Subset(t, partitions(t, e), []int64{base, base + width, base + 2*width, base + 6*width})
	e.Clock.Advance(2 * time.Hour)

	conn, err := e.API.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(context.Background(), `RESET plan_cache_mode`) }()
	prune := func(limit int) (retention.Prune, []int64) {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		before := historyScans(t, tx)
		ps, err := e.pruner.PruneTx(ctx, tx, limit)
		require.NoError(t, err)
		require.Len(t, ps, 1)
		require.Equal(t, limit, ps[0].Jobs)
		var scanned []int64
		for lo, n := range historyScans(t, tx) {
			if n > before[lo] {
				scanned = append(scanned, lo)
			}
		}
		slices.Sort(scanned)
		require.NoError(t, tx.Commit(ctx))
		return ps[0], scanned
	}
	first, _ := prune(5)
	second, scanned := prune(width)
	require.Equal(t, []int64{base, base + width}, scanned)
	_, err = e.pruner.MaintainHistory(ctx)
	require.NoError(t, err)
	require.NotContains(t, partitions(t, e), int64(base), "the first partition, emptied, is dropped")

	for id := int64(base); id < base+width+5; id++ {
		requirePruned(t, e, id, map[bool]int64{true: first.ID, false: second.ID}[id < base+5])
	}
	for id := int64(base + width + 5); id < base+3*width; id++ {
		requireKept(t, e, id)
	}
}
