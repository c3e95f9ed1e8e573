package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/consoletest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/retention"
)

// The console's cast: svc:app does the work of acme and svc:inbox delivers
// its messages; user:ops operates it, reconciling and cancelling jobs and
// viewing its cases and schedules; user:vic only views. user:sam holds
// nothing.
const ops = testkit.Ops

// jobView is the capability that shows jobs and nothing more, once docket
// has it.
const jobView access.Capability = "job.view"

// consoleSeed is what setupConsole made in acme.
type consoleSeed = consoletest.Seeded

// consoleSite is a database seeded with a bit of everything the console
// shows, served by docket serve's handler on the API's login.
type consoleSite struct {
	harness
	seed consoleSeed
	// viewsJobs says vic was given job.view; without it, vic sees jobs by
	// job.create, which grants no reconcile or cancel either.
	viewsJobs bool
	// queries counts the statements the handler's pool was asked to run.
	queries *atomic.Int64
	url     string
}

func setupConsole(t *testing.T) consoleSite {
	t.Helper()
	ctx := t.Context()
	h := setup(t,
		testkit.Grants(app, project, access.JobCreate, access.JobClaim, access.CaseAdmit, access.ScheduleManage,
			access.PlanRun, access.BatchRun),
		testkit.Grants(inbox, project, access.MessageDeliver, access.JobCreate),
		testkit.Grants(sweeper, project, access.CaseSweep),
		testkit.Grants(ops, project, access.JobReconcile, access.JobCancel, access.CaseView, access.ScheduleView, access.LaneView),
		testkit.Grants(vic, project, access.CaseView, access.ScheduleView, access.LaneView))
	s := consoleSite{harness: h}
	ac, _ := testkit.Clients(t, h.Pool, h.Clock, ana)
	caps, err := ac.Capabilities(ctx)
	require.NoError(t, err)
	if _, ok := caps[jobView]; ok {
		s.viewsJobs = true
		h.Allow(t, testkit.Grants(vic, project, jobView)...)
	} else {
		h.Allow(t, testkit.Grants(vic, project, access.JobCreate)...)
	}
	s.seed = consoletest.Seed(t, h.Env)
	pool := &countingPool{Pool: h.API, n: new(atomic.Int64)}
	s.queries = pool.n
	handler, err := newTestHandler(pool, Config{Projects: []string{project, testkit.Other}, Clock: h.Clock,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// as is a person at the console signed in by the proxy as name.
func (s consoleSite) as(t *testing.T, name string) *person {
	return site{url: s.url}.as(t, name)
}

// snapshot renders what a job's reconcile or cancel writes.
func (s consoleSite) snapshot(t *testing.T) string {
	t.Helper()
	return testkit.Snapshot(t, s.Pool, "docket.jobs(id, state, diagnostic, updated_at)", "docket.job_events(job_id, seq, to_state)")
}

func jobPath(id int64, act string) string {
	if act == "" {
		return fmt.Sprintf("/console/acme/jobs/%d", id)
	}
	return fmt.Sprintf("/console/acme/jobs/%d/%s", id, act)
}

// countingPool counts the statements and transactions asked of its pool.
type countingPool struct {
	db.Pool
	n *atomic.Int64
}

func (p *countingPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p.n.Add(1)
	return p.Pool.Exec(ctx, sql, args...)
}

func (p *countingPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	p.n.Add(1)
	return p.Pool.Query(ctx, sql, args...)
}

func (p *countingPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	p.n.Add(1)
	return p.Pool.QueryRow(ctx, sql, args...)
}

func (p *countingPool) Begin(ctx context.Context) (pgx.Tx, error) {
	p.n.Add(1)
	return p.Pool.Begin(ctx)
}

// requireAll requires body to hold each of want.
func requireAll(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		require.Contains(t, body, w)
	}
}

// TestPages: each page of the console shows an operator what the
// seeded project holds, reading as them.
func TestPages(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	seed := s.seed
	o := s.as(t, "ops")
	get := func(path string) string {
		t.Helper()
		status, body := o.get(path)
		require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
		require.Contains(t, body, `<strong id="who">user:ops</strong>`)
		return body
	}

	// The census: queue by state, each count a link to what it counts.
	body := get("/console/")
	census := body[strings.Index(body, `id="census-acme"`):]
	census = census[:strings.Index(census, "</table>")]
	mail := census[strings.Index(census, `data-queue="mail"`):]
	mail = mail[:strings.Index(mail, "</tr>")]
	requireAll(t, mail,
		`<td class="num" data-state="queued"><a href="/console/acme/jobs?queue=mail&amp;state=queued">1</a></td>`,
		`<td class="num" data-state="failed"><a href="/console/acme/jobs?queue=mail&amp;state=failed">1</a></td>`,
		`<td class="num" data-state="uncertain"><a href="/console/acme/jobs?queue=mail&amp;state=uncertain">1</a></td>`,
		`<td class="num" data-state="claimed"><span class="zero">0</span></td>`,
		`<td class="num">3</td>`)
	billing := census[strings.Index(census, `data-queue="billing"`):]
	billing = billing[:strings.Index(billing, "</tr>")]
	for _, state := range []string{"succeeded", "dead", "uncertain", "claimed"} {
		require.Contains(t, billing, fmt.Sprintf(`data-state="%s"><a href="/console/acme/jobs?queue=billing&amp;state=%s">1</a>`, state, state))
	}
	require.Contains(t, census, `data-queue="bulk"`)
	require.Contains(t, census, `<a href="/console/acme/jobs?state=uncertain">2</a>`, "the total of uncertain jobs")
	// The other project served, in which ops holds no grant, is not shown.
	require.NotContains(t, body, `id="project-other"`)

	// The job list: filters, and pages by id.
	body = get("/console/acme/jobs?queue=billing")
	for _, id := range []int64{seed.Succeeded, seed.Dead, seed.Uncertain, seed.Claimed} {
		require.Contains(t, body, fmt.Sprintf(`<tr id="job-%d"`, id))
	}
	require.NotContains(t, body, fmt.Sprintf(`<tr id="job-%d"`, seed.Queued))
	require.NotContains(t, body, `id="next"`)
	body = get("/console/acme/jobs?state=uncertain&queue=mail")
	require.Contains(t, body, fmt.Sprintf(`<tr id="job-%d" data-state="uncertain">`, seed.UncertainMail))
	require.Equal(t, 1, strings.Count(body, `<tr id="job-`))
	require.Contains(t, body, `<option value="uncertain" selected>uncertain</option>`)
	body = get("/console/acme/jobs?queue=bulk")
	require.Equal(t, consoleRows, strings.Count(body, `<tr id="job-`))
	require.Contains(t, body, fmt.Sprintf(`<tr id="job-%d"`, seed.Bulk[54]), "newest first")
	next := regexp.MustCompile(`<a id="next" href="([^"]+)">`).FindStringSubmatch(body)
	require.NotNil(t, next, body)
	require.Equal(t, fmt.Sprintf("/console/acme/jobs?before=%d&amp;queue=bulk", seed.Bulk[5]), next[1])
	body = get(strings.ReplaceAll(next[1], "&amp;", "&"))
	require.Equal(t, 5, strings.Count(body, `<tr id="job-`))
	require.Contains(t, body, fmt.Sprintf(`<tr id="job-%d"`, seed.Bulk[0]))
	require.NotContains(t, body, `id="next"`)

	// Uncertain jobs, with the forms ops's grants allow; dead jobs, final.
	body = get("/console/acme/uncertain")
	require.Equal(t, 2, strings.Count(body, `<tr id="job-`))
	requireAll(t, body, "the payment gateway hung up mid-request", "the relay went away",
		fmt.Sprintf(`<form method="post" action="/console/acme/jobs/%d/reconcile" class="settle" id="reconcile-%d">`, seed.Uncertain, seed.Uncertain),
		fmt.Sprintf(`<form method="post" action="/console/acme/jobs/%d/cancel" class="settle" id="cancel-%d">`, seed.Uncertain, seed.Uncertain),
		`<option value="succeeded">succeeded</option><option value="failed">failed</option><option value="queued">queued</option>`)
	body = get("/console/acme/dead")
	require.Equal(t, 1, strings.Count(body, `<tr id="job-`))
	requireAll(t, body, fmt.Sprintf(`<tr id="job-%d" data-state="dead">`, seed.Dead), "the ledger timed out", "Dead is final")
	require.NotContains(t, body, "<form method=\"post\"")

	// A job: its facts, its history, whether the history verifies, and what
	// may be done with it. The payload is escaped.
	body = get(jobPath(seed.Uncertain, ""))
	requireAll(t, body, `<span id="state" class="status state-uncertain">uncertain</span>`,
		`<dd id="kind">billing.invoice`, `<dd id="attempts">1 of 3</dd>`,
		`<p class="verified" id="verified">History verified: 2 events, hash chain intact.</p>`,
		`<td>claimed</td><td>uncertain</td><td>svc:app</td><td>1</td><td class="claim">svc:app, `,
		`id="reconcile-succeeded"`, `id="cancel-job"`, `&#34;remark&#34;: &#34;&lt;b&gt;bold&lt;/b&gt;&#34;`)
	require.NotContains(t, body, "<b>bold</b>")
	body = get(jobPath(seed.Claimed, ""))
	requireAll(t, body, `<dd id="held-by">svc:app until`, `id="cancel-job"`)
	require.NotContains(t, body, `id="reconcile"`, "only an uncertain job is reconciled")
	body = get(jobPath(seed.Succeeded, ""))
	require.NotContains(t, body, `id="act"`, "nothing to do with a finished job")
	require.Contains(t, body, `<p class="notice" id="no-completion-record">No completion record`, "it was completed without one")
	require.NotContains(t, body, `id="completion-record"`)

	// A case: its keys, obligations and waits.
	body = get(fmt.Sprintf("/console/acme/cases/%d", seed.Case.ID))
	requireAll(t, body, `<dd id="kind">supplier.switch</dd>`, `<td>document</td><td><code>DOC-1</code></td>`,
		fmt.Sprintf(`<tr id="obligation-%d" data-state="pending"><td class="num">%d</td><td>confirm-switch</td>`, seed.Obligation.ID, seed.Obligation.ID),
		"3d00h00m", "supplier.escalate",
		fmt.Sprintf(`<tr id="wait-%d" data-status="waiting">`, seed.Wait.ID), "<td>supplier-ack</td>",
		"<code>document:DOC-1</code>", "2d00h00m", `<td class="on-arrival">supplier.acked</td><td class="on-timeout">supplier.chase</td>`)
	body = get("/console/acme/cases")
	require.Contains(t, body, fmt.Sprintf(`<tr id="case-%d">`, seed.Case.ID))
	body = get("/console/acme/waits")
	requireAll(t, body, fmt.Sprintf(`<tr id="wait-%d" data-status="waiting">`, seed.Wait.ID),
		fmt.Sprintf(`<a href="/console/acme/cases/%d">%d</a>`, seed.Case.ID, seed.Case.ID))

	// Dead letters: the keys, never the payload.
	body = get("/console/acme/dead-letters")
	requireAll(t, body, fmt.Sprintf(`<tr id="letter-%d">`, seed.Letter.ID), "<td>supplier:4711</td>", "<code>m-lost</code>",
		"<code>document:DOC-404</code>")
	require.NotContains(t, body, "hunter2")
	require.NotContains(t, body, "iban")

	// Schedules and their next runs, across Berlin's hours.
	body = get("/console/acme/schedules")
	require.Contains(t, body, fmt.Sprintf(`<a href="/console/acme/schedules/%d">nightly</a>`, seed.Schedule.ID))
	body = get(fmt.Sprintf("/console/acme/schedules/%d", seed.Schedule.ID))
	requireAll(t, body, `<code id="cron">30 2 * * *</code> in Europe/Berlin`, "<th>Local (Europe/Berlin)</th>",
		`<td>2026-11-03 02:30</td><td>0</td><td><time datetime="2026-11-03T01:30:00Z">`)
	require.Equal(t, consolePreview, strings.Count(body[strings.Index(body, `id="next-runs"`):strings.Index(body, "Runs made")], "<tr><td>"))

	// A run of a plan with its steps' census; a batch with its census.
	body = get("/console/acme/runs")
	require.Contains(t, body, fmt.Sprintf(`<tr id="run-%d" data-status="running">`, seed.Run.ID))
	body = get(fmt.Sprintf("/console/acme/runs/%d", seed.Run.ID))
	requireAll(t, body, `<span class="status" id="status" data-live>running</span>`, `<td class="num" data-state="admitted">1</td>`,
		`<tr id="step-reserve" data-state="admitted">`, "<td>stock.release</td>", seed.Run.Digest,
		`<tr id="step-charge" data-state="waiting"><td class="num">–</td><td>charge</td><td>billing.charge</td>`, "after reserve")
	body = get("/console/acme/batches")
	requireAll(t, body, fmt.Sprintf(`<tr id="batch-%d" data-status="running">`, seed.Batch.ID), "nightly-invoices",
		`<td class="num">2</td><td class="num">2</td><td class="num">0</td>`)
	body = get(fmt.Sprintf("/console/acme/batches/%d", seed.Batch.ID))
	requireAll(t, body, "<h1 id=\"title\">Batch nightly-invoices", `<tr data-status="reserved"><td><code>k1</code></td>`,
		`<tr data-status="reserved"><td><code>k2</code></td>`)
}

// TestRefusals: ids, projects and filters the console does not know
// are refused with a page that says so, and so is anything sam, who holds
// nothing, asks to see.
func TestRefusals(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	o := s.as(t, "ops")
	for _, path := range []string{
		"/console/nowhere/jobs", "/console/Acme/jobs",
		"/console/acme/jobs/abc", "/console/acme/jobs/0", "/console/acme/jobs/01", "/console/acme/jobs/-1",
		"/console/acme/jobs/9223372036854775808", "/console/acme/jobs/999999",
		fmt.Sprintf("/console/other/jobs/%d", s.seed.Queued),
		"/console/acme/cases/999999", fmt.Sprintf("/console/other/cases/%d", s.seed.Case.ID),
		"/console/acme/schedules/999999", "/console/acme/runs/999999", "/console/acme/batches/999999",
	} {
		status, body := o.get(path)
		requireRefusal(t, status, body, http.StatusNotFound, "not-found")
	}
	for _, path := range []string{
		"/console/acme/jobs?state=frozen", "/console/acme/jobs?queue=%00", "/console/acme/jobs?kind=" + strings.Repeat("k", 300),
		"/console/acme/jobs?before=x", "/console/acme/jobs?before=-3", "/console/acme/cases?status=ajar",
		"/console/acme/cases?after=1.5", "/console/acme/dead-letters?before=0", "/console/acme/batches?after=%1b",
	} {
		status, body := o.get(path)
		requireRefusal(t, status, body, http.StatusBadRequest, "invalid")
	}
	status, body := o.get("/console/acme/jobs?state=frozen")
	requireRefusal(t, status, body, http.StatusBadRequest, "invalid")
	require.Contains(t, body, "state: want one of queued, claimed, succeeded, failed, dead, uncertain, cancelled")

	// sam sees no jobs, cases, runs or batches, and no job page.
	sam := s.as(t, "sam")
	status, body = sam.get("/console/")
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, body, `id="project-acme"`, "sam holds no grant in acme")
	for path, empty := range map[string]string{
		"/console/acme/jobs": `id="no-jobs"`, "/console/acme/uncertain": `id="no-jobs"`, "/console/acme/cases": "No cases you may see",
		"/console/acme/runs": `<p class="empty" id="run-list">`, "/console/acme/batches": `<p class="empty" id="batch-list">`,
		"/console/acme/dead-letters": `<p class="empty" id="letters">`, "/console/acme/schedules": "No schedules you may see",
	} {
		status, body := sam.get(path)
		require.Equal(t, http.StatusOK, status, path)
		require.Contains(t, body, empty, path)
		require.NotContains(t, body, `id="next"`, path)
	}
	status, body = sam.get(jobPath(s.seed.Uncertain, ""))
	requireRefusal(t, status, body, http.StatusNotFound, "not-found")
	require.NotContains(t, body, "billing.invoice")

	// Nobody signed in: 401, as for the worklist.
	status, body = s.as(t, "").get("/console/")
	requireRefusal(t, status, body, http.StatusUnauthorized, "sign-in")
}

// TestConsoleActs: ops reconciles and cancels from the console; each act
// lands on the job's page, whose history shows it. What the database
// refuses is a page that says why, and changes nothing.
func TestConsoleActs(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	seed := s.seed
	o := s.as(t, "ops")
	o.get("/console/acme/uncertain")

	resp, body := o.do(http.MethodPost, jobPath(seed.Uncertain, "reconcile"),
		strings.NewReader(url.Values{"csrf": {o.token}, "outcome": {"succeeded"}, "note": {"the gateway's log shows it paid"}}.Encode()), nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, jobPath(seed.Uncertain, ""), resp.Header.Get("Location"))
	_, body = o.get(jobPath(seed.Uncertain, ""))
	requireAll(t, body, `<span id="state" class="status state-succeeded">succeeded</span>`,
		`<td>uncertain</td><td>succeeded</td><td>user:ops</td>`, "the gateway&#39;s log shows it paid",
		"History verified: 3 events, hash chain intact.")

	cancel := func(id int64, reason string) (int, string) {
		resp, body := o.do(http.MethodPost, jobPath(id, "cancel"), strings.NewReader(url.Values{"csrf": {o.token}, "reason": {reason}}.Encode()), nil)
		return resp.StatusCode, body
	}
	status, body := cancel(seed.Queued, "the customer withdrew")
	require.Equal(t, http.StatusSeeOther, status, body)
	j, err := s.consoleJobs(t, ops).Get(t.Context(), seed.Queued)
	require.NoError(t, err)
	require.Equal(t, jobs.Cancelled, j.State)
	require.Equal(t, "cancelled: the customer withdrew", j.Diagnostic)

	unchanged := func(what string, act func() (int, string), wantStatus int, reason string) string {
		t.Helper()
		before := s.snapshot(t)
		status, body := act()
		requireRefusal(t, status, body, wantStatus, reason)
		require.Equal(t, before, s.snapshot(t), "%s changed nothing", what)
		return body
	}
	post := func(id int64, act string, form url.Values) func() (int, string) {
		return func() (int, string) {
			form.Set("csrf", o.token)
			resp, body := o.do(http.MethodPost, jobPath(id, act), strings.NewReader(form.Encode()), nil)
			return resp.StatusCode, body
		}
	}
	body = unchanged("a second reconcile", post(seed.Uncertain, "reconcile", url.Values{"outcome": {"failed"}}), http.StatusConflict, "changed")
	require.Contains(t, body, "Not in a state for that")
	unchanged("a reconcile of a claimed job", post(seed.Claimed, "reconcile", url.Values{"outcome": {"failed"}}), http.StatusConflict, "changed")
	unchanged("a cancel of a dead job", post(seed.Dead, "cancel", url.Values{}), http.StatusConflict, "changed")
	body = unchanged("an unknown outcome", post(seed.UncertainMail, "reconcile", url.Values{"outcome": {"maybe"}}), http.StatusBadRequest, "invalid")
	require.Contains(t, body, "outcome: choose succeeded, failed or queued")
	unchanged("a long note", post(seed.UncertainMail, "reconcile", url.Values{"outcome": {"failed"}, "note": {strings.Repeat("x", consoleMaxNote+1)}}),
		http.StatusBadRequest, "invalid")
	unchanged("a job of another project's path", func() (int, string) {
		resp, body := o.do(http.MethodPost, fmt.Sprintf("/console/other/jobs/%d/cancel", seed.UncertainMail),
			strings.NewReader(url.Values{"csrf": {o.token}}.Encode()), nil)
		return resp.StatusCode, body
	}, http.StatusNotFound, "not-found")
	unchanged("an unknown job", post(999999, "cancel", url.Values{}), http.StatusNotFound, "not-found")
	// GET is no way to act.
	status, body = o.get(jobPath(seed.UncertainMail, "cancel"))
	requireRefusal(t, status, body, http.StatusNotFound, "not-found")
}

// consoleJobs is a jobs client of no project acting as actor, on the
// harness's API login and clock.
func (c harness) consoleJobs(t *testing.T, actor access.Actor) *jobs.Client {
	t.Helper()
	cl, err := jobs.NewClient(c.API, jobs.Config{Actor: actor, Clock: c.Clock})
	require.NoError(t, err)
	return cl
}

// TestConsoleReader: vic, who holds view grants only, reads every page and
// is offered no form. A POST forged with vic's own session and token is
// refused by the database and changes nothing; one without the token is
// refused before the database is asked anything.
func TestReader(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	seed := s.seed
	vicAt := s.as(t, "vic")
	for _, path := range []string{
		"/console/", "/console/acme/jobs", "/console/acme/uncertain", "/console/acme/dead", jobPath(seed.Uncertain, ""),
		jobPath(seed.Queued, ""), fmt.Sprintf("/console/acme/cases/%d", seed.Case.ID), "/console/acme/waits",
		"/console/acme/dead-letters", fmt.Sprintf("/console/acme/schedules/%d", seed.Schedule.ID),
		fmt.Sprintf("/console/acme/runs/%d", seed.Run.ID), fmt.Sprintf("/console/acme/batches/%d", seed.Batch.ID),
	} {
		status, body := vicAt.get(path)
		require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
		require.NotContains(t, body, `method="post"`, path)
		require.NotContains(t, body, "Reconcile", path)
	}
	_, body := vicAt.get("/console/acme/uncertain")
	require.Equal(t, 2, strings.Count(body, `<tr id="job-`), "vic sees the uncertain jobs")
	if !s.viewsJobs {
		t.Log("no job.view in docket.capabilities yet: vic sees jobs by job.create")
	}
	// vic's pages carry no form, so the forger takes the token from the
	// browser's cookie, as a page of vic's would carry it.
	u, err := url.Parse(s.url)
	require.NoError(t, err)
	for _, c := range vicAt.client.Jar.Cookies(u) {
		if c.Name == csrfCookie {
			vicAt.token = c.Value
		}
	}
	require.NotEmpty(t, vicAt.token)

	forged := func(what string, form url.Values, wantStatus int, reason string) {
		t.Helper()
		before, asked := s.snapshot(t), s.queries.Load()
		resp, body := vicAt.do(http.MethodPost, jobPath(seed.Uncertain, "reconcile"), strings.NewReader(form.Encode()), nil)
		requireRefusal(t, resp.StatusCode, body, wantStatus, reason)
		require.Equal(t, before, s.snapshot(t), "%s changed nothing", what)
		if reason == "csrf" {
			require.Equal(t, asked, s.queries.Load(), "%s: the database was asked nothing", what)
		} else {
			require.Greater(t, s.queries.Load(), asked, "%s: the database decided", what)
		}
	}
	forged("a reconcile without the token", url.Values{"outcome": {"succeeded"}}, http.StatusForbidden, "csrf")
	forged("a reconcile with another token", url.Values{"outcome": {"succeeded"}, "csrf": {strings.Repeat("A", 26)}}, http.StatusForbidden, "csrf")
	forged("vic's reconcile", url.Values{"outcome": {"succeeded"}, "csrf": {vicAt.token}}, http.StatusForbidden, "not-permitted")
	resp, body := vicAt.do(http.MethodPost, jobPath(seed.Uncertain, "cancel"), strings.NewReader(url.Values{"csrf": {vicAt.token}}.Encode()), nil)
	requireRefusal(t, resp.StatusCode, body, http.StatusForbidden, "not-permitted")
	require.Contains(t, body, "The database refused: you do not hold the grant this needs on the job&#39;s project.")
	j, err := s.consoleJobs(t, ops).Get(t.Context(), seed.Uncertain)
	require.NoError(t, err)
	require.Equal(t, jobs.Uncertain, j.State)
}

// TestReaderLogin: served on a login that is only a docket_reader
// member, the console runs read-only: it says so, shows no form, and
// refuses every POST before the database is asked.
func TestReaderLogin(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	login := s.Login(t, testkit.ReaderRole, "user:*")
	var log consoleLog
	h, err := newTestHandler(login.Pool, Config{Projects: []string{project}, Clock: s.Clock,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, err)
	require.Contains(t, log.String(), "its database login is a docket_reader member only")
	require.Contains(t, log.String(), "login="+login.Role)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	o := site{url: srv.URL}.as(t, "ops")

	status, body := o.get("/console/")
	requireRefusal(t, status, body, http.StatusForbidden, "reader-login")
	requireAll(t, body, "This console cannot read as you", "Its database login is a docket_reader member")
	require.NotContains(t, body, login.Role, "the pages do not name the login")
	status, body = o.get(jobPath(s.seed.Uncertain, ""))
	requireRefusal(t, status, body, http.StatusForbidden, "reader-login")
	require.NotContains(t, body, `method="post"`)

	before := s.snapshot(t)
	status, body = o.post(jobPath(s.seed.Uncertain, "reconcile"), url.Values{"outcome": {"succeeded"}})
	requireRefusal(t, status, body, http.StatusForbidden, "read-only")
	require.Contains(t, body, "This console runs read-only")
	require.Equal(t, before, s.snapshot(t))
}

// TestCensusIsBounded: the census counts at most its cap of jobs of
// each state, and says which states reached it; sam, who holds nothing,
// counts none.
func TestCensusIsBounded(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	ctx := t.Context()
	census := func(actor access.Actor) jobs.Census {
		t.Helper()
		cl, err := jobs.NewClient(s.API, jobs.Config{Project: project, Actor: actor, Clock: s.Clock})
		require.NoError(t, err)
		c, err := cl.Census(ctx, 50)
		require.NoError(t, err)
		return c
	}
	c := census(ops)
	require.Equal(t, []jobs.State{jobs.Queued}, c.Capped, "59 queued, 50 counted")
	n := map[jobs.State]int{}
	for _, cell := range c.Cells {
		n[cell.State] += cell.Jobs
	}
	require.Equal(t, map[jobs.State]int{jobs.Queued: 50, jobs.Claimed: 1, jobs.Succeeded: 1, jobs.Failed: 1, jobs.Dead: 1, jobs.Uncertain: 2}, n)

	var b strings.Builder
	require.NoError(t, testPages.ExecuteTemplate(&b, "console_overview", overviewPage{Projects: []projectCensus{censusOf(c)}}))
	requireAll(t, b.String(), `<a href="/console/acme/jobs?state=queued">50+</a>`, `<td class="num" id="total-acme">56+</td>`,
		`id="capped-acme">The census counts at most 50 jobs of each state`)

	c = census(sam)
	require.Empty(t, c.Cells)
	require.Empty(t, c.Capped)
}

// consoleLog is a log written from the server's goroutines.
type consoleLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *consoleLog) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *consoleLog) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPrunedJob: the page of a job a prune removed says so, and
// names the prune.
func TestPrunedJob(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := setup(t,
		testkit.Grants(app, project, access.JobCreate),
		testkit.Grants(ops, project, access.JobCancel, access.RetentionManage, access.RetentionPrune))
	jc, err := jobs.NewClient(h.API, jobs.Config{Project: project, Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	e, err := jc.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: json.RawMessage(`1`)})
	require.NoError(t, err)
	_, err = h.consoleJobs(t, ops).Cancel(ctx, e.Job.ID, "not needed")
	require.NoError(t, err)
	h.Clock.Advance(48 * time.Hour)
	rc, err := retention.NewClient(h.API, retention.Config{Actor: ops, Clock: h.Clock})
	require.NoError(t, err)
	policy := retention.Defaults
	policy.SucceededJobs = 24 * time.Hour
	_, err = rc.Set(ctx, project, policy)
	require.NoError(t, err)
	ps, err := rc.Prune(ctx, 10)
	require.NoError(t, err)
	require.Len(t, ps, 1)

	status, body := (consoleSite{url: h.serveConsole(t)}).as(t, "ops").get(jobPath(e.Job.ID, ""))
	requireRefusal(t, status, body, http.StatusGone, "pruned")
	require.Contains(t, body, fmt.Sprintf("Job %d finished and was removed by prune %d at 2026-11-04 09:00:00 UTC, by user:ops", e.Job.ID, ps[0].ID))
}

