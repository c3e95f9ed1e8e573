package jobs

import (
	"context"
	"encoding/json"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
)

// CompleteLate records that the attempt lease l held succeeded, with result,
// after the lease expired and the sweep made the job [Uncertain]: the
// outcome its holder held while it could not reach the database. See
// [Client.FailLate] for when it is taken.
func (c *Client) CompleteLate(ctx context.Context, l Lease, result json.RawMessage, spent Spend) (Job, error) {
	return c.late(ctx, "job.complete_late", l, "succeeded", result, nil, spent)
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
	if f.Class == "" {
		f.Class = ClassRetryable
	}
	if f.Class != ClassRetryable && f.Class != ClassPermanent && f.Class != ClassUncertain {
		return Job{}, db.Refuse(db.ErrInvalidArgument, op, "unknown failure class "+quote(string(f.Class)), "job", l.JobID)
	}
	return c.late(ctx, op, l, "failed", nil, &f, f.Spent)
}

// late is [Client.CompleteLate] and [Client.FailLate].
func (c *Client) late(ctx context.Context, op string, l Lease, outcome string, result json.RawMessage, f *Failure, spent Spend) (Job, error) {
	if err := spent.validate(op, l.JobID); err != nil {
		return Job{}, err
	}
	p := dbsqlc.JobLateOutcomeParams{
		ID: l.JobID, Token: l.Token, Generation: l.Generation, Outcome: outcome, Result: result,
		Actor: string(c.actor), Now: c.clock.Now(), SpentEffects: spent.Effects, SpentMoney: spent.Money,
	}
	if f != nil {
		class := string(f.Class)
		p.Class, p.Diagnostic = &class, optional(f.Diagnostic)
		if f.RetryAfter != 0 {
			d := min(max(f.RetryAfter, 0), MaxRetryAfter)
			p.RetryAfter = &d
		}
	}
	row, err := queries.JobLateOutcome(ctx, c.pool, p)
	if err != nil {
		return Job{}, db.Translate(err, op, "job", l.JobID)
	}
	return fromRow(row), nil
}
