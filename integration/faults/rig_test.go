//go:build unix

package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/pgserver"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
	"github.com/docket-dev/docket/worker"
)

// database is the name of the suite's database on each cluster.
const database = "docket_faults"

// rig is one scenario's world: its cluster, the docket database on it, the
// application's login, and the worker processes it started.
type rig struct {
	t       *testing.T
	cluster *pgserver.Cluster
	// standby, when not nil, streams from cluster and is promoted when a
	// scenario fails over to it.
	standby *pgserver.Cluster
	// owner is the cluster's superuser on the database: for setup, faults
	// and looking. Its queries fail while the cluster is down.
	owner *pgxpool.Pool
	// login is the application's: a docket_app and docket_worker member
	// bound to app. The workers log in as it.
	login testkit.Login

	// net, when not nil, is the Docker network the workers run on, each in
	// a container of its own (partition_test.go).
	net *dockerNet

	children []*child
	workers  int // workers started, for their names
	// killedAtEnd names the workers that did not exit when told to stop at
	// the end of the run, and were killed.
	killedAtEnd []string
	failed      []string // the checks that failed

	// cleared is when the last fault cleared, or the first worker started:
	// from then on the recovery bound holds. stale is the most jobs a look
	// saw claimed beyond it, and staleFor the longest one was.
	cleared  time.Time
	stale    int
	staleFor time.Duration
}

// newRig starts a cluster of t's own (skipping t if no PostgreSQL binaries
// are installed) and migrates the docket schema into a database on it, with
// project acme, app's grants to enqueue and claim there, app's login, and the
// tables the handlers write.
func newRig(t *testing.T) *rig { return newRigOf(t, "") }

// newRigOf is newRig, with a streaming standby of its cluster when standby
// says how it replicates ("sync" or "async"): the owner's pool and the
// workers' login then name both servers and connect to the one that takes
// writes, so they follow a failover.
func newRigOf(t *testing.T, standby string) *rig {
	t.Helper()
	ctx := t.Context()
	cluster, err := pgserver.StartCluster(ctx)
	if errors.Is(err, pgserver.ErrNoLocalBinaries) {
		t.Skip("the fault suite needs a PostgreSQL cluster of its own, from local server binaries (initdb, postgres), and found none: " + err.Error())
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cluster.Close(context.Background())) })
	r := &rig{t: t, cluster: cluster}
	r.setUp(cluster, standby)
	return r
}

// setUp makes the docket database on server, as newRigOf says, with a
// standby of r.cluster when standby is not empty.
func (r *rig) setUp(server interface {
	AdminURL() string
	URL(database string) (string, error)
}, standby string) {
	t, ctx := r.t, r.t.Context()
	admin, err := pgx.Connect(ctx, server.AdminURL())
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE DATABASE "+database)
	require.NoError(t, errors.Join(err, admin.Close(ctx)))
	ownerURL, err := server.URL(database)
	require.NoError(t, err)
	r.owner, err = db.Open(ctx, ownerURL)
	require.NoError(t, err)
	t.Cleanup(r.owner.Close)
	require.NoError(t, db.Migrate(ctx, r.owner))
	if standby != "" {
		r.standby, err = pgserver.StartStandby(ctx, r.cluster, standby == "sync")
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, r.standby.Close(context.Background())) })
		multi, err := pgserver.MultiHost(ownerURL, r.cluster, r.standby)
		require.NoError(t, err)
		r.owner.Close()
		r.owner, err = db.Open(ctx, multi)
		require.NoError(t, err)
		t.Cleanup(r.owner.Close)
	}

	// The setup's instants are the system clock's, as the worker's are.
	clock := db.NewFakeClock(time.Now())
	pc, err := projects.NewClient(r.owner, projects.Config{Actor: ana, Clock: clock})
	require.NoError(t, err)
	_, err = pc.Create(ctx, project)
	require.NoError(t, err)
	env := testkit.Env{Pool: r.owner, Clock: clock, Admin: ana}
	env.Allow(t, testkit.Grants(app, project, access.JobCreate, access.JobClaim)...)
	_, err = r.owner.Exec(ctx, handlerTables)
	require.NoError(t, err)
	r.login = env.WorkerLogin(t, app)

	// Cleanups run last first: the workers are killed (workerproc.Start
	// registers each one's kill), then the cluster is running again for
	// the login's role to be dropped.
	t.Cleanup(func() {
		if r.cluster != nil && !r.cluster.Running() && r.standby == nil { // a primary failed over from stays down
			_ = r.cluster.Start(context.Background())
		}
	})
}

