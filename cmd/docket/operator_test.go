package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

func TestQueueCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := setup(t,
		testkit.Grants(app, project, access.JobCreate, access.JobClaim),
		testkit.Grants(ana, project, access.QueuePause, access.JobView))
	jc, err := jobs.NewClient(c.Pool, jobs.Config{Project: project, Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	_, err = jc.Enqueue(ctx, jobs.Spec{Kind: "mail.send", Queue: "mail", Payload: []byte(`{}`)})
	require.NoError(t, err)

	r := c.as(t, ana, "queue", "list", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `mail\s+running`, r.stdout)
	r = c.as(t, ana, "queue", "list", project, "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var list struct {
		Queues []map[string]any `json:"queues"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list.Queues, 1)
	for _, field := range []string{"paused_by", "paused_at", "reason", "updated_by", "updated_at", "revision"} {
		require.Contains(t, list.Queues[0], field, "an empty field is there, empty")
	}

	r = c.as(t, ana, "queue", "pause", project, "mail", "--reason", "relay down")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "queue mail of project acme is paused\n", r.stdout)
	got, err := jc.Claim(ctx, "mail", jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Empty(t, got, "a paused queue hands out nothing")

	r = c.as(t, ana, "status")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "queues:        1 paused queue")
	require.Regexp(t, `acme\s+mail\s+user:ana\s+\S+\s+relay down`, r.stdout)

	r = c.as(t, ana, "queues", "show", project, "mail")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `state\s+paused`, r.stdout)
	require.Regexp(t, `1\s+\S+\s+paused\s+user:ana\s+relay down`, r.stdout)

	r = c.as(t, ana, "queue", "resume", project, "mail")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "queue mail of project acme is running\n", r.stdout)
	got, err = jc.Claim(ctx, "mail", jobs.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, got, 1)

	r = c.as(t, app, "queue", "pause", project, "mail")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "needs queue.pause")
}

func TestJobRetryAndBulkCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := setup(t,
		testkit.Grants(app, project, access.JobCreate, access.JobClaim),
		testkit.Grants(ana, project, access.JobRetry, access.JobCancel, access.JobView))
	jc, err := jobs.NewClient(c.Pool, jobs.Config{Project: project, Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	var failed []int64
	for i := range 3 {
		e, err := jc.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: []byte(fmt.Sprint(i))})
		require.NoError(t, err)
		j, ok, err := jc.ClaimID(ctx, e.Job.ID, jobs.ClaimOptions{})
		require.NoError(t, err)
		require.True(t, ok)
		_, err = jc.Fail(ctx, j.Lease(), jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "no"})
		require.NoError(t, err)
		failed = append(failed, e.Job.ID)
	}

	r := c.as(t, ana, "job", "retry", fmt.Sprint(failed[0]))
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^job \d+ is queued\n$`, r.stdout)
	r = c.as(t, ana, "job", "show", fmt.Sprint(failed[0]), "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var shown struct {
		Retries []int64 `json:"retries"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &shown))
	require.Len(t, shown.Retries, 1)
	r = c.as(t, ana, "job", "show", fmt.Sprint(shown.Retries[0]))
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, fmt.Sprintf(`retry of\s+job %d`, failed[0]), r.stdout)

	r = c.as(t, ana, "job", "retry", "--project", project, "--state", "failed")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "2 jobs of project acme would be retried; run again with --yes to retry them\n", r.stdout)
	r = c.as(t, ana, "jobs", "retry", "--project", project, "--state", "failed", "--kind", "billing.invoice", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "2 jobs of project acme retried\n", r.stdout)

	r = c.as(t, ana, "job", "cancel", "--project", project, "--state", "queued")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "3 jobs of project acme would be cancelled; run again with --yes to cancel them\n", r.stdout)
	r = c.as(t, ana, "job", "cancel", "--project", project, "--yes", "--reason", "bad batch")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "3 jobs of project acme cancelled\n", r.stdout)

	requireUsageErrors(t, [][]string{
		{"job", "retry"},
		{"job", "retry", "1", "--project", "acme"},
		{"job", "retry", "--project", "acme", "--state", "queued"},
		{"job", "cancel", "--project", "acme", "--since", "yesterday"},
	})
}

func TestEmptyListNamesTheMissingGrant(t *testing.T) {
	t.Parallel()
	c := setup(t, testkit.Grants(app, project, access.JobCreate))
	r := c.as(t, "user:bo", "job", "list", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no job.view grant on project acme for principal user:bo: grant it with docket grant user:bo acme job.view\n", r.stderr)
	r = c.as(t, "user:bo", "queue", "list", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "no queue.view grant on project acme for principal user:bo")
	require.Equal(t, 1, strings.Count(r.stderr, "\n"))
}

// Every list of a project's things says so when it comes back empty for an
// actor holding none of the capabilities that read it, naming the one to
// grant; one holding another that reads it hears nothing.
func TestEveryEmptyListNamesItsGrant(t *testing.T) {
	t.Parallel()
	c := setup(t, testkit.Grants(vic, project, access.CaseView))
	for _, tc := range []struct {
		args []string
		cap  access.Capability
	}{
		{[]string{"case", "list", project}, access.CaseView},
		{[]string{"lane", "list", project}, access.LaneView},
		{[]string{"wait", "list", project}, access.CaseView},
		{[]string{"dead-letter", "list", project}, access.CaseView},
		{[]string{"schedule", "list", project}, access.ScheduleView},
		{[]string{"task", "list", project}, access.TaskReview},
		{[]string{"plan", "list", project}, access.PlanRun},
		{[]string{"batch", "list", project}, access.BatchRun},
		{[]string{"cases", "list", project, "-o", "json"}, access.CaseView},
		{[]string{"tasks", project}, access.TaskReview},
	} {
		r := c.as(t, "user:bo", tc.args...)
		require.Equal(t, exitOK, r.code, "%v: %s", tc.args, r.stderr)
		require.Equal(t, fmt.Sprintf("no %s grant on project acme for principal user:bo: grant it with docket grant user:bo acme %s\n",
			tc.cap, tc.cap), r.stderr, "%v", tc.args)
	}
	// case.view reads cases, waits, dead letters, tasks, runs and batches:
	// their empty lists are just empty. It does not read jobs or lanes.
	for _, args := range [][]string{{"case", "list", project}, {"wait", "list", project}, {"dead-letter", "list", project},
		{"task", "list", project}, {"plan", "list", project}, {"batch", "list", project}} {
		r := c.as(t, vic, args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		require.Empty(t, r.stderr, "%v", args)
	}
	r := c.as(t, vic, "job", "list", project)
	require.Equal(t, "no job.view grant on project acme for principal user:vic: grant it with docket grant user:vic acme job.view\n", r.stderr)
	r = c.as(t, vic, "lane", "list", project)
	require.Contains(t, r.stderr, "no lane.view grant")
}
