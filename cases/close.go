package cases

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
)

// Close closes case id, in its own transaction. See [Client.CloseTx].
func (c *Client) Close(ctx context.Context, id int64) (Case, error) {
	return c.close(ctx, c.pool, id)
}

// CloseTx closes case id in tx and releases its keys, so a new matter with
// the same keys opens a fresh case. In the same transaction it withdraws the
// case's waiting waits, dead-letters the buffered messages addressed to it
// and cancels its timers whose jobs are still queued. Closing a closed case
// is a no-op that returns it. Close and [Client.RegisterObligationTx] decide under the case
// row's lock, so a registration racing a close can never leave a closed case
// owing something: one of them is refused.
//
// It refuses, writing nothing: an unknown case or one the actor may not write
// ([db.ErrNotFound]); a case with pending obligations
// ([db.ErrObligationsOutstanding], naming them).
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) CloseTx(ctx context.Context, tx pgx.Tx, id int64) (Case, error) {
	return c.close(ctx, tx, id)
}

// close is [Client.CloseTx] on q: the client's pool or the caller's transaction.
func (c *Client) close(ctx context.Context, q db.DBTX, id int64) (Case, error) {
	row, err := queries.CaseClose(ctx, q, id, string(c.actor), c.clock.Now())
	if err != nil {
		return Case{}, db.Translate(err, "case.close", "case", id)
	}
	return fromCaseRow(row), nil
}

// Reopened is what reopening a case did: the case, open again, and which of
// the keys it held when it closed it took back and which it left with the
// open case that claimed them since.
type Reopened struct {
	Case  Case
	Taken []Key
	Left  []Key
}

// Reopen reopens case id, in a transaction of its own. See
// [Client.ReopenTx].
func (c *Client) Reopen(ctx context.Context, id int64) (Reopened, error) {
	var r Reopened
	err := db.WithTx(ctx, c.pool, func(tx pgx.Tx) error {
		var err error
		r, err = c.ReopenTx(ctx, tx, id)
		return err
	})
	return r, err
}

// ReopenTx reopens case id in tx and takes back the keys it held when it
// closed that no open case has claimed since; a key another case claimed
// stays with that case (Left). Reopening an open case is a no-op that takes
// nothing. It refuses, writing nothing, an unknown case or one the actor may
// not write ([db.ErrNotFound]).
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) ReopenTx(ctx context.Context, tx pgx.Tx, id int64) (Reopened, error) {
	const op = "case.reopen"
	rows, err := queries.CaseReopen(ctx, tx, id, string(c.actor), c.clock.Now())
	if err != nil {
		return Reopened{}, db.Translate(err, op, "case", id)
	}
	r := Reopened{Taken: []Key{}, Left: []Key{}}
	for _, k := range rows {
		if k.Taken {
			r.Taken = append(r.Taken, Key{Namespace: k.Namespace, Value: k.Value})
		} else {
			r.Left = append(r.Left, Key{Namespace: k.Namespace, Value: k.Value})
		}
	}
	if r.Case, err = c.GetTx(ctx, tx, id); err != nil {
		return Reopened{}, err
	}
	return r, nil
}
