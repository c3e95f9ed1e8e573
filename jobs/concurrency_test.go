package jobs_test

// Concurrency and the lease protocol under contention: enqueue joins the
// caller's transaction, idempotency keys hold under a thundering herd, one job
// has one holder however many claim it at once, batch claims split a queue,
// and every way a token goes stale is refused without touching the job.
//
// Races release their goroutines together on a closed channel, each goroutine
// on a connection and transaction of its own begun beforehand, so the
// statements reach the server as close together as the machine allows. No
// test sleeps; every instant comes from the fake clock.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// ccRacers is how many goroutines each race releases at once.
const ccRacers = 32

// ccWideSlots lets one test at a time hold a pool of ccRacers connections,
// so parallel races stay well inside the server's max_connections.
var ccWideSlots = make(chan struct{}, 1)

// ccWidePool returns a second pool on e's database with ccRacers connections,
// so every racer holds a connection of its own. Only a leaf test may call it.
func ccWidePool(t *testing.T, e env) *pgxpool.Pool {
	t.Helper()
	select {
	case ccWideSlots <- struct{}{}:
	case <-t.Context().Done():
		t.Fatal("waiting for a wide pool slot:", t.Context().Err())
	}
	t.Cleanup(func() { <-ccWideSlots }) // runs after the pool is closed below
	cfg, err := db.PoolConfig(e.Pool.Config().ConnString())
	require.NoError(t, err)
	cfg.MaxConns = ccRacers
	pool, err := db.OpenConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// ccRace runs ready(i) and then fire(i) in n goroutines, i = 0..n-1. No
// goroutine fires before every one is ready; then all are released at once.
// It returns when every fire has returned. Neither function may call t.FailNow.
func ccRace(n int, ready, fire func(i int)) {
	var prepared, done sync.WaitGroup
	start := make(chan struct{})
	prepared.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready(i)
			prepared.Done()
			<-start
			fire(i)
		}()
	}
	prepared.Wait()
	close(start)
	done.Wait()
}

// ccTxRace is ccTxRaceN with ccRacers goroutines.
func ccTxRace(t *testing.T, pool *pgxpool.Pool, fn func(i int, tx pgx.Tx) error) []error {
	t.Helper()
	return ccTxRaceN(t, pool, ccRacers, fn)
}

// ccTxRaceN is ccRace where each of n goroutines runs fn in a transaction of
// its own on pool, begun before the release: committed when fn returns nil,
// else rolled back. It returns fn's error per goroutine, and fails t on any
// begin or commit error.
func ccTxRaceN(t *testing.T, pool *pgxpool.Pool, n int, fn func(i int, tx pgx.Tx) error) []error {
	t.Helper()
	ctx := t.Context()
	txs := make([]pgx.Tx, n)
	beginErrs := make([]error, n)
	commitErrs := make([]error, n)
	errs := make([]error, n)
	ccRace(n,
		func(i int) { txs[i], beginErrs[i] = pool.Begin(ctx) },
		func(i int) {
			if beginErrs[i] != nil {
				return
			}
			if errs[i] = fn(i, txs[i]); errs[i] != nil {
				_ = txs[i].Rollback(ctx)
				return
			}
			commitErrs[i] = txs[i].Commit(ctx)
		})
	require.NoError(t, errors.Join(beginErrs...), "begin")
	require.NoError(t, errors.Join(commitErrs...), "commit")
	return errs
}

// ccCount returns how many jobs and job events exist.
func ccCount(t *testing.T, q db.DBTX) (jobCount, eventCount int) {
	t.Helper()
	require.NoError(t, q.QueryRow(t.Context(),
		`SELECT (SELECT count(*) FROM docket.jobs), (SELECT count(*) FROM docket.job_events)`).Scan(&jobCount, &eventCount))
	return jobCount, eventCount
}

// ccClaimer returns a client of project acme acting as actor, which it first
// grants job.claim there.
func ccClaimer(t *testing.T, e env, actor access.Actor) *jobs.Client {
	t.Helper()
	e.Allow(t, testkit.Grants(actor, project, access.JobClaim)...)
	return clientAs(t, e.API, e.Clock, actor)
}

// ccClaimOne enqueues s and claims it with c, returning the claimed job.
func ccClaimOne(t *testing.T, e env, c *jobs.Client, s jobs.Spec) jobs.Job {
	t.Helper()
	ctx := t.Context()
	enq, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	got, ok, err := c.ClaimID(ctx, enq.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, jobs.Claimed, got.State)
	return got
}

