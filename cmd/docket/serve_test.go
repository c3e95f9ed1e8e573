package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
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
	return site{desk: d, url: d.serve(t, serveConfig{Projects: []string{project}})}
}

// serve starts docket serve's handler with cfg on the desk's API login and
// clock, and returns its URL.
func (d desk) serve(t *testing.T, cfg serveConfig) string {
	t.Helper()
	cfg.Clock = d.Clock
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	h, err := newServeHandler(d.API, cfg)
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
	resp, body := p.do(http.MethodPost, path, strings.NewReader(form.Encode()), nil)
	if resp.StatusCode == http.StatusSeeOther {
		require.Equal(p.t, "/tasks/"+strings.Split(path, "/")[2], resp.Header.Get("Location"), "back to the task")
	}
	return resp.StatusCode, body
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

// TestServeSignIn: the proxy's header signs people in, user:U for a plain
// name; without it a request is refused with 401, and a name that is no
// principal with 403. Every response carries the security headers.
func TestServeSignIn(t *testing.T) {
	t.Parallel()
	s := setupSite(t)
	task := s.open(t, "P-1", nil)
	before := s.snapshot(t)

	nobody := s.as(t, "")
	for _, path := range []string{"/", taskURL(task, "")} {
		status, body := nobody.get(path)
		requireRefusal(t, status, body, http.StatusUnauthorized, "sign-in")
		require.Contains(t, body, "Sign-in to this worklist is by the auth proxy in front of it")
		require.NotContains(t, body, task.Title)
	}
	status, body := nobody.post(taskURL(task, "claim"), url.Values{})
	requireRefusal(t, status, body, http.StatusUnauthorized, "sign-in")
	require.Equal(t, before, s.snapshot(t))

	for name, who := range map[string]string{"rita": "user:rita", "svc:app": "user:svc:app", "rita@example.com": "user:rita@example.com"} {
		status, body := s.as(t, name).get("/")
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, `<strong id="who">`+who+`</strong>`)
	}
	status, body = s.as(t, "rita smith").get("/")
	requireRefusal(t, status, body, http.StatusForbidden, "sign-in")

	// Two names in the header are no sign-in.
	resp, body := s.as(t, "rita").do(http.MethodGet, "/", nil, http.Header{"X-Forwarded-User": {"rita", "rob"}})
	requireRefusal(t, resp.StatusCode, body, http.StatusUnauthorized, "sign-in")

	// Another header, and --dev-principal, which ignores the headers.
	other := site{desk: s.desk, url: s.serve(t, serveConfig{Projects: []string{project}, AuthHeader: "x-auth-request-user"})}
	p := other.as(t, "")
	p.header.Set("X-Auth-Request-User", "rob")
	status, body = p.get("/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<strong id="who">user:rob</strong>`)
	status, _ = other.as(t, "rita").get("/")
	require.Equal(t, http.StatusUnauthorized, status)
	dev := site{desk: s.desk, url: s.serve(t, serveConfig{Projects: []string{project}, DevPrincipal: rob})}
	status, body = dev.as(t, "").get("/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<strong id="who">user:rob</strong>`)
	status, body = dev.as(t, "rita").get("/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<strong id="who">user:rob</strong>`)

	rita := s.as(t, "rita")
	for _, path := range []string{"/", taskURL(task, ""), "/nowhere", "/static/docket.css"} {
		resp, _ := rita.do(http.MethodGet, path, nil, nil)
		h := resp.Header
		require.Equal(t, "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'", h.Get("Content-Security-Policy"), path)
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), path)
		require.Equal(t, "same-origin", h.Get("Referrer-Policy"), path)
		require.Equal(t, "DENY", h.Get("X-Frame-Options"), path)
	}
	resp, _ = nobody.do(http.MethodGet, "/", nil, nil)
	require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	resp, body = rita.do(http.MethodGet, "/static/docket.css", nil, nil)
	require.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, body, "font")
}

