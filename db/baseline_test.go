package db_test

import (
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
)

// premigrations17 and premigrations20 are the schemas (and seed rows) that
// docket's migrations 1 to 17 and 1 to 20 made, before the versioned
// migrations of sql/schema replaced them (from 21) and the definitions of
// sql/definitions took their functions, triggers and views: what a database
// migrated by a build of that time holds. They are pg_dump's output
// (--schema=docket --no-owner --no-privileges --inserts, its \restrict
// lines removed, and each pair `((x >= a) AND (x <= b))` written back as the
// `x BETWEEN a AND b` it was printed from, so that it parses to the same
// tree) of databases those migrations made on PostgreSQL 15.18;
// the migrations themselves are in git history (db/testdata/
// premigrations.tar.gz). They cannot be run again on every server: from
// 15.20, PostgreSQL refuses migration 15's ALTER TABLE of docket.jobs, whose
// row type functions of that time take as an argument. A dump restores the
// same catalog on any 15 or later.
//
//go:embed testdata/premigrations17.sql.gz
var premigrations17 []byte

//go:embed testdata/premigrations20.sql.gz
var premigrations20 []byte

// migrateAsBefore makes the database behind pool what a build from before
// the versioned migrations replaced 1 to 20 left after migrating up to
// version to (17 or 20): River's line, and docket's migrations to that
// version, recorded in goose's table as that build recorded them.
func migrateAsBefore(t *testing.T, pool *pgxpool.Pool, to int64) {
	t.Helper()
	ctx := t.Context()
	dump := map[int64][]byte{17: premigrations17, 20: premigrations20}[to]
	require.NotNil(t, dump, "no schema of version %d kept", to)
	zr, err := gzip.NewReader(bytes.NewReader(dump))
	require.NoError(t, err)
	script, err := io.ReadAll(zr)
	require.NoError(t, err)
	// The dump sets search_path for its session: restore on a connection
	// of its own and close it after.
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, conn.Hijack().Close(context.Background())) }()
	_, err = conn.Exec(ctx, string(script))
	require.NoError(t, err, "restore the schema of version %d", to)
}

