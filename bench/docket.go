package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/projects"
	"github.com/docket-dev/docket/worker"
)

const (
	project              = "bench"
	admin   access.Actor = "user:ops"
	app     access.Actor = "svc:app"
	kind                 = "b.step"
)

// trace, set by BENCH_TRACE, prints W3's worker events as they happen.
var trace = os.Getenv("BENCH_TRACE") != ""

// stepArgs is what a step's job carries.
type stepArgs map[string]json.RawMessage

func chain() plans.Plan {
	return plans.Plan{Steps: []plans.Step{
		{ID: "a", Kind: kind, Args: []plans.Arg{}},
		{ID: "b", Kind: kind, After: []string{"a"}, Args: []plans.Arg{{Name: "n", Source: plans.StepPath("a", "n")}}},
		{ID: "c", Kind: kind, After: []string{"b"}, Args: []plans.Arg{{Name: "n", Source: plans.StepPath("b", "n")}}, Terminal: true},
	}}
}

func fan() plans.Plan {
	p := plans.Plan{Steps: []plans.Step{{ID: "root", Kind: kind, Args: []plans.Arg{}}}}
	var leaves []string
	for i := range 8 {
		id := fmt.Sprintf("leaf%d", i)
		leaves = append(leaves, id)
		p.Steps = append(p.Steps, plans.Step{ID: id, Kind: kind, After: []string{"root"}, Args: []plans.Arg{{Name: "n", Source: plans.StepPath("root", "n")}}})
	}
	p.Steps = append(p.Steps, plans.Step{ID: "join", Kind: kind, After: leaves, Args: []plans.Arg{}, Terminal: true})
	return p
}