func TestEnqueueTxCommitsAndRollsBackWithTheCaller(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	s := spec(`{"invoice": 1}`)
	s.IdempotencyKey = "invoice-1"

	// Rolled back: the job and its event go with the caller's transaction,
	// and so does its hold on the idempotency key.
	tx, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	enq, err := e.client.EnqueueTx(ctx, tx, s)
	require.NoError(t, err)
	require.False(t, enq.Duplicate)
	jobsIn, eventsIn := ccCount(t, tx)
	require.Equal(t, 1, jobsIn, "the transaction sees its own job")
	require.Equal(t, 1, eventsIn)
	outside, _ := ccCount(t, e.Pool)
	require.Zero(t, outside, "nobody else sees an uncommitted job")
	require.NoError(t, tx.Rollback(ctx))
	n, ev := ccCount(t, e.Pool)
	require.Zero(t, n, "a rolled back enqueue leaves no job")
	require.Zero(t, ev, "a rolled back enqueue leaves no event")
	_, err = e.client.Get(ctx, enq.Job.ID)
	require.ErrorIs(t, err, db.ErrNotFound)

	// Committed: both are there, and the key is the committed job's.
	tx, err = e.Pool.Begin(ctx)
	require.NoError(t, err)
	committed, err := e.client.EnqueueTx(ctx, tx, s)
	require.NoError(t, err)
	require.False(t, committed.Duplicate, "the rolled back job did not keep the key")
	require.NoError(t, tx.Commit(ctx))
	n, ev = ccCount(t, e.Pool)
	require.Equal(t, 1, n)
	require.Equal(t, 1, ev)
	got, err := e.client.Get(ctx, committed.Job.ID)
	require.NoError(t, err)
	require.Equal(t, committed.Job, got)
	hist, err := e.client.History(ctx, committed.Job.ID)
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.Equal(t, jobs.Queued, hist[0].To)

	// A savepoint rolled back inside a committed transaction takes only its
	// own job with it.
	tx, err = e.Pool.Begin(ctx)
	require.NoError(t, err)
	kept, err := e.client.EnqueueTx(ctx, tx, spec(`{"invoice": 2}`))
	require.NoError(t, err)
	sp, err := tx.Begin(ctx)
	require.NoError(t, err)
	_, err = e.client.EnqueueTx(ctx, sp, spec(`{"invoice": 3}`))
	require.NoError(t, err)
	require.NoError(t, sp.Rollback(ctx))
	require.NoError(t, tx.Commit(ctx))
	n, ev = ccCount(t, e.Pool)
	require.Equal(t, 2, n)
	require.Equal(t, 2, ev)
	_, err = e.client.Get(ctx, kept.Job.ID)
	require.NoError(t, err)
}

func TestConcurrentEnqueueOfOneKeyCreatesOneJob(t *testing.T) {
	t.Parallel()
	const rounds = 50
	payloadA, payloadB := `{"invoice": 7, "amount": "10.00"}`, `{"invoice": 7, "amount": "99.00"}`

	for _, conflicting := range []bool{false, true} {
		name := "same payload"
		if conflicting {
			name = "half with another payload"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			wide := ccWidePool(t, e)
			ctx := t.Context()

			for round := range rounds {
				key := fmt.Sprintf("herd-%d", round)
				payloadOf := func(i int) string {
					if conflicting && i%2 == 1 {
						return payloadB
					}
					return payloadA
				}
				results := make([]jobs.Enqueued, ccRacers)
				errs := ccTxRace(t, wide, func(i int, tx pgx.Tx) error {
					s := spec(payloadOf(i))
					s.IdempotencyKey = key
					var err error
					results[i], err = e.client.EnqueueTx(ctx, tx, s)
					return err
				})

				var ids []int64
				require.NoError(t, e.Pool.QueryRow(ctx, `
					SELECT array_agg(id) FROM docket.jobs WHERE project = $1 AND kind = 'billing.invoice' AND idempotency_key = $2`,
					project, key).Scan(&ids))
				require.Len(t, ids, 1, "round %d: one job per key", round)
				winner, err := e.client.Get(ctx, ids[0])
				require.NoError(t, err)
				hist, err := e.client.History(ctx, winner.ID)
				require.NoError(t, err)
				require.Len(t, hist, 1, "round %d: the job was created once", round)

				winnerPayload := payloadA
				if conflicting && ccJSONEqual(t, payloadB, string(winner.Payload)) {
					winnerPayload = payloadB
				}
				require.True(t, ccJSONEqual(t, winnerPayload, string(winner.Payload)), "round %d: stored payload %s", round, winner.Payload)
				created := 0
				for i := range ccRacers {
					if payloadOf(i) == winnerPayload {
						require.NoError(t, errs[i], "round %d racer %d", round, i)
						require.Equal(t, winner.ID, results[i].Job.ID, "round %d racer %d", round, i)
						require.Equal(t, key, results[i].Job.IdempotencyKey)
						if !results[i].Duplicate {
							created++
						}
						continue
					}
					require.ErrorIs(t, errs[i], db.ErrIdempotencyConflict, "round %d racer %d", round, i)
					require.Zero(t, results[i].Job.ID)
				}
				require.Equal(t, 1, created, "round %d: exactly one racer created the job", round)
			}
			n, ev := ccCount(t, e.Pool)
			require.Equal(t, rounds, n)
			require.Equal(t, rounds, ev)
		})
	}
}

