// Package telemetry is the OpenTelemetry machinery packages jobs and worker
// share: one tracer and one set of instruments per client, made once when the
// client is made, and the trace context a job carries from its enqueue to
// its runs. It is not part of docket's API: users set
// jobs.Config.TracerProvider and MeterProvider (or worker.Config's), and
// docs/telemetry.md lists what docket records.
//
// A nil *Set is telemetry off: every method is then a no-op that allocates
// nothing, so callers need no check of their own.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of docket's tracer and meter.
const Scope = "github.com/docket-dev/docket"

// The metrics docket records; docs/telemetry.md describes each.
const (
	MetricEnqueued      = "docket.job.enqueued"
	MetricStarted       = "docket.job.started"
	MetricSucceeded     = "docket.job.succeeded"
	MetricFailed        = "docket.job.failed"
	MetricReleased      = "docket.job.released"
	MetricLeaseLost     = "docket.job.lease_lost"
	MetricAbandoned     = "docket.job.abandoned"
	MetricWait          = "docket.job.wait"
	MetricDuration      = "docket.job.duration"
	MetricSweepDuration = "docket.sweep.duration"
	MetricSweepMoved    = "docket.sweep.moved"
	MetricJobs          = "docket.jobs"
	MetricJobsDue       = "docket.jobs.due"
)

// The attribute keys of docket's metrics and spans.
const (
	KeyProject      = attribute.Key("docket.project")
	KeyQueue        = attribute.Key("docket.queue")
	KeyKind         = attribute.Key("docket.job.kind")
	KeyState        = attribute.Key("docket.job.state")
	KeyFailureClass = attribute.Key("docket.job.failure_class")
	KeyJobID        = attribute.Key("docket.job.id")
	KeyAttempt      = attribute.Key("docket.job.attempt")
	KeyDuplicate    = attribute.Key("docket.job.duplicate")
	KeySweep        = attribute.Key("docket.sweep")
	KeySweepMoved   = attribute.Key("docket.sweep.moved")
	KeyOutcome      = attribute.Key("docket.job.outcome")

	// The OpenTelemetry messaging conventions'.
	KeyMessagingSystem      = attribute.Key("messaging.system")
	KeyMessagingDestination = attribute.Key("messaging.destination.name")
	KeyMessagingOperation   = attribute.Key("messaging.operation.name")
	KeyMessagingOpType      = attribute.Key("messaging.operation.type")
	KeyMessagingMessageID   = attribute.Key("messaging.message.id")
	KeyMessagingBatchCount  = attribute.Key("messaging.batch.message_count")
)

// Set is one client's tracer and instruments. Tracer is nil when tracing is
// off; the instruments are nil when metrics are.
type Set struct {
	Tracer trace.Tracer

	metered       bool
	enqueued      metric.Int64Counter
	started       metric.Int64Counter
	succeeded     metric.Int64Counter
	failed        metric.Int64Counter
	released      metric.Int64Counter
	leaseLost     metric.Int64Counter
	abandoned     metric.Int64Counter
	wait          metric.Float64Histogram
	duration      metric.Float64Histogram
	sweepDuration metric.Float64Histogram
	sweepMoved    metric.Int64Counter

	attrs sync.Map // jobKey → metric.MeasurementOption
}

// New returns the set of tp and mp, either of which may be nil (that signal
// off), or nil when both are. It fails when mp refuses an instrument.
func New(tp trace.TracerProvider, mp metric.MeterProvider) (*Set, error) {
	if tp == nil && mp == nil {
		return nil, nil
	}
	s := &Set{}
	if tp != nil {
		s.Tracer = tp.Tracer(Scope)
	}
	if mp == nil {
		return s, nil
	}
	m := mp.Meter(Scope)
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{job}"))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"),
			metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600))
		errs = append(errs, err)
		return h
	}
	s.enqueued = counter(MetricEnqueued, "Jobs enqueued by this process (duplicates under an idempotency key apart).")
	s.started = counter(MetricStarted, "Attempts this worker started.")
	s.succeeded = counter(MetricSucceeded, "Attempts this worker recorded as succeeded.")
	s.failed = counter(MetricFailed, "Attempts this worker recorded as failed, by failure class and the state the job went to.")
	s.released = counter(MetricReleased, "Attempts whose lease this worker gave back as it stopped.")
	s.leaseLost = counter(MetricLeaseLost, "Attempts whose lease was lost while they ran or before their outcome was recorded.")
	s.abandoned = counter(MetricAbandoned, "Attempts whose outcome the database did not take before their lease expired.")
	s.wait = seconds(MetricWait, "Time from when a job became due (its enqueue, or the end of its retry wait) to the start of an attempt.")
	s.duration = seconds(MetricDuration, "Time a handler ran, on the worker's clock.")
	s.sweepDuration = seconds(MetricSweepDuration, "Time one run of a sweep took, on the worker's clock.")
	var err error
	s.sweepMoved, err = m.Int64Counter(MetricSweepMoved, metric.WithDescription("Items sweeps moved."), metric.WithUnit("{item}"))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	s.metered = true
	return s, nil
}

