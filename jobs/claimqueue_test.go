package jobs_test

// The worker's claim, in package jobclaim: ClaimQueueTx fills a batch with a
// queue's due jobs in one statement, across every project where the actor
// holds job.claim, in claim order, of the payload versions the worker
// decodes, each for its kind's lease. Its refusals change nothing, in Go and
// in SQL called directly; concurrent batches never share a job.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/jobclaim"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

const (
	// cqPeer holds job.claim on acme: another claimant.
	cqPeer access.Actor = "svc:peer"
	// cqBetaOnly holds job.claim on beta only.
	cqBetaOnly access.Actor = "svc:beta-claimer"
)

// cqInvoice and cqRefund decode the two kinds most of these tests enqueue.
var (
	cqInvoice = jobs.Decoder{Kind: "billing.invoice", Schema: 1}
	cqRefund  = jobs.Decoder{Kind: "billing.refund", Schema: 1}
)

// cqStore is the worker-only part of c.
func cqStore(c *jobs.Client) jobclaim.Store[jobs.Job, jobs.Decoder] {
	return jobclaim.Of[jobs.Job, jobs.Decoder](c)
}

// cqClient returns a client of project p acting as actor.
func cqClient(t *testing.T, e env, p string, actor access.Actor) *jobs.Client {
	t.Helper()
	c, err := jobs.NewClient(e.API, jobs.Config{Project: p, Actor: actor, Clock: e.Clock})
	require.NoError(t, err)
	return c
}

// cqClaim claims as c in a transaction of its own on e.API, committed when
// the claim succeeds.
func cqClaim(ctx context.Context, e env, c *jobs.Client, queue string, limit int, decoders []jobs.Decoder, leases map[string]time.Duration) (got []jobs.Job, err error) {
	return cqClaimFrom(ctx, e, c, queue, limit, decoders, leases, nil)
}

// cqClaimFrom is cqClaim beginning each project's read at from's position
// for it (see jobclaim.Position).
func cqClaimFrom(ctx context.Context, e env, c *jobs.Client, queue string, limit int, decoders []jobs.Decoder,
	leases map[string]time.Duration, from map[string]jobclaim.Position) (got []jobs.Job, err error) {
	err = db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		got, err = cqStore(c).ClaimQueueTx(ctx, tx, queue, limit, decoders, leases, from)
		return err
	})
	return got, err
}

// cqMustClaim is cqClaim that must succeed; it returns the ids claimed, in
// id order, and the jobs by id.
func cqMustClaim(t *testing.T, e env, c *jobs.Client, queue string, limit int, decoders []jobs.Decoder, leases map[string]time.Duration) ([]int64, map[int64]jobs.Job) {
	t.Helper()
	got, err := cqClaim(t.Context(), e, c, queue, limit, decoders, leases)
	require.NoError(t, err)
	return cqByID(t, got)
}

// cqTry claims as c in a transaction of its own that it rolls back: what a
// claim would take now, changing nothing.
func cqTry(t *testing.T, e env, c *jobs.Client, queue string, limit int) []int64 {
	t.Helper()
	ctx := t.Context()
	tx, err := e.API.Begin(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(ctx)) }()
	got, err := cqStore(c).ClaimQueueTx(ctx, tx, queue, limit, nil, nil, nil)
	require.NoError(t, err)
	ids, _ := cqByID(t, got)
	return ids
}

