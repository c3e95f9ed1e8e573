package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/examples/orders"
	"github.com/docket-dev/docket/internal/pgserver"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// The demo's cast and bounds.
const (
	demoProject                = "demo"
	demoService   access.Actor = "svc:orders"
	demoOrders                 = 40
	demoMaxOrders              = 1000
	// demoTimeout bounds waiting for every invoice job to settle.
	demoTimeout = 45 * time.Second
	// demoCleanupTimeout bounds stopping the worker and dropping a scratch
	// database, even after an interrupt.
	demoCleanupTimeout = 30 * time.Second
	// demoPace is the time between two orders: they arrive while the
	// worker runs, as in a service.
	demoPace = 25 * time.Millisecond
	// demoLatency is the longest a simulated charge takes.
	demoLatency = 200 * time.Millisecond
	// demoPoll is how often the progress line reads the counts.
	demoPoll = 100 * time.Millisecond
	// demoPlainEvery is how often, at most, the progress is printed as a
	// new line when stdout is not a terminal.
	demoPlainEvery = 500 * time.Millisecond
)

// demoRetry makes the demo's retries quick: three attempts, 50 ms apart at
// first, so the jobs that run out of attempts do so in well under a second.
var demoRetry = jobs.RetryPolicy{Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond, Jitter: 0.2, MaxAttempts: 3}

// settledStates are the states an invoice job can end the demo in, in the
// order the closing table lists them, with what each means there.
var settledStates = []struct {
	state   jobs.State
	meaning string
}{
	{jobs.Succeeded, "charged; its order marked invoiced in the same commit"},
	{jobs.Failed, "card declined: a permanent failure, never retried"},
	{jobs.Dead, "gateway busy at every attempt: retried until attempts ran out"},
	{jobs.Uncertain, "no answer after the charge was sent: waits for an operator"},
	{jobs.Cancelled, "withdrawn before it finished"},
}

// demo parses the demo's arguments: [--orders N].
func (c *cli) demo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("orders", demoOrders, "how many orders to place")
	if err := fs.Parse(args); err != nil {
		return usagef("demo: %v", err)
	}
	if fs.NArg() > 0 {
		return usagef("demo takes no arguments but --orders N")
	}
	if *n < 1 || *n > demoMaxOrders {
		return usagef("demo --orders must be 1..%d", demoMaxOrders)
	}
	return c.runDemo(ctx, *n)
}

// runDemo gets a database, runs the order service on it until every invoice
// job has settled, and prints what became of them.
func (c *cli) runDemo(ctx context.Context, n int) (err error) {
	fmt.Fprintf(c.stdout, "docket demo: an order service (examples/orders) places %d orders, each written\n"+
		"with its invoice job in one transaction, while a worker runs the invoices.\n\n", n)
	scratch := c.url == ""
	if scratch {
		// DOCKET_TEST_DATABASE_URL, else a cluster of local binaries; never
		// Docker, which would link testcontainers into the binary.
		c.demoStep("postgres", "no database URL given: finding a server as docket's tests do, but not in Docker ...")
		var d *pgserver.Database
		if d, err = pgserver.Provision(ctx); err != nil {
			if errors.Is(err, pgserver.ErrNotFound) {
				return errors.New("no PostgreSQL found: give the demo a database with --database-url or DOCKET_DATABASE_URL, " +
					"set " + pgserver.EnvURL + " to an admin URL for a scratch database, or install PostgreSQL server binaries (initdb, postgres)")
			}
			return fmt.Errorf("%w; or give the demo a database with --database-url or DOCKET_DATABASE_URL", err)
		}
		defer func() {
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), demoCleanupTimeout)
			defer cancel()
			if cerr := d.Close(cleanup); cerr != nil {
				err = errors.Join(err, fmt.Errorf("dropping the scratch database: %w", cerr))
			}
		}()
		c.url = d.URL
		c.demoStep("", "a scratch database on %s, dropped at the end", d.Server)
	} else {
		c.demoStep("postgres", "the database at %s", maskedURL(c.url))
	}
	return c.withPool(ctx, func(ctx context.Context, pool *pgxpool.Pool) error {
		return c.runDemoOn(ctx, pool, n, scratch)
	})
}

