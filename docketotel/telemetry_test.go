package docketotel_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/docketotel"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

const project, ana, app = testkit.Acme, testkit.Ana, testkit.App

// waitLimit bounds every wait for a worker or a process: reached, the test
// fails.
const waitLimit = 60 * time.Second

// order is the tests' payload: Mode says what its handler does.
type order struct {
	ID   int    `json:"id"`
	Mode string `json:"mode,omitempty"`
}

var orderKind = jobs.MustKind[order]("shop.order", 1)

func setup(t *testing.T) testkit.Env {
	t.Helper()
	return testkit.Setup(t, ana, []string{project},
		testkit.Grants(app, project, access.JobCreate, access.JobClaim, access.JobCancel, access.JobReconcile)...)
}

func spec(t *testing.T, id int, mode string) jobs.Spec {
	t.Helper()
	s, err := orderKind.Spec(order{ID: id, Mode: mode})
	require.NoError(t, err)
	return s
}

// events collects a worker's events and lets a test wait for some.
type events struct {
	mu     sync.Mutex
	seen   []worker.Event
	signal chan struct{}
}

func newEvents() *events { return &events{signal: make(chan struct{}, 1)} }

func (r *events) add(e worker.Event) {
	r.mu.Lock()
	r.seen = append(r.seen, e)
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

func (r *events) count(typ worker.EventType) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.seen {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func (r *events) wait(t *testing.T, typ worker.EventType, n int) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for r.count(typ) < n {
		select {
		case <-r.signal:
		case <-deadline.C:
			t.Fatalf("waited %v for %d %s events; have %d", waitLimit, n, typ, r.count(typ))
		}
	}
}

// startWorker starts a worker running reg's handlers as app on e's pool and
// clock, with tune's changes, and stops it when the test ends.
func startWorker(t *testing.T, e testkit.Env, reg *worker.Registry, ev *events, tune func(*worker.Config)) *worker.Client {
	t.Helper()
	cfg := worker.Config{
		Actor: app, Registry: reg, Clock: e.Clock, Deployment: "test", Logger: testkit.Logger,
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		SweepEvery: time.Hour, PollInterval: 50 * time.Millisecond, OnEvent: ev.add,
	}
	if tune != nil {
		tune(&cfg)
	}
	w, err := worker.NewClient(e.API, cfg)
	require.NoError(t, err)
	testkit.Start(t, w)
	return w
}

func traceRows(t *testing.T, e testkit.Env) int {
	t.Helper()
	var n int
	require.NoError(t, e.Pool.QueryRow(context.Background(), "SELECT count(*) FROM docket.job_traces").Scan(&n))
	return n
}

// The span that enqueues a job, in one process, in the transaction of its
// request, and the span that runs it, in another process, are linked: the
// run span's link is the enqueue span's trace and span, and the run span
// starts a trace of its own. The enqueue span is a child of the request's.
func TestRunSpanLinksToEnqueueInAnotherProcess(t *testing.T) {
	t.Parallel()
	e := setup(t)
	child := enqueueInChild(t, e, e.Login(t, testkit.AppRole, app))
	require.NotZero(t, child.Job)
	require.Equal(t, "enqueue shop.order", child.EnqueueKind)
	require.Equal(t, child.RequestTrace, child.EnqueueTrace, "the enqueue span is in its request's trace")
	require.Equal(t, child.RequestSpan, child.EnqueueParent, "and a child of the request's span")
	require.Equal(t, 1, traceRows(t, e))

	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	handlerSpan := make(chan trace.SpanContext, 1)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, orderKind, func(ctx context.Context, j *jobs.Typed[order]) error {
		handlerSpan <- trace.SpanContextFromContext(ctx)
		return nil
	}, worker.HandlerOptions{}))
	ev := newEvents()
	startWorker(t, e, reg, ev, func(c *worker.Config) { c.TracerProvider = tp })
	ev.wait(t, worker.EventSucceeded, 1)

	var run sdktrace.ReadOnlySpan
	for _, s := range recorder.Ended() {
		if s.SpanKind() == trace.SpanKindConsumer {
			require.Nil(t, run, "one run span")
			run = s
		}
	}
	require.NotNil(t, run, "the run span ended once the success was recorded")
	require.Equal(t, "process shop.order", run.Name())
	require.Len(t, run.Links(), 1)
	link := run.Links()[0].SpanContext
	require.Equal(t, child.EnqueueTrace, link.TraceID().String(), "the run span links to the enqueue span's trace")
	require.Equal(t, child.EnqueueSpan, link.SpanID().String(), "and to the enqueue span")
	require.True(t, link.IsRemote())
	require.NotEqual(t, child.EnqueueTrace, run.SpanContext().TraceID().String(), "each attempt is a trace of its own")
	require.False(t, run.Parent().IsValid(), "a root")
	require.Equal(t, run.SpanContext(), <-handlerSpan, "the handler's context carries the run span")
	attrs := attribute.NewSet(run.Attributes()...)
	for k, want := range map[attribute.Key]attribute.Value{
		"docket.job.id": attribute.Int64Value(child.Job), "docket.job.attempt": attribute.IntValue(1),
		"docket.job.kind": attribute.StringValue("shop.order"), "docket.project": attribute.StringValue(project),
		"messaging.destination.name": attribute.StringValue("default"), "docket.job.outcome": attribute.StringValue("succeeded"),
		"docket.job.state": attribute.StringValue("succeeded"),
	} {
		got, ok := attrs.Value(k)
		require.True(t, ok, "attribute %s", k)
		require.Equal(t, want, got, "attribute %s", k)
	}
}

