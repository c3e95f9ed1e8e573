package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/browsertest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
	"github.com/docket-dev/docket/worker"
)

// browserOps is ops at the console in Chromium, with helpers to open a
// page and read an element's text.
type browserOps struct {
	t    *testing.T
	base string
	p    *browsertest.Page
}

func (s consoleSite) opsInBrowser(t *testing.T) browserOps {
	t.Helper()
	p := browsertest.New(t).NewPage("ops")
	require.NoError(t, p.SetHeaders(map[string]string{"X-Forwarded-User": "ops"}))
	return browserOps{t: t, base: s.url, p: p}
}

func (b browserOps) open(path, wait string) {
	b.t.Helper()
	require.NoError(b.t, b.p.Run(chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS(wait))))
	require.Equal(b.t, http.StatusOK, b.p.Status(), path)
}

// submit ticks the confirm box and clicks the button, and waits for wait on
// the page the form leads to.
func (b browserOps) submit(confirm, button, wait string) {
	b.t.Helper()
	require.NoError(b.t, b.p.Run(chromedp.Click(chromedp.CSS(confirm)), chromedp.Click(chromedp.CSS(button)),
		chromedp.WaitVisible(chromedp.CSS(wait))))
	require.Equal(b.t, http.StatusOK, b.p.Status())
}

func (b browserOps) text(sel string) string {
	b.t.Helper()
	v, err := browsertest.Get(b.p, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(b.t, err)
	return v
}

// TestBulkRetryInABrowser: in Chromium, ops goes from the dead jobs to
// the bulk retry, is shown how many it would retry, confirms, and sees them
// retried: each dead job has a new queued job naming it, whose first event
// is ops's.
func TestBulkRetryInABrowser(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	s.Allow(t, testkit.Grants(ops, project, access.JobRetry)...)
	ctx := t.Context()
	api := s.consoleJobsIn(t, ops)
	// Two more dead jobs beside the seed's.
	work := s.consoleJobsIn(t, app)
	for i := range 2 {
		e, err := work.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Queue: "billing", Payload: json.RawMessage(fmt.Sprint(i)),
			Retry: jobs.RetryPolicy{MaxAttempts: 1}})
		require.NoError(t, err)
		j, ok, err := work.ClaimID(ctx, e.Job.ID, jobs.ClaimOptions{})
		require.NoError(t, err)
		require.True(t, ok)
		_, err = work.Fail(ctx, j.Lease(), jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: "the ledger timed out"})
		require.NoError(t, err)
	}
	dead, err := api.List(ctx, jobs.Filter{State: jobs.Dead})
	require.NoError(t, err)
	require.Len(t, dead, 3)

	b := s.opsInBrowser(t)
	b.open("/console/acme/dead", "#bulk-retry")
	require.NoError(t, b.p.Run(chromedp.Click(chromedp.ID("bulk-retry")), chromedp.WaitVisible(chromedp.ID("bulk-count"))))
	require.Equal(t, http.StatusOK, b.p.Status())
	require.Equal(t, "3", b.text("#count"), "the count first")
	require.Contains(t, b.text("#bulk-filter"), "dead jobs")
	for _, j := range dead {
		got, err := api.Get(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, jobs.Dead, got.State, "nothing retried before the confirmation")
	}
	b.p.Screenshot("bulk-retry-count")

	b.submit("#bulk-confirm", "#bulk-submit", "#bulk-done")
	require.Equal(t, "3", b.text("#acted"))
	b.p.Screenshot("bulk-retry-done")
	for _, j := range dead {
		retries, err := api.Retries(ctx, j.ID)
		require.NoError(t, err)
		require.Len(t, retries, 1, "job %d retried once", j.ID)
		r, err := api.Get(ctx, retries[0])
		require.NoError(t, err)
		require.Equal(t, jobs.Queued, r.State)
		require.Equal(t, j.ID, r.RetryOf)
		require.Equal(t, j.Kind, r.Kind)
		require.JSONEq(t, string(j.Payload), string(r.Payload))
		h, err := api.History(ctx, r.ID)
		require.NoError(t, err)
		require.Equal(t, ops, h[0].Actor, "the retry is recorded as the viewer's")
		require.Equal(t, "retry of job "+strconv.FormatInt(j.ID, 10), h[0].Detail)
		require.Contains(t, b.text(fmt.Sprintf("#acted-%d", r.ID)), strconv.FormatInt(j.ID, 10))
	}
}

