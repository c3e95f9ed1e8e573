package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/jobclaim"
	"github.com/docket-dev/docket/jobs"
)

// Config configures a [Client]. Only Actor is required; a client that runs
// handlers needs a Registry too, and one that enqueues a Project.
type Config struct {
	// Project is the project the client enqueues into. Empty makes a client
	// that runs handlers but enqueues nothing (Enqueue refuses).
	Project string
	// Actor is who the client acts as: it enqueues in Project, which needs
	// an explicit job.create grant there, and claims, renews and settles
	// jobs in every project where it holds job.claim, and nowhere else.
	// Required.
	Actor access.Actor
	// Registry holds the handlers. Without one, or with none registered,
	// the client is insert-only, as a River client without workers is: it
	// enqueues, and [Client.Start] refuses; the options
	// that shape running (Queues, Sweeps, SweepEvery, SweepLimit, OnEvent)
	// must then be unset. New jobs of the registry's kinds take their
	// handler's defaults: [HandlerOptions.Lease] when the spec sets no
	// lease, and [HandlerOptions.Repeatable].
	Registry *Registry
	// Queues maps each docket queue the worker serves to how many handlers
	// may run at once for it in this process: 1..10000. Defaults to
	// {"default": 100}. They run in batches of up to Batch.Max (see
	// [Batching]), each a River job of the River queue of that name, so a
	// queue must also be a valid River queue name (see [RiverQueue]).
	Queues map[string]int
	// Clock gives the instants the worker passes to the database. Defaults
	// to [db.SystemClock].
	Clock db.Clock
	// Deployment names this deployment in docket.job_decoders, where the
	// worker records at Start which payload versions it decodes: 1-200
	// characters of [A-Za-z0-9._:@/-]. A deployment's registrations belong
	// to the login role that first registered it, so workers of two logins
	// need two names. Defaults to the pool's login role and the host name,
	// login@host (the host name alone when that is not a valid name).
	Deployment string
	// Heartbeat is the fraction of a lease after which the heartbeat renews
	// it: 0.05 .. 0.9. Defaults to 1/3, so two renewals may fail before the
	// lease expires.
	Heartbeat float64
	// Batch shapes the batches in which jobs are claimed, run and their
	// successes recorded. See [Batching] for the defaults.
	Batch Batching
	// PollInterval is how often the worker looks for due jobs whatever it
	// was notified of: the most a job whose retry wait has ended, or whose
	// notification was lost, waits. 10 ms .. 1 h. Defaults to 1 s.
	PollInterval time.Duration
	// SweepEvery is how often the built-in lease sweep runs: 10 ms .. 1 h.
	// Defaults to 1 s.
	SweepEvery time.Duration
	// SweepLimit is the most items one sweep run moves: 1..10000. Defaults
	// to 1000.
	SweepLimit int
	// Sweeps are further sweeps to run beside the built-in ones, each on its
	// own period: how other docket packages hook their deadline sweeps in.
	Sweeps []Sweep
	// ReleaseTimeout bounds how long [Client.Stop], once its deadline has
	// passed, waits for cancelled handlers to return and their leases to be
	// given back. Defaults to 10 s.
	ReleaseTimeout time.Duration
	// LateOutcomes is how long after a lease expired the worker keeps
	// trying to record the success or failure it holds for the lease's
	// attempt, late ([jobs.Client.CompleteLate], [jobs.Client.FailLate]),
	// when it could not reach the database in time: once the lease sweep
	// has made the job uncertain, the outcome moves it on as it would have
	// on time, on record as late. 1 s .. 24 h; defaults to an hour, the
	// database's own late_outcome_window (docket.settings), which bounds it
	// too. Negative: never; the outcome is abandoned when the lease expires.
	// [Client.Stop] ends the wait when its context ends.
	LateOutcomes time.Duration
	// FetchCooldown is the least time between two of River's fetches of
	// batches (see river.Config). Defaults to 10 ms. Batches are few and
	// long-lived, so this matters only when a queue has had no batch for
	// Batch.Idle.
	FetchCooldown time.Duration
	// FetchPollInterval is how often River looks for batches to start
	// however it was notified. Defaults to 1 s.
	FetchPollInterval time.Duration
	// Logger receives the worker's structured logs and River's. Defaults to
	// slog.Default() for the worker's and warnings and errors only for
	// River's.
	Logger *slog.Logger
	// OnEvent, when not nil, is called for every [Event], synchronously and
	// from many goroutines: keep it quick (count, send on a buffered
	// channel). The hook for metrics.
	OnEvent func(Event)
	// TracerProvider, when not nil, traces each enqueue (see
	// jobs.Config.TracerProvider) and each attempt the worker runs, in a
	// span linked to the span that enqueued the job; a handler's context
	// carries its attempt's span. Each sweep run is a span too, whose
	// context the sweep's Func gets. Nil: no span, and nothing more is read,
	// written or allocated. See docs/telemetry.md.
	TracerProvider trace.TracerProvider
	// MeterProvider, when not nil, receives the worker's metrics: attempts
	// started and their outcomes, waits and run times, lease losses,
	// sweeps. Nil: none. See docs/telemetry.md.
	MeterProvider metric.MeterProvider
}