// ccJSONEqual reports whether a and b are the same JSON value.
func ccJSONEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	require.NoError(t, json.Unmarshal([]byte(a), &x))
	require.NoError(t, json.Unmarshal([]byte(b), &y))
	return fmt.Sprint(x) == fmt.Sprint(y)
}

func TestConcurrentClaimsOfOneJobHaveOneWinner(t *testing.T) {
	t.Parallel()
	const rounds = 100
	for _, takeover := range []bool{false, true} {
		name := "queued job"
		if takeover {
			name = "expired lease of a repeatable job"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			wide := ccWidePool(t, e)
			ctx := t.Context()

			for round := range rounds {
				queue := fmt.Sprintf("race-%d", round)
				s := spec(fmt.Sprintf(`{"round": %d}`, round))
				s.Queue = queue
				s.Repeatable = takeover
				s.Lease = time.Second
				enq, err := e.client.Enqueue(ctx, s)
				require.NoError(t, err)
				wantAttempts, wantEvents := 1, 1
				if takeover {
					_, ok, err := e.client.ClaimID(ctx, enq.Job.ID, jobs.ClaimOptions{})
					require.NoError(t, err)
					require.True(t, ok)
					e.Clock.Advance(s.Lease) // the lease has just expired
					wantAttempts, wantEvents = 2, 2
				}

				answers := make([][]jobs.Job, ccRacers)
				errs := ccTxRace(t, wide, func(i int, tx pgx.Tx) error {
					var err error
					answers[i], err = e.client.ClaimTx(ctx, tx, queue, jobs.ClaimOptions{})
					return err
				})

				winners := 0
				var won jobs.Job
				for i := range ccRacers {
					require.NoError(t, errs[i], "round %d racer %d", round, i)
					switch len(answers[i]) {
					case 0:
						require.NotNil(t, answers[i], "round %d racer %d: the empty answer is an empty list", round, i)
					case 1:
						winners++
						won = answers[i][0]
					default:
						t.Fatalf("round %d racer %d: claimed %d jobs from a queue of one", round, i, len(answers[i]))
					}
				}
				require.Equal(t, 1, winners, "round %d: one holder", round)
				require.Equal(t, enq.Job.ID, won.ID)
				require.Equal(t, wantAttempts, won.Attempts)
				require.Equal(t, int64(wantAttempts), won.LeaseGeneration)
				require.Equal(t, e.Clock.Now().Add(s.Lease), won.LeaseExpiresAt)

				stored, err := e.client.Get(ctx, enq.Job.ID)
				require.NoError(t, err)
				require.Equal(t, jobs.WithoutToken(won), stored, "round %d: the winner's answer is what was stored", round)
				hist, err := e.client.History(ctx, enq.Job.ID)
				require.NoError(t, err)
				require.Len(t, hist, wantEvents, "round %d: the claim is on the row, an expired one ended by one event", round)
			}
		})
	}
}

