package db_test

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/sql/definitions"
	schema "github.com/docket-dev/docket/sql/schema"
)

// docketVersions lists the versions of the embedded docket migrations, in
// order: goose applies by number, and a number may be missing.
func docketVersions(t *testing.T) []int64 {
	t.Helper()
	entries, err := fs.Glob(schema.FS, "*.sql")
	require.NoError(t, err)
	var out []int64
	for _, e := range entries {
		v, err := strconv.ParseInt(strings.SplitN(e, "_", 2)[0], 10, 64)
		require.NoError(t, err, e)
		out = append(out, v)
	}
	return out
}

func seq(from, to int64) []int64 {
	var out []int64
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

func TestMigrateTwiceIsNoop(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _ := pgtest.NewEmptyDB(t)

	require.NoError(t, db.Migrate(ctx, pool))
	first := schemaSnapshot(t, pool)
	rows := catalogRows(t, pool)
	docketV, riverV := appliedVersions(t, pool)
	require.Equal(t, docketVersions(t), docketV)
	require.Equal(t, seq(1, int64(db.RiverLatestVersion())), riverV)
	status, err := db.MigrationStatus(ctx, pool)
	require.NoError(t, err)
	require.True(t, status.Current(), "%+v", status)
	require.Equal(t, status.DefinitionsLatest, status.Definitions)

	require.NoError(t, db.Migrate(ctx, pool))
	require.Equal(t, first, schemaSnapshot(t, pool))
	require.Equal(t, rows, catalogRows(t, pool), "no function, trigger or view was written again")
	docketV2, riverV2 := appliedVersions(t, pool)
	require.Equal(t, docketV, docketV2)
	require.Equal(t, riverV, riverV2)
	again, err := db.MigrationStatus(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, status, again, "the same digest")
}

func TestMigrationStatusOfUntouchedDatabase(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewEmptyDB(t)
	status, err := db.MigrationStatus(t.Context(), pool)
	require.NoError(t, err)
	require.Zero(t, status.Version)
	require.Zero(t, status.RiverVersion)
	require.Equal(t, db.LatestVersion(), status.Latest)
	require.Equal(t, db.RiverLatestVersion(), status.RiverLatest)
	require.False(t, status.Baseline)
	require.Empty(t, status.Definitions)
	require.Len(t, status.DefinitionsLatest, 16)
	files := append(slices.Clone(definitions.Order), definitions.Privileges)
	require.Len(t, status.DefinitionChanges, len(files))
	for i, ch := range status.DefinitionChanges {
		require.Equal(t, db.DefinitionChange{File: files[i], Change: "added"}, ch)
	}
	require.False(t, status.Current())
}

// Eight migrators — separate pools, as separate processes would have — are
// released together on a fresh database. All succeed and each migration is
// applied exactly once.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool, url := pgtest.NewEmptyDB(t)

			const migrators = 8
			pools := make([]*pgxpool.Pool, migrators)
			for i := range pools {
				cfg, err := db.PoolConfig(url)
				require.NoError(t, err)
				cfg.MaxConns = 2
				pools[i], err = db.OpenConfig(ctx, cfg)
				require.NoError(t, err)
				t.Cleanup(pools[i].Close)
			}
			release := make(chan struct{})
			errs := make([]error, migrators)
			var wg sync.WaitGroup
			for i := range migrators {
				wg.Go(func() {
					<-release
					errs[i] = db.Migrate(ctx, pools[i])
				})
			}
			close(release)
			wg.Wait()
			for i, err := range errs {
				require.NoError(t, err, "migrator %d", i)
			}
			docketV, riverV := appliedVersions(t, pool)
			require.Equal(t, docketVersions(t), docketV)
			require.Equal(t, seq(1, int64(db.RiverLatestVersion())), riverV)
		})
	}
}