// Client enqueues jobs for workers and runs the handlers of a [Registry] for
// them, through River. Enqueueing writes the job only; its commit notifies
// the workers of its queue. Running, the client runs batches as River jobs:
// each claims up to [Batching.Max] due jobs of one queue in one statement,
// runs their handlers at once while heartbeats renew their leases, and
// records their successes in one statement, with the next claim; the client
// also runs the sweeps. Create it with [NewClient], then [Client.Start] and
// [Client.Stop]. Several clients, in one process or many, may serve the same
// queues. It is safe for concurrent use.
type Client struct {
	cfg      Config
	pool     *pgxpool.Pool
	jobs     *jobs.Client
	river    *river.Client[pgx.Tx]
	store    jobclaim.Store[jobs.Job, jobs.Decoder]
	runs     bool // the registry has handlers: Start may run them
	log      *slog.Logger
	decoders []jobs.Decoder
	leases   map[string]time.Duration // the handlers' leases, by kind
	queues   []string
	sweeps   map[string]Sweep
	held     holding   // the outcomes held now, for the logs and Stop
	alive    *liveness // the River jobs of the batches running here, marked alive
	markStop context.CancelFunc
	markDone chan struct{}
	// handlers counts the handlers running now, for Stop's error.
	handlers atomic.Int64

	queueStates map[string]*queueState
	wakeCancel  context.CancelFunc
	wakeDone    chan struct{}
	sweepsDone  sync.WaitGroup // the sweep loops, ended by quit
	listening   chan struct{}  // closed once the worker listens for new jobs
	// testHookClaim, when not nil, is told of each batch claim that
	// committed: its queue, how many jobs it asked for and how many it took.
	testHookClaim func(queue string, asked, took int)
	// testHookClaimed, when not nil, is told of each batch claim in its
	// transaction, before the batch asks whether Stop has begun.
	testHookClaimed func(queue string, took int)
	listenOnce      sync.Once

	quit      chan struct{} // closed when the stop begins: batches claim no more
	stopping  atomic.Bool   // the stop is hard: handlers are being cancelled
	started   atomic.Bool
	stopBegun atomic.Bool   // by Stop, or by the end of Start's context
	stopped   chan struct{} // closed when the stop is over
	stopErr   error         // what a stop by Start's context left wrong; set before stopped closes
}

// quitting reports whether Stop has begun.
func (w *Client) quitting() bool {
	select {
	case <-w.quit:
		return true
	default:
		return false
	}
}