func TestBatchClaims(t *testing.T) {
	t.Parallel()
	const total = 25

	// enqueueN enqueues n jobs into queue and returns their ids in order.
	enqueueN := func(t *testing.T, e env, queue string, n int) []int64 {
		t.Helper()
		specs := make([]jobs.Spec, n)
		for i := range specs {
			specs[i] = spec(fmt.Sprintf(`{"n": %d}`, i))
			specs[i].Queue = queue
		}
		receipts, err := e.client.EnqueueMany(t.Context(), specs)
		require.NoError(t, err)
		ids := make([]int64, n)
		for i, r := range receipts {
			ids[i] = r.ID
		}
		return ids
	}

	t.Run("one claim of 10 takes the first 10 distinct jobs", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ctx := t.Context()
		ids := enqueueN(t, e, "batch", total)

		got, err := e.client.Claim(ctx, "batch", jobs.ClaimOptions{Limit: 10})
		require.NoError(t, err)
		require.Len(t, got, 10)
		seen := map[int64]bool{}
		tokens := map[uuid.UUID]bool{}
		for _, j := range got {
			require.False(t, seen[j.ID], "job %d claimed twice", j.ID)
			seen[j.ID] = true
			require.False(t, tokens[j.Lease().Token], "token shared between jobs")
			tokens[j.Lease().Token] = true
			require.Equal(t, jobs.Claimed, j.State)
			require.Equal(t, 1, j.Attempts)
		}
		claimed := make([]int64, 0, len(got))
		for _, j := range got {
			claimed = append(claimed, j.ID)
		}
		slices.Sort(claimed)
		require.Equal(t, ids[:10], claimed, "equal priority and due time: lowest ids first")

		rest, err := e.client.Claim(ctx, "batch", jobs.ClaimOptions{Limit: jobs.MaxClaimBatch})
		require.NoError(t, err)
		require.Len(t, rest, total-10)
		for _, j := range rest {
			require.False(t, seen[j.ID], "job %d claimed twice", j.ID)
		}
		none, err := e.client.Claim(ctx, "batch", jobs.ClaimOptions{Limit: 10})
		require.NoError(t, err)
		require.Empty(t, none)
	})

	t.Run("concurrent claimants split the queue", func(t *testing.T) {
		t.Parallel()
		const claimants, limit, rounds = 5, 5, 20 // claimants*limit == total
		e := setup(t)
		wide := ccWidePool(t, e)
		ctx := t.Context()
		for round := range rounds {
			queue := fmt.Sprintf("split-%d", round)
			ids := enqueueN(t, e, queue, total)

			answers := make([][]jobs.Job, claimants)
			errs := ccTxRaceN(t, wide, claimants, func(i int, tx pgx.Tx) error {
				var err error
				answers[i], err = e.client.ClaimTx(ctx, tx, queue, jobs.ClaimOptions{Limit: limit})
				return err
			})

			owner := map[int64]int{}
			for i := range claimants {
				require.NoError(t, errs[i])
				require.Len(t, answers[i], limit,
					"round %d claimant %d: there were enough unlocked jobs for a full batch", round, i)
				for _, j := range answers[i] {
					prev, taken := owner[j.ID]
					require.False(t, taken, "round %d: job %d went to claimants %d and %d", round, j.ID, prev, i)
					owner[j.ID] = i
				}
			}
			union := make([]int64, 0, len(owner))
			for id := range owner {
				union = append(union, id)
			}
			slices.Sort(union)
			require.Equal(t, ids, union, "round %d: together the claimants took every job", round)
		}
	})
}

func TestFutureJobIsNotClaimableBeforeItsTime(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	due := t0.Add(time.Hour)
	s := spec(`{"later": true}`)
	s.AvailableAt = due
	enq, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	require.Equal(t, due, enq.Job.AvailableAt)

	for _, at := range []time.Time{t0, due.Add(-time.Minute), due.Add(-time.Microsecond)} {
		e.Clock.Set(at)
		got, err := e.client.Claim(ctx, "default", jobs.ClaimOptions{})
		require.NoError(t, err)
		require.Empty(t, got, "claimed at %v, due at %v", at, due)
		_, ok, err := e.client.ClaimID(ctx, enq.Job.ID, jobs.ClaimOptions{})
		require.NoError(t, err)
		require.False(t, ok, "claimed by id at %v, due at %v", at, due)
	}
	got, err := e.client.Get(ctx, enq.Job.ID)
	require.NoError(t, err)
	require.Equal(t, enq.Job, got, "looking changed nothing")

	e.Clock.Set(due)
	claimed, err := e.client.Claim(ctx, "default", jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, enq.Job.ID, claimed[0].ID)
	require.Equal(t, due, claimed[0].ClaimedAt)
}

func TestUnauthorisedClaimGetsTheEmptyAnswer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	enq, err := e.client.Enqueue(ctx, spec(`{"secret": false}`))
	require.NoError(t, err)

	// What a permitted claimant with nothing to do gets.
	nothing, err := e.client.Claim(ctx, "empty", jobs.ClaimOptions{})
	require.NoError(t, err)

	elsewhere, err := jobs.NewClient(e.API, jobs.Config{Project: "nope", Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		c    *jobs.Client
		// byID: ClaimID checks the actor's grant on the job's own project,
		// whatever project the client names, so only the actor without a
		// grant is refused by id.
		byID bool
	}{
		{"actor without job.claim", clientAs(t, e.API, e.Clock, nobody), true},
		{"project that does not exist", elsewhere, false},
	} {
		before := snapshot(t, e.Pool)
		got, err := tc.c.Claim(ctx, "default", jobs.ClaimOptions{})
		require.NoError(t, err, tc.name)
		require.Equal(t, nothing, got, tc.name)
		got, err = tc.c.Claim(ctx, "default", jobs.ClaimOptions{Limit: jobs.MaxClaimBatch, Lease: time.Hour})
		require.NoError(t, err, tc.name)
		require.Equal(t, nothing, got, tc.name)
		if tc.byID {
			j, ok, err := tc.c.ClaimID(ctx, enq.Job.ID, jobs.ClaimOptions{})
			require.NoError(t, err, tc.name)
			require.False(t, ok, tc.name)
			require.Equal(t, jobs.Job{}, j, tc.name)
		}
		require.Equal(t, before, snapshot(t, e.Pool), "%s: a refused claim changed something", tc.name)
	}

	// The job was there to be claimed all along.
	got, err := e.client.Claim(ctx, "default", jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, enq.Job.ID, got[0].ID)
}

