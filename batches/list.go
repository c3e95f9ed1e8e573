package batches

import (
	"context"

	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/batches"
	"github.com/docket-dev/docket/internal/paging"
)

// Filter selects batches for [Client.List]. Project is required.
type Filter struct {
	Project string
	// After continues a listing: only batches whose name sorts after it.
	// Pass the last name of one page to get the next.
	After string
	// Limit is the page size, 1..[db.MaxPage]. Defaults to [db.DefaultPage].
	Limit int
}

// List returns a page of the batches of f.Project, by name, each with its
// census as [Client.Get] reads it. An actor that may not read the
// project's batches gets an empty list, not an error. It refuses an empty
// project or a limit outside 1..[db.MaxPage] with [db.ErrInvalidArgument].
// It is one statement: the page agrees with itself.
func (c *Client) List(ctx context.Context, f Filter) ([]Report, error) {
	const op = "batch.list"
	limit, err := paging.For(op).Project("batches", f.Project).Limit(f.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := queries.BatchList(ctx, c.pool, f.Project, f.After, limit, string(c.actor))
	return paging.Collect(rows, err, fromListRow, op, "project", f.Project)
}

// fromListRow is a batch of a list. A list's row has BatchGet's columns:
// were they ever to differ, this conversion would not compile.
func fromListRow(r *dbsqlc.BatchListRow) Report { return fromRow((*dbsqlc.BatchGetRow)(r)) }
