//go:build unix

package faults

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
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// childEnv holds, as JSON, the childSpec of the worker process the test
// binary is to be.
const childEnv = "DOCKET_FAULTS_WORKER"

// childSpec is what a worker process is told.
type childSpec struct {
	URL  string `json:"url"`  // app's login
	Name string `json:"name"` // the worker's name, in its deployment and its rows
}

// The lines a worker process prints: ready once started; a handler's start
// (the started marker) with its job and attempt; a worker event other than
// a start or success, with its type, job and attempt; the end of Stop, with
// how long it took and its error.
const (
	lineReady   = "ready"
	lineStarted = "started"
	lineEvent   = "event"
	lineStopped = "stopped"
)

// work is the workload's payload: how long its handler works before its
// outside effect.
type work struct {
	Work time.Duration `json:"work"`
}

var workKind = jobs.MustKind[work]("faults.work", 1)

// childStopTimeout is how long a worker process's Stop waits for its
// handlers before cancelling them, and then for their leases to be given
// back: together within stopBound.
const childStopTimeout = 5 * time.Second

// runChild is the worker process: a worker running the workload's handler
// as app until SIGTERM, when it stops, or until its standard input ends (the
// test is gone). It returns the process's exit code.
func runChild(raw string) int {
	if err := serve(raw); err != nil {
		fmt.Fprintln(os.Stderr, "faults worker:", err)
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
	effects, err := db.Open(ctx, spec.URL) // the outside effect's own connections
	if err != nil {
		return err
	}
	h := &handler{name: spec.Name, effects: effects, out: out}
	reg := worker.NewRegistry()
	if err := worker.HandleResult(reg, workKind, h.run, worker.HandlerOptions{Lease: lease}); err != nil {
		return err
	}
	if err := h.handlePlanSteps(reg); err != nil {
		return err
	}
	if err := h.handleBatchSteps(reg); err != nil {
		return err
	}
	w, err := worker.NewClient(pool, worker.Config{
		Actor: app, Registry: reg, Deployment: "faults-" + spec.Name,
		Queues:         map[string]int{jobs.DefaultQueue: handlers},
		ReleaseTimeout: childStopTimeout,
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnEvent: func(e worker.Event) {
			switch {
			case e.Type == worker.EventStarted, e.Type == worker.EventSucceeded:
			case e.Type == worker.EventSweep && e.Count == 0:
			default:
				out.say(lineEvent, e.Type, e.JobID, e.Attempt)
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
	select {
	case <-term:
	case <-gone:
		return nil
	}
	began := time.Now()
	sctx, cancel := context.WithTimeout(ctx, childStopTimeout)
	defer cancel()
	err = w.Stop(sctx)
	out.say(lineStopped, time.Since(began).Milliseconds(), strconv.Quote(fmt.Sprint(err)))
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

// handler is the workload's handler.
type handler struct {
	name    string
	effects *pgxpool.Pool
	out     *printer
}

// run says it started, works, has its outside effect and succeeds with a
// row written in the completion transaction. It gives up only when its
// context ends.
func (h *handler) run(ctx context.Context, j *jobs.Typed[work]) (worker.Result, error) {
	h.out.say(lineStarted, j.ID, j.Attempts)
	select {
	case <-time.After(j.Args.Work):
	case <-ctx.Done():
		return worker.Result{}, context.Cause(ctx)
	}
	if err := h.outsideEffect(ctx, j.ID, j.Attempts); err != nil {
		return worker.Result{}, err
	}
	return worker.Result{WritesFunc: func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO faults.inside (job_id, attempt, worker) VALUES ($1, $2, $3)", j.ID, j.Attempts, h.name)
		return err
	}}, nil
}

// outsideEffect records the attempt's effect outside the completion, and
// tries again until it is recorded or ctx ends: an insert whose reply was
// lost may have committed, so a retry must not add a row.
func (h *handler) outsideEffect(ctx context.Context, id int64, attempt int) error {
	for {
		_, err := h.effects.Exec(ctx, `INSERT INTO faults.outside (job_id, attempt, worker) VALUES ($1, $2, $3)
			ON CONFLICT (job_id, attempt) DO NOTHING`, id, attempt, h.name)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("outside effect: %w (%w)", err, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
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

	mu      sync.Mutex
	started map[int64][]int // attempts whose handlers started, by job
	events  map[string]int  // worker events by type
	warns   map[string]int  // logged warnings and errors, by message
	warned  map[int64]bool  // the jobs logged warnings and errors name
	races   int             // data races the race detector reported
	tail    []string        // the end of its standard error
	exitErr error
}

// startWorker starts a worker process and waits until it is ready; the
// worker is killed when the test ends.
func (r *rig) startWorker() *child {
	r.t.Helper()
	r.workers++
	c := &child{name: fmt.Sprintf("w%d", r.workers), ready: make(chan struct{}), stopped: make(chan string, 1),
		done: make(chan struct{}), started: map[int64][]int{}, events: map[string]int{}, warns: map[string]int{},
		warned: map[int64]bool{}}
	spec, err := json.Marshal(childSpec{URL: r.loginURL(), Name: c.name})
	require.NoError(r.t, err)
	c.cmd = exec.Command(os.Args[0])
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	c.in, err = c.cmd.StdinPipe()
	require.NoError(r.t, err)
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(r.t, err)
	stderr, err := c.cmd.StderrPipe()
	require.NoError(r.t, err)
	require.NoError(r.t, c.cmd.Start())
	r.children = append(r.children, c)
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
		r.t.Fatalf("worker %s exited before it was ready (%v):\n%s", c.name, c.exitErr, c.stderrTail())
	case <-time.After(time.Minute):
		r.t.Fatalf("worker %s was not ready within a minute:\n%s", c.name, c.stderrTail())
	}
	return c
}

func (c *child) readStdout(stdout io.Reader) {
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) == 0 {
			continue
		}
		c.mu.Lock()
		switch {
		case f[0] == lineReady:
			close(c.ready)
		case f[0] == lineStarted && len(f) == 3:
			id, _ := strconv.ParseInt(f[1], 10, 64)
			attempt, _ := strconv.Atoi(f[2])
			c.started[id] = append(c.started[id], attempt)
		case f[0] == lineEvent && len(f) >= 2:
			c.events[f[1]]++
		case f[0] == lineStopped:
			select {
			case c.stopped <- lines.Text():
			default: // said once only
			}
		}
		c.mu.Unlock()
	}
}

// logMessage finds the level and message of a warning or error in slog's
// text lines, logJob the job it names, and logJobs the jobs a summary of
// held outcomes names.
var (
	logMessage = regexp.MustCompile(`level=(WARN|ERROR) msg=("(?:[^"\\]|\\.)*"|\S+)`)
	logJob     = regexp.MustCompile(` job=(\d+)`)
	logJobs    = regexp.MustCompile(` jobs="?\[([\d ]*)\]`)
)

// tailLines is how much of a worker's standard error a failure shows.
const tailLines = 40

func (c *child) readStderr(stderr io.Reader) {
	lines := bufio.NewScanner(stderr)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		c.mu.Lock()
		if m := logMessage.FindStringSubmatch(line); m != nil {
			msg := m[2]
			if s, err := strconv.Unquote(msg); err == nil {
				msg = s
			}
			c.warns[m[1]+" "+msg]++
			if j := logJob.FindStringSubmatch(line); j != nil {
				id, _ := strconv.ParseInt(j[1], 10, 64)
				c.warned[id] = true
			}
			if j := logJobs.FindStringSubmatch(line); j != nil {
				for _, f := range strings.Fields(j[1]) {
					id, _ := strconv.ParseInt(f, 10, 64)
					c.warned[id] = true
				}
			}
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

// kill ends the process with SIGKILL, if it still runs, and waits for it.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// terminate sends the process SIGTERM, so it stops its worker, and waits up
// to limit for it to exit. It returns how long the exit took, what the
// process said of its Stop ("" if nothing), and whether it exited in time;
// one that did not is killed.
func (c *child) terminate(limit time.Duration) (took time.Duration, said string, ok bool) {
	began := time.Now()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		ok = true
	case <-time.After(limit):
		c.kill()
	}
	took = time.Since(began)
	select {
	case said = <-c.stopped:
	default:
	}
	return took, said, ok
}

// startedAny reports the jobs whose handlers any of children started.
func startedAny(children []*child) map[int64]bool {
	out := map[int64]bool{}
	for _, c := range children {
		c.mu.Lock()
		for id := range c.started {
			out[id] = true
		}
		c.mu.Unlock()
	}
	return out
}

// warnedAny reports the jobs named in any of children's warnings and
// errors.
func warnedAny(children []*child) map[int64]bool {
	out := map[int64]bool{}
	for _, c := range children {
		c.mu.Lock()
		for id := range c.warned {
			out[id] = true
		}
		c.mu.Unlock()
	}
	return out
}

// tally sums the workers' events and warnings, most frequent first.
func tally(children []*child) (events, warns []counted) {
	ev, wa := map[string]int{}, map[string]int{}
	for _, c := range children {
		c.mu.Lock()
		for k, n := range c.events {
			ev[k] += n
		}
		for k, n := range c.warns {
			wa[k] += n
		}
		c.mu.Unlock()
	}
	return sorted(ev), sorted(wa)
}

// counted is one thing and how often it happened.
type counted struct {
	what string
	n    int
}

func sorted(m map[string]int) []counted {
	out := make([]counted, 0, len(m))
	for k, n := range m {
		out = append(out, counted{k, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].n != out[j].n {
			return out[i].n > out[j].n
		}
		return out[i].what < out[j].what
	})
	return out
}
