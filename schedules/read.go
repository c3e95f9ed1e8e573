package schedules

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/paging"
)

// MaxPreview bounds how many occurrences [Preview] and [Client.Preview]
// compute at once.
const MaxPreview = 1000

// Who reads what: an actor holding schedule.manage or schedule.view on a
// project reads its schedules, their occurrences and history. To anyone else
// they are not there.

// Get returns schedule id, in its own transaction. See [Client.GetTx].
func (c *Client) Get(ctx context.Context, id int64) (Schedule, error) {
	return c.get(ctx, c.pool, id)
}

// GetTx returns schedule id read in tx, or [db.ErrNotFound] when there is
// none or the actor may not read it.
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) GetTx(ctx context.Context, tx pgx.Tx, id int64) (Schedule, error) {
	return c.get(ctx, tx, id)
}

// get is [Client.GetTx] on q: the client's pool or the caller's transaction.
func (c *Client) get(ctx context.Context, q db.DBTX, id int64) (Schedule, error) {
	row, err := queries.ScheduleGet(ctx, q, id, string(c.actor))
	if err != nil {
		return Schedule{}, db.TranslateRead(err, "schedule.get", "schedule", id, string(c.actor))
	}
	return fromRow(row), nil
}

// Filter selects schedules for [Client.List]. Project is required.
type Filter struct {
	Project string
	// After continues a listing: only schedules whose name sorts after it.
	After string
	// Limit is the page size, 1..[db.MaxPage]. Defaults to [db.DefaultPage].
	Limit int
}

// List returns a page of the schedules of f.Project, by name. An actor that
// may not read the project's schedules gets an empty list, not an error. It
// refuses an empty project or a limit outside 1..[db.MaxPage] with
// [db.ErrInvalidArgument].
func (c *Client) List(ctx context.Context, f Filter) ([]Schedule, error) {
	const op = "schedule.list"
	limit, err := paging.For(op).Project("schedules", f.Project).Limit(f.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := queries.ScheduleList(ctx, c.pool, f.Project, f.After, string(c.actor), limit)
	return paging.Collect(rows, err, fromRow, op, "project", f.Project)
}

// Preview returns the next n occurrences of schedule id after its cursor,
// within its bounds (fewer when it ends sooner; none when it is finished),
// each with its local date-time, fold and instant. It refuses n outside
// 1..[MaxPreview] with [db.ErrInvalidArgument] and an unknown or unreadable
// schedule with [db.ErrNotFound].
func (c *Client) Preview(ctx context.Context, id int64, n int) ([]Occurrence, error) {
	if n < 1 || n > MaxPreview {
		return nil, db.Refuse(db.ErrInvalidArgument, "schedule.preview", fmt.Sprintf("count %d: want 1..%d", n, MaxPreview))
	}
	s, err := c.Get(ctx, id)
	if err != nil || s.Status == Finished {
		return nil, err
	}
	t, err := s.terms()
	if err != nil {
		return nil, err
	}
	var out []Occurrence
	after := s.Cursor
	for len(out) < n {
		o, err := t.nextWithin(after, s.Runs+int64(len(out)))
		if err != nil || o == nil {
			return out, err
		}
		out = append(out, *o)
		after = o.At
	}
	return out, nil
}

// Preview returns the first n occurrences of the cron expression expr in
// zone strictly after after, each with its local date-time, fold and
// instant: what a schedule with those terms would run. It refuses a
// malformed expression, an unknown zone or n outside 1..[MaxPreview] with
// [db.ErrInvalidArgument].
func Preview(expr, zone string, after time.Time, n int) ([]Occurrence, error) {
	const op = "schedules.preview"
	if n < 1 || n > MaxPreview {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("count %d: want 1..%d", n, MaxPreview))
	}
	c, err := ParseCron(expr)
	if err != nil {
		return nil, err
	}
	loc, err := loadZone(zone)
	if err != nil {
		return nil, db.Refuse(db.ErrInvalidArgument, op, err.Error())
	}
	out := make([]Occurrence, 0, n)
	for len(out) < n {
		o, err := Next(c, loc, after)
		if isNoOccurrence(err) {
			break
		}
		if err != nil {
			return out, err
		}
		out = append(out, o)
		after = o.At
	}
	return out, nil
}

// Run is an occurrence materialized as a job.
type Run struct {
	Occurrence
	JobID      int64
	RecordedAt time.Time
}

// Runs returns the occurrences of schedule id materialized so far, oldest
// first; none when the actor may not read the schedule.
func (c *Client) Runs(ctx context.Context, id int64) ([]Run, error) {
	rows, err := queries.ScheduleOccurrences(ctx, c.pool, id, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "schedule.runs", "schedule", id)
	}
	out := make([]Run, len(rows))
	for i, r := range rows {
		out[i] = Run{Occurrence: Occurrence{Local: r.LocalTime.UTC(), Fold: int(r.Fold), At: r.DueAt.UTC()},
			JobID: r.JobID, RecordedAt: r.RecordedAt.UTC()}
	}
	return out, nil
}

// EventType says what a schedule event records.
type EventType string

// The events of a schedule's history.
const (
	EventCreated EventType = "created"
	EventStatus  EventType = "status"
	EventUpdated EventType = "updated"
	// EventSkipped records missed occurrences the catch-up policy did not
	// run; its Detail is a [Skipped].
	EventSkipped EventType = "skipped"
)

// Event is one entry of a schedule's history.
type Event struct {
	ID       int64
	Type     EventType
	From, To Status
	Actor    access.Actor
	At       time.Time
	Detail   json.RawMessage
}

// Events returns schedule id's history, oldest first; none when the actor
// may not read the schedule.
func (c *Client) Events(ctx context.Context, id int64) ([]Event, error) {
	rows, err := queries.ScheduleEvents(ctx, c.pool, id, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "schedule.events", "schedule", id)
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		e := Event{ID: r.ID, Type: EventType(r.What), Actor: access.Actor(r.Actor), At: r.At.UTC(), Detail: r.Detail}
		if r.FromState != nil {
			e.From = Status(*r.FromState)
		}
		if r.ToState != nil {
			e.To = Status(*r.ToState)
		}
		out[i] = e
	}
	return out, nil
}
