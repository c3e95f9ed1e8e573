// Package consoletest seeds a database with a bit of everything docket's
// console shows, for the tests of the console and of the docket command
// that read the same things.
package consoletest

import (
	"encoding/json"
	"fmt"
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

// Inbox delivers acme's messages; Seed's dead letter is its.
const Inbox access.Actor = "svc:inbox"

// BatchWork is the plan every item of Seed's batch runs: one step, reading
// the item's input.
var BatchWork = plans.Plan{Steps: []plans.Step{
	{ID: "work", Kind: "t.work", Terminal: true, Args: []plans.Arg{{Name: "n", Source: plans.Input("n")}}},
}}

// Seeded is what Seed made in acme.
type Seeded struct {
	Succeeded, Dead, Uncertain, Claimed, Queued, Failed, UncertainMail int64
	Bulk                                                               []int64
	Case                                                               cases.Case
	Wait                                                               cases.Awaited
	Obligation                                                         cases.Obligation
	Letter                                                             cases.Delivered
	Schedule                                                           schedules.Schedule
	Run                                                                plans.Run
	Batch                                                              batches.Report
}

// Seed makes in project acme of env, as the application (svc:app) would, jobs in every state in
// queues billing and mail and 55 in queue bulk, a case with a key, an
// obligation and a wait, a dead letter, a schedule, a run of a plan and a
// batch.
func Seed(t testing.TB, h testkit.Env) Seeded {
	t.Helper()
	ctx := t.Context()
	var s Seeded
	jc, err := jobs.NewClient(h.API, jobs.Config{Project: testkit.Acme, Actor: testkit.App, Clock: h.Clock})
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
	s.Succeeded = enqueue("billing.invoice", "billing", 3)
	_, err = jc.Complete(ctx, claim(s.Succeeded), json.RawMessage(`{"ok":true}`), nil)
	require.NoError(t, err)
	s.Dead = enqueue("billing.invoice", "billing", 1)
	fail(s.Dead, jobs.ClassRetryable, "the ledger timed out")
	s.Uncertain = enqueue("billing.invoice", "billing", 3)
	fail(s.Uncertain, jobs.ClassUncertain, "the payment gateway hung up mid-request")
	s.Claimed = enqueue("billing.invoice", "billing", 3)
	claim(s.Claimed)
	s.Queued = enqueue("mail.send", "mail", 3)
	s.Failed = enqueue("mail.send", "mail", 3)
	fail(s.Failed, jobs.ClassPermanent, "no such mailbox")
	s.UncertainMail = enqueue("mail.send", "mail", 3)
	fail(s.UncertainMail, jobs.ClassUncertain, "the relay went away")
	specs := make([]jobs.Spec, 55)
	for i := range specs {
		specs[i] = jobs.Spec{Kind: "report.page", Queue: "bulk", Payload: json.RawMessage(fmt.Sprint(i))}
	}
	receipts, err := jc.EnqueueMany(ctx, specs)
	require.NoError(t, err)
	for _, r := range receipts {
		s.Bulk = append(s.Bulk, r.ID)
	}

	appCases, err := cases.NewClient(h.API, cases.Config{Actor: testkit.App, Clock: h.Clock})
	require.NoError(t, err)
	doc := cases.Key{Namespace: "document", Value: "DOC-1"}
	a, err := appCases.Admit(ctx, cases.Admission{Project: testkit.Acme, Kind: "supplier.switch", Keys: []cases.Key{doc}})
	require.NoError(t, err)
	s.Case = a.Case
	s.Obligation, err = appCases.RegisterObligation(ctx, s.Case.ID, cases.ObligationSpec{Name: "confirm-switch",
		Due: h.Clock.Now().Add(72 * time.Hour), Escalation: &cases.Escalation{Kind: "supplier.escalate"}})
	require.NoError(t, err)
	s.Wait, err = appCases.Await(ctx, s.Case.ID, cases.WaitSpec{Name: "supplier-ack", Keys: []cases.Key{doc},
		Deadline: h.Clock.Now().Add(48 * time.Hour), OnArrival: cases.Continuation{Kind: "supplier.acked"},
		OnTimeout: &cases.Continuation{Kind: "supplier.chase"}})
	require.NoError(t, err)
	inboxCases, err := cases.NewClient(h.API, cases.Config{Actor: Inbox, Clock: h.Clock})
	require.NoError(t, err)
	s.Letter, err = inboxCases.Deliver(ctx, cases.Delivery{Project: testkit.Acme, Producer: "supplier:4711", MessageID: "m-lost",
		Keys: []cases.Key{{Namespace: "document", Value: "DOC-404"}}, Payload: json.RawMessage(`{"iban":"hunter2"}`)})
	require.NoError(t, err)
	_, err = h.Pool.Exec(ctx, `SELECT docket.message_dead_letter_due(100, interval '1 minute', $1, $2)`, string(testkit.Sweeper),
		h.Clock.Now().Add(time.Hour))
	require.NoError(t, err)

	sc, err := schedules.NewClient(h.API, schedules.Config{Actor: testkit.App, Clock: h.Clock})
	require.NoError(t, err)
	s.Schedule, err = sc.Create(ctx, schedules.Spec{Project: testkit.Acme, Name: "nightly", Cron: "30 2 * * *", Zone: "Europe/Berlin",
		Job:       schedules.Job{Kind: "report.nightly", Payload: json.RawMessage(`{}`)},
		Unbounded: true, UnboundedReason: "the nightly report runs for as long as the service"})
	require.NoError(t, err)

	pc, err := plans.NewClient(h.API, plans.Config{Actor: testkit.App, Clock: h.Clock})
	require.NoError(t, err)
	s.Run, err = pc.Start(ctx, plans.Start{Project: testkit.Acme, Plan: plans.Plan{Steps: []plans.Step{
		{ID: "reserve", Kind: "stock.reserve", Compensation: "stock.release"},
		{ID: "charge", Kind: "billing.charge", After: []string{"reserve"}, Terminal: true},
	}}})
	require.NoError(t, err)

	bc, err := batches.NewClient(h.API, batches.Config{Actor: testkit.App, Clock: h.Clock})
	require.NoError(t, err)
	s.Batch, err = bc.Open(ctx, testkit.Acme, "nightly-invoices", BatchWork)
	require.NoError(t, err)
	_, err = bc.Admit(ctx, s.Batch.ID, []batches.Item{
		{Key: "k1", Input: json.RawMessage(`{"n": 1}`), Trusted: true},
		{Key: "k2", Input: json.RawMessage(`{"n": 2}`), Trusted: true},
	}, false)
	require.NoError(t, err)
	return s
}
