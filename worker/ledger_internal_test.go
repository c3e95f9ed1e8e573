package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
)

// TestLedgerHalvesFailApart gives the group commit a success and a claim that
// cannot be made: the claim's refusal must not roll back the success.
func TestLedgerHalvesFailApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	const app access.Actor = "svc:app"
	_, err := projects.Create(ctx, pool, "acme", "user:ana", clock.Now())
	require.NoError(t, err)
	for _, c := range []access.Capability{access.JobCreate, access.JobClaim} {
		_, err := access.Allow(ctx, pool, access.Grant{Principal: app, Project: "acme", Capability: c}, "user:ana", clock.Now())
		require.NoError(t, err)
	}
	jc, err := jobs.NewClient(pool, jobs.Config{Project: "acme", Actor: app, Clock: clock})
	require.NoError(t, err)
	kind := jobs.MustKind[struct{}]("ledger.test", 1)
	spec, err := kind.Spec(struct{}{})
	require.NoError(t, err)
	a, err := jc.Enqueue(ctx, spec)
	require.NoError(t, err)
	b, err := jc.Enqueue(ctx, spec)
	require.NoError(t, err)
	claimed, err := jc.ClaimIDsTx(ctx, pool, []jobs.ClaimWant{{ID: a.Job.ID}}, nil)
	require.NoError(t, err)
	require.Len(t, claimed, 1)

	reg := NewRegistry()
	require.NoError(t, Handle(reg, kind, func(context.Context, *jobs.Typed[struct{}]) error { return nil }))
	w, err := New(pool, Config{Actor: app, Registry: reg, Clock: clock, Deployment: "test"})
	require.NoError(t, err)

	lease := claimed[0].Job.Lease()
	answers, err := w.flushLedger(ctx, []ledgerOp{
		{complete: &jobs.Completion{Lease: lease}},
		{claim: jobs.ClaimWant{ID: b.Job.ID, Lease: 500 * time.Millisecond}}, // below the least lease: refused
	})
	require.NoError(t, err)
	require.NoError(t, answers[0].err)
	require.NoError(t, answers[0].refusal)
	require.True(t, errors.Is(answers[1].err, db.ErrInvalidArgument), "the claim half's refusal: %v", answers[1].err)

	got, err := jc.Get(ctx, pool, a.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, got.State, "the success committed")
	got, err = jc.Get(ctx, pool, b.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, got.State)
	require.Zero(t, got.Attempts)
}