// cqByID returns the ids of js in id order, and js by id; an id answered
// twice fails t.
func cqByID(t *testing.T, js []jobs.Job) ([]int64, map[int64]jobs.Job) {
	t.Helper()
	byID := make(map[int64]jobs.Job, len(js))
	ids := make([]int64, 0, len(js))
	for _, j := range js {
		_, seen := byID[j.ID]
		require.False(t, seen, "job %d answered twice", j.ID)
		byID[j.ID] = j
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	return ids, byID
}

// cqEnqueue enqueues s through c and returns the job.
func cqEnqueue(t *testing.T, c *jobs.Client, s jobs.Spec) jobs.Job {
	t.Helper()
	enq, err := c.Enqueue(t.Context(), s)
	require.NoError(t, err)
	return enq.Job
}

// cqEnqueueN enqueues n jobs into queue through c and returns their ids in
// order.
func cqEnqueueN(t *testing.T, c *jobs.Client, queue string, n int) []int64 {
	t.Helper()
	specs := make([]jobs.Spec, n)
	for i := range specs {
		specs[i] = spec(fmt.Sprintf(`{"n": %d}`, i))
		specs[i].Queue = queue
	}
	receipts, err := c.EnqueueMany(t.Context(), specs)
	require.NoError(t, err)
	ids := make([]int64, n)
	for i, r := range receipts {
		ids[i] = r.ID
	}
	return ids
}

// cqGet reads job id as c sees it.
func cqGet(t *testing.T, c *jobs.Client, id int64) jobs.Job {
	t.Helper()
	j, err := c.Get(t.Context(), id)
	require.NoError(t, err)
	return j
}

// cqRequireClaimed checks that j, one job of an answer, was claimed by c's
// actor at now from before for lease, and is the job as stored, its history
// recording the claim.
func cqRequireClaimed(t *testing.T, c *jobs.Client, before, j jobs.Job, now time.Time, lease time.Duration) {
	t.Helper()
	id := before.ID
	require.Equal(t, jobs.Claimed, j.State, "job %d", id)
	require.Equal(t, c.Actor(), j.ClaimedBy, "job %d", id)
	require.Equal(t, now, j.ClaimedAt, "job %d", id)
	require.Equal(t, lease, j.LeaseExpiresAt.Sub(j.ClaimedAt), "job %d: lease", id)
	require.Equal(t, before.LeaseDuration, j.LeaseDuration, "job %d: a claim leaves the job's own lease as it was", id)
	require.Equal(t, before.Attempts+1, j.Attempts, "job %d", id)
	require.Equal(t, before.LeaseGeneration+1, j.LeaseGeneration, "job %d", id)
	require.NotEqual(t, uuid.UUID{}, j.Lease().Token, "job %d", id)
	require.Equal(t, jobs.WithoutToken(j), cqGet(t, c, id), "job %d: the answer is the job as stored", id)

	// A claim is on the row until its attempt ends: the history ends
	// where it did before the claim.
	history, err := c.History(t.Context(), id)
	require.NoError(t, err)
	require.NotEmpty(t, history)
	last := history[len(history)-1]
	require.Equal(t, before.State, last.To, "job %d", id)
	require.Equal(t, before.Attempts, last.Attempt, "job %d", id)
	v, err := c.Verify(t.Context(), id)
	require.NoError(t, err)
	require.True(t, v.OK, "job %d: %+v", id, v)
}

// cqRefused asserts that err is a typed refusal matching want and that the
// database reads before.
func cqRefused(t *testing.T, e env, before string, want, err error) {
	t.Helper()
	require.ErrorIs(t, err, want)
	var typed *db.Error
	require.ErrorAs(t, err, &typed, "a refusal is a *db.Error")
	require.Equal(t, before, snapshot(t, e.Pool), "a refusal changed something")
}

func TestClaimQueueTakesTheDueQueuedJobsOfTheQueue(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	peer := ccClaimer(t, e, cqPeer)

	var due []jobs.Job // queued, due, in default, not external: what the claim takes
	for i := range 3 {
		due = append(due, cqEnqueue(t, e.client, spec(fmt.Sprintf(`{"due": %d}`, i))))
	}
	ext := spec(`{"external": true}`)
	ext.External = true
	external := cqEnqueue(t, e.client, ext)
	laterSpec := spec(`{"later": true}`)
	laterSpec.AvailableAt = t0.Add(time.Hour)
	later := cqEnqueue(t, e.client, laterSpec)
	otherSpec := spec(`{"queue": "other"}`)
	otherSpec.Queue = "other"
	other := cqEnqueue(t, e.client, otherSpec)
	// Held by the peer's live lease.
	held := ccClaimOne(t, e, peer, spec(`{"held": true}`))
	// A repeatable job whose peer's lease has expired: a takeover is
	// ClaimTx's and the lease sweep's business, not a batch's.
	rep := spec(`{"repeatable": true}`)
	rep.Repeatable, rep.Lease = true, time.Second
	expired := ccClaimOne(t, e, peer, rep)
	// Finished.
	done := ccClaimOne(t, e, e.client, spec(`{"done": true}`))
	_, err := e.client.Complete(ctx, done.Lease(), nil, nil)
	require.NoError(t, err)
	cancelled, err := e.client.Cancel(ctx, cqEnqueue(t, e.client, spec(`{"cancelled": true}`)).ID, "not wanted")
	require.NoError(t, err)

	e.Clock.Advance(2 * time.Second)
	now := e.Clock.Now()
	left := []int64{external.ID, later.ID, other.ID, held.ID, expired.ID, done.ID, cancelled.ID}
	leftBefore := snapshotOf(t, e.Pool, left...)

	ids, byID := cqMustClaim(t, e, e.client, "default", jobs.MaxClaimBatch, nil, nil)
	require.Equal(t, []int64{due[0].ID, due[1].ID, due[2].ID}, ids,
		"the due queued jobs of the queue, and no external, future, other queue's, held, expired or finished one")
	tokens := map[uuid.UUID]bool{}
	for _, before := range due {
		j := byID[before.ID]
		cqRequireClaimed(t, e.client, before, j, now, jobs.DefaultLease)
		require.False(t, tokens[j.Lease().Token], "job %d: a token shared between jobs", j.ID)
		tokens[j.Lease().Token] = true
	}
	require.Equal(t, leftBefore, snapshotOf(t, e.Pool, left...), "the claim touched no other job")
	require.Empty(t, cqTry(t, e, e.client, "default", 10), "nothing due is an empty answer")
	require.Empty(t, cqTry(t, e, e.client, "empty", 10))

	// The other queue's job is the other queue's claim.
	ids, byID = cqMustClaim(t, e, e.client, "other", 10, nil, nil)
	require.Equal(t, []int64{other.ID}, ids)
	cqRequireClaimed(t, e.client, other, byID[other.ID], now, jobs.DefaultLease)

	// The future job, from the instant it is due.
	e.Clock.Set(later.AvailableAt.Add(-time.Microsecond))
	require.Empty(t, cqTry(t, e, e.client, "default", 10), "a microsecond early")
	e.Clock.Set(later.AvailableAt)
	ids, byID = cqMustClaim(t, e, e.client, "default", 10, nil, nil)
	require.Equal(t, []int64{later.ID}, ids)
	cqRequireClaimed(t, e.client, later, byID[later.ID], later.AvailableAt, jobs.DefaultLease)

	require.Equal(t, external, cqGet(t, e.client, external.ID), "an external job is never a worker's")
	require.Equal(t, jobs.Claimed, cqGet(t, e.client, expired.ID).State)
	require.Equal(t, cqPeer, cqGet(t, e.client, expired.ID).ClaimedBy, "the expired lease is left for the lease sweep")
}

func TestClaimQueueSpansTheProjectsWhereTheActorClaims(t *testing.T) {
	t.Parallel()
	e := setup(t, "beta", "gamma")
	// app claims in acme and beta; in gamma it may only enqueue.
	e.Allow(t, testkit.Join(
		testkit.Grants(app, "beta", access.JobCreate, access.JobClaim),
		testkit.Grants(app, "gamma", access.JobCreate),
		testkit.Grants(cqBetaOnly, "beta", access.JobClaim),
	)...)
	beta, gamma := cqClient(t, e, "beta", app), cqClient(t, e, "gamma", app)
	// The worker's client enqueues nowhere: it has no project.
	worker, err := jobs.NewClient(e.API, jobs.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)

	acmeIDs := cqEnqueueN(t, e.client, "default", 2)
	betaIDs := cqEnqueueN(t, beta, "default", 2)
	gammaIDs := cqEnqueueN(t, gamma, "default", 2)
	before := snapshot(t, e.Pool)

	require.Equal(t, betaIDs, cqTry(t, e, cqClient(t, e, "beta", cqBetaOnly), "default", 100),
		"a claimant of beta only takes beta's jobs")
	require.Empty(t, cqTry(t, e, clientAs(t, e.API, e.Clock, nobody), "default", 100), "no job.claim anywhere: nothing")
	require.Equal(t, before, snapshot(t, e.Pool), "the tries were rolled back")

	now := e.Clock.Now()
	ids, byID := cqMustClaim(t, e, worker, "default", 100, nil, nil)
	require.Equal(t, append(slices.Clone(acmeIDs), betaIDs...), ids, "acme's and beta's jobs, none of gamma's")
	for _, id := range ids {
		want := project
		if slices.Contains(betaIDs, id) {
			want = "beta"
		}
		require.Equal(t, want, byID[id].Project)
		require.Equal(t, jobs.Claimed, byID[id].State)
		require.Equal(t, app, byID[id].ClaimedBy)
		require.Equal(t, now, byID[id].ClaimedAt)
	}
	for _, id := range gammaIDs {
		j := cqGet(t, gamma, id)
		require.Equal(t, jobs.Queued, j.State, "job.create is not job.claim")
		require.Zero(t, j.Attempts)
	}
}

func TestClaimQueueTakesTheProjectsInTurn(t *testing.T) {
	t.Parallel()
	e := setup(t, "beta")
	e.Allow(t, testkit.Grants(app, "beta", access.JobCreate, access.JobClaim)...)
	beta := cqClient(t, e, "beta", app)
	acmeIDs := cqEnqueueN(t, e.client, "default", 3)
	betaIDs := cqEnqueueN(t, beta, "default", 3)
	before := snapshot(t, e.Pool)

	// A batch of 4 takes one project's 3 and the other's first: one
	// project at a time, whose turn comes first at random, so neither
	// project's backlog starves the other's.
	acmeFirst := append(slices.Clone(acmeIDs), betaIDs[0])
	betaFirst := append([]int64{acmeIDs[0]}, betaIDs...)
	seen := map[string]int{}
	for range 40 {
		switch got := cqTry(t, e, e.client, "default", 4); {
		case slices.Equal(got, acmeFirst):
			seen["acme first"]++
		case slices.Equal(got, betaFirst):
			seen["beta first"]++
		default:
			t.Fatalf("a batch of 4 took %v of acme %v and beta %v", got, acmeIDs, betaIDs)
		}
	}
	require.Len(t, seen, 2, "each project comes first sometimes: %v", seen)
	require.Equal(t, before, snapshot(t, e.Pool))
}

func TestClaimQueueTakesJobsInClaimOrder(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// Enqueued out of order: by priority, then available_at, then id.
	type job struct {
		name     string
		priority int
		at       time.Duration // after t0
	}
	enqueued := []job{
		{"p2", 2, 3 * time.Minute},
		{"p1 at 1m", 1, time.Minute},
		{"p1 at 2m", 1, 2 * time.Minute},
		{"p4", 4, 0},
		{"p1 at 2m, later id", 1, 2 * time.Minute},
		{"p3", 3, 10 * time.Minute},
		{"p1 at 0", 1, 0},
	}
	ids := map[string]int64{}
	for _, j := range enqueued {
		s := spec(fmt.Sprintf(`{"name": %q}`, j.name))
		s.Priority, s.AvailableAt = j.priority, t0.Add(j.at)
		ids[j.name] = cqEnqueue(t, e.client, s).ID
	}
	want := []string{"p1 at 0", "p1 at 1m", "p1 at 2m", "p1 at 2m, later id", "p2", "p4", "p3"}
	e.Clock.Set(t0.Add(3 * time.Minute)) // p3 is not due
	var got []string
	for range enqueued {
		claimed, _ := cqMustClaim(t, e, e.client, "default", 1, nil, nil)
		if len(claimed) == 0 {
			break
		}
		require.Len(t, claimed, 1)
		for name, id := range ids {
			if id == claimed[0] {
				got = append(got, name)
			}
		}
	}
	require.Equal(t, want[:6], got, "by priority, then available_at, then id; p3 not yet due")
	e.Clock.Set(t0.Add(10 * time.Minute))
	claimed, _ := cqMustClaim(t, e, e.client, "default", 1, nil, nil)
	require.Equal(t, []int64{ids["p3"]}, claimed)
}

func TestClaimQueueTakesAtMostLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ids := cqEnqueueN(t, e.client, "default", 10)

	got, _ := cqMustClaim(t, e, e.client, "default", 3, nil, nil)
	require.Equal(t, ids[:3], got, "equal priority and due time: lowest ids first")
	got, _ = cqMustClaim(t, e, e.client, "default", 1, nil, nil)
	require.Equal(t, ids[3:4], got)
	got, _ = cqMustClaim(t, e, e.client, "default", jobs.MaxClaimBatch, nil, nil)
	require.Equal(t, ids[4:], got, "a limit over what is due takes what is due")
	got, _ = cqMustClaim(t, e, e.client, "default", jobs.MaxClaimBatch, nil, nil)
	require.Empty(t, got)
}

