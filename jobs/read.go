package jobs

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
	"github.com/docket-dev/docket/internal/paging"
)

// Filter selects jobs for [Client.List]. Empty fields match everything.
type Filter struct {
	State State
	Kind  string
	Queue string
	// Before continues a listing: only jobs with a smaller id. Pass the
	// last id of one page to get the next.
	Before int64
	// Limit is the page size, 1..[db.MaxPage]. Defaults to [db.DefaultPage].
	Limit int
	// Unrunnable keeps only the jobs no worker will claim: pinned
	// ([Client.Pin]) to handler revisions no registered deployment runs for
	// their kind and payload schema (docket.jobs_unrunnable).
	Unrunnable bool
}

// List returns the client project's jobs matching f, newest first. It is
// silently empty for an actor that holds no job capability on the project
// (job.view is the one that reads and changes nothing).
// It refuses a limit outside 1..[db.MaxPage] or an unknown state with
// [db.ErrInvalidArgument].
func (c *Client) List(ctx context.Context, f Filter) ([]Job, error) {
	return c.list(ctx, c.reads.DB, f)
}

// ListTx is [Client.List] read in tx, the caller's transaction: it sees what tx
// has written and not yet committed, and writes nothing itself.
func (c *Client) ListTx(ctx context.Context, tx pgx.Tx, f Filter) ([]Job, error) {
	return c.list(ctx, tx, f)
}

// list is [Client.List] on q: the client's pool or the caller's transaction.
func (c *Client) list(ctx context.Context, q db.DBTX, f Filter) ([]Job, error) {
	const op = "job.list"
	if err := c.needProject(op); err != nil {
		return nil, err
	}
	limit, err := paging.For(op).OneOf("state", paging.In(f.State, States)).Limit(f.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := queries.JobList(ctx, q, dbsqlc.JobListParams{
		Project: c.project, Actor: string(c.actor), State: string(f.State), Kind: f.Kind, Queue: f.Queue, BeforeID: f.Before, MaxRows: limit,
		Unrunnable: f.Unrunnable,
	})
	if err != nil {
		return nil, db.Translate(err, op, "project", c.project)
	}
	return fromRows(rows), nil
}

// History returns the recorded transitions of job id, oldest first. An
// unknown job has none, and so has a job the actor may not see (see
// [Client.Get]).
func (c *Client) History(ctx context.Context, id int64) ([]Event, error) {
	return c.history(ctx, c.reads.DB, id)
}

// HistoryTx is [Client.History] read in tx, the caller's transaction: it sees what tx
// has written and not yet committed, and writes nothing itself.
func (c *Client) HistoryTx(ctx context.Context, tx pgx.Tx, id int64) ([]Event, error) {
	return c.history(ctx, tx, id)
}

// history is [Client.History] on q: the client's pool or the caller's transaction.
func (c *Client) history(ctx context.Context, q db.DBTX, id int64) ([]Event, error) {
	rows, err := queries.JobEvents(ctx, q, id, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "job.history", "job", id)
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = Event{
			JobID: r.JobID, Seq: int(r.Seq), To: State(r.ToState), Actor: access.Actor(r.Actor), At: r.At.UTC(),
			Attempt: int(r.Attempt), Detail: deref(r.Detail), Revision: deref(r.Revision), PrevHash: r.PrevHash, Hash: r.Hash,
		}
		if r.FromState != nil {
			out[i].From = State(*r.FromState)
		}
		if r.ClaimedAt != nil {
			out[i].ClaimedAt, out[i].ClaimedBy = r.ClaimedAt.UTC(), access.Actor(deref(r.ClaimedBy))
		}
	}
	return out, nil
}

// Verify recomputes job id's history from its events alone, as
// docket.job_verify does: sequence numbers without gaps, the hash chain,
// every move in the transition table, attempts counting only claims, and the
// final state and attempts equal to the job's. A failed check is a
// Verification that is not OK, naming the first bad event, not an error. The
// history is evidence, and grants nothing. A job the actor may not see
// (see [Client.Get]) is [db.ErrNotFound].
func (c *Client) Verify(ctx context.Context, id int64) (Verification, error) {
	return c.verify(ctx, c.reads.DB, id)
}

// VerifyTx is [Client.Verify] read in tx, the caller's transaction: it sees what tx
// has written and not yet committed, and writes nothing itself.
func (c *Client) VerifyTx(ctx context.Context, tx pgx.Tx, id int64) (Verification, error) {
	return c.verify(ctx, tx, id)
}

// verify is [Client.Verify] on q: the client's pool or the caller's transaction.
func (c *Client) verify(ctx context.Context, q db.DBTX, id int64) (Verification, error) {
	r, err := queries.JobVerify(ctx, q, id, string(c.actor))
	if err != nil {
		return Verification{}, db.TranslateRead(err, "job.verify", "job", id, string(c.actor))
	}
	return Verification{OK: r.Ok, Events: int(r.Events), BadSeq: int(r.BadSeq), Problem: r.Problem}, nil
}