// ccLeaseOp is one call a holder makes with its lease; a ...Tx call makes it
// in tx.
type ccLeaseOp struct {
	name string
	call func(ctx context.Context, c *jobs.Client, tx pgx.Tx, l jobs.Lease) error
}

// ccLeaseOps are every call that needs a live lease.
var ccLeaseOps = []ccLeaseOp{
	{"renew", func(ctx context.Context, c *jobs.Client, tx pgx.Tx, l jobs.Lease) error {
		_, err := c.RenewTx(ctx, tx, l, 0)
		return err
	}},
	{"renew for an hour", func(ctx context.Context, c *jobs.Client, tx pgx.Tx, l jobs.Lease) error {
		_, err := c.RenewTx(ctx, tx, l, time.Hour)
		return err
	}},
	{"release", func(ctx context.Context, c *jobs.Client, tx pgx.Tx, l jobs.Lease) error {
		_, err := c.ReleaseTx(ctx, tx, l, time.Time{}, "giving it back")
		return err
	}},
	{"complete", func(ctx context.Context, c *jobs.Client, _ pgx.Tx, l jobs.Lease) error {
		_, err := c.Complete(ctx, l, []byte(`{"paid": true}`), nil)
		return err
	}},
	{"complete tx", func(ctx context.Context, c *jobs.Client, tx pgx.Tx, l jobs.Lease) error {
		_, err := c.CompleteTx(ctx, tx, l, []byte(`{"paid": true}`))
		return err
	}},
	{"complete tx without result", func(ctx context.Context, c *jobs.Client, tx pgx.Tx, l jobs.Lease) error {
		_, err := c.CompleteTx(ctx, tx, l, nil)
		return err
	}},
	{"complete many", func(ctx context.Context, c *jobs.Client, tx pgx.Tx, l jobs.Lease) error {
		errs, err := c.CompleteManyTx(ctx, tx, []jobs.Completion{{Lease: l, Result: []byte(`{"paid": true}`)}})
		if err != nil {
			return err
		}
		return errs[0]
	}},
	{"fail retryable", func(ctx context.Context, c *jobs.Client, tx pgx.Tx, l jobs.Lease) error {
		_, err := c.FailTx(ctx, tx, l, jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "boom"})
		return err
	}},
	{"fail permanent", func(ctx context.Context, c *jobs.Client, tx pgx.Tx, l jobs.Lease) error {
		_, err := c.FailTx(ctx, tx, l, jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "boom"})
		return err
	}},
	{"fail uncertain", func(ctx context.Context, c *jobs.Client, tx pgx.Tx, l jobs.Lease) error {
		_, err := c.FailTx(ctx, tx, l, jobs.Failure{Class: jobs.ClassUncertain, Diagnostic: "boom"})
		return err
	}},
}

func TestStaleTokenIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	// Each way makes a lease stale and returns it, with the client that held
	// it and, when someone else now holds the job, that holder's live lease.
	type staled struct {
		holder *jobs.Client
		stale  jobs.Lease
		live   *jobs.Lease
		liveBy *jobs.Client
	}
	ways := []struct {
		name  string
		stale func(t *testing.T, e env) staled
	}{
		{"expired", func(t *testing.T, e env) staled {
			j := ccClaimOne(t, e, e.client, spec(`{"way": "expired"}`))
			e.Clock.Set(j.LeaseExpiresAt) // a lease is live strictly before its expiry
			return staled{holder: e.client, stale: j.Lease()}
		}},
		{"expired and swept", func(t *testing.T, e env) staled {
			j := ccClaimOne(t, e, e.client, spec(`{"way": "swept"}`))
			e.Clock.Set(j.LeaseExpiresAt.Add(time.Second))
			moved, err := e.client.ExpireLeases(t.Context(), 10)
			require.NoError(t, err)
			require.Len(t, moved, 1)
			require.Equal(t, jobs.Uncertain, moved[0].State)
			return staled{holder: e.client, stale: j.Lease()}
		}},
		{"replaced", func(t *testing.T, e env) staled {
			s := spec(`{"way": "replaced"}`)
			s.Repeatable = true
			j := ccClaimOne(t, e, e.client, s)
			e.Clock.Set(j.LeaseExpiresAt.Add(time.Second))
			other := ccClaimer(t, e, "svc:other")
			taken, err := other.Claim(t.Context(), j.Queue, jobs.ClaimOptions{})
			require.NoError(t, err)
			require.Len(t, taken, 1)
			require.Equal(t, j.ID, taken[0].ID)
			require.Equal(t, j.LeaseGeneration+1, taken[0].LeaseGeneration)
			require.Equal(t, access.Actor("svc:other"), taken[0].ClaimedBy)
			live := taken[0].Lease()
			return staled{holder: e.client, stale: j.Lease(), live: &live, liveBy: other}
		}},
		{"released", func(t *testing.T, e env) staled {
			j := ccClaimOne(t, e, e.client, spec(`{"way": "released"}`))
			e.Clock.Advance(time.Second)
			_, err := e.client.Release(t.Context(), j.Lease(), time.Time{}, "not now")
			require.NoError(t, err)
			return staled{holder: e.client, stale: j.Lease()}
		}},
		{"released and claimed again by its holder", func(t *testing.T, e env) staled {
			j := ccClaimOne(t, e, e.client, spec(`{"way": "reclaimed"}`))
			_, err := e.client.Release(t.Context(), j.Lease(), time.Time{}, "not now")
			require.NoError(t, err)
			again, err := e.client.Claim(t.Context(), j.Queue, jobs.ClaimOptions{})
			require.NoError(t, err)
			require.Len(t, again, 1)
			live := again[0].Lease()
			return staled{holder: e.client, stale: j.Lease(), live: &live, liveBy: e.client}
		}},
		{"cancelled", func(t *testing.T, e env) staled {
			j := ccClaimOne(t, e, e.client, spec(`{"way": "cancelled"}`))
			e.Clock.Advance(time.Second)
			_, err := e.client.Cancel(t.Context(), j.ID, "withdrawn")
			require.NoError(t, err)
			return staled{holder: e.client, stale: j.Lease()}
		}},
		{"forged token", func(t *testing.T, e env) staled {
			j := ccClaimOne(t, e, e.client, spec(`{"way": "forged"}`))
			live := j.Lease()
			forged := live
			forged.Token = uuid.New()
			return staled{holder: e.client, stale: forged, live: &live, liveBy: e.client}
		}},
	}
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx := t.Context()
			st := way.stale(t, e)
			for _, op := range ccLeaseOps {
				before := snapshot(t, e.Pool)
				err := db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error { return op.call(ctx, st.holder, tx, st.stale) })
				require.ErrorIs(t, err, db.ErrStaleClaim, "%s with a %s lease", op.name, way.name)
				require.Equal(t, before, snapshot(t, e.Pool), "%s with a %s lease changed something", op.name, way.name)
			}
			if st.live != nil {
				// The current holder's lease survived every stale call.
				done, err := st.liveBy.Complete(ctx, *st.live, []byte(`{"by": "live holder"}`), nil)
				require.NoError(t, err)
				require.Equal(t, jobs.Succeeded, done.State)
			}
			v, err := e.client.Verify(ctx, st.stale.JobID)
			require.NoError(t, err)
			require.True(t, v.OK, v.Problem)
		})
	}
}

func TestCompleteAgainAfterSuccess(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := ccClaimOne(t, e, e.client, spec(`{"invoice": 9}`))
	e.Clock.Advance(time.Second)
	done, err := e.client.Complete(ctx, j.Lease(), []byte(`{"paid": true, "lines": [1, 2]}`), nil)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, done.State)
	e.Clock.Advance(time.Second)

	before := snapshot(t, e.Pool)
	// An equal result, however it is spelled, is a quiet no-op.
	for _, equal := range []string{`{"paid": true, "lines": [1, 2]}`, `{"lines":[1,2],"paid":true}`, " {\n\"paid\" : true, \"lines\" : [1,2] }\n"} {
		var again jobs.Job
		err := db.WithTx(ctx, e.Pool, func(tx pgx.Tx) (err error) {
			again, err = e.client.CompleteTx(ctx, tx, j.Lease(), []byte(equal))
			return err
		})
		require.NoError(t, err, equal)
		require.Equal(t, done, again, equal)
		errs, err := e.client.CompleteMany(ctx, []jobs.Completion{{Lease: j.Lease(), Result: []byte(equal)}})
		require.NoError(t, err)
		require.NoError(t, errs[0], equal)
		require.Equal(t, before, snapshot(t, e.Pool), "completing again with %s changed something", equal)
	}
	// Another result is refused as terminal; so is failing it.
	for _, other := range []json.RawMessage{[]byte(`{"paid": false, "lines": [1, 2]}`), []byte(`{"paid": true}`), []byte(`[]`), nil} {
		err := db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
			_, err := e.client.CompleteTx(ctx, tx, j.Lease(), other)
			return err
		})
		require.ErrorIs(t, err, db.ErrTerminal, "%s", other)
		_, err = e.client.Complete(ctx, j.Lease(), other, nil)
		require.ErrorIs(t, err, db.ErrTerminal, "%s", other)
		errs, err := e.client.CompleteMany(ctx, []jobs.Completion{{Lease: j.Lease(), Result: other}})
		require.NoError(t, err)
		require.ErrorIs(t, errs[0], db.ErrTerminal, "%s", other)
		require.Equal(t, before, snapshot(t, e.Pool), "completing again with %s changed something", other)
	}
	for _, class := range []jobs.FailureClass{jobs.ClassRetryable, jobs.ClassPermanent, jobs.ClassUncertain} {
		_, err := e.client.Fail(ctx, j.Lease(), jobs.Failure{Class: class})
		require.ErrorIs(t, err, db.ErrTerminal, class)
		require.Equal(t, before, snapshot(t, e.Pool))
	}
	// Renewing or releasing a finished job: the token holds no lease.
	_, err = e.client.Renew(ctx, j.Lease(), 0)
	require.ErrorIs(t, err, db.ErrStaleClaim)
	_, err = e.client.Release(ctx, j.Lease(), time.Time{}, "")
	require.ErrorIs(t, err, db.ErrStaleClaim)
	require.Equal(t, before, snapshot(t, e.Pool))
}

