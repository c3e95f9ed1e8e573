package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/docket-dev/docket/jobs"
)

// beat is one running handler's heartbeat.
type beat struct {
	once  sync.Once
	quit  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	lost  error     // the refusal that ended the lease, once lost
	until time.Time // when the lease expires, as of its last renewal
}

// heartbeat renews lease every Heartbeat fraction of j's lease while the
// handler runs. A renewal the job store refuses (the job was cancelled, the
// lease was taken over) cancels the handler with errLeaseLost, but for a
// lease that merely expired (see lateTo): then the heartbeat ends, the
// handler runs on, and its outcome is recorded late. A renewal that fails
// to reach the database is tried again at the next beat.
func (w *Client) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, lease jobs.Lease, j jobs.Job) *beat {
	b := &beat{quit: make(chan struct{}), done: make(chan struct{}), until: j.LeaseExpiresAt}
	d := j.LeaseDuration
	if !j.LeaseExpiresAt.IsZero() && !j.ClaimedAt.IsZero() {
		d = j.LeaseExpiresAt.Sub(j.ClaimedAt) // the lease the claim took
	}
	d = min(max(d, jobs.MinLease), jobs.MaxLease)
	every := time.Duration(float64(d) * w.cfg.Heartbeat)
	go func() {
		defer close(b.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-b.quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			renewed, err := w.jobs.Renew(ctx, lease, d)
			switch {
			case err == nil:
				b.mu.Lock()
				b.until = renewed.LeaseExpiresAt
				b.mu.Unlock()
			case isRefusal(err) && w.lateTo(ctx, j, err):
				// The lease expired while the handler ran (the database
				// was away, or the process starved): nobody else holds
				// the job, so the handler runs on, and its outcome is
				// recorded late.
				w.log.InfoContext(ctx, "docket worker: the lease expired while the handler ran; its outcome will be recorded late",
					"job", j.ID, "kind", j.Kind, "generation", j.LeaseGeneration, "err", err)
				return
			case isRefusal(err):
				b.mu.Lock()
				b.lost = err
				b.mu.Unlock()
				cancel(errLeaseLost)
				return
			case errors.Is(err, context.Canceled):
				return
			default:
				w.log.WarnContext(ctx, "docket worker: renewing a lease failed; trying again at the next beat", "job", j.ID, "err", err)
				w.emit(Event{Type: EventError, JobID: j.ID, Kind: j.Kind, Err: err})
			}
		}
	}()
	return b
}

// stop ends the heartbeat and waits for it; it may be called twice.
func (b *beat) stop() {
	b.once.Do(func() { close(b.quit) })
	<-b.done
}

// lostErr is the refusal that ended the lease.
func (b *beat) lostErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lost
}

// leaseUntil is when the lease expires, as of its last renewal: until then
// an outcome the worker failed to record is still its to record.
func (b *beat) leaseUntil() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.until
}
