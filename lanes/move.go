package lanes

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/lanes"
)

// SetState moves lane id's execution axis to to, in its own transaction. See
// [Client.SetStateTx].
func (c *Client) SetState(ctx context.Context, id int64, to State, note string) (Lane, error) {
	return c.setState(ctx, c.pool, id, to, note)
}

// SetStateTx moves lane id's execution axis to to in tx, with note (empty:
// none, at most [MaxNoteLen] characters) recorded in its event. Only the
// conductor of the lane's quorum moves it. Review and merge are untouched.
//
// It refuses, writing nothing: an unknown state or an over-long note with
// [db.ErrInvalidArgument]; an actor that is not the conductor, or an unknown
// lane, with [db.ErrNotPermitted], decided before the lane is locked, so the
// caller waits for no one and learns nothing about the lane; a move not in
// the machine (see [State]), a move to the state the lane is in, or any move
// of a terminal lane with [db.ErrIllegalTransition].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) SetStateTx(ctx context.Context, tx pgx.Tx, id int64, to State, note string) (Lane, error) {
	return c.setState(ctx, tx, id, to, note)
}

// setState is [Client.SetStateTx] on q: the client's pool or the caller's transaction.
func (c *Client) setState(ctx context.Context, q db.DBTX, id int64, to State, note string) (Lane, error) {
	row, err := queries.LaneSetState(ctx, q, dbsqlc.LaneSetStateParams{
		ID: id, State: string(to), Note: notePtr(note), Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Lane{}, db.Translate(err, "lane.set_state", "lane", id, "state", to)
	}
	return fromRow(row), nil
}

// Submit submits lane id for review, in its own transaction. See
// [Client.SubmitTx].
func (c *Client) Submit(ctx context.Context, id int64, note string) (Lane, error) {
	return c.submit(ctx, c.pool, id, note)
}

// SubmitTx submits lane id for review in tx (none or changes_requested →
// submitted), with note recorded in its event. The conductor of the lane's
// quorum or the lane's assignee may submit. It refuses as
// [Client.ApproveTx] does, the conductor-or-assignee rule aside.
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) SubmitTx(ctx context.Context, tx pgx.Tx, id int64, note string) (Lane, error) {
	return c.submit(ctx, tx, id, note)
}

// submit is [Client.SubmitTx] on q: the client's pool or the caller's transaction.
func (c *Client) submit(ctx context.Context, q db.DBTX, id int64, note string) (Lane, error) {
	return c.review(ctx, q, "lane.submit", id, Submitted, note)
}

// Approve approves lane id, in its own transaction. See [Client.ApproveTx].
func (c *Client) Approve(ctx context.Context, id int64, note string) (Lane, error) {
	return c.approve(ctx, c.pool, id, note)
}

// ApproveTx approves lane id in tx (submitted → approved, final), with note
// (empty: none, at most [MaxNoteLen] characters) recorded in its event. Only
// the conductor of the lane's quorum gives verdicts. Execution and merge are
// untouched; completing a job of the lane never moves its review.
//
// It refuses, writing nothing: an over-long note with
// [db.ErrInvalidArgument]; an actor without the role, or an unknown lane,
// with [db.ErrNotPermitted], decided before the lane is read or locked; a
// lane whose review is not submitted (another verdict came first, or it was
// never submitted) with [db.ErrIllegalTransition].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) ApproveTx(ctx context.Context, tx pgx.Tx, id int64, note string) (Lane, error) {
	return c.approve(ctx, tx, id, note)
}

// approve is [Client.ApproveTx] on q: the client's pool or the caller's transaction.
func (c *Client) approve(ctx context.Context, q db.DBTX, id int64, note string) (Lane, error) {
	return c.review(ctx, q, "lane.approve", id, Approved, note)
}

// RequestChanges asks for changes to lane id, in its own transaction. See
// [Client.RequestChangesTx].
func (c *Client) RequestChanges(ctx context.Context, id int64, note string) (Lane, error) {
	return c.requestChanges(ctx, c.pool, id, note)
}

// RequestChangesTx asks for changes to lane id in tx (submitted →
// changes_requested), with note saying which. The assignee then submits
// again. It refuses as [Client.ApproveTx] does.
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) RequestChangesTx(ctx context.Context, tx pgx.Tx, id int64, note string) (Lane, error) {
	return c.requestChanges(ctx, tx, id, note)
}

// requestChanges is [Client.RequestChangesTx] on q: the client's pool or the caller's transaction.
func (c *Client) requestChanges(ctx context.Context, q db.DBTX, id int64, note string) (Lane, error) {
	return c.review(ctx, q, "lane.request_changes", id, ChangesRequested, note)
}

func (c *Client) review(ctx context.Context, q db.DBTX, op string, id int64, to Review, note string) (Lane, error) {
	row, err := queries.LaneReview(ctx, q, dbsqlc.LaneReviewParams{
		ID: id, Review: string(to), Note: notePtr(note), Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Lane{}, db.Translate(err, op, "lane", id)
	}
	return fromRow(row), nil
}

// Merge records that lane id was merged at commit, in its own transaction.
// See [Client.MergeTx].
func (c *Client) Merge(ctx context.Context, id int64, commit string) (Lane, error) {
	return c.merge(ctx, c.pool, id, commit)
}

// MergeTx records in tx that lane id was merged at commit, a git object id
// (40 or 64 lowercase hex digits). It records a fact; it executes nothing.
// Only the conductor of the lane's quorum records merges, and only of a lane
// that is done and approved. Recording the same commit again is a quiet no-op
// that returns the lane, so a retry after a lost reply is safe.
//
// It refuses, writing nothing: a malformed commit with
// [db.ErrInvalidArgument]; an actor that is not the conductor, or an unknown
// lane, with [db.ErrNotPermitted], decided before the lane is locked; a lane
// that is not done and approved with [db.ErrIllegalTransition]; a lane
// merged at another commit with [db.ErrTerminal].
func (c *Client) MergeTx(ctx context.Context, tx pgx.Tx, id int64, commit string) (Lane, error) {
	return c.merge(ctx, tx, id, commit)
}

// merge is [Client.MergeTx] on q: the client's pool or the caller's transaction.
func (c *Client) merge(ctx context.Context, q db.DBTX, id int64, commit string) (Lane, error) {
	row, err := queries.LaneMerge(ctx, q, id, commit, string(c.actor), c.clock.Now())
	if err != nil {
		return Lane{}, db.Translate(err, "lane.merge", "lane", id, "commit", commit)
	}
	return fromRow(row), nil
}
