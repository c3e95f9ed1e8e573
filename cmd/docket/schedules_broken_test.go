package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/browsertest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/schedules"
	"github.com/docket-dev/docket/worker"
)

// TestBrokenScheduleIsShown: a per-minute schedule catching up all, at most
// 1000, unswept for 20 hours, beside an hourly one and one whose job for the
// hour it is swept (05:00 the next day) has its key held already by another
// job with another payload. One sweep later, all
// as docket_app logins: the hourly one advanced, the per-minute one ran the
// 1000 a sweep may, and the third is broken, with its reason, in docket
// status, in the operators' view and in the console; another project's
// login sees none of it.
func TestBrokenScheduleIsShown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const stranger access.Actor = "svc:stranger"
	k := testkit.Setup(t, ana, []string{project, testkit.Other}, testkit.Join(
		testkit.Grants(app, project, access.ScheduleManage, access.JobCreate),
		testkit.Grants(sweeper, project, access.ScheduleSweep, access.JobCreate),
		testkit.Grants(ops, project, access.ScheduleView),
		testkit.Grants(stranger, testkit.Other, access.ScheduleManage, access.JobCreate))...)
	appLogin := k.Login(t, testkit.AppRole, app)
	sc, err := schedules.NewClient(appLogin.Pool, schedules.Config{Actor: app, Clock: k.Clock})
	require.NoError(t, err)
	create := func(name, cron string, catchUp schedules.CatchUp, max int) schedules.Schedule {
		s, err := sc.Create(ctx, schedules.Spec{Project: project, Name: name, Cron: cron, Zone: "UTC", Start: k.Clock.Now(),
			Job: schedules.Job{Kind: "report.tick", Payload: json.RawMessage(`{"n": 1}`)}, CatchUp: catchUp, MaxCatchUp: max,
			Unbounded: true, UnboundedReason: "runs for as long as the test"})
		require.NoError(t, err)
		return s
	}
	minutely := create("minutely", "* * * * *", schedules.CatchUpAll, schedules.MaxCatchUp)
	hourly := create("hourly", "0 * * * *", schedules.CatchUpSkip, 0)
	squatted := create("squatted", "0 * * * *", schedules.CatchUpOne, 0)
	jc, err := jobs.NewClient(appLogin.Pool, jobs.Config{Project: project, Actor: app, Clock: k.Clock})
	require.NoError(t, err)
	_, err = jc.Enqueue(ctx, jobs.Spec{Kind: "report.tick", Payload: json.RawMessage(`{"n": 2}`),
		IdempotencyKey: fmt.Sprintf("schedule:%d:2026-11-03T05:00:0", squatted.ID)})
	require.NoError(t, err)

	k.Clock.Advance(20 * time.Hour)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, jobs.MustKind[json.RawMessage]("report.tick", 1),
		func(context.Context, *jobs.Typed[json.RawMessage]) error { return nil }))
	w, err := worker.NewClient(k.WorkerLogin(t, sweeper).Pool, worker.Config{Actor: sweeper, Registry: reg, Clock: k.Clock,
		Deployment: "test", Logger: testkit.Logger, Sweeps: []worker.Sweep{schedules.Sweep(time.Minute)}})
	require.NoError(t, err)
	moved, err := w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	require.Equal(t, 3, moved)

	h, err := sc.Get(ctx, hourly.ID)
	require.NoError(t, err)
	require.Equal(t, schedules.Active, h.Status)
	require.Equal(t, hourly.NextDue.Add(20*time.Hour), h.NextDue, "the hourly schedule advanced")
	m, err := sc.Get(ctx, minutely.ID)
	require.NoError(t, err)
	require.Equal(t, schedules.Active, m.Status)
	require.EqualValues(t, schedules.MaxRunsPerSweep, m.Runs)
	b, err := sc.Get(ctx, squatted.ID)
	require.NoError(t, err)
	require.Equal(t, schedules.Broken, b.Status)
	require.Contains(t, b.BrokenReason, "idempotency")

	// docket status, as the application's login and as another project's.
	r := docket(t, dbEnv(appLogin.URL), "status")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "schedules:     1 broken schedule the sweep passes over until an update or a resume mends them")
	require.Regexp(t, fmt.Sprintf(`\n  %d\s+acme\s+squatted\s+%s\s+.*idempotency`, squatted.ID,
		regexp.QuoteMeta(k.Clock.Now().Format(time.RFC3339))), r.stdout)
	require.NotContains(t, r.stdout, "minutely")
	r = docket(t, dbEnv(appLogin.URL), "status", "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var doc statusDoc
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	require.Len(t, doc.BrokenSchedules, 1)
	require.Equal(t, squatted.ID, doc.BrokenSchedules[0].ID)
	require.Equal(t, b.BrokenReason, doc.BrokenSchedules[0].Reason)
	strangerLogin := k.Login(t, testkit.AppRole, stranger)
	r = docket(t, dbEnv(strangerLogin.URL), "status")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "schedules:     none broken")

	// The operators' view.
	var id int64
	var reason string
	require.NoError(t, appLogin.Pool.QueryRow(ctx, `SELECT id, broken_reason FROM docket.schedules_broken`).Scan(&id, &reason))
	require.Equal(t, squatted.ID, id)
	require.Equal(t, b.BrokenReason, reason)
	var n int
	require.NoError(t, strangerLogin.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.schedules_broken`).Scan(&n))
	require.Zero(t, n)

	// The console, served on a docket_app login, to ops.
	handler, err := newServeHandler(k.API, serveConfig{Projects: []string{project, testkit.Other}, Clock: k.Clock,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	o := site{url: srv.URL}.as(t, "ops")
	status, body := o.get("/console/acme/schedules")
	require.Equal(t, http.StatusOK, status, body)
	row := body[strings.Index(body, fmt.Sprintf(`<tr id="schedule-%d">`, squatted.ID)):]
	row = row[:strings.Index(row, "</tr>")]
	require.Contains(t, row, `<span class="status">broken</span>`)
	require.Contains(t, row, "idempotency")
	status, body = o.get(fmt.Sprintf("/console/acme/schedules/%d", squatted.ID))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<span class="status" id="status">broken</span>`)
	require.Contains(t, body, `<p class="notice" id="broken">Broken since`)
	require.Contains(t, body, "An update of the schedule, or a resume, mends it")
	require.Contains(t, body, `<p class="empty" id="next-runs">None: it is broken.</p>`)
	status, body = o.get(fmt.Sprintf("/console/acme/schedules/%d", minutely.ID))
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, `id="broken"`)
	require.Contains(t, body, `<span id="unbounded-reason">runs for as long as the test</span>`)
	s := site{url: srv.URL}.as(t, "sam")
	status, _ = s.get(fmt.Sprintf("/console/acme/schedules/%d", squatted.ID))
	require.Equal(t, http.StatusNotFound, status, "sam may not see it")

	// In Chromium: from the list to the broken schedule's page.
	p := browsertest.New(t).NewPage("ops")
	require.NoError(t, p.SetHeaders(map[string]string{"X-Forwarded-User": "ops"}))
	require.NoError(t, p.Run(chromedp.Navigate(srv.URL+"/console/acme/schedules"), chromedp.WaitVisible(chromedp.ID("schedule-list"))))
	require.Equal(t, http.StatusOK, p.Status())
	require.NoError(t, p.Run(chromedp.Click(chromedp.CSS(fmt.Sprintf("#schedule-%d td a", squatted.ID))),
		chromedp.WaitVisible(chromedp.ID("broken"))))
	require.Equal(t, http.StatusOK, p.Status())
	shown, err := browsertest.Get(p, chromedp.Text(chromedp.ID("broken-reason")))
	require.NoError(t, err)
	require.Equal(t, b.BrokenReason, shown)
	shown, err = browsertest.Get(p, chromedp.Text(chromedp.ID("status")))
	require.NoError(t, err)
	require.Equal(t, "broken", shown)
	p.Screenshot("broken-schedule")
}
