package retention_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/retention"
	"github.com/docket-dev/docket/worker"
)

// Rows of other tables name a job by its id (docs/retention.md, "What names
// a job"): a timer, a wait's continuation, an obligation's escalation, a
// schedule occurrence, a run step and its compensation must not outlive it;
// its trace context, completion record and token rekey go with it. The
// triggers holding that are checked here as the foreign keys they replaced
// were: the same SQLSTATE and constraint names, and nothing changed by a
// refusal.

// foreignKey requires err to be a foreign-key violation of constraint.
func foreignKey(t testing.TB, err error, constraint string) {
	t.Helper()
	var pe *pgconn.PgError
	require.True(t, errors.As(err, &pe), "want a foreign-key violation of %s, got %v", constraint, err)
	require.Equal(t, "23503", pe.Code, pe.Message)
	require.Equal(t, constraint, pe.ConstraintName)
}

// nameJob writes, as the owner, a row of table naming job id: a timer (a
// row that must not outlive the job) or a trace context (one that goes with
// it).
func nameJob(ctx context.Context, q db.DBTX, table string, id int64) error {
	var err error
	switch table {
	case "timers":
		_, err = q.Exec(ctx, `INSERT INTO docket.timers (project, name, wake_at, job_id, created_by, created_at)
			VALUES ($1, 'remind', now(), $2, 'svc:app', now())`, project, id)
	case "job_traces":
		_, err = q.Exec(ctx, `INSERT INTO docket.job_traces (job_id, traceparent)
			VALUES ($1, '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')`, id)
	}
	return err
}

// pruned are the tables a prune removes from or records in, as a refused
// prune must leave them.
var pruned = []string{"docket.jobs", "docket.job_events", "docket.prunes", "docket.timers", "docket.job_traces"}

func TestARowNamingAJobThatIsNotThereIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 2, 24))
	ctx := t.Context()
	j := finish(t, e, e.jobs, "", jobs.Queued)
	missing := j.ID + 1000
	for table, constraint := range map[string]string{"timers": "timers_job_id_fkey", "job_traces": "job_traces_job_id_fkey"} {
		before := testkit.Snapshot(t, e.Pool, "docket."+table)
		foreignKey(t, nameJob(ctx, e.Pool, table, missing), constraint)
		require.Equal(t, before, testkit.Snapshot(t, e.Pool, "docket."+table), "the refused row was written")
	}
	// The other seven columns are held by the same trigger function.
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgname = ANY ($1) AND NOT tgisinternal`,
		[]string{"obligations_escalation_job_id_fkey", "waits_continuation_job_id_fkey", "timers_job_id_fkey",
			"schedule_occurrences_job_id_fkey", "run_steps_job_id_fkey", "run_steps_compensation_job_id_fkey",
			"job_traces_job_id_fkey", "job_completions_job_id_fkey", "job_token_rekeys_job_id_fkey"}).Scan(&n))
	require.Equal(t, 9, n, "every column naming a job is checked")

	// A job's id never changes: the rows naming it name it by id.
	_, err := e.Pool.Exec(ctx, `UPDATE docket.jobs SET id = DEFAULT WHERE id = $1`, j.ID)
	require.ErrorContains(t, err, "immutable")
	requireKept(t, e, j.ID)
}

// TestAPruneKeepsAJobThatARowStillNames: a job past its horizon that a timer
// names is not deleted: the prune is refused as the foreign key refused it,
// and nothing is removed or recorded. (A job's trace context goes with it:
// TestPruneRemovesTheTraceContextWithItsJob.)
func TestAPruneKeepsAJobThatARowStillNames(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 2, 24))
	ctx := t.Context()
	named := finish(t, e, e.jobs, "", jobs.Succeeded)
	other := finish(t, e, e.jobs, "", jobs.Succeeded)
	require.NoError(t, nameJob(ctx, e.Pool, "timers", named.ID))
	e.Clock.Advance(time.Hour)
	before := testkit.Snapshot(t, e.Pool, pruned...)
	_, err := e.pruner.Prune(ctx, 100)
	foreignKey(t, err, "timers_job_id_fkey")
	require.Equal(t, before, testkit.Snapshot(t, e.Pool, pruned...), "a refused prune removes and records nothing")
	requireKept(t, e, named.ID)
	requireKept(t, e, other.ID)
}

// TestAWriterNamingAJobHoldsItFromAPrune: a transaction that has written a
// row naming a job holds the job (FOR KEY SHARE) until it ends, so a prune
// running meanwhile leaves the job alone, and the row the writer then
// commits names a job that is there.
func TestAWriterNamingAJobHoldsItFromAPrune(t *testing.T) {
	t.Parallel()
	for _, table := range []string{"timers", "job_traces"} {
		e := setup(t, hours(1, 2, 24))
		ctx := t.Context()
		j := finish(t, e, e.jobs, "", jobs.Succeeded)
		e.Clock.Advance(time.Hour)
		tx, err := e.Pool.Begin(ctx)
		require.NoError(t, err)
		// A failed check must not leave the writer open: the database's
		// cleanup would wait for it.
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		require.NoError(t, nameJob(ctx, tx, table, j.ID))
		ps, err := e.pruner.Prune(ctx, 100)
		require.NoError(t, err)
		require.Empty(t, ps, "%s: the prune took a job a writer holds", table)
		require.NoError(t, tx.Commit(ctx))
		requireKept(t, e, j.ID)
		require.Equal(t, 1, rows(t, e, "docket."+table, "job_id = $1", j.ID))
	}
}

// TestAPruneAndAWriterNamingItsJobLeaveNoRowDangling races a prune of a job
// against a transaction that names it -- a timer, which keeps the job, and a
// trace context, which goes with it -- released together, again and again,
// each round in a database of its own: whichever takes the job first, no
// row is left naming a job that is gone. The writer that comes second is
// refused; a prune that comes second finds the job held and leaves it (a
// prune skips what another transaction holds), or, once the writer has
// committed, is refused by the timer or removes the trace context with the
// job.
func TestAPruneAndAWriterNamingItsJobLeaveNoRowDangling(t *testing.T) {
	t.Parallel()
	outcomes := map[string]int{}
	for round := range 12 {
		table := []string{"timers", "job_traces"}[round%2]
		e := setup(t, hours(1, 2, 24))
		ctx := t.Context()
		j := finish(t, e, e.jobs, "", jobs.Succeeded)
		e.Clock.Advance(time.Hour)
		var wg sync.WaitGroup
		start := make(chan struct{})
		var pruneErr, writeErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, pruneErr = e.pruner.Prune(ctx, 100)
		}()
		go func() {
			defer wg.Done()
			<-start
			writeErr = db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error { return nameJob(ctx, tx, table, j.ID) })
		}()
		close(start)
		wg.Wait()
		constraint := table + "_job_id_fkey"
		gone := rows(t, e, "docket.jobs", "id = $1", j.ID) == 0
		switch {
		case writeErr != nil:
			foreignKey(t, writeErr, constraint)
			require.NoError(t, pruneErr)
			require.True(t, gone, "round %d: the writer was refused though the prune did not take the job", round)
			outcomes[table+": the prune first"]++
		case pruneErr != nil:
			require.Equal(t, "timers", table, "round %d: %v", round, pruneErr)
			foreignKey(t, pruneErr, constraint)
			require.False(t, gone)
			outcomes[table+": the writer first, the prune refused"]++
		case gone:
			require.Equal(t, "job_traces", table, "round %d: a timer names a job that is gone", round)
			outcomes[table+": the writer first, its row removed with the job"]++
		default:
			outcomes[table+": the job held by the writer, left by the prune"]++
		}
		require.Zero(t, rows(t, e, "docket."+table, "NOT EXISTS (SELECT 1 FROM docket.jobs j WHERE j.id = job_id)"),
			"round %d: a %s row names a job that is gone", round, table)
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestAPruneThatDeletesJobsRunsUnderReadCommitted: a transaction snapshot
// cannot see a row naming a job that committed while the delete waited, so
// a prune that would delete jobs under REPEATABLE READ or SERIALIZABLE is
// refused, nothing changed; Prune runs its own transaction under READ
// COMMITTED whatever the session's default.
func TestAPruneThatDeletesJobsRunsUnderReadCommitted(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 2, 24))
	ctx := t.Context()
	j := finish(t, e, e.jobs, "", jobs.Succeeded)
	e.Clock.Advance(time.Hour)
	for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		before := testkit.Snapshot(t, e.Pool, pruned...)
		tx, err := e.API.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
		require.NoError(t, err)
		_, err = e.pruner.PruneTx(ctx, tx, 100)
		require.ErrorIs(t, err, db.ErrInvalidArgument, "%s", iso)
		require.ErrorContains(t, err, "READ COMMITTED")
		require.NoError(t, tx.Rollback(ctx))
		require.Equal(t, before, testkit.Snapshot(t, e.Pool, pruned...), "%s", iso)
		requireKept(t, e, j.ID)
	}
	cfg := e.API.Config()
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	serializable, err := retention.NewClient(pool, retention.Config{Actor: pruner, Clock: e.Clock})
	require.NoError(t, err)
	ps, err := serializable.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	requirePruned(t, e, j.ID, ps[0].ID)

	// So does the prune sweep's transaction.
	swept := finish(t, e, e.jobs, "", jobs.Succeeded)
	e.Clock.Advance(time.Hour)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, jobs.MustKind[struct{}]("report.build", 1),
		func(context.Context, *jobs.Typed[struct{}]) error { return nil }))
	w, err := worker.NewClient(pool, worker.Config{Actor: pruner, Registry: reg, Clock: e.Clock, Logger: testkit.Logger,
		Deployment: "test", Sweeps: []worker.Sweep{retention.Sweep(0)}})
	require.NoError(t, err)
	n, err := w.Sweep(ctx, retention.SweepName)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, rows(t, e, "docket.jobs", "id = $1", swept.ID))
}