func TestClaimQueueSkipsLockedJobs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	ids := cqEnqueueN(t, e.client, "default", 5)

	// A batch claimed and not yet committed holds its jobs locked.
	first, err := e.API.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	mine, err := cqStore(e.client).ClaimQueueTx(ctx, first, "default", 2, nil, nil, nil)
	require.NoError(t, err)
	got, _ := cqByID(t, mine)
	require.Equal(t, ids[:2], got)

	// A second claim skips them rather than wait: were it to wait, the
	// deadline would end it.
	waitless, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	second, err := cqClaim(waitless, e, e.client, "default", 10, nil, nil)
	require.NoError(t, err)
	got, _ = cqByID(t, second)
	require.Equal(t, ids[2:], got, "the jobs the first batch holds are skipped")

	// Rolled back, the first batch's jobs are queued as they were, for the
	// next claim.
	require.NoError(t, first.Rollback(ctx))
	for _, id := range ids[:2] {
		j := cqGet(t, e.client, id)
		require.Equal(t, jobs.Queued, j.State)
		require.Zero(t, j.Attempts)
	}
	got, _ = cqMustClaim(t, e, e.client, "default", 10, nil, nil)
	require.Equal(t, ids[:2], got)
}

func TestClaimQueueTakesOnlyWhatItDecodes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	with := func(kind string, schema, priority int) jobs.Job {
		s := spec(fmt.Sprintf(`{"kind": %q, "schema": %d}`, kind, schema))
		s.Kind, s.PayloadSchema, s.Priority = kind, schema, priority
		return cqEnqueue(t, e.client, s)
	}
	// The undecodable ones come first in claim order.
	invoice2 := with("billing.invoice", 2, 1)
	refund3 := with("billing.refund", 3, 1)
	invoice1 := with("billing.invoice", 1, 2)
	refund1 := with("billing.refund", 1, 2)
	decoders := []jobs.Decoder{cqInvoice, cqRefund}

	got, _ := cqMustClaim(t, e, e.client, "default", 1, decoders, nil)
	require.Equal(t, []int64{invoice1.ID}, got, "an undecodable job takes no place in the batch")
	undecodable := snapshotOf(t, e.Pool, invoice2.ID, refund3.ID)
	got, _ = cqMustClaim(t, e, e.client, "default", 100, decoders, nil)
	require.Equal(t, []int64{refund1.ID}, got)
	got, _ = cqMustClaim(t, e, e.client, "default", 100, decoders, nil)
	require.Empty(t, got, "only undecodable jobs are left: nothing")
	require.Equal(t, undecodable, snapshotOf(t, e.Pool, invoice2.ID, refund3.ID), "an undecodable job is left as it was")
	for _, id := range []int64{invoice2.ID, refund3.ID} {
		j := cqGet(t, e.client, id)
		require.Equal(t, jobs.Queued, j.State, "job %d", id)
		require.Zero(t, j.Attempts, "job %d: an undecodable job spends no attempt", id)
	}

	got, _ = cqMustClaim(t, e, e.client, "default", 100, []jobs.Decoder{{Kind: "billing.invoice", Schema: 2}}, nil)
	require.Equal(t, []int64{invoice2.ID}, got, "the deployment that decodes it takes it")
	got, _ = cqMustClaim(t, e, e.client, "default", 100, nil, nil)
	require.Equal(t, []int64{refund3.ID}, got, "no decoders: any payload version")
}

