package cases

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/cases"
	"github.com/docket-dev/docket/internal/paging"
)

// Who reads what: an actor holding case.admit or case.view on a project
// ([access.CaseAdmit], [access.CaseView]) reads its cases, their keys,
// obligations and history. To anyone else they are not there.

// Get returns case id, in its own transaction. See [Client.GetTx].
func (c *Client) Get(ctx context.Context, id int64) (Case, error) {
	return c.get(ctx, c.reads.DB, id)
}

// GetTx returns case id read in tx, or [db.ErrNotFound] when there is none or
// the actor may not read it.
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) GetTx(ctx context.Context, tx pgx.Tx, id int64) (Case, error) {
	return c.get(ctx, tx, id)
}

// get is [Client.GetTx] on q: the client's pool or the caller's transaction.
func (c *Client) get(ctx context.Context, q db.DBTX, id int64) (Case, error) {
	row, err := queries.CaseGet(ctx, q, id, string(c.actor))
	if err != nil {
		return Case{}, db.TranslateRead(err, "case.get", "case", id, string(c.actor))
	}
	return fromCaseRow(row), nil
}

// Filter selects cases for [Client.List]. Project is required.
type Filter struct {
	Project string
	Status  Status // empty: both
	// After continues a listing: only cases with a larger id. Pass the last
	// id of one page to get the next.
	After int64
	// Limit is the page size, 1..[db.MaxPage]. Defaults to [db.DefaultPage].
	Limit int
}

// List returns the cases of f.Project matching f, oldest first, in its own
// transaction. See [Client.ListTx].
func (c *Client) List(ctx context.Context, f Filter) ([]Case, error) {
	return c.list(ctx, c.reads.DB, f)
}

// ListTx returns a page of the cases of f.Project matching f read in tx,
// oldest first. An actor that may not read the project's cases gets an
// empty list, not an error. It refuses an empty project, a limit outside
// 1..[db.MaxPage], a negative After or an unknown status with
// [db.ErrInvalidArgument].
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) ListTx(ctx context.Context, tx pgx.Tx, f Filter) ([]Case, error) {
	return c.list(ctx, tx, f)
}

// list is [Client.ListTx] on q: the client's pool or the caller's transaction.
func (c *Client) list(ctx context.Context, q db.DBTX, f Filter) ([]Case, error) {
	const op = "case.list"
	limit, err := paging.For(op).Project("cases", f.Project).Cursor("after", f.After).
		OneOf("status", paging.In(f.Status, Statuses)).Limit(f.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := queries.CaseList(ctx, q, dbsqlc.CaseListParams{
		Project: f.Project, Status: string(f.Status), AfterID: f.After, Actor: string(c.actor), MaxRows: limit,
	})
	return paging.Collect(rows, err, fromCaseRow, op, "project", f.Project)
}

// Keys returns every claim of a key by case id, oldest first, in its own
// transaction. See [Client.KeysTx].
func (c *Client) Keys(ctx context.Context, id int64) ([]KeyClaim, error) {
	return c.keys(ctx, c.reads.DB, id)
}

// KeysTx returns every claim of a key by case id read in tx, oldest first:
// those it holds and those it released when it closed. A case the actor may
// not read, or an unknown one, has none.
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) KeysTx(ctx context.Context, tx pgx.Tx, id int64) ([]KeyClaim, error) {
	return c.keys(ctx, tx, id)
}

// keys is [Client.KeysTx] on q: the client's pool or the caller's transaction.
func (c *Client) keys(ctx context.Context, q db.DBTX, id int64) ([]KeyClaim, error) {
	rows, err := queries.CaseKeys(ctx, q, id, string(c.actor))
	return paging.Collect(rows, err, fromKeyRow, "case.keys", "case", id)
}

// Obligations returns case id's obligations, oldest first, in its own
// transaction. See [Client.ObligationsTx].
func (c *Client) Obligations(ctx context.Context, id int64) ([]Obligation, error) {
	return c.obligations(ctx, c.reads.DB, id)
}

// ObligationsTx returns case id's obligations read in tx, oldest first,
// whatever their state. A case the actor may not read, or an unknown one, has
// none.
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) ObligationsTx(ctx context.Context, tx pgx.Tx, id int64) ([]Obligation, error) {
	return c.obligations(ctx, tx, id)
}

// obligations is [Client.ObligationsTx] on q: the client's pool or the caller's transaction.
func (c *Client) obligations(ctx context.Context, q db.DBTX, id int64) ([]Obligation, error) {
	rows, err := queries.CaseObligations(ctx, q, id, string(c.actor))
	return paging.Collect(rows, err, fromObligationRow, "case.obligations", "case", id)
}

// Obligation returns obligation id, or [db.ErrNotFound] when there is none or
// the actor may not read its case.
func (c *Client) Obligation(ctx context.Context, id int64) (Obligation, error) {
	return c.obligation(ctx, c.reads.DB, id)
}

// ObligationTx is [Client.Obligation] read in tx, the caller's transaction: it sees what tx
// has written and not yet committed, and writes nothing itself.
func (c *Client) ObligationTx(ctx context.Context, tx pgx.Tx, id int64) (Obligation, error) {
	return c.obligation(ctx, tx, id)
}

// obligation is [Client.Obligation] on q: the client's pool or the caller's transaction.
func (c *Client) obligation(ctx context.Context, q db.DBTX, id int64) (Obligation, error) {
	row, err := queries.ObligationGet(ctx, q, id, string(c.actor))
	if err != nil {
		return Obligation{}, db.TranslateRead(err, "obligation.get", "obligation", id, string(c.actor))
	}
	return fromObligationRow(row), nil
}

// History returns the recorded changes of case id, oldest first, in its own
// transaction. See [Client.HistoryTx].
func (c *Client) History(ctx context.Context, id int64) ([]Event, error) {
	return c.history(ctx, c.reads.DB, id)
}

// HistoryTx returns the recorded changes of case id read in tx, oldest
// first: its admission, every key claimed and released, every state write,
// close and reopen, every obligation registered and settled, and late
// answers. Every record carries the case id, so this is one range scan of an
// index. A case the actor may not read, or an unknown one, is
// [db.ErrNotFound] (a case always has its creation event).
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) HistoryTx(ctx context.Context, tx pgx.Tx, id int64) ([]Event, error) {
	return c.history(ctx, tx, id)
}

// history is [Client.HistoryTx] on q: the client's pool or the caller's transaction.
func (c *Client) history(ctx context.Context, q db.DBTX, id int64) ([]Event, error) {
	rows, err := queries.CaseEvents(ctx, q, id, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "case.history", "case", id)
	}
	if len(rows) == 0 {
		return nil, db.NotVisible("case.history", "case", id, string(c.actor))
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = fromEventRow(r)
	}
	return out, nil
}
