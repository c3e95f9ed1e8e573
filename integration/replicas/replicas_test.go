//go:build unix

package replicas

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
)

// One rig for every step: a primary and its standby take seconds to start.
func TestReadsFromAReplica(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	t.Run("jobs", func(t *testing.T) { readJobs(t, r) })
	t.Run("cases", func(t *testing.T) { readCases(t, r) })
	t.Run("plans", func(t *testing.T) { readPlans(t, r) })
	t.Run("misplaced", func(t *testing.T) { misplaced(t, r) })
	t.Run("cli", func(t *testing.T) { cli(t, r) })
	t.Run("console", func(t *testing.T) { consoleReads(t, r) })
}

// jobsOn returns app's job client of acme on pool, reading on the replica.
func (r *rig) jobsOn(t *testing.T, pool *pgxpool.Pool) *jobs.Client {
	t.Helper()
	c, err := jobs.NewClient(pool, jobs.Config{Project: project, Actor: app, Clock: r.clock, Replica: r.replica})
	require.NoError(t, err)
	return c
}

// A job written through the primary is read on the replica once replayed,
// with the lag read at, by the client's clock; while replay is paused, the
// replica's reads are behind, a …Tx read on the primary is not, and a write
// — with the job it returns — goes to the primary.
func readJobs(t *testing.T, r *rig) {
	ctx := t.Context()
	applied, flushed := r.jobsOn(t, r.applied), r.jobsOn(t, r.flushed)
	spec := jobs.Spec{Kind: "billing.invoice", Payload: []byte(`{"n": 1}`)}

	before := time.Now().Truncate(time.Microsecond)
	first, err := applied.Enqueue(ctx, spec)
	require.NoError(t, err)
	got, err := applied.Get(ctx, first.Job.ID)
	require.NoError(t, err, "replayed before the commit returned")
	require.Equal(t, first.Job, got)
	listed, err := applied.List(ctx, jobs.Filter{})
	require.NoError(t, err)
	require.Equal(t, []jobs.Job{got}, listed)
	history, err := applied.History(ctx, first.Job.ID)
	require.NoError(t, err)
	require.Len(t, history, 1)
	census, err := applied.Census(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []jobs.CensusCell{{Queue: "default", State: jobs.Queued, Jobs: 1}}, census.Cells)

	// The lag: the replica has replayed the enqueue's commit (or a later
	// one), and is behind by the client's clock less that commit's instant.
	lag, err := applied.ReplicaLag(ctx)
	require.NoError(t, err)
	require.True(t, lag.Replica, "a standby answers")
	require.True(t, lag.Known())
	require.False(t, lag.Replayed.Before(before), "replayed %s, enqueued after %s", lag.Replayed, before)
	require.False(t, lag.Replayed.After(time.Now()))
	require.Equal(t, r.clock.Now(), lag.At)
	r.clock.Set(time.Now().Add(time.Minute))
	lag, err = applied.ReplicaLag(ctx)
	require.NoError(t, err)
	require.Equal(t, r.clock.Now(), lag.At, "the client's clock, not the database's")
	require.Equal(t, lag.At.Sub(lag.Replayed), lag.Behind)
	require.GreaterOrEqual(t, lag.Behind, time.Minute)
	require.Contains(t, lag.String(), "replica, at most ")

	// Replay paused: a job committed on the primary is not on the replica.
	r.pauseReplay(t)
	paused := time.Now().Truncate(time.Microsecond)
	second, err := flushed.Enqueue(ctx, spec)
	require.NoError(t, err)
	_, err = flushed.Get(ctx, second.Job.ID)
	require.ErrorIs(t, err, db.ErrNotFound, "the replica has not replayed it")
	listed, err = flushed.List(ctx, jobs.Filter{})
	require.NoError(t, err)
	require.Equal(t, []int64{first.Job.ID}, ids(listed))
	lag, err = flushed.ReplicaLag(ctx)
	require.NoError(t, err)
	require.True(t, lag.Replayed.Before(paused), "the lag says the replica is from before the second job")
	require.NoError(t, db.WithTx(ctx, r.flushed, func(tx pgx.Tx) error {
		got, err := flushed.GetTx(ctx, tx, second.Job.ID)
		require.NoError(t, err, "a …Tx read is in the caller's transaction, on the primary")
		require.Equal(t, second.Job, got)
		return nil
	}))
	// A write through the client with a replica goes to the primary, and
	// the job it returns is read there.
	cancelled, err := flushed.Cancel(ctx, second.Job.ID, "read from a replica")
	require.NoError(t, err)
	require.Equal(t, jobs.Cancelled, cancelled.State)

	// Replay resumed: a write that waits for its replay has the paused ones
	// replayed before it.
	r.resumeReplay(t)
	_, err = applied.Enqueue(ctx, spec)
	require.NoError(t, err)
	got, err = applied.Get(ctx, second.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Cancelled, got.State)
}

