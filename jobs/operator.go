package jobs

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
)

// MaxBulk is the most jobs one [Client.RetryMatching] or
// [Client.CancelMatching] call acts on; a caller repeats the call until it
// returns none.
const MaxBulk = 10000

// Retry enqueues a retry of finished job id. See [Client.RetryTx].
func (c *Client) Retry(ctx context.Context, id int64) (Job, error) {
	return c.retry(ctx, c.pool, id)
}

// RetryTx enqueues in tx a retry of job id, finished [Failed], [Dead] or
// [Cancelled], and returns the new job. The finished job stays as it is: the
// retry is a new job of the same project, kind, queue, priority, payload and
// request (params, inputs, output), attempts, lease, backoff and budget
// ceilings, queued now, whose RetryOf names job id; its first event is the
// actor's, with detail "retry of job ID". It has no idempotency key, no pin
// and no trace context. Each call makes a new job, even for a job retried
// already.
//
// It refuses, changing nothing: an unknown job with [db.ErrNotFound]; an
// actor without job.retry on the job's project, or a project not active,
// with [db.ErrNotPermitted]; a job not finished with
// [db.ErrIllegalTransition] (cancel it first); a job that succeeded with
// [db.ErrTerminal]; a job of a lane or a case, which its owner runs again,
// with [db.ErrInvalidArgument].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) RetryTx(ctx context.Context, tx pgx.Tx, id int64) (Job, error) {
	return c.retry(ctx, tx, id)
}

// retry is [Client.RetryTx] on q: the client's pool or the caller's transaction.
func (c *Client) retry(ctx context.Context, q db.DBTX, id int64) (Job, error) {
	row, err := queries.JobRetry(ctx, q, id, string(c.actor), c.clock.Now())
	if err != nil {
		return Job{}, db.Translate(err, "job.retry", "job", id)
	}
	return fromRow(row), nil
}

// Retries returns the ids of the jobs that retry job id ([Client.Retry]),
// oldest first: the other direction of [Job.RetryOf]. None the actor may
// not read.
func (c *Client) Retries(ctx context.Context, id int64) ([]int64, error) {
	return c.retries(ctx, c.reads.DB, id)
}

// RetriesTx is [Client.Retries] read in tx: it sees what tx has written and not yet
// committed, and writes nothing itself.
func (c *Client) RetriesTx(ctx context.Context, tx pgx.Tx, id int64) ([]int64, error) {
	return c.retries(ctx, tx, id)
}

// retries is [Client.RetriesTx] on q.
func (c *Client) retries(ctx context.Context, q db.DBTX, id int64) ([]int64, error) {
	ids, err := queries.JobRetries(ctx, q, id, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "job.retries", "job", id)
	}
	return ids, nil
}

// BulkFilter selects the jobs of the client's project a bulk action
// ([Client.RetryMatching], [Client.CancelMatching]) acts on, and its count
// ([Client.CountToRetry], [Client.CountToCancel]) counts. Empty fields
// match everything the action applies to.
type BulkFilter struct {
	// State is one of the states the action applies to: [Failed], [Dead] or
	// [Cancelled] for a retry (empty: all three), [Queued] for a cancel.
	State State
	Kind  string
	Queue string
	// Since and Until bound when the jobs were created: Since ≤ created <
	// Until. Zero: unbounded.
	Since time.Time
	Until time.Time
	// Limit bounds how many jobs one call acts on, oldest first,
	// 1..[MaxBulk]; 0 means MaxBulk. Counts ignore it.
	Limit int
}

// bulk is the parameters f gives a bulk call, or its refusal.
func (f BulkFilter) bulk(op string) (since, until *time.Time, limit int32, err error) {
	if f.Limit < 0 || f.Limit > MaxBulk {
		return nil, nil, 0, db.Refuse(db.ErrInvalidArgument, op, "limit must be 0 (all, up to 10000) or 1..10000")
	}
	limit = int32(f.Limit)
	if limit == 0 {
		limit = MaxBulk
	}
	if !f.Since.IsZero() {
		since = &f.Since
	}
	if !f.Until.IsZero() {
		until = &f.Until
	}
	return since, until, limit, nil
}

// CountToRetry counts the jobs [Client.RetryMatching] would retry now with
// filter f. See [Client.CountToRetryTx].
func (c *Client) CountToRetry(ctx context.Context, f BulkFilter) (int64, error) {
	return c.countToRetry(ctx, c.pool, f)
}

