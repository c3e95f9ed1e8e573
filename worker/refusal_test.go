package worker_test

// Refusals: bad input to the worker package gets a typed error and changes
// nothing. Construction refuses what it will not run (naming the option), a
// registry refuses what it will not hold and stays as it was, an enqueue
// refuses what it will not run and leaves no job, no event and no River row
// behind, and a worker without job.claim runs nothing. A client
// without handlers is insert-only: it refuses the options that shape running,
// and Start; a client without a project refuses to enqueue.

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// wrfSnapshot renders every job, job event and River job, to show that a
// refusal changed nothing, River's table included.
func wrfSnapshot(t testing.TB, q db.DBTX) string {
	t.Helper()
	return testkit.Snapshot(t, q, "docket.jobs", "docket.job_events", "docket.river_job")
}

// wrfRefused asserts that err is a typed refusal matching want, naming
// mention when that is not empty.
func wrfRefused(t *testing.T, err, want error, mention string) {
	t.Helper()
	require.ErrorIs(t, err, want)
	var typed *db.Error
	require.ErrorAs(t, err, &typed, "a refusal is a *db.Error")
	if mention != "" {
		require.Contains(t, strings.ToLower(err.Error()), strings.ToLower(mention), "the refusal names what is wrong")
	}
}

// TestNewClientRefusesInvalidInsertOnlyConfig gives an insert-only client,
// one without handlers, a bad project or actor, or an option that shapes
// running, which it has nothing to run with.
func TestNewClientRefusesInvalidInsertOnlyConfig(t *testing.T) {
	t.Parallel()
	e := setup(t)
	good := worker.Config{Project: project, Actor: app, Clock: e.Clock}
	with := func(edit func(c *worker.Config)) worker.Config {
		c := good
		edit(&c)
		return c
	}
	noop := func(context.Context, *worker.SweepRun) (int, error) { return 0, nil }
	before := wrfSnapshot(t, e.Pool)
	cases := []struct {
		name    string
		pool    *pgxpool.Pool
		cfg     worker.Config
		mention string
	}{
		{"nil pool", nil, good, "pool"},
		{"project with a capital", e.Pool, with(func(c *worker.Config) { c.Project = "Acme" }), "project"},
		{"project with a space", e.Pool, with(func(c *worker.Config) { c.Project = "ac me" }), "project"},
		{"project of 64 characters", e.Pool, with(func(c *worker.Config) { c.Project = strings.Repeat("a", 64) }), "project"},
		{"no actor", e.Pool, with(func(c *worker.Config) { c.Actor = "" }), "actor"},
		{"actor without a kind", e.Pool, with(func(c *worker.Config) { c.Actor = "app" }), "actor"},
		{"actor with a space", e.Pool, with(func(c *worker.Config) { c.Actor = "svc:my app" }), "actor"},
		{"queues without handlers", e.Pool, with(func(c *worker.Config) { c.Queues = map[string]int{"default": 10} }), "Queues"},
		{"empty queues without handlers", e.Pool, with(func(c *worker.Config) { c.Queues = map[string]int{} }), "Queues"},
		{"queues with an empty registry", e.Pool, with(func(c *worker.Config) {
			c.Registry, c.Queues = worker.NewRegistry(), map[string]int{"default": 10}
		}), "Queues"},
		{"sweeps without handlers", e.Pool, with(func(c *worker.Config) {
			c.Sweeps = []worker.Sweep{{Name: "tasks.due", Func: noop}}
		}), "Sweeps"},
		{"a sweep period without handlers", e.Pool, with(func(c *worker.Config) { c.SweepEvery = time.Second }), "SweepEvery"},
		{"a sweep limit without handlers", e.Pool, with(func(c *worker.Config) { c.SweepLimit = 10 }), "SweepLimit"},
		{"an event hook without handlers", e.Pool, with(func(c *worker.Config) { c.OnEvent = func(worker.Event) {} }), "OnEvent"},
		{"an event hook with an empty registry", e.Pool, with(func(c *worker.Config) {
			c.Registry, c.OnEvent = worker.NewRegistry(), func(worker.Event) {}
		}), "OnEvent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := worker.NewClient(tc.pool, tc.cfg)
			wrfRefused(t, err, db.ErrInvalidArgument, tc.mention)
			require.Nil(t, c)
			require.Equal(t, before, wrfSnapshot(t, e.Pool))
		})
	}
}