// Tracing reports whether s traces.
func (s *Set) Tracing() bool { return s != nil && s.Tracer != nil }

// Metering reports whether s records metrics.
func (s *Set) Metering() bool { return s != nil && s.metered }

// jobKey is what a job's measurements are attributed to.
type jobKey struct{ project, queue, kind string }

// jobAttrs is the measurement option of a job's project, queue and kind,
// made once per triple.
func (s *Set) jobAttrs(project, queue, kind string) metric.MeasurementOption {
	k := jobKey{project, queue, kind}
	if o, ok := s.attrs.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	o := metric.WithAttributeSet(attribute.NewSet(KeyProject.String(project), KeyQueue.String(queue), KeyKind.String(kind)))
	s.attrs.Store(k, o)
	return o
}

// Enqueued counts n jobs of kind enqueued into project's queue.
func (s *Set) Enqueued(ctx context.Context, project, queue, kind string, n int64, duplicate bool) {
	if !s.Metering() || n == 0 {
		return
	}
	if duplicate {
		s.enqueued.Add(ctx, n, s.jobAttrs(project, queue, kind), metric.WithAttributes(KeyDuplicate.Bool(true)))
		return
	}
	s.enqueued.Add(ctx, n, s.jobAttrs(project, queue, kind))
}

// Started records the start of an attempt that waited wait seconds since
// the job fell due.
func (s *Set) Started(ctx context.Context, project, queue, kind string, wait float64) {
	if !s.Metering() {
		return
	}
	a := s.jobAttrs(project, queue, kind)
	s.started.Add(ctx, 1, a)
	s.wait.Record(ctx, max(wait, 0), a)
}

// The outcomes [Set.Finished] records.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeReleased  = "released"
	OutcomeLeaseLost = "lease_lost"
	OutcomeAbandoned = "abandoned"
)

// Finished records an attempt's outcome: for a failure, its class and the
// state the job went to; ran is how long the handler ran, in seconds, or
// negative when it is not known.
func (s *Set) Finished(ctx context.Context, project, queue, kind, outcome, class, state string, ran float64) {
	if !s.Metering() {
		return
	}
	a := s.jobAttrs(project, queue, kind)
	switch outcome {
	case OutcomeSucceeded:
		s.succeeded.Add(ctx, 1, a)
	case OutcomeFailed:
		s.failed.Add(ctx, 1, a, metric.WithAttributes(KeyFailureClass.String(class), KeyState.String(state)))
	case OutcomeReleased:
		s.released.Add(ctx, 1, a)
	case OutcomeLeaseLost:
		s.leaseLost.Add(ctx, 1, a)
	case OutcomeAbandoned:
		s.abandoned.Add(ctx, 1, a)
	}
	if ran >= 0 {
		s.duration.Record(ctx, ran, a, metric.WithAttributes(KeyOutcome.String(outcome)))
	}
}

// Swept records one run of sweep name: how long it took, in seconds, and
// how many items it moved.
func (s *Set) Swept(ctx context.Context, name string, took float64, moved int) {
	if !s.Metering() {
		return
	}
	a := metric.WithAttributes(KeySweep.String(name))
	s.sweepDuration.Record(ctx, max(took, 0), a)
	if moved > 0 {
		s.sweepMoved.Add(ctx, int64(moved), a)
	}
}

// Carrier is a span context as a job stores it: the W3C traceparent and
// tracestate.
type Carrier struct{ Traceparent, Tracestate string }

var w3c propagation.TraceContext

// EndSpan ends span, when there is one, with err, when not nil, recorded
// and as its status.
func EndSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Inject returns the carrier of sc, and false when sc is not valid or not
// sampled: a span nobody records is not worth a row.
func Inject(sc trace.SpanContext) (Carrier, bool) {
	if !sc.IsValid() || !sc.IsSampled() {
		return Carrier{}, false
	}
	m := propagation.MapCarrier{}
	w3c.Inject(trace.ContextWithSpanContext(context.Background(), sc), m)
	return Carrier{Traceparent: m["traceparent"], Tracestate: m["tracestate"]}, m["traceparent"] != ""
}

// Extract returns the span context c holds, marked remote; an invalid one
// when c holds none.
func Extract(c Carrier) trace.SpanContext {
	m := propagation.MapCarrier{"traceparent": c.Traceparent}
	if c.Tracestate != "" {
		m["tracestate"] = c.Tracestate
	}
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), m))
}

// of is how to get a job client's set, registered by package jobs.
var of func(client any) *Set

// Register records how to get the set of a job client. Package jobs calls
// it once, at init.
func Register(f func(client any) *Set) { of = f }

// Of returns the set of client, a *jobs.Client: nil when it has none.
func Of(client any) *Set {
	if of == nil {
		panic("telemetry: no job client registered: import package jobs")
	}
	return of(client)
}
