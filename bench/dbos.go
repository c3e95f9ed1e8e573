package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

func dbosStep(ctx context.Context) (int, error) { return 1, nil }

// dbosChain is W1's and W3's workflow: three steps, one after another.
func dbosChain(ctx dbos.Context, n int) (int, error) {
	for range 3 {
		v, err := dbos.RunAsStep(ctx, dbosStep)
		if err != nil {
			return 0, err
		}
		n += v
	}
	return n, nil
}

// dbosFan is W2's workflow: a root step, 8 leaves at once, a join step.
func dbosFan(ctx dbos.Context, n int) (int, error) {
	if _, err := dbos.RunAsStep(ctx, dbosStep); err != nil {
		return 0, err
	}
	var chans []<-chan dbos.StepOutcome[int]
	for range 8 {
		c, err := dbos.Go(ctx, dbosStep)
		if err != nil {
			return 0, err
		}
		chans = append(chans, c)
	}
	for _, c := range chans {
		o := <-c
		if o.Err != nil {
			return 0, o.Err
		}
		n += o.Result
	}
	v, err := dbos.RunAsStep(ctx, dbosStep)
	return n + v, err
}

// runDBOS launches DBOS on a fresh database with a queue of the given
// worker concurrency polled every 10 ms and runs the workloads: W1 and W2
// enqueued, W3 both enqueued and run directly.
func runDBOS(ctx context.Context, url string, m *meter, want map[string]bool, prof *os.File) ([]result, error) {
	dc, err := dbos.NewContext(ctx, dbos.Config{
		AppName: "bench", DatabaseURL: url,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	dbos.RegisterWorkflow(dc, dbosChain)
	dbos.RegisterWorkflow(dc, dbosFan)
	q, err := dbos.RegisterQueue(dc, "bench", dbos.WithWorkerConcurrency(*handlers), dbos.WithQueueBasePollingInterval(10*time.Millisecond))
	if err != nil {
		return nil, err
	}
	if err := dbos.Launch(dc); err != nil {
		return nil, err
	}
	defer dbos.Shutdown(dc, 10*time.Second)

	var out []result
	throughput := func(name string, wf dbos.Workflow[int, int], n, steps int) error {
		before, err := m.start(ctx)
		if err != nil {
			return err
		}
		hs := make([]dbos.WorkflowHandle[int], 0, n)
		for range n {
			h, err := dbos.RunWorkflow(dc, wf, 0, dbos.WithQueue(q))
			if err != nil {
				return err
			}
			hs = append(hs, h)
		}
		for _, h := range hs {
			if _, err := h.GetResult(dbos.WithHandlePollingInterval(time.Millisecond)); err != nil {
				return err
			}
		}
		x := result{Side: "dbos", Workload: name, Runs: n, Steps: n * steps}
		if err := m.finish(ctx, before, &x, prof); err != nil {
			return err
		}
		out = append(out, x)
		return nil
	}
	if want["w1"] {
		if err := throughput("W1 chain", dbosChain, *w1N, 3); err != nil {
			return out, err
		}
	}
	if want["w2"] {
		if err := throughput("W2 fan-out", dbosFan, *w2N, 10); err != nil {
			return out, err
		}
	}
	if want["w3"] {
		for _, queued := range []bool{true, false} {
			before, err := m.start(ctx)
			if err != nil {
				return out, err
			}
			lat := make([]time.Duration, 0, *w3N)
			for range *w3N {
				t0 := time.Now()
				var opts []dbos.WorkflowOption
				if queued {
					opts = append(opts, dbos.WithQueue(q))
				}
				h, err := dbos.RunWorkflow(dc, dbosChain, 0, opts...)
				if err != nil {
					return out, err
				}
				if _, err := h.GetResult(dbos.WithHandlePollingInterval(time.Millisecond)); err != nil {
					return out, err
				}
				lat = append(lat, time.Since(t0))
			}
			name := "W3 one at a time"
			side := "dbos"
			if !queued {
				side = "dbos (no queue)"
			}
			x := result{Side: side, Workload: name, Runs: *w3N, Steps: *w3N * 3}
			x.P50, x.P99 = percentiles(lat)
			if err := m.finish(ctx, before, &x, prof); err != nil {
				return out, fmt.Errorf("%s: %w", side, err)
			}
			out = append(out, x)
		}
	}
	return out, nil
}
