package jobs_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// lateExpired enqueues a job (max attempts 3 unless s says), has app claim
// it, lets its lease expire and sweeps it, leaving it uncertain; it returns
// the lease app still holds.
func lateExpired(t *testing.T, e env, s jobs.Spec) jobs.Lease {
	t.Helper()
	ctx := t.Context()
	if s.Kind == "" {
		s = spec(`{"invoice": 5}`)
	}
	s.Lease = time.Minute
	enq, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	c, ok, err := e.client.ClaimID(ctx, enq.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	e.Clock.Advance(time.Minute)
	swept, err := e.client.ExpireLeases(ctx, 10)
	require.NoError(t, err)
	require.Len(t, swept, 1)
	require.Equal(t, jobs.Uncertain, swept[0].State)
	e.Clock.Advance(10 * time.Second)
	return c.Lease()
}

// requireLateEvent asserts job id's last event is the late record of lease
// l's outcome, by app, moving uncertain to state, and that the history verifies.
func requireLateEvent(t *testing.T, e env, l jobs.Lease, state jobs.State, says string) {
	t.Helper()
	h, err := e.client.History(t.Context(), l.JobID)
	require.NoError(t, err)
	last := h[len(h)-1]
	require.Equal(t, jobs.Uncertain, last.From)
	require.Equal(t, state, last.To)
	require.Equal(t, app, last.Actor)
	require.True(t, strings.HasPrefix(last.Detail, "recorded late, lease generation 1 (expired at 2026-11-02T09:01:00.000000Z): "),
		last.Detail)
	require.Contains(t, last.Detail, says)
	v, err := e.client.Verify(t.Context(), l.JobID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
}

// The holder of a lease the sweep expired records the outcome it held, late:
// the job moves out of uncertain as that outcome says, on record as late.
func TestALateOutcomeSettlesAnExpiredLease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	t.Run("success", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		l := lateExpired(t, e, jobs.Spec{})
		j, err := e.client.CompleteLate(ctx, l, json.RawMessage(`{"charged": true}`), jobs.Spend{})
		require.NoError(t, err)
		require.Equal(t, jobs.Succeeded, j.State)
		require.JSONEq(t, `{"charged": true}`, string(j.Result))
		require.Equal(t, e.Clock.Now(), j.FinishedAt)
		requireLateEvent(t, e, l, jobs.Succeeded, "it succeeded")

		// The same outcome again is a quiet no-op; another is refused.
		before := snapshot(t, e.Pool)
		again, err := e.client.CompleteLate(ctx, l, json.RawMessage(`{"charged":true}`), jobs.Spend{})
		require.NoError(t, err)
		require.Equal(t, j, again)
		_, err = e.client.FailLate(ctx, l, jobs.Failure{Class: jobs.ClassPermanent})
		require.ErrorIs(t, err, db.ErrTerminal)
		require.Equal(t, before, snapshot(t, e.Pool))
	})

	t.Run("success_in_a_transaction_with_writes_once", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		l := lateExpired(t, e, jobs.Spec{})
		_, err := e.Pool.Exec(ctx, "CREATE TABLE public.receipts (job bigint)")
		require.NoError(t, err)
		record := func() error {
			return db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "INSERT INTO public.receipts VALUES ($1)", l.JobID); err != nil {
					return err
				}
				_, err := e.client.CompleteLateTx(ctx, tx, l, json.RawMessage(`{"charged": true}`), jobs.Spend{})
				return err
			})
		}
		require.NoError(t, record())
		requireLateEvent(t, e, l, jobs.Succeeded, "it succeeded")
		ok, err := e.client.SucceededUnder(ctx, l)
		require.NoError(t, err)
		require.True(t, ok, "the lease's success is on record")

		// Tried again, as after a lost reply: refused, and the writes roll
		// back with it, rather than a quiet no-op that commits them twice.
		before := snapshot(t, e.Pool)
		require.ErrorIs(t, record(), db.ErrTerminal)
		require.Equal(t, before, snapshot(t, e.Pool))
		var receipts int
		require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM public.receipts").Scan(&receipts))
		require.Equal(t, 1, receipts)
	})

	t.Run("retryable_failure_queues_it_again", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		l := lateExpired(t, e, jobs.Spec{})
		j, err := e.client.FailLate(ctx, l, jobs.Failure{Diagnostic: "gateway refused", RetryAfter: time.Minute,
			Spent: jobs.Spend{Effects: 1}})
		require.NoError(t, err)
		require.Equal(t, jobs.Queued, j.State)
		require.Equal(t, e.Clock.Now().Add(time.Minute), j.AvailableAt)
		require.Equal(t, int64(1), j.Spent.Effects)
		requireLateEvent(t, e, l, jobs.Queued, "gateway refused")
	})

	t.Run("retryable_failure_on_the_last_attempt_is_dead", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		s := spec(`{"invoice": 6}`)
		s.Retry.MaxAttempts = 1
		l := lateExpired(t, e, s)
		j, err := e.client.FailLate(ctx, l, jobs.Failure{Diagnostic: "gateway refused"})
		require.NoError(t, err)
		require.Equal(t, jobs.Dead, j.State)
		requireLateEvent(t, e, l, jobs.Dead, "gateway refused")
	})

	t.Run("permanent_failure", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		l := lateExpired(t, e, jobs.Spec{})
		j, err := e.client.FailLate(ctx, l, jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "no such customer"})
		require.NoError(t, err)
		require.Equal(t, jobs.Failed, j.State)
		requireLateEvent(t, e, l, jobs.Failed, "no such customer")
	})

	t.Run("an_uncertain_failure_says_nothing_new", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		l := lateExpired(t, e, jobs.Spec{})
		before := snapshot(t, e.Pool)
		j, err := e.client.FailLate(ctx, l, jobs.Failure{Class: jobs.ClassUncertain})
		require.NoError(t, err)
		require.Equal(t, jobs.Uncertain, j.State)
		require.Equal(t, before, snapshot(t, e.Pool))
	})
}

