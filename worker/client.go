package worker

import (
	"context"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// Jobs returns the client's job client, for reads and settlements.
func (c *Client) Jobs() *jobs.Client { return c.jobs }

// Enqueue creates the job spec describes, with its dispatch, in a
// transaction of its own. See [Client.EnqueueTx].
func (c *Client) Enqueue(ctx context.Context, spec jobs.Spec) (jobs.Enqueued, error) {
	var out jobs.Enqueued
	err := db.WithTx(ctx, c.pool, func(tx pgx.Tx) error {
		var err error
		out, err = c.EnqueueTx(ctx, tx, spec)
		return err
	})
	return out, err
}

// EnqueueTx creates the job spec describes on tx, typically the transaction
// holding the caller's business writes, and inserts its River dispatch in the
// same transaction: committed, the job will run; rolled back, neither the
// job nor its dispatch exists. A duplicate (same idempotency key and
// payload) returns the existing job and dispatches nothing new.
//
// It refuses, writing nothing, what [jobs.Client.EnqueueTx] refuses, and a
// queue River cannot serve ([db.ErrInvalidArgument]: River queue names
// separate letters and digits by single underscores or hyphens).
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, spec jobs.Spec) (jobs.Enqueued, error) {
	spec = c.withDefaults(spec)
	if err := dispatchable(spec); err != nil {
		return jobs.Enqueued{}, err
	}
	e, err := c.jobs.EnqueueTx(ctx, tx, spec)
	if err != nil || e.Duplicate {
		return e, err
	}
	if err := dispatchTx(ctx, c.river, tx, c.cfg.Clock, e.Job); err != nil {
		return jobs.Enqueued{}, fmt.Errorf("job.enqueue: dispatch job %d: %w", e.Job.ID, err)
	}
	return e, nil
}

// DispatchTx inserts on tx a River dispatch for each job of js that is
// queued and not for external executors, so a job some other docket call
// enqueued in tx (the continuation a message delivery enqueues, say) runs as
// soon as tx commits rather than at the dispatch sweep's next run. Jobs in
// other states are skipped. A job dispatched twice still runs once: each
// dispatch claims it by id, and a dispatch that finds it claimed or finished
// does nothing. DispatchTx has no pool form: a dispatch belongs in the
// transaction that enqueued its job (the dispatch sweep dispatches the jobs
// nobody did).
func (c *Client) DispatchTx(ctx context.Context, tx pgx.Tx, js ...jobs.Job) error {
	if err := dispatchTx(ctx, c.river, tx, c.cfg.Clock, js...); err != nil {
		return fmt.Errorf("job.dispatch: %w", err)
	}
	return nil
}

// EnqueueMany creates the jobs specs describe, with their dispatches, in one
// transaction of its own. See [Client.EnqueueManyTx].
func (c *Client) EnqueueMany(ctx context.Context, specs []jobs.Spec) ([]jobs.Receipt, error) {
	var out []jobs.Receipt
	err := db.WithTx(ctx, c.pool, func(tx pgx.Tx) error {
		var err error
		out, err = c.EnqueueManyTx(ctx, tx, specs)
		return err
	})
	return out, err
}

// EnqueueManyTx creates the jobs specs describe on tx in one statement, as
// [jobs.Client.EnqueueManyTx] does, and inserts their dispatches in the same
// transaction (River's COPY path). All or nothing, like EnqueueTx.
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) EnqueueManyTx(ctx context.Context, tx pgx.Tx, specs []jobs.Spec) ([]jobs.Receipt, error) {
	resolved := make([]jobs.Spec, len(specs))
	for i, s := range specs {
		resolved[i] = c.withDefaults(s)
		if err := dispatchable(resolved[i]); err != nil {
			return nil, fmt.Errorf("spec %d: %w", i, err)
		}
	}
	receipts, err := c.jobs.EnqueueManyTx(ctx, tx, resolved)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Clock.Now()
	enqueued := make([]jobs.Job, 0, len(receipts))
	for i, r := range receipts {
		if r.Duplicate {
			continue // its own enqueue dispatched it
		}
		s := resolved[i].Resolved(now)
		enqueued = append(enqueued, jobs.Job{ID: r.ID, Kind: s.Kind, Queue: s.Queue, Priority: s.Priority,
			State: jobs.Queued, External: s.External, AvailableAt: s.AvailableAt})
	}
	if err := dispatchTx(ctx, c.river, tx, c.cfg.Clock, enqueued...); err != nil {
		return nil, fmt.Errorf("job.enqueue_many: dispatch: %w", err)
	}
	return receipts, nil
}

// withDefaults gives spec its kind's handler defaults from the registry.
func (c *Client) withDefaults(spec jobs.Spec) jobs.Spec {
	if c.cfg.Registry == nil {
		return spec
	}
	if h := c.cfg.Registry.lookup(spec.Kind); h != nil {
		if spec.Lease == 0 {
			spec.Lease = h.opts.Lease
		}
		if h.opts.Repeatable {
			spec.Repeatable = true
		}
	}
	return spec
}

// riverQueuePattern is River's rule for queue names.
var riverQueuePattern = regexp.MustCompile(`^[a-z0-9]+(?:[_-]?[a-z0-9]+)*$`)

// RiverQueue reports whether River can serve docket queue q: River's names
// are narrower than docket's (no leading, trailing or doubled separator, at
// most 64 characters).
func RiverQueue(q string) bool { return len(q) <= 64 && riverQueuePattern.MatchString(q) }

// dispatchable refuses a spec River could not dispatch.
func dispatchable(s jobs.Spec) error {
	if s.External || s.Queue == "" || RiverQueue(s.Queue) {
		return nil
	}
	return db.Refuse(db.ErrInvalidArgument, "job.enqueue",
		fmt.Sprintf("queue %q cannot be served by River: use letters and digits separated by single underscores or hyphens", s.Queue))
}
