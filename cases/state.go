package cases

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/cases"
)

// MaxState bounds a case's state: 1 MiB of JSON text.
const MaxState = 1 << 20

// State returns case id's state and the version it is at, in its own
// transaction. See [Client.StateTx].
func (c *Client) State(ctx context.Context, id int64) (Snapshot, error) {
	return c.state(ctx, c.pool, id)
}

// StateTx returns case id's state and version read in tx, or
// [db.ErrNotFound] when there is no such case or the actor may not read it.
// The state is what some writer stored: docket never interprets it, so treat
// it as untrusted input.
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) StateTx(ctx context.Context, tx pgx.Tx, id int64) (Snapshot, error) {
	return c.state(ctx, tx, id)
}

// state is [Client.StateTx] on q: the client's pool or the caller's transaction.
func (c *Client) state(ctx context.Context, q db.DBTX, id int64) (Snapshot, error) {
	k, err := c.get(ctx, q, id)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{State: k.State, Version: k.Version}, nil
}

// PutState writes state as case id's state if it is still at version
// expected, in its own transaction. See [Client.PutStateTx].
func (c *Client) PutState(ctx context.Context, id, expected int64, state json.RawMessage) (Case, error) {
	return c.putState(ctx, c.pool, id, expected, state)
}

// PutStateTx writes state as case id's state in tx if the case is still at
// version expected (the version the writer read, from [Client.StateTx]),
// and returns the case at version expected+1. The check is a predicate on
// one UPDATE: of two writers that read the same version, one succeeds and
// the other is refused. There is no write without a version. On rollback the
// write is undone and the version stays where it was.
//
// It refuses, writing nothing: an expected version below 1, a state that is
// empty, not JSON, or over [MaxState] ([db.ErrInvalidArgument]); an unknown
// case or one the actor may not write ([db.ErrNotFound]); a closed case
// ([db.ErrCaseClosed]); a case at another version ([db.ErrVersionConflict],
// naming the current version: read again, decide again, write again).
func (c *Client) PutStateTx(ctx context.Context, tx pgx.Tx, id, expected int64, state json.RawMessage) (Case, error) {
	return c.putState(ctx, tx, id, expected, state)
}

// putState is [Client.PutStateTx] on q: the client's pool or the caller's transaction.
func (c *Client) putState(ctx context.Context, q db.DBTX, id, expected int64, state json.RawMessage) (Case, error) {
	const op = "case.put_state"
	if expected < 1 {
		return Case{}, db.Refuse(db.ErrInvalidArgument, op, "expected version must be 1 or more: a write names the version it read", "case", id)
	}
	if len(state) == 0 || !json.Valid(state) {
		return Case{}, db.Refuse(db.ErrInvalidArgument, op, "state is not a JSON value", "case", id)
	}
	if len(state) > MaxState {
		return Case{}, db.Refuse(db.ErrInvalidArgument, op, "state is over 1 MiB", "case", id)
	}
	row, err := queries.CasePutState(ctx, q, dbsqlc.CasePutStateParams{
		ID: id, ExpectedVersion: expected, State: state, Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Case{}, db.Translate(err, op, "case", id, "expected_version", expected)
	}
	return fromCaseRow(row), nil
}
