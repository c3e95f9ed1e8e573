package jobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
	"github.com/docket-dev/docket/internal/telemetry"
)

func init() {
	telemetry.Register(func(client any) *telemetry.Set { return client.(*Client).tel })
}

// enqueueObserved is enqueueOne in an enqueue span, counted: when the span
// is sampled, its context is stored with the job it creates (not with a
// duplicate, which keeps the context of its own enqueue) by the same
// statement, so whoever runs the job can link to it.
func (c *Client) enqueueObserved(ctx context.Context, q db.DBTX, spec Spec) (Enqueued, error) {
	queue := spec.Resolved(c.clock.Now()).Queue
	ctx, span := c.startEnqueue(ctx, spec.Kind, queue, 1)
	var carrier *telemetry.Carrier
	if span != nil {
		if cr, ok := telemetry.Inject(span.SpanContext()); ok {
			carrier = &cr
		}
	}
	e, err := c.enqueueOne(ctx, q, spec, carrier)
	if err == nil {
		c.tel.Enqueued(ctx, c.project, queue, spec.Kind, 1, e.Duplicate)
		if span != nil {
			span.SetAttributes(telemetry.KeyMessagingMessageID.String(fmt.Sprint(e.Job.ID)), telemetry.KeyJobID.Int64(e.Job.ID),
				telemetry.KeyDuplicate.Bool(e.Duplicate))
		}
	}
	telemetry.EndSpan(span, err)
	return e, err
}

// tracedParams is p with the trace context c to store beside the job.
func tracedParams(p dbsqlc.JobEnqueueOneParams, c telemetry.Carrier) dbsqlc.JobEnqueueOneTracedParams {
	return dbsqlc.JobEnqueueOneTracedParams{
		Project: p.Project, Actor: p.Actor, Now: p.Now, Kind: p.Kind, Queue: p.Queue, Priority: p.Priority,
		Payload: p.Payload, PayloadSchema: p.PayloadSchema, Key: p.Key, AvailableAt: p.AvailableAt,
		MaxAttempts: p.MaxAttempts, Repeatable: p.Repeatable, External: p.External, Lease: p.Lease,
		BackoffBase: p.BackoffBase, BackoffCap: p.BackoffCap, BackoffJitter: p.BackoffJitter, Params: p.Params,
		Inputs: p.Inputs, Output: p.Output, LaneID: p.LaneID, CaseID: p.CaseID, CompensationKind: p.CompensationKind,
		OutputKind: p.OutputKind, Root: p.Root, Budget: p.Budget,
		Traceparent: c.Traceparent, Tracestate: c.Tracestate,
	}
}

// enqueueManyObserved is enqueueBatch in one enqueue span, as
// enqueueObserved is enqueueOne.
func (c *Client) enqueueManyObserved(ctx context.Context, q db.DBTX, specs []Spec) ([]Receipt, error) {
	now := c.clock.Now()
	kind, queue := "", ""
	for i, s := range specs {
		r := s.Resolved(now)
		if i == 0 || (kind == r.Kind && queue == r.Queue) {
			kind, queue = r.Kind, r.Queue
			continue
		}
		kind, queue = "", ""
		break
	}
	ctx, span := c.startEnqueue(ctx, kind, queue, len(specs))
	var out []Receipt
	err := c.withTrace(ctx, q, span, func(q db.DBTX) ([]int64, error) {
		var err error
		if out, err = c.enqueueBatch(ctx, q, specs); err != nil {
			return nil, err
		}
		ids := make([]int64, 0, len(out))
		for _, r := range out {
			if !r.Duplicate {
				ids = append(ids, r.ID)
			}
		}
		return ids, nil
	})
	if err == nil && c.tel.Metering() {
		type group struct {
			queue, kind string
			duplicate   bool
		}
		counts := map[group]int64{}
		for i, s := range specs {
			counts[group{s.Resolved(now).Queue, s.Kind, out[i].Duplicate}]++
		}
		for g, n := range counts {
			c.tel.Enqueued(ctx, c.project, g.queue, g.kind, n, g.duplicate)
		}
	}
	telemetry.EndSpan(span, err)
	return out, err
}

