package jobs_test

// The worker's two batch reads of the job store, in package jobclaim:
// ClaimIDsTx, the group commit of many dispatches' claims, and
// UndispatchedTx, the dispatch sweep's search. Their refusals change nothing, in Go and in SQL called directly;
// their answers say, for each wanted job, only what the actor may know.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/jobclaim"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

const (
	// cidPeer holds job.claim on acme: the other claimant.
	cidPeer access.Actor = "svc:peer"
	// cidBetaOwner enqueues and claims in project beta, where app holds
	// nothing.
	cidBetaOwner access.Actor = "svc:beta-owner"
	// cidUnknownID names no job.
	cidUnknownID = int64(1) << 40
)

// cidBeta lets cidBetaOwner enqueue and claim in project beta, which e
// has, and returns its client there.
func cidBeta(t *testing.T, e env) *jobs.Client {
	t.Helper()
	e.Allow(t, testkit.Grants(cidBetaOwner, "beta", access.JobCreate, access.JobClaim)...)
	c, err := jobs.NewClient(e.API, jobs.Config{Project: "beta", Actor: cidBetaOwner, Clock: e.Clock})
	require.NoError(t, err)
	return c
}

// cidStore is the worker-only part of c.
func cidStore(c *jobs.Client) jobclaim.Store[jobs.Job, jobs.Decoder] {
	return jobclaim.Of[jobs.Job, jobs.Decoder](c)
}

// cidClaimIDs claims wants as c in a transaction of its own, committed when
// the claim succeeds.
func cidClaimIDs(ctx context.Context, e env, c *jobs.Client, wants []jobclaim.Want, decoders []jobs.Decoder) (got []jobclaim.Result[jobs.Job], err error) {
	err = db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		got, err = cidStore(c).ClaimIDsTx(ctx, tx, wants, decoders)
		return err
	})
	return got, err
}

// cidEnqueue enqueues s through c and returns the job.
func cidEnqueue(t *testing.T, c *jobs.Client, s jobs.Spec) jobs.Job {
	t.Helper()
	enq, err := c.Enqueue(t.Context(), s)
	require.NoError(t, err)
	return enq.Job
}

// cidGet reads job id as c sees it.
func cidGet(t *testing.T, e env, c *jobs.Client, id int64) jobs.Job {
	t.Helper()
	j, err := c.Get(t.Context(), id)
	require.NoError(t, err)
	return j
}

// cidRefused asserts that err is a typed refusal matching want and that
// the database reads before.
func cidRefused(t *testing.T, e env, before string, want, err error) {
	t.Helper()
	require.ErrorIs(t, err, want)
	var typed *db.Error
	require.ErrorAs(t, err, &typed, "a refusal is a *db.Error")
	require.Equal(t, before, snapshot(t, e.Pool), "a refusal changed something")
}

