package docketotel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

const traceparent = "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"

// putTrace calls docket.job_trace_put in tx as actor, as the application's
// login role may.
func putTrace(ctx context.Context, tx pgx.Tx, e testkit.Env, actor access.Actor, tp, ts string, ids ...int64) error {
	_, err := tx.Exec(ctx, "SELECT docket.job_trace_put($1, $2, $3, $4, $5)", ids, tp, ts, string(actor), e.Clock.Now())
	return db.Translate(err, "test.trace_put")
}

// Only a job's creator gives it a trace context, in the transaction that
// created it (a savepoint of it too), once: a job created earlier, another
// actor's job, a second context and a malformed one are refused, and the
// refusal writes nothing.
func TestOnlyItsCreatorGivesAJobItsTraceContextWithTheJob(t *testing.T) {
	t.Parallel()
	const bob access.Actor = "svc:bob"
	e := setup(t)
	e.Allow(t, testkit.Grants(bob, project, access.JobCreate)...)
	ctx := t.Context()
	as := func(actor access.Actor) *jobs.Client {
		c, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: actor, Clock: e.Clock})
		require.NoError(t, err)
		return c
	}
	earlier, err := as(app).Enqueue(ctx, spec(t, 1, ""))
	require.NoError(t, err)

	refused := func(want error, do func(tx pgx.Tx) error) {
		t.Helper()
		before := testkit.Snapshot(t, e.Pool, "docket.job_traces")
		err := db.WithTx(ctx, e.API, do)
		require.ErrorIs(t, err, want)
		require.Equal(t, before, testkit.Snapshot(t, e.Pool, "docket.job_traces"))
	}
	refused(db.ErrNotPermitted, func(tx pgx.Tx) error {
		return putTrace(ctx, tx, e, app, traceparent, "", earlier.Job.ID)
	})
	refused(db.ErrNotPermitted, func(tx pgx.Tx) error {
		bobs, err := as(bob).EnqueueTx(ctx, tx, spec(t, 2, ""))
		require.NoError(t, err)
		return putTrace(ctx, tx, e, app, traceparent, "", bobs.Job.ID)
	})
	refused(db.ErrNotPermitted, func(tx pgx.Tx) error {
		return putTrace(ctx, tx, e, app, traceparent, "", 1<<40)
	})
	refused(db.ErrImmutable, func(tx pgx.Tx) error {
		mine, err := as(app).EnqueueTx(ctx, tx, spec(t, 3, ""))
		require.NoError(t, err)
		require.NoError(t, putTrace(ctx, tx, e, app, traceparent, "", mine.Job.ID))
		return putTrace(ctx, tx, e, app, traceparent, "", mine.Job.ID)
	})
	for _, bad := range []string{"", "01-0123456789abcdef0123456789abcdef-0123456789abcdef-01",
		"00-00000000000000000000000000000000-0123456789abcdef-01", "00-0123456789abcdef0123456789abcdef-0000000000000000-01",
		"00-0123456789ABCDEF0123456789abcdef-0123456789abcdef-01"} {
		refused(db.ErrInvalidArgument, func(tx pgx.Tx) error {
			mine, err := as(app).EnqueueTx(ctx, tx, spec(t, 4, ""))
			require.NoError(t, err)
			return putTrace(ctx, tx, e, app, bad, "", mine.Job.ID)
		})
	}
	long := make([]byte, 513)
	for i := range long {
		long[i] = 'a'
	}
	refused(db.ErrInvalidArgument, func(tx pgx.Tx) error {
		mine, err := as(app).EnqueueTx(ctx, tx, spec(t, 5, ""))
		require.NoError(t, err)
		return putTrace(ctx, tx, e, app, traceparent, string(long), mine.Job.ID)
	})

	// In a savepoint of the creating transaction, as at its top level.
	var ids []int64
	require.NoError(t, db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		top, err := as(app).EnqueueTx(ctx, tx, spec(t, 6, ""))
		require.NoError(t, err)
		ids = append(ids, top.Job.ID)
		return db.WithTx(ctx, tx, func(sp pgx.Tx) error {
			nested, err := as(app).EnqueueTx(ctx, sp, spec(t, 7, ""))
			require.NoError(t, err)
			ids = append(ids, nested.Job.ID)
			return putTrace(ctx, sp, e, app, traceparent, "vendor=1", top.Job.ID, nested.Job.ID)
		})
	}))
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.job_traces WHERE job_id = ANY ($1) AND tracestate = 'vendor=1'", ids).Scan(&n))
	require.Equal(t, 2, n)
	got, err := as(app).SpanContexts(ctx, append(ids, earlier.Job.ID))
	require.NoError(t, err)
	require.Len(t, got, 2, "the job enqueued untraced has none")
	require.Equal(t, "0123456789abcdef0123456789abcdef", got[ids[1]].TraceID().String())
	require.Equal(t, "vendor=1", got[ids[1]].TraceState().String())
	seen, err := as(bob).SpanContexts(ctx, ids)
	require.NoError(t, err)
	require.Len(t, seen, 2, "bob holds job.create in acme, so may read its jobs")
	hidden, err := as(testkit.Nobody).SpanContexts(ctx, ids)
	require.NoError(t, err)
	require.Empty(t, hidden, "an actor who may not read the jobs learns nothing of their traces")
}