func TestHandleRefusesInvalidRegistrations(t *testing.T) {
	t.Parallel()
	type other struct{}
	otherKind := jobs.MustKind[other]("billing.other", 1)
	cases := []struct {
		name    string
		kind    jobs.Kind[Invoice]
		nilFunc bool
		opts    []worker.HandlerOptions
		mention string
	}{
		{"the zero kind", jobs.Kind[Invoice]{}, false, nil, "kind"},
		{"a nil func", invoiceKind, true, nil, "nil"},
		{"two options", invoiceKind, false, []worker.HandlerOptions{{}, {}}, "HandlerOptions"},
		{"lease 500ms", invoiceKind, false, []worker.HandlerOptions{{Lease: 500 * time.Millisecond}}, "lease"},
		{"lease 999ms", invoiceKind, false, []worker.HandlerOptions{{Lease: time.Second - time.Millisecond}}, "lease"},
		{"lease 24h and a second", invoiceKind, false, []worker.HandlerOptions{{Lease: jobs.MaxLease + time.Second}}, "lease"},
		{"lease negative", invoiceKind, false, []worker.HandlerOptions{{Lease: -time.Minute}}, "lease"},
		{"timeout negative", invoiceKind, false, []worker.HandlerOptions{{Timeout: -time.Second}}, "timeout"},
		{"schema 0", invoiceKind, false, []worker.HandlerOptions{{Schemas: []int{0}}}, "schema"},
		{"schema negative", invoiceKind, false, []worker.HandlerOptions{{Schemas: []int{2, -1}}}, "schema"},
		{"schema over 32 bits", invoiceKind, false, []worker.HandlerOptions{{Schemas: []int{math.MaxInt32 + 1}}}, "schema"},
		{"revision of 101 bytes", invoiceKind, false, []worker.HandlerOptions{{Revision: strings.Repeat("r", 101)}}, "revision"},
		{"revision of 101 two-byte characters", invoiceKind, false, []worker.HandlerOptions{{Revision: strings.Repeat("é", 101)}}, "revision"},
		{"revision with a space", invoiceKind, false, []worker.HandlerOptions{{Revision: "v1 hotfix"}}, "revision"},
		{"revision with a control character", invoiceKind, false, []worker.HandlerOptions{{Revision: "v1\x00"}}, "revision"},
	}
	// register makes a registry holding billing.other, and billing.invoice
	// too when twice is set.
	register := func(t *testing.T, twice bool) *worker.Registry {
		t.Helper()
		reg := worker.NewRegistry()
		require.NoError(t, worker.Handle(reg, otherKind, func(context.Context, *jobs.Typed[other]) error { return nil }))
		if twice {
			require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error { return nil }))
		}
		return reg
	}
	type call struct {
		name string
		do   func(reg *worker.Registry, kind jobs.Kind[Invoice], nilFunc bool, opts []worker.HandlerOptions) error
	}
	calls := []call{
		{"Handle", func(reg *worker.Registry, kind jobs.Kind[Invoice], nilFunc bool, opts []worker.HandlerOptions) error {
			fn := worker.HandlerFunc[Invoice](func(context.Context, *jobs.Typed[Invoice]) error { return nil })
			if nilFunc {
				fn = nil
			}
			return worker.Handle(reg, kind, fn, opts...)
		}},
		{"HandleResult", func(reg *worker.Registry, kind jobs.Kind[Invoice], nilFunc bool, opts []worker.HandlerOptions) error {
			fn := worker.ResultFunc[Invoice](func(context.Context, *jobs.Typed[Invoice]) (worker.Result, error) {
				return worker.Result{}, nil
			})
			if nilFunc {
				fn = nil
			}
			return worker.HandleResult(reg, kind, fn, opts...)
		}},
	}
	for _, c := range calls {
		for _, tc := range cases {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				reg := register(t, false)
				err := c.do(reg, tc.kind, tc.nilFunc, tc.opts)
				wrfRefused(t, err, db.ErrInvalidArgument, tc.mention)
				require.Equal(t, []string{"billing.other"}, reg.Kinds(), "a refused registration registers nothing")
			})
		}
		t.Run(c.name+"/a kind registered twice", func(t *testing.T) {
			t.Parallel()
			reg := register(t, true)
			err := c.do(reg, invoiceKind, false, []worker.HandlerOptions{{Lease: time.Minute}})
			wrfRefused(t, err, db.ErrInvalidArgument, "billing.invoice")
			require.Equal(t, []string{"billing.invoice", "billing.other"}, reg.Kinds())
		})
	}

	t.Run("the bounds are accepted", func(t *testing.T) {
		t.Parallel()
		reg := worker.NewRegistry()
		require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error { return nil },
			worker.HandlerOptions{Lease: jobs.MaxLease, Schemas: []int{1, 2, math.MaxInt32}, Revision: strings.Repeat("r", 100)}))
		require.NoError(t, worker.Handle(reg, otherKind, func(context.Context, *jobs.Typed[other]) error { return nil },
			worker.HandlerOptions{Lease: jobs.MinLease}))
		require.Equal(t, []string{"billing.invoice", "billing.other"}, reg.Kinds())
	})

	t.Run("a nil registry", func(t *testing.T) {
		t.Parallel()
		var nilReg *worker.Registry
		err := worker.Handle(nilReg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error { return nil })
		wrfRefused(t, err, db.ErrInvalidArgument, "registry")
	})
}

