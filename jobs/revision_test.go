package jobs_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// runs names the claimant of billing.invoice schema 1 running revision r.
func runs(r string) jobs.ClaimOptions {
	return jobs.ClaimOptions{Limit: 10, Decoders: []jobs.Decoder{{Kind: "billing.invoice", Schema: 1, Revision: r}}}
}

// claimAs enqueues a job and claims it as a claimant running revision r.
func claimAs(t *testing.T, e env, r string) jobs.Job {
	t.Helper()
	ctx := t.Context()
	_, err := e.client.Enqueue(ctx, spec(`{"n": 1}`))
	require.NoError(t, err)
	got, err := e.client.Claim(ctx, "default", runs(r))
	require.NoError(t, err)
	require.Len(t, got, 1)
	return got[0]
}

// A claim records the revision that took it, and every call on the lease
// from another revision (or from none) is a stale claim that changes
// nothing: a completion's handler writes included. The right revision
// completes, and the history, revision and all, verifies.
func TestAnOutcomeFromAnotherRevisionIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := claimAs(t, e, "r1")
	require.Equal(t, "r1", j.ClaimedRevision)
	lease := j.Lease()
	require.Equal(t, "r1", lease.Revision)

	for _, other := range []string{"r2", ""} {
		bad := lease
		bad.Revision = other
		before := snapshot(t, e.Pool)
		wrote := false
		_, err := e.client.Complete(ctx, bad, json.RawMessage(`{"ok": true}`), func(tx pgx.Tx) error {
			_, err := e.client.EnqueueTx(ctx, tx, spec(`{"written": "by the handler"}`))
			wrote = err == nil
			return err
		})
		require.ErrorIs(t, err, db.ErrStaleClaim, "complete from %q", other)
		require.True(t, wrote, "the handler's writes ran, and rolled back")
		_, err = e.client.Renew(ctx, bad, time.Minute)
		require.ErrorIs(t, err, db.ErrStaleClaim, "renew from %q", other)
		_, err = e.client.Fail(ctx, bad, jobs.Failure{Diagnostic: "boom"})
		require.ErrorIs(t, err, db.ErrStaleClaim, "fail from %q", other)
		_, err = e.client.Release(ctx, bad, time.Time{}, "stop")
		require.ErrorIs(t, err, db.ErrStaleClaim, "release from %q", other)
		errs, err := e.client.CompleteMany(ctx, []jobs.Completion{{Lease: bad}})
		require.NoError(t, err)
		require.ErrorIs(t, errs[0], db.ErrStaleClaim, "complete many from %q", other)
		require.Equal(t, before, snapshot(t, e.Pool), "refusals from %q changed nothing", other)
	}

	_, err := e.client.Renew(ctx, lease, time.Minute)
	require.NoError(t, err)
	done, err := e.client.Complete(ctx, lease, json.RawMessage(`{"ok": true}`), nil)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, done.State)
	require.Equal(t, "r1", done.ClaimedRevision, "the revision of the latest claim stays")

	// The finishing holder's repeat is a no-op from its revision only.
	_, err = e.client.Complete(ctx, lease, json.RawMessage(`{"ok": true}`), nil)
	require.NoError(t, err)
	bad := lease
	bad.Revision = "r2"
	_, err = e.client.Complete(ctx, bad, json.RawMessage(`{"ok": true}`), nil)
	require.ErrorIs(t, err, db.ErrStaleClaim)

	hist, err := e.client.History(ctx, j.ID)
	require.NoError(t, err)
	require.Len(t, hist, 2, "one event per attempt")
	require.Equal(t, []string{"", "r1"}, []string{hist[0].Revision, hist[1].Revision})
	v, err := e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
}

// A claimant that names no revision is bound to none: its outcomes pass
// with no revision, as before revisions were recorded.
func TestAClaimNamingNoRevisionIsBoundToNone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	_, err := e.client.Enqueue(ctx, spec(`{}`))
	require.NoError(t, err)
	got, err := e.client.Claim(ctx, "default", jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Empty(t, got[0].ClaimedRevision)
	bad := got[0].Lease()
	bad.Revision = "r1"
	_, err = e.client.Complete(ctx, bad, nil, nil)
	require.ErrorIs(t, err, db.ErrStaleClaim)
	_, err = e.client.Complete(ctx, got[0].Lease(), nil, nil)
	require.NoError(t, err)
}

