// Package browsertest drives docket's web pages in a real browser from Go
// tests: headless Chromium, from Debian's chromium package, through
// chromedp. It is for docket's own tests only.
//
// # A browser and its pages
//
// [New] starts one browser for a test and stops it when the test ends. Each
// [Browser.NewPage] is one person at the screen: a tab in a browser context
// of its own, so two pages share no cookies, storage or cache, and two
// reviewers can race for the same case each with their own CSRF cookie:
//
//	b := browsertest.New(t)
//	alice, bob := b.NewPage("alice"), b.NewPage("bob")
//	require.NoError(t, alice.SetHeaders(map[string]string{"X-Forwarded-User": "alice"}))
//	require.NoError(t, alice.Run(
//		chromedp.Navigate(srv.URL+"/cases/1"),
//		chromedp.WaitVisible(chromedp.CSS("form.claim")),
//	))
//	who, err := browsertest.Get(alice, chromedp.Text(chromedp.ID("who")))
//
// [Page.SetHeaders] adds headers to every request the page sends, as an auth
// proxy in front of docket serve would (X-Forwarded-User, X-Forwarded-Email).
// [Page.Status] is the HTTP status of the page's last main document, so a
// test can tell a 409 page from a 200 one. [Page.Run] and [Get] give each
// call [Timeout]; they wait with chromedp's WaitVisible, WaitReady and the
// like, never with sleeps. Pages may be driven from goroutines of their own,
// one goroutine per page.
//
// # Screenshots
//
// [Page.Screenshot] saves a full-page PNG and logs its path. The files go
// under the directory in DOCKET_ARTIFACTS ([ArtifactsEnv]), one directory
// per test, so CI can keep them; without it, under the test's temporary
// directory, removed when the test ends. A page of a test that failed takes
// one more, named "failed", as the test ends.
//
// # Finding Chromium
//
// The browser is the binary in DOCKET_CHROMIUM ([ChromiumEnv]) if set, else
// chromium or chromium-browser in PATH. Without one, [New] fails the test,
// saying to install Debian's package (apt-get install chromium): browser
// tests are never skipped. Chromium runs headless, without its sandbox and
// GPU and without /dev/shm, as it must when run as root in a container, with
// a fresh profile under the test's temporary directory.
package browsertest