// NewClient returns a client on pool; River's driver needs a *pgxpool.Pool.
// It refuses, with [db.ErrInvalidArgument], a nil pool, a malformed project
// or actor, any option outside its bounds, naming it, and options that shape
// running on a client without handlers (see [Config.Registry]).
func NewClient(pool *pgxpool.Pool, cfg Config) (*Client, error) {
	const op = "worker.new_client"
	if pool == nil {
		return nil, db.Refuse(db.ErrInvalidArgument, op, "pool is nil")
	}
	runs := cfg.Registry != nil && len(cfg.Registry.Kinds()) > 0
	if !runs {
		if err := cfg.insertOnly(); err != nil {
			return nil, err
		}
	}
	if cfg.Deployment == "" {
		if host, err := os.Hostname(); err == nil && jobs.ValidDeployment(pool.Config().ConnConfig.User+"@"+host) {
			cfg.Deployment = pool.Config().ConnConfig.User + "@" + host
		}
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	jc, err := jobs.NewClient(pool, jobs.Config{Project: cfg.Project, Actor: cfg.Actor, Clock: cfg.Clock,
		TracerProvider: cfg.TracerProvider, MeterProvider: cfg.MeterProvider})
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if !runs {
		rc, err := newRiverClient(pool, &river.Config{Schema: db.Schema, Logger: riverLogger(cfg.Logger)})
		if err != nil {
			return nil, fmt.Errorf("%s: river: %w", op, err)
		}
		return &Client{cfg: cfg, pool: pool, jobs: jc, river: rc, log: log, stopped: make(chan struct{})}, nil
	}
	w := &Client{cfg: cfg, pool: pool, jobs: jc, store: jobclaim.Of[jobs.Job, jobs.Decoder](jc), runs: true, log: log,
		decoders: cfg.Registry.decoders(), leases: cfg.Registry.leases(), sweeps: map[string]Sweep{},
		queueStates: map[string]*queueState{}, listening: make(chan struct{}), quit: make(chan struct{}), stopped: make(chan struct{}),
		alive: newLiveness()}
	for q, n := range cfg.Queues {
		w.queues = append(w.queues, q)
		m := cfg.Batch.perQueue(n)
		w.queueStates[q] = &queueState{name: q, slots: make(chan struct{}, n), batchMax: m, maxBatches: (n + m - 1) / m,
			wake: make(chan struct{})}
	}
	for _, s := range w.builtinSweeps() {
		w.sweeps[s.Name] = s
	}
	for _, s := range cfg.Sweeps {
		if err := s.validate(); err != nil {
			return nil, err
		}
		if s.Every == 0 {
			s.Every = cfg.SweepEvery
		}
		if _, dup := w.sweeps[s.Name]; dup {
			return nil, db.Refuse(db.ErrInvalidArgument, op, "two sweeps are named "+s.Name)
		}
		w.sweeps[s.Name] = s
	}

	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &batchWorker{w: w}); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	queues := map[string]river.QueueConfig{}
	for q, st := range w.queueStates {
		queues[q] = river.QueueConfig{MaxWorkers: st.maxBatches}
	}
	rc, err := newRiverClient(pool, &river.Config{
		Schema:               db.Schema,
		Logger:               riverLogger(cfg.Logger),
		Queues:               queues,
		Workers:              workers,
		JobTimeout:           -1, // handlers are bounded by their own Timeout and lease
		RescueStuckJobsAfter: jobs.MaxLease + time.Hour,
		MaxAttempts:          batchMaxAttempts,
		FetchCooldown:        cfg.FetchCooldown,
		FetchPollInterval:    cfg.FetchPollInterval,
	})
	if err != nil {
		return nil, db.Refuse(db.ErrInvalidArgument, op, "river: "+err.Error())
	}
	w.river = rc
	return w, nil
}

// newRiverClient builds the River client of a docket client on pool: one
// per [NewClient], and nowhere else.
func newRiverClient(pool *pgxpool.Pool, cfg *river.Config) (*river.Client[pgx.Tx], error) {
	if testHookRiverClient != nil {
		testHookRiverClient(pool)
	}
	return river.NewClient(riverpgxv5.New(pool), cfg)
}

// testHookRiverClient, when not nil, is told of each River client built,
// with its pool: set once, before any client is built, by this package's
// tests, which count them. Nil otherwise.
var testHookRiverClient func(*pgxpool.Pool)

