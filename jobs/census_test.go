package jobs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// censusJobs enqueues, in acme, n jobs on each of the queues named, and
// returns their ids by queue.
func censusJobs(t *testing.T, e env, n int, queues ...string) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	for _, q := range queues {
		specs := make([]jobs.Spec, n)
		for i := range specs {
			specs[i] = spec(fmt.Sprintf(`{"queue": %q, "n": %d}`, q, i))
			specs[i].Queue = q
		}
		receipts, err := e.client.EnqueueMany(t.Context(), specs)
		require.NoError(t, err)
		for _, r := range receipts {
			out[q] = append(out[q], r.ID)
		}
	}
	return out
}

// The census counts the project's jobs by queue, then state in the order
// of jobs.States, at most perState of each state, and says which states
// reached the bound.
func TestCensusCountsAProjectsJobsByQueueAndState(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	ids := censusJobs(t, e, 3, "mail", "billing")
	_, ok, err := e.client.ClaimID(ctx, ids["mail"][0], jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = e.client.Cancel(ctx, ids["billing"][0], "not wanted")
	require.NoError(t, err)

	got, err := e.client.Census(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, jobs.Census{Project: project, PerState: jobs.DefaultCensusPerState, Cells: []jobs.CensusCell{
		{Queue: "billing", State: jobs.Queued, Jobs: 2},
		{Queue: "billing", State: jobs.Cancelled, Jobs: 1},
		{Queue: "mail", State: jobs.Queued, Jobs: 2},
		{Queue: "mail", State: jobs.Claimed, Jobs: 1},
	}}, got)

	// Bounded: 3 of the 4 queued jobs are counted, and queued is said to
	// have reached the bound; the other states have fewer.
	got, err = e.client.Census(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, []jobs.State{jobs.Queued}, got.Capped)
	queued := 0
	for _, c := range got.Cells {
		if c.State == jobs.Queued {
			queued += c.Jobs
		}
	}
	require.Equal(t, 3, queued, "the first 3 queued jobs only")
	require.Equal(t, 3, got.PerState)
}

// The census is the actor's: one that may not see the project's jobs gets
// an empty census, not an error; CensusTx sees what its transaction wrote.
func TestCensusIsTheActorsAndTheTransactions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	censusJobs(t, e, 2, "mail")

	got, err := clientAs(t, e.API, e.Clock, nobody).Census(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, got.Cells)
	require.Empty(t, got.Capped)

	tx, err := e.API.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	_, err = e.client.EnqueueTx(ctx, tx, spec(`{"in": "tx"}`))
	require.NoError(t, err)
	got, err = e.client.CensusTx(ctx, tx, 0)
	require.NoError(t, err)
	require.Equal(t, []jobs.CensusCell{
		{Queue: jobs.DefaultQueue, State: jobs.Queued, Jobs: 1},
		{Queue: "mail", State: jobs.Queued, Jobs: 2},
	}, got.Cells)
}

// A census it cannot take it refuses, saying why.
func TestCensusRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	for _, n := range []int{-1, jobs.MaxCensusPerState + 1} {
		_, err := e.client.Census(ctx, n)
		require.ErrorIs(t, err, db.ErrInvalidArgument, n)
		require.ErrorContains(t, err, "a state is outside 1..100000", n)
	}
	noProject, err := jobs.NewClient(e.API, jobs.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	_, err = noProject.Census(ctx, 0)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "no project")
}
