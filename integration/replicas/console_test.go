//go:build unix

package replicas

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/console"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// A console given a Replica reads its job list on the standby and says in
// the page how far behind that may be: with replay paused, a job the
// primary has since committed is not listed.
func consoleReads(t *testing.T, r *rig) {
	ctx := t.Context()
	h, err := console.New(r.flushed, console.Config{
		Prefix:           "/ops",
		Replica:          r.replica,
		AuthenticateFunc: func(*http.Request) (access.Actor, error) { return app, nil },
	})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ops/", h)
	page := func() string {
		t.Helper()
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/ops/console/"+project+"/jobs?kind=console.replica", nil)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		body, err := io.ReadAll(w.Result().Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, w.Code, "%s", body)
		return string(body)
	}
	on := func(pool db.Pool) *jobs.Client {
		c, err := jobs.NewClient(pool, jobs.Config{Project: project, Actor: app, Clock: db.SystemClock{}})
		require.NoError(t, err)
		return c
	}
	spec := jobs.Spec{Kind: "console.replica", Payload: []byte(`{}`)}
	first, err := on(r.applied).Enqueue(ctx, spec) // replayed before it returns
	require.NoError(t, err)
	body := page()
	require.Contains(t, body, fmt.Sprintf("/jobs/%d\"", first.Job.ID))
	require.Contains(t, body, "replica, at most")

	r.pauseReplay(t)
	second, err := on(r.flushed).Enqueue(ctx, spec)
	require.NoError(t, err)
	body = page()
	require.Contains(t, body, fmt.Sprintf("/jobs/%d\"", first.Job.ID))
	require.False(t, strings.Contains(body, fmt.Sprintf("/jobs/%d\"", second.Job.ID)),
		"read on the standby, whose replay is paused: job %d is not there yet", second.Job.ID)
	require.Contains(t, body, "replica, at most")
	r.resumeReplay(t)
}
