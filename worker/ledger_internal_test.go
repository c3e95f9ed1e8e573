package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/jobclaim"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// TestLedgerHalvesFailApart gives the group commit a success and a claim that
// cannot be made: the claim's refusal must not roll back the success.
func TestLedgerHalvesFailApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const app access.Actor = "svc:app"
	k := testkit.Setup(t, "user:ana", []string{"acme"}, testkit.Grants(app, "acme", access.JobCreate, access.JobClaim)...)
	jc, err := jobs.NewClient(k.API, jobs.Config{Project: "acme", Actor: app, Clock: k.Clock})
	require.NoError(t, err)
	kind := jobs.MustKind[struct{}]("ledger.test", 1)
	spec, err := kind.Spec(struct{}{})
	require.NoError(t, err)
	a, err := jc.Enqueue(ctx, spec)
	require.NoError(t, err)
	b, err := jc.Enqueue(ctx, spec)
	require.NoError(t, err)
	var claimed []jobclaim.Result[jobs.Job]
	require.NoError(t, db.WithTx(ctx, k.Pool, func(tx pgx.Tx) error {
		claimed, err = jobclaim.Of[jobs.Job, jobs.Decoder](jc).ClaimIDsTx(ctx, tx, []jobclaim.Want{{ID: a.Job.ID}}, nil)
		return err
	}))
	require.Len(t, claimed, 1)

	reg := NewRegistry()
	require.NoError(t, Handle(reg, kind, func(context.Context, *jobs.Typed[struct{}]) error { return nil }))
	w, err := NewClient(k.Pool, Config{Actor: app, Registry: reg, Clock: k.Clock, Deployment: "test"})
	require.NoError(t, err)

	lease := claimed[0].Job.Lease()
	answers, err := w.flushLedger(ctx, []ledgerOp{
		{complete: &jobs.Completion{Lease: lease}},
		{claim: jobclaim.Want{ID: b.Job.ID, Lease: 500 * time.Millisecond}}, // below the least lease: refused
	})
	require.NoError(t, err)
	require.NoError(t, answers[0].err)
	require.NoError(t, answers[0].refusal)
	require.True(t, errors.Is(answers[1].err, db.ErrInvalidArgument), "the claim half's refusal: %v", answers[1].err)

	got, err := jc.Get(ctx, a.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, got.State, "the success committed")
	got, err = jc.Get(ctx, b.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, got.State)
	require.Zero(t, got.Attempts)
}
