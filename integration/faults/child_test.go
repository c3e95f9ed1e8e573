//go:build unix

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/workerproc"
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

// The lines a worker process prints besides workerproc's ready and
// stopped: a handler's start (the started marker) with its job and attempt;
// a worker event other than a start or success, with its type, job and
// attempt.
const (
	lineStarted   = "started"
	lineEvent     = "event"
	lineSucceeded = "succeeded" // the worker recorded a success: the job store acknowledged it
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
	effects, err := db.Open(ctx, spec.URL) // the outside effect's own connections
	if err != nil {
		return err
	}
	h := &handler{name: spec.Name, effects: effects, out: p}
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
		Logger:         workerproc.Logger(),
		OnEvent: func(e worker.Event) {
			switch {
			case e.Type == worker.EventSucceeded:
				p.Say(lineSucceeded, e.JobID, e.Attempt)
			case e.Type == worker.EventStarted:
			case e.Type == worker.EventSweep && e.Count == 0:
			default:
				p.Say(lineEvent, e.Type, e.JobID, e.Attempt)
			}
		},
	})
	if err != nil {
		return err
	}
	return p.Serve(ctx, w, childStopTimeout, 0, nil)
}

// handler is the workload's handler.
type handler struct {
	name    string
	effects *pgxpool.Pool
	out     *workerproc.Process
}

// run says it started, works, has its outside effect and succeeds with a
// row written in the completion transaction. It gives up only when its
// context ends.
func (h *handler) run(ctx context.Context, j *jobs.Typed[work]) (worker.Result, error) {
	h.out.Say(lineStarted, j.ID, j.Attempts)
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
	*workerproc.Child

	mu      sync.Mutex
	started map[int64][]int // attempts whose handlers started, by job
	events  map[string]int  // worker events by type
	warns   map[string]int  // logged warnings and errors, by message
	warned  map[int64]bool  // the jobs logged warnings and errors name
	acked   map[int64]bool  // the jobs whose success the job store acknowledged
}

// startWorker starts a worker process (in a container on r.net when there
// is one) and waits until it is ready; the worker is killed when the test
// ends.
func (r *rig) startWorker() *child {
	r.t.Helper()
	r.workers++
	c := &child{started: map[int64][]int{}, events: map[string]int{}, warns: map[string]int{}, warned: map[int64]bool{},
		acked: map[int64]bool{}}
	name := fmt.Sprintf("w%d", r.workers)
	url, command := r.loginURL(), []string{os.Args[0]}
	if r.net != nil {
		url, command = r.net.worker(r, name)
	}
	c.Child = workerproc.StartCommand(r.t, name, command, childEnv, childSpec{URL: url, Name: name},
		workerproc.Lines{Stdout: c.said, Stderr: c.logged})
	r.children = append(r.children, c)
	return c
}

// said notes a line the worker printed.
func (c *child) said(f []string, _ string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case f[0] == lineStarted && len(f) == 3:
		id, _ := strconv.ParseInt(f[1], 10, 64)
		attempt, _ := strconv.Atoi(f[2])
		c.started[id] = append(c.started[id], attempt)
	case f[0] == lineEvent && len(f) >= 2:
		c.events[f[1]]++
	case f[0] == lineSucceeded && len(f) >= 2:
		id, _ := strconv.ParseInt(f[1], 10, 64)
		c.acked[id] = true
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

// logged notes a warning or error the worker logged, and the jobs it names.
func (c *child) logged(line string) {
	m := logMessage.FindStringSubmatch(line)
	if m == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
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

// ackedAny reports the jobs whose success the job store acknowledged to any
// of children.
func ackedAny(children []*child) []int64 {
	var out []int64
	for _, c := range children {
		c.mu.Lock()
		for id := range c.acked {
			out = append(out, id)
		}
		c.mu.Unlock()
	}
	return out
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
