package console

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/browsertest"
	"github.com/docket-dev/docket/jobs"
)

// TestLiveCensus: in Chromium, the census of an open console page follows
// the jobs enqueued after it was loaded, with no reload: the page's own
// state survives the update.
func TestLiveCensus(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	handler, err := newTestHandler(s.API, Config{Projects: []string{project}, Clock: s.Clock, Refresh: 200 * time.Millisecond})
	require.NoError(t, err)
	base := serveHandler(t, handler)
	p := browsertest.New(t).NewPage("ops")
	require.NoError(t, p.SetHeaders(map[string]string{"X-Forwarded-User": "ops"}))
	require.NoError(t, p.Run(chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("total-acme"))))
	require.Equal(t, http.StatusOK, p.Status())
	total := func() string {
		t.Helper()
		v, err := browsertest.Get(p, chromedp.Text(chromedp.ID("total-acme")))
		require.NoError(t, err)
		return v
	}
	require.Equal(t, "65", total())
	_, err = browsertest.Get(p, chromedp.Evaluate[int](`window.loadedOnce = 1`))
	require.NoError(t, err)

	jc, err := jobs.NewClient(s.API, jobs.Config{Project: project, Actor: app, Clock: s.Clock})
	require.NoError(t, err)
	for range 3 {
		_, err = jc.Enqueue(t.Context(), jobs.Spec{Kind: "report.page", Queue: "live", Payload: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for total() != "68" && time.Now().Before(deadline) {
		require.NoError(t, p.Run(chromedp.Sleep(100*time.Millisecond)))
	}
	require.Equal(t, "68", total(), "the census followed the enqueues")
	live, err := browsertest.Get(p, chromedp.Text(chromedp.CSS(`#census-acme tr[data-queue="live"]`)))
	require.NoError(t, err)
	require.Contains(t, live, "3")
	kept, err := browsertest.Get(p, chromedp.Evaluate[int](`window.loadedOnce || 0`))
	require.NoError(t, err)
	require.Equal(t, 1, kept, "no reload")
	p.Screenshot("live-census")
}
