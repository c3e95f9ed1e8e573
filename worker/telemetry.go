package worker

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/docket-dev/docket/internal/telemetry"
	"github.com/docket-dev/docket/jobs"
)

// attempt is one attempt's telemetry, from its start until its outcome is
// recorded (or refused): its span, when the worker traces, and what its
// measurements are attributed to. A nil *attempt is telemetry off.
type attempt struct {
	tel   *telemetry.Set
	span  trace.Span // nil when the worker does not trace
	job   jobs.Job
	began time.Time // on the worker's clock
	ran   float64   // seconds the handler ran; negative until it returned
	ended bool
}

// attemptKey is the context key of the attempt a handler runs in.
type attemptKey struct{}

// telemetry is the worker's tracer and instruments: nil when it has none.
func (w *Client) telemetry() *telemetry.Set { return telemetry.Of(w.jobs) }

// startAttempt counts the start of an attempt at claimed job j and, when
// the worker traces, starts its span: a consumer span, the root of a trace
// of its own, linked to link, the span that enqueued the job (when the
// job's enqueue was traced). The span is in the context it returns, so a
// handler's own spans are its children. Without telemetry it returns ctx
// and nil, having allocated nothing.
//
// A link, not a parent: a job may run hours after its enqueue, and several
// times; each attempt is a trace of its own that points at the request
// that asked for it, as the OpenTelemetry messaging conventions advise for
// the processing of a message.
func (w *Client) startAttempt(ctx context.Context, j jobs.Job, link trace.SpanContext) (context.Context, *attempt) {
	tel := w.telemetry()
	if tel == nil {
		return ctx, nil
	}
	a := &attempt{tel: tel, job: j, began: w.cfg.Clock.Now(), ran: -1}
	tel.Started(ctx, j.Project, j.Queue, j.Kind, j.ClaimedAt.Sub(j.AvailableAt).Seconds())
	if tel.Tracing() {
		opts := []trace.SpanStartOption{
			trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(
				telemetry.KeyMessagingSystem.String("docket"), telemetry.KeyMessagingOperation.String("process"),
				telemetry.KeyMessagingOpType.String("process"), telemetry.KeyMessagingDestination.String(j.Queue),
				telemetry.KeyMessagingMessageID.String(strconv.FormatInt(j.ID, 10)),
				telemetry.KeyProject.String(j.Project), telemetry.KeyKind.String(j.Kind), telemetry.KeyJobID.Int64(j.ID),
				telemetry.KeyAttempt.Int(j.Attempts)),
		}
		if link.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: link}))
		}
		ctx, a.span = tel.Tracer.Start(ctx, "process "+j.Kind, opts...)
	}
	return context.WithValue(ctx, attemptKey{}, a), a
}

// handlerReturned notes that the attempt's handler returned at now.
func (a *attempt) handlerReturned(now time.Time) {
	if a != nil {
		a.ran = now.Sub(a.began).Seconds()
	}
}

// end records the attempt's outcome, e (and for a failure its class), and
// ends its span. Only the first call counts.
func (a *attempt) end(e Event, class jobs.FailureClass) {
	if a == nil || a.ended {
		return
	}
	a.ended = true
	var outcome string
	switch e.Type {
	case EventSucceeded:
		outcome = telemetry.OutcomeSucceeded
	case EventFailed:
		outcome = telemetry.OutcomeFailed
	case EventReleased:
		outcome = telemetry.OutcomeReleased
	case EventLeaseLost:
		outcome = telemetry.OutcomeLeaseLost
	default:
		outcome = telemetry.OutcomeAbandoned
	}
	ctx := context.Background()
	j := a.job
	a.tel.Finished(ctx, j.Project, j.Queue, j.Kind, outcome, string(class), e.State, a.ran)
	if a.span == nil {
		return
	}
	a.span.SetAttributes(telemetry.KeyOutcome.String(outcome))
	if e.State != "" {
		a.span.SetAttributes(telemetry.KeyState.String(e.State))
	}
	if class != "" {
		a.span.SetAttributes(telemetry.KeyFailureClass.String(string(class)))
	}
	if outcome != telemetry.OutcomeSucceeded && outcome != telemetry.OutcomeReleased {
		msg := outcome
		if e.Err != nil {
			msg = e.Err.Error()
			a.span.RecordError(e.Err)
		}
		a.span.SetStatus(codes.Error, msg)
	}
	a.span.End()
}

// emitAttempt ends the telemetry of the attempt ctx carries with e (class
// for a failure), then reports e as emit does.
func (w *Client) emitAttempt(ctx context.Context, e Event, class jobs.FailureClass) {
	if a, _ := ctx.Value(attemptKey{}).(*attempt); a != nil {
		a.end(e, class)
	}
	w.emit(e)
}

// sweepTelemetry is one sweep run's telemetry: nil without any.
type sweepTelemetry struct {
	tel   *telemetry.Set
	name  string
	began time.Time  // on the worker's Clock, when metering
	span  trace.Span // nil when the worker does not trace
}

// sweepStarted starts the telemetry of a run of sweep name: its start, when
// the worker meters, and its span, when it traces (an internal span, the
// root of a trace of its own: no request asked for the sweep). The span is
// in the context it returns, so the sweep's own spans are its children.
// Without telemetry it returns ctx and nil, and allocates nothing.
func (w *Client) sweepStarted(ctx context.Context, name string) (context.Context, *sweepTelemetry) {
	tel := w.telemetry()
	if !tel.Metering() && !tel.Tracing() {
		return ctx, nil
	}
	st := &sweepTelemetry{tel: tel, name: name}
	if tel.Metering() {
		st.began = w.cfg.Clock.Now()
	}
	if tel.Tracing() {
		ctx, st.span = tel.Tracer.Start(ctx, "sweep "+name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(telemetry.KeySweep.String(name)))
	}
	return ctx, st
}

// sweepEnded records the run st began: it moved moved items, or failed with
// err (and moved none).
func (w *Client) sweepEnded(ctx context.Context, st *sweepTelemetry, moved int, err error) {
	if st == nil {
		return
	}
	if st.tel.Metering() {
		st.tel.Swept(ctx, st.name, w.cfg.Clock.Now().Sub(st.began).Seconds(), moved)
	}
	if st.span != nil {
		st.span.SetAttributes(telemetry.KeySweepMoved.Int(moved))
		telemetry.EndSpan(st.span, err)
	}
}

// linksOf reads, in tx, the contexts of the spans that enqueued claimed,
// when the worker traces: one read per claim. Nil otherwise.
func (w *Client) linksOf(ctx context.Context, tx pgx.Tx, claimed []jobs.Job) (map[int64]trace.SpanContext, error) {
	if len(claimed) == 0 || !w.telemetry().Tracing() {
		return nil, nil
	}
	ids := make([]int64, len(claimed))
	for i, j := range claimed {
		ids[i] = j.ID
	}
	return w.jobs.SpanContextsTx(ctx, tx, ids)
}
