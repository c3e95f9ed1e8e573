package console

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/lanes"
	"github.com/docket-dev/docket/projects"
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
	requireAll(t, body, `data-paused="true"`, `id="paused-mail"`, "Paused by user:ops", "the mail provider is down",
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

// queueCountShown matches a count of the queues page: its state, the
// queue, and the number (a + after it when the census capped the state).
var queueCountShown = regexp.MustCompile(`<span id="([a-z]+)-([a-z0-9._-]+)" data-state="[a-z]+">(?:<a href="[^"]*">|<span class="zero">)(\d+)(?:</a>|</span>)`)

// queueCountsShown are the counts the queues page in body shows for
// queue, by state.
func queueCountsShown(t *testing.T, body, queue string) map[jobs.State]int {
	t.Helper()
	out := map[jobs.State]int{}
	for _, m := range queueCountShown.FindAllStringSubmatch(body, -1) {
		if m[2] != queue {
			continue
		}
		n, err := strconv.Atoi(m[3])
		require.NoError(t, err)
		out[jobs.State(m[1])] = n
	}
	return out
}

// TestQueuesPageCountsByState: the queues page counts each queue's jobs
// by state for a visitor who may see the project's jobs, whether by
// job.view (vic) or another job capability (ops, by job.cancel and
// job.reconcile), and tells a holder of queue.view alone (bo) that it may
// not see them rather than show every queue with none queued.
func TestQueuesPageCountsByState(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	s.Allow(t, testkit.Grants(testkit.Bo, project, access.QueueView)...)
	ctx := t.Context()
	// Queue ledger: two jobs queued and one claimed.
	work := s.consoleJobsIn(t, app)
	var ledger []int64
	for i := range 3 {
		e, err := work.Enqueue(ctx, jobs.Spec{Kind: "ledger.post", Queue: "ledger", Payload: json.RawMessage(fmt.Sprint(i))})
		require.NoError(t, err)
		ledger = append(ledger, e.Job.ID)
	}
	_, ok, err := work.ClaimID(ctx, ledger[0], jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	census, err := work.Census(ctx, 0)
	require.NoError(t, err)
	inCensus := func(queue string) map[jobs.State]int {
		out := map[jobs.State]int{jobs.Queued: 0, jobs.Claimed: 0}
		for _, c := range census.Cells {
			if c.Queue == queue {
				out[c.State] = c.Jobs
			}
		}
		return out
	}
	listed, err := work.Queues(ctx)
	require.NoError(t, err)
	require.Contains(t, listed, jobs.Queue{Project: project, Name: "ledger"}, "a queue with a job queued is listed")

	for _, who := range []string{"ops", "vic"} {
		status, body := s.as(t, who).get("/console/acme/queues")
		require.Equal(t, http.StatusOK, status, body)
		require.NotContains(t, body, `id="jobs-unseen"`, who)
		require.Equal(t, map[jobs.State]int{jobs.Queued: 2, jobs.Claimed: 1}, queueCountsShown(t, body, "ledger"), who)
		requireAll(t, body, `<span id="queued-ledger" data-state="queued"><a href="/console/acme/jobs?queue=ledger&amp;state=queued">2</a></span> queued`,
			`<span id="claimed-ledger" data-state="claimed"><a href="/console/acme/jobs?queue=ledger&amp;state=claimed">1</a></span> claimed`)
		require.Equal(t, map[jobs.State]int{jobs.Queued: 1, jobs.Claimed: 0, jobs.Failed: 1, jobs.Uncertain: 1},
			queueCountsShown(t, body, "mail"), who)
		for _, q := range listed {
			require.Equal(t, inCensus(q.Name), queueCountsShown(t, body, q.Name), "%s: queue %s as the census counts it", who, q.Name)
		}
	}

	// bo reads the queues, not the jobs: the census shows bo nothing, which
	// the page must not show as nothing queued.
	bo := s.as(t, "bo")
	status, body := bo.get("/console/acme/queues")
	require.Equal(t, http.StatusOK, status, body)
	requireAll(t, body, `<p class="notice" id="jobs-unseen">You may not see this project's jobs`,
		`<section class="queue" id="queue-ledger" data-paused="false">`, `<section class="queue" id="queue-mail" data-paused="false">`)
	require.NotContains(t, body, `id="counts-`)
	require.NotContains(t, body, `id="queued-`, "no queue is shown with none queued")
	for _, q := range listed {
		require.Empty(t, queueCountsShown(t, body, q.Name), "queue %s", q.Name)
	}
	require.NotContains(t, body, `id="pause-`, "bo is offered no pause")

	// A visitor who sees the jobs of a project that has none is shown
	// zeros: vic holds job.create in other, where bo paused queue hold
	// before any work arrived.
	pc, err := projects.NewClient(s.Pool, projects.Config{Actor: ana, Clock: s.Clock})
	require.NoError(t, err)
	_, err = pc.Create(ctx, testkit.Other)
	require.NoError(t, err)
	s.Allow(t, testkit.Grants(vic, testkit.Other, access.JobCreate)...)
	s.Allow(t, testkit.Grants(testkit.Bo, testkit.Other, access.QueuePause)...)
	boOther, err := jobs.NewClient(s.API, jobs.Config{Project: testkit.Other, Actor: testkit.Bo, Clock: s.Clock})
	require.NoError(t, err)
	_, err = boOther.PauseQueue(ctx, "hold", "before the migration")
	require.NoError(t, err)
	status, body = s.as(t, "vic").get("/console/other/queues")
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, `id="jobs-unseen"`)
	require.Equal(t, map[jobs.State]int{jobs.Queued: 0, jobs.Claimed: 0}, queueCountsShown(t, body, "hold"))
	require.Contains(t, body, "Paused by user:bo")
	status, body = bo.get("/console/other/queues")
	require.Equal(t, http.StatusOK, status, body)
	requireAll(t, body, `id="jobs-unseen"`, `<section class="queue" id="queue-hold" data-paused="true">`, `id="resume-hold"`)
	require.NotContains(t, body, `id="counts-hold"`)
}

// TestJobReadersAreJobVisible: the console's jobReaders are the
// capabilities docket.job_visible lets read a project's jobs, each held
// alone, and readsJobs of what heldOn reads answers as the database does.
func TestJobReadersAreJobVisible(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := t.Context()
	ac, _ := testkit.Clients(t, h.Pool, h.Clock, ana)
	caps, err := ac.Capabilities(ctx)
	require.NoError(t, err)
	con, err := newTestHandler(h.API, Config{Projects: []string{project}, Clock: h.Clock})
	require.NoError(t, err)
	for capability := range caps {
		who := access.Actor("user:holds-" + string(capability))
		h.Allow(t, testkit.Grants(who, project, capability)...)
		var visible bool
		require.NoError(t, h.Pool.QueryRow(ctx, `SELECT docket.job_visible($1, $2)`, string(who), project).Scan(&visible))
		require.Equal(t, visible, slices.Contains(jobReaders, capability), "%s", capability)
		held, err := con.heldOn(ctx, visitor{who: who}, project)
		require.NoError(t, err)
		require.Equal(t, visible, readsJobs(held), "%s", capability)
	}
	held, err := con.heldOn(ctx, visitor{who: sam}, project)
	require.NoError(t, err)
	require.False(t, readsJobs(held), "sam holds nothing")
}

// actionSnapshot renders every row an action of the console writes: the
// jobs and their events, the queues and theirs.
func (s consoleSite) actionSnapshot(t *testing.T) string {
	t.Helper()
	return testkit.Snapshot(t, s.Pool, "docket.jobs", "docket.job_events", "docket.queues", "docket.queue_events")
}

// TestActionsStayInTheirProject: ops holds job.retry, job.cancel,
// job.reconcile and queue.pause in acme, and in other only job.view and
// queue.view. Every action on other's jobs and queues is refused, on
// other's URLs and on acme's alike, and changes nothing; other's pages
// offer ops none of them. Then each action's form on acme, posted without
// this browser's token (none, empty, another session's, one character
// off, no cookie, from another site), is refused and changes nothing,
// and the same form with the token is done.
func TestActionsStayInTheirProject(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	ctx := t.Context()
	seed := s.seed
	pc, err := projects.NewClient(s.Pool, projects.Config{Actor: ana, Clock: s.Clock})
	require.NoError(t, err)
	_, err = pc.Create(ctx, testkit.Other)
	require.NoError(t, err)
	s.Allow(t, testkit.Grants(ops, project, access.JobRetry, access.QueuePause)...)
	s.Allow(t, testkit.Grants(ops, testkit.Other, access.JobView, access.QueueView)...)
	s.Allow(t, testkit.Grants(app, testkit.Other, access.JobCreate, access.JobClaim)...)
	s.Allow(t, testkit.Grants(testkit.Bo, testkit.Other, access.QueuePause)...)

	// other's work: a dead, a failed and an uncertain job, two queued on
	// mail, and queue hold paused by bo.
	work, err := jobs.NewClient(s.API, jobs.Config{Project: testkit.Other, Actor: app, Clock: s.Clock})
	require.NoError(t, err)
	enqueue := func(queue string, attempts int) int64 {
		e, err := work.Enqueue(ctx, jobs.Spec{Kind: "mail.send", Queue: queue, Payload: json.RawMessage(`{}`),
			Retry: jobs.RetryPolicy{MaxAttempts: attempts}})
		require.NoError(t, err)
		return e.Job.ID
	}
	fail := func(id int64, class jobs.FailureClass) {
		j, ok, err := work.ClaimID(ctx, id, jobs.ClaimOptions{})
		require.NoError(t, err)
		require.True(t, ok)
		_, err = work.Fail(ctx, j.Lease(), jobs.Failure{Class: class, Diagnostic: "the relay went away"})
		require.NoError(t, err)
	}
	otherDead, otherFailed, otherUncertain := enqueue("mail", 1), enqueue("mail", 3), enqueue("mail", 3)
	fail(otherDead, jobs.ClassRetryable)
	fail(otherFailed, jobs.ClassPermanent)
	fail(otherUncertain, jobs.ClassUncertain)
	otherQueued := enqueue("mail", 3)
	enqueue("mail", 3)
	boOther, err := jobs.NewClient(s.API, jobs.Config{Project: testkit.Other, Actor: testkit.Bo, Clock: s.Clock})
	require.NoError(t, err)
	_, err = boOther.PauseQueue(ctx, "hold", "before the migration")
	require.NoError(t, err)
	// acme's queue hold is paused too, for its resume below.
	_, err = s.consoleJobsIn(t, ops).PauseQueue(ctx, "hold", "before the migration")
	require.NoError(t, err)

	o := s.as(t, "ops")
	otherJob := func(id int64, act string) string { return fmt.Sprintf("/console/other/jobs/%d/%s", id, act) }
	// What other's pages offer ops: its jobs and queues to read, no form.
	status, body := o.get("/console/other/queues")
	require.Equal(t, http.StatusOK, status, body)
	requireAll(t, body, `<section class="queue" id="queue-mail" data-paused="false">`, `<section class="queue" id="queue-hold" data-paused="true">`)
	require.Equal(t, map[jobs.State]int{jobs.Queued: 2, jobs.Claimed: 0, jobs.Failed: 1, jobs.Dead: 1, jobs.Uncertain: 1},
		queueCountsShown(t, body, "mail"), "ops sees other's jobs")
	require.NotContains(t, body, `id="pause-`)
	require.NotContains(t, body, `id="resume-`)
	for _, id := range []int64{otherDead, otherUncertain, otherQueued} {
		status, body = o.get(fmt.Sprintf("/console/other/jobs/%d", id))
		require.Equal(t, http.StatusOK, status, body)
		for _, form := range []string{`id="retry"`, `id="cancel"`, `id="reconcile"`} {
			require.NotContains(t, body, form, "job %d of other", id)
		}
	}
	// Its job lists offer no bulk action ops may not take; acme's offer both.
	for _, list := range []string{"/console/other/jobs", "/console/other/dead", "/console/other/jobs?state=queued",
		"/console/other/jobs?state=failed&queue=mail"} {
		status, body = o.get(list)
		require.Equal(t, http.StatusOK, status, body)
		require.NotContains(t, body, `id="bulk"`, list)
	}
	_, body = o.get("/console/acme/jobs")
	requireAll(t, body, `id="bulk-retry"`, `id="bulk-cancel"`)
	for _, count := range []string{"/console/other/bulk/retry", "/console/other/bulk/cancel"} {
		status, body = o.get(count)
		requireRefusal(t, status, body, http.StatusForbidden, "not-permitted")
	}

	before := s.actionSnapshot(t)
	for _, c := range []struct {
		what, path string
		form       url.Values
		status     int
		reason     string
	}{
		{"retry other's job", otherJob(otherDead, "retry"), url.Values{"confirm": {"yes"}}, http.StatusForbidden, "not-permitted"},
		{"retry other's job under acme", jobPath(otherDead, "retry"), url.Values{"confirm": {"yes"}}, http.StatusNotFound, "not-found"},
		{"cancel other's job", otherJob(otherQueued, "cancel"), url.Values{"reason": {"no"}}, http.StatusForbidden, "not-permitted"},
		{"cancel other's job under acme", jobPath(otherQueued, "cancel"), url.Values{"reason": {"no"}}, http.StatusNotFound, "not-found"},
		{"reconcile other's job", otherJob(otherUncertain, "reconcile"), url.Values{"outcome": {"failed"}}, http.StatusForbidden, "not-permitted"},
		{"reconcile other's job under acme", jobPath(otherUncertain, "reconcile"), url.Values{"outcome": {"failed"}}, http.StatusNotFound, "not-found"},
		{"bulk retry in other", "/console/other/bulk/retry", url.Values{"confirm": {"yes"}, "counted": {"2"}}, http.StatusForbidden, "not-permitted"},
		{"bulk retry of other's failed jobs", "/console/other/bulk/retry", url.Values{"confirm": {"yes"}, "counted": {"1"}, "state": {"failed"}, "queue": {"mail"}},
			http.StatusForbidden, "not-permitted"},
		{"bulk cancel in other", "/console/other/bulk/cancel", url.Values{"confirm": {"yes"}, "counted": {"2"}, "reason": {"no"}}, http.StatusForbidden, "not-permitted"},
		{"bulk cancel of other's mail", "/console/other/bulk/cancel", url.Values{"confirm": {"yes"}, "counted": {"2"}, "queue": {"mail"}},
			http.StatusForbidden, "not-permitted"},
		{"pause other's queue", "/console/other/queues/mail/pause", url.Values{"confirm": {"yes"}, "reason": {"no"}}, http.StatusForbidden, "not-permitted"},
		{"pause a queue of other by name", "/console/other/queues", url.Values{"confirm": {"yes"}, "queue": {"reports"}}, http.StatusForbidden, "not-permitted"},
		{"resume other's queue", "/console/other/queues/hold/resume", url.Values{"confirm": {"yes"}, "reason": {"no"}}, http.StatusForbidden, "not-permitted"},
	} {
		o.get("/console/acme/queues") // the session's token
		resp, body := o.send(c.path, c.form)
		requireRefusal(t, resp.StatusCode, body, c.status, c.reason)
		require.Equal(t, before, s.actionSnapshot(t), c.what)
	}
	for _, id := range []int64{otherDead, otherFailed} {
		retries, err := s.consoleJobsIn(t, ops).Retries(ctx, id)
		require.NoError(t, err)
		require.Empty(t, retries, "job %d of other is not retried", id)
	}

	// Each action's form on acme, as its page would post it but for the token.
	routes := []struct {
		what, path string
		form       url.Values
		done       int
	}{
		{"retry", jobPath(seed.Dead, "retry"), url.Values{"confirm": {"yes"}}, http.StatusSeeOther},
		{"cancel", jobPath(seed.Queued, "cancel"), url.Values{"reason": {"sent twice"}}, http.StatusSeeOther},
		{"reconcile", jobPath(seed.Uncertain, "reconcile"), url.Values{"outcome": {"failed"}, "note": {"the gateway has no record"}}, http.StatusSeeOther},
		{"bulk retry", "/console/acme/bulk/retry", url.Values{"confirm": {"yes"}, "counted": {"3"}}, http.StatusOK},
		{"bulk cancel", "/console/acme/bulk/cancel", url.Values{"confirm": {"yes"}, "counted": {"55"}, "queue": {"bulk"}, "reason": {"a mistake"}}, http.StatusOK},
		{"pause", "/console/acme/queues/mail/pause", url.Values{"confirm": {"yes"}, "reason": {"the provider is down"}}, http.StatusSeeOther},
		{"pause by name", "/console/acme/queues", url.Values{"queue": {"reports"}, "confirm": {"yes"}}, http.StatusSeeOther},
		{"resume", "/console/acme/queues/hold/resume", url.Values{"confirm": {"yes"}, "reason": {"migrated"}}, http.StatusSeeOther},
	}
	o.get("/console/acme/queues")
	token := o.token
	require.Len(t, token, 26)
	elsewhere := s.as(t, "ops") // the same principal in another browser
	elsewhere.get("/console/acme/queues")
	require.Len(t, elsewhere.token, 26)
	require.NotEqual(t, token, elsewhere.token)
	altered := []byte(token)
	if altered[13] == 'A' {
		altered[13] = 'B'
	} else {
		altered[13] = 'A'
	}
	post := func(p *person, path string, form url.Values, extra http.Header) (*http.Response, string) {
		return p.do(http.MethodPost, path, strings.NewReader(form.Encode()), extra)
	}
	with := func(form url.Values, token string) url.Values {
		f := maps.Clone(form)
		f.Set("csrf", token)
		return f
	}
	for _, r := range routes {
		for _, f := range []struct {
			what string
			send func() (*http.Response, string)
		}{
			{"no token", func() (*http.Response, string) { return post(o, r.path, r.form, nil) }},
			{"an empty token", func() (*http.Response, string) { return post(o, r.path, with(r.form, ""), nil) }},
			{"another session's token", func() (*http.Response, string) { return post(o, r.path, with(r.form, elsewhere.token), nil) }},
			{"the token one character off", func() (*http.Response, string) { return post(o, r.path, with(r.form, string(altered)), nil) }},
			{"the token without its cookie", func() (*http.Response, string) { return post(s.as(t, "ops"), r.path, with(r.form, token), nil) }},
			{"the token from another site", func() (*http.Response, string) {
				return post(o, r.path, with(r.form, token), http.Header{"Origin": {"https://evil.example"}})
			}},
		} {
			before := s.actionSnapshot(t)
			resp, body := f.send()
			requireRefusal(t, resp.StatusCode, body, http.StatusForbidden, "csrf")
			require.Equal(t, before, s.actionSnapshot(t), "%s with %s", r.what, f.what)
		}
	}
	for _, r := range routes {
		before := s.actionSnapshot(t)
		resp, body := post(o, r.path, with(r.form, token), nil)
		require.Equal(t, r.done, resp.StatusCode, "%s with the token: %s", r.what, body)
		require.NotEqual(t, before, s.actionSnapshot(t), "%s with the token", r.what)
	}
}