// TestNewClientRefusesInvalidRunConfig gives a client with handlers an option
// outside its bounds.
func TestNewClientRefusesInvalidRunConfig(t *testing.T) {
	t.Parallel()
	e := setup(t)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error { return nil }))
	noop := func(context.Context, *worker.SweepRun) (int, error) { return 0, nil }
	good := worker.Config{Actor: app, Registry: reg, Clock: e.Clock, Deployment: "test", Logger: testLogger}
	with := func(edit func(c *worker.Config)) worker.Config {
		c := good
		edit(&c)
		return c
	}
	queues := func(q string, n int) func(c *worker.Config) {
		return func(c *worker.Config) { c.Queues = map[string]int{"default": 10, q: n} }
	}
	sweeps := func(s ...worker.Sweep) func(c *worker.Config) {
		return func(c *worker.Config) { c.Sweeps = s }
	}
	before := wrfSnapshot(t, e.Pool)

	cases := []struct {
		name    string
		pool    *pgxpool.Pool
		cfg     worker.Config
		mention string
	}{
		{"nil pool", nil, good, "pool"},
		{"project with a capital", e.Pool, with(func(c *worker.Config) { c.Project = "Acme" }), "project"},
		{"no actor", e.Pool, with(func(c *worker.Config) { c.Actor = "" }), "actor"},
		{"actor without a kind", e.Pool, with(func(c *worker.Config) { c.Actor = "app" }), "actor"},
		{"actor with a space", e.Pool, with(func(c *worker.Config) { c.Actor = "svc:my app" }), "actor"},
		{"no queues", e.Pool, with(func(c *worker.Config) { c.Queues = map[string]int{} }), "queues"},
		{"queue with a doubled underscore", e.Pool, with(queues("a__b", 1)), "a__b"},
		{"queue with a trailing hyphen", e.Pool, with(queues("a-", 1)), `"a-"`},
		{"queue with a trailing underscore", e.Pool, with(queues("a_", 1)), `"a_"`},
		{"queue with a hyphen and an underscore", e.Pool, with(queues("a-_b", 1)), "a-_b"},
		{"queue with a capital", e.Pool, with(queues("Default", 1)), "Default"},
		{"queue with a dot", e.Pool, with(queues("billing.fast", 1)), "billing.fast"},
		{"empty queue", e.Pool, with(queues("", 1)), `""`},
		{"queue of 64 characters", e.Pool, with(queues(strings.Repeat("q", 64), 1)), "queue"},
		{"no handlers for a queue", e.Pool, with(queues("fast", 0)), "1..10000"},
		{"negative handlers for a queue", e.Pool, with(queues("fast", -1)), "1..10000"},
		{"10001 handlers for a queue", e.Pool, with(queues("fast", 10001)), "1..10000"},
		{"heartbeat 0.01", e.Pool, with(func(c *worker.Config) { c.Heartbeat = 0.01 }), "heartbeat"},
		{"heartbeat 0.95", e.Pool, with(func(c *worker.Config) { c.Heartbeat = 0.95 }), "heartbeat"},
		{"heartbeat negative", e.Pool, with(func(c *worker.Config) { c.Heartbeat = -0.5 }), "heartbeat"},
		{"batch of 1001", e.Pool, with(func(c *worker.Config) { c.Batch.Max = jobs.MaxClaimBatch + 1 }), "batch"},
		{"batch of -1", e.Pool, with(func(c *worker.Config) { c.Batch.Max = -1 }), "batch"},
		{"batch of MinInt", e.Pool, with(func(c *worker.Config) { c.Batch.Max = math.MinInt }), "batch"},
		{"batch window 101ms", e.Pool, with(func(c *worker.Config) { c.Batch.Window = 101 * time.Millisecond }), "batch window"},
		{"batch window 1h", e.Pool, with(func(c *worker.Config) { c.Batch.Window = time.Hour }), "batch window"},
		{"batch rescan 61s", e.Pool, with(func(c *worker.Config) { c.Batch.Rescan = time.Minute + time.Second }), "batch rescan"},
		{"batch rescan 1h", e.Pool, with(func(c *worker.Config) { c.Batch.Rescan = time.Hour }), "batch rescan"},
		{"batch idle 9ms", e.Pool, with(func(c *worker.Config) { c.Batch.Idle = 9 * time.Millisecond }), "batch idle"},
		{"batch idle 1ns", e.Pool, with(func(c *worker.Config) { c.Batch.Idle = time.Nanosecond }), "batch idle"},
		{"batch idle an hour and a millisecond", e.Pool, with(func(c *worker.Config) { c.Batch.Idle = time.Hour + time.Millisecond }), "batch idle"},
		{"batch idle negative", e.Pool, with(func(c *worker.Config) { c.Batch.Idle = -time.Second }), "batch idle"},
		{"poll interval 9ms", e.Pool, with(func(c *worker.Config) { c.PollInterval = 9 * time.Millisecond }), "poll interval"},
		{"poll interval an hour and a millisecond", e.Pool, with(func(c *worker.Config) { c.PollInterval = time.Hour + time.Millisecond }), "poll interval"},
		{"poll interval negative", e.Pool, with(func(c *worker.Config) { c.PollInterval = -time.Second }), "poll interval"},
		{"sweep period 5ms", e.Pool, with(func(c *worker.Config) { c.SweepEvery = 5 * time.Millisecond }), "sweep period"},
		{"sweep period 2h", e.Pool, with(func(c *worker.Config) { c.SweepEvery = 2 * time.Hour }), "sweep period"},
		{"sweep period negative", e.Pool, with(func(c *worker.Config) { c.SweepEvery = -time.Second }), "sweep period"},
		{"sweep limit 10001", e.Pool, with(func(c *worker.Config) { c.SweepLimit = jobs.MaxSweepBatch + 1 }), "sweep limit"},
		{"sweep limit negative", e.Pool, with(func(c *worker.Config) { c.SweepLimit = -1 }), "sweep limit"},
		{"release timeout negative", e.Pool, with(func(c *worker.Config) { c.ReleaseTimeout = -time.Second }), "release timeout"},
		{"fetch cooldown above the poll interval", e.Pool, with(func(c *worker.Config) {
			c.FetchCooldown, c.FetchPollInterval = time.Second, 100*time.Millisecond
		}), "fetch"},
		{"fetch cooldown negative", e.Pool, with(func(c *worker.Config) { c.FetchCooldown = -time.Millisecond }), "fetch"},
		{"fetch poll interval negative", e.Pool, with(func(c *worker.Config) { c.FetchPollInterval = -time.Millisecond }), "fetch"},
		{"sweep with no name", e.Pool, with(sweeps(worker.Sweep{Func: noop})), "sweep name"},
		{"sweep name with a capital", e.Pool, with(sweeps(worker.Sweep{Name: "Invoices", Func: noop})), "Invoices"},
		{"sweep name starting with a digit", e.Pool, with(sweeps(worker.Sweep{Name: "1x", Func: noop})), "1x"},
		{"sweep name with a space", e.Pool, with(sweeps(worker.Sweep{Name: "due tasks", Func: noop})), "due tasks"},
		{"sweep name of 64 characters", e.Pool, with(sweeps(worker.Sweep{Name: "s" + strings.Repeat("x", 63), Func: noop})), "sweep name"},
		{"sweep with no Func", e.Pool, with(sweeps(worker.Sweep{Name: "tasks.due"})), "tasks.due"},
		{"sweep every 5ms", e.Pool, with(sweeps(worker.Sweep{Name: "tasks.due", Every: 5 * time.Millisecond, Func: noop})), "period"},
		{"sweep every 25h", e.Pool, with(sweeps(worker.Sweep{Name: "tasks.due", Every: 25 * time.Hour, Func: noop})), "period"},
		{"sweep every negative", e.Pool, with(sweeps(worker.Sweep{Name: "tasks.due", Every: -time.Second, Func: noop})), "period"},
		{"two sweeps named alike", e.Pool, with(sweeps(
			worker.Sweep{Name: "tasks.due", Func: noop}, worker.Sweep{Name: "tasks.due", Every: time.Minute, Func: noop},
		)), "tasks.due"},
		{"a sweep named like the lease sweep", e.Pool, with(sweeps(worker.Sweep{Name: worker.SweepLeases, Func: noop})), worker.SweepLeases},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, err := worker.NewClient(tc.pool, tc.cfg)
			wrfRefused(t, err, db.ErrInvalidArgument, tc.mention)
			require.Nil(t, w)
			require.Equal(t, before, wrfSnapshot(t, e.Pool))
		})
	}

	t.Run("heartbeat NaN", func(t *testing.T) {
		t.Parallel()
		w, err := worker.NewClient(e.API, with(func(c *worker.Config) { c.Heartbeat = math.NaN() }))
		wrfRefused(t, err, db.ErrInvalidArgument, "heartbeat")
		require.Nil(t, w)
	})

	t.Run("a malformed deployment", func(t *testing.T) {
		t.Parallel()
		w, err := worker.NewClient(e.API, with(func(c *worker.Config) { c.Deployment = "has space" }))
		wrfRefused(t, err, db.ErrInvalidArgument, "deployment")
		require.Nil(t, w)
	})

	t.Run("the bounds are accepted", func(t *testing.T) {
		t.Parallel()
		for _, cfg := range []worker.Config{
			with(func(c *worker.Config) {
				c.Queues = map[string]int{"a": 1, "a-b_c": 10000, strings.Repeat("q", 63): 5}
				c.Heartbeat, c.SweepEvery, c.SweepLimit = 0.05, 10*time.Millisecond, 1
				c.Batch = worker.Batching{Max: 1, Window: -1, Idle: 10 * time.Millisecond, Rescan: -1}
				c.PollInterval = 10 * time.Millisecond
			}),
			with(func(c *worker.Config) {
				c.Heartbeat, c.SweepEvery, c.SweepLimit = 0.9, time.Hour, jobs.MaxSweepBatch
				c.Batch = worker.Batching{Max: jobs.MaxClaimBatch, Window: 100 * time.Millisecond, Idle: time.Hour, Rescan: time.Minute}
				c.PollInterval = time.Hour
				c.Sweeps = []worker.Sweep{
					{Name: "a", Every: 10 * time.Millisecond, Func: noop},
					{Name: "tasks.due-" + strings.Repeat("x", 53), Every: 24 * time.Hour, Func: noop},
				}
			}),
		} {
			w, err := worker.NewClient(e.API, cfg)
			require.NoError(t, err)
			require.NotNil(t, w)
		}
		require.Equal(t, before, wrfSnapshot(t, e.Pool), "NewClient writes nothing")
	})
}