func TestClaimQueueLeasesEachJobForItsKind(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const ship = "shipping.label"
	with := func(kind string, lease time.Duration) jobs.Job {
		s := spec(fmt.Sprintf(`{"kind": %q, "lease": %q}`, kind, lease))
		s.Kind, s.Lease = kind, lease
		return cqEnqueue(t, e.client, s)
	}
	// want: the lease each job's claim holds.
	want := map[int64]time.Duration{}
	byJob := map[int64]jobs.Job{}
	for _, c := range []struct {
		kind      string
		own, want time.Duration
	}{
		{"billing.invoice", 7 * time.Minute, 2 * time.Minute}, // the kind's lease, not the job's own
		{"billing.invoice", 0, 2 * time.Minute},               // nor the default
		{"billing.refund", 7 * time.Minute, 7 * time.Minute},  // the kind's lease is 0: the job's own
		{"billing.refund", 0, jobs.DefaultLease},
		{ship, 3 * time.Minute, 3 * time.Minute}, // no lease for the kind: the job's own
		{ship, 0, jobs.DefaultLease},
	} {
		j := with(c.kind, c.own)
		want[j.ID], byJob[j.ID] = c.want, j
	}
	leases := map[string]time.Duration{
		"billing.invoice": 2 * time.Minute,
		"billing.refund":  0,
		"billing.unused":  time.Hour, // a kind no job has
	}
	decoders := []jobs.Decoder{cqInvoice, cqRefund, {Kind: ship, Schema: 1}}
	now := e.Clock.Now()
	_, got := cqMustClaim(t, e, e.client, "default", 100, decoders, leases)
	require.Len(t, got, len(want))
	for id, lease := range want {
		cqRequireClaimed(t, e.client, byJob[id], got[id], now, lease)
	}

	// The bounds themselves are leases a kind may have.
	for _, lease := range []time.Duration{jobs.MinLease, jobs.MaxLease} {
		j := with("billing.invoice", 0)
		_, got := cqMustClaim(t, e, e.client, "default", 100, decoders, map[string]time.Duration{"billing.invoice": lease})
		require.Len(t, got, 1)
		cqRequireClaimed(t, e.client, j, got[j.ID], now, lease)
	}
}

