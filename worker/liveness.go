package worker

import (
	"context"
	"sync"
	"time"
)

// A batch is a River job, running for as long as the batch does: minutes,
// or as long as the handlers it runs. When its process dies (killed, or cut
// off and stopped) River's row of it would stay running until River's
// rescuer, which cannot tell a dead batch from a long one, takes it after
// RescueStuckJobsAfter. So each process marks the rows of the batches it
// runs as alive, in their metadata (docket_alive_until: its clock's now
// plus aliveSweeps sweep periods), as a batch begins and every sweep
// period; and every worker's batches sweep discards a running batch row
// whose mark has lapsed, with an error that says why. A batch's jobs need nothing of its row: their leases
// expire and the lease sweep moves them on. A live batch whose row was
// discarded (its process stalled past the mark) runs on; River's
// completion of it then changes nothing.

// SweepBatches is the built-in sweep that finishes the River jobs of
// batches whose process is gone: running, with no mark of life from their
// process for aliveSweeps sweep periods.
const SweepBatches = "batches"

// aliveSweeps is how many sweep periods a batch's mark of life lasts.
const aliveSweeps = 3

// The statements on River's own table (docket.river_job, River's schema,
// which the worker's login writes as River's client does), by id: the
// mark, and the sweep.
const (
	markAlive = `UPDATE docket.river_job SET metadata = metadata || jsonb_build_object('docket_alive_until', $2::timestamptz)
WHERE id = ANY ($1::bigint[]) AND state = 'running'`
	sweepGone = `WITH gone AS (
    SELECT id FROM docket.river_job
    WHERE kind = $1 AND state = 'running' AND (metadata ->> 'docket_alive_until')::timestamptz < $2::timestamptz
    ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
UPDATE docket.river_job r
SET state = 'discarded', finalized_at = $2::timestamptz,
    errors = array_append(r.errors, jsonb_build_object('at', $2::timestamptz, 'attempt', r.attempt, 'trace', '',
        'error', 'docket: the process running this batch is gone: no mark of life since ' || (r.metadata ->> 'docket_alive_until')
            || '; its jobs'' leases expire and the lease sweep moves them on'))
FROM gone WHERE r.id = gone.id`
)

// liveness is the set of batch rows this process runs.
type liveness struct {
	mu   sync.Mutex
	rows map[int64]struct{}
}

func newLiveness() *liveness {
	return &liveness{rows: map[int64]struct{}{}}
}

// began notes that the batch of River job id runs here.
func (l *liveness) began(id int64) {
	l.mu.Lock()
	l.rows[id] = struct{}{}
	l.mu.Unlock()
}

// batchBegan notes that the batch of River job id runs here, and marks its
// row alive at once, before it claims: a process killed before its next
// mark still leaves a mark to lapse. A mark that fails is made by the next
// period's.
func (w *Client) batchBegan(ctx context.Context, id int64) {
	w.alive.began(id)
	w.mark(ctx, []int64{id})
}

// mark marks the rows ids alive.
func (w *Client) mark(ctx context.Context, ids []int64) {
	until := w.cfg.Clock.Now().Add(aliveSweeps * w.cfg.SweepEvery)
	if _, err := w.pool.Exec(ctx, markAlive, ids, until); err != nil && ctx.Err() == nil {
		w.log.DebugContext(ctx, "docket worker: marking batches alive failed; trying again next period", "err", err)
	}
}

// ended notes that it has ended.
func (l *liveness) ended(id int64) {
	l.mu.Lock()
	delete(l.rows, id)
	l.mu.Unlock()
}

func (l *liveness) ids() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]int64, 0, len(l.rows))
	for id := range l.rows {
		ids = append(ids, id)
	}
	return ids
}

// markLoop marks the rows of this process's batches alive every sweep
// period until ctx ends: after the last batch has ended, in a stop.
func (w *Client) markLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ids := w.alive.ids(); len(ids) > 0 {
			w.mark(ctx, ids)
		}
	}
}

// sweepBatches is the batches sweep's Func.
func (w *Client) sweepBatches(ctx context.Context, run *SweepRun) (int, error) {
	tag, err := run.Tx.Exec(ctx, sweepGone, BatchKind, run.Now, run.Limit)
	if err != nil {
		return 0, err
	}
	if n := tag.RowsAffected(); n > 0 {
		w.log.InfoContext(ctx, "docket worker: discarded the River jobs of batches whose process is gone", "batches", n)
	}
	return int(tag.RowsAffected()), nil
}
