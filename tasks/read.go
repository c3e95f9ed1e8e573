package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/tasks"
)

// Get returns task id, or [db.ErrNotFound] when there is none or the actor
// may not see it: it is in the task's audience (excluded or not), or holds
// case.admit or case.view on its project.
func (c *Client) Get(ctx context.Context, id int64) (Task, error) {
	return c.get(ctx, c.pool, id)
}

// GetTx is [Client.Get] read in tx, the caller's transaction: it sees what
// tx has written and not yet committed, and writes nothing itself.
func (c *Client) GetTx(ctx context.Context, tx pgx.Tx, id int64) (Task, error) {
	return c.get(ctx, tx, id)
}

func (c *Client) get(ctx context.Context, q db.DBTX, id int64) (Task, error) {
	r, err := queries.TaskGet(ctx, q, id, string(c.actor))
	if err != nil {
		return Task{}, db.TranslateRead(err, "task.get", "task", id, string(c.actor))
	}
	return fromRow(r), nil
}

// Event is one entry of a task's history.
type Event struct {
	ID     int64
	TaskID int64
	// What: opened, claimed, released, escalated, decided, withdrawn.
	What   string
	Actor  access.Actor
	At     time.Time
	Detail json.RawMessage
}

// History returns the events of task id, oldest first; none when the actor
// may not see it (see [Client.Get]).
func (c *Client) History(ctx context.Context, id int64) ([]Event, error) {
	rows, err := queries.TaskHistory(ctx, c.pool, id, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "task.history", "task", id)
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = Event{ID: r.ID, TaskID: r.TaskID, What: r.What, Actor: access.Actor(r.Actor), At: r.At.UTC(), Detail: r.Detail}
	}
	return out, nil
}

// MaxPage is the most tasks one [Client.Worklist] call returns.
const MaxPage = 1000

// Page is where a worklist read starts and how much it returns.
type Page struct {
	// After is the last task of the previous page (its Deadline and ID);
	// the zero value starts at the beginning.
	AfterDeadline time.Time
	AfterID       int64
	// Limit is 1..[MaxPage]; 0 is 100.
	Limit int
}

// Worklist returns the undecided tasks of project the actor may take now
// (queued, in its audience, not excluded) and those it holds, soonest
// deadline first; with mine, only those it holds.
func (c *Client) Worklist(ctx context.Context, project string, mine bool, p Page) ([]Task, error) {
	const op = "task.worklist"
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.Limit < 1 || p.Limit > MaxPage {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid limit %d: want 1..%d", p.Limit, MaxPage))
	}
	var after *time.Time
	if !p.AfterDeadline.IsZero() {
		after = &p.AfterDeadline
	}
	rows, err := queries.TaskWorklist(ctx, c.pool, dbsqlc.TaskWorklistParams{
		Project: project, Actor: string(c.actor), Now: c.clock.Now(), Mine: mine,
		AfterDeadline: after, AfterID: p.AfterID, MaxRows: int32(p.Limit),
	})
	if err != nil {
		return nil, db.Translate(err, op, "project", project)
	}
	out := make([]Task, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// Backlog is what a project waits on people for (docket.task_backlog).
type Backlog struct {
	Project string
	// Pending tasks are undecided (pending or escalated); of them,
	// Unclaimed and Claimed; Escalated; AwaitingExpiry are owed their
	// expiry policy, the first at NextDeadline.
	Pending, Unclaimed, Claimed, Escalated, AwaitingExpiry int
	NextDeadline                                           *time.Time
}

// Backlog returns project's backlog, or [db.ErrNotFound] when the actor
// holds none of task.review, case.admit and case.view there.
func (c *Client) Backlog(ctx context.Context, project string) (Backlog, error) {
	r, err := queries.TaskBacklog(ctx, c.pool, project, string(c.actor))
	if err != nil {
		return Backlog{}, db.TranslateRead(err, "task.backlog", "project", project, string(c.actor))
	}
	b := Backlog{Project: r.Project, Pending: int(r.Pending), Unclaimed: int(r.Unclaimed), Claimed: int(r.Claimed),
		Escalated: int(r.Escalated), AwaitingExpiry: int(r.AwaitingExpiry)}
	if r.HasDeadline {
		at := r.NextDeadline.UTC()
		b.NextDeadline = &at
	}
	return b, nil
}
