package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/docket-dev/docket/jobs"
)

// A traced job's trace context leaves with the job when a prune removes it
// (released with it, in the prune's transaction), and stays with a
// job the prune keeps.
func TestPruneRemovesTheTraceContextWithItsJob(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 2, 24))
	ctx := t.Context()
	traced, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock,
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))})
	require.NoError(t, err)
	ok := finish(t, e, traced, "", jobs.Succeeded)
	kept := finish(t, e, traced, "", jobs.Failed)
	require.Equal(t, 2, rows(t, e, "docket.job_traces", "job_id = ANY ($1)", []int64{ok.ID, kept.ID}))

	e.Clock.Advance(time.Hour)
	ps, err := e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	requirePruned(t, e, ok.ID, ps[0].ID)
	require.Zero(t, rows(t, e, "docket.job_traces", "job_id = $1", ok.ID), "the pruned job's trace context went with it")
	require.Equal(t, 1, rows(t, e, "docket.job_traces", "job_id = $1", kept.ID))
	requireKept(t, e, kept.ID)

	// Nobody else removes one: the application's roles have no DML on it.
	_, err = e.API.Exec(context.Background(), "DELETE FROM docket.job_traces WHERE job_id = $1", kept.ID)
	require.ErrorContains(t, err, "permission denied")
	_, err = e.Pool.Exec(context.Background(), "UPDATE docket.job_traces SET tracestate = 'x=y' WHERE job_id = $1", kept.ID)
	require.ErrorContains(t, err, "written once")
}
