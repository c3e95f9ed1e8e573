//go:build unix

package replicas

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/pgserver"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/projects"
)

// The cast: ana creates the project and gives the grants; app writes and
// reads.
const project, ana, app = testkit.Acme, testkit.Ana, testkit.App

// database is the name of the docket database on the primary.
const database = "docket_replicas"

// rig is a primary with a synchronous streaming standby, docket migrated on
// it, and app's login to both.
type rig struct {
	clock *db.FakeClock
	// applied is app's login on the primary, committing with
	// synchronous_commit remote_apply: its commit returns once the standby
	// has replayed it, so a read on the replica after it sees it.
	applied *pgxpool.Pool
	// flushed is app's login on the primary, committing once the standby
	// has the commit on disk (synchronous_commit on), replayed or not: it
	// writes while the standby's replay is paused.
	flushed *pgxpool.Pool
	// replica is app's login on the standby: read-only.
	replica *pgxpool.Pool
	// standby is the standby's superuser, to pause and resume its replay.
	standby *pgx.Conn
	// primaryURL and replicaURL log in as app's login on the primary and
	// on the standby: for a program under test.
	primaryURL, replicaURL string
}

// newRig starts the primary and its standby (skipping t without PostgreSQL
// binaries), migrates docket into a database of the primary with project
// acme, app's grants there and app's login, and opens the pools.
func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := t.Context()
	primary, err := pgserver.StartCluster(ctx)
	if errors.Is(err, pgserver.ErrNoLocalBinaries) {
		t.Skip("reads from a replica need a PostgreSQL primary and standby of their own, from local server binaries, and found none: " + err.Error())
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, primary.Close(context.Background())) })

	admin, err := pgx.Connect(ctx, primary.AdminURL())
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE DATABASE "+database)
	require.NoError(t, errors.Join(err, admin.Close(ctx)))
	ownerURL, err := primary.URL(database)
	require.NoError(t, err)
	owner, err := db.Open(ctx, ownerURL)
	require.NoError(t, err)
	t.Cleanup(owner.Close)
	require.NoError(t, db.Migrate(ctx, owner))

	// The replay timestamps are the primary's wall clock; the client's
	// clock stands beside it, and moves only when the test says.
	r := &rig{clock: db.NewFakeClock(time.Now())}

	// The standby first: the primary waits for it on every commit, so it
	// must outlast everything that writes, the login's removal among them,
	// and cleanups run last first.
	standby, err := pgserver.StartStandby(ctx, primary, true)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, standby.Close(context.Background())) })
	r.standby, err = pgx.Connect(ctx, standby.AdminURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.standby.Close(context.Background()) })

	pc, err := projects.NewClient(owner, projects.Config{Actor: ana, Clock: r.clock})
	require.NoError(t, err)
	_, err = pc.Create(ctx, project)
	require.NoError(t, err)
	env := testkit.Env{Pool: owner, Clock: r.clock, Admin: ana}
	env.Allow(t, testkit.Grants(app, project, access.JobCreate, access.JobCancel, access.CaseAdmit, access.PlanRun)...)
	login := env.Login(t, testkit.AppRole, app)
	r.flushed = login.Pool

	applied := login.Pool.Config().Copy()
	applied.ConnConfig.RuntimeParams["synchronous_commit"] = "remote_apply"
	r.applied, err = db.OpenConfig(ctx, applied)
	require.NoError(t, err)
	t.Cleanup(r.applied.Close)

	onStandby := login.Pool.Config().Copy()
	onStandby.ConnConfig.Host, onStandby.ConnConfig.Port = "127.0.0.1", uint16(standby.Port())
	onStandby.ConnConfig.Fallbacks = nil
	r.replica, err = db.OpenConfig(ctx, onStandby)
	require.NoError(t, err)
	t.Cleanup(r.replica.Close)

	r.primaryURL = login.URL
	u, err := url.Parse(login.URL)
	require.NoError(t, err)
	u.Host = fmt.Sprintf("127.0.0.1:%d", standby.Port())
	r.replicaURL = u.String()
	return r
}

// pauseReplay stops the standby applying what it receives, until
// resumeReplay or the end of t: it goes on receiving and flushing, so a
// commit on flushed returns, and its reads stay where they are.
func (r *rig) pauseReplay(t *testing.T) {
	t.Helper()
	_, err := r.standby.Exec(t.Context(), "SELECT pg_wal_replay_pause()")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = r.standby.Exec(context.Background(), "SELECT pg_wal_replay_resume()") })
}

// resumeReplay lets the standby apply again.
func (r *rig) resumeReplay(t *testing.T) {
	t.Helper()
	_, err := r.standby.Exec(t.Context(), "SELECT pg_wal_replay_resume()")
	require.NoError(t, err)
}
