package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/jobclaim"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// cfClaim claims from queue default as c, from positions from (see
// cqClaimFrom), and returns the ids claimed in the order the claim took them.
func cfClaim(t *testing.T, e env, c *jobs.Client, limit int, from map[string]jobclaim.Position) ([]int64, error) {
	t.Helper()
	got, err := cqClaimFrom(t.Context(), e, c, "default", limit, nil, nil, from)
	ids := make([]int64, len(got))
	for i, j := range got {
		ids[i] = j.ID
	}
	return ids, err
}

// cfAt is job j's place in the claim order.
func cfAt(j jobs.Job) jobclaim.Position {
	return jobclaim.Position{Priority: j.Priority, AvailableAt: j.AvailableAt, ID: j.ID}
}

func TestClaimQueueBeginsWhereItIsTold(t *testing.T) {
	t.Parallel()
	e := setup(t, "beta", "gamma")
	// app claims in acme and beta; in gamma it may only enqueue.
	e.Allow(t, testkit.Join(
		testkit.Grants(app, "beta", access.JobCreate, access.JobClaim),
		testkit.Grants(app, "gamma", access.JobCreate),
	)...)
	beta, gamma := cqClient(t, e, "beta", app), cqClient(t, e, "gamma", app)
	worker, err := jobs.NewClient(e.API, jobs.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	enqueue := func(c *jobs.Client, name string, priority int, at time.Time) jobs.Job {
		s := spec(fmt.Sprintf(`{"name": %q}`, name))
		s.Priority, s.AvailableAt = priority, at
		return cqEnqueue(t, c, s)
	}
	ids := func(js ...jobs.Job) []int64 {
		out := make([]int64, len(js))
		for i, j := range js {
			out[i] = j.ID
		}
		return out
	}

	var backlog []jobs.Job
	for i := range 6 {
		backlog = append(backlog, enqueue(e.client, fmt.Sprint("backlog ", i), 2, t0))
	}
	got, err := cfClaim(t, e, worker, 2, nil)
	require.NoError(t, err)
	require.Equal(t, ids(backlog[:2]...), got, "from the head")
	// Where a worker begins its next claim: at the first job this one took.
	from := map[string]jobclaim.Position{project: cfAt(backlog[0])}

	// Behind that position: a job of a higher priority, and one backdated.
	urgent := enqueue(e.client, "urgent", 1, t0)
	backdated := enqueue(e.client, "backdated", 2, t0.Add(-time.Minute))
	got, err = cfClaim(t, e, worker, 100, from)
	require.NoError(t, err)
	require.Equal(t, ids(backlog[2:]...), got, "from the position: the rest of the backlog, in order, none behind it")
	require.Equal(t, jobs.Queued, cqGet(t, e.client, urgent.ID).State)
	require.Equal(t, jobs.Queued, cqGet(t, e.client, backdated.ID).State)
	got, err = cfClaim(t, e, worker, 100, nil)
	require.NoError(t, err)
	require.Equal(t, ids(urgent, backdated), got, "from the head again: behind the position, first by priority")

	// A position names one project: the others are read from their
	// heads, and a project where the claimant holds no job.claim stays
	// out of reach whatever a position says.
	acmeJob := enqueue(e.client, "acme", 2, t0)
	betaJob := enqueue(beta, "beta", 2, t0)
	gammaJob := enqueue(gamma, "gamma", 2, t0)
	past := func(j jobs.Job) jobclaim.Position { at := cfAt(j); at.ID++; return at }
	got, err = cfClaim(t, e, worker, 100, map[string]jobclaim.Position{"beta": past(betaJob), "gamma": cfAt(gammaJob)})
	require.NoError(t, err)
	require.Equal(t, ids(acmeJob), got, "acme from its head; beta's job behind beta's position; nothing of gamma")
	got, err = cfClaim(t, e, worker, 100, nil)
	require.NoError(t, err)
	require.Equal(t, ids(betaJob), got)
	require.Equal(t, jobs.Queued, cqGet(t, gamma, gammaJob.ID).State, "job.create is not job.claim")
}

func TestClaimQueueRefusesMalformedPositions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cqEnqueue(t, e.client, spec(`{"claim_from": "bait"}`))
	at := func(priority int, id int64, when time.Time) map[string]jobclaim.Position {
		return map[string]jobclaim.Position{project: {Priority: priority, AvailableAt: when, ID: id}}
	}
	many := map[string]jobclaim.Position{}
	for i := range jobs.MaxClaimBatch + 1 {
		many[fmt.Sprint("p", i)] = jobclaim.Position{Priority: 1, AvailableAt: t0, ID: 1}
	}
	cases := []struct {
		name string
		from map[string]jobclaim.Position
	}{
		{"priority 0", at(0, 1, t0)},
		{"priority 5", at(5, 1, t0)},
		{"priority negative", at(-1, 1, t0)},
		{"id 0", at(1, 0, t0)},
		{"id negative", at(1, -1, t0)},
		{"zero instant", at(1, 1, time.Time{})},
		{"malformed project", map[string]jobclaim.Position{"Acme": {Priority: 1, AvailableAt: t0, ID: 1}}},
		{"empty project", map[string]jobclaim.Position{"": {Priority: 1, AvailableAt: t0, ID: 1}}},
		{"project of 64 characters", map[string]jobclaim.Position{strings.Repeat("p", 64): {Priority: 1, AvailableAt: t0, ID: 1}}},
		{"over 1000 positions", many},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, e.Pool)
			got, err := cfClaim(t, e, e.client, 10, tc.from)
			require.Empty(t, got)
			cqRefused(t, e, before, db.ErrInvalidArgument, err)
		})
	}
}

