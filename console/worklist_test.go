package console

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/browsertest"
	"github.com/docket-dev/docket/tasks"
)

// site is a desk served by docket serve's handler, on the API's login, with
// the desk's clock.
type site struct {
	desk
	url string
}

func setupSite(t *testing.T) site {
	t.Helper()
	d := setupDesk(t)
	return site{desk: d, url: d.serve(t, Config{Projects: []string{project}})}
}

// serve starts docket serve's handler with cfg on the desk's API login and
// clock, and returns its URL.
func (d desk) serve(t *testing.T, cfg Config) string {
	t.Helper()
	cfg.Clock = d.Clock
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	h, err := newTestHandler(d.API, cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// person is somebody at the worklist with a plain HTTP client: their own
// cookies, signed in by the proxy's header, following no redirects.
type person struct {
	t      *testing.T
	base   string
	header http.Header
	client *http.Client
	// token is the CSRF token of the last page read.
	token string
}

// as is a person signed in by the proxy as name ("" for nobody).
func (s site) as(t *testing.T, name string) *person {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	h := http.Header{}
	if name != "" {
		h.Set("X-Forwarded-User", name)
	}
	return &person{t: t, base: s.url, header: h, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([A-Z2-7]{26})"`)

// do sends a request, with the person's header and cookies, and returns the
// response with its body read.
func (p *person) do(method, path string, body io.Reader, extra http.Header) (*http.Response, string) {
	p.t.Helper()
	req, err := http.NewRequestWithContext(p.t.Context(), method, p.base+path, body)
	require.NoError(p.t, err)
	for k, v := range p.header {
		req.Header[k] = v
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := p.client.Do(req)
	require.NoError(p.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(p.t, err)
	if m := csrfInput.FindSubmatch(b); m != nil {
		p.token = string(m[1])
	}
	return resp, string(b)
}

func (p *person) get(path string) (int, string) {
	p.t.Helper()
	resp, body := p.do(http.MethodGet, path, nil, nil)
	return resp.StatusCode, body
}

// post posts form to path with the token of the last page read (or, when
// none had a form, of the browser's cookie), unless form carries one of its
// own.
func (p *person) post(path string, form url.Values) (int, string) {
	p.t.Helper()
	resp, body := p.send(path, form)
	if resp.StatusCode == http.StatusSeeOther {
		require.Equal(p.t, "/tasks/"+strings.Split(path, "/")[2], resp.Header.Get("Location"), "back to the task")
	}
	return resp.StatusCode, body
}

// send posts form to path with the token of the last page read (or, when
// none had a form, of the browser's cookie), unless form carries one of its
// own, and returns the response with its body read.
func (p *person) send(path string, form url.Values) (*http.Response, string) {
	p.t.Helper()
	if !form.Has("csrf") {
		token := p.token
		if u, err := url.Parse(p.base); token == "" && err == nil {
			for _, c := range p.client.Jar.Cookies(u) {
				if c.Name == csrfCookie {
					token = c.Value
				}
			}
		}
		form.Set("csrf", token)
	}
	return p.do(http.MethodPost, path, strings.NewReader(form.Encode()), nil)
}

func taskURL(t tasks.Task, act string) string {
	if act == "" {
		return fmt.Sprintf("/tasks/%d", t.ID)
	}
	return fmt.Sprintf("/tasks/%d/%s", t.ID, act)
}

// refusalReason is the data-reason of a refusal page.
var refusalReason = regexp.MustCompile(`id="refusal" data-reason="([a-z-]+)"`)

func requireRefusal(t *testing.T, status int, body string, wantStatus int, reason string) {
	t.Helper()
	require.Equal(t, wantStatus, status, body)
	m := refusalReason.FindStringSubmatch(body)
	require.NotNil(t, m, body)
	require.Equal(t, reason, m[1], body)
}

// TestWorklistWorklistAndTaskPage: the worklist offers what rita may take and
// what she holds; the task page shows it all, the untrusted parts escaped.
func TestWorklistWorklistAndTaskPage(t *testing.T) {
	t.Parallel()
	s := setupSite(t)
	first := s.open(t, "P-1", nil)
	second := s.open(t, "P-2", nil)
	_, err := s.tasksAs(t, rita).Claim(t.Context(), second.ID, 0)
	require.NoError(t, err)

	rita := s.as(t, "rita")
	status, body := rita.get("/")
	require.Equal(t, http.StatusOK, status, body)
	held := body[strings.Index(body, "Held by you"):strings.Index(body, "You may take")]
	require.Contains(t, held, fmt.Sprintf(`<a class="title" href="/tasks/%d">Release payment P-2</a>`, second.ID))
	require.NotContains(t, held, "P-1")
	queued := body[strings.Index(body, "You may take"):]
	require.Contains(t, queued, fmt.Sprintf(`<a class="title" href="/tasks/%d">Release payment P-1</a>`, first.ID))
	require.NotContains(t, queued, "P-2")

	status, body = s.as(t, "rob").get("/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Release payment P-1")
	require.NotContains(t, body, "Release payment P-2", "held by rita")
	require.NotContains(t, body, "Held by you")
	status, body = s.as(t, "pat").get("/")
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, "Release payment", "four eyes: the proposer is offered nothing")
	require.Contains(t, body, "Nothing waits for you here.")

	status, body = rita.get(taskURL(second, ""))
	require.Equal(t, http.StatusOK, status, body)
	for _, want := range []string{
		`<h1 id="title">Release payment P-2</h1>`,
		"A supplier asks for 4,200 EUR.\nThe invoice matches the purchase order.",
		`<span id="status" class="status status-pending">pending</span>`,
		`<dd id="claim-holder">you, until`,
		`<code>approve</code>, <code>reject</code>`,
		`<dd id="proposer">user:pat</dd>`,
		`svc:app, user:pat, user:root`,
		"escalates to user:boss, then due 2d00h00m later",
		`id="release"`,
		`id="decide-approve"`,
		`id="decide-reject"`,
		"&#34;supplier&#34;: &#34;Müller &amp; Söhne &lt;GmbH&gt;&#34;",
		"&#34;remark&#34;: &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;",
		"<td>opened</td><td>svc:app</td>",
		"<td>claimed</td><td>user:rita</td>",
	} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, "<script>")
	require.NotContains(t, body, `id="claim"`, "she holds it")

	// rob sees who holds it and is offered nothing to do.
	status, body = s.as(t, "rob").get(taskURL(second, ""))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dd id="claim-holder">user:rita, until`)
	require.NotContains(t, body, `id="act"`)
	// pat sees the task, and that four eyes keep it from him.
	status, body = s.as(t, "pat").get(taskURL(first, ""))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `id="four-eyes-notice"`)
	require.Contains(t, body, "(four eyes: you are one of them)")
}

// TestWorklistActs: claim, release and decide redirect back to the task; each
// refusal is a page with its status, in words, and changes nothing.
func TestWorklistActs(t *testing.T) {
	t.Parallel()
	s := setupSite(t)
	task := s.open(t, "P-1", nil)
	rita, rob, pat, vic, sam := s.as(t, "rita"), s.as(t, "rob"), s.as(t, "pat"), s.as(t, "vic"), s.as(t, "sam")
	for _, p := range []*person{rita, rob, pat, vic, sam} {
		p.get("/")
	}
	unchanged := func(what string, act func() (int, string), wantStatus int, reason string) string {
		t.Helper()
		before := s.snapshot(t)
		status, body := act()
		requireRefusal(t, status, body, wantStatus, reason)
		require.Equal(t, before, s.snapshot(t), "%s changed nothing", what)
		return body
	}

	// Four eyes: the proposer may neither claim nor answer.
	body := unchanged("pat's claim", func() (int, string) { return pat.post(taskURL(task, "claim"), url.Values{}) },
		http.StatusForbidden, "four-eyes")
	require.Contains(t, body, "You proposed this task, admitted its case, or act for someone in it, so you may not claim or answer it.")
	require.Contains(t, body, "You are its proposer.")
	unchanged("pat's answer", func() (int, string) {
		return pat.post(taskURL(task, "decide"), url.Values{"decision": {"approve"}})
	}, http.StatusForbidden, "four-eyes")
	// vic may see it, not take it; sam may not even see it.
	unchanged("vic's claim", func() (int, string) { return vic.post(taskURL(task, "claim"), url.Values{}) },
		http.StatusForbidden, "not-permitted")
	for _, act := range []string{"claim", "release", "decide"} {
		body := unchanged("sam's "+act, func() (int, string) {
			return sam.post(taskURL(task, act), url.Values{"decision": {"approve"}})
		}, http.StatusNotFound, "not-found")
		require.NotContains(t, body, task.Title)
	}
	status, body := sam.get(taskURL(task, ""))
	requireRefusal(t, status, body, http.StatusNotFound, "not-found")
	require.NotContains(t, body, task.Title)

	// rita claims; rob's claim, answer and release are refused: she holds it.
	status, body = rita.post(taskURL(task, "claim"), url.Values{})
	require.Equal(t, http.StatusSeeOther, status, body)
	for _, act := range []string{"claim", "decide", "release"} {
		body := unchanged("rob's "+act, func() (int, string) {
			return rob.post(taskURL(task, act), url.Values{"decision": {"approve"}})
		}, http.StatusConflict, "claimed")
		require.Contains(t, body, "user:rita holds this task until")
	}
	// Releasing twice: the second finds no claim.
	status, body = rita.post(taskURL(task, "release"), url.Values{})
	require.Equal(t, http.StatusSeeOther, status, body)
	body = unchanged("a second release", func() (int, string) { return rita.post(taskURL(task, "release"), url.Values{}) },
		http.StatusBadRequest, "invalid")
	require.Contains(t, body, "the task holds no claim to release")

	// A decision the task does not admit, none, and notes too long.
	body = unchanged("an unknown decision", func() (int, string) {
		return rita.post(taskURL(task, "decide"), url.Values{"decision": {"maybe"}})
	}, http.StatusBadRequest, "invalid")
	require.Contains(t, body, "one of approve, reject")
	unchanged("no decision", func() (int, string) { return rita.post(taskURL(task, "decide"), url.Values{}) },
		http.StatusBadRequest, "invalid")
	body = unchanged("a long note", func() (int, string) {
		return rita.post(taskURL(task, "decide"), url.Values{"decision": {"approve"}, "note": {strings.Repeat("x", tasks.MaxNote+1)}})
	}, http.StatusBadRequest, "invalid")
	require.Contains(t, body, "a note of 2001 characters: at most 2000")
	unchanged("a body over 16 KiB", func() (int, string) {
		return rita.post(taskURL(task, "decide"), url.Values{"decision": {"approve"}, "note": {strings.Repeat("x", 17<<10)}})
	}, http.StatusRequestEntityTooLarge, "form")

	// A note of 2000 characters (2500 bytes) is taken: counted in
	// characters, its CRLF as the one line break a browser's textarea shows.
	note := strings.Repeat("é", 500) + strings.Repeat("x", tasks.MaxNote-502) + "\r\n!"
	status, body = rita.post(taskURL(task, "decide"), url.Values{"decision": {"approve"}, "note": {note}})
	require.Equal(t, http.StatusSeeOther, status, body)
	got, err := s.opener.Get(t.Context(), task.ID)
	require.NoError(t, err)
	require.Equal(t, tasks.Decided, got.Status)
	require.Equal(t, "approve", got.Decision)
	require.Equal(t, access.Actor("user:rita"), got.DecidedBy)
	require.Equal(t, strings.Replace(note, "\r\n", "\n", 1), got.Note)

	// Settled: any act is answered with how.
	for _, p := range []*person{rob, rita} {
		for _, act := range []string{"claim", "decide"} {
			body := unchanged(act+" after the decision", func() (int, string) {
				return p.post(taskURL(task, act), url.Values{"decision": {"reject"}})
			}, http.StatusConflict, "answered")
			require.Contains(t, body, `<dd id="decision">approve</dd>`)
			require.Contains(t, body, `<dd id="decided-by">user:rita</dd>`)
			require.Contains(t, body, `<dd id="status">decided</dd>`)
		}
	}
	// The four-eyes rule is not the answer to a settled task: it is settled.
	unchanged("pat's claim after the decision", func() (int, string) { return pat.post(taskURL(task, "claim"), url.Values{}) },
		http.StatusConflict, "answered")
}

// TestWorklistRefusesForgedForms: a form without this browser's token, or sent
// from another site, is refused with 403 and changes nothing.
func TestWorklistRefusesForgedForms(t *testing.T) {
	t.Parallel()
	s := setupSite(t)
	task := s.open(t, "P-1", nil)
	rita := s.as(t, "rita")
	status, _ := rita.get(taskURL(task, ""))
	require.Equal(t, http.StatusOK, status)
	require.NotEmpty(t, rita.token)
	cookies := rita.client.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(s.url, "http://"), Path: "/"})
	require.Len(t, cookies, 1)
	require.Equal(t, csrfCookie, cookies[0].Name)
	require.Equal(t, rita.token, cookies[0].Value)
	resp, _ := s.as(t, "rita").do(http.MethodGet, "/", nil, nil)
	setCookie := resp.Header.Get("Set-Cookie")
	require.Contains(t, setCookie, "HttpOnly")
	require.Contains(t, setCookie, "SameSite=Strict")
	require.Contains(t, setCookie, "Path=/")

	before := s.snapshot(t)
	forged := func(what string, form url.Values, extra http.Header, p *person) {
		t.Helper()
		resp, body := p.do(http.MethodPost, taskURL(task, "claim"), strings.NewReader(form.Encode()), extra)
		requireRefusal(t, resp.StatusCode, body, http.StatusForbidden, "csrf")
		require.Equal(t, before, s.snapshot(t), what)
	}
	forged("no token", url.Values{}, nil, rita)
	forged("an empty token", url.Values{"csrf": {""}}, nil, rita)
	forged("another token", url.Values{"csrf": {strings.Repeat("A", 26)}}, nil, rita)
	// The token in the query, not the form.
	resp, body := rita.do(http.MethodPost, taskURL(task, "claim")+"?csrf="+rita.token, strings.NewReader(""), nil)
	requireRefusal(t, resp.StatusCode, body, http.StatusForbidden, "csrf")
	// The token without its cookie: another browser's page.
	forged("a token without its cookie", url.Values{"csrf": {rita.token}}, nil, s.as(t, "rita"))
	// The right token, sent from another site.
	forged("a cross-site form", url.Values{"csrf": {rita.token}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}, rita)
	forged("a cross-origin form", url.Values{"csrf": {rita.token}}, http.Header{"Origin": {"https://evil.example"}}, rita)
	require.Equal(t, before, s.snapshot(t))

	// The token of the page, from the page's own origin: taken.
	status, body = rita.post(taskURL(task, "claim"), url.Values{"csrf": {rita.token}})
	require.Equal(t, http.StatusSeeOther, status, body)
	require.NotEqual(t, before, s.snapshot(t))
}

// TestWorklistTaskIDs: a path whose id is not a positive int64 is no task.
func TestWorklistTaskIDs(t *testing.T) {
	t.Parallel()
	s := setupSite(t)
	task := s.open(t, "P-1", nil)
	rita := s.as(t, "rita")
	rita.get("/")
	before := s.snapshot(t)
	for _, id := range []string{"abc", "0", "-1", "+1", "01", "1.0", "1e3", "%201", "9223372036854775808", "99999999999999999999", "999999"} {
		status, body := rita.get("/tasks/" + id)
		requireRefusal(t, status, body, http.StatusNotFound, "not-found")
		for _, act := range []string{"claim", "decide"} {
			status, body := rita.post("/tasks/"+id+"/"+act, url.Values{"decision": {"approve"}})
			requireRefusal(t, status, body, http.StatusNotFound, "not-found")
		}
	}
	require.Equal(t, before, s.snapshot(t))
	status, _ := rita.get(fmt.Sprintf("/tasks/%d", task.ID))
	require.Equal(t, http.StatusOK, status)
	status, body := rita.get(fmt.Sprintf("/tasks/%d/claim", task.ID))
	requireRefusal(t, status, body, http.StatusNotFound, "not-found")
}

// TestWorklistInABrowser: rita and rob review in Chromium. rita takes the task
// from her worklist, claims and decides it; rob, who had it open, answers
// second and is told it was answered; pat, its proposer, is refused by four
// eyes.
func TestWorklistInABrowser(t *testing.T) {
	t.Parallel()
	s := setupSite(t)
	task := s.open(t, "P-1", nil)
	s.open(t, "P-2", nil)
	b := browsertest.New(t)
	signIn := func(name string) *browsertest.Page {
		t.Helper()
		p := b.NewPage(name)
		require.NoError(t, p.SetHeaders(map[string]string{"X-Forwarded-User": name}))
		return p
	}
	text := func(p *browsertest.Page, id string) string {
		t.Helper()
		v, err := browsertest.Get(p, chromedp.Text(chromedp.ID(id)))
		require.NoError(t, err)
		return v
	}
	taskPage := s.url + taskURL(task, "")

	// rita's worklist offers both tasks; she opens the first.
	rita := signIn("rita")
	require.NoError(t, rita.Run(chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.ID("worklist"))))
	require.Equal(t, http.StatusOK, rita.Status())
	require.Equal(t, "user:rita", text(rita, "who"))
	require.Contains(t, text(rita, "project-acme"), "Release payment P-1")
	require.Contains(t, text(rita, "project-acme"), "Release payment P-2")
	rita.Screenshot("worklist")

	// rob has the task open too.
	rob := signIn("rob")
	require.NoError(t, rob.Run(chromedp.Navigate(taskPage), chromedp.WaitVisible(chromedp.ID("decide-reject"))))
	require.Equal(t, http.StatusOK, rob.Status())

	// pat, its proposer, finds it on no worklist of his, opens it and tries
	// to claim it.
	pat := signIn("pat")
	require.NoError(t, pat.Run(chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.ID("worklist"))))
	require.NotContains(t, text(pat, "project-acme"), "Release payment", "four eyes: not on his worklist")
	require.NoError(t, pat.Run(chromedp.Navigate(taskPage), chromedp.WaitVisible(chromedp.ID("four-eyes-notice"))))
	require.NoError(t, pat.Run(chromedp.Click(chromedp.ID("claim")), chromedp.WaitVisible(chromedp.ID("refusal"))))
	require.Equal(t, http.StatusForbidden, pat.Status())
	require.Equal(t, "Four eyes: not yours to answer", text(pat, "heading"))
	require.Contains(t, text(pat, "refusal"), "You proposed this task, admitted its case, or act for someone in it, so you may not claim or answer it.")
	require.Contains(t, text(pat, "refusal"), "You are its proposer.")
	pat.Screenshot("four-eyes")

	require.NoError(t, rita.Run(
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#task-%d a.title`, task.ID))),
		chromedp.WaitVisible(chromedp.ID("claim")),
	))
	require.Equal(t, http.StatusOK, rita.Status())
	require.Equal(t, "Release payment P-1", text(rita, "title"))
	require.Equal(t, "nobody", text(rita, "claim-holder"))
	require.Contains(t, text(rita, "evidence"), `"remark": "<script>alert(1)</script>"`, "shown as text")
	rita.Screenshot("task")

	require.NoError(t, rita.Run(chromedp.Click(chromedp.ID("claim")), chromedp.WaitVisible(chromedp.ID("release"))))
	require.Equal(t, http.StatusOK, rita.Status(), "the task page after the 303")
	require.Contains(t, text(rita, "claim-holder"), "you, until")
	rita.Screenshot("claimed")

	require.NoError(t, rita.Run(
		chromedp.SendKeys(chromedp.ID("note"), "Invoice INV-1 matches the purchase order."),
		chromedp.Click(chromedp.ID("decide-approve")),
		chromedp.WaitVisible(chromedp.ID("decided")),
	))
	require.Equal(t, http.StatusOK, rita.Status())
	require.Equal(t, "approve", text(rita, "decision"))
	require.Equal(t, "user:rita", text(rita, "decided-by"))
	require.Equal(t, "Invoice INV-1 matches the purchase order.", text(rita, "note-text"))
	rita.Screenshot("decided")

	// rob's page, loaded before rita claimed, still offers the decisions.
	require.NoError(t, rob.Run(chromedp.Click(chromedp.ID("decide-reject")), chromedp.WaitVisible(chromedp.ID("refusal"))))
	require.Equal(t, http.StatusConflict, rob.Status())
	require.Equal(t, "Already answered", text(rob, "heading"))
	require.Equal(t, "approve", text(rob, "decision"))
	require.Equal(t, "user:rita", text(rob, "decided-by"))
	require.Equal(t, "decided", text(rob, "status"))
	rob.Screenshot("already-answered")

	got, err := s.opener.Get(t.Context(), task.ID)
	require.NoError(t, err)
	require.Equal(t, tasks.Decided, got.Status)
	require.Equal(t, "approve", got.Decision)
	require.Equal(t, access.Actor("user:rita"), got.DecidedBy)
	require.Equal(t, "Invoice INV-1 matches the purchase order.", got.Note)
}
