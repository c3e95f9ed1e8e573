package cases

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/cases"
	"github.com/docket-dev/docket/jobs"
)

// Timer is a durable sleep of a case: a job of the case, available at
// WakeAt. It costs a row, not a held goroutine, and a restart loses none.
type Timer struct {
	ID int64
	// CaseID is the timer's case; 0 for a timer of no case ([Client.SetTimer])
	// or of a run's step (RunID and StepID: see package plans).
	CaseID  int64
	RunID   int64
	StepID  string
	Project string
	Name    string
	// WakeAt is the instant it was set for: the wake its job reports (see
	// [WakeOf]) however late it runs.
	WakeAt time.Time
	// JobID is the timer's job; its state says whether the timer fired
	// (claimed or finished), is still to fire (queued) or was cancelled.
	JobID    int64
	JobState jobs.State // filled by [Client.Timers]
	// FiredAt and DisarmedAt end a step's timer, which has no job: the
	// timer sweep fired it, or its run ended first.
	FiredAt    *time.Time
	DisarmedAt *time.Time
	CreatedBy  access.Actor
	CreatedAt  time.Time
}

// SetTimer sets timer name of project -- of no case: a timer needs none --
// to wake at at, in its own transaction. See [Client.SetTimerTx].
func (c *Client) SetTimer(ctx context.Context, project, name string, at time.Time, cont Continuation) (Timer, error) {
	return inTx(ctx, c.pool, func(tx pgx.Tx) (Timer, error) { return c.SetTimerTx(ctx, tx, project, name, at, cont) })
}

