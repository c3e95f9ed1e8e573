package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/internal/browsertest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/worker"
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
		v, err := browsertest.Get(p, liveText("#total-acme"))
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
	live, err := browsertest.Get(p, liveText(`#census-acme tr[data-queue="live"]`))
	require.NoError(t, err)
	require.Contains(t, live, "3")
	kept, err := browsertest.Get(p, chromedp.Evaluate[int](`window.loadedOnce || 0`))
	require.NoError(t, err)
	require.Equal(t, 1, kept, "no reload")
	p.Screenshot("live-census")
}

// TestLiveBatchCensus: in Chromium, a batch's page follows the batch as it
// runs, with no reload: its census counts the items admitted, then those a
// worker has run.
func TestLiveBatchCensus(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	ctx := t.Context()
	handler, err := newTestHandler(s.API, Config{Projects: []string{project}, Clock: s.Clock, Refresh: 200 * time.Millisecond})
	require.NoError(t, err)
	base := serveHandler(t, handler)
	bc, err := batches.NewClient(s.API, batches.Config{Actor: app, Clock: s.Clock})
	require.NoError(t, err)
	work := plans.Plan{Steps: []plans.Step{{ID: "work", Kind: "t.live", Terminal: true, Args: []plans.Arg{{Name: "n", Source: plans.Input("n")}}}}}
	b, err := bc.Open(ctx, project, "live", work)
	require.NoError(t, err)

	p := browsertest.New(t).NewPage("ops")
	require.NoError(t, p.SetHeaders(map[string]string{"X-Forwarded-User": "ops"}))
	require.NoError(t, p.Run(chromedp.Navigate(fmt.Sprintf("%s/console/acme/batches/%d", base, b.ID)), chromedp.WaitVisible(chromedp.ID("batch-census"))))
	require.Equal(t, http.StatusOK, p.Status())
	_, err = browsertest.Get(p, chromedp.Evaluate[int](`window.loadedOnce = 1`))
	require.NoError(t, err)
	// census is the batch's counts: items, in flight, succeeded, failed,
	// quarantined.
	census := func() []string {
		t.Helper()
		v, err := browsertest.Get(p, liveText("#batch-census tbody tr"))
		require.NoError(t, err)
		return strings.Fields(v)[:5]
	}
	until := func(want []string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !slices.Equal(census(), want) && time.Now().Before(deadline) {
			require.NoError(t, p.Run(chromedp.Sleep(100*time.Millisecond)))
		}
		require.Equal(t, want, census())
	}
	until([]string{"0", "0", "0", "0", "0"})

	items := []batches.Item{{Key: "a", Input: json.RawMessage(`{"n":1}`)}, {Key: "b", Input: json.RawMessage(`{"n":2}`)},
		{Key: "c", Input: json.RawMessage(`{"n":3}`)}}
	_, err = bc.Admit(ctx, b.ID, items, true)
	require.NoError(t, err)
	until([]string{"3", "3", "0", "0", "0"})

	reg := worker.NewRegistry()
	require.NoError(t, worker.HandleResult(reg, jobs.MustKind[json.RawMessage]("t.live", 1),
		func(context.Context, *jobs.Typed[json.RawMessage]) (worker.Result, error) {
			return worker.Result{Value: json.RawMessage(`{"ok":true}`)}, nil
		}))
	w, err := worker.NewClient(s.API, worker.Config{Actor: app, Registry: reg, Clock: s.Clock, Deployment: "test",
		Logger: testkit.Logger, PollInterval: 50 * time.Millisecond, SweepEvery: time.Hour})
	require.NoError(t, err)
	testkit.Start(t, w)
	until([]string{"3", "0", "3", "0", "0"})
	kept, err := browsertest.Get(p, chromedp.Evaluate[int](`window.loadedOnce || 0`))
	require.NoError(t, err)
	require.Equal(t, 1, kept, "no reload")
	p.Screenshot("live-batch")
}

// liveText reads the text of the element sel selects in one step in the
// page: the live updates replace their elements, so a node found by one
// call may be gone by the next (chromedp.Text's "No node with given id").
// It is "" while no element matches.
func liveText(sel string) chromedp.Action[string] {
	return chromedp.Evaluate[string](`(function () { const e = document.querySelector(` + strconv.Quote(sel) + `); return e ? e.innerText : ""; })()`)
}
