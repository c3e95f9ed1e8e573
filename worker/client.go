package worker

import (
	"context"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/jobs"
)

// Jobs returns the client's job client, for reads and settlements.
func (c *Client) Jobs() *jobs.Client { return c.jobs }

// Enqueue creates the job spec describes in a transaction of its own. See
// [Client.EnqueueTx].
func (c *Client) Enqueue(ctx context.Context, spec jobs.Spec) (jobs.Enqueued, error) {
	return c.jobs.Enqueue(ctx, c.withDefaults(spec))
}

// EnqueueTx creates the job spec describes on tx, typically the transaction
// holding the caller's business writes, as [jobs.Client.EnqueueTx] does:
// committed, the job will run (the commit notifies the workers of its
// queue); rolled back, it never existed. New jobs of a registered kind take
// their handler's defaults (see [Config.Registry]). A duplicate (same
// idempotency key and payload) returns the existing job.
//
// It refuses, writing nothing, what [jobs.Client.EnqueueTx] refuses.
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, spec jobs.Spec) (jobs.Enqueued, error) {
	return c.jobs.EnqueueTx(ctx, tx, c.withDefaults(spec))
}

// EnqueueMany creates the jobs specs describe in one transaction of its own.
// See [Client.EnqueueManyTx].
func (c *Client) EnqueueMany(ctx context.Context, specs []jobs.Spec) ([]jobs.Receipt, error) {
	return c.jobs.EnqueueMany(ctx, c.withDefaultsAll(specs))
}

// EnqueueManyTx creates the jobs specs describe on tx in one statement, as
// [jobs.Client.EnqueueManyTx] does. All or nothing, like EnqueueTx.
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) EnqueueManyTx(ctx context.Context, tx pgx.Tx, specs []jobs.Spec) ([]jobs.Receipt, error) {
	return c.jobs.EnqueueManyTx(ctx, tx, c.withDefaultsAll(specs))
}

func (c *Client) withDefaultsAll(specs []jobs.Spec) []jobs.Spec {
	out := make([]jobs.Spec, len(specs))
	for i, s := range specs {
		out[i] = c.withDefaults(s)
	}
	return out
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