// TestQueuePauseInABrowser: in Chromium, ops pauses queue hold of acme
// while a worker serving it runs; jobs enqueued on it then stay queued,
// though the worker claims from the queue (a job of project other on it
// runs), until ops resumes it, when they run.
func TestQueuePauseInABrowser(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	s.Allow(t, testkit.Grants(ops, project, access.QueuePause)...)
	s.Allow(t, testkit.Grants(app, project, access.JobClaim)...)
	pc, err := projects.NewClient(s.Pool, projects.Config{Actor: ana, Clock: s.Clock})
	require.NoError(t, err)
	_, err = pc.Create(t.Context(), testkit.Other)
	require.NoError(t, err)
	s.Allow(t, testkit.Grants(app, testkit.Other, access.JobCreate, access.JobClaim)...)
	ctx := t.Context()
	inAcme := s.consoleJobsIn(t, app)
	var inOther *jobs.Client
	inOther, err = jobs.NewClient(s.API, jobs.Config{Project: testkit.Other, Actor: app, Clock: s.Clock})
	require.NoError(t, err)
	enqueue := func(c *jobs.Client, n int) []int64 {
		var ids []int64
		for i := range n {
			e, err := c.Enqueue(ctx, jobs.Spec{Kind: "hold.work", Queue: "hold", Payload: json.RawMessage(fmt.Sprint(i))})
			require.NoError(t, err)
			ids = append(ids, e.Job.ID)
		}
		return ids
	}
	// A job on the queue makes it one the queues page lists.
	first := enqueue(inAcme, 1)

	b := s.opsInBrowser(t)
	b.open("/console/acme/queues", "#queue-hold")
	require.Contains(t, b.text("#queue-hold"), "running")
	require.NoError(t, b.p.Run(chromedp.SendKeys(chromedp.ID("reason-hold"), "the ledger is being migrated")))
	b.submit("#confirm-hold", "#pause-button-hold", "#paused-hold")
	require.Contains(t, b.text("#queue-hold"), "Paused by user:ops")
	require.Contains(t, b.text("#history-hold"), "the ledger is being migrated")
	b.p.Screenshot("queue-paused")

	// The worker starts with the queue paused, and more jobs arrive.
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, jobs.MustKind[json.RawMessage]("hold.work", 1), func(context.Context, *jobs.Typed[json.RawMessage]) error {
		return nil
	}))
	succeeded := make(chan int64, 100)
	w, err := worker.NewClient(s.API, worker.Config{
		Actor: app, Registry: reg, Clock: s.Clock, Deployment: "test", Logger: testkit.Logger,
		Queues: map[string]int{"hold": 10}, PollInterval: 50 * time.Millisecond, SweepEvery: time.Hour,
		OnEvent: func(ev worker.Event) {
			if ev.Type == worker.EventSucceeded {
				succeeded <- ev.JobID
			}
		},
	})
	require.NoError(t, err)
	testkit.Start(t, w)
	held := append(first, enqueue(inAcme, 3)...)
	// other's job on the same queue comes after acme's: a claim that takes
	// it sees them, and leaves them because the queue is paused in acme.
	sentinel := enqueue(inOther, 1)[0]
	select {
	case id := <-succeeded:
		require.Equal(t, sentinel, id, "only other's job runs")
	case <-time.After(60 * time.Second):
		t.Fatal("the worker ran nothing of queue hold")
	}
	for _, id := range held {
		j, err := inAcme.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.Queued, j.State, "job %d of the paused queue is not claimed", id)
	}
	b.open("/console/acme/queues", "#queue-hold")
	require.Equal(t, "4", b.text("#queued-hold"))

	b.submit("#confirm-hold", "#resume-button-hold", "#running-hold")
	b.p.Screenshot("queue-resumed")
	done := map[int64]bool{}
	for len(done) < len(held) {
		select {
		case id := <-succeeded:
			done[id] = true
		case <-time.After(60 * time.Second):
			t.Fatalf("after the resume, %d of %d jobs ran", len(done), len(held))
		}
	}
	for _, id := range held {
		require.True(t, done[id], "job %d ran after the resume", id)
	}
	require.Contains(t, b.text("#history-hold"), "resumed")
}