// startEnqueue starts the enqueue span of n jobs, when the client traces:
// a producer span, as the OpenTelemetry messaging conventions have it,
// named for the jobs' kind when they have one. It returns a nil span when
// the client does not trace.
func (c *Client) startEnqueue(ctx context.Context, kind, queue string, n int) (context.Context, trace.Span) {
	if !c.tel.Tracing() {
		return ctx, nil
	}
	name := "enqueue"
	if kind != "" {
		name += " " + kind
	}
	attrs := []attribute.KeyValue{
		telemetry.KeyMessagingSystem.String("docket"), telemetry.KeyMessagingOperation.String("enqueue"),
		telemetry.KeyMessagingOpType.String("send"), telemetry.KeyProject.String(c.project),
	}
	if kind != "" {
		attrs = append(attrs, telemetry.KeyKind.String(kind))
	}
	if queue != "" {
		attrs = append(attrs, telemetry.KeyMessagingDestination.String(queue))
	}
	if n > 1 {
		attrs = append(attrs, telemetry.KeyMessagingBatchCount.Int(n))
	}
	return c.tel.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
}

// withTrace runs write, which enqueues a batch and returns the ids of the
// jobs it created, on q, and stores span's context with those jobs in the
// same transaction, in one more statement. On the client's pool, that takes a transaction of its own;
// without a sampled span there is nothing to store, and write runs on q as
// it would untraced.
func (c *Client) withTrace(ctx context.Context, q db.DBTX, span trace.Span, write func(q db.DBTX) ([]int64, error)) error {
	var carrier telemetry.Carrier
	ok := false
	if span != nil {
		carrier, ok = telemetry.Inject(span.SpanContext())
	}
	if !ok {
		_, err := write(q)
		return err
	}
	put := func(q db.DBTX) error {
		ids, err := write(q)
		if err != nil || len(ids) == 0 {
			return err
		}
		_, err = queries.JobTracePut(ctx, q, dbsqlc.JobTracePutParams{
			Ids: ids, Traceparent: carrier.Traceparent, Tracestate: carrier.Tracestate, Actor: string(c.actor), Now: c.clock.Now(),
		})
		return db.Translate(err, "job.trace_put", "project", c.project)
	}
	if q == db.DBTX(c.pool) {
		return c.inTx(ctx, func(tx pgx.Tx) error { return put(tx) })
	}
	return put(q)
}

// SpanContexts returns the context of the span that enqueued each of jobs
// ids, by id, for the span that runs a job to link to: what a claimant
// outside docket's worker (an external executor) needs to continue the
// trace. A job enqueued by a client without a TracerProvider (or in a span
// not sampled), or one the actor may not read, has none and is left out.
// See [Client.SpanContextsTx].
func (c *Client) SpanContexts(ctx context.Context, ids []int64) (map[int64]trace.SpanContext, error) {
	return c.spanContexts(ctx, c.pool, ids)
}

// SpanContextsTx is [Client.SpanContexts] read in tx, the caller's
// transaction: it sees the jobs tx has written and not yet committed, and
// writes nothing itself, so commit and rollback change nothing it did. It
// refuses more than [MaxSweepBatch] ids with [db.ErrInvalidArgument].
func (c *Client) SpanContextsTx(ctx context.Context, tx pgx.Tx, ids []int64) (map[int64]trace.SpanContext, error) {
	return c.spanContexts(ctx, tx, ids)
}

// spanContexts is [Client.SpanContextsTx] on q: the client's pool or the caller's transaction.
func (c *Client) spanContexts(ctx context.Context, q db.DBTX, ids []int64) (map[int64]trace.SpanContext, error) {
	if len(ids) > MaxSweepBatch {
		return nil, db.Refuse(db.ErrInvalidArgument, "job.span_contexts", fmt.Sprintf("%d ids is more than %d", len(ids), MaxSweepBatch))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := queries.JobTraces(ctx, q, ids, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "job.span_contexts")
	}
	out := make(map[int64]trace.SpanContext, len(rows))
	for _, r := range rows {
		if sc := telemetry.Extract(telemetry.Carrier{Traceparent: r.Traceparent, Tracestate: r.Tracestate}); sc.IsValid() {
			out[r.JobID] = sc
		}
	}
	return out, nil
}
