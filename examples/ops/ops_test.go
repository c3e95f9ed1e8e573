package ops_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/examples/ops"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/browsertest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestEachUserSeesTheirProjects: in Chromium, alice signs in through the
// service's own login and the console under /ops/ shows her acme's jobs
// and nothing of beta; bob sees beta's and nothing of acme. Without a
// session the console sends the browser to the login.
func TestEachUserSeesTheirProjects(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const alice, bob access.Actor = "user:alice", "user:bob"
	e := testkit.Setup(t, testkit.Ana, []string{"acme", "beta"}, testkit.Join(
		testkit.Grants(testkit.App, "acme", access.JobCreate), testkit.Grants(testkit.App, "beta", access.JobCreate),
		testkit.Grants(alice, "acme", access.JobCancel, access.CaseView),
		testkit.Grants(bob, "beta", access.JobCancel, access.CaseView))...)
	for _, p := range []string{"acme", "beta"} {
		jc, err := jobs.NewClient(e.API, jobs.Config{Project: p, Actor: testkit.App, Clock: e.Clock})
		require.NoError(t, err)
		_, err = jc.Enqueue(ctx, jobs.Spec{Kind: p + ".report", Queue: p + "-queue", Payload: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	h, err := ops.New(e.API, ops.Config{Clock: e.Clock, Key: []byte("an example key of thirty-two bytes or more"),
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		Users:  map[string]ops.User{"alice": {Password: "wonderland", Principal: alice}, "bob": {Password: "builder", Principal: bob}}})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	b := browsertest.New(t)
	text := func(p *browsertest.Page, sel string) string {
		t.Helper()
		v, err := browsertest.Get(p, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return v
	}
	for _, c := range []struct{ user, password, mine, theirs string }{
		{"alice", "wonderland", "acme", "beta"},
		{"bob", "builder", "beta", "acme"},
	} {
		p := b.NewPage(c.user)
		require.NoError(t, p.Run(chromedp.Navigate(srv.URL+"/ops/console/"), chromedp.WaitVisible(chromedp.ID("user"))))
		require.NoError(t, p.Run(
			chromedp.SendKeys(chromedp.ID("user"), c.user), chromedp.SendKeys(chromedp.ID("password"), c.password),
			chromedp.Click(chromedp.ID("sign-in")), chromedp.WaitVisible(chromedp.ID("who"))))
		require.Equal(t, http.StatusOK, p.Status())
		// Loaded anew rather than read or clicked on: the page the
		// sign-in's redirect ends on may still be replacing the one #who
		// was first seen on, whose nodes a read or a click would then not
		// find.
		require.NoError(t, p.Run(chromedp.Navigate(srv.URL+"/ops/console/"), chromedp.WaitVisible(chromedp.ID("census-"+c.mine))))
		require.Equal(t, http.StatusOK, p.Status())
		require.Equal(t, "user:"+c.user, text(p, "#who"))
		require.Contains(t, text(p, "#census-"+c.mine), c.mine+"-queue")
		shown, err := browsertest.Get(p, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("section.project")).map(s => s.id)`))
		require.NoError(t, err)
		require.Equal(t, []string{"project-" + c.mine}, shown)
		p.Screenshot(c.user + "-console")

		// The other's project's pages show nothing of theirs.
		require.NoError(t, p.Run(chromedp.Navigate(srv.URL+"/ops/console/"+c.theirs+"/jobs"), chromedp.WaitVisible(chromedp.ID("no-jobs"))))
		require.Equal(t, http.StatusOK, p.Status())
	}
}
