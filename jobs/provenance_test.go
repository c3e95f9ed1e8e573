package jobs_test

// Provenance: a completion records what its worker produced and used,
// storage holds the record to the job's request in the completion's
// transaction, and a re-run is planned from the record by a read.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// render is the job of the worked example in docs/jobs.md: a poster
// rendered from a source and a font, asked for at 4000 px.
func render(payload string) jobs.Spec {
	s := jobs.Spec{Kind: "media.render", Payload: []byte(payload)}
	s.Output = jobs.OutputRef{Asset: "poster/42", Kind: "image/png", Root: "renders"}
	s.Params = json.RawMessage(`{"width": 4000}`)
	s.Inputs = []string{"src:poster/42", "font:inter"}
	return s
}

// clamped is what a worker that clamped the size to 2048 px records.
func clamped() *jobs.CompletionRecord {
	return &jobs.CompletionRecord{
		Output: jobs.OutputRef{Asset: "poster/42", Kind: "image/png"},
		Params: json.RawMessage(`{"width": 2048}`),
		Inputs: []string{"src:poster/42", "font:inter"},
	}
}

// provSnapshot renders every job, event and completion record.
func provSnapshot(t testing.TB, q db.DBTX) string {
	t.Helper()
	return testkit.Snapshot(t, q, "docket.jobs", "docket.job_events", "docket.job_completions")
}

// writesTable makes a table the API login may write, standing in for a
// handler's outputs, and returns a function counting its rows.
func writesTable(t *testing.T, e env) func() int {
	t.Helper()
	ctx := t.Context()
	_, err := e.Pool.Exec(ctx, `CREATE TABLE public.posters (job_id bigint NOT NULL); GRANT SELECT, INSERT ON public.posters TO PUBLIC`)
	require.NoError(t, err)
	return func() int {
		var n int
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM public.posters`).Scan(&n))
		return n
	}
}

func claimed(t *testing.T, e env, s jobs.Spec) jobs.Job {
	t.Helper()
	enq, err := e.client.Enqueue(t.Context(), s)
	require.NoError(t, err)
	j, ok, err := e.client.ClaimID(t.Context(), enq.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	return j
}

func TestCompletionWithAnotherKindIsRefusedAndItsWritesRollBack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	posters := writesTable(t, e)
	j := claimed(t, e, render(`{"poster": 42}`))
	require.Equal(t, jobs.OutputRef{Asset: "poster/42", Kind: "image/png", Root: "renders"}, j.Output)
	before := provSnapshot(t, e.Pool)

	rec := clamped()
	rec.Output.Kind = "image/jpeg"
	_, err := e.client.CompleteWith(ctx, jobs.Completion{Lease: j.Lease(), Record: rec}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO public.posters (job_id) VALUES ($1)`, j.ID)
		return err
	})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, `output kind 'image/jpeg' is not the requested 'image/png'`)
	require.Zero(t, posters(), "the handler's writes rolled back")
	require.Equal(t, before, provSnapshot(t, e.Pool), "the refused completion changed nothing")

	// A completion with no record at all, of a job that requests an output,
	// is refused at commit, its writes with it.
	_, err = e.client.CompleteWith(ctx, jobs.Completion{Lease: j.Lease()}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO public.posters (job_id) VALUES ($1)`, j.ID)
		return err
	})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "must record the output it produced")
	_, err = e.client.Complete(ctx, j.Lease(), nil, nil)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.Zero(t, posters())
	require.Equal(t, before, provSnapshot(t, e.Pool))

	// The right output commits, writes and all.
	got, err := e.client.CompleteWith(ctx, jobs.Completion{Lease: j.Lease(), Record: clamped()}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO public.posters (job_id) VALUES ($1)`, j.ID)
		return err
	})
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, got.State)
	require.Equal(t, 1, posters())
}

