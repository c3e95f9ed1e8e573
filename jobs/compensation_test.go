package jobs_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
)

// A cancelled job's compensation carries what its spec promises: the
// cancelled job's id, kind and payload.
func TestACompensationCarriesTheCancelledJobsPayload(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	s := spec(`{"invoice": 7, "lines": [1, 2]}`)
	s.CompensationKind = "billing.void"
	j, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	_, err = e.client.Cancel(ctx, j.Job.ID, "customer left")
	require.NoError(t, err)
	comp, err := e.client.List(ctx, jobs.Filter{Kind: "billing.void"})
	require.NoError(t, err)
	require.Len(t, comp, 1)
	var got struct {
		JobID   int64           `json:"job_id"`
		Kind    string          `json:"kind"`
		Payload json.RawMessage `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(comp[0].Payload, &got))
	require.Equal(t, j.Job.ID, got.JobID)
	require.Equal(t, "billing.invoice", got.Kind)
	require.JSONEq(t, `{"invoice": 7, "lines": [1, 2]}`, string(got.Payload))
}
