package lanes

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/lanes"
	"github.com/docket-dev/docket/internal/paging"
	"github.com/docket-dev/docket/jobs"
)

// Who reads what: the conductor of a lane's quorum, the lane's assignee, and
// any actor holding an explicit lane.view grant on the lane's project
// ([access.LaneView]) read a lane, its history and its jobs. To anyone else
// the lane is not there.

// Get returns lane id, in its own transaction. See [Client.GetTx].
func (c *Client) Get(ctx context.Context, id int64) (Lane, error) {
	return c.get(ctx, c.pool, id)
}

// GetTx returns lane id read in tx, or [db.ErrNotFound] when there is none or
// the actor may not read it: a lane the actor may not see is not there.
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) GetTx(ctx context.Context, tx pgx.Tx, id int64) (Lane, error) {
	return c.get(ctx, tx, id)
}

// get is [Client.GetTx] on q: the client's pool or the caller's transaction.
func (c *Client) get(ctx context.Context, q db.DBTX, id int64) (Lane, error) {
	row, err := queries.LaneGet(ctx, q, id, string(c.actor))
	if err != nil {
		return Lane{}, db.TranslateRead(err, "lane.get", "lane", id, string(c.actor))
	}
	return fromRow(row), nil
}

// Filter selects lanes for [Client.List]. Project is required; empty fields
// otherwise match everything.
type Filter struct {
	Project string
	Quorum  string // a quorum's name
	State   State
	Review  Review
	// After continues a listing: only lanes with a larger id. Pass the last
	// id of one page to get the next.
	After int64
	// Limit is the page size, 1..[db.MaxPage]. Defaults to [db.DefaultPage].
	Limit int
}

// List returns the lanes of f.Project matching f, oldest first, in its own
// transaction. See [Client.ListTx].
func (c *Client) List(ctx context.Context, f Filter) ([]Lane, error) {
	return c.list(ctx, c.pool, f)
}

// ListTx returns the lanes of f.Project matching f read in tx, oldest first,
// silently filtered to those the actor may read: all of them with lane.view
// on the project, else those of quorums it conducts and those assigned to
// it. An actor that may read none gets an empty list, not an error. It
// refuses an empty project, a limit outside 1..[db.MaxPage], a negative After,
// or an unknown state or review with [db.ErrInvalidArgument].
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) ListTx(ctx context.Context, tx pgx.Tx, f Filter) ([]Lane, error) {
	return c.list(ctx, tx, f)
}

// list is [Client.ListTx] on q: the client's pool or the caller's transaction.
func (c *Client) list(ctx context.Context, q db.DBTX, f Filter) ([]Lane, error) {
	const op = "lane.list"
	limit, err := paging.For(op).Project("lanes", f.Project).Cursor("after", f.After).
		OneOf("state", paging.In(f.State, States)).OneOf("review", paging.In(f.Review, Reviews)).Limit(f.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := queries.LaneList(ctx, q, dbsqlc.LaneListParams{
		Project: f.Project, Quorum: f.Quorum, State: string(f.State), Review: string(f.Review),
		AfterID: f.After, Actor: string(c.actor), MaxRows: limit,
	})
	if err != nil {
		return nil, db.Translate(err, op, "project", f.Project)
	}
	return fromRows(rows), nil
}

// History returns the recorded changes of lane id, oldest first, in its own
// transaction. See [Client.HistoryTx].
func (c *Client) History(ctx context.Context, id int64) ([]Event, error) {
	return c.history(ctx, c.pool, id)
}

// HistoryTx returns the recorded changes of lane id read in tx, oldest first:
// its creation, its dependencies, every move of its execution and review
// axes, and its merge. A lane the actor may not read, or an unknown one, is
// [db.ErrNotFound] (a lane always has its creation event).
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) HistoryTx(ctx context.Context, tx pgx.Tx, id int64) ([]Event, error) {
	return c.history(ctx, tx, id)
}

// history is [Client.HistoryTx] on q: the client's pool or the caller's transaction.
func (c *Client) history(ctx context.Context, q db.DBTX, id int64) ([]Event, error) {
	rows, err := queries.LaneEvents(ctx, q, id, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "lane.history", "lane", id)
	}
	if len(rows) == 0 {
		return nil, db.NotVisible("lane.history", "lane", id, string(c.actor))
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = Event{
			ID: r.ID, LaneID: r.LaneID, Type: EventType(r.Axis), To: r.ToState,
			Actor: access.Actor(r.Actor), At: r.At.UTC(),
		}
		if r.FromState != nil {
			out[i].From = *r.FromState
		}
		if r.Detail != nil {
			out[i].Detail = *r.Detail
		}
	}
	return out, nil
}

// Page selects a page of a lane's jobs for [Client.Jobs].
type Page struct {
	// After continues a listing: only jobs with a larger id.
	After int64
	// Limit is the page size, 1..[db.MaxPage]. Defaults to [db.DefaultPage].
	Limit int
}

// Jobs returns a page of the jobs that name lane id, oldest first, in its
// own transaction. See [Client.JobsTx].
func (c *Client) Jobs(ctx context.Context, id int64, p Page) ([]JobRef, error) {
	return c.jobs(ctx, c.pool, id, p)
}

// JobsTx returns a page of the jobs that name lane id (jobs.Spec.LaneID),
// read in tx, oldest first: where each stands, not its payload. Whoever may
// read the lane sees them, whatever its job grants. A lane the actor may not
// read, or an unknown one, is [db.ErrNotFound]; a lane with no jobs (on this
// page) gives an empty list. It refuses a limit outside 1..[db.MaxPage] or a
// negative After with [db.ErrInvalidArgument].
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) JobsTx(ctx context.Context, tx pgx.Tx, id int64, p Page) ([]JobRef, error) {
	return c.jobs(ctx, tx, id, p)
}

// jobs is [Client.JobsTx] on q: the client's pool or the caller's transaction.
func (c *Client) jobs(ctx context.Context, q db.DBTX, id int64, p Page) ([]JobRef, error) {
	const op = "lane.jobs"
	limit, err := paging.For(op).Cursor("after", p.After).Limit(p.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := queries.LaneJobs(ctx, q, id, p.After, string(c.actor), limit)
	if err != nil {
		return nil, db.Translate(err, op, "lane", id)
	}
	if len(rows) == 0 {
		// Nothing on this page: tell an empty lane from one the actor may
		// not read.
		if _, err := c.get(ctx, q, id); errors.Is(err, db.ErrNotFound) {
			return nil, db.NotVisible(op, "lane", id, string(c.actor))
		} else if err != nil {
			return nil, db.Translate(err, op, "lane", id)
		}
		return []JobRef{}, nil
	}
	return paging.Collect(rows, nil, fromJobRefRow, op)
}

func fromJobRefRow(r *dbsqlc.LaneJobsRow) JobRef {
	return JobRef{
		ID: r.ID, Kind: r.Kind, Queue: r.Queue, State: jobs.State(r.State), Attempts: int(r.Attempts),
		MaxAttempts: int(r.MaxAttempts), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}
