package jobs_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// TestAnIdempotencyKeyCoversTheWholeRequest: a key enqueued again with any
// one field that changes what the job does changed is a conflict naming
// that field, alone or in a batch, and writes nothing; the same request is
// a duplicate, and so is one that differs only in where, when or how
// persistently the job runs.
func TestAnIdempotencyKeyCoversTheWholeRequest(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	e.Allow(t, testkit.Grants(app, project, access.CaseAdmit, access.QuorumCreate)...)
	now := e.Clock.Now()
	var caseID, otherCase, quorum, lane, otherLane int64
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT id FROM docket.case_admit($1, 'billing.account', '{account}', '{a-1}', $2, $3)`,
		project, string(app), now).Scan(&caseID))
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT id FROM docket.case_admit($1, 'billing.account', '{account}', '{a-2}', $2, $3)`,
		project, string(app), now).Scan(&otherCase))
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT id FROM docket.quorum_create($1, 'q', $2, $2, $3)`,
		project, string(app), now).Scan(&quorum))
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT id FROM docket.lane_create($1, 'l1', 'main', $2, 'T-1', '{}', $2, $3)`,
		quorum, string(app), now).Scan(&lane))
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT id FROM docket.lane_create($1, 'l2', 'main', $2, 'T-2', '{}', $2, $3)`,
		quorum, string(app), now).Scan(&otherLane))

	request := func() jobs.Spec {
		return jobs.Spec{
			Kind: "billing.invoice", Payload: json.RawMessage(`{"invoice": 42}`), PayloadSchema: 1,
			IdempotencyKey: "invoice-42", Params: json.RawMessage(`{"size": 1}`), Inputs: []string{"orders/42", "rates/2026"},
			Output: jobs.OutputRef{Asset: "invoice/42", Kind: "application/pdf", Root: "invoices"},
			LaneID: lane, CaseID: caseID, CompensationKind: "billing.void",
		}
	}
	first, err := e.client.Enqueue(ctx, request())
	require.NoError(t, err)
	require.False(t, first.Duplicate)
	before := snapshot(t, e.Pool)

	for _, tc := range []struct {
		field  string
		change func(*jobs.Spec)
	}{
		{"payload", func(s *jobs.Spec) { s.Payload = json.RawMessage(`{"invoice": 43}`) }},
		{"payload schema", func(s *jobs.Spec) { s.PayloadSchema = 2 }},
		{"params", func(s *jobs.Spec) { s.Params = json.RawMessage(`{"size": 2}`) }},
		{"params", func(s *jobs.Spec) { s.Params = nil }},
		{"inputs", func(s *jobs.Spec) { s.Inputs = []string{"rates/2026", "orders/42"} }},
		{"inputs", func(s *jobs.Spec) { s.Inputs = nil }},
		{"requested output", func(s *jobs.Spec) { s.Output.Asset = "invoice/43" }},
		{"requested output", func(s *jobs.Spec) { s.Output.Kind = "text/html" }},
		{"requested output", func(s *jobs.Spec) { s.Output.Root = "archive" }},
		{"repeatable", func(s *jobs.Spec) { s.Repeatable = true }},
		{"external", func(s *jobs.Spec) { s.External = true }},
		{"lane", func(s *jobs.Spec) { s.LaneID = otherLane }},
		{"lane", func(s *jobs.Spec) { s.LaneID = 0 }},
		{"case", func(s *jobs.Spec) { s.CaseID = otherCase }},
		{"case", func(s *jobs.Spec) { s.CaseID = 0 }},
		{"compensation kind", func(s *jobs.Spec) { s.CompensationKind = "billing.refund" }},
	} {
		s := request()
		tc.change(&s)
		_, err := e.client.Enqueue(ctx, s)
		require.ErrorIs(t, err, db.ErrIdempotencyConflict, "%s changed", tc.field)
		require.ErrorContains(t, err, "with a different "+tc.field)
		_, err = e.client.EnqueueMany(ctx, []jobs.Spec{spec(`{"fresh": 1}`), s})
		require.ErrorIs(t, err, db.ErrIdempotencyConflict, "%s changed, in a batch", tc.field)
		require.ErrorContains(t, err, "with a different "+tc.field)
		require.Equal(t, before, snapshot(t, e.Pool), "a conflict on %s wrote nothing", tc.field)
	}

	// Two fields at once: both named.
	s := request()
	s.Payload, s.Repeatable = json.RawMessage(`{"invoice": 44}`), true
	_, err = e.client.Enqueue(ctx, s)
	require.ErrorContains(t, err, "with a different payload, repeatable")

	for name, change := range map[string]func(*jobs.Spec){
		"the same request": func(*jobs.Spec) {},
		"payload's key order and spacing": func(s *jobs.Spec) {
			s.Payload, s.Params = json.RawMessage(`{ "invoice" : 42 }`), json.RawMessage(`{"size":1}`)
		},
		"another queue":        func(s *jobs.Spec) { s.Queue = "urgent" },
		"another priority":     func(s *jobs.Spec) { s.Priority = 3 },
		"another instant":      func(s *jobs.Spec) { s.AvailableAt = now.Add(time.Hour) },
		"another retry policy": func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{MaxAttempts: 9} },
		"another lease":        func(s *jobs.Spec) { s.Lease = time.Hour },
	} {
		s := request()
		change(&s)
		got, err := e.client.Enqueue(ctx, s)
		require.NoError(t, err, name)
		require.True(t, got.Duplicate, name)
		require.Equal(t, first.Job.ID, got.Job.ID, name)
		receipts, err := e.client.EnqueueMany(ctx, []jobs.Spec{s})
		require.NoError(t, err, name)
		require.True(t, receipts[0].Duplicate, name)
		require.Equal(t, first.Job.ID, receipts[0].ID, name)
	}
	require.Equal(t, before, snapshot(t, e.Pool), "duplicates wrote nothing")
}