func TestClaimQueueRefusesInvalidArguments(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// A queued, due job of every kind each case decodes: a wrongly accepted
	// call claims one.
	cqEnqueue(t, e.client, spec(`{"claim_queue": "invoice"}`))
	refund := spec(`{"claim_queue": "refund"}`)
	refund.Kind = cqRefund.Kind
	cqEnqueue(t, e.client, refund)

	invoice := []jobs.Decoder{cqInvoice}
	lease := func(d time.Duration) map[string]time.Duration { return map[string]time.Duration{cqInvoice.Kind: d} }
	cases := []struct {
		name     string
		queue    string
		limit    int
		decoders []jobs.Decoder
		leases   map[string]time.Duration
	}{
		{"empty queue", "", 10, nil, nil},
		{"queue with a capital", "Default", 10, nil, nil},
		{"queue with a dot", "billing.fast", 10, nil, nil},
		{"queue with a space", "de fault", 10, nil, nil},
		{"queue of 64 characters", strings.Repeat("q", 64), 10, nil, nil},
		{"queue starting with a dash", "-fast", 10, nil, nil},
		{"limit 0", "default", 0, nil, nil},
		{"limit negative", "default", -1, nil, nil},
		{"limit over MaxClaimBatch", "default", jobs.MaxClaimBatch + 1, nil, nil},
		{"decoder with a bad kind", "default", 10, []jobs.Decoder{{Kind: "Billing", Schema: 1}}, nil},
		{"decoder with an empty kind", "default", 10, []jobs.Decoder{{Kind: "", Schema: 1}}, nil},
		{"decoder with schema 0", "default", 10, []jobs.Decoder{{Kind: cqInvoice.Kind, Schema: 0}}, nil},
		{"decoder with a negative schema", "default", 10, []jobs.Decoder{{Kind: cqInvoice.Kind, Schema: -1}}, nil},
		{"decoder with a schema over 32 bits", "default", 10, []jobs.Decoder{{Kind: cqInvoice.Kind, Schema: 1 << 31}}, nil},
		{"a good decoder and a bad one", "default", 10, []jobs.Decoder{cqInvoice, {Kind: "billing..x", Schema: 1}}, nil},
		{"lease 500ms", "default", 10, invoice, lease(500 * time.Millisecond)},
		{"lease 999ms", "default", 10, invoice, lease(jobs.MinLease - time.Millisecond)},
		{"lease 25h", "default", 10, invoice, lease(25 * time.Hour)},
		{"lease 24h and a nanosecond", "default", 10, invoice, lease(jobs.MaxLease + 1)},
		{"lease negative", "default", 10, invoice, lease(-time.Minute)},
		{"one good lease and one bad", "default", 10, []jobs.Decoder{cqInvoice, cqRefund},
			map[string]time.Duration{cqInvoice.Kind: time.Minute, cqRefund.Kind: 500 * time.Millisecond}},
		{"a bad lease of a kind not decoded", "default", 10, invoice,
			map[string]time.Duration{cqRefund.Kind: 25 * time.Hour}},
		{"a bad lease without decoders", "default", 10, nil, lease(500 * time.Millisecond)},
	}
	// One case at a time, each against the database as it finds it, so a
	// call wrongly accepted fails its own case only.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, e.Pool)
			got, err := cqClaim(t.Context(), e, e.client, tc.queue, tc.limit, tc.decoders, tc.leases)
			require.Nil(t, got)
			cqRefused(t, e, before, db.ErrInvalidArgument, err)
		})
	}
}

