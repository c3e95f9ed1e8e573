package cells

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/projects"
)

// Cell is one docket database.
type Cell struct {
	// Pool is the cell's primary: every write, every worker of the cell and
	// every read that must see its own writes go here. A *pgxpool.Pool, as
	// a worker's River driver needs one. Required.
	Pool *pgxpool.Pool
	// Replica, when not nil, is a pool on a hot standby of the cell's
	// primary, read-only: the clients the map makes send it their reads
	// that tolerate lag (see jobs.Config.Replica and docs/cells.md).
	Replica *pgxpool.Pool
}

// Config configures a [Map].
type Config struct {
	// Cells are the cells by name: 1-63 characters of [a-z0-9._-],
	// starting with a letter or digit. At least one.
	Cells map[string]Cell
	// Projects maps each project to the name of its cell, one of Cells. A
	// project the map does not name has no cell: the map routes nothing to
	// it.
	Projects map[string]string
}

// Map says which cell each project lives in, and makes the clients and
// workers that act on a project in its cell. It holds no connection of its
// own and is safe for concurrent use.
type Map struct {
	cells    map[string]Cell
	projects map[string]string   // project → cell
	byCell   map[string][]string // cell → its projects, sorted
	names    []string            // the cells, sorted
}

var cellPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// New checks cfg and returns its map. It refuses, with
// [db.ErrInvalidArgument], a config without cells, a malformed cell name, a
// cell without a pool, two cells on one pool, and a project mapped to a
// cell the config does not have. It then reads each cell's docket.projects
// and refuses, with [db.ErrNotFound], a project its cell does not have
// (or whose login may not see it), and, with [db.ErrAlreadyExists], a
// project another cell has too; a cell it cannot read is refused with the
// error of the read. The refusals name the projects and cells, every one
// found.
func New(ctx context.Context, cfg Config) (*Map, error) {
	const op = "cells.new"
	if len(cfg.Cells) == 0 {
		return nil, db.Refuse(db.ErrInvalidArgument, op, "no cells: a map needs at least one")
	}
	m := &Map{cells: maps.Clone(cfg.Cells), projects: maps.Clone(cfg.Projects), byCell: map[string][]string{}}
	m.names = slices.Sorted(maps.Keys(m.cells))
	pools := map[*pgxpool.Pool]string{}
	for _, name := range m.names {
		c := m.cells[name]
		switch {
		case !cellPattern.MatchString(name):
			return nil, db.Refuse(db.ErrInvalidArgument, op,
				fmt.Sprintf("invalid cell name %q: want 1-63 characters of [a-z0-9._-], starting with a letter or digit", name))
		case c.Pool == nil:
			return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("cell %s has no pool", name))
		case pools[c.Pool] != "":
			return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("cells %s and %s are on one pool: a cell is a database of its own", pools[c.Pool], name))
		}
		pools[c.Pool] = name
	}
	for _, p := range slices.Sorted(maps.Keys(m.projects)) {
		cell := m.projects[p]
		if _, ok := m.cells[cell]; !ok {
			return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("project %s is mapped to cell %q, which the map does not have", p, cell))
		}
		m.byCell[cell] = append(m.byCell[cell], p)
	}
	if err := m.check(ctx, op); err != nil {
		return nil, err
	}
	return m, nil
}

// checker is the actor the map reads docket.projects as. Which projects a
// read of docket.projects returns is decided by the session's login alone
// (row-level security), not by the client's actor, which it needs only to
// be made.
const checker access.Actor = "svc:docket-cells"

// check reads every cell's docket.projects and refuses a project of the map
// that its cell does not have, or that another cell has too.
func (m *Map) check(ctx context.Context, op string) error {
	where := map[string][]string{} // project of the map → the cells that have it
	for _, name := range m.names {
		have, err := m.cellProjects(ctx, name)
		if err != nil {
			return fmt.Errorf("%s: cell %s: %w", op, name, err)
		}
		for p := range have {
			if _, ok := m.projects[p]; ok {
				where[p] = append(where[p], name)
			}
		}
	}
	var missing, twice []string
	for _, p := range slices.Sorted(maps.Keys(m.projects)) {
		cell, in := m.projects[p], where[p]
		switch {
		case !slices.Contains(in, cell) && len(in) > 0:
			missing = append(missing, fmt.Sprintf("%s (mapped to cell %s, found in cell %s)", p, cell, strings.Join(in, " and ")))
		case !slices.Contains(in, cell):
			missing = append(missing, fmt.Sprintf("%s (cell %s)", p, cell))
		case len(in) > 1:
			twice = append(twice, fmt.Sprintf("%s (cells %s)", p, strings.Join(in, " and ")))
		}
	}
	var errs []error
	if len(missing) > 0 {
		errs = append(errs, db.Refuse(db.ErrNotFound, op,
			"not in its cell's docket.projects, or not visible to the cell's login: "+strings.Join(missing, ", ")))
	}
	if len(twice) > 0 {
		errs = append(errs, db.Refuse(db.ErrAlreadyExists, op,
			"a project lives in exactly one cell, and these are in more: "+strings.Join(twice, ", ")))
	}
	return errors.Join(errs...)
}

// cellProjects returns the projects of cell name's docket.projects that its
// pool's login may see.
func (m *Map) cellProjects(ctx context.Context, name string) (map[string]bool, error) {
	pc, err := projects.NewClient(m.cells[name].Pool, projects.Config{Actor: checker})
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for after := ""; ; {
		page, err := pc.List(ctx, projects.Filter{After: after, Limit: db.MaxPage})
		if err != nil {
			return nil, err
		}
		for _, p := range page {
			have[p.Name] = true
		}
		if len(page) < db.MaxPage {
			return have, nil
		}
		after = page[len(page)-1].Name
	}
}

// Cells returns the names of the map's cells, sorted.
func (m *Map) Cells() []string { return slices.Clone(m.names) }

// Projects returns the projects the map puts in cell, sorted: none for a
// cell it does not have.
func (m *Map) Projects(cell string) []string { return slices.Clone(m.byCell[cell]) }

// Cell returns the name of project's cell, or [db.ErrNotFound] for a
// project the map does not name.
func (m *Map) Cell(project string) (string, error) {
	cell, ok := m.projects[project]
	if !ok {
		return "", db.Refuse(db.ErrNotFound, "cells.cell", fmt.Sprintf("project %q is in no cell of the map", project))
	}
	return cell, nil
}

// Member returns cell name: its primary and replica, for a caller that
// acts on the cell as a whole (a console of the cell, say). It refuses a
// cell the map does not have with [db.ErrNotFound].
func (m *Map) Member(name string) (Cell, error) {
	c, ok := m.cells[name]
	if !ok {
		return Cell{}, db.Refuse(db.ErrNotFound, "cells.member", fmt.Sprintf("the map has no cell %q", name))
	}
	return c, nil
}

// Pool returns the primary of project's cell: where a caller begins the
// transaction it passes to an …Tx method of a client the map made for the
// project, its own writes beside docket's. It refuses a project the map
// does not name with [db.ErrNotFound].
func (m *Map) Pool(project string) (*pgxpool.Pool, error) {
	cell, err := m.Cell(project)
	if err != nil {
		return nil, err
	}
	return m.cells[cell].Pool, nil
}
