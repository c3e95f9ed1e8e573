package schedules

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/schedules"
)

// Create creates a schedule, in its own transaction. See [Client.CreateTx].
func (c *Client) Create(ctx context.Context, spec Spec) (Schedule, error) {
	return c.create(ctx, c.pool, spec)
}

// CreateTx creates schedule spec.Name in spec.Project in tx, active, its
// cursor at spec.Start, its first occurrence the first after it, and
// returns it. It commits or rolls back with q's transaction.
//
// A schedule declares how it ends: End, MaxOccurrences, or Unbounded with
// an UnboundedReason, which is recorded on it and in its created event.
//
// It refuses, writing nothing: a malformed expression, an unknown zone,
// malformed job or catch-up terms, a negative MaxOccurrences, an End not
// after Start, no bound and not Unbounded, Unbounded beside a bound, a
// missing or malformed UnboundedReason, or no occurrence between Start and
// End within [SearchHorizon] ([db.ErrInvalidArgument], naming the fields); an actor
// without schedule.manage and job.create on the project, or an unknown
// project ([db.ErrNotPermitted]); a schedule of that name in the project
// ([db.ErrAlreadyExists]).
func (c *Client) CreateTx(ctx context.Context, tx pgx.Tx, spec Spec) (Schedule, error) {
	return c.create(ctx, tx, spec)
}

// create is [Client.CreateTx] on q: the client's pool or the caller's transaction.
func (c *Client) create(ctx context.Context, q db.DBTX, spec Spec) (Schedule, error) {
	const op = "schedule.create"
	now := c.clock.Now()
	ck, err := check(op, spec, now)
	if err != nil {
		return Schedule{}, err
	}
	t := terms{cron: ck.cron, loc: ck.loc, endsAt: ck.End, maxOccurrences: ck.MaxOccurrences}
	first, err := t.nextWithin(ck.Start, 0)
	if err != nil {
		return Schedule{}, db.Refuse(db.ErrInvalidArgument, op, err.Error())
	}
	if first == nil {
		return Schedule{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf(
			"invalid cron %q: no occurrence in %s after %s, before the end or within %v", ck.Cron, ck.Zone,
			ck.Start.Format(time.RFC3339), SearchHorizon))
	}
	row, err := queries.ScheduleCreate(ctx, q, dbsqlc.ScheduleCreateParams{
		Project: ck.Project, Name: ck.Name, Cron: ck.Cron, Zone: ck.Zone, FixedTime: ck.cron.FixedTime(),
		JobKind: ck.Job.Kind, JobQueue: ck.Job.Queue, JobPayload: ck.Job.Payload,
		JobPayloadSchema: int32(ck.Job.PayloadSchema), JobMaxAttempts: int32(ck.Job.MaxAttempts),
		CatchUp: string(ck.CatchUp), MaxCatchUp: int32(ck.MaxCatchUp), Grace: ck.Grace,
		StartsAt: ck.Start, EndsAt: timePtr(ck.End), MaxOccurrences: int64Ptr(ck.MaxOccurrences),
		UnboundedReason: stringPtr(ck.UnboundedReason), NextDueAt: first.At, Actor: string(c.actor), Now: now,
	})
	if err != nil {
		return Schedule{}, db.Translate(err, op, "project", ck.Project, "schedule", ck.Name)
	}
	return fromRow(row), nil
}

// Update replaces a schedule's terms, in its own transaction. See
// [Client.UpdateTx].
func (c *Client) Update(ctx context.Context, id int64, spec Spec) (s Schedule, err error) {
	err = db.WithTx(ctx, c.pool, func(tx pgx.Tx) error {
		s, err = c.UpdateTx(ctx, tx, id, spec)
		return err
	})
	return s, err
}