// TestStartRefusesAnInsertOnlyClient starts clients without handlers, with
// no registry or an empty one: Start refuses, changes nothing, and leaves a
// client that still enqueues.
func TestStartRefusesAnInsertOnlyClient(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, tc := range []struct {
		name string
		reg  *worker.Registry
	}{
		{"no registry", nil},
		{"an empty registry", worker.NewRegistry()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := worker.NewClient(e.API, worker.Config{
				Project: project, Actor: app, Registry: tc.reg, Clock: e.Clock, Deployment: "test", Logger: testLogger,
			})
			require.NoError(t, err, "a client without handlers is insert-only")
			before := wrfSnapshot(t, e.Pool)
			for range 2 {
				wrfRefused(t, c.Start(t.Context()), db.ErrInvalidArgument, "handler")
				require.Equal(t, before, wrfSnapshot(t, e.Pool))
			}
			var decoders int
			require.NoError(t, e.Pool.QueryRow(t.Context(), "SELECT count(*) FROM docket.job_decoders").Scan(&decoders))
			require.Zero(t, decoders, "a refused start records no decoders")
			require.NoError(t, c.Stop(t.Context()), "stopping a client that never started is a no-op")

			enq, err := c.Enqueue(t.Context(), invoiceSpec(t, 1, tc.name))
			require.NoError(t, err, "control: the client enqueues")
			require.Equal(t, jobs.Queued, enq.Job.State)
		})
	}
}