func TestDatabaseRefusesMalformedClaimPositionsWithoutGo(t *testing.T) {
	t.Parallel()
	e := setup(t)
	bait := cqEnqueue(t, e.client, spec(`{"claim_from": "raw"}`))
	call := func(ctx context.Context, q db.DBTX, projects, priorities, at, ids *string) (int, error) {
		var n int
		err := q.QueryRow(ctx, `
			SELECT count(*) FROM docket.job_claim_queue('default', 10, NULL, NULL, NULL, $1, $2,
			    NULL, $3::text::text[], $4::text::smallint[], $5::text::timestamptz[], $6::text::bigint[])`,
			string(app), e.Clock.Now(), projects, priorities, at, ids).Scan(&n)
		return n, err
	}
	lit := func(s string) *string { return &s }
	t0s := t0.Format(time.RFC3339Nano)
	good := [4]*string{lit("{acme}"), lit("{1}"), lit(`{"` + t0s + `"}`), lit("{1}")}
	with := func(i int, v *string) [4]*string { g := good; g[i] = v; return g }
	cases := []struct {
		name string
		args [4]*string
	}{
		{"projects NULL, the rest not", with(0, nil)},
		{"priorities NULL, the rest not", with(1, nil)},
		{"instants NULL, the rest not", with(2, nil)},
		{"ids NULL, the rest not", with(3, nil)},
		{"two projects, one of the rest", with(0, lit("{acme,beta}"))},
		{"two ids, one of the rest", with(3, lit("{1,2}"))},
		{"a NULL project", with(0, lit("{NULL}"))},
		{"a NULL priority", with(1, lit("{NULL}"))},
		{"a NULL instant", with(2, lit("{NULL}"))},
		{"a NULL id", with(3, lit("{NULL}"))},
		{"a malformed project", with(0, lit("{Acme}"))},
		{"priority 0", with(1, lit("{0}"))},
		{"priority 5", with(1, lit("{5}"))},
		{"id 0", with(3, lit("{0}"))},
		{"an infinite instant", with(2, lit("{infinity}"))},
		{"a project named twice", [4]*string{lit("{acme,acme}"), lit("{2,2}"), lit(`{"` + t0s + `","` + t0s + `"}`), lit("{1,2}")}},
	}

	// Control: the same call with a good position, and with none, claims
	// the bait (released by hand after each).
	for _, args := range [][4]*string{good, {}} {
		n, err := call(t.Context(), e.API, args[0], args[1], args[2], args[3])
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, jobs.Claimed, cqGet(t, e.client, bait.ID).State)
		require.NoError(t, testkit.Raw(t.Context(), e.Pool, "svc:app", e.Clock.Now(),
			`UPDATE docket.jobs SET state = 'queued', claim_token = NULL, claimed_by = NULL, claimed_at = NULL,
			    lease_expires_at = NULL WHERE id = $1`, bait.ID))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, e.Pool)
			_, err := call(t.Context(), e.API, tc.args[0], tc.args[1], tc.args[2], tc.args[3])
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			require.Equal(t, "DK010", pgErr.Code, pgErr.Message)
			cqRefused(t, e, before, db.ErrInvalidArgument, db.Translate(err, "raw.job_claim_queue"))
		})
	}
}