// runDocket migrates a fresh database, logs in as an application, starts a
// worker with the handlers and runs the workloads through plans.Client.
func runDocket(ctx context.Context, ownerURL string, m *meter, want map[string]bool, prof *os.File) ([]result, error) {
	owner, err := db.Open(ctx, ownerURL)
	if err != nil {
		return nil, err
	}
	defer owner.Close()
	if err := db.Migrate(ctx, owner); err != nil {
		return nil, err
	}
	if *afterMigrate != "" {
		if _, err := owner.Exec(ctx, *afterMigrate); err != nil {
			return nil, err
		}
	}
	clock := db.SystemClock{}
	pc, err := projects.NewClient(owner, projects.Config{Actor: admin, Clock: clock})
	if err != nil {
		return nil, err
	}
	if _, err := pc.Create(ctx, project); err != nil {
		return nil, err
	}
	ac, err := access.NewClient(owner, access.Config{Actor: admin, Clock: clock})
	if err != nil {
		return nil, err
	}
	for _, c := range []access.Capability{access.PlanRun, access.JobCreate, access.JobClaim} {
		if _, err := ac.Allow(ctx, access.Grant{Principal: app, Project: project, Capability: c}); err != nil {
			return nil, err
		}
	}
	if _, err := owner.Exec(ctx, "CREATE ROLE bench_app LOGIN PASSWORD 'bench' IN ROLE docket_app, docket_worker"); err != nil {
		return nil, err
	}
	defer owner.Exec(context.Background(), "DROP OWNED BY bench_app; DROP ROLE bench_app")
	if _, err := ac.Bind(ctx, "bench_app", app); err != nil {
		return nil, err
	}
	u, err := url.Parse(ownerURL)
	if err != nil {
		return nil, err
	}
	u.User = url.UserPassword("bench_app", "bench")
	cfg, err := db.PoolConfig(u.String())
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(*handlers + 20)
	api, err := db.OpenConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer api.Close()

	pl, err := plans.NewClient(api, plans.Config{Actor: app, Clock: clock})
	if err != nil {
		return nil, err
	}
	reg := worker.NewRegistry()
	if err := worker.HandleResult(reg, jobs.MustKind[stepArgs](kind, 1), func(ctx context.Context, j *jobs.Typed[stepArgs]) (worker.Result, error) {
		return worker.Result{Value: json.RawMessage(`{"n": 1}`)}, nil
	}); err != nil {
		return nil, err
	}
	events := make(chan struct{}, 1)
	w, err := worker.NewClient(api, worker.Config{
		Actor: app, Registry: reg, Clock: clock, Deployment: "bench",
		Queues:       map[string]int{jobs.DefaultQueue: *handlers},
		Batch:        worker.Batching{Max: *batchMax},
		PollInterval: *pollEvery,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent: func(ev worker.Event) {
			if trace {
				fmt.Fprintf(os.Stderr, "%s event %v job %d %s\n", time.Now().Format("05.000000"), ev.Type, ev.JobID, ev.State)
			}
			select {
			case events <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = w.Stop(sctx)
	}()

	var out []result
	throughput := func(name string, p plans.Plan, n, steps int) error {
		var base int
		if err := owner.QueryRow(ctx, "SELECT count(*) FROM docket.runs").Scan(&base); err != nil {
			return err
		}
		before, err := m.start(ctx)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if err := startAll(ctx, pl, p, n); err != nil {
			return err
		}
		if trace {
			fmt.Fprintf(os.Stderr, "%s: %d runs started in %v\n", name, n, time.Since(t0))
		}
		if err := waitSucceeded(ctx, owner, base+n); err != nil {
			return err
		}
		x := result{Side: "docket", Workload: name, Runs: n, Steps: n * steps}
		if err := m.finish(ctx, before, &x, prof); err != nil {
			return err
		}
		out = append(out, x)
		return nil
	}
	if want["w1"] {
		if err := throughput("W1 chain", chain(), *w1N, 3); err != nil {
			return out, err
		}
	}
	if want["w2"] {
		if err := throughput("W2 fan-out", fan(), *w2N, 10); err != nil {
			return out, err
		}
	}
	if want["w3"] {
		before, err := m.start(ctx)
		if err != nil {
			return out, err
		}
		lat := make([]time.Duration, 0, *w3N)
		for range *w3N {
			t0 := time.Now()
			if trace {
				fmt.Fprintf(os.Stderr, "%s start\n", t0.Format("05.000000"))
			}
			run, err := pl.Start(ctx, plans.Start{Project: project, Plan: chain()})
			if err != nil {
				return out, err
			}
			for {
				got, err := pl.Get(ctx, run.ID)
				if err != nil {
					return out, err
				}
				if got.Status == plans.Succeeded {
					break
				}
				if got.Status != plans.Running {
					return out, fmt.Errorf("run %d %s", run.ID, got.Status)
				}
				select {
				case <-events:
				case <-time.After(time.Second):
				}
			}
			lat = append(lat, time.Since(t0))
			if trace {
				fmt.Fprintf(os.Stderr, "%s done\n", time.Now().Format("05.000000"))
			}
		}
		x := result{Side: "docket", Workload: "W3 one at a time", Runs: *w3N, Steps: *w3N * 3}
		x.P50, x.P99 = percentiles(lat)
		if err := m.finish(ctx, before, &x, prof); err != nil {
			return out, err
		}
		out = append(out, x)
	}
	return out, nil
}

// startAll starts n runs of p from 8 goroutines.
func startAll(ctx context.Context, pl *plans.Client, p plans.Plan, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	for range 8 {
		wg.Go(func() {
			for range next {
				if _, err := pl.Start(ctx, plans.Start{Project: project, Plan: p}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// waitSucceeded polls, as the owner, until n runs have succeeded.
func waitSucceeded(ctx context.Context, owner *pgxpool.Pool, n int) error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		var ok, bad int
		if err := owner.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'succeeded'), count(*) FILTER (WHERE status IN ('failed', 'compensated'))
			FROM docket.runs WHERE finished_at IS NOT NULL`).Scan(&ok, &bad); err != nil {
			return err
		}
		if bad > 0 {
			return fmt.Errorf("%d runs failed", bad)
		}
		if ok >= n {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("runs not finished in 10 minutes")
}