// Cases are read on the replica; State, whose version a PutState names,
// stays on the primary.
func readCases(t *testing.T, r *rig) {
	ctx := t.Context()
	casesOn := func(pool *pgxpool.Pool) *cases.Client {
		c, err := cases.NewClient(pool, cases.Config{Actor: app, Clock: r.clock, Replica: r.replica})
		require.NoError(t, err)
		return c
	}
	applied, flushed := casesOn(r.applied), casesOn(r.flushed)
	admission := func(value string) cases.Admission {
		return cases.Admission{Project: project, Kind: "supplier.switch", Keys: []cases.Key{{Namespace: "document", Value: value}}}
	}

	first, err := applied.Admit(ctx, admission("DOC-1"))
	require.NoError(t, err)
	got, err := applied.Get(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, first.Case, got)
	listed, err := applied.List(ctx, cases.Filter{Project: project})
	require.NoError(t, err)
	require.Equal(t, []cases.Case{got}, listed)
	history, err := applied.History(ctx, first.ID)
	require.NoError(t, err)
	require.NotEmpty(t, history)
	lag, err := applied.ReplicaLag(ctx)
	require.NoError(t, err)
	require.True(t, lag.Replica)

	r.pauseReplay(t)
	second, err := flushed.Admit(ctx, admission("DOC-2"))
	require.NoError(t, err)
	_, err = flushed.Get(ctx, second.ID)
	require.ErrorIs(t, err, db.ErrNotFound, "the replica has not replayed it")
	state, err := flushed.State(ctx, second.ID)
	require.NoError(t, err, "State reads on the primary")
	require.Equal(t, second.Version, state.Version)
	r.resumeReplay(t)
	_, err = applied.Admit(ctx, admission("DOC-3"))
	require.NoError(t, err)
	_, err = applied.Get(ctx, second.ID)
	require.NoError(t, err)
}

// Runs are read on the replica; a cancel, and the run it returns, go to the
// primary.
func readPlans(t *testing.T, r *rig) {
	ctx := t.Context()
	plansOn := func(pool *pgxpool.Pool) *plans.Client {
		c, err := plans.NewClient(pool, plans.Config{Actor: app, Clock: r.clock, Replica: r.replica})
		require.NoError(t, err)
		return c
	}
	applied, flushed := plansOn(r.applied), plansOn(r.flushed)
	p := plans.Plan{Steps: []plans.Step{{ID: "a", Kind: "t.a", Args: []plans.Arg{}, Terminal: true}}}

	run, err := applied.Start(ctx, plans.Start{Project: project, Plan: p})
	require.NoError(t, err)
	got, err := applied.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, run, got)
	listed, err := applied.List(ctx, plans.Filter{Project: project})
	require.NoError(t, err)
	require.Equal(t, []plans.Run{got}, listed)
	steps, err := applied.Steps(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, steps, 1)
	versions, err := applied.Versions(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, versions, 1)

	r.pauseReplay(t)
	cancelled, err := flushed.Cancel(ctx, run.ID, "read from a replica")
	require.NoError(t, err)
	require.NotEqual(t, plans.Running, cancelled.Status, "the run a cancel returns is read on the primary")
	got, err = flushed.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Running, got.Status, "the replica has not replayed the cancel")
	r.resumeReplay(t)
	_, err = applied.Start(ctx, plans.Start{Project: project, Plan: p})
	require.NoError(t, err)
	got, err = applied.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, cancelled.Status, got.Status)
}

// A replica given where the primary belongs refuses the write as
// db.ErrReadOnly, and a "replica" that is a primary says so.
func misplaced(t *testing.T, r *rig) {
	ctx := t.Context()
	onReplica, err := jobs.NewClient(r.replica, jobs.Config{Project: project, Actor: app, Clock: r.clock})
	require.NoError(t, err)
	_, err = onReplica.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: []byte(`{}`)})
	require.ErrorIs(t, err, db.ErrReadOnly)

	primary, err := jobs.NewClient(r.flushed, jobs.Config{Project: project, Actor: app, Clock: r.clock, Replica: r.flushed})
	require.NoError(t, err)
	lag, err := primary.ReplicaLag(ctx)
	require.NoError(t, err)
	require.Equal(t, db.Lag{At: r.clock.Now()}, lag)
	require.Equal(t, "primary", lag.String())
}

func ids(js []jobs.Job) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}
