package access_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/testkit"
)

// riverTables returns River's tables in docket's schema, by name.
func riverTables(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `
		SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.relnamespace = 'docket'::regnamespace AND c.relkind IN ('r', 'p') AND c.relname LIKE 'river\_%'
		ORDER BY 1`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "docket.river_job")
	require.Contains(t, tables, "docket.river_migration")
	return tables
}

// riverState renders every River table, to show a refused statement
// changed nothing.
func riverState(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	return testkit.Snapshot(t, pool, riverTables(t, pool)...)
}

// TestAnEnqueuingLoginHasNoRiverTable shows a docket_app login, which only
// enqueues, refused (42501) every read and write of River's tables, which
// all tenants share, but the read of River's migration version, and River's
// tables unchanged.
func TestAnEnqueuingLoginHasNoRiverTable(t *testing.T) {
	t.Parallel()
	k := testkit.Setup(t, testkit.Ana, []string{testkit.Acme})
	app := k.Login(t, testkit.AppRole, testkit.App)
	before := riverState(t, k.Pool)
	for _, table := range riverTables(t, k.Pool) {
		for _, sql := range []string{
			"INSERT INTO " + table + " DEFAULT VALUES",
			"UPDATE " + table + " SET " + firstColumn(t, k.Pool, table) + " = " + firstColumn(t, k.Pool, table),
			"DELETE FROM " + table,
			"TRUNCATE " + table,
		} {
			require.Equal(t, insufficientPrivilege, attempt(t, app.Pool, sql), "docket_app: %s", sql)
		}
		read := "SELECT * FROM " + table + " LIMIT 1"
		if table == "docket.river_migration" {
			require.Empty(t, attempt(t, app.Pool, read), "docket_app reads River's migration version (docket status)")
		} else {
			require.Equal(t, insufficientPrivilege, attempt(t, app.Pool, read), "docket_app: %s", read)
		}
	}
	require.Equal(t, before, riverState(t, k.Pool))
}

// TestOnlyTheOwnerWritesRiversMigrations shows a forged river_migration row,
// which would make the owner's docket migrate refuse to run, refused
// (42501) to a member of every group role, the worker's included, as are
// changing and deleting its rows, and River's tables unchanged.
func TestOnlyTheOwnerWritesRiversMigrations(t *testing.T) {
	t.Parallel()
	k := testkit.Setup(t, testkit.Ana, []string{testkit.Acme})
	logins := map[string]testkit.Login{
		testkit.AppRole:      k.Login(t, testkit.AppRole, testkit.App),
		testkit.OperatorRole: k.Login(t, testkit.OperatorRole, testkit.Ops),
		testkit.ReaderRole:   k.Login(t, testkit.ReaderRole),
		testkit.WorkerRole:   k.Login(t, testkit.WorkerRole, testkit.App),
		"app and worker":     k.WorkerLogin(t, testkit.App),
	}
	before := riverState(t, k.Pool)
	for who, l := range logins {
		for _, sql := range []string{
			"INSERT INTO docket.river_migration (line, version) VALUES ('main', 9999)",
			"UPDATE docket.river_migration SET version = version + 1000",
			"DELETE FROM docket.river_migration",
			"TRUNCATE docket.river_migration",
		} {
			require.Equal(t, insufficientPrivilege, attempt(t, l.Pool, sql), "%s: %s", who, sql)
		}
	}
	require.Equal(t, before, riverState(t, k.Pool))
}

// TestAWorkerLoginUsesRiversJobs shows a docket_worker login reading and
// writing River's job table, as River's client does (the worker tests run
// their workers on such a login).
func TestAWorkerLoginUsesRiversJobs(t *testing.T) {
	t.Parallel()
	k := testkit.Setup(t, testkit.Ana, []string{testkit.Acme})
	w := k.Login(t, testkit.WorkerRole, testkit.App)
	for _, sql := range []string{
		"SELECT * FROM docket.river_job LIMIT 1",
		"INSERT INTO docket.river_job (args, kind, max_attempts, queue, state) VALUES ('{}', 'probe', 1, 'default', 'available')",
		"UPDATE docket.river_job SET priority = 1",
		"DELETE FROM docket.river_job",
		"SELECT * FROM docket.river_leader LIMIT 1",
		"SELECT * FROM docket.river_queue LIMIT 1",
	} {
		require.Empty(t, attempt(t, w.Pool, sql), "docket_worker: %s", sql)
	}
}