// A late outcome is taken only from the expired lease's own holder, naming
// it, while nothing has happened to the job since the sweep, within the
// window: every other is refused and changes nothing.
func TestALateOutcomeIsRefusedUnlessItIsTheExpiredLeases(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const other access.Actor = "svc:other-worker"
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, e env, l *jobs.Lease) *jobs.Client
		err   error
	}{
		{"another_holder", func(t *testing.T, e env, l *jobs.Lease) *jobs.Client {
			e.Allow(t, testkit.Grants(other, project, access.JobClaim)...)
			return clientAs(t, e.API, e.Clock, other)
		}, db.ErrStaleClaim},
		{"another_token", func(t *testing.T, e env, l *jobs.Lease) *jobs.Client {
			l.Token = uuid.New()
			return e.client
		}, db.ErrStaleClaim},
		{"another_generation", func(t *testing.T, e env, l *jobs.Lease) *jobs.Client {
			l.Generation = 2
			return e.client
		}, db.ErrStaleClaim},
		{"past_the_window", func(t *testing.T, e env, l *jobs.Lease) *jobs.Client {
			e.Clock.Advance(time.Hour)
			return e.client
		}, db.ErrStaleClaim},
		{"reconciled_since", func(t *testing.T, e env, l *jobs.Lease) *jobs.Client {
			_, err := e.client.Reconcile(ctx, l.JobID, jobs.RunAgain, nil, "checked")
			require.NoError(t, err)
			return e.client
		}, db.ErrStaleClaim},
		{"claimed_since", func(t *testing.T, e env, l *jobs.Lease) *jobs.Client {
			_, err := e.client.Reconcile(ctx, l.JobID, jobs.RunAgain, nil, "checked")
			require.NoError(t, err)
			_, ok, err := e.client.ClaimID(ctx, l.JobID, jobs.ClaimOptions{})
			require.NoError(t, err)
			require.True(t, ok)
			return e.client
		}, db.ErrStaleClaim},
		{"no_job_claim", func(t *testing.T, e env, l *jobs.Lease) *jobs.Client {
			e.Allow(t, testkit.Grants(other, project, access.JobView)...)
			return clientAs(t, e.API, e.Clock, other)
		}, db.ErrNotPermitted},
		{"another_projects_login", func(t *testing.T, e env, l *jobs.Lease) *jobs.Client {
			e.Allow(t, testkit.Grants(other, testkit.Other, access.JobClaim)...)
			return clientAs(t, e.API, e.Clock, other)
		}, db.ErrNotFound},
		{"unknown_job", func(t *testing.T, e env, l *jobs.Lease) *jobs.Client {
			l.JobID += 1000
			return e.client
		}, db.ErrNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, testkit.Other)
			l := lateExpired(t, e, jobs.Spec{})
			cl := c.setup(t, e, &l)
			before := snapshot(t, e.Pool)
			_, err := cl.CompleteLate(ctx, l, nil, jobs.Spend{})
			require.ErrorIs(t, err, c.err)
			_, err = cl.FailLate(ctx, l, jobs.Failure{Class: jobs.ClassPermanent})
			require.ErrorIs(t, err, c.err)
			require.Equal(t, before, snapshot(t, e.Pool), "the refusal changed nothing")
		})
	}

	t.Run("the_holders_own_uncertain_failure", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		enq, err := e.client.Enqueue(ctx, spec(`{"invoice": 7}`))
		require.NoError(t, err)
		c, ok, err := e.client.ClaimID(ctx, enq.Job.ID, jobs.ClaimOptions{})
		require.NoError(t, err)
		require.True(t, ok)
		_, err = e.client.Fail(ctx, c.Lease(), jobs.Failure{Class: jobs.ClassUncertain, Diagnostic: "hung up"})
		require.NoError(t, err)
		before := snapshot(t, e.Pool)
		_, err = e.client.CompleteLate(ctx, c.Lease(), nil, jobs.Spend{})
		require.ErrorIs(t, err, db.ErrStaleClaim, "not an expiry: its holder said it did not know")
		require.Equal(t, before, snapshot(t, e.Pool))
	})

	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		l := lateExpired(t, e, jobs.Spec{})
		before := snapshot(t, e.Pool)
		_, err := e.client.FailLate(ctx, l, jobs.Failure{Class: "sideways"})
		require.ErrorIs(t, err, db.ErrInvalidArgument)
		_, err = e.client.CompleteLate(ctx, l, nil, jobs.Spend{Money: -1})
		require.ErrorIs(t, err, db.ErrInvalidArgument)
		_, err = e.client.CompleteLate(ctx, l, json.RawMessage(`"`+strings.Repeat("x", 1<<20)+`"`), jobs.Spend{})
		require.ErrorIs(t, err, db.ErrInvalidArgument)
		require.Equal(t, before, snapshot(t, e.Pool))
	})
}

