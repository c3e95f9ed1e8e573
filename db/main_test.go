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

// catalogRows lists docket's functions, triggers and views (River's aside)
// with the xmin of each one's catalog rows (a view's pg_class and pg_rewrite
// rows), so two lists are equal exactly when no object was written again.
func catalogRows(t *testing.T, q db.DBTX) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), `
SELECT x FROM (
    SELECT 'function ' || p.oid::regprocedure::text || ' ' || p.xmin::text
    FROM pg_proc p WHERE p.pronamespace = 'docket'::regnamespace AND p.proname NOT LIKE 'river\_%'
  UNION ALL
    SELECT 'trigger ' || t.tgname || ' ON ' || c.relname || ' ' || t.xmin::text
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = 'docket'::regnamespace AND NOT t.tgisinternal
  UNION ALL
    SELECT 'view ' || c.relname || ' ' || c.xmin::text || ' ' || r.xmin::text
    FROM pg_class c JOIN pg_rewrite r ON r.ev_class = c.oid
    WHERE c.relnamespace = 'docket'::regnamespace AND c.relkind = 'v'
) objects(x) ORDER BY x`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, out)
	return out
}

// catalogSnapshot describes schema docket as its definitions and migrations
// made it, in the words of Postgres' own deparsers: every function
// (pg_get_functiondef), trigger (pg_get_triggerdef), view (pg_get_viewdef),
// constraint (pg_get_constraintdef) and index (pg_get_indexdef); every
// relation's columns in order, storage options, privileges and comment; every
// domain; the schema's privileges; and the rows of the tables a migration
// seeds. Two snapshots are equal exactly when the schemas are, whatever
// order they were made in.
func catalogSnapshot(t *testing.T, q db.DBTX) string {
	t.Helper()
	var snap string
	err := q.QueryRow(context.Background(), `
SELECT string_agg(x, E'\n' ORDER BY x) FROM (
    SELECT 'function ' || p.oid::regprocedure::text || E'\n' || pg_get_functiondef(p.oid)
           || 'acl ' || coalesce(p.proacl::text, '') || ' comment ' || coalesce(obj_description(p.oid, 'pg_proc'), '')
    FROM pg_proc p WHERE p.pronamespace = 'docket'::regnamespace
  UNION ALL
    SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled ' || t.tgenabled::text
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = 'docket'::regnamespace AND NOT t.tgisinternal
  UNION ALL
    SELECT 'view ' || c.relname || E'\n' || pg_get_viewdef(c.oid)
    FROM pg_class c WHERE c.relnamespace = 'docket'::regnamespace AND c.relkind = 'v'
  UNION ALL
    SELECT 'relation ' || c.relname || ' ' || c.relkind::text || ' options ' || coalesce(c.reloptions::text, '')
           || ' acl ' || coalesce(c.relacl::text, '') || ' comment ' || coalesce(obj_description(c.oid, 'pg_class'), '')
    FROM pg_class c WHERE c.relnamespace = 'docket'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')
  UNION ALL
    SELECT 'column ' || c.relname || ' ' || row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum) || ' ' || a.attname
           || ' ' || format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
           || ' default ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '') || ' identity ' || a.attidentity::text
           || ' generated ' || a.attgenerated::text || ' comment ' || coalesce(col_description(c.oid, a.attnum), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE c.relnamespace = 'docket'::regnamespace AND c.relkind IN ('r', 'p', 'v') AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
    SELECT 'constraint ' || coalesce(c.relname, ty.typname) || ' ' || con.conname || ' ' || pg_get_constraintdef(con.oid)
           || CASE WHEN con.condeferrable THEN ' deferrable' ELSE '' END
    FROM pg_constraint con LEFT JOIN pg_class c ON c.oid = con.conrelid LEFT JOIN pg_type ty ON ty.oid = con.contypid
    WHERE con.connamespace = 'docket'::regnamespace
  UNION ALL
    SELECT 'index ' || pg_get_indexdef(i.indexrelid) || ' options ' || coalesce(ic.reloptions::text, '')
    FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid WHERE ic.relnamespace = 'docket'::regnamespace
  UNION ALL
    SELECT 'type ' || ty.typname || ' ' || ty.typtype::text || ' ' || coalesce(format_type(ty.typbasetype, ty.typtypmod), '')
           || ' default ' || coalesce(ty.typdefault, '') || CASE WHEN ty.typnotnull THEN ' not null' ELSE '' END
    FROM pg_type ty WHERE ty.typnamespace = 'docket'::regnamespace AND ty.typtype IN ('d', 'e')
  UNION ALL
    SELECT 'schema acl ' || coalesce(nspacl::text, '') FROM pg_namespace WHERE nspname = 'docket'
  UNION ALL
    SELECT 'rows error_codes ' || (SELECT string_agg(e::text, ' ' ORDER BY e.code) FROM docket.error_codes e)
  UNION ALL
    SELECT 'rows machines ' || (SELECT string_agg(m::text, ' ' ORDER BY m.name) FROM docket.machines m)
  UNION ALL
    SELECT 'rows machine_states ' || (SELECT string_agg(m::text, ' ' ORDER BY m.machine, m.state) FROM docket.machine_states m)
  UNION ALL
    SELECT 'rows machine_transitions ' || (SELECT string_agg(m::text, ' ' ORDER BY m.machine, m.from_state, m.to_state)
                                           FROM docket.machine_transitions m)
  UNION ALL
    SELECT 'rows capabilities ' || (SELECT string_agg(c::text, ' ' ORDER BY c.name) FROM docket.capabilities c)
  UNION ALL
    SELECT 'rows api_functions ' || (SELECT string_agg(a::text, ' ' ORDER BY a.name) FROM docket.api_functions a)
) objects(x)`).Scan(&snap)
	require.NoError(t, err)
	return snap
}