func TestClaimIDsRefusesInvalidArguments(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// A queued, due job every case names: a wrongly accepted call claims it.
	queued := cidEnqueue(t, e.client, spec(`{"claim_ids": "queued"}`))
	before := snapshot(t, e.Pool)

	tooMany := make([]jobclaim.Want, jobs.MaxClaimBatch+1)
	tooMany[0].ID = queued.ID
	for i := 1; i < len(tooMany); i++ {
		tooMany[i].ID = cidUnknownID + int64(i)
	}
	want := func(lease time.Duration) []jobclaim.Want { return []jobclaim.Want{{ID: queued.ID, Lease: lease}} }
	cases := []struct {
		name     string
		wants    []jobclaim.Want
		decoders []jobs.Decoder
	}{
		{"more than MaxClaimBatch wants", tooMany, nil},
		{"lease 500ms", want(500 * time.Millisecond), nil},
		{"lease 999ms", want(time.Second - time.Millisecond), nil},
		{"lease 25h", want(25 * time.Hour), nil},
		{"lease 24h and a nanosecond", want(jobs.MaxLease + 1), nil},
		{"lease negative", want(-time.Minute), nil},
		{"one good lease and one bad", []jobclaim.Want{{ID: cidUnknownID, Lease: time.Minute}, {ID: queued.ID, Lease: 500 * time.Millisecond}}, nil},
		{"a repeated id", []jobclaim.Want{{ID: queued.ID}, {ID: queued.ID}}, nil},
		{"decoder with a bad kind", want(0), []jobs.Decoder{{Kind: "Billing", Schema: 1}}},
		{"decoder with an empty kind", want(0), []jobs.Decoder{{Kind: "", Schema: 1}}},
		{"decoder with schema 0", want(0), []jobs.Decoder{{Kind: "billing.invoice", Schema: 0}}},
		{"decoder with a negative schema", want(0), []jobs.Decoder{{Kind: "billing.invoice", Schema: -1}}},
		{"decoder with a schema over 32 bits", want(0), []jobs.Decoder{{Kind: "billing.invoice", Schema: 1 << 31}}},
		{"a good decoder and a bad one", want(0), []jobs.Decoder{{Kind: "billing.invoice", Schema: 1}, {Kind: "billing..x", Schema: 1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := cidClaimIDs(t.Context(), e, e.client, tc.wants, tc.decoders)
			require.Nil(t, got)
			cidRefused(t, e, before, db.ErrInvalidArgument, err)
		})
	}

	t.Run("no wants is no answer", func(t *testing.T) {
		t.Parallel()
		for _, wants := range [][]jobclaim.Want{nil, {}} {
			got, err := cidClaimIDs(t.Context(), e, e.client, wants, nil)
			require.NoError(t, err)
			require.Nil(t, got)
		}
		require.Equal(t, before, snapshot(t, e.Pool))
	})
}

// cidArray renders elems as a Postgres array literal; "NULL" stays a NULL
// element.
func cidArray(elems ...string) *string {
	quoted := make([]string, len(elems))
	for i, s := range elems {
		if s == "NULL" {
			quoted[i] = s
		} else {
			quoted[i] = `"` + s + `"`
		}
	}
	s := "{" + strings.Join(quoted, ",") + "}"
	return &s
}

// cidRawClaim is one direct call of docket.job_claim_ids: each array as a
// literal, nil for a NULL array.
type cidRawClaim struct {
	ids, leases, kinds, schemas *string
	actor                       string
}

func (r cidRawClaim) call(ctx context.Context, q db.DBTX, now time.Time) (int, error) {
	var n int
	err := q.QueryRow(ctx, `
		SELECT count(*) FROM docket.job_claim_ids(
		    $1::text::bigint[], $2::text::interval[], $3::text::text[], $4::text::integer[], $5::text, $6::timestamptz)`,
		r.ids, r.leases, r.kinds, r.schemas, r.actor, now).Scan(&n)
	return n, err
}

func TestDatabaseRefusesClaimIDsWithoutGo(t *testing.T) {
	t.Parallel()
	e := setup(t)
	queued := cidEnqueue(t, e.client, spec(`{"claim_ids": "raw"}`))
	q := fmt.Sprint(queued.ID)
	before := snapshot(t, e.Pool)

	thousandAndOne := make([]string, jobs.MaxClaimBatch+1)
	zeros := make([]string, len(thousandAndOne))
	for i := range thousandAndOne {
		thousandAndOne[i] = fmt.Sprint(cidUnknownID + int64(i))
		zeros[i] = "0"
	}
	thousandAndOne[0] = q
	good := func(edit func(r *cidRawClaim)) cidRawClaim {
		r := cidRawClaim{ids: cidArray(q), leases: cidArray("0"), actor: string(app)}
		edit(&r)
		return r
	}
	cases := []struct {
		name string
		raw  cidRawClaim
	}{
		{"no ids", good(func(r *cidRawClaim) { r.ids, r.leases = cidArray(), cidArray() })},
		{"ids NULL", good(func(r *cidRawClaim) { r.ids = nil })},
		{"1001 ids", good(func(r *cidRawClaim) { r.ids, r.leases = cidArray(thousandAndOne...), cidArray(zeros...) })},
		{"fewer leases than ids", good(func(r *cidRawClaim) { r.ids, r.leases = cidArray(q, "7"), cidArray("0") })},
		{"more leases than ids", good(func(r *cidRawClaim) { r.leases = cidArray("0", "0") })},
		{"leases NULL", good(func(r *cidRawClaim) { r.leases = nil })},
		{"a duplicate id", good(func(r *cidRawClaim) { r.ids, r.leases = cidArray(q, q), cidArray("0", "0") })},
		{"a NULL id", good(func(r *cidRawClaim) { r.ids, r.leases = cidArray(q, "NULL"), cidArray("0", "0") })},
		{"lease 500ms", good(func(r *cidRawClaim) { r.leases = cidArray("500 milliseconds") })},
		{"lease 25h", good(func(r *cidRawClaim) { r.leases = cidArray("25 hours") })},
		{"lease a month", good(func(r *cidRawClaim) { r.leases = cidArray("1 month") })},
		{"lease negative", good(func(r *cidRawClaim) { r.leases = cidArray("-1 minute") })},
		{"a bad lease after a good one", good(func(r *cidRawClaim) {
			r.ids, r.leases = cidArray(q, "7"), cidArray("2 minutes", "500 milliseconds")
		})},
		{"more kinds than schemas", good(func(r *cidRawClaim) {
			r.kinds, r.schemas = cidArray("billing.invoice", "billing.refund"), cidArray("1")
		})},
		{"more schemas than kinds", good(func(r *cidRawClaim) { r.kinds, r.schemas = cidArray("billing.invoice"), cidArray("1", "2") })},
		{"kinds without schemas", good(func(r *cidRawClaim) { r.kinds = cidArray("billing.invoice") })},
		{"schemas without kinds", good(func(r *cidRawClaim) { r.schemas = cidArray("1") })},
		{"malformed actor", good(func(r *cidRawClaim) { r.actor = "app" })},
	}

	t.Run("control: the same call with good input claims", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		j := cidEnqueue(t, c.client, spec(`{"claim_ids": "control"}`))
		r := cidRawClaim{ids: cidArray(fmt.Sprint(j.ID)), leases: cidArray("0"), actor: string(app)}
		n, err := r.call(t.Context(), c.Pool, c.Clock.Now())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, jobs.Claimed, cidGet(t, c, c.client, j.ID).State)
	})

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.raw.call(t.Context(), e.Pool, e.Clock.Now())
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			require.Equal(t, "DK010", pgErr.Code, pgErr.Message)
			cidRefused(t, e, before, db.ErrInvalidArgument, db.Translate(err, "raw.job_claim_ids"))
		})
	}
}