// TestServeWorklistAndTaskPage: the worklist offers what rita may take and
// what she holds; the task page shows it all, the untrusted parts escaped.
func TestServeWorklistAndTaskPage(t *testing.T) {
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

// TestServeActs: claim, release and decide redirect back to the task; each
// refusal is a page with its status, in words, and changes nothing.
func TestServeActs(t *testing.T) {
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

// TestServeRefusesForgedForms: a form without this browser's token, or sent
// from another site, is refused with 403 and changes nothing.
func TestServeRefusesForgedForms(t *testing.T) {
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

// TestServeTaskIDs: a path whose id is not a positive int64 is no task.
func TestServeTaskIDs(t *testing.T) {
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

// TestServeInABrowser: rita and rob review in Chromium. rita takes the task
// from her worklist, claims and decides it; rob, who had it open, answers
// second and is told it was answered; pat, its proposer, is refused by four
// eyes.
func TestServeInABrowser(t *testing.T) {
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

// TestServeCommand: docket serve listens, serves, and stops at an
// interrupt; a wrong command line exits 2 before connecting.
func TestServeCommand(t *testing.T) {
	t.Parallel()
	d := setupDesk(t)
	task := d.open(t, "P-1", nil)
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	out, outW := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		env := map[string]string{"DOCKET_DATABASE_URL": d.env["DOCKET_DATABASE_URL"]}
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--project", "acme,other", "--project", project}, func(k string) string { return env[k] }, outW, &stderr)
		outW.Close()
	}()
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatalf("docket serve printed nothing: exit %d: %s", <-done, stderr.String())
	}
	first := lines.Text()
	require.Regexp(t, `^docket serve: listening on http://127\.0\.0\.1:\d+ for acme, other; signed in by the auth proxy's X-Forwarded-User header$`, first)
	var rest []string
	var restDone sync.WaitGroup
	restDone.Go(func() {
		for lines.Scan() {
			rest = append(rest, lines.Text())
		}
	})
	base := regexp.MustCompile(`http://\S+`).FindString(first)
	p := &person{t: t, base: base, header: http.Header{"X-Forwarded-User": {"rita"}}, client: http.DefaultClient}
	status, body := p.get(taskURL(task, ""))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Release payment P-1")
	status, _ = (&person{t: t, base: base, client: http.DefaultClient}).get("/")
	require.Equal(t, http.StatusUnauthorized, status)

	interrupt()
	require.Equal(t, exitOK, <-done, stderr.String())
	restDone.Wait()
	require.Equal(t, []string{"docket serve: stopped"}, rest)

	requireUsageErrors(t, [][]string{
		{"serve"},
		{"serve", "acme"},
		{"serve", "--project", ""},
		{"serve", "--project", "Acme"},
		{"serve", "--project", "acme", "--addr", "8080"},
		{"serve", "--project", "acme", "--auth-header", ""},
		{"serve", "--project", "acme", "--auth-header", "X User"},
		{"serve", "--project", "acme", "--dev-principal", "rita"},
		{"serve", "--project", "acme", "--frob"},
	})
}

// TestServeConfig: the handler refuses what it cannot serve at
// construction.
func TestServeConfig(t *testing.T) {
	t.Parallel()
	_, err := newServeHandler(nil, serveConfig{Projects: []string{project}})
	require.Error(t, err)
	var p projectList
	require.NoError(t, p.Set("acme, other,,acme"))
	require.NoError(t, p.Set("third"))
	require.Equal(t, projectList{"acme", "other", "third"}, p)
	cfg := serveConfig{Projects: p, AuthHeader: "x-forwarded-email"}
	require.NoError(t, cfg.check())
	require.Equal(t, "X-Forwarded-Email", cfg.AuthHeader)
	for _, bad := range []serveConfig{
		{},
		{Projects: []string{"-x"}},
		{Projects: []string{project}, AuthHeader: "X:User"},
		{Projects: []string{project}, DevPrincipal: access.Actor("rita")},
	} {
		require.Error(t, bad.check(), "%+v", bad)
	}
}
