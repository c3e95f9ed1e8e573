package lanes

import (
	"context"
	"fmt"
	"slices"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/dbsqlc"
	"github.com/docket-dev/docket/jobs"
)

// MaxPage bounds the page size of [Client.List] and [Client.Jobs].
const MaxPage = 1000

// Who reads what: the conductor of a lane's quorum, the lane's assignee, and
// any actor holding an explicit lane.view grant on the lane's project
// ([access.LaneView]) read a lane, its history and its jobs. To anyone else
// the lane is not there.

// Get returns lane id, in its own transaction. See [Client.GetTx].
func (c *Client) Get(ctx context.Context, id int64) (Lane, error) {
	return c.GetTx(ctx, c.pool, id)
}

// GetTx returns lane id read on q, or [db.ErrNotFound] when there is none or
// the actor may not read it: a lane the actor may not see is not there.
func (c *Client) GetTx(ctx context.Context, q db.DBTX, id int64) (Lane, error) {
	row, err := queries.LaneGet(ctx, q, id, string(c.actor))
	if err != nil {
		return Lane{}, db.Translate(err, "lane.get", "lane", id)
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
	// Limit is the page size, 1..[MaxPage]. Defaults to 100.
	Limit int
}

// List returns the lanes of f.Project matching f, oldest first, in its own
// transaction. See [Client.ListTx].
func (c *Client) List(ctx context.Context, f Filter) ([]Lane, error) {
	return c.ListTx(ctx, c.pool, f)
}

// ListTx returns the lanes of f.Project matching f read on q, oldest first,
// silently filtered to those the actor may read: all of them with lane.view
// on the project, else those of quorums it conducts and those assigned to
// it. An actor that may read none gets an empty list, not an error. It
// refuses an empty project, a limit outside 1..[MaxPage], a negative After,
// or an unknown state or review with [db.ErrInvalidArgument].
func (c *Client) ListTx(ctx context.Context, q db.DBTX, f Filter) ([]Lane, error) {
	const op = "lane.list"
	if f.Project == "" {
		return nil, db.Refuse(db.ErrInvalidArgument, op, "project is empty: lanes are listed per project")
	}
	if f.Limit == 0 {
		f.Limit = 100
	}
	if f.Limit < 1 || f.Limit > MaxPage {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("limit %d is outside 1..%d", f.Limit, MaxPage))
	}
	if f.After < 0 {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("after %d is negative", f.After))
	}
	if f.State != "" && !slices.Contains(States, f.State) {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("unknown state %q", f.State))
	}
	if f.Review != "" && !slices.Contains(Reviews, f.Review) {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("unknown review %q", f.Review))
	}
	rows, err := queries.LaneList(ctx, q, dbsqlc.LaneListParams{
		Project: f.Project, Quorum: f.Quorum, State: string(f.State), Review: string(f.Review),
		AfterID: f.After, Actor: string(c.actor), MaxRows: int32(f.Limit),
	})
	if err != nil {
		return nil, db.Translate(err, op, "project", f.Project)
	}
	return fromRows(rows), nil
}

// History returns the recorded changes of lane id, oldest first, in its own
// transaction. See [Client.HistoryTx].
func (c *Client) History(ctx context.Context, id int64) ([]Event, error) {
	return c.HistoryTx(ctx, c.pool, id)
}

// HistoryTx returns the recorded changes of lane id read on q, oldest first:
// its creation, its dependencies, every move of its execution and review
// axes, and its merge. A lane the actor may not read, or an unknown one, is
// [db.ErrNotFound] (a lane always has its creation event).
func (c *Client) HistoryTx(ctx context.Context, q db.DBTX, id int64) ([]Event, error) {
	rows, err := queries.LaneEvents(ctx, q, id, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "lane.history", "lane", id)
	}
	if len(rows) == 0 {
		return nil, db.Refuse(db.ErrNotFound, "lane.history", "no such lane, or the actor may not read it", "lane", id)
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = Event{
			ID: r.ID, LaneID: r.LaneID, Axis: Axis(r.Axis), To: r.ToState,
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
	// Limit is the page size, 1..[MaxPage]. Defaults to 100.
	Limit int
}

// Jobs returns a page of the jobs that name lane id, oldest first, in its
// own transaction. See [Client.JobsTx].
func (c *Client) Jobs(ctx context.Context, id int64, p Page) ([]JobRef, error) {
	return c.JobsTx(ctx, c.pool, id, p)
}

// JobsTx returns a page of the jobs that name lane id (jobs.Spec.LaneID),
// read on q, oldest first: where each stands, not its payload. Whoever may
// read the lane sees them, whatever its job grants. A lane the actor may not
// read, or an unknown one, is [db.ErrNotFound]; a lane with no jobs (on this
// page) gives an empty list. It refuses a limit outside 1..[MaxPage] or a
// negative After with [db.ErrInvalidArgument].
func (c *Client) JobsTx(ctx context.Context, q db.DBTX, id int64, p Page) ([]JobRef, error) {
	const op = "lane.jobs"
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.Limit < 1 || p.Limit > MaxPage {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("limit %d is outside 1..%d", p.Limit, MaxPage))
	}
	if p.After < 0 {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("after %d is negative", p.After))
	}
	rows, err := queries.LaneJobs(ctx, q, id, p.After, string(c.actor), int32(p.Limit))
	if err != nil {
		return nil, db.Translate(err, op, "lane", id)
	}
	if len(rows) == 0 {
		// Nothing on this page: tell an empty lane from one the actor may
		// not read.
		if _, err := c.GetTx(ctx, q, id); err != nil {
			return nil, db.Translate(err, op, "lane", id)
		}
		return []JobRef{}, nil
	}
	out := make([]JobRef, len(rows))
	for i, r := range rows {
		out[i] = JobRef{
			ID: r.ID, Kind: r.Kind, Queue: r.Queue, State: jobs.State(r.State), Attempts: int(r.Attempts),
			MaxAttempts: int(r.MaxAttempts), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		}
	}
	return out, nil
}