// SetTimerTx sets timer name of project in tx, of no case: job cont of the
// project, available at at, with params {"timer", "wake_at"} recording the
// instant it was due. Setting the same timer again (project, name and
// instant) is a no-op that returns it.
//
// It refuses, writing nothing: a malformed name or continuation, a zero
// instant or one more than [MaxWaitAhead] ahead ([db.ErrInvalidArgument]);
// an actor without case.admit and job.create on the project
// ([db.ErrNotPermitted]); the same timer with another continuation
// ([db.ErrIdempotencyConflict]).
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) SetTimerTx(ctx context.Context, tx pgx.Tx, project, name string, at time.Time, cont Continuation) (Timer, error) {
	const op = "timer.set"
	ids := []any{"project", project, "timer", name}
	if at.IsZero() {
		return Timer{}, db.Refuse(db.ErrInvalidArgument, op, "wake instant is zero", ids...)
	}
	k := cont.resolved()
	row, err := queries.TimerSetCaseless(ctx, tx, dbsqlc.TimerSetCaselessParams{
		Project: project, Name: name, WakeAt: at, Kind: k.Kind, Queue: k.Queue, Payload: k.Payload,
		PayloadSchema: int32(k.PayloadSchema), MaxAttempts: int32(k.MaxAttempts),
		Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Timer{}, db.Translate(err, op, ids...)
	}
	return fromTimerRow(&timerRow{
		ID: row.ID, Project: row.Project, Name: row.Name, WakeAt: row.WakeAt, JobID: deref(row.JobID),
		CreatedBy: row.CreatedBy, CreatedAt: row.CreatedAt,
	}, ""), nil
}

// FireTimers is the timer sweep run once, in its own transaction: it fires
// up to limit (1..10000) armed timers of run steps whose instant has come at
// the client's now, soonest first, and answers each one's step, so its run
// moves on; it returns them. A case's timer is a job, which its queue's
// workers fire: not this. It looks only at projects where the actor holds
// case.sweep; timers another sweeper holds are skipped, so a timer fires
// once. [TimerSweep] runs it on a worker.
func (c *Client) FireTimers(ctx context.Context, limit int) ([]Timer, error) {
	return inTx(ctx, c.pool, func(tx pgx.Tx) ([]Timer, error) { return fireTimers(ctx, tx, limit, c.actor, c.clock.Now()) })
}

func fireTimers(ctx context.Context, q db.DBTX, limit int, actor access.Actor, now time.Time) ([]Timer, error) {
	rows, err := queries.TimerFireDue(ctx, q, int32(limit), string(actor), now)
	if err != nil {
		return nil, db.Translate(err, "timer.fire_due", "limit", limit)
	}
	out := make([]Timer, len(rows))
	for i, r := range rows {
		out[i] = fromTimerRow(&timerRow{ID: r.ID, Project: r.Project, Name: r.Name, WakeAt: r.WakeAt,
			CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt}, "")
		out[i].RunID, out[i].StepID, out[i].FiredAt = deref(r.RunID), deref(r.StepID), r.FiredAt
	}
	return out, nil
}

// SleepUntil sets timer name of case caseID to wake at at, in its own
// transaction. See [Client.SleepUntilTx].
func (c *Client) SleepUntil(ctx context.Context, caseID int64, name string, at time.Time, cont Continuation) (Timer, error) {
	return inTx(ctx, c.pool, func(tx pgx.Tx) (Timer, error) { return c.SleepUntilTx(ctx, tx, caseID, name, at, cont) })
}

// SleepUntilTx sets timer name of case caseID in tx: job cont, of the case,
// available at at, with params recording the instant it was due. An
// instant already past wakes at once. Setting the same timer again (case,
// name and instant) is a no-op that returns it. Closing the case cancels the
// job unless it has been claimed. The job runs as any job does: the workers
// of its queue claim it once it is due.
//
// It refuses, writing nothing: a malformed name or continuation, a zero
// instant or one more than [MaxWaitAhead] ahead ([db.ErrInvalidArgument]);
// an unknown case or one the actor may not write ([db.ErrNotFound]); an
// actor without job.create on its project ([db.ErrNotPermitted]); a closed
// case ([db.ErrCaseClosed]); the same timer with another continuation
// ([db.ErrIdempotencyConflict]).
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) SleepUntilTx(ctx context.Context, tx pgx.Tx, caseID int64, name string, at time.Time, cont Continuation) (Timer, error) {
	const op = "timer.set"
	ids := []any{"case", caseID, "timer", name}
	if at.IsZero() {
		return Timer{}, db.Refuse(db.ErrInvalidArgument, op, "wake instant is zero", ids...)
	}
	k := cont.resolved()
	row, err := queries.TimerSet(ctx, tx, dbsqlc.TimerSetParams{
		CaseID: caseID, Name: name, WakeAt: at, Kind: k.Kind, Queue: k.Queue, Payload: k.Payload,
		PayloadSchema: int32(k.PayloadSchema), MaxAttempts: int32(k.MaxAttempts),
		Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Timer{}, db.Translate(err, op, ids...)
	}
	return fromTimerRow(&timerRow{
		ID: row.ID, CaseID: deref(row.CaseID), Project: row.Project, Name: row.Name, WakeAt: row.WakeAt, JobID: deref(row.JobID),
		CreatedBy: row.CreatedBy, CreatedAt: row.CreatedAt,
	}, ""), nil
}

// Timers returns the timers of case id with their jobs' states, oldest
// first: none when the case does not exist or the actor may not read it.
func (c *Client) Timers(ctx context.Context, id int64) ([]Timer, error) {
	return c.timers(ctx, c.reads.DB, id)
}

// TimersTx is [Client.Timers] read in tx, the caller's transaction: it sees what tx
// has written and not yet committed, and writes nothing itself.
func (c *Client) TimersTx(ctx context.Context, tx pgx.Tx, id int64) ([]Timer, error) {
	return c.timers(ctx, tx, id)
}

// timers is [Client.Timers] on q: the client's pool or the caller's transaction.
func (c *Client) timers(ctx context.Context, q db.DBTX, id int64) ([]Timer, error) {
	rows, err := queries.CaseTimers(ctx, q, id, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "case.timers", "case", id)
	}
	out := make([]Timer, len(rows))
	for i, r := range rows {
		out[i] = fromTimerRow(&timerRow{
			ID: r.ID, CaseID: deref(r.CaseID), Project: r.Project, Name: r.Name, WakeAt: r.WakeAt, JobID: deref(r.JobID),
			CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt,
		}, jobs.State(r.JobState))
	}
	return out, nil
}

// timerRow is a row of docket.timers as the queries that place and list
// timers return it.
type timerRow struct {
	ID        int64
	CaseID    int64
	Project   string
	Name      string
	WakeAt    time.Time
	JobID     int64
	CreatedBy string
	CreatedAt time.Time
}

func fromTimerRow(r *timerRow, state jobs.State) Timer {
	return Timer{
		ID: r.ID, CaseID: r.CaseID, Project: r.Project, Name: r.Name, WakeAt: r.WakeAt.UTC(), JobID: r.JobID,
		JobState: state, CreatedBy: access.Actor(r.CreatedBy), CreatedAt: r.CreatedAt.UTC(),
	}
}