// A database that migrations 1 to 20 made, holding jobs with their
// histories, is upgraded by Migrate: its migrations are recorded as 21 and
// after, its definitions applied; its catalog is then the catalog a fresh
// migrate makes (functions, triggers, views, constraints, indexes, columns,
// privileges, seed rows), each of its functions, triggers and views is
// recorded as the definition file that makes it, and every history written
// before still verifies.
func TestUpgradeFromReplacedMigrations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	fresh, _ := pgtest.NewEmptyDB(t)
	require.NoError(t, db.Migrate(ctx, fresh))
	want := catalogSnapshot(t, fresh)

	pool, _ := pgtest.NewEmptyDB(t)
	migrateAsBefore(t, pool, 20)
	const at = "2026-11-02T09:00:00Z"
	for _, stmt := range []string{
		`SELECT docket.project_create('acme', 'user:ana', $1)`,
		`SELECT docket.grant_add('svc:app', 'acme', c, 'user:ana', $1) FROM unnest('{job.create,job.claim,job.view}'::text[]) c`,
		`SELECT docket.job_enqueue_many('acme', 'svc:app', $1, '{a.b,a.b,a.c}', '{default,default,default}', '{1,1,1}',
			'{1,2,3}', '{1,1,1}', '{"","",""}', '{NULL,NULL,NULL}', '{5,5,5}', '{f,f,f}', '{f,t,f}', '{5 min,5 min,5 min}',
			'{1s,1s,1s}', '{10 min,10 min,10 min}', '{0.2,0.2,0.2}', '{null,null,null}', '{null,null,null}', '{"","",""}',
			'{0,0,0}', '{0,0,0}', '{"","",""}')`,
		`SELECT docket.job_claim('acme', 'default', 2, NULL, '{a.b}', '{1}', 'svc:app', $1, '{r1}')`,
		`SELECT docket.job_complete_many(array_agg(id ORDER BY id), array_agg(claim_token ORDER BY id),
			array_agg('{"done": true}'::jsonb), 'svc:app', $1::timestamptz + interval '1 minute', NULL)
		 FROM (SELECT id, claim_token FROM docket.jobs WHERE state = 'claimed' ORDER BY id LIMIT 1) j`,
	} {
		_, err := pool.Exec(ctx, stmt, at)
		require.NoError(t, err, stmt)
	}
	histories := jobHistories(t, pool)
	require.Len(t, histories, 3)
	status, err := db.MigrationStatus(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, int64(20), status.Version)
	require.True(t, status.Baseline)
	require.False(t, status.Current())

	require.NoError(t, db.Migrate(ctx, pool))

	require.Equal(t, want, catalogSnapshot(t, pool))
	require.Equal(t, definitionObjects(t, fresh), definitionObjects(t, pool), "what each definition file made")
	status, err = db.MigrationStatus(ctx, pool)
	require.NoError(t, err)
	require.True(t, status.Current(), "%+v", status)
	require.False(t, status.Baseline)
	docketV, _ := appliedVersions(t, pool)
	require.Equal(t, docketVersions(t), docketV, "21 and after, as a fresh database records them")
	require.Equal(t, histories, jobHistories(t, pool), "the rows written before")
	require.Equal(t, []string{"1 true <nil>", "2 true <nil>", "3 true <nil>"}, historyVerdicts(t, pool))

	// And it works as a fresh one does: the next claim, settled.
	var claimed int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM docket.job_claim('acme', 'default', 1, NULL, '{a.c}', '{1}', 'svc:app', $1, '{r1}')`,
		"2026-11-02T10:00:00Z").Scan(&claimed))
	require.Equal(t, int64(3), claimed)

	// A second migrate changes nothing.
	before := catalogRows(t, pool)
	require.NoError(t, db.Migrate(ctx, pool))
	require.Equal(t, before, catalogRows(t, pool))
}

// definitionObjects lists what the definitions recorded they made, by file.
func definitionObjects(t *testing.T, q db.DBTX) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT file || ' ' || kind || ' ' || name FROM docket.definition_objects ORDER BY 1`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// jobHistories lists every job's state and its events' hashes.
// historyVerdicts returns, for every job, "id ok problem" of its
// docket.job_history_verify, by id.
func historyVerdicts(t *testing.T, q db.DBTX) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT j.id, v.ok, v.problem FROM docket.jobs j, docket.job_history_verify(j.id) v ORDER BY j.id`)
	require.NoError(t, err)
	verdicts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var id int64
		var ok bool
		var problem *string
		err := r.Scan(&id, &ok, &problem)
		return fmt.Sprintf("%d %t %v", id, ok, problem), err
	})
	require.NoError(t, err)
	return verdicts
}

func jobHistories(t *testing.T, q db.DBTX) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), `
		SELECT j.id || ' ' || j.state || ' ' || string_agg(encode(e.hash, 'hex'), ',' ORDER BY e.seq)
		FROM docket.jobs j JOIN docket.job_events e ON e.job_id = j.id GROUP BY j.id, j.state ORDER BY j.id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// A database that migrations 1 to 20 left below 20 is refused, naming its
// version, and left as it was: only a database at 20 has the tables of 21
// and after.
func TestMigrateRefusesReplacedMigrationsBelow20(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _ := pgtest.NewEmptyDB(t)
	migrateAsBefore(t, pool, 17)
	before := schemaSnapshot(t, pool)
	beforeDocket, beforeRiver := appliedVersions(t, pool)

	err := db.Migrate(ctx, pool)
	require.ErrorIs(t, err, db.ErrSchemaReplaced)
	require.ErrorContains(t, err, "database is at version 17 of migrations 1-20")
	require.Equal(t, before, schemaSnapshot(t, pool))
	afterDocket, afterRiver := appliedVersions(t, pool)
	require.Equal(t, beforeDocket, afterDocket)
	require.Equal(t, beforeRiver, afterRiver)

	require.ErrorIs(t, db.MigrateDownTo(ctx, pool, 0), db.ErrSchemaReplaced)
	require.Equal(t, before, schemaSnapshot(t, pool))
}
