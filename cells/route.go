package cells

import (
	"fmt"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/worker"
)

// Jobs returns a client of cfg.Project on the project's cell: its writes
// go to the cell's primary, its reads that tolerate lag to the cell's
// replica, if it has one. It refuses, with [db.ErrNotFound], a project the
// map does not name (an empty one among them: a client for work by job id
// reads one cell, and a job id means nothing across cells), and, with
// [db.ErrInvalidArgument], a cfg that sets its own Replica (the cell says
// where its reads go) or that jobs.NewClient refuses.
func (m *Map) Jobs(cfg jobs.Config) (*jobs.Client, error) {
	c, err := m.route("cells.jobs", cfg.Project, cfg.Replica)
	if err != nil {
		return nil, err
	}
	cfg.Replica = replicaOf(c)
	return jobs.NewClient(c.Pool, cfg)
}

// Cases returns a cases client on project's cell. A cases client is not of
// one project: it serves every project of the cell, and a case of a
// project in another cell is not there. It refuses as [Map.Jobs] does.
func (m *Map) Cases(project string, cfg cases.Config) (*cases.Client, error) {
	c, err := m.route("cells.cases", project, cfg.Replica)
	if err != nil {
		return nil, err
	}
	cfg.Replica = replicaOf(c)
	return cases.NewClient(c.Pool, cfg)
}

// Plans returns a plans client on project's cell, which, like a cases
// client, serves every project of the cell. It refuses as [Map.Jobs] does.
func (m *Map) Plans(project string, cfg plans.Config) (*plans.Client, error) {
	c, err := m.route("cells.plans", project, cfg.Replica)
	if err != nil {
		return nil, err
	}
	cfg.Replica = replicaOf(c)
	return plans.NewClient(c.Pool, cfg)
}

// Worker returns a worker on cell's primary: it claims and runs the jobs of
// the cell's projects where its actor holds job.claim, runs the cell's
// sweeps, and nothing of another cell. A deployment runs workers for every
// cell. It refuses, with [db.ErrNotFound], a cell the map does not have,
// and, with [db.ErrInvalidArgument], a cfg.Project (what the worker enqueues
// into) in another cell, or a cfg worker.NewClient refuses.
func (m *Map) Worker(cell string, cfg worker.Config) (*worker.Client, error) {
	const op = "cells.worker"
	c, ok := m.cells[cell]
	if !ok {
		return nil, db.Refuse(db.ErrNotFound, op, fmt.Sprintf("the map has no cell %q", cell))
	}
	if cfg.Project != "" && m.projects[cfg.Project] != cell {
		return nil, db.Refuse(db.ErrInvalidArgument, op,
			fmt.Sprintf("project %q is not in cell %s: a worker enqueues into a project of its own cell", cfg.Project, cell))
	}
	return worker.NewClient(c.Pool, cfg)
}

// route returns project's cell for operation op, refusing a project the map
// does not name and a replica the caller set.
func (m *Map) route(op, project string, replica db.Pool) (Cell, error) {
	if !db.IsNil(replica) {
		return Cell{}, db.Refuse(db.ErrInvalidArgument, op, "the config sets a Replica: the project's cell says where its reads go")
	}
	cell, err := m.Cell(project)
	if err != nil {
		return Cell{}, db.Refuse(db.ErrNotFound, op, fmt.Sprintf("project %q is in no cell of the map", project))
	}
	return m.cells[cell], nil
}

// replicaOf is c's replica as a client's Config takes it: nil, not a nil
// *pgxpool.Pool, when it has none.
func replicaOf(c Cell) db.Pool {
	if c.Replica == nil {
		return nil
	}
	return c.Replica
}
