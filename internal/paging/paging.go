// Package paging is how every docket list checks what it is asked for and
// hands back what it found. A list names its operation, then the parts of
// its filter, and ends with the page size:
//
//	limit, err := paging.For(op).Project("cases", f.Project).Cursor("after", f.After).
//		OneOf("status", paging.In(f.Status, Statuses)).Limit(f.Limit)
//
// The first part that fails refuses the list with [db.ErrInvalidArgument]
// under op, in the same words in every package; [Collect] then turns the
// query's rows into the package's own type, or its error into docket's.
package paging

import (
	"fmt"
	"slices"

	"github.com/docket-dev/docket/db"
)

// Check is a list's request being checked. Its methods record the first
// refusal and pass over the rest; [Check.Limit] reports it.
type Check struct {
	op  string
	err error
}

// For starts the checks of the list op.
func For(op string) *Check { return &Check{op: op} }

func (c *Check) refuse(format string, args ...any) *Check {
	if c.err == nil {
		c.err = db.Refuse(db.ErrInvalidArgument, c.op, fmt.Sprintf(format, args...))
	}
	return c
}

// Project refuses an empty project for a list that is per project; listed
// names what it lists ("cases", "lanes").
func (c *Check) Project(listed, project string) *Check {
	if project == "" {
		return c.refuse("project is empty: %s are listed per project", listed)
	}
	return c
}

// Cursor refuses a negative id cursor, named name ("after", "before").
func (c *Check) Cursor(name string, id int64) *Check {
	if id < 0 {
		return c.refuse("%s %d is negative", name, id)
	}
	return c
}

// Choice is a filter value and whether it is one the list knows; see [In].
type Choice struct {
	value string
	known bool
}

// In is the filter value v, known when it is empty (no filter) or one of
// known.
func In[T ~string](v T, known []T) Choice {
	return Choice{value: string(v), known: v == "" || slices.Contains(known, v)}
}

// OneOf refuses a filter value, named what, that the list does not know.
func (c *Check) OneOf(what string, v Choice) *Check {
	if !v.known {
		return c.refuse("unknown %s %q", what, v.value)
	}
	return c
}

// Limit ends the checks: it returns the page size the list asks for,
// [db.DefaultPage] for 0, else limit itself, or the first refusal. It
// refuses a limit outside 1..[db.MaxPage].
func (c *Check) Limit(limit int) (int32, error) {
	switch {
	case c.err != nil:
	case limit == 0:
		return db.DefaultPage, nil
	case limit < 1 || limit > db.MaxPage:
		c.refuse("limit %d is outside 1..%d", limit, db.MaxPage)
	default:
		return int32(limit), nil
	}
	return 0, c.err
}

// Collect is what a list returns from its query's rows and error: the rows
// turned into the package's own type by conv, or the error translated as
// docket's are, under op with ids.
func Collect[R, T any](rows []R, err error, conv func(R) T, op string, ids ...any) ([]T, error) {
	if err != nil {
		return nil, db.Translate(err, op, ids...)
	}
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = conv(r)
	}
	return out, nil
}
