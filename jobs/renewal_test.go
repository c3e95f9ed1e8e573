package jobs_test

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/sql/schema"
)

// TestRenewalsAreRecorded: each renewal counts on the job row with its
// instant, a claim starts the count again, and the event that ends the
// attempt says how many there were and when the last was; the history
// verifies.
func TestRenewalsAreRecorded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := claimed(t, e, spec(`{"invoice": 7}`))
	require.Zero(t, j.Renewals)
	require.True(t, j.RenewedAt.IsZero())

	var last time.Time
	for i := 1; i <= 3; i++ {
		e.Clock.Advance(time.Minute)
		last = e.Clock.Now()
		var err error
		j, err = e.client.Renew(ctx, j.Lease(), 10*time.Minute)
		require.NoError(t, err)
		require.Equal(t, i, j.Renewals)
		require.Equal(t, last, j.RenewedAt)
		require.Equal(t, last.Add(10*time.Minute), j.LeaseExpiresAt)
	}
	v, err := e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.True(t, v.OK, "a renewed lease verifies: %s", v.Problem)

	got, err := e.client.Fail(ctx, j.Lease(), jobs.Failure{Diagnostic: "upstream timed out"})
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, got.State)
	require.Equal(t, 3, got.Renewals, "the ended attempt's renewals stay on the row")
	history, err := e.client.History(ctx, j.ID)
	require.NoError(t, err)
	end := history[len(history)-1]
	require.Equal(t, fmt.Sprintf("upstream timed out; the lease was renewed 3 times, last at %s",
		last.UTC().Format("2006-01-02T15:04:05.000000Z")), end.Detail)

	// The next claim counts afresh; a takeover says what the lease before it had.
	e.Clock.Set(got.AvailableAt)
	again, ok, err := e.client.ClaimID(ctx, j.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, again.Renewals)
	require.True(t, again.RenewedAt.IsZero())
	_, err = e.client.Complete(ctx, again.Lease(), nil, nil)
	require.NoError(t, err)
	history, err = e.client.History(ctx, j.ID)
	require.NoError(t, err)
	require.Empty(t, history[len(history)-1].Detail, "an attempt without renewals says nothing of them")
	v, err = e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
}

// TestALeaseEditedByHandIsCaught: the owner's raw UPDATE of a held lease's
// expiry, or of the renewals, is refused and changes nothing; made with the
// job's triggers disabled, verification finds it.
func TestALeaseEditedByHandIsCaught(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := claimed(t, e, spec(`{"invoice": 8}`))
	now := e.Clock.Now()
	before := snapshot(t, e.Pool)

	for _, edit := range []string{
		`UPDATE docket.jobs SET lease_expires_at = lease_expires_at + interval '1 hour' WHERE id = $1`,
		`UPDATE docket.jobs SET renewals = 5, renewed_at = $2 WHERE id = $1`,
		`UPDATE docket.jobs SET renewals = 1, renewed_at = $2, lease_expires_at = lease_expires_at + interval '1 hour' WHERE id = $1 AND $2::timestamptz IS NOT NULL`,
	} {
		tx, err := e.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SELECT docket.set_context('user:ana', $1)`, now.Add(time.Minute))
		require.NoError(t, err)
		args := []any{j.ID}
		if strings.Contains(edit, "$2") {
			args = append(args, now)
		}
		_, err = tx.Exec(ctx, edit, args...)
		require.Error(t, err, edit)
		require.Contains(t, err.Error(), "DK001", edit)
		require.NoError(t, tx.Rollback(ctx))
	}
	require.Equal(t, before, snapshot(t, e.Pool), "refused edits change nothing")

	// With the triggers off (the owner may), the edit goes in, and
	// verification catches it. A claim still open is on the row alone (one
	// event per attempt): what verification holds it to is a lease of at
	// most a day from its claim or its last renewal.
	tx, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	withTriggersOff(t, tx, `UPDATE docket.jobs SET lease_expires_at = lease_expires_at + interval '2 days' WHERE id = $1`, j.ID)
	require.NoError(t, tx.Commit(ctx))
	v, err := e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.False(t, v.OK)
	require.Contains(t, v.Problem, "neither its claim")

	// A claim recorded as an event of its own (a history written before one
	// event per attempt) is held to the lease its event recorded.
	k := claimed(t, e, spec(`{"invoice": 9}`))
	oldShape(t, e, k.ID)
	tx, err = e.Pool.Begin(ctx)
	require.NoError(t, err)
	withTriggersOff(t, tx, `UPDATE docket.jobs SET lease_expires_at = lease_expires_at + interval '1 hour' WHERE id = $1`, k.ID)
	require.NoError(t, tx.Commit(ctx))
	v, err = e.client.Verify(ctx, k.ID)
	require.NoError(t, err)
	require.False(t, v.OK)
	require.Contains(t, v.Problem, "neither its claim")
}

// TestAnUpgradeCountsARenewalMadeBeforeRenewalsWere: a job held across
// migration 39 whose lease was renewed before it holds an expiry its claim's
// event did not record and no count; the migration's data step gives it
// one renewal, and its history verifies again.
func TestAnUpgradeCountsARenewalMadeBeforeRenewalsWere(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := claimed(t, e, spec(`{"invoice": 9}`))
	oldShape(t, e, j.ID) // claimed before 00046, the claim was an event

	// What a renewal before migration 39 left: a later expiry and update,
	// nothing counted.
	renewed := e.Clock.Now().Add(time.Minute)
	tx, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	withTriggersOff(t, tx, `UPDATE docket.jobs SET lease_expires_at = $2::timestamptz + lease, updated_at = $2 WHERE id = $1`,
		j.ID, renewed)
	require.NoError(t, tx.Commit(ctx))
	v, err := e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.False(t, v.OK, "uncounted, the renewal looks like an edit")

	text, err := fs.ReadFile(schema.FS, "00039_job_renewals.sql")
	require.NoError(t, err)
	up := string(text)
	start := strings.Index(up, "UPDATE docket.jobs j")
	require.GreaterOrEqual(t, start, 0, "the migration's data step")
	step := up[start : start+strings.Index(up[start:], ";")]
	tx, err = e.Pool.Begin(ctx)
	require.NoError(t, err)
	withTriggersOff(t, tx, step)
	require.NoError(t, tx.Commit(ctx))

	got, err := e.client.Get(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got.Renewals)
	require.Equal(t, renewed, got.RenewedAt)
	v, err = e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
	_, err = e.client.Complete(ctx, j.Lease(), nil, nil)
	require.NoError(t, err, "its holder completes it")
	v, err = e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
}

// withTriggersOff runs sql in tx with docket.jobs' own triggers disabled, as
// the owner may: the edit no rule sees, for verification to find.
func withTriggersOff(t *testing.T, tx pgx.Tx, sql string, args ...any) {
	t.Helper()
	ctx := t.Context()
	_, err := tx.Exec(ctx, `ALTER TABLE docket.jobs DISABLE TRIGGER USER`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, sql, args...)
	require.NoError(t, err, sql)
	_, err = tx.Exec(ctx, `ALTER TABLE docket.jobs ENABLE TRIGGER USER`)
	require.NoError(t, err)
}
