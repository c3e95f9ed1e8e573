package jobs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

type invoiceV1 struct {
	Cents int `json:"cents"`
}

type invoiceV2 struct {
	Amount struct {
		Cents    int    `json:"cents"`
		Currency string `json:"currency"`
	} `json:"amount"`
}

var (
	invoiceKindV1 = jobs.MustKind[invoiceV1]("billing.invoice", 1)
	invoiceKindV2 = jobs.MustKind[invoiceV2]("billing.invoice", 2)
)

// A claimant is handed only the payload schemas it names; a job of another
// schema waits for a deployment that knows it, and operators can see the
// jobs no deployment has registered a decoder for.
func TestPayloadSchemasGateWhatAClaimantIsHanded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()

	s1, err := invoiceKindV1.Spec(invoiceV1{Cents: 100})
	require.NoError(t, err)
	old, err := e.client.Enqueue(ctx, s1)
	require.NoError(t, err)
	var v2 invoiceV2
	v2.Amount.Cents, v2.Amount.Currency = 200, "EUR"
	s2, err := invoiceKindV2.Spec(v2)
	require.NoError(t, err)
	cur, err := e.client.Enqueue(ctx, s2)
	require.NoError(t, err)

	undecodable := func() []int64 {
		rows, err := e.Pool.Query(ctx, `SELECT id FROM docket.jobs_undecodable ORDER BY id`)
		require.NoError(t, err)
		var ids []int64
		for rows.Next() {
			var id int64
			require.NoError(t, rows.Scan(&id))
			ids = append(ids, id)
		}
		require.NoError(t, rows.Err())
		return ids
	}
	require.Equal(t, []int64{old.Job.ID, cur.Job.ID}, undecodable())
	require.NoError(t, e.client.RegisterDecoders(ctx, "billing-worker@v7", []jobs.Decoder{invoiceKindV2.Decoder()}))
	require.NoError(t, e.client.RegisterDecoders(ctx, "billing-worker@v7", []jobs.Decoder{invoiceKindV2.Decoder()}), "registering again refreshes")
	require.Equal(t, []int64{old.Job.ID}, undecodable())

	// A v2 deployment is never handed the v1 job.
	v2only := jobs.ClaimOptions{Limit: 10, Decoders: []jobs.Decoder{invoiceKindV2.Decoder()}}
	got, err := e.client.Claim(ctx, "default", v2only)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, cur.Job.ID, got[0].ID)
	typed, err := invoiceKindV2.Decode(got[0])
	require.NoError(t, err)
	require.Equal(t, "EUR", typed.Args.Amount.Currency)

	// By id, it is refused with ErrRefusedRevision and left queued.
	before := snapshot(t, e.Pool)
	_, ok, err := e.client.ClaimID(ctx, old.Job.ID, v2only)
	require.ErrorIs(t, err, db.ErrRefusedRevision)
	require.False(t, ok)
	require.Equal(t, before, snapshot(t, e.Pool))

	// Decoding a job as the wrong version is refused, never guessed.
	j, err := e.client.Get(ctx, old.Job.ID)
	require.NoError(t, err)
	_, err = invoiceKindV2.Decode(j)
	require.ErrorIs(t, err, db.ErrRefusedRevision)

	// A deployment that knows v1 gets it.
	got, err = e.client.Claim(ctx, "default", jobs.ClaimOptions{Decoders: []jobs.Decoder{invoiceKindV1.Decoder()}})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, old.Job.ID, got[0].ID)

	// A malformed deployment name or decoder is refused and records nothing.
	for _, bad := range []struct {
		deployment string
		decoders   []jobs.Decoder
	}{
		{"", []jobs.Decoder{invoiceKindV1.Decoder()}},
		{"has space", []jobs.Decoder{invoiceKindV1.Decoder()}},
		{"w", []jobs.Decoder{{Kind: "Bad Kind", Schema: 1}}},
		{"w", []jobs.Decoder{{Kind: "billing.invoice", Schema: 0}}},
	} {
		err := e.client.RegisterDecoders(ctx, bad.deployment, bad.decoders)
		require.ErrorIs(t, err, db.ErrInvalidArgument, "%+v", bad)
	}
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.job_decoders`).Scan(&n))
	require.Equal(t, 1, n)
}