// After a known run — eight jobs enqueued at T0, claimed at T0+3s, their
// handlers running 2 s on the worker's clock: five succeed, two fail
// permanently, one is cancelled while it runs and loses its lease — every
// metric reads exactly what happened; a sweep that moves one expired lease
// is measured; and the census reads the unfinished jobs.
func TestMetricsAfterAKnownRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	enq, err := worker.NewClient(e.API, worker.Config{Project: project, Actor: app, Clock: e.Clock, MeterProvider: mp})
	require.NoError(t, err)

	modes := []string{"ok", "ok", "permanent", "ok", "stuck", "ok", "permanent", "ok"}
	var stuck int64
	for i, m := range modes {
		s := spec(t, i, m)
		if m == "stuck" {
			s.Lease = 3 * time.Second // renewed every second: its loss is seen within one
		}
		got, err := enq.Enqueue(ctx, s)
		require.NoError(t, err)
		if m == "stuck" {
			stuck = got.Job.ID
		}
	}
	_, err = enq.Enqueue(ctx, spec(t, 0, "ok")) // no key: a new job, not served below
	require.NoError(t, err)

	// Off the served queue: one due, one later, and one whose lease expires.
	later := spec(t, 100, "")
	later.Queue = "later"
	_, err = enq.EnqueueMany(ctx, []jobs.Spec{later, func() jobs.Spec { s := later; s.AvailableAt = e.Clock.Now().Add(time.Hour); return s }()})
	require.NoError(t, err)
	sweepme := spec(t, 200, "")
	sweepme.Queue, sweepme.Lease = "sweepme", time.Second
	sw, err := enq.Enqueue(ctx, sweepme)
	require.NoError(t, err)

	e.Clock.Advance(3 * time.Second)
	started := make(chan struct{}, len(modes)+1)
	release := make(chan struct{})
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, orderKind, func(ctx context.Context, j *jobs.Typed[order]) error {
		started <- struct{}{}
		if j.Args.Mode == "stuck" {
			<-ctx.Done()
			return ctx.Err()
		}
		<-release
		if j.Args.Mode == "permanent" {
			return worker.Fail(jobs.ClassPermanent, errors.New("no such customer"))
		}
		return nil
	}, worker.HandlerOptions{}))
	ev := newEvents()
	w := startWorker(t, e, reg, ev, func(c *worker.Config) {
		c.MeterProvider = mp
		c.Queues = map[string]int{"default": 8} // the ninth job waits
	})
	for range modes {
		select {
		case <-started:
		case <-time.After(waitLimit):
			t.Fatal("the handlers did not all start")
		}
	}
	e.Clock.Advance(2 * time.Second)
	close(release)
	ev.wait(t, worker.EventSucceeded, 5)
	ev.wait(t, worker.EventFailed, 2)
	_, err = enq.Jobs().Cancel(ctx, stuck, "withdrawn")
	require.NoError(t, err)
	ev.wait(t, worker.EventLeaseLost, 1)

	// The ninth runs now that there is room; wait for it, then sweep.
	ev.wait(t, worker.EventSucceeded, 6)
	claimer, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	_, ok, err := claimer.ClaimID(ctx, sw.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	e.Clock.Advance(2 * time.Second)
	moved, err := w.Sweep(ctx, worker.SweepLeases)
	require.NoError(t, err)
	require.Equal(t, 1, moved)

	census, err := docketotel.NewCensus(e.API, docketotel.CensusConfig{Actor: app, MeterProvider: mp, Clock: e.Clock})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, census.Close()) })

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	m := collected(rm)
	job := []attribute.KeyValue{attribute.String("docket.project", project), attribute.String("docket.queue", "default"),
		attribute.String("docket.job.kind", "shop.order")}
	with := func(kv ...attribute.KeyValue) []attribute.KeyValue {
		return append(append([]attribute.KeyValue{}, job...), kv...)
	}

	require.Equal(t, int64(9), m.sum(t, "docket.job.enqueued", job...))
	require.Equal(t, int64(1), m.sum(t, "docket.job.enqueued", attribute.String("docket.queue", "sweepme")))
	require.Equal(t, int64(2), m.sum(t, "docket.job.enqueued", attribute.String("docket.queue", "later")))
	require.Equal(t, int64(9), m.sum(t, "docket.job.started", job...))
	require.Equal(t, int64(6), m.sum(t, "docket.job.succeeded", job...))
	require.Equal(t, int64(2), m.sum(t, "docket.job.failed", with(attribute.String("docket.job.failure_class", "permanent"),
		attribute.String("docket.job.state", "failed"))...))
	require.Equal(t, int64(1), m.sum(t, "docket.job.lease_lost", job...))
	require.Zero(t, m.sum(t, "docket.job.released"))
	require.Zero(t, m.sum(t, "docket.job.abandoned"))

	// Eight waited 3 s; the ninth, claimed once a slot freed at T0+5s, 5 s.
	require.Equal(t, histogram{count: 9, sum: 8*3 + 5}, m.histogram(t, "docket.job.wait", job...))
	require.Equal(t, histogram{count: 6, sum: 5 * 2}, m.histogram(t, "docket.job.duration",
		with(attribute.String("docket.job.outcome", "succeeded"))...))
	require.Equal(t, histogram{count: 2, sum: 2 * 2}, m.histogram(t, "docket.job.duration",
		with(attribute.String("docket.job.outcome", "failed"))...))
	require.Equal(t, histogram{count: 1, sum: 2}, m.histogram(t, "docket.job.duration",
		with(attribute.String("docket.job.outcome", "lease_lost"))...))
	require.Equal(t, histogram{count: 1, sum: 0}, m.histogram(t, "docket.sweep.duration", attribute.String("docket.sweep", "leases")))
	require.Equal(t, int64(1), m.sum(t, "docket.sweep.moved", attribute.String("docket.sweep", "leases")))

	require.Equal(t, int64(2), m.gauge(t, "docket.jobs", attribute.String("docket.queue", "later"), attribute.String("docket.job.state", "queued")))
	require.Equal(t, int64(1), m.gauge(t, "docket.jobs.due", attribute.String("docket.queue", "later")))
	require.Equal(t, int64(1), m.gauge(t, "docket.jobs", attribute.String("docket.queue", "sweepme"), attribute.String("docket.job.state", "uncertain")))
	require.Equal(t, 2, m.points("docket.jobs"), "no gauge for the served queue, whose jobs are all finished")
}

