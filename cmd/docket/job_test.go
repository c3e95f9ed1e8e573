package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/retention"
)

func TestJobCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := setup(t,
		testkit.Grants(app, project, access.JobCreate, access.JobClaim),
		// ana claims too, to sweep acme's expired leases.
		testkit.Grants(ana, project, access.JobCancel, access.JobReconcile, access.JobClaim))

	c.Clock.Set(time.Now().UTC().Add(-time.Hour))
	jc, err := jobs.NewClient(c.Pool, jobs.Config{Project: project, Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	var ids []int64
	for i := range 3 {
		e, err := jc.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: []byte(fmt.Sprint(i)), Retry: jobs.RetryPolicy{MaxAttempts: 2}})
		require.NoError(t, err)
		ids = append(ids, e.Job.ID)
	}
	// The third is claimed and its holder lost: its lease ran out an hour ago
	// by the real clock the command uses.
	_, err = jc.Claim(ctx, "default", jobs.ClaimOptions{Limit: 1})
	require.NoError(t, err)

	// A reader without a job grant on acme sees nothing.
	r := c.as(t, "user:bo", "job", "list", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, "\n"), r.stdout)
	r = c.as(t, "user:bo", "job", "show", fmt.Sprint(ids[0]))
	require.Equal(t, 1, r.code)

	r = c.as(t, ana, "job", "list", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 4, strings.Count(r.stdout, "\n"), r.stdout)
	require.Regexp(t, fmt.Sprintf(`%d\s+billing.invoice\s+default\s+claimed\s+1/2`, ids[0]), r.stdout)

	r = c.as(t, ana, "job", "list", "--state", "queued", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 3, strings.Count(r.stdout, "\n"), r.stdout)

	r = c.as(t, ana, "job", "sweep")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("job %d is uncertain\n", ids[0]))
	require.Contains(t, r.stdout, "1 expired leases swept\n")

	r = c.as(t, ana, "job", "reconcile", "--note", "checked the ledger", fmt.Sprint(ids[0]), "succeeded")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("job %d is succeeded\n", ids[0]), r.stdout)

	r = c.as(t, ana, "job", "cancel", "--reason", "customer withdrew", fmt.Sprint(ids[1]))
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("job %d is cancelled\n", ids[1]), r.stdout)

	r = c.as(t, ana, "job", "show", fmt.Sprint(ids[0]))
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `state\s+succeeded`, r.stdout)
	require.Regexp(t, `3\s+\S+\s+uncertain\s+succeeded\s+user:ana\s+1\s+-\s+reconciled: checked the ledger`, r.stdout)
	require.Regexp(t, `2\s+\S+\s+claimed\s+uncertain\s+user:ana\s+1\s+svc:app \S+\s+lease expired`, r.stdout,
		"the event ending the attempt names its claim")
	require.Contains(t, r.stdout, "history verified: 3 events, hash chain intact")

	// Refusals: one line, exit 1, nothing changed.
	for _, args := range [][]string{
		{"--as", string(app), "job", "cancel", fmt.Sprint(ids[2])}, // no job.cancel grant
		{"--as", string(ana), "job", "cancel", fmt.Sprint(ids[0])}, // already succeeded
		{"--as", string(ana), "job", "reconcile", fmt.Sprint(ids[2]), "failed"},
		{"--as", string(ana), "job", "show", "999999"},
	} {
		requireRefused(t, c.run(t, args...), exitError, args)
	}
	j, err := jc.Get(ctx, ids[2])
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, j.State)

	// A wrong command line exits 2 before connecting.
	requireUsageErrors(t, [][]string{
		{"job"},
		{"job", "frob"},
		{"job", "list"},
		{"job", "list", "--limit", "0", "acme"},
		{"job", "show", "x"},
		{"job", "reconcile", "1", "maybe"},
		{"job", "reconcile", "--result", "{", "1", "succeeded"},
		{"job", "sweep", "--limit", "20000"},
	})
}