// Every docket migration goes down and comes back up, one at a time, and the
// schema ends exactly where it started.
func TestMigrationsDownAndUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewDB(t)
	want := schemaSnapshot(t, pool)

	versions := append([]int64{0}, docketVersions(t)...)
	for i := len(versions) - 1; i >= 1; i-- {
		prev := versions[i-1]
		require.NoError(t, db.MigrateDownTo(ctx, pool, prev), "down to %d", prev)
		status, err := db.MigrationStatus(ctx, pool)
		require.NoError(t, err)
		require.Equal(t, prev, status.Version)
		require.NoError(t, db.Migrate(ctx, pool), "up again from %d", prev)
		require.Equal(t, want, schemaSnapshot(t, pool), "after down to %d and up", prev)
		require.NoError(t, db.MigrateDownTo(ctx, pool, prev))
	}
	// All the way down, only River's tables remain, and the migrators' own
	// records: goose's versions, and the definitions (none).
	var docketTables, docketCode int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM pg_tables
		WHERE schemaname = 'docket' AND tablename NOT LIKE 'river\_%'
		  AND tablename NOT IN ('goose_db_version', 'definitions', 'definition_objects')`).Scan(&docketTables))
	require.Zero(t, docketTables)
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM pg_proc WHERE pronamespace = 'docket'::regnamespace AND proname NOT LIKE 'river\_%')
		     + (SELECT count(*) FROM pg_views WHERE schemaname = 'docket')
		     + (SELECT count(*) FROM docket.definitions) + (SELECT count(*) FROM docket.definition_objects)`).Scan(&docketCode))
	require.Zero(t, docketCode)

	require.NoError(t, db.Migrate(ctx, pool))
	require.Equal(t, want, schemaSnapshot(t, pool))
}

func TestMigrateDownToRefusesUnknownVersion(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	before := schemaSnapshot(t, pool)
	// 5 is a version of the migrations this build's replaced.
	for _, v := range []int64{-1, 5, db.LatestVersion() + 1} {
		err := db.MigrateDownTo(t.Context(), pool, v)
		require.ErrorIs(t, err, db.ErrInvalidArgument)
	}
	require.Equal(t, before, schemaSnapshot(t, pool))
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()

	t.Run("docket version ahead", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := pgtest.NewDB(t)
		future := db.LatestVersion() + 1
		_, err := pool.Exec(ctx, `INSERT INTO docket.goose_db_version (version_id, is_applied) VALUES ($1, true)`, future)
		require.NoError(t, err)
		before := schemaSnapshot(t, pool)
		beforeDocket, beforeRiver := appliedVersions(t, pool)

		err = db.Migrate(ctx, pool)
		require.ErrorIs(t, err, db.ErrSchemaTooNew)
		require.ErrorContains(t, err, fmt.Sprintf("database is at version %d, this build knows up to %d", future, db.LatestVersion()))

		require.Equal(t, before, schemaSnapshot(t, pool))
		afterDocket, afterRiver := appliedVersions(t, pool)
		require.Equal(t, beforeDocket, afterDocket)
		require.Equal(t, beforeRiver, afterRiver)
	})

	t.Run("newer docket, River never applied", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool, _ := pgtest.NewEmptyDB(t)
		_, err := pool.Exec(ctx, `
			CREATE SCHEMA docket;
			CREATE TABLE docket.goose_db_version (
				id serial PRIMARY KEY, version_id bigint NOT NULL, is_applied boolean NOT NULL,
				tstamp timestamp NOT NULL DEFAULT '2026-01-01');
			INSERT INTO docket.goose_db_version (version_id, is_applied) VALUES (0, true), (999, true);`)
		require.NoError(t, err)
		before := schemaSnapshot(t, pool)

		err = db.Migrate(ctx, pool)
		require.ErrorIs(t, err, db.ErrSchemaTooNew)
		require.ErrorContains(t, err, fmt.Sprintf("database is at version 999, this build knows up to %d", db.LatestVersion()))
		require.Equal(t, before, schemaSnapshot(t, pool), "no River table may appear")
	})

	t.Run("River version ahead", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := pgtest.NewDB(t)
		_, err := pool.Exec(ctx, `INSERT INTO docket.river_migration (line, version) VALUES ('main', $1)`, db.RiverLatestVersion()+1)
		require.NoError(t, err)
		before := schemaSnapshot(t, pool)
		err = db.Migrate(ctx, pool)
		require.ErrorIs(t, err, db.ErrSchemaTooNew)
		require.ErrorContains(t, err, "River schema version")
		require.Equal(t, before, schemaSnapshot(t, pool))
	})
}

func TestSchemaFingerprintIsStable(t *testing.T) {
	t.Parallel()
	require.Len(t, db.SchemaFingerprint(), 16)
	require.Equal(t, db.SchemaFingerprint(), db.SchemaFingerprint())
}