// collected indexes a collection by metric name.
type collected metricdata.ResourceMetrics

func (c collected) find(name string) (metricdata.Metrics, bool) {
	for _, sm := range c.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// has reports whether set holds every one of kvs.
func has(set attribute.Set, kvs []attribute.KeyValue) bool {
	for _, kv := range kvs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum adds up counter name's points whose attributes hold kvs: 0 when it has
// none.
func (c collected) sum(t *testing.T, name string, kvs ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := c.find(name)
	if !ok {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is an int64 sum, not %T", name, m.Data)
	var n int64
	for _, p := range s.DataPoints {
		if has(p.Attributes, kvs) {
			n += p.Value
		}
	}
	return n
}

type histogram struct {
	count uint64
	sum   float64
}

func (c collected) histogram(t *testing.T, name string, kvs ...attribute.KeyValue) histogram {
	t.Helper()
	m, ok := c.find(name)
	require.True(t, ok, "no metric %s", name)
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a float64 histogram, not %T", name, m.Data)
	var out histogram
	for _, p := range h.DataPoints {
		if has(p.Attributes, kvs) {
			out.count += p.Count
			out.sum += p.Sum
		}
	}
	return out
}

func (c collected) gauge(t *testing.T, name string, kvs ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := c.find(name)
	require.True(t, ok, "no metric %s", name)
	g, ok := m.Data.(metricdata.Gauge[int64])
	require.True(t, ok, "%s is an int64 gauge, not %T", name, m.Data)
	var n int64
	for _, p := range g.DataPoints {
		if has(p.Attributes, kvs) {
			n += p.Value
		}
	}
	return n
}

func (c collected) points(name string) int {
	m, ok := c.find(name)
	if !ok {
		return 0
	}
	if g, ok := m.Data.(metricdata.Gauge[int64]); ok {
		return len(g.DataPoints)
	}
	return -1
}

// Without providers, nothing is traced or written beside the jobs: no
// job_traces row for Enqueue, EnqueueTx or EnqueueMany, and the worker runs
// them as before. A span that is not sampled writes no row either.
func TestNoProviderWritesNoTrace(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	plain, err := worker.NewClient(e.API, worker.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	unsampled, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock,
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))})
	require.NoError(t, err)

	_, err = plain.Enqueue(ctx, spec(t, 1, "ok"))
	require.NoError(t, err)
	require.NoError(t, db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		_, err := plain.EnqueueTx(ctx, tx, spec(t, 2, "ok"))
		return err
	}))
	_, err = plain.EnqueueMany(ctx, []jobs.Spec{spec(t, 3, "ok"), spec(t, 4, "ok")})
	require.NoError(t, err)
	_, err = unsampled.Enqueue(ctx, spec(t, 5, "ok"))
	require.NoError(t, err)
	_, err = unsampled.EnqueueMany(ctx, []jobs.Spec{spec(t, 6, "ok")})
	require.NoError(t, err)
	require.Zero(t, traceRows(t, e))

	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, orderKind, func(ctx context.Context, j *jobs.Typed[order]) error {
		if trace.SpanContextFromContext(ctx).IsValid() {
			return errors.New("a span without a provider")
		}
		return nil
	}, worker.HandlerOptions{}))
	ev := newEvents()
	startWorker(t, e, reg, ev, nil)
	ev.wait(t, worker.EventSucceeded, 6)
	require.Zero(t, ev.count(worker.EventFailed))
	require.Zero(t, traceRows(t, e))
}