func TestClaimIDsAnswersEachWantedJob(t *testing.T) {
	t.Parallel()
	e := setup(t, "beta")
	ctx := t.Context()
	e.Allow(t, testkit.Grants(cidPeer, project, access.JobClaim)...)
	peer := clientAs(t, e.API, e.Clock, cidPeer)
	beta := cidBeta(t, e)

	withLease := func(payload string, lease time.Duration) jobs.Spec {
		s := spec(payload)
		s.Lease = lease
		return s
	}
	// Claimable: one claimed for a lease the want names, one for its own.
	short := cidEnqueue(t, e.client, withLease(`{"n": "per-element lease"}`, 7*time.Minute))
	own := cidEnqueue(t, e.client, withLease(`{"n": "own lease"}`, 7*time.Minute))
	// Held by the peer's live lease.
	held := cidEnqueue(t, e.client, spec(`{"n": "held"}`))
	_, ok, err := peer.ClaimID(ctx, held.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	// Not due for an hour.
	later := spec(`{"n": "later"}`)
	later.AvailableAt = t0.Add(time.Hour)
	future := cidEnqueue(t, e.client, later)
	// Succeeded.
	done := cidEnqueue(t, e.client, spec(`{"n": "done"}`))
	doneClaim, ok, err := e.client.ClaimID(ctx, done.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = e.client.Complete(ctx, doneClaim.Lease(), nil, nil)
	require.NoError(t, err)
	// Claimable, but of a payload schema the claimant does not decode.
	v2 := spec(`{"n": "schema 2"}`)
	v2.PayloadSchema = 2
	undecodable := cidEnqueue(t, e.client, v2)
	// The peer's expired leases, one a repeatable job's (taken over), one
	// not (left for the lease sweep).
	repeatable := spec(`{"n": "repeatable, expired"}`)
	repeatable.Repeatable = true
	takeover := cidEnqueue(t, e.client, repeatable)
	expired := cidEnqueue(t, e.client, spec(`{"n": "expired"}`))
	for _, id := range []int64{takeover.ID, expired.ID} {
		_, ok, err := peer.ClaimID(ctx, id, jobs.ClaimOptions{Lease: time.Second})
		require.NoError(t, err)
		require.True(t, ok)
	}
	// In project beta, where app holds no job.claim.
	hidden := cidEnqueue(t, beta, spec(`{"n": "beta"}`))

	e.Clock.Advance(2 * time.Second)
	now := e.Clock.Now()
	unchanged := map[int64]jobs.Job{}
	for _, id := range []int64{held.ID, future.ID, done.ID, undecodable.ID, expired.ID} {
		unchanged[id] = cidGet(t, e, e.client, id)
	}
	hiddenBefore := cidGet(t, e, beta, hidden.ID)

	wants := []jobclaim.Want{
		{ID: cidUnknownID},
		{ID: hidden.ID},
		{ID: undecodable.ID, Lease: time.Minute},
		{ID: held.ID},
		{ID: future.ID},
		{ID: done.ID},
		{ID: expired.ID},
		{ID: takeover.ID},
		{ID: own.ID},
		{ID: short.ID, Lease: 2 * time.Minute},
	}
	got, err := cidClaimIDs(ctx, e, e.client, wants, []jobs.Decoder{{Kind: "billing.invoice", Schema: 1}})
	require.NoError(t, err)

	outcomes := map[int64]jobclaim.Outcome{}
	byID := map[int64]jobs.Job{}
	claimedFirst := true
	for i, r := range got {
		_, seen := outcomes[r.Job.ID]
		require.False(t, seen, "job %d answered twice", r.Job.ID)
		outcomes[r.Job.ID], byID[r.Job.ID] = r.Outcome, r.Job
		if i > 0 && r.Outcome == jobclaim.Taken && got[i-1].Outcome != jobclaim.Taken {
			claimedFirst = false
		}
	}
	require.True(t, claimedFirst, "claimed ones come first: %v", outcomes)
	require.Equal(t, map[int64]jobclaim.Outcome{
		short.ID:       jobclaim.Taken,
		own.ID:         jobclaim.Taken,
		takeover.ID:    jobclaim.Taken,
		held.ID:        jobclaim.Unavailable,
		future.ID:      jobclaim.Unavailable,
		done.ID:        jobclaim.Unavailable,
		expired.ID:     jobclaim.Unavailable,
		undecodable.ID: jobclaim.Undecodable,
	}, outcomes, "an unknown job and a job the actor may not claim get no answer")

	tokens := map[uuid.UUID]bool{}
	for id, wantLease := range map[int64]time.Duration{short.ID: 2 * time.Minute, own.ID: 7 * time.Minute, takeover.ID: 5 * time.Minute} {
		j := byID[id]
		require.Equal(t, jobs.Claimed, j.State, "job %d", id)
		require.Equal(t, app, j.ClaimedBy, "job %d", id)
		require.Equal(t, now, j.ClaimedAt, "job %d", id)
		require.Equal(t, now.Add(wantLease), j.LeaseExpiresAt, "job %d: lease", id)
		require.NotEqual(t, uuid.UUID{}, j.ClaimToken, "job %d", id)
		require.False(t, tokens[j.ClaimToken], "job %d: a token shared between jobs", id)
		tokens[j.ClaimToken] = true
		require.Equal(t, j, cidGet(t, e, e.client, id), "job %d: the answer is the job as stored", id)
	}
	require.Equal(t, 1, byID[short.ID].Attempts)
	require.Equal(t, 1, byID[own.ID].Attempts)
	require.Equal(t, 2, byID[takeover.ID].Attempts, "a takeover counts a second attempt")

	for id, before := range unchanged {
		require.Equal(t, before, cidGet(t, e, e.client, id), "job %d is as it was", id)
		require.Equal(t, before, byID[id], "job %d: the answer is the job as the claim saw it", id)
	}
	require.Zero(t, byID[undecodable.ID].Attempts, "an undecodable job spends no attempt")
	require.Equal(t, hiddenBefore, cidGet(t, e, beta, hidden.ID), "a job the actor may not claim is untouched")
}

func TestUndispatchedRefusesInvalidArguments(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cidEnqueue(t, e.client, spec(`{"undispatched": "seed"}`))
	before := snapshot(t, e.Pool)
	cases := []struct {
		name        string
		queues      []string
		scan, limit int
		decoders    []jobs.Decoder
	}{
		{"limit 0", []string{"default"}, 10, 0, nil},
		{"limit negative", []string{"default"}, 10, -1, nil},
		{"limit over the sweep bound", []string{"default"}, 10, jobs.MaxSweepBatch + 1, nil},
		{"scan 0", []string{"default"}, 0, 10, nil},
		{"scan over the sweep bound", []string{"default"}, jobs.MaxSweepBatch + 1, 10, nil},
		{"empty queue", []string{"default", ""}, 10, 10, nil},
		{"queue with a capital", []string{"Default"}, 10, 10, nil},
		{"queue with a dot", []string{"billing.fast"}, 10, 10, nil},
		{"queue of 64 characters", []string{strings.Repeat("q", 64)}, 10, 10, nil},
		{"queue starting with a dash", []string{"-fast"}, 10, 10, nil},
		{"decoder with a bad kind", []string{"default"}, 10, 10, []jobs.Decoder{{Kind: "Billing", Schema: 1}}},
		{"decoder with schema 0", []string{"default"}, 10, 10, []jobs.Decoder{{Kind: "billing.invoice", Schema: 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []jobs.Job
			err := db.WithTx(t.Context(), e.Pool, func(tx pgx.Tx) (err error) {
				got, err = cidStore(e.client).UndispatchedTx(t.Context(), tx, tc.queues, tc.scan, tc.limit, tc.decoders, time.Time{})
				return err
			})
			require.Nil(t, got)
			cidRefused(t, e, before, db.ErrInvalidArgument, err)
		})
	}
}

// cidIDs lists the ids of js in order.
func cidIDs(js []jobs.Job) []int64 {
	ids := make([]int64, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	return ids
}

func TestUndispatchedFindsWhatTheActorMayDispatch(t *testing.T) {
	t.Parallel()
	e := setup(t, "beta")
	ctx := t.Context()
	beta := cidBeta(t, e)

	var plain []int64 // queued, due, in default, schema 1: what a sweep dispatches
	for i := range 3 {
		plain = append(plain, cidEnqueue(t, e.client, spec(fmt.Sprintf(`{"plain": %d}`, i))).ID)
	}
	ext := spec(`{"external": true}`)
	ext.External = true
	cidEnqueue(t, e.client, ext)
	later := spec(`{"later": true}`)
	later.AvailableAt = t0.Add(time.Hour)
	cidEnqueue(t, e.client, later)
	v2 := spec(`{"schema": 2}`)
	v2.PayloadSchema = 2
	schema2 := cidEnqueue(t, e.client, v2).ID
	refund := spec(`{"refund": true}`)
	refund.Kind = "billing.refund"
	refundID := cidEnqueue(t, e.client, refund).ID
	other := spec(`{"queue": "other"}`)
	other.Queue = "other"
	otherID := cidEnqueue(t, e.client, other).ID
	hidden := cidEnqueue(t, beta, spec(`{"beta": true}`)).ID
	// svc:maker may enqueue into acme but not claim there.
	const maker access.Actor = "svc:maker"
	e.Allow(t, testkit.Grants(maker, project, access.JobCreate)...)
	makerClient := clientAs(t, e.API, e.Clock, maker)
	before := snapshot(t, e.Pool)

	// undispatched runs the search in a transaction of its own, rolled back.
	undispatched := func(c *jobs.Client, queues []string, scan, limit int, decoders []jobs.Decoder) []int64 {
		t.Helper()
		tx, err := e.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		got, err := cidStore(c).UndispatchedTx(ctx, tx, queues, scan, limit, decoders, time.Time{})
		require.NoError(t, err)
		return cidIDs(got)
	}
	def := []string{"default"}
	all := append(append([]int64{}, plain...), schema2, refundID)

	require.Equal(t, all, undispatched(e.client, def, 100, 100, nil),
		"every due job of the queue without an external, a future or another project's job, in claim order")
	require.Equal(t, plain[:2], undispatched(e.client, def, 100, 2, nil), "up to limit")
	require.Equal(t, plain[:2], undispatched(e.client, def, 2, 100, nil), "the first scan of the queue")
	require.Equal(t, plain, undispatched(e.client, def, 100, 100, []jobs.Decoder{{Kind: "billing.invoice", Schema: 1}}),
		"only the decoders' (kind, schema) pairs")
	require.Equal(t, []int64{schema2, refundID}, undispatched(e.client, def, 100, 100,
		[]jobs.Decoder{{Kind: "billing.invoice", Schema: 2}, {Kind: "billing.refund", Schema: 1}}))
	require.Equal(t, append(append([]int64{}, all...), otherID), undispatched(e.client, []string{"default", "other"}, 100, 100, nil))
	require.Empty(t, undispatched(e.client, []string{"empty"}, 100, 100, nil))
	require.Empty(t, undispatched(e.client, nil, 100, 100, nil))
	require.Empty(t, undispatched(clientAs(t, e.API, e.Clock, nobody), def, 100, 100, nil), "an actor without grants finds nothing")
	require.Empty(t, undispatched(makerClient, def, 100, 100, nil), "job.create is not job.claim")
	require.Equal(t, []int64{hidden}, undispatched(beta, def, 100, 100, nil), "beta's claimant finds beta's job only")

	// A live River dispatch carries its job; one running since before
	// runningSince is taken for dead.
	_, err := e.Pool.Exec(ctx, `
		INSERT INTO docket.river_job (args, kind, max_attempts, priority, queue, state, attempt, attempted_at, scheduled_at)
		VALUES (jsonb_build_object('job_id', $1::bigint), 'docket.dispatch', 25, 1, 'default', 'available', 0, NULL, now()),
		       (jsonb_build_object('job_id', $2::bigint), 'docket.dispatch', 25, 1, 'default', 'running', 1, now() - interval '1 hour', now())`,
		plain[0], plain[1])
	require.NoError(t, err)
	require.Equal(t, all[2:], undispatched(e.client, def, 100, 100, nil), "a running dispatch counts when runningSince is zero")
	tx, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	got, err := cidStore(e.client).UndispatchedTx(ctx, tx, def, 100, 100, nil, time.Now().Add(-10*time.Minute))
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, all[1:], cidIDs(got), "a dispatch running for an hour is dead; an available one is not")

	// What it returns is locked until the transaction ends: a second
	// sweeper skips it.
	first, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	mine, err := cidStore(e.client).UndispatchedTx(ctx, first, def, 100, 2, nil, time.Time{})
	require.NoError(t, err)
	require.Equal(t, all[2:4], cidIDs(mine))
	require.Equal(t, all[4:], undispatched(e.client, def, 100, 100, nil), "the second sweeper skips the first one's jobs")
	require.NoError(t, first.Rollback(ctx))

	_, err = e.Pool.Exec(ctx, "DELETE FROM docket.river_job")
	require.NoError(t, err)
	require.Equal(t, before, snapshot(t, e.Pool), "the search changes no job")
}
