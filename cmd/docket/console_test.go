package main

import (
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/consoletest"
	"github.com/docket-dev/docket/internal/testkit"
)

// The console's cast: svc:app does the work of acme and svc:inbox delivers
// its messages; user:ops operates it, reconciling and cancelling jobs and
// viewing its cases and schedules; user:vic only views. user:sam holds
// nothing.
const ops = testkit.Ops

// jobView is the capability that shows jobs and nothing more, once docket
// has it.
const jobView access.Capability = "job.view"

// consoleSeed is what setupConsole made in acme.
type consoleSeed = consoletest.Seeded

// consoleSite is a database seeded with a bit of everything the console
// shows, served by docket serve's handler on the API's login.
type consoleSite struct {
	harness
	seed consoleSeed
	// viewsJobs says vic was given job.view; without it, vic sees jobs by
	// job.create, which grants no reconcile or cancel either.
	viewsJobs bool
	url       string
}

func setupConsole(t *testing.T) consoleSite {
	t.Helper()
	ctx := t.Context()
	h := setup(t,
		testkit.Grants(app, project, access.JobCreate, access.JobClaim, access.CaseAdmit, access.ScheduleManage,
			access.PlanRun, access.BatchRun),
		testkit.Grants(inbox, project, access.MessageDeliver, access.JobCreate),
		testkit.Grants(sweeper, project, access.CaseSweep),
		testkit.Grants(ops, project, access.JobReconcile, access.JobCancel, access.CaseView, access.ScheduleView, access.LaneView),
		testkit.Grants(vic, project, access.CaseView, access.ScheduleView, access.LaneView))
	s := consoleSite{harness: h}
	ac, _ := testkit.Clients(t, h.Pool, h.Clock, ana)
	caps, err := ac.Capabilities(ctx)
	require.NoError(t, err)
	if _, ok := caps[jobView]; ok {
		s.viewsJobs = true
		h.Allow(t, testkit.Grants(vic, project, jobView)...)
	} else {
		h.Allow(t, testkit.Grants(vic, project, access.JobCreate)...)
	}
	s.seed = consoletest.Seed(t, h.Env)
	handler, err := newServeHandler(h.API, serveConfig{Projects: []string{project, testkit.Other}, Clock: h.Clock,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// as is a person at the console signed in by the proxy as name.
func (s consoleSite) as(t *testing.T, name string) *person {
	return site{url: s.url}.as(t, name)
}

// requireAll requires body to hold each of want.
func requireAll(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		require.Contains(t, body, w)
	}
}