// handlerTables are what the handlers write, readable and writable by
// docket_app, so by app's login.
const handlerTables = `
CREATE SCHEMA faults;
-- One row for each attempt whose handler had its outside effect, written on
-- a connection of the handler's own before it returned.
CREATE TABLE faults.outside (
    job_id  bigint NOT NULL,
    attempt integer NOT NULL,
    worker  text NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (job_id, attempt)
);
-- One row for each completion transaction that committed: the success's
-- writes.
CREATE TABLE faults.inside (
    job_id  bigint NOT NULL,
    attempt integer NOT NULL,
    worker  text NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ON faults.inside (job_id);
-- The jobs whose completion writes are cut once, and when the cut fired.
CREATE TABLE faults.cuts (
    job_id   bigint PRIMARY KEY,
    fired_at timestamptz
);
GRANT USAGE ON SCHEMA faults TO docket_app;
GRANT SELECT, INSERT ON faults.outside, faults.inside TO docket_app;
GRANT SELECT ON faults.cuts TO docket_app;
`

// loginURL is the URL app's workers log in with, with room in their pools
// for every handler's completion transaction to wait its turn briefly.
func (r *rig) loginURL() string {
	sep := "?"
	if strings.Contains(r.login.URL, "?") {
		sep = "&"
	}
	return r.login.URL + sep + "pool_max_conns=20"
}

// enqueue enqueues n jobs of the workload, as app, and returns their ids in
// order.
func (r *rig) enqueue(n int) []int64 {
	r.t.Helper()
	ctx := r.t.Context()
	c, err := worker.NewClient(r.login.Pool, worker.Config{Project: project, Actor: app})
	require.NoError(r.t, err)
	ids := make([]int64, 0, n)
	for len(ids) < n {
		specs := make([]jobs.Spec, min(1000, n-len(ids)))
		for i := range specs {
			s, err := workKind.Spec(work{Work: time.Duration(10+(len(ids)+i)%41) * time.Millisecond})
			require.NoError(r.t, err)
			s.Lease = lease
			specs[i] = s
		}
		got, err := c.EnqueueMany(ctx, specs)
		require.NoError(r.t, err)
		for _, g := range got {
			ids = append(ids, g.ID)
		}
	}
	return ids
}

// sweepBound is how long past the expiry of its lease (or the end of the
// last fault, when later) a job may stay claimed: the lease sweep runs every
// sweepEvery in every worker.
const sweepBound = sweepEvery + slack

// look is what one look at the jobs saw.
type look struct {
	succeeded int
	open      int // queued or claimed
}

// look counts the jobs that succeeded and those still open, and notes the
// jobs claimed beyond the recovery bound (see rig.stale). It fails while the
// cluster is down.
func (r *rig) look() (look, error) {
	ctx, cancel := context.WithTimeout(r.t.Context(), 5*time.Second)
	defer cancel()
	var l look
	var late int
	var lateFor time.Duration
	err := r.owner.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'succeeded'),
			count(*) FILTER (WHERE state IN ('queued', 'claimed')),
			count(*) FILTER (WHERE state = 'claimed' AND greatest(lease_expires_at, $1) < now() - $2::interval),
			coalesce(max(now() - greatest(lease_expires_at, $1)) FILTER (WHERE state = 'claimed'), '0')
		FROM docket.jobs`, r.cleared, sweepBound).Scan(&l.succeeded, &l.open, &late, &lateFor)
	if err == nil && late > 0 {
		r.stale, r.staleFor = max(r.stale, late), max(r.staleFor, lateFor)
	}
	return l, err
}

// poll is how often the suite looks at the database while it waits.
const poll = 100 * time.Millisecond

// waitSucceeded waits until at least n jobs have succeeded, and fails the
// test if that takes longer than limit.
func (r *rig) waitSucceeded(n int, limit time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(limit)
	got := 0
	for time.Now().Before(deadline) {
		if l, err := r.look(); err == nil {
			if got = l.succeeded; got >= n {
				return
			}
		}
		time.Sleep(poll)
	}
	r.t.Fatalf("waited %v for %d jobs to succeed; %d did (%s)", limit, n, got, r.states())
}

// states describes the jobs by state, for failures; it says so when it
// cannot look.
func (r *rig) states() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	byState, err := r.byState(ctx)
	if err != nil {
		return "states unknown: " + err.Error()
	}
	return byState.String()
}

// byState counts the jobs in each state.
func (r *rig) byState(ctx context.Context) (stateCounts, error) {
	rows, err := r.owner.Query(ctx, "SELECT state, count(*) FROM docket.jobs GROUP BY state")
	if err != nil {
		return nil, err
	}
	out := stateCounts{}
	var state string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		out[jobs.State(state)] = n
		return nil
	})
	return out, err
}

// stateCounts are jobs by state.
type stateCounts map[jobs.State]int

// String lists the counts in the job machine's order.
func (s stateCounts) String() string {
	var parts []string
	for _, st := range []jobs.State{jobs.Queued, jobs.Claimed, jobs.Succeeded, jobs.Uncertain, jobs.Failed, jobs.Dead, jobs.Cancelled} {
		if s[st] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", st, s[st]))
		}
	}
	if len(parts) == 0 {
		return "no jobs"
	}
	return strings.Join(parts, ", ")
}
