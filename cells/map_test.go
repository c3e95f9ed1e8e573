package cells_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cells"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
	"github.com/docket-dev/docket/worker"
)

// A map names its cells and their projects, and says where each project is.
func TestMapSaysWhereEachProjectIs(t *testing.T) {
	t.Parallel()
	m := setupTwo(t).newMap(t)
	require.Equal(t, []string{"a", "b"}, m.Cells())
	require.Equal(t, []string{"acme"}, m.Projects("a"))
	require.Equal(t, []string{"globex", "initech"}, m.Projects("b"))
	require.Empty(t, m.Projects("c"))
	cell, err := m.Cell("globex")
	require.NoError(t, err)
	require.Equal(t, "b", cell)
	_, err = m.Cell("umbrella")
	require.ErrorIs(t, err, db.ErrNotFound)
}

// A config the map cannot route by is refused at construction, before it
// reads a cell.
func TestNewRefusesAMalformedConfig(t *testing.T) {
	t.Parallel()
	c := setupTwo(t)
	for name, edit := range map[string]func(cfg *cells.Config){
		"no cells":         func(cfg *cells.Config) { cfg.Cells = nil },
		"a malformed name": func(cfg *cells.Config) { cfg.Cells["Cell A"] = cfg.Cells["a"]; delete(cfg.Cells, "a") },
		"no pool":          func(cfg *cells.Config) { cfg.Cells["c"] = cells.Cell{} },
		"one pool twice":   func(cfg *cells.Config) { cfg.Cells["c"] = cfg.Cells["a"] },
		"an unknown cell":  func(cfg *cells.Config) { cfg.Projects["acme"] = "c" },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := c.config()
			edit(&cfg)
			_, err := cells.New(t.Context(), cfg)
			require.ErrorIs(t, err, db.ErrInvalidArgument)
		})
	}
}

// Each project of a map is in its cell's docket.projects and no other's:
// mapping a project to a cell that does not have it is refused, and so is a
// project two cells have. Projects are never deleted, so a project created
// in a cell cannot be mapped elsewhere.
func TestNewChecksEachProjectIsInExactlyOneCell(t *testing.T) {
	t.Parallel()
	c := setupTwo(t)
	ctx := t.Context()

	cfg := c.config()
	cfg.Projects["acme"] = "b"
	_, err := cells.New(ctx, cfg)
	require.ErrorIs(t, err, db.ErrNotFound)
	require.ErrorContains(t, err, "acme (mapped to cell b, found in cell a)")

	cfg = c.config()
	cfg.Projects["umbrella"] = "a"
	_, err = cells.New(ctx, cfg)
	require.ErrorIs(t, err, db.ErrNotFound)
	require.ErrorContains(t, err, "umbrella (cell a)")

	// acme created in cell b too: it is in two cells.
	pc, err := projects.NewClient(c.b.Pool, projects.Config{Actor: ana, Clock: c.b.Clock})
	require.NoError(t, err)
	_, err = pc.Create(ctx, "acme")
	require.NoError(t, err)
	c.b.Allow(t, grantsOn("acme")...)
	_, err = cells.New(ctx, c.config())
	require.ErrorIs(t, err, db.ErrAlreadyExists)
	require.ErrorContains(t, err, "acme (cells a and b)")
}

