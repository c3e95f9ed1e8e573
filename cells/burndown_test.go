//go:build unix

package cells_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cells"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/pgserver"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
	"github.com/docket-dev/docket/worker"
)

// perProject is how many jobs each project burns down.
const perProject = 300

// Two cells, each a PostgreSQL cluster of its own, each burn down their own
// projects' jobs with a worker of their own: every job runs once, in its
// cell, by that cell's worker; a read across both names each row's cell.
func TestBurnDownInTwoCells(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	t0 := time.Now()
	clock := db.NewFakeClock(time.Now())
	layout := map[string][]string{"a": {"acme"}, "b": {"globex", "initech"}}
	cfg := cells.Config{Cells: map[string]cells.Cell{}, Projects: map[string]string{}}
	for cell, names := range layout {
		cfg.Cells[cell] = cells.Cell{Pool: startCell(t, clock, names...)}
		for _, p := range names {
			cfg.Projects[p] = cell
		}
	}
	m, err := cells.New(ctx, cfg)
	require.NoError(t, err)
	t.Logf("cells started: %v", time.Since(t0))

	kind := jobs.MustKind[struct{ N int }]("cells.work", 1)
	for p := range cfg.Projects {
		jc, err := m.Jobs(jobs.Config{Project: p, Actor: app, Clock: clock})
		require.NoError(t, err)
		specs := make([]jobs.Spec, perProject)
		for i := range specs {
			specs[i], err = kind.Spec(struct{ N int }{i})
			require.NoError(t, err)
		}
		_, err = jc.EnqueueMany(ctx, specs)
		require.NoError(t, err)
	}

	// A worker per cell; each handler notes which cell's worker ran which
	// project's job, and each success is a signal.
	var mu sync.Mutex
	ran := map[string]map[string]int{} // cell → project → jobs run
	succeeded := make(chan string, 3*perProject)
	for _, cell := range m.Cells() {
		reg := worker.NewRegistry()
		require.NoError(t, worker.Handle(reg, kind, func(_ context.Context, j *jobs.Typed[struct{ N int }]) error {
			mu.Lock()
			defer mu.Unlock()
			if ran[cell] == nil {
				ran[cell] = map[string]int{}
			}
			ran[cell][j.Project]++
			return nil
		}))
		w, err := m.Worker(cell, worker.Config{
			Actor: app, Registry: reg, Clock: clock, Deployment: "cell-" + cell, Logger: testkit.Logger,
			Queues: map[string]int{"default": 50}, SweepEvery: time.Hour,
			OnEvent: func(ev worker.Event) {
				if ev.Type == worker.EventSucceeded {
					succeeded <- cell
				}
			},
		})
		require.NoError(t, err)
		testkit.Start(t, w)
	}
	want := map[string]int{"a": perProject, "b": 2 * perProject}
	got := map[string]int{}
	deadline := time.After(2 * time.Minute)
	for got["a"]+got["b"] < 3*perProject {
		select {
		case cell := <-succeeded:
			got[cell]++
		case <-deadline:
			t.Fatalf("burn-down: %v of %v succeeded", got, want)
		}
	}
	require.Equal(t, want, got)
	t.Logf("burnt down: %v", time.Since(t0))
	mu.Lock()
	require.Equal(t, map[string]map[string]int{
		"a": {"acme": perProject},
		"b": {"globex": perProject, "initech": perProject},
	}, ran, "each cell's worker ran its own cell's jobs, each once")
	mu.Unlock()

	reader := jobs.Config{Actor: app, Clock: clock}
	census, err := m.Census(ctx, reader, 0)
	require.NoError(t, err)
	var counted []string
	for _, c := range census {
		counted = append(counted, fmt.Sprintf("%s/%s %v", c.Cell, c.Project, c.Cells))
	}
	require.Equal(t, []string{
		fmt.Sprintf("a/acme [{default succeeded %d}]", perProject),
		fmt.Sprintf("b/globex [{default succeeded %d}]", perProject),
		fmt.Sprintf("b/initech [{default succeeded %d}]", perProject),
	}, counted)
	rows, err := m.List(ctx, reader, jobs.Filter{Limit: 2})
	require.NoError(t, err)
	var listed []string
	for _, r := range rows {
		require.Equal(t, jobs.Succeeded, r.State)
		listed = append(listed, r.Cell+"/"+r.Project)
	}
	require.Equal(t, []string{"a/acme", "a/acme", "b/globex", "b/globex", "b/initech", "b/initech"}, listed)
}

// startCell starts a PostgreSQL cluster of t's own (skipping t without
// local server binaries), migrates docket into a database on it with
// projects names, app's grants there, and returns app's worker login: a
// cell.
func startCell(t *testing.T, clock *db.FakeClock, names ...string) *pgxpool.Pool {
	t.Helper()
	ctx := t.Context()
	cluster, err := pgserver.StartCluster(ctx)
	if errors.Is(err, pgserver.ErrNoLocalBinaries) {
		t.Skip("two cells need PostgreSQL clusters of their own, from local server binaries, and found none: " + err.Error())
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cluster.Close(context.Background())) })
	admin, err := pgx.Connect(ctx, cluster.AdminURL())
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE DATABASE docket_cell")
	require.NoError(t, errors.Join(err, admin.Close(ctx)))
	url, err := cluster.URL("docket_cell")
	require.NoError(t, err)
	owner, err := db.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(owner.Close)
	require.NoError(t, db.Migrate(ctx, owner))

	pc, err := projects.NewClient(owner, projects.Config{Actor: ana, Clock: clock})
	require.NoError(t, err)
	env := testkit.Env{Pool: owner, Clock: clock, Admin: ana}
	for _, p := range names {
		_, err = pc.Create(ctx, p)
		require.NoError(t, err)
		env.Allow(t, grantsOn(p)...)
	}
	return env.WorkerLogin(t, app).Pool
}