// cqRawClaim is one direct call of docket.job_claim_queue: each array as a
// literal, nil for NULL.
type cqRawClaim struct {
	queue                  *string
	limit                  *int32
	kinds, schemas, leases *string
	actor                  string
	now                    time.Time
}

func (r cqRawClaim) call(ctx context.Context, q db.DBTX) (int, error) {
	var n int
	err := q.QueryRow(ctx, `
		SELECT count(*) FROM docket.job_claim_queue(
		    $1::text, $2::integer, $3::text::text[], $4::text::integer[], $5::text::interval[], $6::text, $7::timestamptz)`,
		r.queue, r.limit, r.kinds, r.schemas, r.leases, r.actor, r.now).Scan(&n)
	return n, err
}

// cqLiteral renders elems as a Postgres array literal.
func cqLiteral(elems ...string) *string {
	quoted := make([]string, len(elems))
	for i, s := range elems {
		quoted[i] = `"` + s + `"`
	}
	s := "{" + strings.Join(quoted, ",") + "}"
	return &s
}

func TestDatabaseRefusesClaimQueueWithoutGo(t *testing.T) {
	t.Parallel()
	e := setup(t)
	bait := cqEnqueue(t, e.client, spec(`{"claim_queue": "raw"}`))

	str := func(s string) *string { return &s }
	num := func(n int32) *int32 { return &n }
	good := func(edit func(r *cqRawClaim)) cqRawClaim {
		r := cqRawClaim{queue: str("default"), limit: num(10),
			kinds: cqLiteral(cqInvoice.Kind), schemas: cqLiteral("1"), leases: cqLiteral("1 minute"),
			actor: string(app), now: e.Clock.Now()}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	cases := []struct {
		name string
		raw  cqRawClaim
	}{
		{"queue NULL", good(func(r *cqRawClaim) { r.queue = nil })},
		{"queue empty", good(func(r *cqRawClaim) { r.queue = str("") })},
		{"queue with a capital", good(func(r *cqRawClaim) { r.queue = str("Default") })},
		{"queue of 64 characters", good(func(r *cqRawClaim) { r.queue = str(strings.Repeat("q", 64)) })},
		{"limit NULL", good(func(r *cqRawClaim) { r.limit = nil })},
		{"limit 0", good(func(r *cqRawClaim) { r.limit = num(0) })},
		{"limit negative", good(func(r *cqRawClaim) { r.limit = num(-1) })},
		{"limit 1001", good(func(r *cqRawClaim) { r.limit = num(jobs.MaxClaimBatch + 1) })},
		{"kinds without schemas", good(func(r *cqRawClaim) { r.schemas = nil })},
		{"schemas without kinds", good(func(r *cqRawClaim) { r.kinds, r.leases = nil, nil })},
		{"more kinds than schemas", good(func(r *cqRawClaim) {
			r.kinds, r.leases = cqLiteral(cqInvoice.Kind, cqRefund.Kind), cqLiteral("0", "0")
		})},
		{"leases without kinds", good(func(r *cqRawClaim) { r.kinds, r.schemas = nil, nil })},
		{"fewer leases than kinds", good(func(r *cqRawClaim) {
			r.kinds, r.schemas = cqLiteral(cqInvoice.Kind, cqRefund.Kind), cqLiteral("1", "1")
		})},
		{"more leases than kinds", good(func(r *cqRawClaim) { r.leases = cqLiteral("1 minute", "2 minutes") })},
		{"lease 500ms", good(func(r *cqRawClaim) { r.leases = cqLiteral("500 milliseconds") })},
		{"lease 25h", good(func(r *cqRawClaim) { r.leases = cqLiteral("25 hours") })},
		{"lease a month", good(func(r *cqRawClaim) { r.leases = cqLiteral("1 month") })},
		{"lease negative", good(func(r *cqRawClaim) { r.leases = cqLiteral("-1 minute") })},
		{"a bad lease after a good one", good(func(r *cqRawClaim) {
			r.kinds, r.schemas, r.leases = cqLiteral(cqInvoice.Kind, cqRefund.Kind), cqLiteral("1", "1"), cqLiteral("2 minutes", "500 milliseconds")
		})},
		{"malformed actor", good(func(r *cqRawClaim) { r.actor = "app" })},
		{"now the zero instant", good(func(r *cqRawClaim) { r.now = time.Time{} })},
	}

	// Control: the same call with good input claims, with decoders and
	// without. Each claim is released again, for the cases below to find.
	for _, raw := range []cqRawClaim{good(nil), good(func(r *cqRawClaim) { r.kinds, r.schemas, r.leases = nil, nil, nil })} {
		n, err := raw.call(t.Context(), e.API)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		got := cqGet(t, e.client, bait.ID)
		require.Equal(t, jobs.Claimed, got.State)
		require.Equal(t, jobs.Lease{}, got.Lease(), "a read yields no token")
		// The token went to the raw call alone: give the lease back by hand.
		require.NoError(t, testkit.Raw(t.Context(), e.Pool, "svc:app", e.Clock.Now(),
			`UPDATE docket.jobs SET state = 'queued', claim_token = NULL, claimed_by = NULL, claimed_at = NULL,
			    lease_expires_at = NULL WHERE id = $1`, bait.ID))
	}

	// One case at a time, as in TestClaimQueueRefusesInvalidArguments.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, e.Pool)
			_, err := tc.raw.call(t.Context(), e.API)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			require.Equal(t, "DK010", pgErr.Code, pgErr.Message)
			cqRefused(t, e, before, db.ErrInvalidArgument, db.Translate(err, "raw.job_claim_queue"))
		})
	}
}

