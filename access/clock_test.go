package access_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// clockCalls are the calls that move other people's work by the caller's
// instant: a claim (which takes expired leases over), the sweeps of leases,
// human tasks and obligations, the prune, and a spend quota (whose periods
// reservations fall in). Each names svc:app acting at $1.
var clockCalls = []struct{ what, sql string }{
	{"claim", `SELECT count(*) FROM docket.job_claim('acme', 'default', 10, NULL, NULL, NULL, 'svc:app', $1)`},
	{"lease sweep", `SELECT count(*) FROM docket.job_expire_leases(100, 'svc:app', $1)`},
	{"task expiry", `SELECT count(*) FROM docket.task_expire_due(100, 'svc:app', $1)`},
	{"obligation breach", `SELECT count(*) FROM docket.obligation_breach_due(100, 'svc:app', $1)`},
	{"prune", `SELECT count(*) FROM docket.prune_run(100, 'svc:app', $1)`},
	{"quota", `SELECT count(*) FROM docket.budget_quota_set('acme', 'EUR', '1 day', $1, 1000, 'svc:app', $1)`},
}

// A login outside docket_clock, as a production service's is, acts at its
// own clock when that clock is the database's give or take the clock_skew
// setting; dated further ahead or behind, a claim, the sweeps of leases,
// tasks and obligations, a prune and a quota are each refused with DK016,
// naming the instant, the bound and the setting, and change nothing (a live
// lease among them). A docket_clock member makes the same calls at the same
// instants, and they are accepted: the lease a day on is expired.
func TestTheCallersClockIsBoundedOutsideDocketClock(t *testing.T) {
	t.Parallel()
	k, _ := setup(t)
	ctx := t.Context()
	k.Allow(t, testkit.Grants("svc:app", "acme", access.JobCreate, access.JobClaim, access.CaseSweep,
		access.RetentionPrune, access.BudgetManage)...)
	prod := k.LoginWithoutClock(t, testkit.AppRole, "svc:app")

	// At the database's time, the production login works.
	c, err := jobs.NewClient(prod.Pool, jobs.Config{Project: "acme", Actor: "svc:app", Clock: db.SystemClock{}})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: json.RawMessage(`{"n": 1}`)})
	require.NoError(t, err)
	claimed, err := c.Claim(ctx, "default", jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, claimed, 1, "a claim at the database's time")

	// Its fake clock is refused, a day ahead, a day behind, and just
	// outside the default minute.
	for _, off := range []time.Duration{24 * time.Hour, -24 * time.Hour, 2 * time.Minute} {
		at := time.Now().Add(off)
		before := everything(t, k.Pool)
		for _, call := range clockCalls {
			var n int
			err := prod.Pool.QueryRow(ctx, call.sql, at).Scan(&n)
			require.ErrorIs(t, db.Translate(err, call.what), db.ErrClockSkew, "%s %v off", call.what, off)
			require.ErrorContains(t, err, "clock_skew", "%s: the message names the setting", call.what)
			require.ErrorContains(t, err, "docket_clock", call.what)
		}
		require.Equal(t, before, everything(t, k.Pool), "%v off: refused, nothing changed", off)
		// So is the Go client on a fake clock.
		fake, err := jobs.NewClient(prod.Pool, jobs.Config{Project: "acme", Actor: "svc:app", Clock: db.NewFakeClock(at)})
		require.NoError(t, err)
		_, err = fake.ExpireLeases(ctx, 100)
		require.ErrorIs(t, err, db.ErrClockSkew)
		require.Equal(t, before, everything(t, k.Pool))
	}

	// A docket_clock member gives any instant: the same calls are accepted.
	sim := k.Login(t, testkit.AppRole, "svc:app")
	at := time.Now().Add(24 * time.Hour)
	for _, call := range clockCalls {
		var n int
		require.NoError(t, sim.Pool.QueryRow(ctx, call.sql, at).Scan(&n), call.what)
	}
	got, err := c.Get(ctx, claimed[0].ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Uncertain, got.State, "the member's sweep a day on expired the lease")
}

// The bound is the clock_skew setting of docket.settings, which the owner
// changes by hand; the schema's owner is not bounded. A malformed setting
// refuses every call (fail closed).
func TestTheClockBoundIsASetting(t *testing.T) {
	t.Parallel()
	k, _ := setup(t)
	ctx := t.Context()
	k.Allow(t, testkit.Grants("svc:app", "acme", access.JobClaim)...)
	prod := k.LoginWithoutClock(t, testkit.AppRole, "svc:app")
	call := func(pool *pgxpool.Pool, off time.Duration) error {
		var n int
		return db.Translate(pool.QueryRow(ctx, clockCalls[1].sql, time.Now().Add(off)).Scan(&n), "sweep")
	}
	require.NoError(t, call(prod.Pool, 30*time.Second), "within the default minute")
	require.ErrorIs(t, call(prod.Pool, 10*time.Minute), db.ErrClockSkew)

	_, err := k.Pool.Exec(ctx, `UPDATE docket.settings SET value = '1 hour' WHERE name = 'clock_skew'`)
	require.NoError(t, err)
	require.NoError(t, call(prod.Pool, 10*time.Minute), "within an hour")
	require.ErrorIs(t, call(prod.Pool, -2*time.Hour), db.ErrClockSkew)
	require.NoError(t, call(k.Pool, -48*time.Hour), "the owner is not bounded")

	_, err = k.Pool.Exec(ctx, `UPDATE docket.settings SET value = 'soon' WHERE name = 'clock_skew'`)
	require.NoError(t, err)
	require.Error(t, call(prod.Pool, 0), "a malformed setting refuses")
	_, err = k.Pool.Exec(ctx, `DELETE FROM docket.settings WHERE name = 'clock_skew'`)
	require.NoError(t, err)
	err = call(prod.Pool, 0)
	require.ErrorIs(t, err, db.ErrClockSkew, "a missing setting refuses")
	require.ErrorContains(t, err, "missing")
	require.NoError(t, call(k.Pool, 0))
}
