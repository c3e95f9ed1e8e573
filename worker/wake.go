package worker

import (
	"context"
	"time"

	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
)

// NotifyChannel is the Postgres channel docket notifies, in the transaction
// that makes jobs due now (created, or queued again), with the queue of
// each: a worker listens on it to start their handlers at once.
const NotifyChannel = "docket_jobs"

var queries = dbsqlc.New()

// wake is the worker's ear: it listens on NotifyChannel and, for a queue the
// worker serves, wakes that queue's waiting batches or asks River for one;
// every PollInterval it does the same for each queue with a job due, the
// floor under the notifications (a job whose retry wait ended, one made due
// by a clock, a notification lost with a connection).
func (w *Client) wake(ctx context.Context) {
	go w.listen(ctx)
	t := time.NewTicker(w.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, q := range w.queueStates {
			q.signal()
			q.mu.Lock()
			idle := q.running == 0
			q.mu.Unlock()
			if !idle {
				continue
			}
			due, err := queries.JobQueueDue(ctx, w.pool, q.name, w.cfg.Clock.Now(), string(w.cfg.Actor))
			if err != nil {
				if ctx.Err() == nil {
					w.log.WarnContext(ctx, "docket worker: looking for due jobs failed", "queue", q.name, "err", err)
				}
				continue
			}
			if due {
				w.moreBatches(q)
			}
		}
	}
}

// listen holds one connection that listens on NotifyChannel, reconnecting
// after a failure (the poll covers the gap).
func (w *Client) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := w.listenConn(ctx)
		if ctx.Err() != nil {
			return
		}
		w.log.WarnContext(ctx, "docket worker: listening for new jobs failed; polling until it listens again", "err", err)
		t := time.NewTimer(w.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (w *Client) listenConn(ctx context.Context) error {
	pc, err := w.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection that listened is not given back to the pool.
	conn := pc.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return err
	}
	w.listenOnce.Do(func() { close(w.listening) })
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if q := w.queueOf(n.Payload); q != nil {
			q.signal()
			q.mu.Lock()
			waiting := q.running > 0
			q.mu.Unlock()
			if !waiting {
				w.moreBatches(q)
			}
		}
	}
}
