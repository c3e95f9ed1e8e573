package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/tasks"
)

// Claim claims task id for lease (0: [DefaultClaim]), in its own
// transaction. See [Client.ClaimTx].
func (c *Client) Claim(ctx context.Context, id int64, lease time.Duration) (Task, error) {
	return c.claim(ctx, c.pool, id, lease)
}

// ClaimTx claims task id in tx for the actor, for lease ([MinClaim] ..
// [MaxClaim]; 0: [DefaultClaim]), and returns it with the claim: the task
// leaves everybody else's worklist until the claim is released, expires or
// the task is settled. Claiming a task the actor holds renews the claim
// under a new token. Of reviewers claiming at once, one holds it. The claim
// commits with tx, or rolls back with it.
//
// It refuses, writing nothing: a lease out of range
// ([db.ErrInvalidArgument]); a task the actor may not see
// ([db.ErrNotFound]); a task settled first ([db.ErrAlreadyAnswered]); an
// excluded actor ([db.ErrExcludedActor]); one outside its audience
// ([db.ErrNotPermitted]); a task another holds ([db.ErrStaleClaim], naming
// the holder and until when).
func (c *Client) ClaimTx(ctx context.Context, tx pgx.Tx, id int64, lease time.Duration) (Task, error) {
	return c.claim(ctx, tx, id, lease)
}

func (c *Client) claim(ctx context.Context, q db.DBTX, id int64, lease time.Duration) (Task, error) {
	const op = "task.claim"
	if lease == 0 {
		lease = DefaultClaim
	}
	if lease < MinClaim || lease > MaxClaim {
		return Task{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid claim lease %v: want %v .. %v", lease, MinClaim, MaxClaim), "task", id)
	}
	r, err := queries.TaskClaim(ctx, q, id, lease, string(c.actor), c.clock.Now())
	if err != nil {
		return Task{}, db.Translate(err, op, "task", id)
	}
	return fromRow(r), nil
}

// Release gives back a claim, in its own transaction. See
// [Client.ReleaseTx].
func (c *Client) Release(ctx context.Context, t Task) (Task, error) {
	return c.release(ctx, c.pool, t)
}

// ReleaseTx gives back, in tx, the claim t holds (t as [Client.Claim]
// returned it), and returns the task, queued again. It commits with tx, or
// rolls back with it. It refuses, writing nothing: a task without a claim
// ([db.ErrInvalidArgument]); a task the actor may not see
// ([db.ErrNotFound]); a claim that is no longer the actor's under that
// token ([db.ErrStaleClaim]).
func (c *Client) ReleaseTx(ctx context.Context, tx pgx.Tx, t Task) (Task, error) {
	return c.release(ctx, tx, t)
}

func (c *Client) release(ctx context.Context, q db.DBTX, t Task) (Task, error) {
	const op = "task.release"
	if t.Claim == nil {
		return Task{}, db.Refuse(db.ErrInvalidArgument, op, "the task holds no claim to release", "task", t.ID)
	}
	r, err := queries.TaskRelease(ctx, q, t.ID, pgtype.UUID{Bytes: t.Claim.Token, Valid: true}, string(c.actor), c.clock.Now())
	if err != nil {
		return Task{}, db.Translate(err, op, "task", t.ID)
	}
	return fromRow(r), nil
}

// Decide answers task id, in its own transaction. See [Client.DecideTx].
func (c *Client) Decide(ctx context.Context, id int64, decision, note string) (Task, error) {
	return c.decide(ctx, c.pool, id, decision, note)
}

// DecideTx answers task id with decision (one the task admits) and a note
// of up to [MaxNote] characters, in tx, and returns it decided. The
// decision is delivered to the task's wait and its continuation enqueued in
// the same transaction: all of it commits with tx, or rolls back with it.
// Answering needs the claim: the actor holds it, or nobody holds it live.
//
// It refuses, writing nothing: a decision the task does not admit or an
// oversized note ([db.ErrInvalidArgument]); a task the actor may not see
// ([db.ErrNotFound]); a task settled first, by another answer or by its
// expiry ([db.ErrAlreadyAnswered]); an excluded actor
// ([db.ErrExcludedActor]); one outside its audience ([db.ErrNotPermitted]);
// a task another holds ([db.ErrStaleClaim]).
func (c *Client) DecideTx(ctx context.Context, tx pgx.Tx, id int64, decision, note string) (Task, error) {
	return c.decide(ctx, tx, id, decision, note)
}

func (c *Client) decide(ctx context.Context, q db.DBTX, id int64, decision, note string) (Task, error) {
	const op = "task.decide"
	if len(note) > 4*MaxNote {
		return Task{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("note of %d bytes: want at most %d characters", len(note), MaxNote), "task", id)
	}
	var n *string
	if note != "" {
		n = &note
	}
	r, err := queries.TaskDecide(ctx, q, dbsqlc.TaskDecideParams{ID: id, Decision: decision, Note: n, Actor: string(c.actor), Now: c.clock.Now()})
	if err != nil {
		return Task{}, db.Translate(err, op, "task", id)
	}
	return fromRow(r), nil
}