func TestSweepRefusesAnUnknownName(t *testing.T) {
	t.Parallel()
	e := setup(t)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error { return nil }))
	rec := newRecorder()
	w, err := worker.NewClient(e.API, worker.Config{
		Actor: app, Registry: reg, Clock: e.Clock, Deployment: "test", Logger: testLogger, OnEvent: rec.add,
		Sweeps: []worker.Sweep{{Name: "tasks.due", Func: func(context.Context, *worker.SweepRun) (int, error) { return 0, nil }}},
	})
	require.NoError(t, err)
	_, err = e.client.Enqueue(t.Context(), invoiceSpec(t, 1, ""))
	require.NoError(t, err)
	before := wrfSnapshot(t, e.Pool)

	for _, name := range []string{"", "nope", "Leases", "leases ", "tasks", "docket.sweep.leases"} {
		moved, err := w.Sweep(t.Context(), name)
		wrfRefused(t, err, db.ErrInvalidArgument, "no sweep named")
		require.Zero(t, moved)
	}
	require.Equal(t, before, wrfSnapshot(t, e.Pool))
	require.Zero(t, rec.count(func(worker.Event) bool { return true }), "a refused sweep reports no run")

	for _, name := range []string{worker.SweepLeases, "tasks.due"} {
		moved, err := w.Sweep(t.Context(), name)
		require.NoError(t, err, "control: sweep %s is known", name)
		require.Zero(t, moved)
	}
	require.Equal(t, before, wrfSnapshot(t, e.Pool))
}

