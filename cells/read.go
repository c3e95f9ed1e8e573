package cells

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// Job is a job as read from its cell.
type Job struct {
	// Cell is the cell the job was read from: a job id names a job within
	// one cell only.
	Cell string
	// Lag is how far behind the cell's primary the read may have been: the
	// replica's, asked before the read, or the primary's (none).
	Lag db.Lag
	jobs.Job
}

// Census is a project's census as counted in its cell.
type Census struct {
	Cell string
	Lag  db.Lag
	jobs.Census
}

// CellError is a cell's failure in a read across cells: the rows of the
// other cells are returned beside it.
type CellError struct {
	Cell string
	Err  error
}

func (e *CellError) Error() string { return "cell " + e.Cell + ": " + e.Err.Error() }

// Unwrap returns the cell's error.
func (e *CellError) Unwrap() error { return e.Err }

// List returns the jobs matching f of each of projects (every project of
// the map when none is named), in the order of projects, each project's
// newest first, as [jobs.Client.List] reads them in the project's cell,
// each row naming its cell and the lag it was read at. cfg configures each
// project's client (Actor, Clock, telemetry); the map sets its Project and
// Replica. The cells are read at once, each on its replica if it has one.
//
// f.Limit bounds each project's page. f.Before is a job id, which means
// something in one cell only: it refuses f.Before with more than one
// project, with [db.ErrInvalidArgument], and a project the map does not
// name, or a cfg that sets Project or Replica, as [Map.Jobs] does. A cell
// that fails is a [*CellError] (errors.As), one for each, joined; the rows
// of the cells that answered are returned beside it.
func (m *Map) List(ctx context.Context, cfg jobs.Config, f jobs.Filter, projects ...string) ([]Job, error) {
	const op = "cells.list"
	if f.Before != 0 && len(projects) != 1 {
		return nil, db.Refuse(db.ErrInvalidArgument, op, "Before is a job id of one cell: page one project at a time")
	}
	per, err := acrossCells(ctx, m, op, cfg, projects, func(ctx context.Context, c *jobs.Client, cell string, lag db.Lag) ([]Job, error) {
		page, err := c.List(ctx, f)
		out := make([]Job, len(page))
		for i, j := range page {
			out[i] = Job{Cell: cell, Lag: lag, Job: j}
		}
		return out, err
	})
	return flatten(per), err
}

// Census counts the jobs of each of projects (every project of the map
// when none is named) by queue and state, as [jobs.Client.Census] counts
// them in the project's cell, at most perState of each state (0 for
// jobs.DefaultCensusPerState); each count names its cell and the lag it
// was read at, in the order of projects. A total across cells adds counts
// taken at slightly different moments. cfg and the refusals are as for
// [Map.List].
func (m *Map) Census(ctx context.Context, cfg jobs.Config, perState int, projects ...string) ([]Census, error) {
	per, err := acrossCells(ctx, m, "cells.census", cfg, projects, func(ctx context.Context, c *jobs.Client, cell string, lag db.Lag) ([]Census, error) {
		n, err := c.Census(ctx, perState)
		if err != nil {
			return nil, err
		}
		return []Census{{Cell: cell, Lag: lag, Census: n}}, nil
	})
	return flatten(per), err
}

// acrossCells reads each of projects (every project of the map when none)
// with read, on a client the map makes from cfg, reading the cells at once:
// in each cell, it asks the lag first, then reads the cell's projects one
// after another. It returns the rows by project, in the order of projects,
// and a *CellError for each cell that failed, joined.
func acrossCells[T any](ctx context.Context, m *Map, op string, cfg jobs.Config, projects []string,
	read func(ctx context.Context, c *jobs.Client, cell string, lag db.Lag) ([]T, error)) ([][]T, error) {
	if cfg.Project != "" {
		return nil, db.Refuse(db.ErrInvalidArgument, op, "the config sets a Project: name the projects to read instead")
	}
	if len(projects) == 0 {
		for _, cell := range m.names {
			projects = append(projects, m.byCell[cell]...)
		}
	}
	clients := make([]*jobs.Client, len(projects))
	byCell := map[string][]int{} // cell → indexes into projects
	for i, p := range projects {
		cfg.Project = p
		c, err := m.Jobs(cfg)
		if err != nil {
			return nil, err
		}
		clients[i] = c
		cell := m.projects[p]
		byCell[cell] = append(byCell[cell], i)
	}
	out := make([][]T, len(projects))
	errs := make([]error, len(m.names))
	var wg sync.WaitGroup
	for n, cell := range m.names {
		idx := byCell[cell]
		if len(idx) == 0 {
			continue
		}
		wg.Go(func() {
			lag, err := clients[idx[0]].ReplicaLag(ctx)
			if err != nil {
				errs[n] = &CellError{Cell: cell, Err: err}
				return
			}
			for _, i := range idx {
				rows, err := read(ctx, clients[i], cell, lag)
				if err != nil {
					errs[n] = &CellError{Cell: cell, Err: fmt.Errorf("project %s: %w", projects[i], err)}
					for _, i := range idx {
						out[i] = nil // the cell's rows go together, or not at all
					}
					return
				}
				out[i] = rows
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// flatten joins the rows of every project, in order.
func flatten[T any](per [][]T) []T {
	return slices.Concat(per...)
}