// A retryable failure is counted with its class and the state it sent the
// job to, and its span is an error; a handler cancelled by a hard stop has
// its lease released, counted, and its span is not an error.
func TestRetriesAndReleasesAreCounted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	running := make(chan struct{}, 2)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, orderKind, func(ctx context.Context, j *jobs.Typed[order]) error {
		running <- struct{}{}
		if j.Args.Mode == "stuck" {
			<-ctx.Done()
			return ctx.Err()
		}
		return errors.New("the gateway timed out")
	}, worker.HandlerOptions{}))
	ev := newEvents()
	cfg := worker.Config{
		Project: project, Actor: app, Registry: reg, Clock: e.Clock, Deployment: "test", Logger: testkit.Logger,
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		SweepEvery: time.Hour, PollInterval: 50 * time.Millisecond, OnEvent: ev.add,
		TracerProvider: tp, MeterProvider: mp, ReleaseTimeout: waitLimit,
	}
	w, err := worker.NewClient(e.API, cfg)
	require.NoError(t, err)
	for i, m := range []string{"retry", "stuck"} {
		_, err := w.Enqueue(ctx, spec(t, i, m))
		require.NoError(t, err)
	}
	require.NoError(t, w.Start(ctx))
	ev.wait(t, worker.EventFailed, 1)
	for range 2 {
		<-running
	}
	stop, cancel := context.WithCancel(ctx)
	cancel() // no grace: the stuck handler is cancelled at once
	require.ErrorIs(t, w.Stop(stop), context.Canceled)
	ev.wait(t, worker.EventReleased, 1)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	m := collected(rm)
	require.Equal(t, int64(2), m.sum(t, "docket.job.started"))
	require.Equal(t, int64(1), m.sum(t, "docket.job.failed", attribute.String("docket.job.failure_class", "retryable"),
		attribute.String("docket.job.state", "queued")))
	require.Equal(t, int64(1), m.sum(t, "docket.job.released"))
	require.Zero(t, m.sum(t, "docket.job.succeeded"))

	outcomes := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range recorder.Ended() {
		if s.SpanKind() != trace.SpanKindConsumer {
			continue
		}
		set := attribute.NewSet(s.Attributes()...)
		v, _ := set.Value("docket.job.outcome")
		outcomes[v.AsString()] = s
	}
	require.Len(t, outcomes, 2)
	require.Equal(t, "Error", outcomes["failed"].Status().Code.String())
	require.Equal(t, "the gateway timed out", outcomes["failed"].Status().Description)
	require.Equal(t, "Unset", outcomes["released"].Status().Code.String())
	require.Len(t, outcomes["released"].Links(), 1, "enqueued by a traced client, linked")
}

