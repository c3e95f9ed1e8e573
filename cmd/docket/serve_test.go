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

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
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

// csrfCookie is the console's cookie of a browser's CSRF token.
const csrfCookie = "docket_csrf"

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