// The hash chain covers an event's revision: one rewritten by the owner,
// past the append-only guard, breaks verification.
func TestVerifyDetectsARewrittenRevision(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	j := claimAs(t, e, "r1")
	_, err := e.client.Complete(ctx, j.Lease(), nil, nil)
	require.NoError(t, err)
	v, err := e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)

	asOwner(t, e, []string{"docket.job_events"},
		`UPDATE docket.job_events SET revision = 'r2' WHERE job_id = $1 AND seq = 2`, j.ID)
	v, err = e.client.Verify(ctx, j.ID)
	require.NoError(t, err)
	require.False(t, v.OK)
	require.Equal(t, 2, v.BadSeq)
	require.Contains(t, v.Problem, "altered")

	// The job's own revision and pin, rewritten past the guards, are caught
	// against what its history recorded. (An attempt still open is on the
	// row alone: its claim is recorded with the event that ends it.)
	k := claimAs(t, e, "r1")
	_, err = e.client.Complete(ctx, k.Lease(), nil, nil)
	require.NoError(t, err)
	asOwner(t, e, []string{"docket.jobs"}, `UPDATE docket.jobs SET claimed_revision = 'r2' WHERE id = $1`, k.ID)
	v, err = e.client.Verify(ctx, k.ID)
	require.NoError(t, err)
	require.False(t, v.OK)
	require.Contains(t, v.Problem, "claimed revision r2 is not r1")

	in, err := e.client.Enqueue(ctx, spec(`{"n": 2}`))
	require.NoError(t, err)
	_, err = e.client.Pin(ctx, []int64{in.Job.ID}, []string{"r1"})
	require.NoError(t, err)
	asOwner(t, e, []string{"docket.jobs"}, `UPDATE docket.jobs SET revisions = '{r1,r2}' WHERE id = $1`, in.Job.ID)
	v, err = e.client.Verify(ctx, in.Job.ID)
	require.NoError(t, err)
	require.False(t, v.OK)
	require.Contains(t, v.Problem, "pin {r1,r2} is not what its last pin recorded")
}

// A job pinned to a revision no deployment runs is never claimed, by queue
// or by id, nor by a claimant naming no revision, and is listed as
// unrunnable; pinned again to the running revision, it runs, and its pin
// is in its verified history.
func TestAPinnedJobRunsOnlyUnderItsRevisions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	require.NoError(t, e.client.RegisterDecoders(ctx, "billing@r1", runs("r1").Decoders))
	in, err := e.client.Enqueue(ctx, spec(`{"pinned": true}`))
	require.NoError(t, err)
	id := in.Job.ID

	pinned, err := e.client.Pin(ctx, []int64{id}, []string{"r9"})
	require.NoError(t, err)
	require.Len(t, pinned, 1)
	require.Equal(t, []string{"r9"}, pinned[0].Revisions)
	require.Equal(t, jobs.Queued, pinned[0].State)

	unrunnable := func() []int64 {
		list, err := e.client.List(ctx, jobs.Filter{Unrunnable: true})
		require.NoError(t, err)
		ids := []int64{}
		for _, j := range list {
			ids = append(ids, j.ID)
		}
		return ids
	}
	require.Equal(t, []int64{id}, unrunnable())

	before := snapshot(t, e.Pool)
	got, err := e.client.Claim(ctx, "default", runs("r1"))
	require.NoError(t, err)
	require.Empty(t, got, "r1 is not among the pin")
	got, err = e.client.Claim(ctx, "default", jobs.ClaimOptions{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got, "a claimant naming no revision never takes a pinned job")
	_, ok, err := e.client.ClaimID(ctx, id, runs("r1"))
	require.ErrorIs(t, err, db.ErrRefusedRevision)
	require.False(t, ok)
	require.Equal(t, before, snapshot(t, e.Pool))

	_, err = e.client.Pin(ctx, []int64{id}, []string{"r1", "r9"})
	require.NoError(t, err)
	require.Empty(t, unrunnable(), "r1 is deployed")
	got, err = e.client.Claim(ctx, "default", runs("r1"))
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "r1", got[0].ClaimedRevision)
	require.Equal(t, []string{"r1", "r9"}, got[0].Revisions)

	// A retry keeps the pin.
	again, err := e.client.Fail(ctx, got[0].Lease(), jobs.Failure{Diagnostic: "try again", RetryAfter: -1})
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, again.State)
	require.Equal(t, []string{"r1", "r9"}, again.Revisions)

	hist, err := e.client.History(ctx, id)
	require.NoError(t, err)
	var details []string
	for _, ev := range hist {
		details = append(details, string(ev.From)+">"+string(ev.To)+" "+ev.Detail)
	}
	require.Equal(t, []string{
		">queued ",
		"queued>queued pinned to revisions r9",
		"queued>queued pinned to revisions r1, r9",
		"claimed>queued try again", // the attempt's claim is on this event

	}, details)
	v, err := e.client.Verify(ctx, id)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)

	// Unpinned, any revision may run it; pinning as it is records nothing.
	_, err = e.client.Pin(ctx, []int64{id}, nil)
	require.NoError(t, err)
	n := len(hist) + 1
	_, err = e.client.Pin(ctx, []int64{id}, nil)
	require.NoError(t, err)
	hist, err = e.client.History(ctx, id)
	require.NoError(t, err)
	require.Len(t, hist, n)
	require.Equal(t, "unpinned: any revision may run it", hist[n-1].Detail)
	got, err = e.client.Claim(ctx, "default", jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, got, 1)
}

