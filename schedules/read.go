package schedules

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/docket-dev/docket/db"
)

// MaxPage bounds the page size of [Client.List].
const MaxPage = 1000

// MaxPreview bounds how many occurrences [Preview] and [Client.Preview]
// compute at once.
const MaxPreview = 1000

// Who reads what: an actor holding schedule.manage or schedule.view on a
// project reads its schedules, their occurrences and history. To anyone else
// they are not there.

// Get returns schedule id, in its own transaction. See [Client.GetTx].
func (c *Client) Get(ctx context.Context, id int64) (Schedule, error) {
	return c.GetTx(ctx, c.pool, id)
}

// GetTx returns schedule id read on q, or [db.ErrNotFound] when there is
// none or the actor may not read it.
func (c *Client) GetTx(ctx context.Context, q db.DBTX, id int64) (Schedule, error) {
	row, err := queries.ScheduleGet(ctx, q, id, string(c.actor))
	if err != nil {
		return Schedule{}, db.Translate(err, "schedule.get", "schedule", id)
	}
	return fromRow(row), nil
}

// Filter selects schedules for [Client.List]. Project is required.
type Filter struct {
	Project string
	// After continues a listing: only schedules whose name sorts after it.
	After string
	// Limit is the page size, 1..[MaxPage]. Defaults to 100.
	Limit int
}

// List returns a page of the schedules of f.Project, by name. An actor that
// may not read the project's schedules gets an empty list, not an error. It
// refuses an empty project or a limit outside 1..[MaxPage] with
// [db.ErrInvalidArgument].
func (c *Client) List(ctx context.Context, f Filter) ([]Schedule, error) {
	const op = "schedule.list"
	if f.Project == "" {
		return nil, db.Refuse(db.ErrInvalidArgument, op, "project is empty: schedules are listed per project")
	}
	if f.Limit == 0 {
		f.Limit = 100
	}
	if f.Limit < 1 || f.Limit > MaxPage {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("limit %d: want 1..%d", f.Limit, MaxPage))
	}
	rows, err := queries.ScheduleList(ctx, c.pool, f.Project, f.After, string(c.actor), int32(f.Limit))
	if err != nil {
		return nil, db.Translate(err, op, "project", f.Project)
	}
	out := make([]Schedule, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
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

// EventKind says what a schedule event records.
type EventKind string

// The events of a schedule's history.
const (
	EventCreated EventKind = "created"
	EventStatus  EventKind = "status"
	EventUpdated EventKind = "updated"
	// EventSkipped records missed occurrences the catch-up policy did not
	// run; its Detail is a [Skipped].
	EventSkipped EventKind = "skipped"
)

// Event is one entry of a schedule's history.
type Event struct {
	ID       int64
	What     EventKind
	From, To Status
	Actor    string
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
		e := Event{ID: r.ID, What: EventKind(r.What), Actor: r.Actor, At: r.At.UTC(), Detail: r.Detail}
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