// UpdateTx replaces the expression, zone, job, catch-up terms and bounds of
// schedule id with spec's on tx (spec's Project, Name and Start are
// ignored), keeping its cursor and run count: the next occurrence is the
// first of the new terms after the cursor. A schedule whose new bounds
// leave no occurrence finishes. The new terms need a bound or Unbounded, as
// at creation. A [Broken] schedule is mended: it is active again, and the
// next sweep plans it by its new terms. It commits or rolls back with tx.
//
// It refuses, writing nothing: malformed terms ([db.ErrInvalidArgument],
// naming the field); an unknown schedule or one the actor may not manage
// ([db.ErrNotFound]); an actor without job.create on the project
// ([db.ErrNotPermitted]); a finished schedule ([db.ErrIllegalTransition]);
// a MaxOccurrences below the runs already made ([db.ErrInvalidArgument]).
func (c *Client) UpdateTx(ctx context.Context, tx pgx.Tx, id int64, spec Spec) (Schedule, error) {
	const op = "schedule.update"
	row, err := queries.ScheduleLock(ctx, tx, id, string(c.actor))
	if err != nil {
		return Schedule{}, db.Translate(err, op, "schedule", id)
	}
	cur := fromRow(row)
	now := c.clock.Now()
	spec.Start = cur.Start
	ck, err := check(op, spec, now)
	if err != nil {
		return Schedule{}, err
	}
	t := terms{cron: ck.cron, loc: ck.loc, endsAt: ck.End, maxOccurrences: ck.MaxOccurrences}
	next, err := t.nextWithin(cur.Cursor, cur.Runs)
	if err != nil {
		return Schedule{}, db.Refuse(db.ErrInvalidArgument, op, err.Error(), "schedule", id)
	}
	var nextDue *time.Time
	if next != nil {
		nextDue = &next.At
	}
	row, err = queries.ScheduleUpdate(ctx, tx, dbsqlc.ScheduleUpdateParams{
		ID: id, Cron: ck.Cron, Zone: ck.Zone, FixedTime: ck.cron.FixedTime(),
		JobKind: ck.Job.Kind, JobQueue: ck.Job.Queue, JobPayload: ck.Job.Payload,
		JobPayloadSchema: int32(ck.Job.PayloadSchema), JobMaxAttempts: int32(ck.Job.MaxAttempts),
		CatchUp: string(ck.CatchUp), MaxCatchUp: int32(ck.MaxCatchUp), Grace: ck.Grace,
		EndsAt: timePtr(ck.End), MaxOccurrences: int64Ptr(ck.MaxOccurrences), UnboundedReason: stringPtr(ck.UnboundedReason),
		NextDueAt: nextDue, Actor: string(c.actor), Now: now,
	})
	if err != nil {
		return Schedule{}, db.Translate(err, op, "schedule", id)
	}
	return fromRow(row), nil
}

// Pause pauses schedule id, in its own transaction. See [Client.PauseTx].
func (c *Client) Pause(ctx context.Context, id int64) (Schedule, error) {
	return c.pause(ctx, c.pool, id)
}

// PauseTx pauses schedule id in tx: nothing is materialized until it is
// resumed; its cursor is kept. Pausing a paused schedule is a no-op. Refuses
// as [Client.FinishTx], and a finished schedule with
// [db.ErrIllegalTransition].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) PauseTx(ctx context.Context, tx pgx.Tx, id int64) (Schedule, error) {
	return c.pause(ctx, tx, id)
}

// pause is [Client.PauseTx] on q: the client's pool or the caller's transaction.
func (c *Client) pause(ctx context.Context, q db.DBTX, id int64) (Schedule, error) {
	return c.setStatus(ctx, q, "schedule.pause", id, Paused)
}

// Resume resumes schedule id, in its own transaction. See [Client.ResumeTx].
func (c *Client) Resume(ctx context.Context, id int64) (Schedule, error) {
	return c.resume(ctx, c.pool, id)
}

// ResumeTx resumes paused schedule id in tx from its kept cursor: what fell
// due while it was paused is handled by its catch-up policy at the next
// sweep. Resuming a [Broken] schedule mends it the same way: its reason is
// cleared and the next sweep tries it again (a status event records who
// resumed it). Resuming an active schedule is a no-op. Refuses as
// [Client.PauseTx].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) ResumeTx(ctx context.Context, tx pgx.Tx, id int64) (Schedule, error) {
	return c.resume(ctx, tx, id)
}

// resume is [Client.ResumeTx] on q: the client's pool or the caller's transaction.
func (c *Client) resume(ctx context.Context, q db.DBTX, id int64) (Schedule, error) {
	return c.setStatus(ctx, q, "schedule.resume", id, Active)
}

// Finish finishes schedule id, in its own transaction. See
// [Client.FinishTx].
func (c *Client) Finish(ctx context.Context, id int64) (Schedule, error) {
	return c.finish(ctx, c.pool, id)
}

// FinishTx finishes schedule id in tx: it never runs again and is kept with
// its history (schedules are never deleted). Finishing a finished schedule
// is a no-op. It refuses an unknown schedule or one the actor may not
// manage with [db.ErrNotFound].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) FinishTx(ctx context.Context, tx pgx.Tx, id int64) (Schedule, error) {
	return c.finish(ctx, tx, id)
}

// finish is [Client.FinishTx] on q: the client's pool or the caller's transaction.
func (c *Client) finish(ctx context.Context, q db.DBTX, id int64) (Schedule, error) {
	return c.setStatus(ctx, q, "schedule.finish", id, Finished)
}

func (c *Client) setStatus(ctx context.Context, q db.DBTX, op string, id int64, to Status) (Schedule, error) {
	row, err := queries.ScheduleSetStatus(ctx, q, id, string(to), string(c.actor), c.clock.Now())
	if err != nil {
		return Schedule{}, db.Translate(err, op, "schedule", id)
	}
	return fromRow(row), nil
}