// Every refusal of a pin names its reason and changes nothing.
func TestPinRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	held := claimAs(t, e, "r1")
	queued, err := e.client.Enqueue(ctx, spec(`{"q": 1}`))
	require.NoError(t, err)

	// Without job.pin.
	before := snapshot(t, e.Pool)
	_, err = clientAs(t, e.API, e.Clock, nobody).Pin(ctx, []int64{queued.Job.ID}, []string{"r1"})
	require.ErrorIs(t, err, db.ErrNotPermitted)
	require.Equal(t, before, snapshot(t, e.Pool))

	nine := make([]string, 9)
	for i := range nine {
		nine[i] = "r" + string(rune('a'+i))
	}
	for _, c := range []struct {
		name      string
		ids       []int64
		revisions []string
		want      error
	}{
		{"no jobs", nil, []string{"r1"}, db.ErrInvalidArgument},
		{"too many jobs", make([]int64, jobs.MaxPinBatch+1), []string{"r1"}, db.ErrInvalidArgument},
		{"a job twice", []int64{queued.Job.ID, queued.Job.ID}, []string{"r1"}, db.ErrInvalidArgument},
		{"an empty revision", []int64{queued.Job.ID}, []string{""}, db.ErrInvalidArgument},
		{"a revision with a space", []int64{queued.Job.ID}, []string{"v1 fix"}, db.ErrInvalidArgument},
		{"a revision with a control character", []int64{queued.Job.ID}, []string{"v1\n"}, db.ErrInvalidArgument},
		{"an oversized revision", []int64{queued.Job.ID}, []string{strings.Repeat("r", jobs.MaxRevisionLen+1)}, db.ErrInvalidArgument},
		{"too many revisions", []int64{queued.Job.ID}, nine, db.ErrInvalidArgument},
		{"an unknown job", []int64{queued.Job.ID, held.ID + 1000}, []string{"r1"}, db.ErrNotFound},
		{"a claimed job", []int64{queued.Job.ID, held.ID}, []string{"r1"}, db.ErrIllegalTransition},
	} {
		_, err := e.client.Pin(ctx, c.ids, c.revisions)
		require.ErrorIs(t, err, c.want, c.name)
		require.Equal(t, before, snapshot(t, e.Pool), c.name)
	}

	// The same refusals from SQL, past the Go checks.
	for _, c := range []struct {
		name string
		sql  string
		want error
	}{
		{"an oversized revision", `SELECT * FROM docket.job_pin($1, ARRAY[repeat('r', 101)], $3, $2)`, db.ErrInvalidArgument},
		{"a NULL revision", `SELECT * FROM docket.job_pin($1, ARRAY[NULL::text], $3, $2)`, db.ErrInvalidArgument},
		{"no revisions", `SELECT * FROM docket.job_pin($1, '{}', $3, $2)`, db.ErrInvalidArgument},
	} {
		_, err := e.API.Exec(ctx, c.sql, []int64{queued.Job.ID}, t0, string(app))
		require.ErrorIs(t, db.Translate(err, "job.pin"), c.want, c.name)
		require.Equal(t, before, snapshot(t, e.Pool), c.name)
	}

	// A hand-written pin of a claimed job is refused by the machine.
	err = testkit.Raw(ctx, e.Pool, ana, t0, `UPDATE docket.jobs SET revisions = '{r1}' WHERE id = $1`, held.ID)
	require.ErrorIs(t, db.Translate(err, "update"), db.ErrIllegalTransition)
	// And so is a claim's revision changed without a new claim.
	err = testkit.Raw(ctx, e.Pool, ana, t0, `UPDATE docket.jobs SET claimed_revision = 'r2' WHERE id = $1`, held.ID)
	require.ErrorIs(t, db.Translate(err, "update"), db.ErrIllegalTransition)
	require.Equal(t, before, snapshot(t, e.Pool))
}

// Two claimants of one queue running different revisions each take only
// the jobs pinned to their own, and either takes the unpinned ones.
func TestTwoRevisionsShareAQueue(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	var old, cur []int64
	for i := range 6 {
		in, err := e.client.Enqueue(ctx, spec(`{"i": `+string(rune('0'+i))+`}`))
		require.NoError(t, err)
		if i%2 == 0 {
			old = append(old, in.Job.ID)
		} else {
			cur = append(cur, in.Job.ID)
		}
	}
	_, err := e.client.Pin(ctx, old, []string{"r1"})
	require.NoError(t, err)
	_, err = e.client.Pin(ctx, cur, []string{"r2"})
	require.NoError(t, err)
	free, err := e.client.Enqueue(ctx, spec(`{"free": true}`))
	require.NoError(t, err)

	take := func(r string) []int64 {
		var ids []int64
		require.NoError(t, db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
			got, err := e.client.ClaimTx(ctx, tx, "default", runs(r))
			for _, j := range got {
				require.Equal(t, r, j.ClaimedRevision)
				ids = append(ids, j.ID)
			}
			return err
		}))
		return ids
	}
	var a, b []int64
	done := make(chan struct{})
	go func() { defer close(done); a = take("r1") }()
	b = take("r2")
	<-done
	all := append(append([]int64{}, a...), b...)
	require.ElementsMatch(t, append(append(append([]int64{}, old...), cur...), free.Job.ID), all)
	for _, id := range old {
		require.Contains(t, a, id)
	}
	for _, id := range cur {
		require.Contains(t, b, id)
	}
}
