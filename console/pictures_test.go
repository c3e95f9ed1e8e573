package console

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/browsertest"
)

// TestPictures: in Chromium, a run's page draws its plan as an SVG graph
// with one node per step, each filled by its state's colour; the census
// draws the jobs finished per minute as bars, those of the seeded minute
// standing, and the jobs open as a line.
func TestPictures(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	p := browsertest.New(t).NewPage("ops")
	require.NoError(t, p.SetHeaders(map[string]string{"X-Forwarded-User": "ops"}))
	eval := func(js string) string {
		t.Helper()
		v, err := browsertest.Get(p, chromedp.Evaluate[string](js))
		require.NoError(t, err)
		return v
	}

	require.NoError(t, p.Run(chromedp.Navigate(fmt.Sprintf("%s/console/acme/runs/%d", s.url, s.seed.Run.ID)),
		chromedp.WaitVisible(chromedp.ID("run-graph"))))
	require.Equal(t, http.StatusOK, p.Status())
	require.ElementsMatch(t, []string{"reserve:admitted", "charge:waiting"}, strings.Split(
		eval(`Array.from(document.querySelectorAll("#run-graph g.node")).map(g => g.id.slice(5) + ":" + g.dataset.state).join()`), ","))
	fill := func(step string) string {
		return eval(`getComputedStyle(document.querySelector("#node-` + step + ` rect")).fill`)
	}
	require.Equal(t, "rgb(219, 230, 247)", fill("reserve"), "admitted")
	require.Equal(t, "rgb(255, 255, 255)", fill("charge"), "waiting")
	require.Equal(t, "1", eval(`String(document.querySelectorAll("#run-graph line.edge").length)`), "charge runs after reserve")
	p.Screenshot("run-graph")

	require.NoError(t, p.Run(chromedp.Navigate(s.url+"/console/"), chromedp.WaitVisible(chromedp.ID("throughput-acme"))))
	require.Equal(t, "60", eval(`String(document.querySelectorAll("#throughput-acme rect.bar").length)`))
	require.Equal(t, "3", eval(`String(Array.from(document.querySelectorAll("#throughput-acme rect.bar")).reduce((n, r) => n + Number(r.dataset.n), 0))`),
		"the succeeded, dead and failed jobs finished in the last hour")
	require.NotEqual(t, "0", eval(`String(Math.max(...Array.from(document.querySelectorAll("#throughput-acme rect.bar")).map(r => r.getBBox().height)))`))
	require.NotEmpty(t, eval(`document.querySelector("#depth-acme polyline").getAttribute("points")`))
	p.Screenshot("census-charts")
}
