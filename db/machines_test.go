package db_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
)

// machine is a row of docket.machines with the guard source of its table.
type machine struct {
	name, table, column string
	guards              string // the source of every trigger function on the table
}

func machines(t *testing.T, q db.DBTX) []machine {
	t.Helper()
	rows, err := q.Query(t.Context(), `
		SELECT m.name, split_part(m.subject, '.', 2), split_part(m.subject, '.', 3),
		       coalesce((SELECT string_agg(p.prosrc, E'\n') FROM pg_trigger g JOIN pg_proc p ON p.oid = g.tgfoid
		                 WHERE g.tgrelid = to_regclass(split_part(m.subject, '.', 1) || '.' || split_part(m.subject, '.', 2))
		                   AND NOT g.tgisinternal), '')
		FROM docket.machines m ORDER BY m.name`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (machine, error) {
		var m machine
		return m, r.Scan(&m.name, &m.table, &m.column, &m.guards)
	})
	require.NoError(t, err)
	return out
}

// Every machine is data in the kit's tables and is guarded by the kit: its
// table's guard is born through machine_birth and moves through
// machine_move, naming the machine; no guard reads a machine's states or
// transitions itself, and each machine's view shows exactly its rows.
func TestEveryMachineIsHeldByTheKit(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	ctx := t.Context()
	ms := machines(t, pool)
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.name
	}
	require.Equal(t, []string{"batch", "batch_item", "case", "job", "lane", "lane_review", "message", "obligation", "project", "run", "run_step", "schedule", "task", "wait"}, names)

	for _, m := range ms {
		t.Run(m.name, func(t *testing.T) {
			var column string
			require.NoError(t, pool.QueryRow(ctx, `SELECT a.attname FROM pg_attribute a
				WHERE a.attrelid = to_regclass('docket.' || $1) AND a.attname = $2`, m.table, m.column).Scan(&column),
				"docket.%s.%s", m.table, m.column)
			require.Contains(t, m.guards, "docket.machine_move('"+m.name+"'", "docket.%s's guard moves by the kit", m.table)
			if m.name != "job" { // jobs are born set-based, in jobs_record_insert
				require.Contains(t, m.guards, "docket.machine_birth('"+m.name+"'", "docket.%s's guard is born by the kit", m.table)
			}
			require.NotContains(t, m.guards, "_states WHERE", "a guard reads terminal and initial states through the kit")
			require.NotContains(t, m.guards, "_transitions WHERE", "a guard reads moves through the kit")

			var viewStates, tableStates, viewMoves, tableMoves int
			require.NoError(t, pool.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM docket.`+m.name+`_states),
				(SELECT count(*) FROM docket.machine_states WHERE machine = $1),
				(SELECT count(*) FROM docket.`+m.name+`_transitions),
				(SELECT count(*) FROM docket.machine_transitions WHERE machine = $1)`, m.name).
				Scan(&viewStates, &tableStates, &viewMoves, &tableMoves))
			require.Positive(t, tableStates)
			require.Positive(t, tableMoves)
			require.Equal(t, tableStates, viewStates)
			require.Equal(t, tableMoves, viewMoves)
		})
	}

	// Each table of a machine lists its immutable columns once, in a trigger
	// that fires before its guard: both of one timing, so in name order.
	rows, err := pool.Query(ctx, `
		SELECT DISTINCT split_part(subject, '.', 2) FROM docket.machines ORDER BY 1`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, table := range tables {
		var trig string
		var sameTiming bool
		err := pool.QueryRow(ctx, `SELECT g.tgname, (g.tgtype & 2) = (s.tgtype & 2) FROM pg_trigger g
			JOIN pg_trigger s ON s.tgrelid = g.tgrelid AND s.tgname = $1 || '_guard'
			WHERE g.tgrelid = to_regclass('docket.' || $1) AND g.tgfoid = 'docket.refuse_immutable'::regproc
			  AND cardinality(g.tgattr::int2[]) > 0`, table).Scan(&trig, &sameTiming)
		require.NoError(t, err, "docket.%s has a refuse_immutable trigger UPDATE OF its columns, and a guard", table)
		require.Equal(t, table+"_columns_immutable", trig)
		require.Less(t, trig, table+"_guard", "it fires before the guard")
		require.True(t, sameTiming, "docket.%s: the immutable columns' trigger has its guard's timing", table)
	}
}

// The machines change only by a migration that says so, for the owner too.
func TestMachinesChangeOnlyByMigration(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	ctx := t.Context()
	before := schemaSnapshot(t, pool)
	var states string
	require.NoError(t, pool.QueryRow(ctx, `SELECT string_agg(s::text, ',' ORDER BY machine, state) FROM docket.machine_states s`).Scan(&states))
	for _, sql := range []string{
		`UPDATE docket.machine_states SET terminal = false WHERE machine = 'job' AND state = 'succeeded'`,
		`UPDATE docket.job_states SET terminal = false WHERE state = 'succeeded'`,
		`INSERT INTO docket.machine_transitions (machine, from_state, to_state) VALUES ('case', 'closed', 'closed')`,
		`DELETE FROM docket.machine_transitions WHERE machine = 'wait'`,
		`DELETE FROM docket.machines WHERE name = 'schedule'`,
		`TRUNCATE docket.machine_transitions`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.ErrorContains(t, err, "DK015", sql)
	}
	var after string
	require.NoError(t, pool.QueryRow(ctx, `SELECT string_agg(s::text, ',' ORDER BY machine, state) FROM docket.machine_states s`).Scan(&after))
	require.Equal(t, states, after)
	require.Equal(t, before, schemaSnapshot(t, pool))
}

// An immutable column's refusal names the columns that would change, and
// setting a column to the value it holds is no change.
func TestImmutableRefusalNamesTheColumns(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	ctx := t.Context()
	_, err := pool.Exec(ctx, `SELECT docket.project_create('acme', 'user:ana', '2026-01-01 00:00:00+00')`)
	require.NoError(t, err)

	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT docket.set_context('user:ana', '2026-01-01 00:01:00+00')`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE docket.projects SET name = name, created_by = 'user:bo', created_at = created_at WHERE name = 'acme'`)
		return db.Translate(err, "update")
	})
	require.ErrorIs(t, err, db.ErrImmutable)
	require.ErrorContains(t, err, "created_by never changes")
	require.False(t, strings.Contains(err.Error(), "name,"), "an unchanged column is not named: %v", err)

	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT docket.set_context('user:ana', '2026-01-01 00:01:00+00')`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE docket.projects SET name = name, created_at = created_at WHERE name = 'acme'`)
		return err
	})
	require.NoError(t, err, "an UPDATE naming immutable columns without changing them passes")
}

// The capabilities docket.capabilities lists are those package access names,
// no more and no fewer: a grant of any other is refused.
func TestCapabilitiesAreTheKnownOnes(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	rows, err := pool.Query(t.Context(), `SELECT name FROM docket.capabilities ORDER BY name`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	known := []access.Capability{
		access.BatchRun, access.BudgetManage, access.CaseAdmit, access.CaseSweep, access.CaseView, access.GrantManage,
		access.JobCancel, access.JobClaim, access.JobCreate, access.JobPin, access.JobReconcile, access.JobRetry, access.JobView,
		access.LaneView, access.MessageDeliver, access.PlanRun, access.QueuePause, access.QueueView, access.QuorumCreate,
		access.RetentionManage, access.RetentionPrune,
		access.ScheduleManage, access.ScheduleSweep, access.ScheduleView, access.TaskReview,
	}
	want := make([]string, len(known))
	for i, c := range known {
		want[i] = string(c)
	}
	require.Equal(t, want, names)
	require.Len(t, names, 25)
}

// The tables every claim, completion and step advance updates have no
// BEFORE UPDATE row trigger: Postgres locks each row an UPDATE changes
// before firing one (whatever its columns or WHEN clause), a WAL record
// and a buffer write a row. Their guards are AFTER triggers (jobs.sql,
// "Guards").
func TestTheJobPathLocksNoRowForATrigger(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	rows, err := pool.Query(t.Context(), `SELECT g.tgrelid::regclass::text || ' ' || g.tgname FROM pg_trigger g
		WHERE g.tgrelid IN ('docket.jobs'::regclass, 'docket.run_steps'::regclass) AND NOT g.tgisinternal
		  AND (g.tgtype & 1) <> 0 AND (g.tgtype & 2) <> 0 AND (g.tgtype & 16) <> 0
		ORDER BY 1`)
	require.NoError(t, err)
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, found, "BEFORE UPDATE row triggers on the job path")
}

// TestNothingLocksARunToNameIt: no foreign key names docket.runs. A key's
// check locks the row it names FOR KEY SHARE, a WAL record each time, and
// a run is named by each of its steps as the advance admits them, after
// the advance wrote the run. Runs are never deleted, so the rows naming
// one are checked by triggers that lock nothing (frozen_reference_check).
func TestNothingLocksARunToNameIt(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	rows, err := pool.Query(t.Context(), `SELECT c.conrelid::regclass::text || ' ' || c.conname FROM pg_constraint c
		WHERE c.contype = 'f' AND c.confrelid = 'docket.runs'::regclass ORDER BY 1`)
	require.NoError(t, err)
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, found, "foreign keys naming a run")
}
