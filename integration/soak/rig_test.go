//go:build unix

package soak

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
	"github.com/docket-dev/docket/retention"
)

// rig is one run's world: a fresh database, its owner's pool, the login the
// workers and the enqueuer use, and the enqueuer's client.
type rig struct {
	t *testing.T
	// owner is the database owner's pool: for setup and looking.
	owner *pgxpool.Pool
	// login is a member of docket_app and docket_worker bound to app and runner.
	login testkit.Login
	// enqueuer enqueues as app, in project.
	enqueuer *jobs.Client
	// database and oid name the run's database, for pg_stat_statements.
	database string
	oid      uint32
}

// newRig creates a fresh migrated database with project acme, the cast's
// grants, a login for app and runner, and acme's policy: succeeded jobs
// kept f.horizon, the rest the defaults; with f.width, the history's
// partitions that wide, made ahead of the jobs' ids.
func newRig(t *testing.T, f form) *rig {
	horizon := f.horizon
	t.Helper()
	ctx := t.Context()
	r := &rig{t: t}
	var err error
	r.owner, err = db.Open(ctx, pgtest.NewURL(t))
	require.NoError(t, err)
	t.Cleanup(r.owner.Close)
	require.NoError(t, r.owner.QueryRow(ctx,
		"SELECT current_database(), oid FROM pg_database WHERE datname = current_database()").Scan(&r.database, &r.oid))

	var clock db.Clock = db.SystemClock{}
	pc, err := projects.NewClient(r.owner, projects.Config{Actor: ana, Clock: clock})
	require.NoError(t, err)
	_, err = pc.Create(ctx, project)
	require.NoError(t, err)
	ac, err := access.NewClient(r.owner, access.Config{Actor: ana, Clock: clock})
	require.NoError(t, err)
	for _, g := range testkit.Join(
		testkit.Grants(app, project, access.JobCreate),
		testkit.Grants(runner, project, access.JobClaim, access.RetentionPrune),
		testkit.Grants(ana, project, access.RetentionManage),
	) {
		_, err := ac.Allow(ctx, g)
		require.NoError(t, err, "grant %v", g)
	}
	// The login's binding is made at the system clock's now too: testkit
	// takes a fake clock, here one set to it.
	env := testkit.Env{Pool: r.owner, Clock: db.NewFakeClock(time.Now()), Admin: ana}
	r.login = env.WorkerLogin(t, app, runner)

	rc, err := retention.NewClient(r.owner, retention.Config{Actor: ana, Clock: clock})
	require.NoError(t, err)
	p := retention.Defaults
	p.SucceededJobs = horizon
	_, err = rc.Set(ctx, project, p)
	require.NoError(t, err)

	if f.width > 0 {
		// The ids start past the partitions the migration made (a million
		// wide, two ahead), where the new width's are made.
		_, err = r.owner.Exec(ctx, `UPDATE docket.settings SET value = CASE name WHEN 'history_partition_width' THEN $1 ELSE '3' END
			WHERE name IN ('history_partition_width', 'history_partitions_ahead')`, strconv.FormatInt(f.width, 10))
		require.NoError(t, err)
		_, err = r.owner.Exec(ctx, `ALTER TABLE docket.jobs ALTER COLUMN id RESTART WITH 10000000`)
		require.NoError(t, err)
		var made int
		require.NoError(t, r.owner.QueryRow(ctx, `SELECT docket.history_partitions_ensure(interval '1 second')`).Scan(&made))
		require.Positive(t, made, "partitions made for the run's first ids")
	}

	r.enqueuer, err = jobs.NewClient(r.login.Pool, jobs.Config{Project: project, Actor: app, Clock: clock})
	require.NoError(t, err)
	return r
}

// workerURL is the URL the workers log in with, with room in their pools
// for their batches, heartbeats and sweeps.
func (r *rig) workerURL() string {
	sep := "?"
	if strings.Contains(r.login.URL, "?") {
		sep = "&"
	}
	return r.login.URL + sep + "pool_max_conns=" + itoa(poolConns)
}

// enqueue enqueues n no-op jobs, numbered from first, and returns their ids
// in order.
func (r *rig) enqueue(ctx context.Context, first, n int) ([]int64, error) {
	specs := make([]jobs.Spec, n)
	for i := range specs {
		s, err := noopKind.Spec(noop{N: first + i})
		if err != nil {
			return nil, err
		}
		specs[i] = s
	}
	got, err := r.enqueuer.EnqueueMany(ctx, specs)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(got))
	for i, g := range got {
		ids[i] = g.ID
	}
	return ids, nil
}

// count is the database's count of the completed jobs.
type count struct {
	succeeded int64         // succeeded jobs present
	pruned    int64         // jobs the project's prunes removed
	took      time.Duration // how long the count took
}

// completed is the jobs that have completed: those present and succeeded,
// and those pruned (the prune removes only finished jobs, and here every
// finished job succeeded).
func (c count) completed() int64 { return c.succeeded + c.pruned }

