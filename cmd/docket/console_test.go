package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/schedules"
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
type consoleSeed struct {
	succeeded, dead, uncertain, claimed, queued, failed, uncertainMail int64
	bulk                                                               []int64
	kase                                                               cases.Case
	wait                                                               cases.Awaited
	obligation                                                         cases.Obligation
	letter                                                             cases.Delivered
	schedule                                                           schedules.Schedule
	run                                                                plans.Run
	batch                                                              batches.Report
}

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
	s.seed = seedConsole(t, h)
	handler, err := newServeHandler(h.API, serveConfig{Projects: []string{project, testkit.Other}, Clock: h.Clock,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// seedConsole makes, as the application would, jobs in every state in
// queues billing and mail and 55 in queue bulk, a case with a key, an
// obligation and a wait, a dead letter, a schedule, a run of a plan and a
// batch.
func seedConsole(t *testing.T, h harness) consoleSeed {
	t.Helper()
	ctx := t.Context()
	var s consoleSeed
	jc, err := jobs.NewClient(h.API, jobs.Config{Project: project, Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	enqueue := func(kind, queue string, attempts int) int64 {
		e, err := jc.Enqueue(ctx, jobs.Spec{Kind: kind, Queue: queue, Payload: json.RawMessage(`{"invoice":"INV-7","remark":"<b>bold</b>"}`),
			Retry: jobs.RetryPolicy{MaxAttempts: attempts}})
		require.NoError(t, err)
		return e.Job.ID
	}
	claim := func(id int64) jobs.Lease {
		j, ok, err := jc.ClaimID(ctx, id, jobs.ClaimOptions{})
		require.NoError(t, err)
		require.True(t, ok)
		return j.Lease()
	}
	fail := func(id int64, class jobs.FailureClass, why string) {
		_, err := jc.Fail(ctx, claim(id), jobs.Failure{Class: class, Diagnostic: why})
		require.NoError(t, err)
	}
	s.succeeded = enqueue("billing.invoice", "billing", 3)
	_, err = jc.Complete(ctx, claim(s.succeeded), json.RawMessage(`{"ok":true}`), nil)
	require.NoError(t, err)
	s.dead = enqueue("billing.invoice", "billing", 1)
	fail(s.dead, jobs.ClassRetryable, "the ledger timed out")
	s.uncertain = enqueue("billing.invoice", "billing", 3)
	fail(s.uncertain, jobs.ClassUncertain, "the payment gateway hung up mid-request")
	s.claimed = enqueue("billing.invoice", "billing", 3)
	claim(s.claimed)
	s.queued = enqueue("mail.send", "mail", 3)
	s.failed = enqueue("mail.send", "mail", 3)
	fail(s.failed, jobs.ClassPermanent, "no such mailbox")
	s.uncertainMail = enqueue("mail.send", "mail", 3)
	fail(s.uncertainMail, jobs.ClassUncertain, "the relay went away")
	specs := make([]jobs.Spec, 55)
	for i := range specs {
		specs[i] = jobs.Spec{Kind: "report.page", Queue: "bulk", Payload: json.RawMessage(fmt.Sprint(i))}
	}
	receipts, err := jc.EnqueueMany(ctx, specs)
	require.NoError(t, err)
	for _, r := range receipts {
		s.bulk = append(s.bulk, r.ID)
	}

	appCases, err := cases.NewClient(h.API, cases.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	doc := cases.Key{Namespace: "document", Value: "DOC-1"}
	a, err := appCases.Admit(ctx, cases.Admission{Project: project, Kind: "supplier.switch", Keys: []cases.Key{doc}})
	require.NoError(t, err)
	s.kase = a.Case
	s.obligation, err = appCases.RegisterObligation(ctx, s.kase.ID, cases.ObligationSpec{Name: "confirm-switch",
		Due: h.Clock.Now().Add(72 * time.Hour), Escalation: &cases.Escalation{Kind: "supplier.escalate"}})
	require.NoError(t, err)
	s.wait, err = appCases.Await(ctx, s.kase.ID, cases.WaitSpec{Name: "supplier-ack", Keys: []cases.Key{doc},
		Deadline: h.Clock.Now().Add(48 * time.Hour), OnArrival: cases.Continuation{Kind: "supplier.acked"},
		OnTimeout: &cases.Continuation{Kind: "supplier.chase"}})
	require.NoError(t, err)
	inboxCases, err := cases.NewClient(h.API, cases.Config{Actor: inbox, Clock: h.Clock})
	require.NoError(t, err)
	s.letter, err = inboxCases.Deliver(ctx, cases.Delivery{Project: project, Producer: "supplier:4711", MessageID: "m-lost",
		Keys: []cases.Key{{Namespace: "document", Value: "DOC-404"}}, Payload: json.RawMessage(`{"iban":"hunter2"}`)})
	require.NoError(t, err)
	_, err = h.Pool.Exec(ctx, `SELECT docket.message_dead_letter_due(100, interval '1 minute', $1, $2)`, string(sweeper),
		h.Clock.Now().Add(time.Hour))
	require.NoError(t, err)

	sc, err := schedules.NewClient(h.API, schedules.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	s.schedule, err = sc.Create(ctx, schedules.Spec{Project: project, Name: "nightly", Cron: "30 2 * * *", Zone: "Europe/Berlin",
		Job:       schedules.Job{Kind: "report.nightly", Payload: json.RawMessage(`{}`)},
		Unbounded: true, UnboundedReason: "the nightly report runs for as long as the service"})
	require.NoError(t, err)

	pc, err := plans.NewClient(h.API, plans.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	s.run, err = pc.Start(ctx, plans.Start{Project: project, Plan: plans.Plan{Steps: []plans.Step{
		{ID: "reserve", Kind: "stock.reserve", Compensation: "stock.release"},
		{ID: "charge", Kind: "billing.charge", After: []string{"reserve"}, Terminal: true},
	}}})
	require.NoError(t, err)

	bc, err := batches.NewClient(h.API, batches.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	s.batch, err = bc.Open(ctx, project, "nightly-invoices", batchWork)
	require.NoError(t, err)
	_, err = bc.Admit(ctx, s.batch.ID, []batches.Item{
		{Key: "k1", Input: json.RawMessage(`{"n": 1}`), Trusted: true},
		{Key: "k2", Input: json.RawMessage(`{"n": 2}`), Trusted: true},
	}, false)
	require.NoError(t, err)
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
