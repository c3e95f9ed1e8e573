package plans

import (
	"context"

	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/plans"
	"github.com/docket-dev/docket/internal/paging"
)

// Filter selects runs for [Client.List]. Project is required.
type Filter struct {
	Project string
	// Before continues a listing: only runs with a smaller id. Pass the last
	// id of one page to get the next.
	Before int64
	// Limit is the page size, 1..[db.MaxPage]. Defaults to [db.DefaultPage].
	Limit int
}

// List returns a page of the runs of f.Project, newest first, each as
// [Client.Get] reads it. An actor that may not read the project's runs
// gets an empty list, not an error. It refuses an empty project, a limit
// outside 1..[db.MaxPage] or a negative Before with
// [db.ErrInvalidArgument]. It is one statement: the page agrees with
// itself.
func (c *Client) List(ctx context.Context, f Filter) ([]Run, error) {
	const op = "plan.list"
	limit, err := paging.For(op).Project("runs", f.Project).Cursor("before", f.Before).Limit(f.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := queries.RunList(ctx, c.reads.DB, f.Project, f.Before, limit, string(c.actor))
	return paging.Collect(rows, err, fromListRow, op, "project", f.Project)
}

// fromListRow is a run of a list. A list's row has RunGet's columns: were
// they ever to differ, this conversion would not compile.
func fromListRow(r *dbsqlc.RunListRow) Run { return fromRow((*dbsqlc.RunGetRow)(r)) }