// A late outcome racing a reconciliation of the same uncertain job: one of
// them settles it, the other is refused, and the history verifies.
func TestALateOutcomeRacingAReconciliationHasOneWinner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setup(t)
	for round := range 8 {
		l := lateExpired(t, e, spec(`{"round": `+string(rune('0'+round))+`}`))
		start := make(chan struct{})
		var wg sync.WaitGroup
		var lateErr, reconErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, lateErr = e.client.CompleteLate(ctx, l, json.RawMessage(`{"late": true}`), jobs.Spend{})
		}()
		go func() {
			defer wg.Done()
			<-start
			_, reconErr = e.client.Reconcile(ctx, l.JobID, jobs.DidFail, nil, "found nothing")
		}()
		close(start)
		wg.Wait()
		require.True(t, (lateErr == nil) != (reconErr == nil), "round %d: one winner (late %v, reconcile %v)", round, lateErr, reconErr)
		j, err := e.client.Get(ctx, l.JobID)
		require.NoError(t, err)
		if lateErr == nil {
			require.Equal(t, jobs.Succeeded, j.State)
			require.ErrorIs(t, reconErr, db.ErrTerminal)
		} else {
			require.Equal(t, jobs.Failed, j.State)
			require.ErrorIs(t, lateErr, db.ErrStaleClaim)
		}
		v, err := e.client.Verify(ctx, l.JobID)
		require.NoError(t, err)
		require.True(t, v.OK, v.Problem)
	}
}
