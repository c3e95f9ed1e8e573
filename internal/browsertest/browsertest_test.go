package browsertest

import (
	"bytes"
	"crypto/rand"
	"html/template"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// claimSite is a one-case worklist in the way docket serve works: people
// are signed in by the X-Forwarded-User header of an auth proxy, forms
// carry a CSRF token that must match the visitor's cookie, and the second
// claim of the case is refused with 409 and a page that says why. The
// refusal page has a frame, which loads with 200 after it.
type claimSite struct {
	mu        sync.Mutex
	claimedBy string
}

var claimPages = template.Must(template.New("case").Parse(`<!doctype html>
<title>Case 1</title>
<p>Signed in as <span id="who">{{.User}}</span> &lt;<span id="email">{{.Email}}</span>&gt;</p>
<form method="post" action="/claim">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<button id="claim" type="submit">Claim</button>
</form>
{{define "claimed"}}<!doctype html>
<title>Claimed</title>
<p id="claimed">Claimed by {{.}}</p>
{{end}}
{{define "conflict"}}<!doctype html>
<title>Conflict</title>
<p id="conflict">Case 1 is already claimed by {{.}}.</p>
<iframe src="/frame"></iframe>
{{end}}`))

func (s *claimSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user := r.Header.Get("X-Forwarded-User")
	switch {
	case r.URL.Path == "/frame":
		w.Write([]byte("<!doctype html><p>help</p>"))
	case user == "":
		http.Error(w, "not signed in", http.StatusUnauthorized)
	case r.URL.Path == "/" && r.Method == http.MethodGet:
		c, err := r.Cookie("csrf")
		if err != nil {
			c = &http.Cookie{Name: "csrf", Value: rand.Text(), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode}
			http.SetCookie(w, c)
		}
		claimPages.Execute(w, map[string]string{"User": user, "Email": r.Header.Get("X-Forwarded-Email"), "CSRF": c.Value})
	case r.URL.Path == "/claim" && r.Method == http.MethodPost:
		c, err := r.Cookie("csrf")
		if err != nil || c.Value != r.PostFormValue("csrf") {
			http.Error(w, "bad CSRF token", http.StatusForbidden)
			return
		}
		s.mu.Lock()
		winner := s.claimedBy
		if winner == "" {
			s.claimedBy = user
		}
		s.mu.Unlock()
		if winner != "" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusConflict)
			claimPages.ExecuteTemplate(w, "conflict", winner)
			return
		}
		http.Redirect(w, r, "/claimed", http.StatusSeeOther)
	case r.URL.Path == "/claimed":
		s.mu.Lock()
		defer s.mu.Unlock()
		claimPages.ExecuteTemplate(w, "claimed", s.claimedBy)
	default:
		http.NotFound(w, r)
	}
}

// signIn opens a page for user, signed in by the proxy's headers, on the
// case.
func signIn(t *testing.T, b *Browser, srv *httptest.Server, user string) *Page {
	t.Helper()
	p := b.NewPage(user)
	require.NoError(t, p.SetHeaders(map[string]string{
		"X-Forwarded-User":  user,
		"X-Forwarded-Email": user + "@example.com",
	}))
	require.NoError(t, p.Run(
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("claim")),
	))
	return p
}

// submit clicks the page's Claim button and waits for what it loads,
// frames included.
func submit(p *Page) error {
	_, err := Get(p, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.ID("claim"))))
	return err
}

func TestTwoPeopleOneClaim(t *testing.T) {
	srv := httptest.NewServer(new(claimSite))
	t.Cleanup(srv.Close)
	b := New(t)

	alice := signIn(t, b, srv, "alice")
	bob := signIn(t, b, srv, "bob")
	for _, p := range []*Page{alice, bob} {
		assert.Equal(t, http.StatusOK, p.Status(), p.Name())
		who, err := Get(p, chromedp.Text(chromedp.ID("who")))
		require.NoError(t, err)
		assert.Equal(t, p.Name(), who)
		email, err := Get(p, chromedp.Text(chromedp.ID("email")))
		require.NoError(t, err)
		assert.Equal(t, p.Name()+"@example.com", email)
	}
	// Separate browser contexts: each person got a CSRF cookie of their own.
	aliceToken, err := Get(alice, chromedp.Value(chromedp.CSS("input[name=csrf]")))
	require.NoError(t, err)
	bobToken, err := Get(bob, chromedp.Value(chromedp.CSS("input[name=csrf]")))
	require.NoError(t, err)
	assert.NotEqual(t, aliceToken, bobToken)

	require.NoError(t, submit(alice))
	claimed, err := Get(alice, chromedp.Text(chromedp.ID("claimed")))
	require.NoError(t, err)
	assert.Equal(t, "Claimed by alice", claimed)
	assert.Equal(t, http.StatusOK, alice.Status(), "the page after the 303")

	// Bob's page still shows the form: his claim comes second.
	require.NoError(t, submit(bob))
	require.NoError(t, bob.Run(chromedp.WaitVisible(chromedp.ID("conflict"))))
	assert.Equal(t, http.StatusConflict, bob.Status(), "the page's frame loaded with 200 after it")
	msg, err := Get(bob, chromedp.Text(chromedp.ID("conflict")))
	require.NoError(t, err)
	assert.Equal(t, "Case 1 is already claimed by alice.", msg)

	path := bob.Screenshot("conflict")
	require.NotEmpty(t, path)
	assert.Equal(t, b.artifacts, filepath.Dir(path))
	assert.Equal(t, "bob-conflict.png", filepath.Base(path))
	png, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "a PNG file")
}

func TestRacingClaims(t *testing.T) {
	srv := httptest.NewServer(new(claimSite))
	t.Cleanup(srv.Close)
	b := New(t)
	pages := []*Page{signIn(t, b, srv, "alice"), signIn(t, b, srv, "bob")}

	errs := make([]error, len(pages))
	var wg sync.WaitGroup
	for i, p := range pages {
		wg.Go(func() { errs[i] = submit(p) })
	}
	wg.Wait()

	var statuses []int
	for i, p := range pages {
		require.NoError(t, errs[i])
		statuses = append(statuses, p.Status())
	}
	assert.ElementsMatch(t, []int{http.StatusOK, http.StatusConflict}, statuses)
}

func TestSetHeadersReplaces(t *testing.T) {
	srv := httptest.NewServer(new(claimSite))
	t.Cleanup(srv.Close)
	p := signIn(t, New(t), srv, "carol")

	require.NoError(t, p.SetHeaders(nil))
	require.NoError(t, p.Run(chromedp.Navigate(srv.URL+"/"), chromedp.WaitReady(chromedp.CSS("body"))))
	assert.Equal(t, http.StatusUnauthorized, p.Status(), "signed out")
}

func TestNoChromium(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(ChromiumEnv, "")
	_, err := chromiumPath()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install chromium")

	t.Setenv(ChromiumEnv, filepath.Join(t.TempDir(), "chromium"))
	_, err = chromiumPath()
	require.Error(t, err)
	assert.Contains(t, err.Error(), ChromiumEnv)
}

func TestArtifactDir(t *testing.T) {
	root := t.TempDir()
	t.Setenv(ArtifactsEnv, root)
	t.Run("a case/with spaces", func(t *testing.T) {
		assert.Equal(t, filepath.Join(root, "TestArtifactDir_a_case_with_spaces"), artifactDir(t))
	})
	assert.False(t, strings.ContainsAny(safeName("a/b c:d"), "/ :"))
}