// CountToRetryTx counts, in tx, the jobs [Client.RetryMatchingTx] would
// retry now with filter f, for a caller to show before acting: the client
// project's standalone jobs (of no lane or case) finished failed, dead or
// cancelled that no job retries yet. It refuses, with
// [db.ErrInvalidArgument], a client without a project or a malformed
// filter, and with [db.ErrNotPermitted] an actor without job.retry on the
// project. It writes nothing: tx's uncommitted jobs are counted.
func (c *Client) CountToRetryTx(ctx context.Context, tx pgx.Tx, f BulkFilter) (int64, error) {
	return c.countToRetry(ctx, tx, f)
}

// countToRetry is [Client.CountToRetryTx] on q.
func (c *Client) countToRetry(ctx context.Context, q db.DBTX, f BulkFilter) (int64, error) {
	const op = "job.count_to_retry"
	if err := c.needProject(op); err != nil {
		return 0, err
	}
	since, until, _, err := f.bulk(op)
	if err != nil {
		return 0, err
	}
	n, err := queries.JobRetryCount(ctx, q, dbsqlc.JobRetryCountParams{
		Project: c.project, State: string(f.State), Kind: f.Kind, Queue: f.Queue, Since: since, Until: until,
		Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return 0, db.Translate(err, op, "project", c.project)
	}
	return n, nil
}

// RetryMatching retries the jobs [Client.CountToRetry] counts. See
// [Client.RetryMatchingTx].
func (c *Client) RetryMatching(ctx context.Context, f BulkFilter) ([]Job, error) {
	return c.retryMatching(ctx, c.pool, f)
}

// RetryMatchingTx retries in tx, as [Client.RetryTx] does, up to f.Limit of
// the jobs [Client.CountToRetryTx] counts with filter f, oldest first, and
// returns the new jobs. A job retried already is not retried again, so the
// caller repeats the call until it returns none; two bulk retries of one
// project run one after the other. It refuses as [Client.CountToRetryTx],
// changing nothing.
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) RetryMatchingTx(ctx context.Context, tx pgx.Tx, f BulkFilter) ([]Job, error) {
	return c.retryMatching(ctx, tx, f)
}