// Each run of a sweep is an internal span, the root of a trace of its own,
// named for the sweep, with how many items it moved; the sweep's own spans
// are its children, and a sweep that fails ends its span with the error.
func TestASweepRunIsASpan(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	refused := errors.New("the ledger is closed")
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, orderKind, func(context.Context, *jobs.Typed[order]) error { return nil }, worker.HandlerOptions{}))
	w := startWorker(t, e, reg, newEvents(), func(c *worker.Config) {
		c.TracerProvider = tp
		c.Sweeps = []worker.Sweep{
			{Name: "ledger", Func: func(ctx context.Context, run *worker.SweepRun) (int, error) {
				_, span := tp.Tracer("test").Start(ctx, "close ledger")
				span.End()
				return 2, nil
			}},
			{Name: "broken", Func: func(context.Context, *worker.SweepRun) (int, error) { return 0, refused }},
		}
	})
	_, err := w.Sweep(ctx, worker.SweepLeases)
	require.NoError(t, err)
	moved, err := w.Sweep(ctx, "ledger")
	require.NoError(t, err)
	require.Equal(t, 2, moved)
	_, err = w.Sweep(ctx, "broken")
	require.ErrorIs(t, err, refused)

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range recorder.Ended() {
		spans[s.Name()] = s
	}
	for name, want := range map[string]int{"leases": 0, "ledger": 2, "broken": 0} {
		s := spans["sweep "+name]
		require.NotNil(t, s, "a span for sweep %s", name)
		require.Equal(t, trace.SpanKindInternal, s.SpanKind())
		require.False(t, s.Parent().IsValid(), "a root")
		attrs := attribute.NewSet(s.Attributes()...)
		got, _ := attrs.Value("docket.sweep")
		require.Equal(t, attribute.StringValue(name), got)
		got, _ = attrs.Value("docket.sweep.moved")
		require.Equal(t, attribute.IntValue(want), got, "sweep %s", name)
	}
	require.Equal(t, codes.Unset, spans["sweep ledger"].Status().Code)
	require.Equal(t, codes.Error, spans["sweep broken"].Status().Code)
	require.Contains(t, spans["sweep broken"].Status().Description, "the ledger is closed")
	child := spans["close ledger"]
	require.NotNil(t, child)
	require.Equal(t, spans["sweep ledger"].SpanContext().SpanID(), child.Parent().SpanID(), "the sweep's own span is its child")
}
