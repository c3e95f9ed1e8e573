//go:build unix

package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/workerproc"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/retention"
	"github.com/docket-dev/docket/worker"
)

// childEnv holds, as JSON, the childSpec of the worker process the test
// binary is to be.
const childEnv = "DOCKET_SOAK_WORKER"

// childSpec is what a worker process is told.
type childSpec struct {
	URL   string `json:"url"`   // the login's URL
	Name  string `json:"name"`  // the worker's name, in its deployment
	Prune bool   `json:"prune"` // run the prune sweep
}

// The lines a worker process prints on its standard output besides
// workerproc's ready and stopped: done with how many jobs it has succeeded
// so far (every doneEvery while that changes, and once more when it
// stops); prune with one prune run's items removed, its time in the sweep
// function and its time through the commit, in microseconds; sweep with
// another sweep's name and the items it moved, when any; error with what
// failed.
const (
	lineDone  = "done"
	linePrune = "prune"
	lineSweep = "sweep"
	lineError = "error"
)

// doneEvery is how often a worker process says how many jobs it succeeded.
const doneEvery = 100 * time.Millisecond

// noop is the workload's payload; its handler does nothing.
type noop struct {
	N int `json:"n"`
}

var noopKind = jobs.MustKind[noop]("soak.noop", 1)

// childStopTimeout is how long a worker process's Stop waits.
const childStopTimeout = 30 * time.Second

// runChild is the worker process: a worker running the no-op handler as
// runner until SIGTERM, when it stops, or until its standard input ends
// (the test is gone). It returns the process's exit code.
func runChild(raw string) int {
	if err := serve(raw); err != nil {
		fmt.Fprintln(os.Stderr, "soak worker:", err)
		return 1
	}
	return 0
}

// serve is runChild, up to the errors that end it.
func serve(raw string) error {
	p := workerproc.Begin()
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return err
	}
	ctx := context.Background()
	pool, err := db.Open(ctx, spec.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	reg := worker.NewRegistry()
	if err := worker.Handle(reg, noopKind, func(context.Context, *jobs.Typed[noop]) error { return nil }); err != nil {
		return err
	}
	var succeeded atomic.Int64
	var sweeps []worker.Sweep
	var pruneBegan atomic.Int64 // when the running prune began, in Unix nanoseconds
	var pruneFunc atomic.Int64  // how long its sweep function took, in nanoseconds
	if spec.Prune {
		s := retention.Sweep(sweepEvery)
		inner := s.Func
		// The sweep's runs are one after another (one loop per sweep), so
		// one run's marks are never overwritten by the next before it is
		// reported.
		s.Func = func(ctx context.Context, run *worker.SweepRun) (int, error) {
			began := time.Now()
			pruneBegan.Store(began.UnixNano())
			moved, err := inner(ctx, run)
			pruneFunc.Store(int64(time.Since(began)))
			return moved, err
		}
		sweeps = append(sweeps, s)
	}
	w, err := worker.NewClient(pool, worker.Config{
		Actor: runner, Registry: reg, Deployment: "soak-" + spec.Name,
		SweepLimit: sweepLimit, Sweeps: sweeps,
		Logger: workerproc.Logger(),
		OnEvent: func(e worker.Event) {
			switch {
			case e.Type == worker.EventSucceeded:
				succeeded.Add(1)
			case e.Type == worker.EventSweep && e.Sweep == retention.SweepName:
				total := time.Now().UnixNano() - pruneBegan.Load()
				p.Say(linePrune, e.Count, pruneFunc.Load()/1e3, total/1e3)
			case e.Type == worker.EventSweep && e.Count > 0:
				p.Say(lineSweep, e.Sweep, e.Count)
			case e.Type == worker.EventError:
				p.Say(lineError, strconv.Quote(e.Sweep+": "+fmt.Sprint(e.Err)))
			}
		},
	})
	if err != nil {
		return err
	}
	said := int64(-1)
	err = p.Serve(ctx, w, childStopTimeout, doneEvery, func() {
		if n := succeeded.Load(); n != said {
			p.Say(lineDone, n)
			said = n
		}
	})
	p.Say(lineDone, succeeded.Load())
	return err
}

// child is a worker process, seen from the test: what it printed, and how
// it ended.
type child struct {
	*workerproc.Child

	succeeded atomic.Int64 // jobs it said it succeeded

	mu     sync.Mutex
	prune  pruneStats
	sweeps map[string]int // items other sweeps moved, by sweep
	errors map[string]int // error events, by what failed
	warns  int            // lines logged at WARN or ERROR
}

// pruneStats sums a worker's prune runs.
type pruneStats struct {
	runs    int           // prune runs that committed
	busy    int           // of them, those that removed something
	removed int64         // items they removed
	inFunc  time.Duration // time in the sweep function (docket.prune_run)
	total   time.Duration // time through the commit
	longest time.Duration // the longest run, through its commit
}

func (s *pruneStats) add(o pruneStats) {
	s.runs += o.runs
	s.busy += o.busy
	s.removed += o.removed
	s.inFunc += o.inFunc
	s.total += o.total
	s.longest = max(s.longest, o.longest)
}

// startWorker starts a worker process and waits until it is ready; the
// worker is killed when the test ends.
func startWorker(t *testing.T, name, url string, prune bool) *child {
	t.Helper()
	c := &child{sweeps: map[string]int{}, errors: map[string]int{}}
	c.Child = workerproc.Start(t, name, childEnv, childSpec{URL: url, Name: name, Prune: prune},
		workerproc.Lines{Stdout: c.said, Stderr: c.logged})
	return c
}

// said notes a line the worker printed.
func (c *child) said(f []string, line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case f[0] == lineDone && len(f) == 2:
		n, _ := strconv.ParseInt(f[1], 10, 64)
		c.succeeded.Store(n)
	case f[0] == linePrune && len(f) == 4:
		moved, _ := strconv.ParseInt(f[1], 10, 64)
		inFunc, _ := strconv.ParseInt(f[2], 10, 64)
		total, _ := strconv.ParseInt(f[3], 10, 64)
		run := pruneStats{runs: 1, removed: moved, inFunc: time.Duration(inFunc) * time.Microsecond,
			total: time.Duration(total) * time.Microsecond}
		run.longest = run.total
		if moved > 0 {
			run.busy = 1
		}
		c.prune.add(run)
	case f[0] == lineSweep && len(f) == 3:
		n, _ := strconv.Atoi(f[2])
		c.sweeps[f[1]] += n
	case f[0] == lineError:
		msg := strings.TrimSpace(strings.TrimPrefix(line, lineError))
		if s, err := strconv.Unquote(msg); err == nil {
			msg = s
		}
		c.errors[msg]++
	}
}

// logged counts a warning or error the worker logged.
func (c *child) logged(line string) {
	if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
		c.mu.Lock()
		c.warns++
		c.mu.Unlock()
	}
}

// workersSummary sums what the worker processes said.
type workersSummary struct {
	succeeded int64
	prune     pruneStats
	sweeps    map[string]int
	errors    map[string]int
	warns     int
	races     int
}

func summarize(children []*child) workersSummary {
	s := workersSummary{sweeps: map[string]int{}, errors: map[string]int{}}
	for _, c := range children {
		s.succeeded += c.succeeded.Load()
		c.mu.Lock()
		s.prune.add(c.prune)
		for k, n := range c.sweeps {
			s.sweeps[k] += n
		}
		for k, n := range c.errors {
			s.errors[k] += n
		}
		s.warns += c.warns
		c.mu.Unlock()
		s.races += c.Races()
	}
	return s
}