// TestJobShowOfAPrunedJob: job show of a job a prune removed says so, and
// names the prune, on one line with exit 1.
func TestJobShowOfAPrunedJob(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := setup(t,
		testkit.Grants(app, project, access.JobCreate, access.JobClaim),
		testkit.Grants(ana, project, access.JobCancel, access.RetentionManage, access.RetentionPrune))
	c.Clock.Set(time.Now().UTC().Add(-48 * time.Hour))
	jc, err := jobs.NewClient(c.Pool, jobs.Config{Project: project, Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	e, err := jc.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: []byte(`1`)})
	require.NoError(t, err)
	_, err = jc.Cancel(ctx, e.Job.ID, "not needed")
	require.Error(t, err, "app holds no job.cancel")
	anaJobs, err := jobs.NewClient(c.Pool, jobs.Config{Project: project, Actor: ana, Clock: c.Clock})
	require.NoError(t, err)
	_, err = anaJobs.Cancel(ctx, e.Job.ID, "not needed")
	require.NoError(t, err)
	c.Clock.Set(time.Now().UTC())
	rc, err := retention.NewClient(c.Pool, retention.Config{Actor: ana, Clock: c.Clock})
	require.NoError(t, err)
	p := retention.Defaults
	p.SucceededJobs = 24 * time.Hour
	_, err = rc.Set(ctx, project, p)
	require.NoError(t, err)
	ps, err := rc.Prune(ctx, 10)
	require.NoError(t, err)
	require.Len(t, ps, 1)

	args := []string{"--as", string(ana), "job", "show", fmt.Sprint(e.Job.ID)}
	r := c.run(t, args...)
	requireRefused(t, r, exitError, args)
	require.Contains(t, r.stderr, fmt.Sprintf("job %d was pruned at ", e.Job.ID))
	require.Contains(t, r.stderr, fmt.Sprintf("by prune %d (project acme, by user:ana)", ps[0].ID))
}

// job list --unrunnable lists the jobs pinned to handler revisions no
// deployment runs, and job show names a job's pin.
func TestJobListUnrunnable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := setup(t, testkit.Grants(app, project, access.JobCreate, access.JobClaim, access.JobPin))
	jc, err := jobs.NewClient(c.Pool, jobs.Config{Project: project, Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	var ids []int64
	for i := range 2 {
		e, err := jc.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: []byte(fmt.Sprint(i))})
		require.NoError(t, err)
		ids = append(ids, e.Job.ID)
	}
	require.NoError(t, jc.RegisterDecoders(ctx, "billing@r1", []jobs.Decoder{{Kind: "billing.invoice", Schema: 1, Revision: "r1"}}))
	_, err = jc.Pin(ctx, ids[:1], []string{"r9"})
	require.NoError(t, err)
	_, err = jc.Pin(ctx, ids[1:], []string{"r1"})
	require.NoError(t, err)

	r := c.as(t, app, "job", "list", "--unrunnable", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 2, strings.Count(r.stdout, "\n"), r.stdout)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+billing.invoice\s+default\s+queued`, ids[0]), r.stdout)

	r = c.as(t, app, "job", "show", fmt.Sprint(ids[0]))
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `pinned to revisions\s+r9`, r.stdout)
	require.Regexp(t, `queued\s+queued\s+svc:app\s+0\s+-\s+pinned to revisions r9`, r.stdout)
}

// TestJobShowOfACompletionRecord: job show prints the requested output and
// what the completion record says the worker produced and used.
func TestJobShowOfACompletionRecord(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := setup(t, testkit.Grants(app, project, access.JobCreate, access.JobClaim), testkit.Grants(ana, project, access.JobCancel))
	c.Clock.Set(time.Now().UTC().Add(-time.Hour))
	jc, err := jobs.NewClient(c.Pool, jobs.Config{Project: project, Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	out := jobs.OutputRef{Asset: "poster/42", Kind: "image/png", Root: "renders"}
	e, err := jc.Enqueue(ctx, jobs.Spec{Kind: "media.render", Payload: []byte(`{"poster": 42}`), Output: out,
		Params: []byte(`{"width": 4000}`), Inputs: []string{"src:poster/42", "font:inter"}})
	require.NoError(t, err)
	j, ok, err := jc.ClaimID(ctx, e.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = jc.CompleteWith(ctx, jobs.Completion{Lease: j.Lease(), Record: &jobs.CompletionRecord{
		Output: jobs.OutputRef{Asset: "poster/42", Kind: "image/png"}, Params: []byte(`{"width": 2048}`),
		Inputs: []string{"src:poster/42"}}}, nil)
	require.NoError(t, err)

	r := c.as(t, ana, "job", "show", fmt.Sprint(j.ID))
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `requested output\s+poster/42 \(image/png\) under renders`, r.stdout)
	require.Regexp(t, `produced\s+poster/42 \(image/png\) under renders, recorded by svc:app`, r.stdout)
	require.Regexp(t, `params used\s+\{"width": 2048\}`, r.stdout)
	require.Regexp(t, `inputs used\s+src:poster/42\n`, r.stdout)

	r = c.as(t, ana, "job", "show", fmt.Sprint(j.ID), "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"completion": {`)
	require.Contains(t, r.stdout, `"width": 2048`)
}