// demoStep prints one step of the demo's setup.
func (c *cli) demoStep(what, format string, args ...any) {
	fmt.Fprintf(c.stdout, "  %-9s %s\n", what, fmt.Sprintf(format, args...))
}

// runDemoOn migrates pool's database, runs the order service there until
// every invoice job has settled, and prints what became of them. scratch
// says the database is dropped at the end.
func (c *cli) runDemoOn(ctx context.Context, pool *pgxpool.Pool, n int, scratch bool) (err error) {
	if err := db.Migrate(ctx, pool); err != nil {
		return err
	}
	status, err := db.MigrationStatus(ctx, pool)
	if err != nil {
		return err
	}
	c.demoStep("schema", "migrated: docket at version %d, River at version %d", status.Version, status.RiverVersion)

	project, err := c.demoProject(ctx, pool)
	if err != nil {
		return err
	}
	c.demoStep("project", "%s: %s may create and claim jobs there, %s reconcile them", project, demoService, c.actor)

	if err := orders.Setup(ctx, pool); err != nil {
		return err
	}
	svc, err := orders.NewService(pool, orders.Config{
		Project: project, Actor: demoService, Retry: demoRetry, Clock: c.clock,
		Gateway: &orders.SimulatedGateway{Latency: demoLatency},
	})
	if err != nil {
		return err
	}
	reg := worker.NewRegistry()
	if err := svc.Register(reg); err != nil {
		return err
	}
	var lastErr atomic.Pointer[error] // the worker's last error, for a failure message
	w, err := worker.NewClient(pool, worker.Config{
		Actor: demoService, Registry: reg, Clock: c.clock, Deployment: "docket-demo",
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, SweepEvery: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnEvent: func(e worker.Event) {
			if e.Type == worker.EventError {
				lastErr.Store(&e.Err)
			}
		},
	})
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	stopped := false
	stop := func() error {
		stopped = true
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), demoCleanupTimeout)
		defer cancel()
		return w.Stop(stopCtx)
	}
	defer func() {
		if !stopped {
			err = errors.Join(err, stop())
		}
	}()
	c.demoStep("worker", "runs %s as %s, on a simulated gateway that answers by customer", orders.InvoiceKind.Name(), demoService)
	fmt.Fprintln(c.stdout)

	start := time.Now()
	placeCtx, stopPlacing := context.WithCancel(ctx)
	placing := make(chan error, 1)
	done := make(chan struct{})
	defer func() {
		stopPlacing()
		<-done // before the worker stops and the pool closes
	}()
	go func() {
		defer close(done)
		placing <- placeOrders(placeCtx, svc, n)
	}()

	counts, err := c.watchDemo(ctx, pool, project, n, start, placing)
	if err != nil {
		if werr := lastErr.Load(); werr != nil {
			err = fmt.Errorf("%w (the worker's last error: %v)", err, *werr)
		}
		return err
	}
	if err := stop(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "\nAll %d invoice jobs settled in %.1fs.\n\n", n, time.Since(start).Seconds())
	return c.closeDemo(ctx, pool, project, n, counts, scratch)
}

