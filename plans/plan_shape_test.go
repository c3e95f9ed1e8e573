package plans_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/jobclaim"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
)

// TestABatchAdvancesItsRunsByKeyWhateverTheTablesWere: a worker's session
// keeps the plans of the statements that advance runs from its first
// batch. Made when the tables held one run, they read runs and run_steps
// whole at every later batch; a batch's successes now find their steps and
// runs by key whatever the tables held when the session first advanced one.
func TestABatchAdvancesItsRunsByKeyWhateverTheTablesWere(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	conn, err := e.API.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	jc, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	store := jobclaim.Of[jobs.Job, jobs.Decoder](jc)
	p := plans.Plan{Steps: []plans.Step{step("a", "t.a"), step("b", "t.b", "a")}}
	p.Steps[1].Terminal = true
	start := func(n int) {
		for range n {
			_, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
			require.NoError(t, err)
		}
	}
	// advance claims up to n due steps and records their successes, in one
	// transaction on the session, and returns the rows of each table it read
	// by sequential scans.
	advance := func(n int) map[string]int64 {
		read := map[string]int64{}
		require.NoError(t, db.WithTx(ctx, conn, func(tx pgx.Tx) error {
			got, err := store.ClaimQueueTx(ctx, tx, "default", n, nil, nil)
			require.NoError(t, err)
			require.NotEmpty(t, got)
			batch := make([]jobs.Completion, len(got))
			for i, j := range got {
				batch[i] = jobs.Completion{Lease: j.Lease(), Result: []byte(`"ok"`)}
			}
			before := seqRead(t, tx)
			refusals, err := jc.CompleteManyTx(ctx, tx, batch)
			require.NoError(t, err)
			for _, r := range refusals {
				require.NoError(t, r)
			}
			for table, n := range seqRead(t, tx) {
				read[table] = n - before[table]
			}
			return nil
		}))
		return read
	}
	start(1)
	advance(10) // the session's plans, made with one run in the tables
	start(300)
	for _, n := range []int{1, 50} {
		require.Equal(t, map[string]int64{"jobs": 0, "runs": 0, "run_steps": 0}, advance(n),
			"rows read by sequential scans as %d successes advanced their runs", n)
	}
}

// seqRead is how many rows of jobs, runs and run_steps this transaction has
// read by sequential scans so far.
func seqRead(t testing.TB, tx pgx.Tx) map[string]int64 {
	t.Helper()
	rows, err := tx.Query(t.Context(), `
		SELECT t.relname, coalesce(s.seq_tup_read, 0) FROM unnest(ARRAY['jobs', 'runs', 'run_steps']) AS t(relname)
		LEFT JOIN pg_stat_xact_user_tables s ON s.schemaname = 'docket' AND s.relname = t.relname`)
	require.NoError(t, err)
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		require.NoError(t, rows.Scan(&name, &n))
		out[name] = n
	}
	require.NoError(t, rows.Err())
	return out
}
