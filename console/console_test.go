package console

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
)

// TestSignIn: the host's AuthenticateFunc names each request's principal;
// its error is a 401 that shows the error's words and links to the host's
// sign-in page, a name that is no principal a 403. Mounted under a prefix,
// the console serves only the paths under it, and its links, redirects
// and cookie carry it. Every response carries the security headers.
func TestSignIn(t *testing.T) {
	t.Parallel()
	d := setupDesk(t)
	task := d.open(t, "P-1", nil)
	h, err := New(d.API, Config{Prefix: "/ops", Projects: []string{project}, Clock: d.Clock, SignInURL: "/login",
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		AuthenticateFunc: func(r *http.Request) (access.Actor, error) {
			switch c, err := r.Cookie("who"); {
			case err != nil:
				return "", errors.New("Sign in to the shop first.")
			default:
				return access.Actor(c.Value), nil
			}
		}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ops/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	as := func(who string) *person {
		p := site{url: srv.URL}.as(t, "")
		if who != "" {
			p.header.Set("Cookie", "who="+who)
		}
		return p
	}

	nobody := as("")
	status, body := nobody.get("/ops/")
	requireRefusal(t, status, body, http.StatusUnauthorized, "sign-in")
	requireAll(t, body, "Sign in to the shop first.", `<a id="sign-in" href="/login">Sign in</a>`)
	status, body = as("rita smith").get("/ops/")
	requireRefusal(t, status, body, http.StatusForbidden, "sign-in")

	rita := as("user:rita")
	status, body = rita.get("/ops/")
	require.Equal(t, http.StatusOK, status, body)
	requireAll(t, body, `<strong id="who">user:rita</strong>`, `href="/ops/static/docket.css"`, `<a id="nav-console" href="/ops/console/">`,
		`href="/ops/tasks/`)
	require.NotContains(t, body, `href="/tasks/`)
	status, body = rita.get("/ops/console/acme/jobs")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<a href="/ops/console/acme/uncertain">uncertain</a>`)
	resp, _ := as("user:rita").do(http.MethodGet, "/ops/", nil, nil)
	require.Contains(t, resp.Header.Get("Set-Cookie"), "Path=/ops/")

	// Claiming the task answers with a redirect under the prefix.
	status, _ = rita.get(taskURL(task, ""))
	require.Equal(t, http.StatusNotFound, status, "the root is the host's")
	_, _ = rita.get("/ops" + taskURL(task, ""))
	resp, body = rita.do(http.MethodPost, "/ops"+taskURL(task, "claim"), strings.NewReader("csrf="+rita.token), nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/ops"+taskURL(task, ""), resp.Header.Get("Location"))

	for _, path := range []string{"/ops/", "/ops/nowhere", "/ops/static/docket.css", "/ops/static/live.js"} {
		resp, _ := rita.do(http.MethodGet, path, nil, nil)
		hd := resp.Header
		require.Equal(t, "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'", hd.Get("Content-Security-Policy"), path)
		require.Equal(t, "nosniff", hd.Get("X-Content-Type-Options"), path)
		require.Equal(t, "same-origin", hd.Get("Referrer-Policy"), path)
		require.Equal(t, "DENY", hd.Get("X-Frame-Options"), path)
	}
	resp, body = rita.do(http.MethodGet, "/ops/static/docket.css", nil, nil)
	require.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, body, "font")
	status, _ = rita.get("/ops/static/nothing.js")
	require.Equal(t, http.StatusNotFound, status)
}

// TestConfig: New refuses what it cannot serve, before serving anything.
func TestConfig(t *testing.T) {
	t.Parallel()
	d := setup(t)
	_, err := New(nil, Config{AuthenticateFunc: proxyUser})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	for _, bad := range []Config{
		{},
		{AuthenticateFunc: proxyUser, Projects: []string{"-x"}},
		{AuthenticateFunc: proxyUser, Prefix: "/ops/"},
		{AuthenticateFunc: proxyUser, Prefix: "ops"},
		{AuthenticateFunc: proxyUser, Prefix: "/a b"},
	} {
		_, err := New(d.API, bad)
		require.ErrorIs(t, err, db.ErrInvalidArgument, "%+v", bad)
	}
	_, err = New(d.API, Config{AuthenticateFunc: proxyUser, Prefix: "/admin/ops"})
	require.NoError(t, err)
}
