package retention_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/retention"
)

// TestPruneRemovesExactlyWhatIsPastEachHorizon finishes jobs in every
// state, then prunes at instants either side of each horizon: a succeeded
// or cancelled job goes one hour after it finished, a failed one after
// two, and a queued, claimed or uncertain job never; nor does a job of
// another project, where the pruner may not prune.
func TestPruneRemovesExactlyWhatIsPastEachHorizon(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 2, 24))
	ctx := t.Context()
	ok := finish(t, e, e.jobs, "", jobs.Succeeded)
	cancelled := finish(t, e, e.jobs, "", jobs.Cancelled)
	failed := finish(t, e, e.jobs, "", jobs.Failed)
	queued := finish(t, e, e.jobs, "", jobs.Queued)
	claimed := finish(t, e, e.jobs, "", jobs.Claimed)
	uncertain := finish(t, e, e.jobs, "", jobs.Uncertain)
	elsewhere := finish(t, e, e.jobsAs(t, app, other), "", jobs.Succeeded)

	e.Clock.Advance(time.Hour - time.Second)
	ps, err := e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, ps, "nothing is past a horizon yet")

	e.Clock.Advance(time.Second)
	ps, err = e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	p := ps[0]
	require.Equal(t, project, p.Project)
	require.Equal(t, 2, p.Jobs)
	require.Equal(t, map[string]int{"succeeded": 1, "cancelled": 1}, p.JobStates)
	require.Equal(t, 4, p.JobEvents, "queued, succeeded (its claim with it); queued, cancelled")
	require.Len(t, p.Digest, 32)
	require.Equal(t, hours(1, 2, 24), p.Policy)
	requirePruned(t, e, ok.ID, p.ID)
	requirePruned(t, e, cancelled.ID, p.ID)
	for _, j := range []jobs.Job{failed, queued, claimed, uncertain} {
		requireKept(t, e, j.ID)
	}

	e.Clock.Advance(time.Hour)
	ps, err = e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, map[string]int{"failed": 1}, ps[0].JobStates)
	requirePruned(t, e, failed.ID, ps[0].ID)

	e.Clock.Advance(1000 * time.Hour)
	ps, err = e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, ps, "unfinished and uncertain jobs are never pruned")
	for _, j := range []jobs.Job{queued, claimed, uncertain} {
		requireKept(t, e, j.ID)
	}
	_, err = e.jobsAs(t, app, other).Get(ctx, elsewhere.ID)
	require.NoError(t, err, "the pruner holds retention.prune on acme only")
}

// TestPruneTakesTheOldestFirstUpToItsLimit prunes 25 finished jobs ten at
// a time: each prune removes the oldest, and the ranges it records are
// exactly its jobs.
func TestPruneTakesTheOldestFirstUpToItsLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 1, 1))
	ctx := t.Context()
	var ids []int64
	for range 25 {
		ids = append(ids, finish(t, e, e.jobs, "", jobs.Succeeded).ID)
		e.Clock.Advance(time.Second)
	}
	e.Clock.Advance(time.Hour)
	var got []int
	for {
		ps, err := e.pruner.Prune(ctx, 10)
		require.NoError(t, err)
		if len(ps) == 0 {
			break
		}
		got = append(got, ps[0].Jobs)
	}
	require.Equal(t, []int{10, 10, 5}, got)
	list, err := e.as(t, keeper).Prunes(ctx, project, 0, 10)
	require.NoError(t, err)
	require.Len(t, list, 3)
	require.Equal(t, "{["+itoa(ids[0])+","+itoa(ids[9]+1)+")}", list[2].JobIDs, "the first prune took the ten oldest")
	require.Equal(t, "{["+itoa(ids[20])+","+itoa(ids[24]+1)+")}", list[0].JobIDs)
}

// TestIdempotencyKeysLastAsLongAsTheirJobs: enqueueing with the key of a
// pruned job creates a new job; with the key of a kept one it returns that
// job as a duplicate.
func TestIdempotencyKeysLastAsLongAsTheirJobs(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 24, 24))
	ctx := t.Context()
	old := finish(t, e, e.jobs, "invoice-1", jobs.Succeeded)
	kept := finish(t, e, e.jobs, "invoice-2", jobs.Failed)
	e.Clock.Advance(2 * time.Hour)
	ps, err := e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	requirePruned(t, e, old.ID, ps[0].ID)

	again, err := e.jobs.Enqueue(ctx, jobs.Spec{Kind: "report.build", Payload: json.RawMessage(`{"n": 1}`), IdempotencyKey: "invoice-1"})
	require.NoError(t, err)
	require.False(t, again.Duplicate, "the key went with its job")
	require.NotEqual(t, old.ID, again.Job.ID)
	dup, err := e.jobs.Enqueue(ctx, jobs.Spec{Kind: "report.build", Payload: json.RawMessage(`{"n": 1}`), IdempotencyKey: "invoice-2"})
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.Equal(t, kept.ID, dup.Job.ID)
}

// TestThePruneRecordVerifiesAgainstTheChainHeadsItRemoved takes the chain
// heads of jobs before they are pruned, as an auditor archiving them would:
// they verify against the prune's record, and altering one head, dropping
// one job or adding one does not.
func TestThePruneRecordVerifiesAgainstTheChainHeadsItRemoved(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 1, 1))
	ctx := t.Context()
	var ids []int64
	for _, s := range []jobs.State{jobs.Succeeded, jobs.Failed, jobs.Cancelled, jobs.Succeeded} {
		ids = append(ids, finish(t, e, e.jobs, "", s).ID)
	}
	auditor := e.as(t, app)
	heads, err := auditor.Heads(ctx, ids)
	require.NoError(t, err)
	require.Len(t, heads, 4)
	for _, h := range heads {
		require.True(t, h.OK)
	}
	e.Clock.Advance(2 * time.Hour)
	ps, err := e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	p := ps[0]
	require.Equal(t, retention.ChainDigest(heads), p.Digest, "the digest is recomputable outside the database")

	v, err := auditor.Verify(ctx, p.ID, heads)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)

	altered := append([]retention.Head(nil), heads...)
	altered[2].Hash = append([]byte(nil), altered[2].Hash...)
	altered[2].Hash[0] ^= 1
	v, err = auditor.Verify(ctx, p.ID, altered)
	require.NoError(t, err)
	require.False(t, v.OK)
	require.Contains(t, v.Problem, "do not hash to the digest")

	altered = append([]retention.Head(nil), heads...)
	altered[1].Events++
	v, err = auditor.Verify(ctx, p.ID, altered)
	require.NoError(t, err)
	require.False(t, v.OK, "an event count is part of the digest")

	v, err = auditor.Verify(ctx, p.ID, heads[:3])
	require.NoError(t, err)
	require.False(t, v.OK)
	require.Contains(t, v.Problem, "removed 4 jobs")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
