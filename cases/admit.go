package cases

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/cases"
)

// MaxKeys bounds the keys of one admission or correlation.
const MaxKeys = 32

// Admission asks for the open case of Project that holds any of Keys, or a
// new case of Kind holding them all.
type Admission struct {
	Project string
	// Kind is the kind of case to create when none is found, e.g.
	// supplier.switch: dot-separated segments of [a-z0-9_-], each starting
	// with a letter, at most 128 characters. A case found keeps its own kind.
	Kind string
	// Keys are 1..[MaxKeys] distinct correlation keys.
	Keys []Key
}

// Admitted is the case an admission found or created.
type Admitted struct {
	Case
	// Created is true when this admission created the case.
	Created bool
}

// Admit finds or creates the case a, in its own transaction. See
// [Client.AdmitTx].
func (c *Client) Admit(ctx context.Context, a Admission) (Admitted, error) {
	return c.admit(ctx, c.pool, a)
}

// AdmitTx finds the open case of a.Project holding any of a.Keys, or creates
// one of a.Kind holding them all, in tx. Keys of a found case that no open
// case holds are attached to it. Concurrent admissions for one new matter
// make exactly one case, whichever commits first; each gets its id. The
// unique index over held keys decides, so this holds across processes. q must
// run at READ COMMITTED (Postgres' default); under a stricter level a lost
// race is a serialization failure to retry. On commit the case and its keys
// are recorded; on rollback nothing is.
//
// It refuses, writing nothing: a malformed project, kind or key set
// ([db.ErrInvalidArgument]); an actor without case.admit on the project, or
// an unknown project ([db.ErrNotPermitted]); keys held by two different open
// cases ([db.ErrAmbiguousCorrelation], naming both).
func (c *Client) AdmitTx(ctx context.Context, tx pgx.Tx, a Admission) (Admitted, error) {
	return c.admit(ctx, tx, a)
}

// admit is [Client.AdmitTx] on q: the client's pool or the caller's transaction.
func (c *Client) admit(ctx context.Context, q db.DBTX, a Admission) (Admitted, error) {
	const op = "case.admit"
	if len(a.Keys) == 0 || len(a.Keys) > MaxKeys {
		return Admitted{}, db.Refuse(db.ErrInvalidArgument, op, "want 1..32 keys", "project", a.Project)
	}
	ns, vals := keyArrays(a.Keys)
	row, err := queries.CaseAdmit(ctx, q, dbsqlc.CaseAdmitParams{
		Project: a.Project, Kind: a.Kind, Namespaces: ns, KeyValues: vals,
		Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Admitted{}, db.Translate(err, op, "project", a.Project)
	}
	return Admitted{Case: fromCaseRow(&dbsqlc.DocketCase{
		ID: row.ID, Project: row.Project, Kind: row.Kind, Status: row.Status, State: row.State, Version: row.Version,
		CreatedBy: row.CreatedBy, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, ClosedAt: row.ClosedAt,
	}), Created: row.Created}, nil
}

// Correlate returns the open case of project holding any of keys, in its
// own transaction. See [Client.CorrelateTx].
func (c *Client) Correlate(ctx context.Context, project string, keys ...Key) (Case, error) {
	return c.correlate(ctx, c.pool, project, keys...)
}

// CorrelateTx returns the open case of project holding any of keys, read on
// q: admission's lookup, creating and attaching nothing. It returns
// [db.ErrNotFound] when no open case holds any of them, and refuses as
// [Client.AdmitTx] does.
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) CorrelateTx(ctx context.Context, tx pgx.Tx, project string, keys ...Key) (Case, error) {
	return c.correlate(ctx, tx, project, keys...)
}

// correlate is [Client.CorrelateTx] on q: the client's pool or the caller's transaction.
func (c *Client) correlate(ctx context.Context, q db.DBTX, project string, keys ...Key) (Case, error) {
	const op = "case.correlate"
	if len(keys) == 0 || len(keys) > MaxKeys {
		return Case{}, db.Refuse(db.ErrInvalidArgument, op, "want 1..32 keys", "project", project)
	}
	ns, vals := keyArrays(keys)
	rows, err := queries.CaseCorrelate(ctx, q, project, ns, vals, string(c.actor))
	if err != nil {
		return Case{}, db.Translate(err, op, "project", project)
	}
	if len(rows) == 0 {
		return Case{}, db.Refuse(db.ErrNotFound, op, "no open case holds any of the keys", "project", project)
	}
	return fromCaseRow(rows[0]), nil
}
