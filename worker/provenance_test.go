package worker_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// Poster is the payload of the render kind: the worker clamps Width to
// 2048 px and records what it did.
type Poster struct {
	ID    int    `json:"id"`
	Width int    `json:"width"`
	Mode  string `json:"mode"`
}

var posterKind = jobs.MustKind[Poster]("media.render", 1)

// TestHandlerRecordsItsCompletion: a handler states what it produced and
// used; storage keeps exactly that, and a record that does not fit the
// job's request fails the attempt with its writes rolled back.
func TestHandlerRecordsItsCompletion(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	_, err := e.Pool.Exec(ctx, "CREATE TABLE posters (id int PRIMARY KEY); GRANT INSERT, SELECT ON posters TO docket_app")
	require.NoError(t, err)

	reg := worker.NewRegistry()
	require.NoError(t, worker.HandleResult(reg, posterKind, func(ctx context.Context, j *jobs.Typed[Poster]) (worker.Result, error) {
		used := min(j.Args.Width, 2048)
		rec := &jobs.CompletionRecord{
			Output: jobs.OutputRef{Asset: j.Output.Asset, Kind: j.Output.Kind},
			Params: mustJSON(map[string]int{"width": used}),
			Inputs: j.Inputs,
		}
		res := worker.Result{Record: rec}
		switch j.Args.Mode {
		case "wrong-kind": // the encoder fell back to JPEG
			rec.Output.Kind = "image/jpeg"
		case "no-record":
			res.Record = nil
		case "batch": // no writes: recorded with the batch's completions
			return res, nil
		}
		res.WritesFunc = func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO posters (id) VALUES ($1)", j.Args.ID)
			return err
		}
		return res, nil
	}))

	ids := map[string]int64{}
	for i, mode := range []string{"ok", "batch", "wrong-kind", "no-record"} {
		s, err := posterKind.Spec(Poster{ID: i + 1, Width: 4000, Mode: mode})
		require.NoError(t, err)
		s.Output = jobs.OutputRef{Asset: "poster/" + mode, Kind: "image/png", Root: "renders"}
		s.Params = json.RawMessage(`{"width": 4000}`)
		s.Inputs = []string{"src:" + mode}
		s.Retry = jobs.RetryPolicy{MaxAttempts: 1}
		got, err := e.client.Enqueue(ctx, s)
		require.NoError(t, err)
		ids[mode] = got.Job.ID
	}
	rec := newRecorder()
	startWorker(t, e, reg, rec, nil)
	rec.waitN(t, 2, func(ev worker.Event) bool { return ev.Type == worker.EventSucceeded })
	rec.waitN(t, 2, func(ev worker.Event) bool { return ev.Type == worker.EventFailed })

	for _, mode := range []string{"ok", "batch"} {
		require.Equal(t, jobs.Succeeded, jobState(t, e.Pool, ids[mode]), mode)
		plan, err := e.client.Jobs().RerunPlan(ctx, ids[mode])
		require.NoError(t, err)
		require.True(t, plan.Recorded, mode)
		require.JSONEq(t, `{"width": 2048}`, string(plan.Params), "%s: what the worker used, not the job's 4000", mode)
		require.Equal(t, []string{"src:" + mode}, plan.Inputs)
		require.Equal(t, jobs.OutputRef{Asset: "poster/" + mode, Kind: "image/png", Root: "renders"}, plan.Output)
	}
	for _, mode := range []string{"wrong-kind", "no-record"} {
		j, err := e.client.Jobs().Get(ctx, ids[mode])
		require.NoError(t, err)
		require.Equal(t, jobs.Dead, j.State, mode)
		require.Contains(t, j.Diagnostic, "invalid argument", mode)
	}
	j, _ := e.client.Jobs().Get(ctx, ids["wrong-kind"])
	require.Contains(t, j.Diagnostic, "output kind 'image/jpeg' is not the requested 'image/png'", "storage refused it in the completion's transaction")
	var posters []int
	rows, err := e.Pool.Query(ctx, "SELECT id FROM posters ORDER BY id")
	require.NoError(t, err)
	posters, err = pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{1}, posters, "only the completed job's writes committed")
	var records int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.job_completions").Scan(&records))
	require.Equal(t, 2, records)
}