// cqWidePool returns a pool on e's database, logged in as e.API is, with n
// connections, so every racer holds one of its own. Only a leaf test may
// call it; it shares ccWidePool's slot.
func cqWidePool(t *testing.T, e env, n int) *pgxpool.Pool {
	t.Helper()
	select {
	case ccWideSlots <- struct{}{}:
	case <-t.Context().Done():
		t.Fatal("waiting for a wide pool slot:", t.Context().Err())
	}
	t.Cleanup(func() { <-ccWideSlots }) // runs after the pool is closed below
	cfg := e.API.Config()
	cfg.MaxConns = int32(n)
	pool, err := db.OpenConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func TestConcurrentClaimQueueBatchesNeverShareAJob(t *testing.T) {
	t.Parallel()
	const claimants, limit, rounds = 8, 5, 16
	e := setup(t, "beta")
	e.Allow(t, testkit.Grants(app, "beta", access.JobCreate, access.JobClaim)...)
	beta := cqClient(t, e, "beta", app)
	wide := cqWidePool(t, e, claimants)
	ctx := t.Context()
	store := cqStore(e.client)

	for round := range rounds {
		// Even rounds: exactly a full batch each. Odd rounds: more asked
		// for than there is.
		total := claimants * limit
		if round%2 == 1 {
			total = claimants*limit - 13
		}
		queue := fmt.Sprintf("race-%d", round)
		ids := append(cqEnqueueN(t, e.client, queue, total/2), cqEnqueueN(t, beta, queue, total-total/2)...)
		now := e.Clock.Now()

		answers := make([][]jobs.Job, claimants)
		errs := ccTxRaceN(t, wide, claimants, func(i int, tx pgx.Tx) error {
			var err error
			answers[i], err = store.ClaimQueueTx(ctx, tx, queue, limit, nil, nil, nil)
			return err
		})
		require.NoError(t, errors.Join(errs...), "round %d: claim", round)

		owner := map[int64]int{}
		tokens := map[uuid.UUID]bool{}
		for i, answer := range answers {
			require.LessOrEqual(t, len(answer), limit, "round %d claimant %d", round, i)
			if total == claimants*limit {
				require.Len(t, answer, limit, "round %d claimant %d: there were enough unlocked jobs for a full batch", round, i)
			}
			for _, j := range answer {
				prev, taken := owner[j.ID]
				require.False(t, taken, "round %d: job %d went to claimants %d and %d", round, j.ID, prev, i)
				owner[j.ID] = i
				require.False(t, tokens[j.Lease().Token], "round %d: a token shared between jobs", round)
				tokens[j.Lease().Token] = true
				require.Equal(t, jobs.Claimed, j.State)
				require.Equal(t, 1, j.Attempts)
				require.Equal(t, now, j.ClaimedAt)
			}
		}
		union := make([]int64, 0, len(owner))
		for id := range owner {
			union = append(union, id)
		}
		slices.Sort(union)
		require.Equal(t, ids, union, "round %d: together the claimants took every job once", round)

		var claimed, events int
		require.NoError(t, e.Pool.QueryRow(ctx, `
			SELECT count(*) FILTER (WHERE j.state = 'claimed' AND j.attempts = 1 AND j.lease_generation = 1),
			       (SELECT count(*) FROM docket.job_events v JOIN docket.jobs k ON k.id = v.job_id
			        WHERE k.queue = $1 AND v.seq > 1)
			FROM docket.jobs j WHERE j.queue = $1`, queue).Scan(&claimed, &events))
		require.Equal(t, total, claimed, "round %d: every job claimed once, as stored", round)
		require.Zero(t, events, "round %d: a claim is on the row, no event until its attempt ends", round)
	}
}
