package worker_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// Two workers of one queue running different handler revisions each take
// only the jobs pinned to their own revision, and record it with the claim
// and every event; a job pinned to a revision neither runs is never claimed
// and is listed as unrunnable, until it is pinned to one that runs.
func TestWorkersRunOnlyTheJobsPinnedToTheirRevision(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	e.Allow(t, testkit.Grants(app, project, access.JobPin)...)
	jc, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)

	// First by id, so a worker that could take it would take it first.
	stray, err := e.client.Enqueue(ctx, invoiceSpec(t, 0, ""))
	require.NoError(t, err)
	_, err = jc.Pin(ctx, []int64{stray.Job.ID}, []string{"r9"})
	require.NoError(t, err)
	pinned := map[int64]string{}
	var ids []int64
	for i := 1; i <= 8; i++ {
		in, err := e.client.Enqueue(ctx, invoiceSpec(t, i, ""))
		require.NoError(t, err)
		r := []string{"r1", "r2"}[i%2]
		_, err = jc.Pin(ctx, []int64{in.Job.ID}, []string{r})
		require.NoError(t, err)
		pinned[in.Job.ID] = r
		ids = append(ids, in.Job.ID)
	}

	var mu sync.Mutex
	ranBy := map[int64]string{}
	recs := map[string]*recorder{"r1": newRecorder(), "r2": newRecorder()}
	runs := func(revision string) *worker.Client {
		reg := worker.NewRegistry()
		require.NoError(t, worker.Handle(reg, invoiceKind, func(_ context.Context, j *jobs.Typed[Invoice]) error {
			mu.Lock()
			defer mu.Unlock()
			ranBy[j.ID] = revision
			if j.ClaimedRevision != revision {
				ranBy[j.ID] = revision + ", claimed as " + j.ClaimedRevision
			}
			return nil
		}, worker.HandlerOptions{Revision: revision}))
		return newWorker(t, e, reg, recs[revision], func(c *worker.Config) { c.Deployment = "billing@" + revision })
	}
	startTogether(t, runs("r1"), runs("r2"))
	recs["r1"].waitN(t, 4, is(worker.EventSucceeded, 0))
	recs["r2"].waitN(t, 4, is(worker.EventSucceeded, 0))

	mu.Lock()
	for _, id := range ids {
		require.Equal(t, pinned[id], ranBy[id], "job %d", id)
	}
	_, ranStray := ranBy[stray.Job.ID]
	mu.Unlock()
	require.False(t, ranStray, "nobody runs r9")
	for _, id := range ids {
		j, err := jc.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.Succeeded, j.State)
		require.Equal(t, pinned[id], j.ClaimedRevision)
		hist, err := jc.History(ctx, id)
		require.NoError(t, err)
		require.Equal(t, pinned[id], hist[len(hist)-1].Revision, "the completion event carries the revision")
		v, err := jc.Verify(ctx, id)
		require.NoError(t, err)
		require.True(t, v.OK, v.Problem)
	}
	require.Equal(t, jobs.Queued, jobState(t, e.Pool, stray.Job.ID))
	list, err := jc.List(ctx, jobs.Filter{Unrunnable: true})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, stray.Job.ID, list[0].ID)

	// Pinned to a revision a worker runs, it runs there.
	_, err = jc.Pin(ctx, []int64{stray.Job.ID}, []string{"r2", "r9"})
	require.NoError(t, err)
	recs["r2"].waitN(t, 1, is(worker.EventSucceeded, stray.Job.ID))
	require.Zero(t, recs["r1"].count(is(worker.EventStarted, stray.Job.ID)))
	list, err = jc.List(ctx, jobs.Filter{Unrunnable: true})
	require.NoError(t, err)
	require.Empty(t, list)
}