// wrfWorld is a database with one job enqueued through the worker's client,
// and clients that may not enqueue.
type wrfWorld struct {
	env
	nobody    *worker.Client // no grant at all
	claimer   *worker.Client // job.claim only
	elsewhere *worker.Client // app, in project "nope", which does not exist
	homeless  *worker.Client // app, insert-only, with no project
	before    string
}

func wrfSetup(t *testing.T) wrfWorld {
	t.Helper()
	w := wrfWorld{env: setup(t)}
	const claimer access.Actor = "svc:claimer"
	w.Allow(t, testkit.Grants(claimer, project, access.JobClaim)...)
	clientAs := func(proj string, actor access.Actor) *worker.Client {
		return enqueuerAs(t, w.API, w.Clock, proj, actor)
	}
	w.nobody, w.claimer, w.elsewhere = clientAs(project, nobody), clientAs(project, claimer), clientAs("nope", app)
	w.homeless = clientAs("", app)
	seed := invoiceSpec(t, 1, "seed")
	seed.IdempotencyKey = "seed-key"
	_, err := w.client.Enqueue(t.Context(), seed)
	require.NoError(t, err)
	w.before = wrfSnapshot(t, w.Pool)
	require.Contains(t, w.before, "seed-key", "the snapshot shows the seed")
	require.Zero(t, perJobRiverRows(t, w.Pool), "the seed has no River row of its own")
	return w
}

// refusedEverywhere asserts that each way of enqueueing bad through c, in
// a transaction of its own or the caller's (which the caller then commits),
// alone or third in a batch, is refused with want and writes nothing.
func (w wrfWorld) refusedEverywhere(t *testing.T, c *worker.Client, bad jobs.Spec, want error, mention string) {
	t.Helper()
	ctx := t.Context()
	check := func(how string, err error) {
		t.Helper()
		wrfRefused(t, err, want, mention)
		require.Equal(t, w.before, wrfSnapshot(t, w.Pool), "%s: a refusal changed something", how)
	}
	inCallerTx := func(fn func(tx pgx.Tx) error) error {
		tx, err := w.Pool.Begin(ctx)
		require.NoError(t, err)
		err = fn(tx)
		// The caller commits anyway: whatever the refusal left in its
		// transaction would be written now. (A refusal raised by the
		// database has aborted it, and the commit rolls back.)
		_ = tx.Commit(ctx)
		return err
	}
	good := func(n int) jobs.Spec { return invoiceSpec(t, 100+n, "good") }
	batch := []jobs.Spec{good(1), good(2), bad, good(4)}

	_, err := c.Enqueue(ctx, bad)
	check("Enqueue", err)
	check("EnqueueTx", inCallerTx(func(tx pgx.Tx) error {
		_, err := c.EnqueueTx(ctx, tx, bad)
		return err
	}))
	_, err = c.EnqueueMany(ctx, batch)
	check("EnqueueMany", err)
	check("EnqueueManyTx", inCallerTx(func(tx pgx.Tx) error {
		_, err := c.EnqueueManyTx(ctx, tx, batch)
		return err
	}))
}