// Clients are made on their project's cell: a job enqueued for acme is in
// cell a's database, one for globex in cell b's. A project the map does not
// name has no client, nor has a config that sets its own replica.
func TestClientsRouteByProject(t *testing.T) {
	t.Parallel()
	c := setupTwo(t)
	m := c.newMap(t)
	ctx := t.Context()
	spec := jobs.Spec{Kind: "billing.invoice", Payload: []byte(`{}`)}

	for project, home := range map[string]string{"acme": "a", "globex": "b"} {
		jc, err := m.Jobs(jobs.Config{Project: project, Actor: app, Clock: c.a.Clock})
		require.NoError(t, err)
		e, err := jc.Enqueue(ctx, spec)
		require.NoError(t, err)
		for cell, pool := range map[string]db.DBTX{"a": c.a.Pool, "b": c.b.Pool} {
			var n int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM docket.jobs WHERE project = $1`, project).Scan(&n))
			if cell == home {
				require.Equal(t, 1, n, "%s's job is in cell %s", project, cell)
			} else {
				require.Zero(t, n, "%s's job is not in cell %s", project, cell)
			}
		}
		require.Equal(t, project, e.Job.Project)
	}

	_, err := m.Jobs(jobs.Config{Project: "umbrella", Actor: app})
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = m.Jobs(jobs.Config{Actor: app})
	require.ErrorIs(t, err, db.ErrNotFound, "a client by job id reads one cell: name its project")
	_, err = m.Jobs(jobs.Config{Project: "acme", Actor: app, Replica: c.b.API})
	require.ErrorIs(t, err, db.ErrInvalidArgument)

	pool, err := m.Pool("globex")
	require.NoError(t, err)
	require.Same(t, c.b.API, pool)

	_, err = m.Worker("c", worker.Config{Actor: app})
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = m.Worker("a", worker.Config{Actor: app, Project: "globex"})
	require.ErrorIs(t, err, db.ErrInvalidArgument, "a worker enqueues into its own cell")
}

// A read across cells names each row's cell and the lag it was read at; a
// cell that does not answer holds up its own rows only.
func TestListAcrossCellsNamesTheCell(t *testing.T) {
	t.Parallel()
	c := setupTwo(t)
	ctx := t.Context()
	// Cell b on a pool of its own, to close it.
	bPool, err := db.OpenConfig(ctx, c.b.API.Config().Copy())
	require.NoError(t, err)
	cfg := c.config()
	cfg.Cells["b"] = cells.Cell{Pool: bPool}
	m, err := cells.New(ctx, cfg)
	require.NoError(t, err)
	for _, project := range []string{"acme", "globex", "initech", "globex"} {
		jc, err := m.Jobs(jobs.Config{Project: project, Actor: app, Clock: c.a.Clock})
		require.NoError(t, err)
		_, err = jc.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: []byte(`{}`)})
		require.NoError(t, err)
	}

	reader := jobs.Config{Actor: app, Clock: c.a.Clock}
	rows, err := m.List(ctx, reader, jobs.Filter{})
	require.NoError(t, err)
	var where []string
	for _, r := range rows {
		where = append(where, r.Cell+"/"+r.Project)
		require.Equal(t, db.Lag{At: c.a.Clock.Now()}, r.Lag, "no replica: read on the primary")
	}
	require.Equal(t, []string{"a/acme", "b/globex", "b/globex", "b/initech"}, where, "in the map's order of projects")

	census, err := m.Census(ctx, reader, 0, "initech", "acme")
	require.NoError(t, err)
	require.Len(t, census, 2)
	require.Equal(t, "b", census[0].Cell)
	require.Equal(t, "initech", census[0].Project)
	require.Equal(t, []jobs.CensusCell{{Queue: "default", State: jobs.Queued, Jobs: 1}}, census[0].Cells)
	require.Equal(t, "a", census[1].Cell)

	_, err = m.List(ctx, reader, jobs.Filter{Before: 10})
	require.ErrorIs(t, err, db.ErrInvalidArgument, "a job id pages one project")
	_, err = m.List(ctx, jobs.Config{Project: "acme", Actor: app}, jobs.Filter{})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = m.List(ctx, reader, jobs.Filter{}, "umbrella")
	require.ErrorIs(t, err, db.ErrNotFound)

	bPool.Close()
	rows, err = m.List(ctx, reader, jobs.Filter{})
	var cellErr *cells.CellError
	require.ErrorAs(t, err, &cellErr)
	require.Equal(t, "b", cellErr.Cell)
	require.Len(t, rows, 1, "cell a's rows, beside cell b's failure")
	require.Equal(t, "a", rows[0].Cell)
}
