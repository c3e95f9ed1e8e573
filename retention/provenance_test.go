package retention_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
)

// A completed job's completion record leaves with the job when a prune
// removes it (the foreign key cascades, in the prune's transaction).
func TestPruneRemovesTheCompletionRecordWithItsJob(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 2, 24))
	ctx := t.Context()
	enq, err := e.jobs.Enqueue(ctx, jobs.Spec{Kind: "report.build", Payload: json.RawMessage(`{"n": 1}`),
		Output: jobs.OutputRef{Asset: "report/1", Kind: "application/pdf"}})
	require.NoError(t, err)
	j, ok, err := e.jobs.ClaimID(ctx, enq.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = e.jobs.CompleteWith(ctx, jobs.Completion{Lease: j.Lease(), Record: &jobs.CompletionRecord{
		Output: jobs.OutputRef{Asset: "report/1", Kind: "application/pdf"}, Params: json.RawMessage(`{"pages": 3}`)}}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, rows(t, e, "docket.job_completions", "job_id = $1", j.ID))

	e.Clock.Advance(time.Hour)
	ps, err := e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	requirePruned(t, e, j.ID, ps[0].ID)
	require.Zero(t, rows(t, e, "docket.job_completions", "job_id = $1", j.ID), "the pruned job's record went with it")

	// Nobody else removes or changes one.
	_, err = e.API.Exec(context.Background(), "DELETE FROM docket.job_completions")
	require.ErrorContains(t, err, "permission denied")
}