// retryMatching is [Client.RetryMatchingTx] on q.
func (c *Client) retryMatching(ctx context.Context, q db.DBTX, f BulkFilter) ([]Job, error) {
	const op = "job.retry_matching"
	if err := c.needProject(op); err != nil {
		return nil, err
	}
	since, until, limit, err := f.bulk(op)
	if err != nil {
		return nil, err
	}
	rows, err := queries.JobRetryMatching(ctx, q, dbsqlc.JobRetryMatchingParams{
		Project: c.project, State: string(f.State), Kind: f.Kind, Queue: f.Queue, Since: since, Until: until,
		MaxJobs: limit, Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return nil, db.Translate(err, op, "project", c.project)
	}
	return fromRows(rows), nil
}

// CountToCancel counts the jobs [Client.CancelMatching] would cancel now
// with filter f. See [Client.CountToCancelTx].
func (c *Client) CountToCancel(ctx context.Context, f BulkFilter) (int64, error) {
	return c.countToCancel(ctx, c.pool, f)
}

// CountToCancelTx counts, in tx, the client project's queued jobs matching
// f, which [Client.CancelMatchingTx] would cancel now. It refuses, with
// [db.ErrInvalidArgument], a client without a project or a malformed filter
// (a state other than [Queued]), and with [db.ErrNotPermitted] an actor
// without job.cancel on the project. It writes nothing: tx's uncommitted
// jobs are counted.
func (c *Client) CountToCancelTx(ctx context.Context, tx pgx.Tx, f BulkFilter) (int64, error) {
	return c.countToCancel(ctx, tx, f)
}

// countToCancel is [Client.CountToCancelTx] on q.
func (c *Client) countToCancel(ctx context.Context, q db.DBTX, f BulkFilter) (int64, error) {
	const op = "job.count_to_cancel"
	if err := c.needProject(op); err != nil {
		return 0, err
	}
	since, until, _, err := f.bulk(op)
	if err != nil {
		return 0, err
	}
	n, err := queries.JobCancelCount(ctx, q, dbsqlc.JobCancelCountParams{
		Project: c.project, State: string(f.State), Kind: f.Kind, Queue: f.Queue, Since: since, Until: until,
		Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return 0, db.Translate(err, op, "project", c.project)
	}
	return n, nil
}

// CancelMatching cancels the jobs [Client.CountToCancel] counts. See
// [Client.CancelMatchingTx].
func (c *Client) CancelMatching(ctx context.Context, f BulkFilter, reason string) ([]Job, error) {
	return c.cancelMatching(ctx, c.pool, f, reason)
}

// CancelMatchingTx cancels in tx, as [Client.CancelTx] does (reason as the
// diagnostic, compensations enqueued), up to f.Limit of the queued jobs
// [Client.CountToCancelTx] counts with filter f, oldest first, and returns
// them. A job another transaction holds locked (a claim under way) is
// skipped. It refuses as [Client.CountToCancelTx], changing nothing.
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) CancelMatchingTx(ctx context.Context, tx pgx.Tx, f BulkFilter, reason string) ([]Job, error) {
	return c.cancelMatching(ctx, tx, f, reason)
}

// cancelMatching is [Client.CancelMatchingTx] on q.
func (c *Client) cancelMatching(ctx context.Context, q db.DBTX, f BulkFilter, reason string) ([]Job, error) {
	const op = "job.cancel_matching"
	if err := c.needProject(op); err != nil {
		return nil, err
	}
	since, until, limit, err := f.bulk(op)
	if err != nil {
		return nil, err
	}
	rows, err := queries.JobCancelMatching(ctx, q, dbsqlc.JobCancelMatchingParams{
		Project: c.project, State: string(f.State), Kind: f.Kind, Queue: f.Queue, Since: since, Until: until,
		Reason: optional(reason), MaxJobs: limit, Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return nil, db.Translate(err, op, "project", c.project)
	}
	return fromRows(rows), nil
}

// Queue is a queue of the client's project and whether it is paused.
type Queue struct {
	Project string
	Name    string
	Paused  bool
	// Revision counts the queue's pauses and resumes: 0 for a queue never
	// paused.
	Revision int64
	// PausedBy, PausedAt and Reason describe the pause in force; empty
	// while the queue runs.
	PausedBy  access.Actor
	PausedAt  time.Time
	Reason    string
	UpdatedBy access.Actor // who last paused or resumed it; empty if never
	UpdatedAt time.Time
}

// QueueEvent is one pause or resume of a queue.
type QueueEvent struct {
	Revision int64
	What     string // "paused" or "resumed"
	Actor    access.Actor
	At       time.Time
	Reason   string
}

func fromQueueRow(r *dbsqlc.DocketQueue) Queue {
	return Queue{
		Project: r.Project, Name: r.Queue, Paused: r.Paused, Revision: r.Revision,
		PausedBy: access.Actor(deref(r.PausedBy)), PausedAt: utc(r.PausedAt), Reason: deref(r.Reason),
		UpdatedBy: access.Actor(r.UpdatedBy), UpdatedAt: utc(&r.UpdatedAt),
	}
}

// PauseQueue pauses queue of the client's project. See [Client.PauseQueueTx].
func (c *Client) PauseQueue(ctx context.Context, queue, reason string) (Queue, error) {
	return c.setQueue(ctx, c.pool, true, queue, reason)
}

// PauseQueueTx pauses queue of the client's project in tx, with reason
// (empty: none given), and returns it: once tx commits, no claim takes its
// jobs (a worker's batch, [Client.Claim], [Client.ClaimID]), which stay
// [Queued]; jobs claimed before run on. Who paused it, when and why is kept
// in the queue's history ([Client.QueueHistory]). Pausing a paused queue is
// a quiet no-op that returns the queue as it is.
//
// It refuses, changing nothing: a client without a project, a malformed
// queue or a reason over 1000 characters with [db.ErrInvalidArgument]; an
// actor without queue.pause on the project with [db.ErrNotPermitted].
func (c *Client) PauseQueueTx(ctx context.Context, tx pgx.Tx, queue, reason string) (Queue, error) {
	return c.setQueue(ctx, tx, true, queue, reason)
}

// ResumeQueue resumes queue of the client's project. See [Client.ResumeQueueTx].
func (c *Client) ResumeQueue(ctx context.Context, queue, reason string) (Queue, error) {
	return c.setQueue(ctx, c.pool, false, queue, reason)
}

// ResumeQueueTx resumes paused queue of the client's project in tx, with
// reason (empty: none given): once tx commits its due jobs are claimed
// again, and the workers serving it are woken. Resuming a running queue, or
// one never paused, is a quiet no-op. It refuses as [Client.PauseQueueTx].
func (c *Client) ResumeQueueTx(ctx context.Context, tx pgx.Tx, queue, reason string) (Queue, error) {
	return c.setQueue(ctx, tx, false, queue, reason)
}

// setQueue is [Client.PauseQueueTx] (pause) or [Client.ResumeQueueTx] on q.
func (c *Client) setQueue(ctx context.Context, q db.DBTX, pause bool, queue, reason string) (Queue, error) {
	op := "queue.resume"
	if pause {
		op = "queue.pause"
	}
	if err := c.needProject(op); err != nil {
		return Queue{}, err
	}
	var row *dbsqlc.DocketQueue
	var err error
	if pause {
		row, err = queries.QueuePause(ctx, q, dbsqlc.QueuePauseParams{
			Project: c.project, Queue: queue, Reason: optional(reason), Actor: string(c.actor), Now: c.clock.Now(),
		})
	} else {
		row, err = queries.QueueResume(ctx, q, dbsqlc.QueueResumeParams{
			Project: c.project, Queue: queue, Reason: optional(reason), Actor: string(c.actor), Now: c.clock.Now(),
		})
	}
	if err != nil {
		return Queue{}, db.Translate(err, op, "queue", queue)
	}
	return fromQueueRow(row), nil
}

// Queues returns the client project's queues by name: each queue ever
// paused, and each other queue with a job queued or claimed now (a queue
// whose workers hold all its jobs is listed). None when the actor holds
// neither queue.view, queue.pause nor a job capability on the project.
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	return c.queues(ctx, c.reads.DB)
}

// QueuesTx is [Client.Queues] read in tx: it sees what tx has written and not yet
// committed, and writes nothing itself.
func (c *Client) QueuesTx(ctx context.Context, tx pgx.Tx) ([]Queue, error) {
	return c.queues(ctx, tx)
}

// queues is [Client.QueuesTx] on q.
func (c *Client) queues(ctx context.Context, q db.DBTX) ([]Queue, error) {
	const op = "queue.list"
	if err := c.needProject(op); err != nil {
		return nil, err
	}
	rows, err := queries.QueueList(ctx, q, c.project, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, op, "project", c.project)
	}
	out := make([]Queue, len(rows))
	for i, r := range rows {
		at, _ := r.UpdatedAt.(time.Time) // none for a queue never paused
		out[i] = fromQueueRow(&dbsqlc.DocketQueue{Project: r.Project, Queue: r.Queue, Paused: r.Paused, Revision: r.Revision,
			PausedBy: r.PausedBy, PausedAt: r.PausedAt, Reason: r.Reason, UpdatedBy: r.UpdatedBy, UpdatedAt: at})
	}
	return out, nil
}

