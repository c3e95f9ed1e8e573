package main

import (
	"context"
	"errors"
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

// demo parses the demo's arguments: [--orders N]. getenv fills in the
// database URL and actor the command line leaves out, once the global flags
// among args are read.
func (c *cli) demo(ctx context.Context, args []string, getenv env) error {
	fs := c.flags("demo")
	n := fs.Int("orders", demoOrders, "how many orders to place, 1..1000")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if *n < 1 || *n > demoMaxOrders {
		return usageOf(fs, "--orders %d: want 1..%d", *n, demoMaxOrders)
	}
	c.resolve(getenv)
	return c.runDemo(ctx, *n)
}

// runDemo gets a database and runs the demo on it: the order service until
// every invoice job has settled, then the rest of the story.
func (c *cli) runDemo(ctx context.Context, n int) (err error) {
	fmt.Fprintf(c.stdout, "docket demo: an order service (examples/orders) places %d orders, each written with its\n"+
		"invoice job in one transaction, while a worker runs the invoices; then an order's fulfilment runs\n"+
		"as a plan, a supplier switch waits for acknowledgements with business-day deadlines and a person\n"+
		"approves it, a refund run waits for a second person's approval, and a schedule runs across the\n"+
		"change to winter time.\n\n", n)
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
	loc, err := time.LoadLocation(demoZone)
	if err != nil {
		return err
	}
	clock := newDemoClock(demoAt(loc, 22, 9, 0))
	c.clock = clock // for every client of the demo, the order service's included
	return c.withPool(ctx, func(ctx context.Context, pool *pgxpool.Pool) error {
		return c.runDemoOn(ctx, pool, n, scratch, clock)
	})
}

// demoStep prints one step of the demo's setup.
func (c *cli) demoStep(what, format string, args ...any) {
	fmt.Fprintf(c.stdout, "  %-9s %s\n", what, fmt.Sprintf(format, args...))
}

// runDemoOn migrates pool's database, runs the order service there until
// every invoice job has settled, tells the rest of the story on the same
// worker, and prints what became of it all, on clock. scratch says the
// database is dropped at the end.
func (c *cli) runDemoOn(ctx context.Context, pool *pgxpool.Pool, n int, scratch bool, clock *demoClock) (err error) {
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
	st, err := newStory(c, pool, project, clock)
	if err != nil {
		return err
	}
	reg := worker.NewRegistry()
	if err := svc.Register(reg); err != nil {
		return err
	}
	if err := st.register(reg); err != nil {
		return err
	}
	var lastErr atomic.Pointer[error] // the worker's last error, for a failure message
	w, err := worker.NewClient(pool, worker.Config{
		Actor: demoService, Registry: reg, Clock: c.clock, Deployment: "docket-demo",
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, SweepEvery: 100 * time.Millisecond,
		PollInterval: 50 * time.Millisecond, Sweeps: st.sweeps(),
		Logger: slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnEvent: func(e worker.Event) {
			if e.Type == worker.EventError {
				lastErr.Store(&e.Err)
			}
			st.onEvent(e)
		},
	})
	if err != nil {
		return err
	}
	st.w = w
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
	c.demoStep("worker", "runs every job of the demo as %s; the invoices charge a simulated gateway\n"+
		"            that answers by customer", demoService)
	c.demoStep("clock", "the demo's own: it starts at %s, in the week the clocks go back in\n"+
		"            Europe, and runs at the wall clock's pace; the demo moves it on to the next moment\n"+
		"            of its story, between the worker's jobs, instead of waiting for deadlines",
		clock.Now().In(st.loc).Format("Mon 02 Jan 2006 15:04 MST"))

	fmt.Fprintf(c.stdout, "\n1. Invoices: %d orders, each written with its invoice job in one transaction\n\n", n)
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

	withWorkerErr := func(err error) error {
		if werr := lastErr.Load(); werr != nil && err != nil {
			err = fmt.Errorf("%w (the worker's last error: %v)", err, *werr)
		}
		return err
	}
	counts, err := c.watchDemo(ctx, pool, project, n, start, placing)
	if err != nil {
		return withWorkerErr(err)
	}
	fmt.Fprintf(c.stdout, "\nAll %d invoice jobs settled in %.1fs.\n\n", n, time.Since(start).Seconds())
	inv, err := c.invoiceOutcomes(ctx, pool, project, n, counts)
	if err != nil {
		return err
	}
	if err := st.tell(ctx); err != nil {
		return withWorkerErr(err)
	}
	if err := stop(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "\nThe demo took %.1fs of wall-clock time; its clock went from Thursday to %s.\n",
		time.Since(start).Seconds(), st.at())
	c.closeDemo(project, inv, st, scratch)
	return nil
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
	grants := append([]access.Grant{
		{Principal: demoService, Project: name, Capability: access.JobCreate},
		{Principal: demoService, Project: name, Capability: access.JobClaim},
	}, storyGrants(name, c.actor)...)
	var who []access.Actor
	caps := map[access.Actor][]string{}
	for _, g := range grants {
		if _, err := ac.Allow(ctx, g); err != nil {
			return "", err
		}
		if caps[g.Principal] == nil {
			who = append(who, g.Principal)
		}
		caps[g.Principal] = append(caps[g.Principal], string(g.Capability))
	}
	c.demoStep("project", "%s, where each principal of the demo holds only what it needs:", name)
	roles := map[access.Actor]string{
		demoService: "the order service, the worker",
		demoSwitch:  "the supplier switch service",
		demoInbox:   "the inbound gateway",
		demoPat:     "asks for supplier switches",
		demoRita:    "approves them",
	}
	t := newTable(c.stdout, "              ")
	for _, p := range who {
		role, ok := roles[p]
		if !ok {
			role = "you: reads it all, reconciles"
		}
		t.row(string(p), strings.Join(caps[p], " "), role)
	}
	t.flush()
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

// invoiceIDs are the invoice jobs worth a look after the demo: the first of
// all, the first dead and the first uncertain one (0: none).
type invoiceIDs struct{ first, dead, uncertain int64 }

// history is the job whose history is worth a look: the first dead, else
// the first uncertain, else the first of all.
func (v invoiceIDs) history() int64 {
	switch {
	case v.dead > 0:
		return v.dead
	case v.uncertain > 0:
		return v.uncertain
	}
	return v.first
}

// invoiceOutcomes prints the invoices' closing table and how the n orders
// stand beside their jobs, and returns the jobs worth a look.
func (c *cli) invoiceOutcomes(ctx context.Context, pool *pgxpool.Pool, project string, n int, counts stateCounts) (invoiceIDs, error) {
	t := newTable(c.stdout, "  ", "outcome", "jobs", "attempts", "what it means")
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
		t.row(string(st.state), fmt.Sprintf("%5d", k), fmt.Sprintf("%8d", counts.attempts[st.state]), meaning)
	}
	t.flush()

	var invoiced, disagree int
	var v invoiceIDs
	err := pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE o.status = 'invoiced'), count(*) FILTER (WHERE (o.status = 'invoiced') <> (j.state = 'succeeded')),
		       min(j.id), coalesce(min(j.id) FILTER (WHERE j.state = 'uncertain'), 0), coalesce(min(j.id) FILTER (WHERE j.state = 'dead'), 0)
		FROM shop.orders o JOIN docket.jobs j ON j.id = o.invoice_job WHERE j.project = $1`, project).Scan(&invoiced, &disagree, &v.first, &v.uncertain, &v.dead)
	if err != nil {
		return v, err
	}
	if disagree > 0 {
		return v, fmt.Errorf("%d orders disagree with their invoice job about being invoiced", disagree)
	}
	fmt.Fprintf(c.stdout, "\n%d of %d orders are invoiced in shop.orders: exactly those whose invoice job succeeded.\n", invoiced, n)
	return v, nil
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
