package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/browsertest"
	"github.com/docket-dev/docket/jobs"
)

// TestInABrowser: in Chromium, ops goes from the census to the
// uncertain jobs, reconciles one from the list and lands on its page,
// whose history shows the reconcile and still verifies; every other page
// renders. vic, a viewer, is offered no form, and a reconcile forged with
// vic's own cookie and token is refused by the database, changing nothing.
func TestInABrowser(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	seed := s.seed
	b := browsertest.New(t)
	signIn := func(name string) *browsertest.Page {
		t.Helper()
		p := b.NewPage(name)
		require.NoError(t, p.SetHeaders(map[string]string{"X-Forwarded-User": name}))
		return p
	}
	text := func(p *browsertest.Page, sel string) string {
		t.Helper()
		v, err := browsertest.Get(p, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return v
	}
	open := func(p *browsertest.Page, path, wait, shot string) {
		t.Helper()
		require.NoError(t, p.Run(chromedp.Navigate(s.url+path), chromedp.WaitVisible(chromedp.CSS(wait))))
		require.Equal(t, http.StatusOK, p.Status(), path)
		if shot != "" {
			p.Screenshot(shot)
		}
	}

	o := signIn("ops")
	open(o, "/", "#worklist", "")
	require.NoError(t, o.Run(chromedp.Click(chromedp.ID("nav-console")), chromedp.WaitVisible(chromedp.ID("census-acme"))))
	require.Equal(t, http.StatusOK, o.Status())
	census := text(o, "#census-acme")
	require.Contains(t, census, "billing")
	require.Contains(t, census, "mail")
	o.Screenshot("census")

	require.NoError(t, o.Run(chromedp.Click(chromedp.ID("link-uncertain-acme")), chromedp.WaitVisible(chromedp.ID("job-list"))))
	require.Equal(t, http.StatusOK, o.Status())
	require.Contains(t, text(o, "#job-list"), "the payment gateway hung up mid-request")
	o.Screenshot("uncertain")

	form := fmt.Sprintf("#reconcile-%d", seed.Uncertain)
	require.NoError(t, o.Run(
		chromedp.SetValue(chromedp.CSS(form+" select"), "succeeded"),
		chromedp.SendKeys(chromedp.CSS(form+" input[name=note]"), "the gateway's log shows it paid"),
		chromedp.Click(chromedp.CSS(form+" button")),
		chromedp.WaitVisible(chromedp.ID("history")),
	))
	require.Equal(t, http.StatusOK, o.Status(), "the job's page after the 303")
	require.Equal(t, fmt.Sprintf("Job %d succeeded", seed.Uncertain), text(o, "#title"))
	last := text(o, "#history tbody tr:last-child")
	require.Contains(t, last, "uncertain\tsucceeded\tuser:ops")
	require.Contains(t, last, "the gateway's log shows it paid")
	require.Equal(t, "History verified: 3 events, hash chain intact.", text(o, "#verified"))
	o.Screenshot("reconciled")
	j, err := s.consoleJobs(t, ops).Get(t.Context(), seed.Uncertain)
	require.NoError(t, err)
	require.Equal(t, jobs.Succeeded, j.State)
	require.Contains(t, j.Diagnostic, "the gateway's log shows it paid")

	// The one uncertain job left; the other pages.
	open(o, "/console/acme/uncertain", "#job-list", "")
	require.NotContains(t, text(o, "#job-list"), "the payment gateway hung up")
	open(o, "/console/acme/jobs?queue=bulk", "#next", "jobs")
	open(o, "/console/acme/dead", "#job-list", "dead")
	open(o, fmt.Sprintf("/console/acme/cases/%d", seed.Case.ID), "#obligations", "case")
	require.Contains(t, text(o, "#waits"), "supplier-ack")
	require.Contains(t, text(o, "#obligations"), "confirm-switch")
	open(o, "/console/acme/waits", "#waits", "")
	open(o, "/console/acme/dead-letters", "#letters", "dead-letters")
	require.Contains(t, text(o, "#letters"), "document:DOC-404")
	open(o, fmt.Sprintf("/console/acme/schedules/%d", seed.Schedule.ID), "#next-runs", "schedule")
	open(o, fmt.Sprintf("/console/acme/runs/%d", seed.Run.ID), "#steps", "run")
	open(o, "/console/acme/batches", "#batch-list", "")
	open(o, fmt.Sprintf("/console/acme/batches/%d", seed.Batch.ID), "#batch-census", "batch")

	// vic reads, and is offered nothing to do.
	v := signIn("vic")
	open(v, "/console/acme/uncertain", "#job-list", "viewer")
	html, err := browsertest.Get(v, chromedp.OuterHTML(chromedp.CSS("main")))
	require.NoError(t, err)
	require.NotContains(t, html, "<form")
	require.Contains(t, html, fmt.Sprintf(`id="job-%d"`, seed.UncertainMail))
	open(v, jobPath(seed.UncertainMail, ""), "#history", "")
	html, err = browsertest.Get(v, chromedp.OuterHTML(chromedp.CSS("main")))
	require.NoError(t, err)
	require.NotContains(t, html, "<form")

	// A reconcile forged with vic's session: the browser's cookie and the
	// token it holds.
	cookies, err := browsertest.Get(v, chromedp.QueryAfter(chromedp.CSS("body"),
		func(ctx context.Context, t *chromedp.Target, _ []*chromedp.Node) ([]*network.Cookie, error) {
			r, err := cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{URLs: []string{s.url + "/"}})
			return r.Cookies, err
		}))
	require.NoError(t, err)
	token := ""
	for _, c := range cookies {
		if c.Name == csrfCookie {
			token = c.Value
		}
	}
	require.NotEmpty(t, token)
	before := s.snapshot(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url+jobPath(seed.UncertainMail, "reconcile"),
		strings.NewReader(url.Values{"csrf": {token}, "outcome": {"failed"}, "note": {"forged"}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-User", "vic")
	req.AddCookie(&http.Cookie{Name: csrfCookie, Value: token})
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	requireRefusal(t, resp.StatusCode, string(body), http.StatusForbidden, "not-permitted")
	require.Equal(t, before, s.snapshot(t), "the forged reconcile changed nothing")
	j, err = s.consoleJobs(t, ops).Get(t.Context(), seed.UncertainMail)
	require.NoError(t, err)
	require.Equal(t, jobs.Uncertain, j.State)
}
