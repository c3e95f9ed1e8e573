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
// Mid-run cell b's server is stopped with -m immediate: cell a's burn-down,
// held until then, runs to its end while b is down, and b's finishes once
// b is back, with every job's history verifying in both.
func TestBurnDownInTwoCells(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	t0 := time.Now()
	clock := db.NewFakeClock(time.Now())
	layout := map[string][]string{"a": {"acme"}, "b": {"globex", "initech"}}
	cfg := cells.Config{Cells: map[string]cells.Cell{}, Projects: map[string]string{}}
	started := map[string]cell{}
	for name, names := range layout {
		c := startCell(t, clock, names...)
		started[name] = c
		cfg.Cells[name] = cells.Cell{Pool: c.app}
		for _, p := range names {
			cfg.Projects[p] = name
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
	// project's job, and each success is a signal. Cell a's handlers wait
	// until cell b is down, so that a's burn-down runs while b's cannot.
	var mu sync.Mutex
	ran := map[string]map[string]int{} // cell → project → jobs run
	succeeded := make(chan string, 3*perProject)
	bDown := make(chan struct{})
	for _, name := range m.Cells() {
		reg := worker.NewRegistry()
		require.NoError(t, worker.Handle(reg, kind, func(ctx context.Context, j *jobs.Typed[struct{ N int }]) error {
			if name == "a" {
				select {
				case <-bDown:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if ran[name] == nil {
				ran[name] = map[string]int{}
			}
			ran[name][j.Project]++
			return nil
		}))
		w, err := m.Worker(name, worker.Config{
			Actor: app, Registry: reg, Clock: clock, Deployment: "cell-" + name, Logger: testkit.Logger,
			Queues: map[string]int{"default": 50}, SweepEvery: time.Hour,
			OnEvent: func(ev worker.Event) {
				if ev.Type == worker.EventSucceeded {
					succeeded <- name
				}
			},
		})
		require.NoError(t, err)
		testkit.Start(t, w)
	}
	want := map[string]int{"a": perProject, "b": 2 * perProject}
	got := map[string]int{}
	await := func(what string, done func() bool) {
		t.Helper()
		deadline := time.After(2 * time.Minute)
		for !done() {
			select {
			case name := <-succeeded:
				got[name]++
			case <-deadline:
				t.Fatalf("burn-down, %s: %v of %v succeeded", what, got, want)
			}
		}
	}

	// b stops mid-run, as a crash would stop it.
	await("b under way", func() bool { return got["b"] >= perProject/2 })
	require.NoError(t, started["b"].cluster.Stop(ctx, pgserver.ImmediateShutdown))
	stoppedAt := got["b"]
	require.Zero(t, got["a"], "a's handlers waited for b to stop")
	close(bDown)
	await("a while b is down", func() bool { return got["a"] == perProject })
	require.False(t, started["b"].cluster.Running())
	t.Logf("a burnt down while b was down: %v; b had %d of %d", time.Since(t0), stoppedAt, want["b"])

	require.NoError(t, started["b"].cluster.Start(ctx))
	// The owner's connections died with b's server: drop them, so the
	// checks below do not take one the pool, idle under a second, would
	// hand out unpinged.
	started["b"].owner.Reset()
	await("b after its restart", func() bool { return got["b"] == want["b"] })
	require.Equal(t, want, got)
	t.Logf("burnt down: %v", time.Since(t0))
	mu.Lock()
	require.Equal(t, map[string]map[string]int{
		"a": {"acme": perProject},
		"b": {"globex": perProject, "initech": perProject},
	}, ran, "each cell's worker ran its own cell's jobs, each once")
	mu.Unlock()
	for _, name := range m.Cells() {
		var unverified []string
		rows, err := started[name].owner.Query(ctx, `
			SELECT format('job %s: %s (event %s)', j.id, v.problem, v.bad_seq)
			FROM docket.jobs j CROSS JOIN LATERAL docket.job_history_verify(j.id) v
			WHERE NOT v.ok ORDER BY j.id`)
		require.NoError(t, err)
		unverified, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Empty(t, unverified, "cell %s: every job's history verifies", name)
	}

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

// cell is a cell as the test started it.
type cell struct {
	cluster *pgserver.Cluster
	owner   *pgxpool.Pool // the schema's owner, to look
	app     *pgxpool.Pool // app's worker login: the cell's pool
}

// startCell starts a PostgreSQL cluster of t's own (skipping t without
// local server binaries), migrates docket into a database on it with
// projects names and app's grants there: a cell.
func startCell(t *testing.T, clock *db.FakeClock, names ...string) cell {
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
	return cell{cluster: cluster, owner: owner, app: env.WorkerLogin(t, app).Pool}
}
