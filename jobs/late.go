package jobs

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
)

// CompleteLate records that the attempt lease l held succeeded, with result,
// after the lease expired and the sweep made the job [Uncertain]: the
// outcome its holder held while it could not reach the database. See
// [Client.FailLate] for when it is taken.
func (c *Client) CompleteLate(ctx context.Context, l Lease, result json.RawMessage, spent Spend) (Job, error) {
	const op = "job.complete_late"
	if err := spent.validate(op, l.JobID); err != nil {
		return Job{}, err
	}
	return c.late(ctx, c.pool, op, l, dbsqlc.JobLateOutcomeParams{Outcome: "succeeded", Result: result}, spent)
}

// CompleteLateTx is [Client.CompleteLate] in tx, the caller's transaction,
// for a success whose writes commit with it, once: the same success
// recorded already is refused with [db.ErrTerminal], as another outcome is,
// rather than a quiet no-op, so writes tried again after a lost reply do
// not commit twice ([Client.SucceededUnder] then says whether the lease's
// success is on record). It refuses as CompleteLate does, changing nothing
// (the caller's writes are the caller's to roll back).
func (c *Client) CompleteLateTx(ctx context.Context, tx pgx.Tx, l Lease, result json.RawMessage, spent Spend) (Job, error) {
	const op = "job.complete_late"
	if err := spent.validate(op, l.JobID); err != nil {
		return Job{}, err
	}
	return c.late(ctx, tx, op, l, dbsqlc.JobLateOutcomeParams{Outcome: "succeeded", Result: result, Once: true}, spent)
}

// FailLate records that the attempt lease l held failed, after the lease
// expired and the sweep made the job [Uncertain], and moves it by f.Class as
// [Client.Fail] would have: [ClassPermanent] to [Failed], [ClassRetryable]
// to [Queued] after a backoff ([Dead] on its last attempt, [Exhausted] with
// a ceiling of its [Budget] reached). [ClassUncertain] says nothing new: the
// job stays uncertain.
//
// A late outcome is taken only from the lease's own holder (the client's
// actor), naming the lease by its token and generation, while the job's last
// event is that lease's expiry into uncertain, with no claim since, and
// within the database's late_outcome_window of it (docket.settings, an hour
// unless set otherwise, at most 24 hours). The event says it was recorded
// late, of which lease, and when it expired. The same outcome recorded again
// is a quiet no-op. It turns "nobody knows what the attempt did" into what
// its holder knows; it never retries a job whose outcome is unknown.
//
// It refuses, changing nothing: an unknown class, a negative spend or a
// result over 1 MiB with [db.ErrInvalidArgument]; an unknown job
// with [db.ErrNotFound]; an actor without job.claim with
// [db.ErrNotPermitted]; a job the lease's expiry did not leave uncertain, one
// claimed since, or one past the window with [db.ErrStaleClaim]; a job
// recorded late already as another outcome with [db.ErrTerminal].
func (c *Client) FailLate(ctx context.Context, l Lease, f Failure) (Job, error) {
	const op = "job.fail_late"
	f, retryAfter, err := f.checked(op, l.JobID)
	if err != nil {
		return Job{}, err
	}
	class := string(f.Class)
	return c.late(ctx, c.pool, op, l, dbsqlc.JobLateOutcomeParams{Outcome: "failed", Class: &class,
		Diagnostic: optional(f.Diagnostic), RetryAfter: retryAfter}, f.Spent)
}

// late is [Client.CompleteLate], [Client.CompleteLateTx] and
// [Client.FailLate]: p, the outcome, for lease l at the client's now and
// actor, on q.
func (c *Client) late(ctx context.Context, q db.DBTX, op string, l Lease, p dbsqlc.JobLateOutcomeParams, spent Spend) (Job, error) {
	p.ID, p.Token, p.Generation = l.JobID, pgUUID(l.Token), l.Generation
	p.Actor, p.Now, p.SpentEffects, p.SpentMoney = string(c.actor), c.clock.Now(), spent.Effects, spent.Money
	row, err := queries.JobLateOutcome(ctx, q, p)
	if err != nil {
		return Job{}, db.Translate(err, op, "job", l.JobID)
	}
	return fromRow(row), nil
}
