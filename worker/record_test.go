package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// recordHandlers registers, for posterKind, a handler that succeeds without
// writes (its success is recorded with its batch's) with the record its
// job's mode asks for: "good" the job's request, "bad" inputs the job was
// not given. Each handler waits until n have started, so that their
// successes reach the batch together.
func recordHandlers(t *testing.T, n int32) *worker.Registry {
	t.Helper()
	var arrived atomic.Int32
	release := make(chan struct{})
	reg := worker.NewRegistry()
	require.NoError(t, worker.HandleResult(reg, posterKind, func(ctx context.Context, j *jobs.Typed[Poster]) (worker.Result, error) {
		if arrived.Add(1) == n {
			close(release)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return worker.Result{}, ctx.Err()
		}
		rec := &jobs.CompletionRecord{Output: jobs.OutputRef{Asset: j.Output.Asset, Kind: j.Output.Kind}, Inputs: j.Inputs}
		if j.Args.Mode == "bad" {
			rec.Inputs = []string{"src:another"}
		}
		return worker.Result{Record: rec}, nil
	}))
	return reg
}

// enqueuePosters enqueues one poster job per mode, each with one attempt, and
// returns their ids in order.
func enqueuePosters(t *testing.T, e env, modes ...string) []int64 {
	t.Helper()
	ids := make([]int64, len(modes))
	for i, mode := range modes {
		s, err := posterKind.Spec(Poster{ID: i + 1, Width: 100, Mode: mode})
		require.NoError(t, err)
		s.Output = jobs.OutputRef{Asset: fmt.Sprintf("poster/%d", i+1), Kind: "image/png"}
		s.Inputs = []string{fmt.Sprintf("src:%d", i+1)}
		s.Retry = jobs.RetryPolicy{MaxAttempts: 1}
		got, err := e.client.Enqueue(t.Context(), s)
		require.NoError(t, err)
		ids[i] = got.Job.ID
	}
	return ids
}

// records counts the completion records of job id.
func records(t *testing.T, e env, id int64) int {
	t.Helper()
	var n int
	require.NoError(t, e.Pool.QueryRow(t.Context(), "SELECT count(*) FROM docket.job_completions WHERE job_id = $1", id).Scan(&n))
	return n
}

// A batch of successes, one of which states a record its job refuses: the
// batch's one statement refuses that element alone, with storage's reason;
// its attempt fails with that reason while the others complete with their
// records.
func TestABadRecordInABatchFailsItsAttemptAlone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	modes := []string{"good", "good", "bad", "good", "good"}
	reg := recordHandlers(t, int32(len(modes)))
	ids := enqueuePosters(t, e, modes...)
	rec := newRecorder()
	startWorker(t, e, reg, rec, func(cfg *worker.Config) { cfg.Batch.Window = 100 * time.Millisecond })
	rec.waitN(t, 4, func(ev worker.Event) bool { return ev.Type == worker.EventSucceeded })
	rec.waitN(t, 1, func(ev worker.Event) bool { return ev.Type == worker.EventFailed })

	const reason = "the completion record's inputs are not the job's" // docket.job_record_refusal's words
	for i, mode := range modes {
		j, err := e.client.Jobs().Get(t.Context(), ids[i])
		require.NoError(t, err)
		if mode == "good" {
			require.Equal(t, jobs.Succeeded, j.State, "job %d", i)
			require.Equal(t, 1, records(t, e, ids[i]), "job %d has its record", i)
			continue
		}
		require.Equal(t, jobs.Dead, j.State, "the bad record's attempt failed (its last)")
		require.Contains(t, j.Diagnostic, "completion record: ")
		require.Contains(t, j.Diagnostic, "invalid argument")
		require.Contains(t, j.Diagnostic, fmt.Sprintf("job %d: %s", ids[i], reason), "storage's reason, in its words")
		require.Zero(t, records(t, e, ids[i]), "the refused element recorded nothing")
	}
	failed := rec.first(func(ev worker.Event) bool { return ev.Type == worker.EventFailed })
	require.Equal(t, ids[2], failed.JobID)
	require.ErrorContains(t, failed.Err, reason)
	require.Zero(t, rec.count(func(ev worker.Event) bool { return ev.Type == worker.EventLeaseLost }), "no success was refused as a lost lease")
}

// The completion-record rule is SQL's alone: the worker and package jobs
// hold no copy of it. With the rule replaced in the database by one that
// refuses every record, a record that fits its job is refused, with the
// replacement's words; with one that refuses none, a record whose inputs
// are not its job's completes. Go passed both through unjudged.
func TestTheCompletionRecordRuleIsSQLsAlone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	replaceRule := func(body string) {
		t.Helper()
		_, err := e.Pool.Exec(ctx, `CREATE OR REPLACE FUNCTION docket.job_record_refusal(p_id bigint, p_job docket.jobs, p_asset text,
			p_kind text, p_root text, p_params jsonb, p_inputs jsonb) RETURNS text LANGUAGE sql STABLE AS $$ `+body+` $$`)
		require.NoError(t, err)
	}

	replaceRule(`SELECT format('job %s: refused by the rule the database holds', p_id)`)
	reg := recordHandlers(t, 1)
	good := enqueuePosters(t, e, "good")[0]
	rec := newRecorder()
	w := newWorker(t, e, reg, rec, nil)
	run, err := w.RunJob(ctx, good)
	require.NoError(t, err)
	require.Equal(t, worker.EventFailed, run.Outcome, "a record that fits its job, refused by SQL alone")
	require.ErrorContains(t, run.Err, "refused by the rule the database holds")
	require.Equal(t, jobs.Dead, run.Job.State)
	require.Zero(t, records(t, e, good))

	// The same through a started worker's batch.
	replaceRule(`SELECT NULL::text`)
	reg = recordHandlers(t, 1)
	bad := enqueuePosters(t, e, "bad")[0]
	startWorker(t, e, reg, rec, nil)
	rec.waitN(t, 1, func(ev worker.Event) bool { return ev.Type == worker.EventSucceeded && ev.JobID == bad })
	j, err := e.client.Jobs().Get(ctx, bad)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, j.State, "inputs the job was not given, let through by SQL's rule alone")
	plan, err := e.client.Jobs().RerunPlan(ctx, bad)
	require.NoError(t, err)
	require.True(t, plan.Recorded)
	require.Equal(t, []string{"src:another"}, plan.Inputs)
	require.False(t, strings.Contains(j.Diagnostic, "completion record"))
}

// first returns the first recorded event that matches, or the zero Event.
func (r *recorder) first(match func(worker.Event) bool) worker.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if match(e) {
			return e
		}
	}
	return worker.Event{}
}
