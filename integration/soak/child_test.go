//go:build unix

package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
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

// The lines a worker process prints on its standard output: ready once
// started; done with how many jobs it has succeeded so far (every
// doneEvery while that changes, and once more when it stops); prune with
// one prune run's items removed, its time in the sweep function and its
// time through the commit, in microseconds; sweep with another sweep's name
// and the items it moved, when any; error with what failed; stopped at the
// end of Stop, with its error.
const (
	lineReady   = "ready"
	lineDone    = "done"
	linePrune   = "prune"
	lineSweep   = "sweep"
	lineError   = "error"
	lineStopped = "stopped"
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
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return err
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	ctx := context.Background()
	out := &printer{w: os.Stdout}
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
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnEvent: func(e worker.Event) {
			switch {
			case e.Type == worker.EventSucceeded:
				succeeded.Add(1)
			case e.Type == worker.EventSweep && e.Sweep == retention.SweepName:
				total := time.Now().UnixNano() - pruneBegan.Load()
				out.say(linePrune, e.Count, pruneFunc.Load()/1e3, total/1e3)
			case e.Type == worker.EventSweep && e.Count > 0:
				out.say(lineSweep, e.Sweep, e.Count)
			case e.Type == worker.EventError:
				out.say(lineError, strconv.Quote(e.Sweep+": "+fmt.Sprint(e.Err)))
			}
		},
	})
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	out.say(lineReady)

	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(gone)
	}()
	tick := time.NewTicker(doneEvery)
	defer tick.Stop()
	said := int64(-1)
	for stop := false; !stop; {
		select {
		case <-term:
			stop = true
		case <-gone:
			return nil
		case <-tick.C:
			if n := succeeded.Load(); n != said {
				out.say(lineDone, n)
				said = n
			}
		}
	}
	sctx, cancel := context.WithTimeout(ctx, childStopTimeout)
	defer cancel()
	err = w.Stop(sctx)
	out.say(lineDone, succeeded.Load())
	out.say(lineStopped, strconv.Quote(fmt.Sprint(err)))
	return nil
}

// printer prints a worker process's lines, one whole line at a time.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) say(what string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintln(p.w, append([]any{what}, args...)...)
}

// child is a worker process, seen from the test: what it printed, and how
// it ended.
type child struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser // kept open: the process works until it ends

	ready   chan struct{} // closed when it says it is ready
	stopped chan string   // the end of its Stop, said
	done    chan struct{} // closed when it has exited and its output is read

	succeeded atomic.Int64 // jobs it said it succeeded

	mu      sync.Mutex
	prune   pruneStats
	sweeps  map[string]int // items other sweeps moved, by sweep
	errors  map[string]int // error events, by what failed
	warns   int            // lines logged at WARN or ERROR
	races   int            // data races the race detector reported
	tail    []string       // the end of its standard error
	exitErr error
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
	c := &child{name: name, ready: make(chan struct{}), stopped: make(chan string, 1), done: make(chan struct{}),
		sweeps: map[string]int{}, errors: map[string]int{}}
	spec, err := json.Marshal(childSpec{URL: url, Name: name, Prune: prune})
	require.NoError(t, err)
	c.cmd = exec.Command(os.Args[0])
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	c.in, err = c.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := c.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	t.Cleanup(c.kill)
	var reading sync.WaitGroup
	reading.Add(2)
	go func() {
		defer reading.Done()
		c.readStdout(stdout)
	}()
	go func() {
		defer reading.Done()
		c.readStderr(stderr)
	}()
	go func() {
		reading.Wait()
		err := c.cmd.Wait()
		c.mu.Lock()
		c.exitErr = err
		c.mu.Unlock()
		close(c.done)
	}()
	select {
	case <-c.ready:
	case <-c.done:
		t.Fatalf("worker %s exited before it was ready (%v):\n%s", c.name, c.exitError(), c.stderrTail())
	case <-time.After(time.Minute):
		t.Fatalf("worker %s was not ready within a minute:\n%s", c.name, c.stderrTail())
	}
	return c
}

func (c *child) readStdout(stdout io.Reader) {
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) == 0 {
			continue
		}
		c.mu.Lock()
		switch {
		case f[0] == lineReady:
			close(c.ready)
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
			msg := strings.TrimSpace(strings.TrimPrefix(lines.Text(), lineError))
			if s, err := strconv.Unquote(msg); err == nil {
				msg = s
			}
			c.errors[msg]++
		case f[0] == lineStopped:
			select {
			case c.stopped <- lines.Text():
			default: // said once only
			}
		}
		c.mu.Unlock()
	}
}

// tailLines is how much of a worker's standard error a failure shows.
const tailLines = 40

func (c *child) readStderr(stderr io.Reader) {
	lines := bufio.NewScanner(stderr)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		c.mu.Lock()
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			c.warns++
		}
		if strings.Contains(line, "WARNING: DATA RACE") {
			c.races++
		}
		c.tail = append(c.tail, line)
		if len(c.tail) > tailLines {
			c.tail = c.tail[1:]
		}
		c.mu.Unlock()
	}
}

func (c *child) stderrTail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.tail, "\n")
}

func (c *child) exitError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exitErr
}

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill ends the process with SIGKILL, if it still runs, and waits for it.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// stop sends the process SIGTERM, so it stops its worker, and waits for it
// to exit; one that has not within limit is killed. It returns what the
// process said of its Stop ("" if nothing).
func (c *child) stop(limit time.Duration) string {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(limit):
		c.kill()
	}
	select {
	case said := <-c.stopped:
		return said
	default:
		return ""
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
		s.races += c.races
		c.mu.Unlock()
	}
	return s
}