func TestCompleteManySettlesEachElementOnItsOwn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()

	live1 := ccClaimOne(t, e, e.client, spec(`{"n": 1}`))
	live2 := ccClaimOne(t, e, e.client, spec(`{"n": 2}`))
	stale := ccClaimOne(t, e, e.client, spec(`{"n": 3}`))
	_, err := e.client.Release(ctx, stale.Lease(), time.Time{}, "stale now")
	require.NoError(t, err)
	succeeded := ccClaimOne(t, e, e.client, spec(`{"n": 4}`))
	_, err = e.client.Complete(ctx, succeeded.Lease(), []byte(`{"first": true}`), nil)
	require.NoError(t, err)
	cancelled := ccClaimOne(t, e, e.client, spec(`{"n": 5}`))
	_, err = e.client.Cancel(ctx, cancelled.ID, "withdrawn")
	require.NoError(t, err)
	forged := ccClaimOne(t, e, e.client, spec(`{"n": 6}`))
	forgedLease := forged.Lease()
	forgedLease.Token = uuid.New()
	unknown := jobs.Lease{JobID: 1 << 40, Token: uuid.New()}
	e.Clock.Advance(time.Second)

	untouched := []int64{stale.ID, succeeded.ID, cancelled.ID, forged.ID}
	before := snapshotOf(t, e.Pool, untouched...)
	batch := []jobs.Completion{
		{Lease: live1.Lease(), Result: []byte(`{"n": 1}`)},
		{Lease: stale.Lease(), Result: []byte(`{"n": 3}`)},
		{Lease: unknown},
		{Lease: succeeded.Lease(), Result: []byte(`{"second": true}`)},
		{Lease: live2.Lease()},
		{Lease: cancelled.Lease()},
		{Lease: forgedLease},
	}
	want := []error{nil, db.ErrStaleClaim, db.ErrNotFound, db.ErrTerminal, nil, db.ErrStaleClaim, db.ErrStaleClaim}
	errs, err := e.client.CompleteMany(ctx, batch)
	require.NoError(t, err)
	require.Len(t, errs, len(batch))
	for i, w := range want {
		if w == nil {
			require.NoError(t, errs[i], "element %d", i)
			continue
		}
		require.ErrorIs(t, errs[i], w, "element %d", i)
		for _, other := range []error{db.ErrStaleClaim, db.ErrNotFound, db.ErrTerminal} {
			if other != w {
				require.NotErrorIs(t, errs[i], other, "element %d", i)
			}
		}
	}
	require.Equal(t, before, snapshotOf(t, e.Pool, untouched...), "refused elements changed something")

	got1, err := e.client.Get(ctx, live1.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, got1.State)
	require.JSONEq(t, `{"n": 1}`, string(got1.Result))
	require.Equal(t, e.Clock.Now(), got1.FinishedAt)
	got2, err := e.client.Get(ctx, live2.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, got2.State)
	require.Nil(t, got2.Result)
	for _, id := range []int64{live1.ID, live2.ID} {
		v, err := e.client.Verify(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.Verification{OK: true, Events: 2}, v)
	}

	// The batch is a retry-safe unit: sent again, the completed elements are
	// quiet no-ops and the refused ones are refused the same way.
	before = snapshot(t, e.Pool)
	again, err := e.client.CompleteMany(ctx, batch)
	require.NoError(t, err)
	for i, w := range want {
		if w == nil {
			require.NoError(t, again[i], "element %d sent again", i)
		} else {
			require.ErrorIs(t, again[i], w, "element %d sent again", i)
		}
	}
	require.Equal(t, before, snapshot(t, e.Pool))

	// Completing a succeeded job with its own result is a quiet no-op.
	same, err := e.client.CompleteMany(ctx, []jobs.Completion{{Lease: succeeded.Lease(), Result: []byte(`{"first": true}`)}})
	require.NoError(t, err)
	require.NoError(t, same[0])
	require.Equal(t, before, snapshot(t, e.Pool))
}