// job pin pins queued jobs to handler revisions and unpins them, printing
// each job's pin; job show names it. Refusals change nothing.
func TestJobPin(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := setup(t,
		testkit.Grants(app, project, access.JobCreate, access.JobClaim),
		testkit.Grants(ana, project, access.JobPin, access.JobCancel),
		testkit.Grants("user:bo", project, access.JobCancel))
	jc, err := jobs.NewClient(c.Pool, jobs.Config{Project: project, Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	var ids []int64
	for i := range 3 {
		e, err := jc.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: []byte(fmt.Sprint(i))})
		require.NoError(t, err)
		ids = append(ids, e.Job.ID)
	}
	both := fmt.Sprintf("%d,%d", ids[0], ids[1])

	r := c.as(t, ana, "job", "pin", both, "r1", "r2")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("job %d is pinned to revisions r1, r2\njob %d is pinned to revisions r1, r2\n", ids[0], ids[1]), r.stdout)
	r = c.as(t, ana, "job", "show", fmt.Sprint(ids[1]))
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `pinned to revisions\s+r1, r2\n`, r.stdout)
	require.Regexp(t, `queued\s+queued\s+user:ana\s+0\s+-\s+pinned to revisions r1, r2`, r.stdout)

	r = c.as(t, ana, "job", "pin", "--unpin", fmt.Sprint(ids[0]))
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("job %d is unpinned: any revision may run it\n", ids[0]), r.stdout)
	r = c.as(t, ana, "job", "show", fmt.Sprint(ids[0]))
	require.Equal(t, 0, r.code, r.stderr)
	require.NotRegexp(t, `(?m)^pinned to revisions`, r.stdout)
	require.Regexp(t, `queued\s+queued\s+user:ana\s+0\s+-\s+unpinned: any revision may run it`, r.stdout)
	j, err := jc.Get(ctx, ids[0])
	require.NoError(t, err)
	require.Nil(t, j.Revisions)
	require.Equal(t, jobs.Queued, j.State)

	// Refusals by the database: one line naming why, exit 1, nothing changed.
	r = c.as(t, ana, "job", "cancel", fmt.Sprint(ids[2]))
	require.Equal(t, 0, r.code, r.stderr)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--as", "user:bo", "job", "pin", fmt.Sprint(ids[1]), "r9"}, "job.pin"},
		{[]string{"--as", string(ana), "job", "pin", fmt.Sprint(ids[2]), "r9"}, "cancelled"},
		{[]string{"--as", string(ana), "job", "pin", fmt.Sprintf("%d,999999", ids[1]), "r9"}, "999999"},
	} {
		r := c.run(t, tc.args...)
		requireRefused(t, r, exitError, tc.args)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
	j, err = jc.Get(ctx, ids[1])
	require.NoError(t, err)
	require.Equal(t, []string{"r1", "r2"}, j.Revisions, "the refused pins changed nothing")

	// A wrong command line exits 2 before connecting, naming what is wrong.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"job", "pin"}, `docket job pin: missing ID[,ID...]`},
		{[]string{"job", "pin", "1"}, `docket job pin: missing REVISION (or --unpin)`},
		{[]string{"job", "pin", "0", "r1"}, `docket job pin: ID "0": want a positive job id`},
		{[]string{"job", "pin", "1,x", "r1"}, `docket job pin: ID "x": want a positive job id`},
		{[]string{"job", "pin", "1,,2", "r1"}, `docket job pin: ID "": want a positive job id`},
		{[]string{"job", "pin", "1,1", "r1"}, `docket job pin: ID 1: named twice`},
		{[]string{"job", "pin", strings.Repeat("1,", jobs.MaxPinBatch) + "1", "r1"}, `docket job pin: ID: 1001 jobs is over 1000`},
		{[]string{"job", "pin", "1", "r1", "bad\trev"}, `docket job pin: REVISION "bad\trev": want 1-100 characters`},
		{[]string{"job", "pin", "1", strings.Repeat("r", 101)}, `docket job pin: REVISION "rrr`},
		{[]string{"job", "pin", "1", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"}, `docket job pin: REVISION: 9 revisions is over 8`},
		{[]string{"job", "pin", "--unpin", "1", "r1"}, `docket job pin: REVISION "r1": --unpin takes none`},
		{[]string{"job", "pin", "1", "--unpin=maybe"}, `docket job pin: --unpin "maybe": want true or false`},
	} {
		r := docket(t, unreachable, tc.args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.stderr)
		require.Empty(t, r.stdout, "%v", tc.args)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "%v: one line: %q", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
}
