package access_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// leaseSetup returns an env where svc:app may create, claim and view acme's
// jobs, svc:mallory may claim them too, svc:peek may only view them, and
// svc:nobody holds nothing; a job svc:app claimed, through a docket_app
// login bound to svc:app, with its lease; and a docket_app login of
// another service, bound to svc:mallory, svc:peek and svc:nobody.
func leaseSetup(t *testing.T) (k testkit.Env, own *jobs.Client, lease jobs.Lease, other testkit.Login) {
	t.Helper()
	k, _ = setup(t)
	k.Allow(t, testkit.Join(
		testkit.Grants("svc:app", "acme", access.JobCreate, access.JobClaim, access.JobView),
		testkit.Grants("svc:mallory", "acme", access.JobClaim, access.JobView),
		testkit.Grants("svc:peek", "acme", access.JobView))...)
	app := k.Login(t, testkit.AppRole, "svc:app")
	other = k.Login(t, testkit.AppRole, "svc:mallory", "svc:peek", "svc:nobody")
	own, err := jobs.NewClient(app.Pool, jobs.Config{Project: "acme", Actor: "svc:app", Clock: k.Clock})
	require.NoError(t, err)
	_, err = own.Enqueue(t.Context(), jobs.Spec{Kind: "billing.invoice", Payload: json.RawMessage(`{"n": 1}`)})
	require.NoError(t, err)
	claimed, err := own.Claim(t.Context(), "default", jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	lease = claimed[0].Lease()
	require.NotEqual(t, uuid.UUID{}, lease.Token, "the claim hands its claimant the token")
	return k, own, lease, other
}

// A claim token is a capability: no table, view, read or Go type gives it
// back, not even to its claimant; the digest docket stores is no token; and
// the token alone does not use the lease: another worker, an actor with no
// grant, and the claimant itself once its job.claim is revoked are each
// refused (DK009), by every call on the lease, single and batch, each
// refusal changing nothing. The claimant, its grant given back, completes.
func TestAClaimTokenIsACapabilityBoundToItsHolder(t *testing.T) {
	t.Parallel()
	k, own, lease, other := leaseSetup(t)
	ctx := t.Context()
	token := lease.Token.String()

	// Storage holds a digest: the token is in no docket table, for any
	// reader, the owner included.
	require.NotContains(t, everything(t, k.Pool), token, "the token is stored nowhere")
	var stored, digest uuid.UUID
	require.NoError(t, other.Pool.QueryRow(ctx, `SELECT claim_token FROM docket.jobs WHERE id = $1`, lease.JobID).Scan(&stored))
	require.NoError(t, k.Pool.QueryRow(ctx, `SELECT docket.job_token_digest($1)`, lease.Token).Scan(&digest))
	require.Equal(t, digest, stored, "what another login reads is the token's digest")
	require.NotEqual(t, lease.Token, stored)

	// No view shows a token or a digest of one: the views with a column
	// of that name are the empty shapes of functions' answers.
	rows, err := k.Pool.Query(ctx, `
		SELECT format('%I.%I', c.table_schema, c.table_name), c.column_name FROM information_schema.columns c
		JOIN information_schema.views v ON v.table_schema = c.table_schema AND v.table_name = c.table_name
		WHERE c.table_schema = 'docket' AND c.column_name ~ 'token'`)
	require.NoError(t, err)
	columns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var c [2]string
		return c, r.Scan(&c[0], &c[1])
	})
	require.NoError(t, err)
	for _, c := range columns {
		var n int
		require.NoError(t, k.Pool.QueryRow(ctx, "SELECT count(*) FROM "+c[0]+" WHERE "+pgx.Identifier{c[1]}.Sanitize()+" IS NOT NULL").Scan(&n))
		require.Zero(t, n, "view %s shows %s", c[0], c[1])
	}

	// No Go read gives a lease: not to the claimant, not to a viewer.
	peek, err := jobs.NewClient(other.Pool, jobs.Config{Project: "acme", Actor: "svc:peek", Clock: k.Clock})
	require.NoError(t, err)
	for _, c := range []*jobs.Client{own, peek} {
		got, err := c.Get(ctx, lease.JobID)
		require.NoError(t, err)
		require.Equal(t, jobs.Claimed, got.State)
		require.Equal(t, jobs.Lease{}, got.Lease(), "a read yields no lease")
		listed, err := c.List(ctx, jobs.Filter{})
		require.NoError(t, err)
		require.Len(t, listed, 1)
		require.Equal(t, jobs.Lease{}, listed[0].Lease())
		require.NotContains(t, strings.ToLower(jsonOf(t, got)), token)
	}

	// The digest read from storage is no token.
	forged := lease
	forged.Token = stored
	before := everything(t, k.Pool)
	_, err = own.Complete(ctx, forged, json.RawMessage(`{"x": 1}`), nil)
	require.ErrorIs(t, err, db.ErrStaleClaim, "the stored digest presented as a token")
	require.Equal(t, before, everything(t, k.Pool))

	// The right token in the wrong hands.
	for _, actor := range []access.Actor{"svc:mallory", "svc:nobody", "svc:peek"} {
		c, err := jobs.NewClient(other.Pool, jobs.Config{Project: "acme", Actor: actor, Clock: k.Clock})
		require.NoError(t, err)
		leaseRefused(t, k, c, lease, db.ErrNotPermitted, string(actor)+" with the holder's token")
	}

	// The claimant, once its job.claim is revoked.
	admin, _ := testkit.Clients(t, k.Pool, k.Clock, operator)
	_, err = admin.Revoke(ctx, access.Grant{Principal: "svc:app", Project: "acme", Capability: access.JobClaim})
	require.NoError(t, err)
	leaseRefused(t, k, own, lease, db.ErrNotPermitted, "the claimant without job.claim")

	// Given back, the claimant completes under its token.
	k.Allow(t, testkit.Grants("svc:app", "acme", access.JobClaim)...)
	done, err := own.Complete(ctx, lease, json.RawMessage(`{"x": 1}`), nil)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, done.State)
	ok, err := own.SucceededUnder(ctx, lease)
	require.NoError(t, err)
	require.True(t, ok, "its holder learns its outcome was recorded")
	ok, err = peek.SucceededUnder(ctx, jobs.Lease{JobID: lease.JobID, Token: stored})
	require.NoError(t, err)
	require.False(t, ok, "the digest is not the token")
	require.NotContains(t, everything(t, k.Pool), token, "the token is stored nowhere")
	v, err := own.Verify(ctx, lease.JobID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
}

// leaseRefused shows every call on lease by c refused with want, the
// database unchanged by each.
func leaseRefused(t *testing.T, k testkit.Env, c *jobs.Client, lease jobs.Lease, want error, who string) {
	t.Helper()
	ctx := t.Context()
	before := everything(t, k.Pool)
	_, err := c.Renew(ctx, lease, 0)
	require.ErrorIs(t, err, want, "%s: renew", who)
	_, err = c.Release(ctx, lease, t0, "mine now")
	require.ErrorIs(t, err, want, "%s: release", who)
	_, err = c.Complete(ctx, lease, json.RawMessage(`{"x": 1}`), nil)
	require.ErrorIs(t, err, want, "%s: complete", who)
	_, err = c.Fail(ctx, lease, jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "mine now"})
	require.ErrorIs(t, err, want, "%s: fail", who)
	errs, err := c.CompleteMany(ctx, []jobs.Completion{{Lease: lease, Result: json.RawMessage(`{"x": 1}`)}})
	require.NoError(t, err, "%s: complete many", who)
	require.ErrorIs(t, errs[0], want, "%s: complete many", who)
	require.Equal(t, before, everything(t, k.Pool), "%s: refused, nothing changed", who)
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