// placeOrders places n sample orders one by one, demoPace apart, as they
// would arrive at a service while its worker runs. It returns the first
// error of placing one, or ctx's error if ctx ends first.
func placeOrders(ctx context.Context, svc *orders.Service, n int) error {
	for i, o := range orders.Sample(n) {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(demoPace):
			}
		}
		if _, err := svc.PlaceOrder(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// demoProject creates the demo's project, "demo", or "demo-2", "demo-3" ...
// when a database given to the demo already has it, grants the order
// service what it needs there, and lets the demo's actor see and reconcile
// the jobs. It returns the project's name.
func (c *cli) demoProject(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	pc, err := c.projectClient(pool)
	if err != nil {
		return "", err
	}
	ac, err := c.accessClient(pool)
	if err != nil {
		return "", err
	}
	name := demoProject
	for i := 2; ; i++ {
		_, err := pc.Create(ctx, name)
		if err == nil {
			break
		}
		if !errors.Is(err, db.ErrAlreadyExists) || i > 1000 {
			return "", err
		}
		name = fmt.Sprintf("%s-%d", demoProject, i)
	}
	for _, g := range []access.Grant{
		{Principal: demoService, Project: name, Capability: access.JobCreate},
		{Principal: demoService, Project: name, Capability: access.JobClaim},
		{Principal: c.actor, Project: name, Capability: access.JobReconcile},
	} {
		if _, err := ac.Allow(ctx, g); err != nil {
			return "", err
		}
	}
	return name, nil
}

// stateCounts is how many of a project's jobs are in each state, with the
// attempts they made.
type stateCounts struct {
	jobs     map[jobs.State]int
	attempts map[jobs.State]int
	retried  int // succeeded after more than one attempt
}

func (s stateCounts) settled() int {
	n := 0
	for _, st := range settledStates {
		n += s.jobs[st.state]
	}
	return n
}

// placed is how many orders have been placed: one job each, since an order
// is written with its invoice job in one transaction.
func (s stateCounts) placed() int {
	n := 0
	for _, k := range s.jobs {
		n += k
	}
	return n
}

// countsSQL is what the demo reads: the first query it tells an operator to
// run, with the count of jobs that succeeded on a retry.
const countsSQL = `SELECT state, count(*), sum(attempts), count(*) FILTER (WHERE attempts > 1)
FROM docket.jobs WHERE project = $1 GROUP BY state`

// readCounts reads project's counts by state.
func readCounts(ctx context.Context, q db.DBTX, project string) (stateCounts, error) {
	s := stateCounts{jobs: map[jobs.State]int{}, attempts: map[jobs.State]int{}}
	rows, err := q.Query(ctx, countsSQL, project)
	if err != nil {
		return s, err
	}
	defer rows.Close()
	for rows.Next() {
		var state jobs.State
		var n, attempts, retried int
		if err := rows.Scan(&state, &n, &attempts, &retried); err != nil {
			return s, err
		}
		s.jobs[state], s.attempts[state] = n, attempts
		if state == jobs.Succeeded {
			s.retried = retried
		}
	}
	return s, rows.Err()
}

// watchDemo shows the live progress line until all n invoice jobs have
// settled, and returns the last counts. It fails when placing an order
// fails, when ctx ends, or after demoTimeout.
func (c *cli) watchDemo(ctx context.Context, pool *pgxpool.Pool, project string, n int, start time.Time,
	placing <-chan error) (stateCounts, error) {
	line := progressLine{w: c.stdout, terminal: isTerminal(c.stdout)}
	defer line.end()
	deadline := time.NewTimer(demoTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(demoPoll)
	defer tick.Stop()
	for {
		counts, err := readCounts(ctx, pool, project)
		if err != nil {
			return counts, err
		}
		done := counts.settled() == n
		line.show(fmt.Sprintf("%5.1fs  placed %d/%d  %s", time.Since(start).Seconds(), counts.placed(), n, counts.progress()), done)
		if done {
			return counts, nil
		}
		select {
		case err := <-placing:
			if err != nil {
				return counts, err
			}
		case <-ctx.Done():
			return counts, fmt.Errorf("interrupted: %w", ctx.Err())
		case <-deadline.C:
			return counts, fmt.Errorf("the invoice jobs did not all settle within %v: %d of %d settled; %s",
				demoTimeout, counts.settled(), n, counts.progress())
		case <-tick.C:
		}
	}
}

// progress is the counts by state, in the machine's order, cancelled only
// when there are any.
func (s stateCounts) progress() string {
	var b strings.Builder
	for _, st := range jobs.States {
		if st == jobs.Cancelled && s.jobs[st] == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("  ")
		}
		fmt.Fprintf(&b, "%s %d", st, s.jobs[st])
	}
	return b.String()
}

// closeDemo prints the closing table, how the n orders stand, and the SQL an
// operator would run to see the same.
func (c *cli) closeDemo(ctx context.Context, pool *pgxpool.Pool, project string, n int, counts stateCounts, scratch bool) error {
	fmt.Fprintf(c.stdout, "  %-10s %5s %9s  %s\n", "outcome", "jobs", "attempts", "what it means")
	for _, st := range settledStates {
		k := counts.jobs[st.state]
		if k == 0 && st.state == jobs.Cancelled {
			continue
		}
		meaning := st.meaning
		switch {
		case st.state == jobs.Succeeded && counts.retried > 0:
			meaning += fmt.Sprintf(" (%d on a retry)", counts.retried)
		case st.state == jobs.Dead:
			meaning += fmt.Sprintf(" (%d)", demoRetry.MaxAttempts)
		}
		fmt.Fprintf(c.stdout, "  %-10s %5d %9d  %s\n", st.state, k, counts.attempts[st.state], meaning)
	}

	// How the orders stand beside their jobs, and the jobs worth a look:
	// the first dead and the first uncertain one, else the first of all.
	var invoiced, disagree int
	var history, uncertain, dead int64
	err := pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE o.status = 'invoiced'), count(*) FILTER (WHERE (o.status = 'invoiced') <> (j.state = 'succeeded')),
		       min(j.id), coalesce(min(j.id) FILTER (WHERE j.state = 'uncertain'), 0), coalesce(min(j.id) FILTER (WHERE j.state = 'dead'), 0)
		FROM shop.orders o JOIN docket.jobs j ON j.id = o.invoice_job WHERE j.project = $1`, project).Scan(&invoiced, &disagree, &history, &uncertain, &dead)
	if err != nil {
		return err
	}
	if disagree > 0 {
		return fmt.Errorf("%d orders disagree with their invoice job about being invoiced", disagree)
	}
	fmt.Fprintf(c.stdout, "\n%d of %d orders are invoiced in shop.orders: exactly those whose invoice job succeeded.\n", invoiced, n)

	switch {
	case dead > 0:
		history = dead
	case uncertain > 0:
		history = uncertain
	}

	q := quoteLiteral(project)
	fmt.Fprintf(c.stdout, `
What an operator runs in psql to see the same:

  -- the table above: jobs and attempts by state
  SELECT state, count(*), sum(attempts) AS attempts FROM docket.jobs
  WHERE project = %[1]s GROUP BY state ORDER BY state;
  -- what waits for a person, and why
  SELECT id, kind, attempts, diagnostic FROM docket.jobs_uncertain WHERE project = %[1]s;
  SELECT id, kind, attempts, diagnostic FROM docket.jobs_dead WHERE project = %[1]s;
  -- one job's hash-chained history
  SELECT seq, from_state, to_state, actor, attempt, detail FROM docket.job_events
  WHERE job_id = %[2]d ORDER BY seq;
  -- orders beside their invoice jobs
  SELECT o.id, o.customer, o.status, j.state, j.attempts FROM shop.orders o
  JOIN docket.jobs j ON j.id = o.invoice_job WHERE j.project = %[1]s ORDER BY o.id;

Or with the docket command:

  docket job list --state uncertain %[3]s
  docket job show %[2]d
`, q, history, project)
	if uncertain > 0 {
		fmt.Fprintf(c.stdout, "  docket job reconcile --note \"the gateway has the charge\" %d succeeded\n", uncertain)
	}
	if scratch {
		fmt.Fprintln(c.stdout, "\nThe scratch database is dropped now. To keep what the demo wrote and run the above,\n"+
			"give it a database: DOCKET_DATABASE_URL=URL make demo, or docket --database-url URL demo.")
	}
	return nil
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// maskedURL is u with any password masked, for output.
func maskedURL(u string) string {
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return "(an unparsable URL)"
	}
	c := cfg.ConnConfig
	return fmt.Sprintf("%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// progressLine shows a changing status line: rewritten in place on a
// terminal, else printed as a new line when it changed, at most every
// demoPlainEvery, and always when final.
type progressLine struct {
	w        io.Writer
	terminal bool
	last     string
	lastAt   time.Time
	width    int
	shown    bool
}

func (p *progressLine) show(s string, final bool) {
	if p.terminal {
		pad := max(p.width-len(s), 0)
		fmt.Fprintf(p.w, "\r%s%s", s, strings.Repeat(" ", pad))
		p.width, p.shown = len(s), true
		return
	}
	// Compare without the elapsed time, which always changes.
	_, body, _ := strings.Cut(strings.TrimSpace(s), "  ")
	if body == p.last || (!final && time.Since(p.lastAt) < demoPlainEvery && p.shown) {
		return
	}
	fmt.Fprintln(p.w, s)
	p.last, p.lastAt, p.shown = body, time.Now(), true
}

// end finishes the line on a terminal.
func (p *progressLine) end() {
	if p.terminal && p.shown {
		fmt.Fprintln(p.w)
		p.shown = false
	}
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