// Complete with writes, of a job that requests an output, has no record to
// give: the refusal at commit is the documented db.ErrInvalidArgument, not
// the commit's raw error, and neither the writes nor the completion stay.
// CompleteMany, whose statement commits alone, says the same.
func TestCompleteWithWritesWithoutARecordIsRefusedAsInvalid(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	posters := writesTable(t, e)
	j := claimed(t, e, render(`{"poster": 42}`))
	before := provSnapshot(t, e.Pool)

	_, err := e.client.Complete(ctx, j.Lease(), json.RawMessage(`{"bytes": 1}`), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO public.posters (job_id) VALUES ($1)`, j.ID)
		return err
	})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	var de *db.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, "DK010", de.Code)
	require.Equal(t, "job.complete", de.Op)
	require.ErrorContains(t, err, "must record the output it produced")
	require.Zero(t, posters(), "the handler's writes rolled back")
	require.Equal(t, before, provSnapshot(t, e.Pool), "the refused completion changed nothing")

	// In a batch, the element is refused, by the batch's one statement.
	errs, err := e.client.CompleteMany(ctx, []jobs.Completion{{Lease: j.Lease()}})
	require.NoError(t, err)
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], db.ErrInvalidArgument)
	require.ErrorAs(t, errs[0], &de)
	require.Equal(t, "DK010", de.Code)
	require.ErrorContains(t, errs[0], "must record the output it produced")
	require.Equal(t, before, provSnapshot(t, e.Pool))

	// The writes' own error is still returned as it is.
	mine := errors.New("the renderer's disk is full")
	_, err = e.client.Complete(ctx, j.Lease(), nil, func(pgx.Tx) error { return mine })
	require.Equal(t, mine, err)
	require.Equal(t, before, provSnapshot(t, e.Pool))
}

func TestCompletionRecordsWhatTheWorkerUsedNotTheJobsParams(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := claimed(t, e, render(`{"poster": 42}`))
	_, err := e.client.CompleteWith(ctx, jobs.Completion{Lease: j.Lease(), Result: json.RawMessage(`{"bytes": 1}`), Record: clamped()}, nil)
	require.NoError(t, err)

	var asset, kind, root, by string
	var params json.RawMessage
	var inputs []string
	var token uuid.UUID
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT output_asset, output_kind, output_root, params_used, inputs_used, recorded_by, claim_token
		FROM docket.job_completions WHERE job_id = $1`, j.ID).Scan(&asset, &kind, &root, &params, &inputs, &by, &token))
	require.Equal(t, "poster/42", asset)
	require.Equal(t, "image/png", kind)
	require.Equal(t, "renders", root, "the record names the job's target root")
	require.JSONEq(t, `{"width": 2048}`, string(params), "the worker's parameters, not the job's 4000")
	require.Equal(t, []string{"src:poster/42", "font:inter"}, inputs)
	require.Equal(t, string(app), by)
	var digest uuid.UUID
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT docket.job_token_digest($1)`, j.Lease().Token).Scan(&digest))
	require.Equal(t, digest, token, "the record keeps the claim token's digest, never the token")

	// A record is written once: not even the owner edits it.
	_, err = e.Pool.Exec(ctx, `UPDATE docket.job_completions SET params_used = '{"width": 4000}' WHERE job_id = $1`, j.ID)
	require.ErrorContains(t, err, "written once")

	// A record that names no parameters stores none: the job's are never copied.
	j2 := claimed(t, e, render(`{"poster": 43}`))
	rec := clamped()
	rec.Params, rec.Inputs = nil, []string{"font:inter"} // a subsequence of the job's inputs
	_, err = e.client.CompleteWith(ctx, jobs.Completion{Lease: j2.Lease(), Record: rec}, nil)
	require.NoError(t, err)
	var null bool
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT params_used IS NULL FROM docket.job_completions WHERE job_id = $1`, j2.ID).Scan(&null))
	require.True(t, null)

	// Completing again after a lost reply is a quiet no-op that records nothing new.
	before := provSnapshot(t, e.Pool)
	_, err = e.client.CompleteWith(ctx, jobs.Completion{Lease: j.Lease(), Result: json.RawMessage(`{"bytes": 1}`), Record: clamped()}, nil)
	require.NoError(t, err)
	require.Equal(t, before, provSnapshot(t, e.Pool))
}

func TestCompleteManyRecordsInOneBatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	var specs []jobs.Spec
	for i := range 3 {
		s := render(fmt.Sprintf(`{"poster": %d}`, i))
		s.Output.Asset = fmt.Sprintf("poster/%d", i)
		specs = append(specs, s)
	}
	receipts, err := e.client.EnqueueMany(ctx, specs)
	require.NoError(t, err)
	var batch []jobs.Completion
	for i, r := range receipts {
		j, ok, err := e.client.ClaimID(ctx, r.ID, jobs.ClaimOptions{})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, specs[i].Output, j.Output, "a batch enqueue stores the requested output")
		rec := clamped()
		rec.Output.Asset = specs[i].Output.Asset
		batch = append(batch, jobs.Completion{Lease: j.Lease(), Record: rec})
	}
	plain := claimed(t, e, spec(`{"plain": true}`))
	batch = append(batch, jobs.Completion{Lease: plain.Lease()})
	errs, err := e.client.CompleteMany(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil, nil, nil}, errs)
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.job_completions`).Scan(&n))
	require.Equal(t, 3, n)

	// One record that does not match refuses its element alone: the other
	// completes with its record, the refused job stays claimed without one.
	j := claimed(t, e, render(`{"poster": 99}`))
	other := claimed(t, e, render(`{"poster": 100}`))
	bad := clamped()
	bad.Inputs = []string{"font:inter", "src:poster/42"} // reordered
	errs, err = e.client.CompleteMany(ctx, []jobs.Completion{{Lease: other.Lease(), Record: clamped()}, {Lease: j.Lease(), Record: bad}})
	require.NoError(t, err)
	require.Len(t, errs, 2)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], db.ErrInvalidArgument)
	require.ErrorContains(t, errs[1], "inputs are not the job's")
	got, err := e.client.Get(ctx, other.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, got.State)
	got, err = e.client.Get(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Claimed, got.State)
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.job_completions WHERE job_id = $1`, j.ID).Scan(&n))
	require.Zero(t, n, "the refused element recorded nothing")
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.job_completions WHERE job_id = $1`, other.ID).Scan(&n))
	require.Equal(t, 1, n)
}

func TestFailureLeavesNoCompletionRecord(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := claimed(t, e, render(`{"poster": 42}`))
	before := provSnapshot(t, e.Pool)

	// A record followed by a failure, not a completion, in one transaction:
	// refused at commit, nothing kept.
	err := db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT docket.job_completion_record(ARRAY[$1::bigint], ARRAY[$2::uuid], ARRAY['poster/42'],
			ARRAY['image/png'], ARRAY[''], ARRAY['null'::jsonb], ARRAY['null'::jsonb], $3, $4)`,
			j.ID, j.Lease().Token, string(app), t0); err != nil {
			return err
		}
		_, err := e.client.FailTx(ctx, tx, j.Lease(), jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "encoder crashed"})
		return err
	})
	require.ErrorIs(t, db.Translate(err, "commit"), db.ErrInvalidArgument)
	require.ErrorContains(t, err, "a completion record without its completion")
	require.Equal(t, before, provSnapshot(t, e.Pool))

	failed, err := e.client.Fail(ctx, j.Lease(), jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "encoder crashed"})
	require.NoError(t, err)
	require.Equal(t, jobs.Failed, failed.State)
	require.Equal(t, "encoder crashed", failed.Diagnostic)
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.job_completions`).Scan(&n))
	require.Zero(t, n)
	_, err = e.client.RerunPlan(ctx, j.ID)
	require.ErrorIs(t, err, db.ErrInvalidArgument, "a failed job has no re-run plan")
}

func TestRerunPlanIsARead(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := claimed(t, e, render(`{"poster": 42}`))
	_, err := e.client.CompleteWith(ctx, jobs.Completion{Lease: j.Lease(), Record: clamped()}, nil)
	require.NoError(t, err)

	before := provSnapshot(t, e.Pool)
	plan, err := e.client.RerunPlan(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, before, provSnapshot(t, e.Pool), "planning wrote nothing")
	require.True(t, plan.Recorded)
	require.Equal(t, j.ID, plan.JobID)
	require.Equal(t, "media.render", plan.Kind)
	require.Equal(t, jobs.OutputRef{Asset: "poster/42", Kind: "image/png", Root: "renders"}, plan.Output)
	require.Equal(t, []string{"src:poster/42", "font:inter"}, plan.Inputs)
	require.JSONEq(t, `{"width": 2048}`, string(plan.Params))
	require.Equal(t, jobs.OutputRef{Asset: "poster/42", Kind: "image/png", Root: "renders"}, plan.Produced)
	require.Equal(t, app, plan.RecordedBy)

	// The caller requests the plan in its own transaction.
	var again jobs.Enqueued
	require.NoError(t, db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		var err error
		again, err = e.client.EnqueueTx(ctx, tx, plan.Spec())
		return err
	}))
	require.Equal(t, plan.Output, again.Job.Output)
	require.JSONEq(t, `{"width": 2048}`, string(again.Job.Params))

	ids, err := e.client.ProducedBy(ctx, "poster/42", "image/png")
	require.NoError(t, err)
	require.Equal(t, []int64{j.ID}, ids)
	none, err := clientAs(t, e.API, e.Clock, nobody).ProducedBy(ctx, "poster/42", "image/png")
	require.NoError(t, err)
	require.Empty(t, none, "nobody sees no project's records")
}

func TestRerunPlanWithoutRecord(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	s := spec(`{"invoice": 1}`)
	s.Params = json.RawMessage(`{"lang": "de"}`)
	s.Inputs = []string{"order:1"}
	j := claimed(t, e, s)
	_, err := e.client.Complete(ctx, j.Lease(), nil, nil)
	require.NoError(t, err)
	plan, err := e.client.RerunPlan(ctx, j.ID)
	require.NoError(t, err)
	require.False(t, plan.Recorded)
	require.Equal(t, "billing.invoice", plan.Kind)
	require.Empty(t, plan.Output.Root)
	require.Nil(t, plan.Inputs, "nothing says what the worker read")
	require.Nil(t, plan.Params, "the job's requested params are not what the worker used")

	// An operator's reconcile to succeeded needs no record: nobody held the
	// claim that finished the job. Its plan names the kind and no root.
	r := claimed(t, e, render(`{"poster": 7}`))
	_, err = e.client.Fail(ctx, r.Lease(), jobs.Failure{Class: jobs.ClassUncertain, Diagnostic: "lost"})
	require.NoError(t, err)
	_, err = e.client.Reconcile(ctx, r.ID, jobs.DidSucceed, nil, "the poster is there")
	require.NoError(t, err)
	plan, err = e.client.RerunPlan(ctx, r.ID)
	require.NoError(t, err)
	require.False(t, plan.Recorded)
	require.Equal(t, "media.render", plan.Kind)
	require.Equal(t, jobs.OutputRef{Asset: "poster/42", Kind: "image/png"}, plan.Output)
}

func TestProvenanceRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	held := claimed(t, e, render(`{"poster": 42}`))
	queued, err := e.client.Enqueue(ctx, render(`{"poster": 43}`))
	require.NoError(t, err)
	plain := claimed(t, e, spec(`{"plain": 1}`)) // requests nothing
	before := provSnapshot(t, e.Pool)
	refused := func(t *testing.T, want error, call func() error) {
		t.Helper()
		err := call()
		require.ErrorIs(t, err, want)
		var typed *db.Error
		require.ErrorAs(t, err, &typed, "a refusal is a *db.Error")
		require.Equal(t, before, provSnapshot(t, e.Pool), "a refusal changed something")
	}
	long := strings.Repeat("x", 1001)
	records := []struct {
		name  string
		lease jobs.Lease
		edit  func(r *jobs.CompletionRecord)
		want  error
	}{
		{"no asset", held.Lease(), func(r *jobs.CompletionRecord) { r.Output.Asset = "" }, db.ErrInvalidArgument},
		{"asset over 1000 characters", held.Lease(), func(r *jobs.CompletionRecord) { r.Output.Asset = long }, db.ErrInvalidArgument},
		{"no kind", held.Lease(), func(r *jobs.CompletionRecord) { r.Output.Kind = "" }, db.ErrInvalidArgument},
		{"malformed kind", held.Lease(), func(r *jobs.CompletionRecord) { r.Output.Kind = "image png" }, db.ErrInvalidArgument},
		{"malformed root", held.Lease(), func(r *jobs.CompletionRecord) { r.Output.Root = "../etc" }, db.ErrInvalidArgument},
		{"params an array", held.Lease(), func(r *jobs.CompletionRecord) { r.Params = json.RawMessage(`[1]`) }, db.ErrInvalidArgument},
		{"params not JSON", held.Lease(), func(r *jobs.CompletionRecord) { r.Params = json.RawMessage(`{"a":`) }, db.ErrInvalidArgument},
		{"params over 64 KiB", held.Lease(), func(r *jobs.CompletionRecord) {
			r.Params = json.RawMessage(`{"a": "` + strings.Repeat("x", jobs.MaxParamsBytes) + `"}`)
		}, db.ErrInvalidArgument},
		{"101 inputs", held.Lease(), func(r *jobs.CompletionRecord) { r.Inputs = make([]string, 101) }, db.ErrInvalidArgument},
		{"input over 1000 characters", held.Lease(), func(r *jobs.CompletionRecord) { r.Inputs = []string{long} }, db.ErrInvalidArgument},
		{"another asset", held.Lease(), func(r *jobs.CompletionRecord) { r.Output.Asset = "poster/41" }, db.ErrInvalidArgument},
		{"another kind", held.Lease(), func(r *jobs.CompletionRecord) { r.Output.Kind = "image/webp" }, db.ErrInvalidArgument},
		{"another root", held.Lease(), func(r *jobs.CompletionRecord) { r.Output.Root = "drafts" }, db.ErrInvalidArgument},
		{"an input the job was not given", held.Lease(), func(r *jobs.CompletionRecord) { r.Inputs = []string{"src:other"} }, db.ErrInvalidArgument},
		{"inputs reordered", held.Lease(), func(r *jobs.CompletionRecord) { r.Inputs = []string{"font:inter", "src:poster/42"} }, db.ErrInvalidArgument},
		{"an input twice", held.Lease(), func(r *jobs.CompletionRecord) { r.Inputs = []string{"font:inter", "font:inter"} }, db.ErrInvalidArgument},
		{"a root for a job without one", plain.Lease(), func(r *jobs.CompletionRecord) { r.Output.Root = "renders"; r.Inputs = nil }, db.ErrInvalidArgument},
		{"wrong token", jobs.Lease{JobID: held.ID, Token: uuid.New()}, func(*jobs.CompletionRecord) {}, db.ErrStaleClaim},
		{"no claim", jobs.Lease{JobID: queued.Job.ID, Token: uuid.New()}, func(*jobs.CompletionRecord) {}, db.ErrStaleClaim},
		{"unknown job", jobs.Lease{JobID: 1 << 40, Token: uuid.New()}, func(*jobs.CompletionRecord) {}, db.ErrNotFound},
	}
	for _, tc := range records {
		t.Run("complete/"+tc.name, func(t *testing.T) {
			rec := clamped()
			tc.edit(rec)
			refused(t, tc.want, func() error {
				_, err := e.client.CompleteWith(ctx, jobs.Completion{Lease: tc.lease, Record: rec}, nil)
				return err
			})
			refused(t, tc.want, func() error {
				return db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
					_, err := e.client.CompleteWithTx(ctx, tx, jobs.Completion{Lease: tc.lease, Record: rec})
					return err
				})
			})
			// A batch refuses the element, the record's refusal included.
			errs, err := e.client.CompleteMany(ctx, []jobs.Completion{{Lease: tc.lease, Record: rec}})
			require.NoError(t, err)
			require.ErrorIs(t, errs[0], tc.want)
			var typed *db.Error
			require.ErrorAs(t, errs[0], &typed, "a refusal is a *db.Error")
			require.Equal(t, before, provSnapshot(t, e.Pool))
		})
	}
	// The same refusals straight from SQL, for what Go lets through to it.
	for _, tc := range []struct{ name, asset, kind, root, params, inputs string }{
		{"NULL asset", "", "image/png", "", "null", "null"},
		{"kind with a space", "poster/42", "image png", "", "null", "null"},
		{"params a string", "poster/42", "image/png", "", `"x"`, "null"},
		{"inputs an object", "poster/42", "image/png", "", "null", `{"a": 1}`},
		{"inputs of numbers", "poster/42", "image/png", "", "null", `[1]`},
	} {
		t.Run("sql/"+tc.name, func(t *testing.T) {
			refused(t, db.ErrInvalidArgument, func() error {
				_, err := e.API.Exec(ctx, `SELECT docket.job_completion_record(ARRAY[$1::bigint], ARRAY[$2::uuid], ARRAY[nullif($3, '')],
					ARRAY[$4], ARRAY[$5], ARRAY[$6::jsonb], ARRAY[$7::jsonb], $8, $9)`,
					held.ID, held.Lease().Token, tc.asset, tc.kind, tc.root, tc.params, tc.inputs, string(app), t0)
				return db.Translate(err, "sql")
			})
		})
	}

	t.Run("rerun plan", func(t *testing.T) {
		refused(t, db.ErrNotFound, func() error { _, err := e.client.RerunPlan(ctx, 1<<40); return err })
		_, err := clientAs(t, e.API, e.Clock, nobody).RerunPlan(ctx, held.ID)
		require.ErrorIs(t, err, db.ErrNotFound)
		require.ErrorContains(t, err, fmt.Sprintf("job %d not found or not visible to %s", held.ID, nobody))
		refused(t, db.ErrInvalidArgument, func() error { _, err := e.client.RerunPlan(ctx, held.ID); return err })
		refused(t, db.ErrInvalidArgument, func() error { _, err := e.client.RerunPlan(ctx, queued.Job.ID); return err })
	})
	t.Run("produced by", func(t *testing.T) {
		refused(t, db.ErrInvalidArgument, func() error { _, err := e.client.ProducedBy(ctx, "", "image/png"); return err })
		refused(t, db.ErrInvalidArgument, func() error { _, err := e.client.ProducedBy(ctx, long, "image/png"); return err })
		refused(t, db.ErrInvalidArgument, func() error { _, err := e.client.ProducedBy(ctx, "poster/42", ""); return err })
		refused(t, db.ErrInvalidArgument, func() error { _, err := e.client.ProducedBy(ctx, "poster/42", "image png"); return err })
	})
	t.Run("insert by hand", func(t *testing.T) {
		for _, cols := range []string{"requested_kind) VALUES ('acme', 'media.render', '{}', $1, $1, $1, 'svc:app', 'image/png')",
			"target_root) VALUES ('acme', 'media.render', '{}', $1, $1, $1, 'svc:app', 'renders')"} {
			var got error
			refused(t, db.ErrInvalidArgument, func() error {
				got = db.Translate(testkit.Raw(ctx, e.Pool, ana, t0, `INSERT INTO docket.jobs (project, kind, payload, available_at, created_at,
					updated_at, created_by, `+cols, t0), "sql")
				return got
			})
			require.ErrorContains(t, got, "names no asset")
		}
		refused(t, db.ErrImmutable, func() error {
			err := testkit.Raw(ctx, e.Pool, ana, t0, `UPDATE docket.jobs SET target_root = 'drafts' WHERE id = $1`, queued.Job.ID)
			return db.Translate(err, "sql")
		})
	})
	t.Run("enqueue", func(t *testing.T) {
		// The same key with another requested output is a conflict.
		s := render(`{"poster": 50}`)
		s.IdempotencyKey = "poster-50"
		_, err := e.client.Enqueue(ctx, s)
		require.NoError(t, err)
		before = provSnapshot(t, e.Pool)
		s.Output.Kind = "image/webp"
		refused(t, db.ErrIdempotencyConflict, func() error { _, err := e.client.Enqueue(ctx, s); return err })
		refused(t, db.ErrIdempotencyConflict, func() error { _, err := e.client.EnqueueMany(ctx, []jobs.Spec{s}); return err })
		for _, args := range [][2]string{{"image png", ""}, {"", "../etc"}} {
			refused(t, db.ErrInvalidArgument, func() error {
				_, err := e.API.Exec(ctx, `SELECT docket.job_enqueue_one('acme', $1, $2, 'media.render', 'default', 1::smallint, '{}'::jsonb, 1,
					'', NULL, 5, false, false, interval '5 minutes', interval '1 second', interval '10 minutes', 0.2,
					NULL, '{}', 'poster/1', 0, 0, '', $3, $4)`, string(app), t0, args[0], args[1])
				return db.Translate(err, "sql")
			})
		}
		refused(t, db.ErrInvalidArgument, func() error {
			_, err := e.API.Exec(ctx, `SELECT docket.job_enqueue_one('acme', $1, $2, 'media.render', 'default', 1::smallint, '{}'::jsonb, 1,
				'', NULL, 5, false, false, interval '5 minutes', interval '1 second', interval '10 minutes', 0.2,
				NULL, '{}', '', 0, 0, '', 'image/png', '')`, string(app), t0)
			return db.Translate(err, "sql")
		})
	})
}

// TestProducedByPlan: "which job produced output X" reads the index of
// completion records, at 100,000 jobs.
func TestProducedByPlan(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const n = 100000
	// The jobs set-based as the admin, in one statement; their records by
	// hand, the owner's check that each record's job succeeded off while it
	// loads them (that check is tested above; a plan needs only the rows).
	_, err := e.Pool.Exec(ctx, `
		SELECT docket.job_enqueue_many('acme', $1, $2,
			array_fill('media.render'::text, ARRAY[$3::int]), array_fill('default'::text, ARRAY[$3::int]),
			array_fill(1::smallint, ARRAY[$3::int]), ARRAY(SELECT jsonb_build_object('n', g) FROM generate_series(1, $3::int) g),
			array_fill(1, ARRAY[$3::int]), array_fill(''::text, ARRAY[$3::int]), array_fill(NULL::timestamptz, ARRAY[$3::int]),
			array_fill(5, ARRAY[$3::int]), array_fill(false, ARRAY[$3::int]), array_fill(true, ARRAY[$3::int]),
			array_fill(interval '5 minutes', ARRAY[$3::int]), array_fill(interval '1 second', ARRAY[$3::int]),
			array_fill(interval '10 minutes', ARRAY[$3::int]), array_fill(0.2::float8, ARRAY[$3::int]),
			array_fill('null'::jsonb, ARRAY[$3::int]), array_fill('null'::jsonb, ARRAY[$3::int]),
			ARRAY(SELECT 'poster/' || g FROM generate_series(1, $3::int) g),
			array_fill(0::bigint, ARRAY[$3::int]), array_fill(0::bigint, ARRAY[$3::int]), array_fill(''::text, ARRAY[$3::int]))`,
		string(app), t0, n)
	require.NoError(t, err)
	require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `ALTER TABLE docket.job_completions DISABLE TRIGGER job_completions_completed`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO docket.job_completions (job_id, output_asset, output_kind, recorded_by, recorded_at, claim_token)
			SELECT j.id, j.requested_output, 'image/png', $1, $2, gen_random_uuid() FROM docket.jobs j`, string(app), t0); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `ALTER TABLE docket.job_completions ENABLE TRIGGER job_completions_completed`)
		return err
	}))
	_, err = e.Pool.Exec(ctx, `ANALYZE docket.jobs; ANALYZE docket.job_completions`)
	require.NoError(t, err)

	// JobProducedBy, as sql/queries/provenance.sql has it.
	const query = `SELECT c.job_id FROM docket.job_completions c
JOIN docket.jobs j ON j.id = c.job_id
WHERE c.output_asset = $1::text AND c.output_kind = $2::text
  AND docket.job_visible($3::text, j.project)
ORDER BY c.job_id
LIMIT 1000`
	plan := pgtest.Explain(t, e.API, query, "poster/50000", "image/png", string(app))
	require.Contains(t, plan, "Index Scan using job_completions_output_idx on job_completions", plan)
	require.NotContains(t, plan, "Seq Scan", plan)
	ids, err := e.client.ProducedBy(ctx, "poster/50000", "image/png")
	require.NoError(t, err)
	require.Len(t, ids, 1)
}

