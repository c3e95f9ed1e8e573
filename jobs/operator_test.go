package jobs_test

import (
	"context"
	"strconv"
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

// operator holds what an operator of acme holds: retry, cancel, pause.
const operator = testkit.Ops

const time1m = time.Minute

// opSetup is setup with operator granted job.retry, job.cancel and
// queue.pause on acme, and a client acting as it.
func opSetup(t *testing.T) (env, *jobs.Client) {
	t.Helper()
	e := setup(t)
	e.Allow(t, testkit.Grants(operator, project, access.JobRetry, access.JobCancel, access.QueuePause)...)
	return e, clientAs(t, e.API, e.Clock, operator)
}

// enqueueIn enqueues a job of kind in queue.
func enqueueIn(t *testing.T, c *jobs.Client, kind, queue, payload string) jobs.Job {
	t.Helper()
	s := jobs.Spec{Kind: kind, Queue: queue, Payload: []byte(payload)}
	e, err := c.Enqueue(t.Context(), s)
	require.NoError(t, err)
	return e.Job
}

// finish claims job id and fails it permanently.
func finish(t *testing.T, c *jobs.Client, id int64) jobs.Job {
	t.Helper()
	j, ok, err := c.ClaimID(t.Context(), id, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	j, err = c.Fail(t.Context(), j.Lease(), jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "broken"})
	require.NoError(t, err)
	require.Equal(t, jobs.Failed, j.State)
	return j
}

// claimQueue is the worker's claim of queue's due jobs, in a transaction of its own.
func claimQueue(t *testing.T, e env, c *jobs.Client, queue string) []jobs.Job {
	t.Helper()
	var got []jobs.Job
	require.NoError(t, pgx.BeginFunc(t.Context(), e.API, func(tx pgx.Tx) error {
		var err error
		got, err = jobclaim.Of[jobs.Job, jobs.Decoder](c).ClaimQueueTx(t.Context(), tx, queue, 10, nil, nil, nil)
		return err
	}))
	return got
}

func TestPausedQueueIsNotClaimed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ops := opSetup(t)
	paused := enqueueIn(t, e.client, "billing.invoice", "mail", `{"n": 1}`)
	byID := enqueueIn(t, e.client, "billing.invoice", "mail", `{"n": 2}`)
	other := enqueueIn(t, e.client, "billing.invoice", "default", `{"n": 3}`)

	q, err := ops.PauseQueue(ctx, "mail", "smtp relay down")
	require.NoError(t, err)
	require.True(t, q.Paused)
	require.Equal(t, int64(1), q.Revision)
	require.Equal(t, operator, q.PausedBy)
	require.Equal(t, t0, q.PausedAt)
	require.Equal(t, "smtp relay down", q.Reason)

	// Pausing a paused queue is a quiet no-op.
	again, err := ops.PauseQueue(ctx, "mail", "again")
	require.NoError(t, err)
	require.Equal(t, q, again)

	// Every claim path skips it; the other queue is claimed.
	got, err := e.client.Claim(ctx, "mail", jobs.ClaimOptions{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got, "a claim of a paused queue")
	_, ok, err := e.client.ClaimID(ctx, byID.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.False(t, ok, "a claim by id of a paused queue's job")
	require.Empty(t, claimQueue(t, e, e.client, "mail"), "a worker's claim of a paused queue")
	got = claimQueue(t, e, e.client, "default")
	require.Len(t, got, 1)
	require.Equal(t, other.ID, got[0].ID)
	for _, id := range []int64{paused.ID, byID.ID} {
		j, err := e.client.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.Queued, j.State, "a paused queue's job stays queued")
	}

	qs, err := e.client.Queues(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 2, "the paused queue, and default, whose one job a worker holds")
	require.Equal(t, "default", qs[0].Name, "a queue with only claimed jobs is listed")
	require.False(t, qs[0].Paused)
	require.Zero(t, qs[0].Revision)
	require.Equal(t, "mail", qs[1].Name)
	require.True(t, qs[1].Paused)

	e.Clock.Advance(time1m)
	r, err := ops.ResumeQueue(ctx, "mail", "relay back")
	require.NoError(t, err)
	require.False(t, r.Paused)
	require.Equal(t, int64(2), r.Revision)
	require.Empty(t, r.PausedBy)
	require.Empty(t, r.Reason)
	again, err = ops.ResumeQueue(ctx, "mail", "")
	require.NoError(t, err)
	require.Equal(t, r, again, "resuming a running queue is a quiet no-op")

	got = claimQueue(t, e, e.client, "mail")
	require.Len(t, got, 2, "resumed: its jobs are claimed")

	h, err := e.client.QueueHistory(ctx, "mail")
	require.NoError(t, err)
	require.Equal(t, []jobs.QueueEvent{
		{Revision: 1, What: "paused", Actor: operator, At: t0, Reason: "smtp relay down"},
		{Revision: 2, What: "resumed", Actor: operator, At: t0.Add(time1m), Reason: "relay back"},
	}, h)
}

func TestQueuePauseRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _ := opSetup(t)
	before := testkit.Snapshot(t, e.Pool, "docket.queues", "docket.queue_events")
	_, err := e.client.PauseQueue(ctx, "default", "")
	require.ErrorIs(t, err, db.ErrNotPermitted, "app holds no queue.pause")
	_, err = clientAs(t, e.API, e.Clock, operator).PauseQueue(ctx, "Not A Queue", "")
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.Equal(t, before, testkit.Snapshot(t, e.Pool, "docket.queues", "docket.queue_events"))
	nobodyQueues, err := clientAs(t, e.API, e.Clock, nobody).Queues(ctx)
	require.NoError(t, err)
	require.Empty(t, nobodyQueues)
}

func TestRetryMakesANewJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ops := opSetup(t)
	orig := enqueueIn(t, e.client, "billing.invoice", "mail", `{"n": 1}`)
	orig = finish(t, e.client, orig.ID)
	before := snapshotOf(t, e.Pool, orig.ID)

	e.Clock.Advance(time1m)
	r, err := ops.Retry(ctx, orig.ID)
	require.NoError(t, err)
	require.NotEqual(t, orig.ID, r.ID)
	require.Equal(t, orig.ID, r.RetryOf)
	require.Equal(t, jobs.Queued, r.State)
	require.Equal(t, orig.Kind, r.Kind)
	require.Equal(t, orig.Queue, r.Queue)
	require.Equal(t, orig.Project, r.Project)
	require.JSONEq(t, string(orig.Payload), string(r.Payload))
	require.Equal(t, operator, r.CreatedBy)
	require.Equal(t, t0.Add(time1m), r.CreatedAt)
	require.Equal(t, before, snapshotOf(t, e.Pool, orig.ID), "the original stays as it finished")

	h, err := e.client.History(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, h, 1)
	require.Equal(t, operator, h[0].Actor)
	require.Equal(t, "retry of job "+strconv.FormatInt(orig.ID, 10), h[0].Detail)
	v, err := e.client.Verify(ctx, r.ID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)

	// Both directions of the link.
	again, err := ops.Retry(ctx, orig.ID)
	require.NoError(t, err, "a job may be retried more than once")
	ids, err := e.client.Retries(ctx, orig.ID)
	require.NoError(t, err)
	require.Equal(t, []int64{r.ID, again.ID}, ids)
	got, err := e.client.Get(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, orig.ID, got.RetryOf)

	// The link cannot be rewritten.
	_, err = e.Pool.Exec(ctx, `UPDATE docket.jobs SET retry_of = NULL WHERE id = $1`, r.ID)
	require.ErrorIs(t, db.Translate(err, "x"), db.ErrImmutable)
}

func TestRetryRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ops := opSetup(t)
	queued := enqueueIn(t, e.client, "billing.invoice", "default", `{"n": 1}`)
	done := enqueueIn(t, e.client, "billing.invoice", "default", `{"n": 2}`)
	j, ok, err := e.client.ClaimID(ctx, done.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = e.client.Complete(ctx, j.Lease(), nil, nil)
	require.NoError(t, err)
	failed := finish(t, e.client, enqueueIn(t, e.client, "billing.invoice", "default", `{"n": 3}`).ID)
	before := snapshot(t, e.Pool)

	_, err = ops.Retry(ctx, queued.ID)
	require.ErrorIs(t, err, db.ErrIllegalTransition, "a live job")
	_, err = ops.Retry(ctx, done.ID)
	require.ErrorIs(t, err, db.ErrTerminal, "a job that succeeded")
	_, err = ops.Retry(ctx, 1<<40)
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = e.client.Retry(ctx, failed.ID)
	require.ErrorIs(t, err, db.ErrNotPermitted, "app holds no job.retry")
	_, err = e.client.CountToRetry(ctx, jobs.BulkFilter{})
	require.ErrorIs(t, err, db.ErrNotPermitted)
	_, err = e.client.RetryMatching(ctx, jobs.BulkFilter{})
	require.ErrorIs(t, err, db.ErrNotPermitted)
	_, err = ops.CountToRetry(ctx, jobs.BulkFilter{State: jobs.Queued})
	require.ErrorIs(t, err, db.ErrInvalidArgument, "a retry takes finished jobs")
	_, err = ops.RetryMatching(ctx, jobs.BulkFilter{Limit: jobs.MaxBulk + 1})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = ops.CancelMatching(ctx, jobs.BulkFilter{State: jobs.Dead}, "")
	require.ErrorIs(t, err, db.ErrInvalidArgument, "a bulk cancel takes queued jobs")
	_, err = ops.CountToCancel(ctx, jobs.BulkFilter{Kind: "Not A Kind"})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = clientAs(t, e.API, e.Clock, nobody).CancelMatching(ctx, jobs.BulkFilter{}, "")
	require.ErrorIs(t, err, db.ErrNotPermitted)
	require.Equal(t, before, snapshot(t, e.Pool), "refusals change nothing")
}

func TestBulkRetryAndCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ops := opSetup(t)
	var failedA []int64
	for i := range 3 {
		failedA = append(failedA, finish(t, e.client, enqueueIn(t, e.client, "billing.a", "default", `{"i": `+strconv.Itoa(i)+`}`).ID).ID)
	}
	finish(t, e.client, enqueueIn(t, e.client, "billing.b", "default", `{}`).ID)
	queuedA := []int64{enqueueIn(t, e.client, "billing.a", "other", `{}`).ID, enqueueIn(t, e.client, "billing.a", "other", `{}`).ID}
	enqueueIn(t, e.client, "billing.b", "other", `{}`)

	n, err := ops.CountToRetry(ctx, jobs.BulkFilter{Kind: "billing.a"})
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	n, err = ops.CountToRetry(ctx, jobs.BulkFilter{State: jobs.Failed})
	require.NoError(t, err)
	require.Equal(t, int64(4), n)
	n, err = ops.CountToRetry(ctx, jobs.BulkFilter{State: jobs.Dead})
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = ops.CountToRetry(ctx, jobs.BulkFilter{Kind: "billing.a", Since: t0.Add(time1m)})
	require.NoError(t, err)
	require.Zero(t, n, "created before the window")

	first, err := ops.RetryMatching(ctx, jobs.BulkFilter{Kind: "billing.a", Limit: 2})
	require.NoError(t, err)
	require.Len(t, first, 2)
	require.Equal(t, failedA[:2], []int64{first[0].RetryOf, first[1].RetryOf}, "oldest first")
	rest, err := ops.RetryMatching(ctx, jobs.BulkFilter{Kind: "billing.a"})
	require.NoError(t, err)
	require.Len(t, rest, 1)
	require.Equal(t, failedA[2], rest[0].RetryOf)
	n, err = ops.CountToRetry(ctx, jobs.BulkFilter{Kind: "billing.a"})
	require.NoError(t, err)
	require.Zero(t, n, "a job retried already is not counted again")

	n, err = ops.CountToCancel(ctx, jobs.BulkFilter{Kind: "billing.a", Queue: "other"})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	cancelled, err := ops.CancelMatching(ctx, jobs.BulkFilter{Kind: "billing.a", Queue: "other"}, "bad batch")
	require.NoError(t, err)
	require.Len(t, cancelled, 2)
	for i, j := range cancelled {
		require.Equal(t, queuedA[i], j.ID)
		require.Equal(t, jobs.Cancelled, j.State)
		require.Equal(t, "cancelled: bad batch", j.Diagnostic)
	}
	n, err = ops.CountToCancel(ctx, jobs.BulkFilter{})
	require.NoError(t, err)
	require.Equal(t, int64(4), n, "billing.b in other, and the three retries")
}

// TestBulkRetriesAtOnceRetryEachJobOnce releases bulk retries of one
// project's failed jobs together, repeatedly: they run one after the
// other, so each job is retried exactly once, whichever call took it.
func TestBulkRetriesAtOnceRetryEachJobOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ops := opSetup(t)
	for round := range 5 {
		var failed []int64
		for i := range 6 {
			failed = append(failed, finish(t, e.client, enqueueIn(t, e.client, "billing.a", "default",
				`{"round": `+strconv.Itoa(round)+`, "i": `+strconv.Itoa(i)+`}`).ID).ID)
		}
		start := make(chan struct{})
		type got struct {
			jobs []jobs.Job
			err  error
		}
		out := make(chan got, 4)
		for range 4 {
			go func() {
				<-start
				js, err := ops.RetryMatching(ctx, jobs.BulkFilter{Kind: "billing.a"})
				out <- got{js, err}
			}()
		}
		close(start)
		retried := map[int64]int{}
		for range 4 {
			g := <-out
			require.NoError(t, g.err, "round %d", round)
			for _, j := range g.jobs {
				retried[j.RetryOf]++
			}
		}
		for _, id := range failed {
			require.Equal(t, 1, retried[id], "round %d: job %d retried once", round, id)
		}
		require.Len(t, retried, len(failed), "round %d: only this round's jobs", round)
	}
}
