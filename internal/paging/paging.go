// Package paging checks the filters of docket's list operations in one
// way: the page size (0 takes the default, else 1..[db.MaxPage]), an id
// cursor, and a filter value that must be one of a known set. Each check
// refuses with [db.ErrInvalidArgument] under the caller's operation name,
// so every package's lists refuse alike.
package paging

import (
	"fmt"
	"slices"

	"github.com/docket-dev/docket/db"
)

// Limit returns the page size a list asks for: [db.DefaultPage] for 0, else
// limit itself. It refuses a limit outside 1..[db.MaxPage].
func Limit(op string, limit int) (int32, error) {
	if limit == 0 {
		return db.DefaultPage, nil
	}
	if limit < 1 || limit > db.MaxPage {
		return 0, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("limit %d is outside 1..%d", limit, db.MaxPage))
	}
	return int32(limit), nil
}

// Cursor refuses a negative id cursor (After or Before), named what.
func Cursor(op, what string, id int64) error {
	if id < 0 {
		return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("%s %d is negative", what, id))
	}
	return nil
}

// OneOf refuses a filter value v, named what, that is neither empty (no
// filter) nor one of known.
func OneOf[T ~string](op, what string, v T, known []T) error {
	if v != "" && !slices.Contains(known, v) {
		return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("unknown %s %q", what, string(v)))
	}
	return nil
}

// Project refuses an empty project for a list that is per project; what
// names the listed things ("cases", "lanes").
func Project(op, what, project string) error {
	if project == "" {
		return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("project is empty: %s are listed per project", what))
	}
	return nil
}