// TestProvenanceRecipes runs the psql recipes of docs/jobs.md, as the owner
// would in psql.
func TestProvenanceRecipes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := claimed(t, e, render(`{"poster": 42}`))
	_, err := e.client.CompleteWith(ctx, jobs.Completion{Lease: j.Lease(), Record: clamped()}, nil)
	require.NoError(t, err)

	var producer int64
	var params json.RawMessage
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT c.job_id, c.params_used
		FROM docket.job_completions c JOIN docket.jobs j ON j.id = c.job_id
		WHERE c.output_asset = 'poster/42' AND c.output_kind = 'image/png'`).Scan(&producer, &params))
	require.Equal(t, j.ID, producer)
	require.JSONEq(t, `{"width": 2048}`, string(params))

	var again int64
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT e.id FROM docket.jobs j JOIN docket.job_completions c ON c.job_id = j.id,
		     docket.job_enqueue_one(j.project, $3, $2, j.kind, j.queue, j.priority, j.payload, j.payload_schema,
		         '', NULL, j.max_attempts, j.repeatable, j.external, j.lease, j.backoff_base, j.backoff_cap, j.backoff_jitter,
		         c.params_used, c.inputs_used, j.requested_output, 0, 0, '', j.requested_kind, j.target_root) e
		WHERE j.id = $1`, j.ID, t0, string(app)).Scan(&again))
	got, err := e.client.Get(ctx, again)
	require.NoError(t, err)
	require.Equal(t, jobs.OutputRef{Asset: "poster/42", Kind: "image/png", Root: "renders"}, got.Output)
	require.JSONEq(t, `{"width": 2048}`, string(got.Params))
	require.Equal(t, []string{"src:poster/42", "font:inter"}, got.Inputs)
}