func TestClientEnqueueRefusesWithoutWriting(t *testing.T) {
	t.Parallel()
	w := wrfSetup(t)
	cases := []struct {
		name    string
		edit    func(s *jobs.Spec)
		mention string
	}{
		{"queue with a capital", func(s *jobs.Spec) { s.Queue = "Fast" }, "queue"},
		{"queue of 64 characters", func(s *jobs.Spec) { s.Queue = strings.Repeat("q", 64) }, "queue"},
		{"empty kind", func(s *jobs.Spec) { s.Kind = "" }, "kind"},
		{"kind with a capital", func(s *jobs.Spec) { s.Kind = "Billing.invoice" }, "kind"},
		{"kind with an empty segment", func(s *jobs.Spec) { s.Kind = "billing..invoice" }, "kind"},
		{"payload one byte over 1 MiB", func(s *jobs.Spec) {
			s.Payload = json.RawMessage(`"` + strings.Repeat("x", jobs.MaxPayloadBytes-1) + `"`)
		}, ""},
		{"payload of 3 MiB", func(s *jobs.Spec) {
			s.Payload = json.RawMessage(`"` + strings.Repeat("x", 3*jobs.MaxPayloadBytes) + `"`)
		}, ""},
		{"payload not JSON", func(s *jobs.Spec) { s.Payload = json.RawMessage(`{"order": `) }, "payload"},
		{"payload nil", func(s *jobs.Spec) { s.Payload = nil }, "payload"},
		{"lease 500ms", func(s *jobs.Spec) { s.Lease = 500 * time.Millisecond }, "lease"},
		{"priority 5", func(s *jobs.Spec) { s.Priority = 5 }, "priority"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bad := invoiceSpec(t, 7, "")
			tc.edit(&bad)
			w.refusedEverywhere(t, w.client, bad, db.ErrInvalidArgument, tc.mention)
		})
	}

	t.Run("an empty batch", func(t *testing.T) {
		t.Parallel()
		for _, specs := range [][]jobs.Spec{nil, {}} {
			got, err := w.client.EnqueueMany(t.Context(), specs)
			wrfRefused(t, err, db.ErrInvalidArgument, "")
			require.Nil(t, got)
			require.Equal(t, w.before, wrfSnapshot(t, w.Pool))
		}
	})

	t.Run("a batch over the bound", func(t *testing.T) {
		t.Parallel()
		specs := make([]jobs.Spec, jobs.MaxEnqueueBatch+1)
		for i := range specs {
			specs[i] = invoiceSpec(t, i, "")
		}
		_, err := w.client.EnqueueMany(t.Context(), specs)
		wrfRefused(t, err, db.ErrInvalidArgument, "")
		require.Equal(t, w.before, wrfSnapshot(t, w.Pool))
	})

	for _, tc := range []struct {
		name string
		c    *worker.Client
	}{
		{"an actor without grants", w.nobody},
		{"an actor with job.claim only", w.claimer},
		{"a project that does not exist", w.elsewhere},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w.refusedEverywhere(t, tc.c, invoiceSpec(t, 8, ""), db.ErrNotPermitted, "")
			// Not even a duplicate of an existing job is handed out.
			dup := invoiceSpec(t, 1, "seed")
			dup.IdempotencyKey = "seed-key"
			w.refusedEverywhere(t, tc.c, dup, db.ErrNotPermitted, "")
		})
	}

	t.Run("a client without a project", func(t *testing.T) {
		t.Parallel()
		reg := worker.NewRegistry()
		require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error { return nil }))
		runner, err := worker.NewClient(w.API, worker.Config{Actor: app, Registry: reg, Clock: w.Clock, Deployment: "test", Logger: testLogger})
		require.NoError(t, err)
		for _, c := range []*worker.Client{w.homeless, runner} {
			w.refusedEverywhere(t, c, invoiceSpec(t, 8, ""), db.ErrInvalidArgument, "project")
			dup := invoiceSpec(t, 1, "seed")
			dup.IdempotencyKey = "seed-key"
			w.refusedEverywhere(t, c, dup, db.ErrInvalidArgument, "project")
		}
	})

	t.Run("control: good enqueues write their jobs and no River row", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		before := wrfSnapshot(t, e.Pool)
		s := invoiceSpec(t, 9, "")
		s.Queue, s.External = "a__b", true // no worker serves it: an external executor does
		enq, err := e.client.Enqueue(t.Context(), s)
		require.NoError(t, err)
		require.Equal(t, "a__b", enq.Job.Queue)
		_, err = e.client.Enqueue(t.Context(), invoiceSpec(t, 10, ""))
		require.NoError(t, err)
		require.NotEqual(t, before, wrfSnapshot(t, e.Pool), "a good enqueue shows in the snapshot")
		var river int
		require.NoError(t, e.Pool.QueryRow(t.Context(), "SELECT count(*) FROM docket.river_job").Scan(&river))
		require.Zero(t, river, "enqueueing writes no River row: the job is its own record")
	})
}

