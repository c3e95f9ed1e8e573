package retention_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/retention"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast of every retention test: ops administers projects acme and
// other; app creates, claims and cancels jobs and admits cases in acme and
// other; pruner holds retention.prune and job.claim on acme, as a worker's
// actor running the prune sweep would; keeper holds retention.manage on
// acme; sam holds nothing.
const project, other = testkit.Acme, testkit.Other
const ops, app, sam = testkit.Ops, testkit.App, testkit.Sam
const pruner, keeper access.Actor = "worker:pruner", "user:keeper"

var grants = testkit.Join(
	testkit.Grants(app, project, access.JobCreate, access.JobClaim, access.JobCancel, access.CaseAdmit,
		access.MessageDeliver, access.QuorumCreate, access.ScheduleManage),
	testkit.Grants(app, other, access.JobCreate, access.JobClaim),
	testkit.Grants(pruner, project, access.RetentionPrune, access.JobClaim, access.JobCreate, access.CaseSweep,
		access.ScheduleSweep),
	testkit.Grants(keeper, project, access.RetentionManage),
)

type env struct {
	testkit.Env
	jobs   *jobs.Client // app's, in acme
	cases  *cases.Client
	pruner *retention.Client
	keeper *retention.Client
}

// setup returns a fresh migrated database with the cast's grants, clients
// for them on a fake clock at t0, and acme's policy set by keeper to p.
func setup(t testing.TB, p retention.Policy) env {
	t.Helper()
	e := env{Env: testkit.Setup(t, ops, []string{project, other}, grants...)}
	e.jobs = e.jobsAs(t, app, project)
	var err error
	e.cases, err = cases.NewClient(e.API, cases.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	e.pruner = e.as(t, pruner)
	e.keeper = e.as(t, keeper)
	_, err = e.keeper.Set(t.Context(), project, p)
	require.NoError(t, err)
	return e
}

func (e env) as(t testing.TB, actor access.Actor) *retention.Client {
	t.Helper()
	c, err := retention.NewClient(e.API, retention.Config{Actor: actor, Clock: e.Clock})
	require.NoError(t, err)
	return c
}

func (e env) jobsAs(t testing.TB, actor access.Actor, proj string) *jobs.Client {
	t.Helper()
	c, err := jobs.NewClient(e.API, jobs.Config{Project: proj, Actor: actor, Clock: e.Clock})
	require.NoError(t, err)
	return c
}

// hours is a policy keeping succeeded and cancelled jobs s hours, failed
// and dead ones f hours, and everything else c hours.
func hours(s, f, c int) retention.Policy {
	h := func(n int) time.Duration { return time.Duration(n) * time.Hour }
	return retention.Policy{SucceededJobs: h(s), FailedJobs: h(f), Messages: h(c), Occurrences: h(c), ClosedCases: h(c)}
}

// finish enqueues a job of c with key (none when ""), claims it and leaves
// it in state to: succeeded, failed (permanently), cancelled, queued,
// claimed or uncertain (its lease expired and was swept, as a
// non-repeatable job's is).
func finish(t testing.TB, e env, c *jobs.Client, key string, to jobs.State) jobs.Job {
	t.Helper()
	ctx := context.Background()
	enq, err := c.Enqueue(ctx, jobs.Spec{Kind: "report.build", Payload: json.RawMessage(`{"n": 1}`), IdempotencyKey: key})
	require.NoError(t, err)
	j := enq.Job
	switch to {
	case jobs.Queued:
		return j
	case jobs.Cancelled:
		j, err = c.Cancel(ctx, j.ID, "not needed")
		require.NoError(t, err)
		return j
	}
	claimed, ok, err := c.ClaimID(ctx, j.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	switch to {
	case jobs.Succeeded:
		j, err = c.Complete(ctx, claimed.Lease(), json.RawMessage(`{"ok": true}`), nil)
	case jobs.Failed:
		j, err = c.Fail(ctx, claimed.Lease(), jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "broken"})
	case jobs.Claimed:
		return claimed
	case jobs.Uncertain:
		j, err = c.Fail(ctx, claimed.Lease(), jobs.Failure{Class: jobs.ClassUncertain, Diagnostic: "lost the reply"})
	}
	require.NoError(t, err)
	require.Equal(t, to, j.State)
	return j
}

// completions completes each of claimed with no result.
func completions(claimed []jobs.Job) []jobs.Completion {
	batch := make([]jobs.Completion, len(claimed))
	for i, j := range claimed {
		batch[i] = jobs.Completion{Lease: j.Lease()}
	}
	return batch
}

// rows counts the rows of table matching where, read as the owner.
func rows(t testing.TB, e env, table, where string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE "+where, args...).Scan(&n))
	return n
}

// requirePruned checks that job id and its events are gone, and that
// reading it names prune p.
func requirePruned(t testing.TB, e env, id int64, p int64) {
	t.Helper()
	require.Zero(t, rows(t, e, "docket.jobs", "id = $1", id), "job %d", id)
	require.Zero(t, rows(t, e, "docket.job_events", "job_id = $1", id), "events of job %d", id)
	_, err := e.jobs.Get(context.Background(), id)
	require.ErrorIs(t, err, db.ErrNotFound)
	var pe *jobs.PrunedError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, p, pe.Prune)
	require.Equal(t, project, pe.Project)
	require.Equal(t, pruner, pe.By)
}

// requireKept checks that job id is there with its history, verified.
func requireKept(t testing.TB, e env, id int64) {
	t.Helper()
	v, err := e.jobs.Verify(context.Background(), id)
	require.NoError(t, err, "job %d", id)
	require.True(t, v.OK, v.Problem)
}