// A batch may name one job twice. Whatever the batch makes of that, an
// element reported done must be true of the job: it succeeded with that
// element's result.
func TestCompleteManyNamingOneJobTwice(t *testing.T) {
	t.Parallel()
	forge := func(l jobs.Lease) jobs.Lease {
		l.Token = uuid.New()
		return l
	}
	cases := []struct {
		name  string
		batch func(l jobs.Lease) []jobs.Completion
	}{
		{"one token, two results", func(l jobs.Lease) []jobs.Completion {
			return []jobs.Completion{{Lease: l, Result: []byte(`{"r": "A"}`)}, {Lease: l, Result: []byte(`{"r": "B"}`)}}
		}},
		{"a forged token before the holder's", func(l jobs.Lease) []jobs.Completion {
			return []jobs.Completion{{Lease: forge(l), Result: []byte(`{"by": "forger"}`)}, {Lease: l, Result: []byte(`{"by": "holder"}`)}}
		}},
		{"a forged token after the holder's", func(l jobs.Lease) []jobs.Completion {
			return []jobs.Completion{{Lease: l, Result: []byte(`{"by": "holder"}`)}, {Lease: forge(l), Result: []byte(`{"by": "forger"}`)}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx := t.Context()
			j := ccClaimOne(t, e, e.client, spec(`{"twice": true}`))
			before := snapshot(t, e.Pool)
			batch := tc.batch(j.Lease())
			errs, err := e.client.CompleteMany(ctx, batch)
			if err != nil {
				// Refusing such a batch outright is a fine answer too.
				require.ErrorIs(t, err, db.ErrInvalidArgument)
				require.Equal(t, before, snapshot(t, e.Pool))
				return
			}
			got, err := e.client.Get(ctx, j.ID)
			require.NoError(t, err)
			require.Equal(t, jobs.Succeeded, got.State)
			done := 0
			for i, c := range batch {
				if errs[i] != nil {
					continue
				}
				done++
				require.JSONEq(t, string(c.Result), string(got.Result),
					"element %d was reported done, but the job holds another result", i)
			}
			require.NotZero(t, done)
			v, err := e.client.Verify(ctx, j.ID)
			require.NoError(t, err)
			require.Equal(t, jobs.Verification{OK: true, Events: 3}, v, "completed once")
		})
	}
}

// A completion retried after a lost reply is a quiet no-op when its result
// is equal, whichever of Complete and CompleteMany sent it each time.
func TestCompletionRetriedThroughTheOtherCall(t *testing.T) {
	t.Parallel()
	viaOne := func(ctx context.Context, c *jobs.Client, l jobs.Lease, r json.RawMessage) error {
		_, err := c.Complete(ctx, l, r, nil)
		return err
	}
	viaMany := func(ctx context.Context, c *jobs.Client, l jobs.Lease, r json.RawMessage) error {
		errs, err := c.CompleteMany(ctx, []jobs.Completion{{Lease: l, Result: r}})
		if err != nil {
			return err
		}
		return errs[0]
	}
	type completeFn = func(context.Context, *jobs.Client, jobs.Lease, json.RawMessage) error
	for _, result := range []string{`{"paid": true}`, `null`, ``} {
		for _, order := range []struct {
			name          string
			first, second completeFn
		}{
			{"complete, then complete many", viaOne, viaMany},
			{"complete many, then complete", viaMany, viaOne},
		} {
			t.Run(fmt.Sprintf("%s with result %q", order.name, result), func(t *testing.T) {
				t.Parallel()
				e := setup(t)
				ctx := t.Context()
				var r json.RawMessage
				if result != "" {
					r = json.RawMessage(result)
				}
				j := ccClaimOne(t, e, e.client, spec(`{"retried": true}`))
				require.NoError(t, order.first(ctx, e.client, j.Lease(), r))
				before := snapshot(t, e.Pool)
				require.NoError(t, order.second(ctx, e.client, j.Lease(), r), "the same completion, sent again")
				require.Equal(t, before, snapshot(t, e.Pool))
			})
		}
	}
}
