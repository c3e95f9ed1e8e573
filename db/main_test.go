package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// schemaSnapshot describes every object in schema docket — relations and
// their columns, functions and their bodies, constraints, triggers, indexes —
// so two snapshots are equal exactly when the schemas are.
func schemaSnapshot(t *testing.T, q db.DBTX) string {
	t.Helper()
	var snap string
	err := q.QueryRow(context.Background(), `
SELECT coalesce(string_agg(x, E'\n' ORDER BY x), '') FROM (
    SELECT 'rel ' || c.relname || ' ' || c.relkind::text
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'docket'
  UNION ALL
    SELECT 'col ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
           || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'docket' AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
    SELECT 'fn ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') ' || md5(p.prosrc)
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'docket'
  UNION ALL
    SELECT 'con ' || con.conname || ' ' || pg_get_constraintdef(con.oid)
    FROM pg_constraint con JOIN pg_namespace n ON n.oid = con.connamespace
    WHERE n.nspname = 'docket'
  UNION ALL
    SELECT 'trg ' || pg_get_triggerdef(tg.oid)
    FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'docket' AND NOT tg.tgisinternal
  UNION ALL
    SELECT 'idx ' || indexdef FROM pg_indexes WHERE schemaname = 'docket'
  UNION ALL
    SELECT 'typ ' || t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE n.nspname = 'docket' AND t.typtype IN ('e', 'd')
) objects(x)`).Scan(&snap)
	require.NoError(t, err)
	return snap
}

// appliedVersions lists the docket and River versions the database records,
// each as often as it is recorded.
func appliedVersions(t *testing.T, q db.DBTX) (docket, river []int64) {
	t.Helper()
	ctx := context.Background()
	rows, err := q.Query(ctx, `SELECT version_id FROM docket.goose_db_version WHERE version_id > 0 ORDER BY version_id`)
	require.NoError(t, err)
	docket, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	rows, err = q.Query(ctx, `SELECT version::bigint FROM docket.river_migration ORDER BY version`)
	require.NoError(t, err)
	river, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return docket, river
}
