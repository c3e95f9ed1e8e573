package worker

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/docket-dev/docket/jobs"
)

// Without providers, the telemetry hooks on a job's path — its attempt's
// start, its handler's return, its outcome, its claim's links, a sweep —
// allocate nothing and read nothing: the worker costs what it did before.
//
// Not parallel: testing.AllocsPerRun counts the whole process's allocations.
func TestTelemetryOffAllocatesNothing(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none") // never connects
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	reg := NewRegistry()
	kind := jobs.MustKind[struct{}]("test.noop", 1)
	require.NoError(t, Handle(reg, kind, func(context.Context, *jobs.Typed[struct{}]) error { return nil }, HandlerOptions{}))
	w, err := NewClient(pool, Config{Actor: "svc:app", Registry: reg, Deployment: "test"})
	require.NoError(t, err)
	require.Nil(t, w.telemetry())
	ctx := context.Background()
	j := jobs.Job{ID: 1, Project: "acme", Queue: "default", Kind: "test.noop", State: jobs.Claimed, Attempts: 1}
	claimed := []jobs.Job{j}
	allocs := testing.AllocsPerRun(1000, func() {
		actx, a := w.startAttempt(ctx, j, trace.SpanContext{})
		if actx != ctx || a != nil {
			panic("telemetry on")
		}
		a.handlerReturned(time.Time{})
		w.emitAttempt(actx, Event{Type: EventFailed, JobID: j.ID}, jobs.ClassPermanent)
		a.end(Event{Type: EventSucceeded}, "")
		links, err := w.linksOf(ctx, nil, claimed)
		if links != nil || err != nil {
			panic("links read")
		}
		sctx, st := w.sweepStarted(ctx, SweepLeases)
		if sctx != ctx || st != nil {
			panic("telemetry on")
		}
		w.sweepEnded(sctx, st, 3, nil)
	})
	require.Zero(t, allocs)
}
