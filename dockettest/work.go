package dockettest

import (
	"context"
	"testing"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// WorkJob runs existing job id once with w's handler for its kind, through
// [worker.Client.RunJob]: claimed under the lease protocol as w's actor, at
// w's clock's now, run as a started worker runs it, and its outcome
// recorded before WorkJob returns. It returns what became of the attempt:
// the job as it stands after, the outcome event, and the handler's error
// (nil when the job succeeded). w need not be started, and should not be:
// a running worker might claim the job first.
//
// It fails the test when RunJob refuses (no handler for the job's kind,
// the job not visible to w's actor, finished, not yet due by w's clock,
// held by a live lease) or cannot reach the database.
func WorkJob(ctx context.Context, t testing.TB, w *worker.Client, id int64) worker.JobRun {
	t.Helper()
	run, err := w.RunJob(ctx, id)
	if err != nil {
		t.Fatalf("dockettest: work job %d: %v", id, err)
	}
	return run
}

// Work enqueues the job spec describes with w (in w's project, as w's
// actor, with its handler's defaults) and runs it at once with [WorkJob]. A
// spec whose AvailableAt is after w's clock's now fails the test: move the
// clock, or enqueue it and call WorkJob when it is due.
func Work(ctx context.Context, t testing.TB, w *worker.Client, spec jobs.Spec) worker.JobRun {
	t.Helper()
	enq, err := w.Enqueue(ctx, spec)
	if err != nil {
		t.Fatalf("dockettest: enqueue a job of kind %s: %v", spec.Kind, err)
	}
	return WorkJob(ctx, t, w, enq.Job.ID)
}
