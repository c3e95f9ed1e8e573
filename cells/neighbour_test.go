//go:build unix

package cells_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cells"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// measureEnv turns on TestWhatACellCostsItsNeighbour and says how many
// jobs each cell burns down in each round.
const measureEnv = "DOCKET_CELLS_MEASURE"

// TestWhatACellCostsItsNeighbour measures what a second cell on the same
// machine costs the first: cell a burns down its jobs alone, then a and b
// burn down as many each at once, and then a alone again, each round a
// fresh backlog, each cell a PostgreSQL cluster of its own with a worker
// of 200 handlers. It logs each round's rate and the ratio of a's rate
// beside b to its rate alone. It runs only when DOCKET_CELLS_MEASURE names
// the jobs per cell per round:
//
//	DOCKET_CELLS_MEASURE=50000 go test -count=1 -run TestWhatACellCostsItsNeighbour -v ./cells/
func TestWhatACellCostsItsNeighbour(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(measureEnv))
	if n <= 0 {
		t.Skip(measureEnv + " is not set: a measurement, not a check")
	}
	ctx := t.Context()
	clock := db.NewFakeClock(time.Now())
	a, b := startCell(t, clock, "acme"), startCell(t, clock, "globex")
	m, err := cells.New(ctx, cells.Config{
		Cells:    map[string]cells.Cell{"a": {Pool: a.app}, "b": {Pool: b.app}},
		Projects: map[string]string{"acme": "a", "globex": "b"},
	})
	require.NoError(t, err)
	kind := jobs.MustKind[struct{}]("cells.noop", 1)
	enqueue := func(project string) {
		jc, err := m.Jobs(jobs.Config{Project: project, Actor: app, Clock: clock})
		require.NoError(t, err)
		spec, err := kind.Spec(struct{}{})
		require.NoError(t, err)
		for left := n; left > 0; left -= 5000 {
			specs := make([]jobs.Spec, min(left, 5000))
			for i := range specs {
				specs[i] = spec
			}
			_, err = jc.EnqueueMany(ctx, specs)
			require.NoError(t, err)
		}
	}
	// burn runs a worker on each named cell until each has succeeded n
	// jobs, and returns each cell's rate in jobs per second.
	burn := func(names ...string) map[string]float64 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		rates := map[string]float64{}
		for _, name := range names {
			reg := worker.NewRegistry()
			require.NoError(t, worker.Handle(reg, kind, func(context.Context, *jobs.Typed[struct{}]) error { return nil }))
			done := make(chan struct{})
			var count int
			var cmu sync.Mutex
			w, err := m.Worker(name, worker.Config{
				Actor: app, Registry: reg, Clock: clock, Deployment: "measure-" + name, Logger: testkit.Logger,
				Queues: map[string]int{jobs.DefaultQueue: 200}, SweepEvery: time.Hour,
				OnEvent: func(ev worker.Event) {
					if ev.Type != worker.EventSucceeded {
						return
					}
					cmu.Lock()
					defer cmu.Unlock()
					if count++; count == n {
						close(done)
					}
				},
			})
			require.NoError(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				began := time.Now()
				if err := w.Start(ctx); err != nil {
					t.Error(err)
					return
				}
				select {
				case <-done:
				case <-time.After(30 * time.Minute):
					t.Errorf("cell %s: not burnt down in 30 minutes", name)
				}
				took := time.Since(began)
				sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_ = w.Stop(sctx)
				mu.Lock()
				rates[name] = float64(n) / took.Seconds()
				mu.Unlock()
			}()
		}
		wg.Wait()
		return rates
	}

	enqueue("acme")
	alone := burn("a")["a"]
	enqueue("acme")
	enqueue("globex")
	both := burn("a", "b")
	enqueue("acme")
	again := burn("a")["a"]
	t.Logf("%d jobs a cell a round, 200 handlers a cell, one machine:", n)
	t.Logf("  a alone: %.0f jobs/s", alone)
	t.Logf("  a and b at once: a %.0f jobs/s, b %.0f jobs/s, together %.0f jobs/s", both["a"], both["b"], both["a"]+both["b"])
	t.Logf("  a alone again: %.0f jobs/s", again)
	t.Logf("  a beside b / a alone (mean of the two alone rounds): %.2f", both["a"]/((alone+again)/2))
}
