package console

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/lanes"
)

// queueSnapshot renders what a pause or resume writes.
func (s consoleSite) queueSnapshot(t *testing.T) string {
	t.Helper()
	return testkit.Snapshot(t, s.Pool, "docket.queues", "docket.queue_events")
}

var countShown = regexp.MustCompile(`<strong id="count">(\d+)</strong>`)

// TestConsoleRetriesCancelsAndPauses: ops, holding job.retry, job.cancel
// and queue.pause, retries one dead job, retries and cancels in bulk
// after the count is shown, and pauses and resumes a queue; each act is
// the database's, recorded as user:ops. Unticked, unauthorised, forged or
// malformed, each is refused and changes nothing.
func TestConsoleRetriesCancelsAndPauses(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	s.Allow(t, testkit.Grants(ops, project, access.JobRetry, access.QueuePause)...)
	seed := s.seed
	ctx := t.Context()
	o := s.as(t, "ops")
	api := s.consoleJobsIn(t, ops)

	// One dead job, retried: a new job naming it, shown on both pages.
	status, body := o.get(jobPath(seed.Dead, ""))
	require.Equal(t, http.StatusOK, status, body)
	requireAll(t, body, `<form method="post" action="/console/acme/jobs/`+strconv.FormatInt(seed.Dead, 10)+`/retry" id="retry">`)
	before := s.snapshot(t)
	resp, body := o.send(jobPath(seed.Dead, "retry"), url.Values{})
	requireRefusal(t, resp.StatusCode, body, http.StatusBadRequest, "invalid")
	require.Contains(t, body, "tick the box")
	require.Equal(t, before, s.snapshot(t), "an unticked retry changes nothing")
	resp, body = o.send(jobPath(seed.Dead, "retry"), url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	retries, err := api.Retries(ctx, seed.Dead)
	require.NoError(t, err)
	require.Len(t, retries, 1)
	require.Equal(t, jobPath(retries[0], ""), resp.Header.Get("Location"))
	_, body = o.get(jobPath(retries[0], ""))
	requireAll(t, body, `<span id="state" class="status state-queued">queued</span>`,
		fmt.Sprintf(`<dd id="retry-of"><a href="/console/acme/jobs/%d">job %d</a></dd>`, seed.Dead, seed.Dead),
		`<td>user:ops</td>`, fmt.Sprintf("retry of job %d", seed.Dead))
	_, body = o.get(jobPath(seed.Dead, ""))
	requireAll(t, body, fmt.Sprintf(`<dd id="retried-by"><a href="/console/acme/jobs/%d">job %d</a></dd>`, retries[0], retries[0]),
		`<span id="state" class="status state-dead">dead</span>`)

	// Bulk retry: the count first, then the retries, each recorded as ops's.
	want, err := api.CountToRetry(ctx, jobs.BulkFilter{})
	require.NoError(t, err)
	require.Positive(t, want)
	status, body = o.get("/console/acme/jobs")
	require.Equal(t, http.StatusOK, status)
	requireAll(t, body, `<a id="bulk-retry" href="/console/acme/bulk/retry">`, `<a id="bulk-cancel" href="/console/acme/bulk/cancel">`)
	before = s.snapshot(t)
	status, body = o.get("/console/acme/bulk/retry")
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, strconv.FormatInt(want, 10), countShown.FindStringSubmatch(body)[1])
	require.Equal(t, before, s.snapshot(t), "counting changes nothing")
	resp, body = o.send("/console/acme/bulk/retry", url.Values{"counted": {strconv.FormatInt(want, 10)}})
	requireRefusal(t, resp.StatusCode, body, http.StatusBadRequest, "invalid")
	require.Equal(t, before, s.snapshot(t), "an unticked bulk retry changes nothing")
	resp, body = o.send("/console/acme/bulk/retry", url.Values{"counted": {strconv.FormatInt(want, 10)}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, fmt.Sprintf(`<strong id="acted">%d</strong>`, want))
	require.NotContains(t, body, "what matched changed")
	left, err := api.CountToRetry(ctx, jobs.BulkFilter{})
	require.NoError(t, err)
	require.Zero(t, left)
	var actors []string
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT array_agg(DISTINCT e.actor ORDER BY e.actor) FROM docket.jobs j
		JOIN docket.job_events e ON e.job_id = j.id AND e.seq = 1 WHERE j.retry_of IS NOT NULL`).Scan(&actors))
	require.Equal(t, []string{string(ops)}, actors, "every retry's first event is ops's")
	_, body = o.get("/console/acme/bulk/retry")
	require.Contains(t, body, `id="bulk-none"`)

	// Bulk cancel of queue bulk's queued jobs.
	inBulk, err := api.CountToCancel(ctx, jobs.BulkFilter{Queue: "bulk"})
	require.NoError(t, err)
	require.EqualValues(t, len(seed.Bulk), inBulk)
	_, body = o.get("/console/acme/bulk/cancel?queue=bulk")
	require.Equal(t, strconv.FormatInt(inBulk, 10), countShown.FindStringSubmatch(body)[1])
	resp, body = o.send("/console/acme/bulk/cancel", url.Values{"queue": {"bulk"}, "counted": {strconv.FormatInt(inBulk, 10)},
		"confirm": {"yes"}, "reason": {"the import was a mistake"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, fmt.Sprintf(`<strong id="acted">%d</strong>`, inBulk))
	j, err := api.Get(ctx, seed.Bulk[0])
	require.NoError(t, err)
	require.Equal(t, jobs.Cancelled, j.State)
	require.Contains(t, j.Diagnostic, "the import was a mistake")

	// Pause and resume queue mail: recorded with who and why.
	status, body = o.get("/console/acme/queues")
	require.Equal(t, http.StatusOK, status, body)
	requireAll(t, body, `<section class="queue" id="queue-mail" data-paused="false">`, `id="pause-mail"`)
	resp, body = o.send("/console/acme/queues/mail/pause", url.Values{"confirm": {"yes"}, "reason": {"the mail provider is down"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/console/acme/queues#queue-mail", resp.Header.Get("Location"))
	_, body = o.get("/console/acme/queues")
	requireAll(t, body, `data-paused="true"`, `id="paused-mail"`, "paused by user:ops", "the mail provider is down",
		`<td>paused</td><td>user:ops</td>`, `id="resume-mail"`)
	qs, err := s.consoleJobsIn(t, ops).Queues(ctx)
	require.NoError(t, err)
	require.Equal(t, "mail", queueNamed(qs, "mail").Name, "queue mail is listed")
	require.True(t, queueNamed(qs, "mail").Paused)
	resp, body = o.send("/console/acme/queues/mail/resume", url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	qs, err = s.consoleJobsIn(t, ops).Queues(ctx)
	require.NoError(t, err)
	require.False(t, queueNamed(qs, "mail").Paused)

	// A queue with no work yet is paused by name, and listed from then on.
	resp, body = o.send("/console/acme/queues", url.Values{"queue": {"reports"}, "confirm": {"yes"}, "reason": {"before the quarter closes"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/console/acme/queues#queue-reports", resp.Header.Get("Location"))
	_, body = o.get("/console/acme/queues")
	requireAll(t, body, `<section class="queue" id="queue-reports" data-paused="true">`, "before the quarter closes")
	resp, body = o.send("/console/acme/queues/reports/resume", url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)

	// What is refused changes nothing.
	jobsBefore, queuesBefore := s.snapshot(t), s.queueSnapshot(t)
	for _, c := range []struct {
		who, path string
		form      url.Values
		status    int
		reason    string
	}{
		{"ops", "/console/acme/queues/mail/pause", url.Values{}, http.StatusBadRequest, "invalid"},
		{"ops", "/console/acme/queues", url.Values{"confirm": {"yes"}}, http.StatusBadRequest, "invalid"},
		{"ops", "/console/acme/queues", url.Values{"confirm": {"yes"}, "queue": {"no such queue!"}}, http.StatusBadRequest, "invalid"},
		{"vic", "/console/acme/queues", url.Values{"confirm": {"yes"}, "queue": {"reports"}}, http.StatusForbidden, "not-permitted"},
		{"ops", "/console/acme/queues/mail/stop", url.Values{"confirm": {"yes"}}, http.StatusNotFound, "not-found"},
		{"ops", "/console/acme/queues/Mail%20Box/pause", url.Values{"confirm": {"yes"}}, http.StatusBadRequest, "invalid"},
		{"ops", "/console/acme/queues/mail/pause", url.Values{"confirm": {"yes"}, "reason": {strings.Repeat("r", consoleMaxNote+1)}}, http.StatusBadRequest, "invalid"},
		{"ops", "/console/acme/bulk/explode", url.Values{"confirm": {"yes"}, "counted": {"1"}}, http.StatusNotFound, "not-found"},
		{"ops", "/console/acme/bulk/retry", url.Values{"confirm": {"yes"}, "counted": {"1"}, "state": {"queued"}}, http.StatusBadRequest, "invalid"},
		{"ops", "/console/acme/bulk/retry", url.Values{"confirm": {"yes"}, "counted": {"x"}}, http.StatusBadRequest, "invalid"},
		{"ops", "/console/acme/bulk/cancel", url.Values{"confirm": {"yes"}, "counted": {"1"}, "kind": {"Not A Kind"}}, http.StatusBadRequest, "invalid"},
		{"ops", "/console/acme/bulk/retry", url.Values{"confirm": {"yes"}, "counted": {"1"}, "csrf": {""}}, http.StatusForbidden, "csrf"},
		// Another project's: ops holds nothing there.
		{"ops", "/console/other/bulk/cancel", url.Values{"confirm": {"yes"}, "counted": {"1"}}, http.StatusForbidden, "not-permitted"},
		{"ops", "/console/other/queues/mail/pause", url.Values{"confirm": {"yes"}}, http.StatusForbidden, "not-permitted"},
		// vic views only.
		{"vic", "/console/acme/bulk/cancel", url.Values{"confirm": {"yes"}, "counted": {"1"}}, http.StatusForbidden, "not-permitted"},
		{"vic", "/console/acme/bulk/retry", url.Values{"confirm": {"yes"}, "counted": {"1"}}, http.StatusForbidden, "not-permitted"},
		{"vic", "/console/acme/queues/mail/pause", url.Values{"confirm": {"yes"}}, http.StatusForbidden, "not-permitted"},
		{"vic", jobPath(seed.Failed, "retry"), url.Values{"confirm": {"yes"}}, http.StatusForbidden, "not-permitted"},
	} {
		p := s.as(t, c.who)
		p.get("/console/acme/jobs") // the session's token
		resp, body := p.send(c.path, c.form)
		requireRefusal(t, resp.StatusCode, body, c.status, c.reason)
		require.Equal(t, jobsBefore, s.snapshot(t), "%s %s", c.who, c.path)
		require.Equal(t, queuesBefore, s.queueSnapshot(t), "%s %s", c.who, c.path)
	}
	vicAt := s.as(t, "vic")
	status, body = vicAt.get("/console/acme/bulk/retry")
	requireRefusal(t, status, body, http.StatusForbidden, "not-permitted")
	status, body = vicAt.get("/console/acme/queues")
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, `id="pause-`, "vic is offered no pause")
	_, body = vicAt.get(jobPath(seed.Failed, ""))
	require.NotContains(t, body, `id="retry"`, "vic is offered no retry")
}

func queueNamed(qs []jobs.Queue, name string) jobs.Queue {
	for _, q := range qs {
		if q.Name == name {
			return q
		}
	}
	return jobs.Queue{}
}

// consoleJobsIn is a jobs client of acme acting as actor.
func (c harness) consoleJobsIn(t *testing.T, actor access.Actor) *jobs.Client {
	t.Helper()
	cl, err := jobs.NewClient(c.API, jobs.Config{Project: project, Actor: actor, Clock: c.Clock})
	require.NoError(t, err)
	return cl
}

// TestLanesPage: a lane viewer sees each lane's work, review and merge
// axes, and a lane's page with its history; a lane of another project is
// not found under this one, and somebody holding nothing sees none.
func TestLanesPage(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	const conductor access.Actor = "svc:conductor"
	s.Allow(t, testkit.Grants(ana, project, access.QuorumCreate)...)
	ctx := t.Context()
	admin, err := lanes.NewClient(s.API, lanes.Config{Actor: ana, Clock: s.Clock})
	require.NoError(t, err)
	q, err := admin.CreateQuorum(ctx, lanes.QuorumSpec{Project: project, Name: "web", Conductor: conductor})
	require.NoError(t, err)
	cond, err := lanes.NewClient(s.API, lanes.Config{Actor: conductor, Clock: s.Clock})
	require.NoError(t, err)
	l, err := cond.Create(ctx, lanes.Spec{Quorum: q.ID, Name: "login", Branch: "feature/login", Assignee: "user:ann", Task: "WEB-7"})
	require.NoError(t, err)
	_, err = cond.SetState(ctx, l.ID, lanes.InProgress, "started")
	require.NoError(t, err)
	_, err = cond.Submit(ctx, l.ID, "ready")
	require.NoError(t, err)

	vicAt := s.as(t, "vic")
	status, body := vicAt.get("/console/acme/lanes")
	require.Equal(t, http.StatusOK, status, body)
	requireAll(t, body, fmt.Sprintf(`<tr id="lane-%d" data-state="in_progress" data-review="submitted">`, l.ID),
		`<code>feature/login</code>`, `<td>user:ann</td>`, `<span class="status review-submitted">submitted</span>`)
	status, body = vicAt.get(fmt.Sprintf("/console/acme/lanes/%d", l.ID))
	require.Equal(t, http.StatusOK, status, body)
	requireAll(t, body, "Lane login", "not merged", "<td>review</td><td>none</td><td>submitted</td><td>svc:conductor</td><td>ready</td>")
	status, body = vicAt.get(fmt.Sprintf("/console/other/lanes/%d", l.ID))
	requireRefusal(t, status, body, http.StatusNotFound, "not-found")
	status, body = vicAt.get("/console/acme/lanes/999999")
	requireRefusal(t, status, body, http.StatusNotFound, "not-found")
	status, body = vicAt.get("/console/acme/lanes?after=x")
	requireRefusal(t, status, body, http.StatusBadRequest, "invalid")
	status, body = s.as(t, "sam").get("/console/acme/lanes")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `id="no-lanes"`)
}
