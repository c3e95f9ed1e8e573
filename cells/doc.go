// Package cells runs docket in several databases at once, each a cell:
// a whole docket (its schema, River's tables, its primary, and a replica if
// it has one) holding some of the projects. A [Map] says, explicitly, which
// cell each project lives in, and routes by project: the jobs, cases and
// plans clients it makes for a project run on that project's cell, and a
// worker it makes serves one cell.
//
//	m, err := cells.New(ctx, cells.Config{
//		Cells: map[string]cells.Cell{
//			"eu-1": {Pool: poolA, Replica: replicaA},
//			"eu-2": {Pool: poolB},
//		},
//		Projects: map[string]string{"acme": "eu-1", "globex": "eu-2"},
//	})
//	jc, err := m.Jobs(jobs.Config{Project: "acme", Actor: "svc:billing"}) // on eu-1
//	w, err := m.Worker("eu-2", worker.Config{Actor: "svc:billing", Registry: reg})
//
// # What a map guarantees
//
// Each project is in exactly one cell. [New] checks it against the cells
// themselves: every project of the map must be in its cell's
// docket.projects and in no other cell's, as far as each cell's login may
// see (row-level security shows a login the projects its principals hold a
// grant on, and operators every project). Projects are never deleted, so a
// project created in a cell stays there: mapping it to another cell is
// refused at construction, and moving a project with its work between cells
// is out of docket's scope (its histories, hash chains and prune records are
// in its cell).
//
// The check needs every cell to answer: [New] refuses while one cannot be
// read. A map holds no connection of its own, so once made it routes on
// whatever a cell does later; make it once, at start-up.
//
// No transaction spans two cells, and nothing here pretends to: the map
// has no Tx methods. A caller who enqueues in its own transaction begins
// it on the project's cell ([Map.Pool]), with its business tables in that
// cell's database; work in two cells commits in two transactions, one
// after the other, each on its own.
//
// Reads across cells ([Map.List], [Map.Census]) say which cell each row is
// from, and how far behind that cell's replica was when it was read
// ([db.Lag]); counts across cells are taken at slightly different moments.
// A cell that does not answer holds up its own rows only: the others' are
// returned beside a [*CellError] naming it.
//
// docs/cells.md has the configuration, the guarantees and what cells and
// replicas buy.
package cells