func TestMigrateHonoursCancellation(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewEmptyDB(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, db.Migrate(ctx, pool), context.Canceled)
}

// holdMigrateLock takes the migrators' advisory lock on a connection of its
// own, as a migrator in another process would, and returns that backend's pid.
func holdMigrateLock(t *testing.T, url string) (*pgx.Conn, int) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(t.Context(), `SELECT pg_advisory_lock(x'646f636b6574'::bigint)`)
	require.NoError(t, err)
	var pid int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid))
	return conn, pid
}

// waitForLockWaiter returns once a backend is queued on the migrators' lock.
// It waits on the database's own lock table, not on time.
func waitForLockWaiter(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	require.Eventually(t, func() bool {
		var waiting bool
		err := pool.QueryRow(context.Background(), `
			SELECT EXISTS (SELECT 1 FROM pg_locks
			               WHERE locktype = 'advisory' AND NOT granted
			                 AND objid = (x'646f636b6574'::bigint & x'ffffffff'::bigint)::oid)`).Scan(&waiting)
		return err == nil && waiting
	}, time.Minute, 5*time.Millisecond)
}

// A migrator whose process dies while holding the lock does not wedge the
// others: its session ends, the lock goes with it, and the next migrator
// applies everything.
func TestMigrateSurvivesDeadLockHolder(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewEmptyDB(t)
	_, holder := holdMigrateLock(t, url)

	done := make(chan error, 1)
	go func() { done <- db.Migrate(t.Context(), pool) }()
	waitForLockWaiter(t, pool)

	var killed bool
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, holder).Scan(&killed))
	require.True(t, killed)
	require.NoError(t, <-done)

	docketV, riverV := appliedVersions(t, pool)
	require.Equal(t, docketVersions(t), docketV)
	require.Equal(t, seq(1, int64(db.RiverLatestVersion())), riverV)
}

// A migrator queued behind another gives up when its context ends, having
// changed nothing.
func TestMigrateWaitingForLockHonoursCancellation(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewEmptyDB(t)
	holdMigrateLock(t, url)
	before := schemaSnapshot(t, pool)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- db.Migrate(ctx, pool) }()
	waitForLockWaiter(t, pool)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, before, schemaSnapshot(t, pool))
}

// Migrating below jobs' migration while job.view is granted keeps the
// capability and its grant, as every down migration keeps a capability still
// granted, though nothing reads jobs any more; migrating up again gives it its
// meaning back.
func TestJobViewOutlivesItsMigrationWhileGranted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewDB(t)
	const at = "2026-11-02T09:00:00Z"
	_, err := pool.Exec(ctx, `SELECT docket.project_create('acme', 'user:ana', $1)`, at)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT docket.grant_add('user:vic', 'acme', 'job.view', 'user:ana', $1)`, at)
	require.NoError(t, err)
	known := func() bool {
		t.Helper()
		var known bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM docket.capabilities WHERE name = 'job.view')`).Scan(&known))
		return known
	}
	reads := func() bool {
		t.Helper()
		var reads bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT docket.job_visible('user:vic', 'acme')`).Scan(&reads))
		return reads
	}
	require.True(t, known())
	require.True(t, reads(), "job.view reads the project's jobs")

	jobs := versionOf(t, "jobs")
	require.NoError(t, db.MigrateDownTo(ctx, pool, jobs-1))
	require.True(t, known(), "a granted capability stays")
	var jobsTable *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('docket.jobs')::text`).Scan(&jobsTable))
	require.Nil(t, jobsTable, "below %d there are no jobs to read", jobs)

	require.NoError(t, db.Migrate(ctx, pool))
	require.True(t, known())
	require.True(t, reads())
	var grants int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM docket.grants WHERE capability = 'job.view'`).Scan(&grants))
	require.Equal(t, 1, grants)
}

// versionOf is the version of the docket migration of aggregate name, e.g.
// 24 for 00024_jobs.sql.
func versionOf(t *testing.T, name string) int64 {
	t.Helper()
	matches, err := fs.Glob(schema.FS, "*_"+name+".sql")
	require.NoError(t, err)
	require.Len(t, matches, 1, name)
	v, err := strconv.ParseInt(strings.SplitN(matches[0], "_", 2)[0], 10, 64)
	require.NoError(t, err)
	return v
}