// insertOnly refuses options that shape running on a client that has no
// handlers to run.
func (cfg Config) insertOnly() error {
	set := func(name string) error {
		return db.Refuse(db.ErrInvalidArgument, "worker.new_client",
			name+" is set, but the registry has no handler to run: register one with worker.Handle, or leave "+name+" unset for an insert-only client")
	}
	switch {
	case cfg.Queues != nil:
		return set("Queues")
	case len(cfg.Sweeps) > 0:
		return set("Sweeps")
	case cfg.SweepEvery != 0:
		return set("SweepEvery")
	case cfg.SweepLimit != 0:
		return set("SweepLimit")
	case cfg.OnEvent != nil:
		return set("OnEvent")
	}
	return nil
}

func (cfg Config) withDefaults() (Config, error) {
	const op = "worker.new_client"
	bad := func(format string, args ...any) (Config, error) {
		return cfg, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf(format, args...))
	}
	if err := cfg.Actor.Validate(); err != nil {
		return cfg, err
	}
	if cfg.Queues == nil {
		cfg.Queues = map[string]int{jobs.DefaultQueue: 100}
	}
	if len(cfg.Queues) == 0 {
		return bad("no queues: give Config.Queues at least one")
	}
	for q, n := range cfg.Queues {
		if !jobs.ValidQueue(q) || !RiverQueue(q) {
			return bad("queue %q: want letters and digits separated by single underscores or hyphens, at most 63 characters", q)
		}
		if n < 1 || n > 10000 {
			return bad("queue %q: %d handlers at once is outside 1..10000", q, n)
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = db.SystemClock{}
	}
	if cfg.Deployment == "" {
		host, err := os.Hostname()
		if err != nil || !jobs.ValidDeployment(host) {
			host = "worker"
		}
		cfg.Deployment = host
	}
	if !jobs.ValidDeployment(cfg.Deployment) {
		return bad("invalid deployment %q: want 1-200 characters of [A-Za-z0-9._:@/-], starting with a letter or digit", cfg.Deployment)
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 1.0 / 3
	}
	if !(cfg.Heartbeat >= 0.05 && cfg.Heartbeat <= 0.9) { // NaN too
		return bad("heartbeat fraction %v is outside 0.05 .. 0.9", cfg.Heartbeat)
	}
	if cfg.Batch.Window > 100*time.Millisecond {
		return bad("batch window %v is over 100ms", cfg.Batch.Window)
	}
	if cfg.Batch.Rescan > time.Minute {
		return bad("batch rescan %v is over 1m", cfg.Batch.Rescan)
	}
	cfg.Batch = cfg.Batch.withDefaults()
	if b := cfg.Batch; b.Max < 0 || b.Max > jobs.MaxClaimBatch {
		return bad("batch of %d is outside 1..%d (0: half the queue's handlers, 100..%d)", b.Max, jobs.MaxClaimBatch, jobs.MaxClaimBatch)
	}
	if b := cfg.Batch; b.Idle < 10*time.Millisecond || b.Idle > time.Hour {
		return bad("batch idle %v is outside 10ms .. 1h", b.Idle)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.PollInterval < 10*time.Millisecond || cfg.PollInterval > time.Hour {
		return bad("poll interval %v is outside 10ms .. 1h", cfg.PollInterval)
	}
	if cfg.FetchPollInterval == 0 {
		cfg.FetchPollInterval = max(time.Second, cfg.FetchCooldown)
	}
	if cfg.FetchCooldown == 0 {
		cfg.FetchCooldown = min(10*time.Millisecond, cfg.FetchPollInterval)
	}
	if cfg.SweepEvery == 0 {
		cfg.SweepEvery = time.Second
	}
	if cfg.SweepEvery < 10*time.Millisecond || cfg.SweepEvery > time.Hour {
		return bad("sweep period %v is outside 10ms .. 1h", cfg.SweepEvery)
	}
	if cfg.SweepLimit == 0 {
		cfg.SweepLimit = 1000
	}
	if cfg.SweepLimit < 1 || cfg.SweepLimit > jobs.MaxSweepBatch {
		return bad("sweep limit %d is outside 1..%d", cfg.SweepLimit, jobs.MaxSweepBatch)
	}
	if cfg.ReleaseTimeout == 0 {
		cfg.ReleaseTimeout = 10 * time.Second
	}
	if cfg.ReleaseTimeout < 0 {
		return bad("release timeout %v is negative", cfg.ReleaseTimeout)
	}
	if cfg.LateOutcomes == 0 {
		cfg.LateOutcomes = time.Hour
	}
	if cfg.LateOutcomes > 0 && (cfg.LateOutcomes < time.Second || cfg.LateOutcomes > 24*time.Hour) {
		return bad("late outcomes window %v is outside 1s .. 24h (negative: never)", cfg.LateOutcomes)
	}
	return cfg, nil
}

// Start checks that the worker's actor may claim somewhere, records the
// payload versions the worker decodes, with each kind's handler revision
// ([HandlerOptions.Revision]), in docket.job_decoders, then starts
// listening for new jobs, running batches and sweeping. A worker starts
// once; a Start that returned an error may be tried again.
//
// It refuses, starting nothing and writing nothing: a client without
// handlers ([db.ErrInvalidArgument]); an actor that holds job.claim in no
// project ([db.ErrNotPermitted], naming the actor: grant it job.claim where
// its jobs are, then start it). A project granted or revoked after Start
// counts from the worker's next claim.
//
// ctx bounds the start, and then the worker's life, as River's Start does:
// when ctx is done the worker stops hard. It claims no more, cancels the
// contexts of the handlers still running and, as each returns, records its
// outcome: a handler that returns an error gives its lease back (the job is
// queued again, due at once, its attempt counted), one that returns nil
// succeeds. It waits up to [Config.ReleaseTimeout] for them, then
// [Client.Stopped] is closed; [Client.Stop] is then a no-op that returns at
// once: nil, or the error naming the handlers still running past the
// release timeout. For a graceful stop that lets handlers finish, call
// [Client.Stop] and pass Start a context that outlives it.
func (w *Client) Start(ctx context.Context) error {
	if !w.runs {
		return db.Refuse(db.ErrInvalidArgument, "worker.start", "this client has no handler to run: register one with worker.Handle in Config.Registry")
	}
	projects, err := w.claimProjects(ctx)
	if err != nil {
		return err
	}
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("worker: already started")
	}
	if err := w.jobs.RegisterDecoders(ctx, w.cfg.Deployment, w.decoders); err != nil {
		w.started.Store(false)
		return fmt.Errorf("worker: register decoders: %w", err)
	}
	if err := w.river.Start(context.WithoutCancel(ctx)); err != nil {
		w.started.Store(false)
		return fmt.Errorf("worker: start river: %w", err)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.wakeCancel, w.wakeDone = cancel, make(chan struct{})
	go func() {
		defer close(w.wakeDone)
		w.wake(wctx)
	}()
	mctx, mcancel := context.WithCancel(context.WithoutCancel(ctx))
	w.markStop, w.markDone = mcancel, make(chan struct{})
	go func() {
		defer close(w.markDone)
		w.markLoop(mctx)
	}()
	for _, s := range w.sweeps {
		w.sweepsDone.Add(1)
		go func() {
			defer w.sweepsDone.Done()
			w.sweepLoop(wctx, s)
		}()
	}
	for _, q := range w.queueStates {
		w.moreBatches(q) // a batch per queue from the start: whatever is due runs at once
	}
	w.log.InfoContext(ctx, "docket worker started", "actor", w.cfg.Actor, "queues", w.queues,
		"kinds", w.cfg.Registry.Kinds(), "deployment", w.cfg.Deployment, "claims_in", projects)
	go w.stopWhenDone(ctx)
	return nil
}

// stopWhenDone stops the worker hard when ctx, Start's, is done before Stop
// began.
func (w *Client) stopWhenDone(ctx context.Context) {
	select {
	case <-w.quit:
		return
	case <-ctx.Done():
	}
	if !w.stopBegun.CompareAndSwap(false, true) {
		return
	}
	lctx := context.WithoutCancel(ctx)
	w.log.WarnContext(lctx, "docket worker: the context passed to Start is done; stopping, cancelling the running handlers and releasing their leases",
		"cause", context.Cause(ctx))
	if err := w.shutdown(lctx, true); err != nil {
		w.stopErr = err
		w.log.ErrorContext(lctx, "docket worker: stopping", "err", err)
	}
	close(w.stopped)
}

// Stop stops the worker: it stops claiming, and waits until ctx is done for
// running handlers and for the outcomes it holds (those it could not yet
// record, the database being unreachable, say: see [Config.LateOutcomes])
// to be recorded. Then it cancels the handlers still running and, as each
// returns, gives its lease back (the job is queued again, its attempt
// counted), waiting up to [Config.ReleaseTimeout] for that, and abandons
// the outcomes it still holds.
//
// It returns nil only when nothing is claimed by this worker: every
// handler returned and every outcome was recorded or given back. It returns
// ctx's error when handlers had to be cancelled and their leases were given
// back. When it abandoned outcomes, or handlers outlived the release
// timeout, it returns a [*StopError] (wrapping ctx's error) that says how
// many, names their jobs, and what becomes of them: they stay claimed until
// their leases expire, and then the lease sweep queues a repeatable job
// again and makes any other uncertain.
//
// Stop of a worker that never started returns nil. Once a stop has begun,
// by an earlier Stop or because Start's context is done, Stop waits for it
// to end (or for ctx) and returns nil, or the error of a stop by Start's
// context.
func (w *Client) Stop(ctx context.Context) error {
	if !w.started.Load() {
		return nil
	}
	if w.stopBegun.CompareAndSwap(false, true) {
		err := w.shutdown(ctx, false)
		close(w.stopped)
		return err
	}
	select {
	case <-w.stopped:
		return w.stopErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stopped returns a channel closed once a started worker has stopped, by
// [Client.Stop] or because the context passed to [Client.Start] is done.
func (w *Client) Stopped() <-chan struct{} { return w.stopped }

// shutdown stops the worker, once: gracefully until ctx is done, unless
// hard, then cancelling the handlers still running and abandoning the
// outcomes still held.
func (w *Client) shutdown(ctx context.Context, hard bool) error {
	w.held.stopBegun()
	close(w.quit)
	w.wakeCancel()
	<-w.wakeDone
	w.sweepsDone.Wait()
	var err error
	if !hard {
		err = w.river.Stop(ctx)
		if err != nil {
			running, held := w.handlers.Load(), w.held.count()
			w.log.WarnContext(ctx, "docket worker: stop deadline passed; cancelling the handlers still running, releasing their leases, and abandoning the outcomes still held",
				"running", running, "held", held)
		}
	}
	timedOut := false
	if hard || err != nil {
		w.stopping.Store(true)
		release, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ReleaseTimeout)
		defer cancel()
		if herr := w.river.StopAndCancel(release); herr != nil {
			timedOut = true
			if err == nil {
				err = herr
			}
		}
	}
	w.markStop() // the batches have ended, or been left to end on their own
	<-w.markDone
	abandoned, held := w.held.stopEnded()
	if len(abandoned) > 0 || timedOut {
		se := &StopError{Abandoned: abandoned, Err: err}
		if timedOut {
			se.Held, se.Running = held, int(w.handlers.Load())
		}
		w.log.WarnContext(ctx, "docket worker stopped, leaving jobs claimed", "abandoned", se.Jobs(), "held", se.Held,
			"running", se.Running, "err", se)
		return se
	}
	w.log.InfoContext(ctx, "docket worker stopped")
	return err
}

// emit reports e to the OnEvent hook.
func (w *Client) emit(e Event) {
	if w.cfg.OnEvent != nil {
		w.cfg.OnEvent(e)
	}
}

// riverLogger is l, or a logger of River's warnings and errors.
func riverLogger(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