// TestJobProvenance: a succeeded job's page shows the output it was
// asked for and its completion record, with the params and inputs the
// record says its worker used (never the job's own), escaped, the params
// cut like the payload; the revision that claimed it, in its history too;
// and a pinned job its pin.
func TestJobProvenance(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := setup(t,
		testkit.Grants(app, project, access.JobCreate, access.JobClaim, access.JobPin),
		testkit.Grants(ops, project, access.JobCancel))
	jc, err := jobs.NewClient(h.API, jobs.Config{Project: project, Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	e, err := jc.Enqueue(ctx, jobs.Spec{Kind: "media.render", Payload: json.RawMessage(`{"poster": 42}`),
		Output: jobs.OutputRef{Asset: "poster/42", Kind: "image/png", Root: "renders"},
		Params: json.RawMessage(`{"width": 4000, "asked": "by the job"}`), Inputs: []string{"src:<poster>/42", "src:asked-for", "font:inter"}})
	require.NoError(t, err)
	pinned, err := jc.Enqueue(ctx, jobs.Spec{Kind: "media.render", Payload: json.RawMessage(`{"poster": 43}`)})
	require.NoError(t, err)
	_, err = jc.Pin(ctx, []int64{e.Job.ID, pinned.Job.ID}, []string{"r7", "r8"})
	require.NoError(t, err)
	j, ok, err := jc.ClaimID(ctx, e.Job.ID, jobs.ClaimOptions{Decoders: []jobs.Decoder{{Kind: "media.render", Schema: 1, Revision: "r7"}}})
	require.NoError(t, err)
	require.True(t, ok)
	long := strings.Repeat("x", consoleShowPayload)
	_, err = jc.CompleteWith(ctx, jobs.Completion{Lease: j.Lease(), Record: &jobs.CompletionRecord{
		Output: jobs.OutputRef{Asset: "poster/42", Kind: "image/png"},
		Params: json.RawMessage(`{"width": 2048, "caption": "<i>used</i>", "padding, sorted last": "` + long + `"}`),
		Inputs: []string{"src:<poster>/42", "font:inter"}}}, nil)
	require.NoError(t, err)

	o := (consoleSite{url: h.serveConsole(t)}).as(t, "ops")
	status, body := o.get(jobPath(e.Job.ID, ""))
	require.Equal(t, http.StatusOK, status, body)
	requireAll(t, body,
		`<dd id="requested-output"><code>poster/42 (image/png) under renders</code></dd>`,
		`<dd id="produced"><code>poster/42 (image/png) under renders</code></dd>`,
		`<dd id="inputs-used"><code>src:&lt;poster&gt;/42</code>, <code>font:inter</code></dd>`,
		`&#34;width&#34;: 2048`, `&#34;caption&#34;: &#34;&lt;i&gt;used&lt;/i&gt;&#34;`,
		`<dd id="claimed-revision"><code>r7</code></dd>`,
		`<dd id="pin"><code>r7, r8</code>`,
		`<th>Attempt</th><th>Claimed</th><th>Revision</th><th>Detail</th>`,
		`<td>claimed</td><td>succeeded</td><td>svc:app</td><td>1</td><td class="claim">svc:app, <time datetime="2026-11-02T09:00:00Z">2026-11-02 09:00:00 UTC</time></td><td><code>r7</code></td>`)
	require.Regexp(t, `<dd id="recorded"><time [^>]*>[^<]*</time> by svc:app</dd>`, body)
	params := body[strings.Index(body, `<pre id="params-used">`):]
	params = params[:strings.Index(params, "</pre>")]
	require.True(t, strings.HasSuffix(params, "…"), "the params are cut like the payload")
	require.NotContains(t, params, long)
	require.NotContains(t, body, "<i>used</i>")
	require.NotContains(t, body, "<poster>")
	require.NotContains(t, body, "4000", "the job's params are not the record's")
	require.NotContains(t, body, "asked")
	require.NotContains(t, body, `id="no-completion-record"`)

	status, body = o.get(jobPath(pinned.Job.ID, ""))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dd id="pin"><code>r7, r8</code>`)
	for _, absent := range []string{`id="claimed-revision"`, `id="requested-output"`, `id="completion-record"`, `id="no-completion-record"`} {
		require.NotContains(t, body, absent, "a queued job has none")
	}
}

// serveConsole serves docket serve's handler for acme on the harness's API
// login and clock, and returns its URL.
func (c harness) serveConsole(t *testing.T) string {
	t.Helper()
	handler, err := newTestHandler(c.API, Config{Projects: []string{project}, Clock: c.Clock,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.URL
}
