package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/internal/testkit"
)

// TestWaitContinuations: a case's page lists the job a satisfied wait's
// arrival continuation enqueued under "On arrival", and the job an expired
// wait's timeout continuation enqueued under "On timeout"; a wait still
// waiting names no job.
func TestWaitContinuations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := setup(t,
		testkit.Grants(app, project, access.CaseAdmit, access.JobCreate),
		testkit.Grants(inbox, project, access.MessageDeliver, access.JobCreate),
		testkit.Grants(sweeper, project, access.CaseSweep, access.JobCreate),
		testkit.Grants(testkit.Ops, project, access.CaseView, access.JobCancel))
	appCases, err := cases.NewClient(h.API, cases.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	doc := cases.Key{Namespace: "document", Value: "SW-1"}
	a, err := appCases.Admit(ctx, cases.Admission{Project: project, Kind: "supplier.switch", Keys: []cases.Key{doc}})
	require.NoError(t, err)
	await := func(name string, keys []cases.Key, deadline time.Duration) cases.Awaited {
		w, err := appCases.Await(ctx, a.Case.ID, cases.WaitSpec{Name: name, Keys: keys, Deadline: h.Clock.Now().Add(deadline),
			OnArrival: cases.Continuation{Kind: "switch.acknowledged"}, OnTimeout: &cases.Continuation{Kind: "switch.chase"}})
		require.NoError(t, err)
		return w
	}
	acked := await("ack", []cases.Key{doc}, 48*time.Hour)
	late := await("confirm", []cases.Key{{Namespace: "confirmation", Value: "SW-1"}}, time.Hour)
	open := await("invoice", []cases.Key{{Namespace: "invoice", Value: "SW-1"}}, 96*time.Hour)

	inboxCases, err := cases.NewClient(h.API, cases.Config{Actor: inbox, Clock: h.Clock})
	require.NoError(t, err)
	_, err = inboxCases.Deliver(ctx, cases.Delivery{Project: project, Producer: "supplier:4711", MessageID: "ack-1",
		Keys: []cases.Key{doc}, Payload: json.RawMessage(`{}`)})
	require.NoError(t, err)
	h.Clock.Advance(2 * time.Hour)
	var expired int
	require.NoError(t, h.API.QueryRow(ctx, `SELECT count(*) FROM docket.wait_expire_due(100, $1, $2)`, string(sweeper),
		h.Clock.Now()).Scan(&expired))
	require.Equal(t, 1, expired)
	waits, err := appCases.Waits(ctx, a.Case.ID)
	require.NoError(t, err)
	jobOf := map[int64]int64{}
	for _, w := range waits {
		jobOf[w.ID] = w.ContinuationJobID
	}
	require.NotZero(t, jobOf[acked.ID])
	require.NotZero(t, jobOf[late.ID])
	require.Zero(t, jobOf[open.ID])

	handler, err := newTestHandler(h.API, Config{Projects: []string{project}, Clock: h.Clock})
	require.NoError(t, err)
	s := site{url: serveHandler(t, handler)}
	status, body := s.as(t, "ops").get(fmt.Sprintf("/console/acme/cases/%d", a.Case.ID))
	require.Equal(t, http.StatusOK, status, body)
	link := func(id int64) string { return fmt.Sprintf(`(<a href="/console/acme/jobs/%d">job %d</a>)`, id, id) }
	requireAll(t, body,
		fmt.Sprintf(`<td class="on-arrival">switch.acknowledged %s</td><td class="on-timeout">switch.chase</td>`, link(jobOf[acked.ID])),
		fmt.Sprintf(`<td class="on-arrival">switch.acknowledged</td><td class="on-timeout">switch.chase %s</td>`, link(jobOf[late.ID])),
		fmt.Sprintf(`<tr id="wait-%d" data-status="waiting">`, open.ID))
	row := body[indexOf(t, body, fmt.Sprintf(`<tr id="wait-%d"`, open.ID)):]
	require.NotContains(t, row[:indexOf(t, row, "</tr>")], "job ")
}