// A traced enqueue stores its span's context with the job it creates, in
// the statement that creates it, on the pool as in the caller's
// transaction; a duplicate under an idempotency key keeps the context of
// the enqueue that created it, and a rolled-back enqueue leaves none.
func TestTracedEnqueueStoresItsContextOnceWithTheJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	recorder := tracetest.NewSpanRecorder()
	c, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock,
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))})
	require.NoError(t, err)
	keyed := spec(t, 1, "")
	keyed.IdempotencyKey = "order-1"
	first, err := c.Enqueue(ctx, keyed)
	require.NoError(t, err)
	again, err := c.Enqueue(ctx, keyed)
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Job.ID, again.Job.ID)
	var inTx jobs.Enqueued
	require.NoError(t, db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		inTx, err = c.EnqueueTx(ctx, tx, spec(t, 2, ""))
		return err
	}))
	rolledBack := errors.New("the order was refused")
	require.ErrorIs(t, db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		_, err := c.EnqueueTx(ctx, tx, spec(t, 3, ""))
		require.NoError(t, err)
		return rolledBack
	}), rolledBack)
	many, err := c.EnqueueMany(ctx, []jobs.Spec{spec(t, 4, ""), keyed})
	require.NoError(t, err)
	require.True(t, many[1].Duplicate)
	require.Equal(t, 3, traceRows(t, e), "the first, the one in a transaction, the new one of the batch")

	spans := map[int64]string{} // job → its enqueue span
	for _, s := range recorder.Ended() {
		set := attribute.NewSet(s.Attributes()...)
		if id, ok := set.Value("docket.job.id"); ok {
			if dup, _ := set.Value("docket.job.duplicate"); !dup.AsBool() {
				spans[id.AsInt64()] = s.SpanContext().SpanID().String()
			}
		}
		if n, ok := set.Value("messaging.batch.message_count"); ok {
			require.Equal(t, int64(2), n.AsInt64())
			spans[many[0].ID] = s.SpanContext().SpanID().String()
		}
	}
	got, err := c.SpanContexts(ctx, []int64{first.Job.ID, inTx.Job.ID, many[0].ID})
	require.NoError(t, err)
	require.Len(t, got, 3)
	for id, sc := range got {
		require.Equal(t, spans[id], sc.SpanID().String(), "job %d carries the span that created it", id)
	}
}

// A traced bulk enqueue large enough to be copied into the intake (1,000
// specs or more) stores its span's context with every job it creates, on
// the pool and in the caller's transaction, as the array path does.
func TestTracedBulkEnqueueByCopyStoresItsContext(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	recorder := tracetest.NewSpanRecorder()
	c, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock,
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))})
	require.NoError(t, err)
	specs := make([]jobs.Spec, 1000)
	for i := range specs {
		specs[i] = spec(t, 100+i, "")
	}
	specs[999].IdempotencyKey = "bulk-1"
	many, err := c.EnqueueMany(ctx, specs)
	require.NoError(t, err)
	require.Len(t, many, 1000)
	require.Equal(t, 1000, traceRows(t, e))

	specs[0] = spec(t, 99, "") // a new job; the keyed one a duplicate
	for i := 1; i < 999; i++ {
		specs[i] = spec(t, 2000+i, "")
	}
	require.NoError(t, db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		again, err := c.EnqueueManyTx(ctx, tx, specs)
		if err == nil {
			require.True(t, again[999].Duplicate)
			require.Equal(t, many[999].ID, again[999].ID)
		}
		return err
	}))
	require.Equal(t, 1999, traceRows(t, e), "the duplicate keeps the context of the enqueue that made it")
	require.Len(t, recorder.Ended(), 2)
}