// count counts the completed jobs, in one statement and so one snapshot:
// a prune's removal and its record are seen together or not at all.
func (r *rig) count(ctx context.Context) (count, error) {
	began := time.Now()
	var c count
	err := r.owner.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM docket.jobs WHERE project = $1 AND state = 'succeeded'),
			(SELECT coalesce(sum(jobs), 0) FROM docket.prunes WHERE project = $1)`, project).Scan(&c.succeeded, &c.pruned)
	c.took = time.Since(began)
	return c, err
}

// sample is one look at the run's progress: the successes the workers had
// reported (each reports its count every doneEvery), and the machine's
// load.
type sample struct {
	at        time.Time
	completed int64
	load      string // the load average over the last minute, from /proc/loadavg
}

// look samples the workers' progress.
func look(children []*child) sample {
	s := sample{at: time.Now()}
	for _, c := range children {
		s.completed += c.succeeded.Load()
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		s.load, _, _ = strings.Cut(string(b), " ")
	}
	return s
}

// measured are the tables whose sizes the report shows.
var measured = []string{"docket.jobs", "docket.job_events", "docket.prunes", "docket.river_job"}

// tableSize is one table's size and statistics at one moment.
type tableSize struct {
	name                  string
	total, heap, indexes  int64 // bytes: pg_total_relation_size, pg_relation_size, pg_indexes_size
	live, dead            int64 // n_live_tup, n_dead_tup
	autovacuums, analyzes int64 // autovacuum_count, autoanalyze_count
	lastAutovacuum        *time.Time
}

// indexSize is one index's size at one moment.
type indexSize struct {
	table, name string
	size        int64 // bytes
	scans       int64 // idx_scan
}

// sizes is the measured tables' sizes at one moment, with the database's
// count of the completed jobs just before.
type sizes struct {
	label     string
	completed int64 // as the workers reported it
	count     count
	// buffers is the buffers the database's backends had read or found
	// (pg_stat_database blks_read + blks_hit): a measure of the work done,
	// whatever else the machine runs.
	buffers int64
	// wal is the server's WAL position (pg_current_wal_lsn, in bytes): the
	// difference between two is what the server wrote between them, this
	// run's and anything else's on the server.
	wal int64
	// partitions is how many partitions docket.job_events has.
	partitions int
	tables     []tableSize
	indexes    []indexSize
}

// sizes counts the completed jobs and reads the measured tables' sizes and
// statistics.
func (r *rig) sizes(ctx context.Context, label string, completed int64) (sizes, error) {
	out := sizes{label: label, completed: completed}
	var err error
	if out.count, err = r.count(ctx); err != nil {
		return out, err
	}
	if err := r.owner.QueryRow(ctx, `SELECT blks_read + blks_hit, (pg_current_wal_lsn() - '0/0')::bigint,
			(SELECT count(*) FROM pg_partition_tree('docket.job_events') WHERE isleaf)
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&out.buffers, &out.wal, &out.partitions); err != nil {
		return out, err
	}
	// A partitioned table (docket.job_events) is the sum of its
	// partitions; its last autovacuum, theirs.
	rows, err := r.owner.Query(ctx, `SELECT t.name, sum(pg_total_relation_size(p.relid))::bigint,
			sum(pg_relation_size(p.relid))::bigint, sum(pg_indexes_size(p.relid))::bigint,
			coalesce(sum(s.n_live_tup), 0)::bigint, coalesce(sum(s.n_dead_tup), 0)::bigint,
			coalesce(sum(s.autovacuum_count), 0)::bigint, coalesce(sum(s.autoanalyze_count), 0)::bigint,
			max(s.last_autovacuum)
		FROM unnest($1::text[]) WITH ORDINALITY AS t (name, ord)
		-- A table not partitioned is its own one part.
		CROSS JOIN LATERAL (SELECT x.relid FROM pg_partition_tree(t.name::regclass) x
			UNION ALL SELECT t.name::regclass WHERE NOT EXISTS (SELECT FROM pg_partition_tree(t.name::regclass))) p
		LEFT JOIN pg_stat_user_tables s ON s.relid = p.relid
		GROUP BY t.name, t.ord
		ORDER BY t.ord`, measured)
	if err != nil {
		return out, err
	}
	var ts tableSize
	_, err = pgx.ForEachRow(rows, []any{&ts.name, &ts.total, &ts.heap, &ts.indexes, &ts.live, &ts.dead,
		&ts.autovacuums, &ts.analyzes, &ts.lastAutovacuum}, func() error {
		out.tables = append(out.tables, ts)
		ts.lastAutovacuum = nil // scanned anew, never into the one just kept
		return nil
	})
	if err != nil {
		return out, err
	}
	rows, err = r.owner.Query(ctx, `SELECT s.schemaname || '.' || s.relname, s.indexrelname, pg_relation_size(s.indexrelid), s.idx_scan
		FROM unnest($1::text[]) WITH ORDINALITY AS t (name, ord)
		-- A table not partitioned is its own one part.
		CROSS JOIN LATERAL (SELECT x.relid FROM pg_partition_tree(t.name::regclass) x
			UNION ALL SELECT t.name::regclass WHERE NOT EXISTS (SELECT FROM pg_partition_tree(t.name::regclass))) p
		JOIN pg_stat_user_indexes s ON s.relid = p.relid
		ORDER BY t.ord, s.indexrelname`, measured)
	if err != nil {
		return out, err
	}
	var is indexSize
	_, err = pgx.ForEachRow(rows, []any{&is.table, &is.name, &is.size, &is.scans}, func() error {
		out.indexes = append(out.indexes, is)
		return nil
	})
	return out, err
}

// waitLoginGone waits until no backend of the login's role is left, for at
// most limit.
func (r *rig) waitLoginGone(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var n int
		if err := r.owner.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = $1",
			r.login.Role).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d backends of %s still there after %v", n, r.login.Role, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