// TestUnauthorisedWorkerRunsNothing runs a worker whose actor holds job.claim
// only in project beta over a queue holding a job of acme and, enqueued
// after it, one of beta: the claim that takes beta's job passes acme's over,
// and the worker's sweeps do nothing to it. An authorised worker then runs
// it, and leaves beta's alone.
func TestUnauthorisedWorkerRunsNothing(t *testing.T) {
	t.Parallel()
	const beta = "beta"
	// svc:stranger is a well-formed actor that may claim in beta only.
	const stranger access.Actor = "svc:stranger"
	k := testkit.Setup(t, ana, []string{project, beta}, testkit.Join(
		testkit.Grants(app, project, access.JobCreate, access.JobClaim, access.JobCancel, access.JobReconcile),
		testkit.Grants(app, beta, access.JobCreate),
		testkit.Grants(stranger, beta, access.JobClaim),
	)...)
	e := env{Env: k, client: enqueuerAs(t, k.API, k.Clock, project, app)}
	inBeta := enqueuerAs(t, k.API, k.Clock, beta, app)
	ctx := t.Context()
	var runs [3]atomic.Int32
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(_ context.Context, j *jobs.Typed[Invoice]) error {
		runs[j.Args.Order].Add(1)
		return nil
	}))

	enq, err := e.client.Enqueue(ctx, invoiceSpec(t, 1, "acme's"))
	require.NoError(t, err)
	theirs, err := inBeta.Enqueue(ctx, invoiceSpec(t, 2, "beta's"))
	require.NoError(t, err)
	rec := newRecorder()
	outsider := startWorker(t, e, reg, rec, func(c *worker.Config) { c.Actor = stranger })
	rec.waitN(t, 1, is(worker.EventSucceeded, theirs.Job.ID))
	// The sweeps run as the stranger too: run each once more, so that
	// anything they would do to the job is done.
	moved, err := outsider.Sweep(ctx, worker.SweepLeases)
	require.NoError(t, err)
	require.Zero(t, moved, "the lease sweep finds nothing the stranger may move")
	sctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	require.NoError(t, outsider.Stop(sctx))

	require.Zero(t, runs[1].Load(), "the handler never ran acme's job")
	require.EqualValues(t, 1, runs[2].Load())
	require.Zero(t, rec.count(func(ev worker.Event) bool { return ev.JobID == enq.Job.ID }), "the stranger reported nothing of it")
	got, err := e.client.Jobs().Get(ctx, enq.Job.ID)
	require.NoError(t, err)
	require.Equal(t, enq.Job, got, "the job is as it was enqueued")
	require.Equal(t, jobs.Queued, got.State)
	require.Zero(t, got.Attempts)
	var events int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.job_events WHERE job_id = $1", enq.Job.ID).Scan(&events))
	require.Equal(t, 1, events, "only the enqueue is recorded")

	// An authorised worker runs it, and not beta's job, finished already.
	rec2 := newRecorder()
	startWorker(t, e, reg, rec2, nil)
	rec2.waitN(t, 1, is(worker.EventSucceeded, enq.Job.ID))
	require.EqualValues(t, 1, runs[1].Load())
	require.EqualValues(t, 1, runs[2].Load())
	require.Equal(t, jobs.Succeeded, jobState(t, e.Pool, enq.Job.ID))
	require.Zero(t, perJobRiverRows(t, e.Pool))
}