// QueueHistory returns every pause and resume of queue in the client's
// project, oldest first; none when the actor may not read its queues (see
// [Client.Queues]).
func (c *Client) QueueHistory(ctx context.Context, queue string) ([]QueueEvent, error) {
	return c.queueHistory(ctx, c.reads.DB, queue)
}

// QueueHistoryTx is [Client.QueueHistory] read in tx: it sees what tx has written and not yet
// committed, and writes nothing itself.
func (c *Client) QueueHistoryTx(ctx context.Context, tx pgx.Tx, queue string) ([]QueueEvent, error) {
	return c.queueHistory(ctx, tx, queue)
}

// queueHistory is [Client.QueueHistoryTx] on q.
func (c *Client) queueHistory(ctx context.Context, q db.DBTX, queue string) ([]QueueEvent, error) {
	const op = "queue.history"
	if err := c.needProject(op); err != nil {
		return nil, err
	}
	rows, err := queries.QueueHistory(ctx, q, c.project, queue, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, op, "queue", queue)
	}
	out := make([]QueueEvent, len(rows))
	for i, r := range rows {
		out[i] = QueueEvent{Revision: r.Revision, What: r.What, Actor: access.Actor(r.Actor), At: r.At.UTC(), Reason: deref(r.Reason)}
	}
	return out, nil
}
