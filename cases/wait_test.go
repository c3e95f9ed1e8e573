package cases_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// reply is the wait most tests register: a supplier's reply on document
// DOC-1, for two days, with both continuations.
func reply(keys ...cases.Key) cases.WaitSpec {
	if len(keys) == 0 {
		keys = []cases.Key{key("document", "DOC-1")}
	}
	return cases.WaitSpec{
		Name:      "supplier-reply",
		Keys:      keys,
		Deadline:  t0.Add(48 * time.Hour),
		OnArrival: cases.Continuation{Kind: "supplier.reply", Payload: json.RawMessage(`{"step":"confirm"}`)},
		OnTimeout: &cases.Continuation{Kind: "supplier.chase"},
	}
}

// message is a delivery from the supplier with id, filed under keys.
func message(id string, keys ...cases.Key) cases.Delivery {
	if len(keys) == 0 {
		keys = []cases.Key{key("document", "DOC-1")}
	}
	return cases.Delivery{
		Project: project, Producer: "supplier:4711", MessageID: id, Keys: keys,
		Payload: json.RawMessage(`{"accepted":true}`),
	}
}

// jobOf reads job id as the sweeper, who may read acme's jobs.
func jobOf(t testing.TB, e env, id int64) jobs.Job {
	t.Helper()
	jc, err := jobs.NewClient(e.API, jobs.Config{Actor: sweeper, Clock: e.Clock})
	require.NoError(t, err)
	j, err := jc.Get(context.Background(), id)
	require.NoError(t, err)
	return j
}

// continuations counts the jobs of case id of kind.
func continuations(t testing.TB, e env, caseID int64, kind string) int {
	t.Helper()
	var n int
	require.NoError(t, e.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM docket.jobs WHERE case_id = $1 AND kind = $2`, caseID, kind).Scan(&n))
	return n
}

func TestDeliverThenAwaitConsumesOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	in := e.as(t, inbox)

	d, err := in.Deliver(ctx, message("m-1", key("document", "DOC-1"), key("kind", "confirmation")))
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, d.Status)
	require.False(t, d.Duplicate)
	require.Zero(t, d.ContinuationJobID)

	e.Clock.Advance(time.Hour)
	a, err := e.app.Await(ctx, c.ID, reply())
	require.NoError(t, err)
	require.True(t, a.Created)
	require.Equal(t, cases.Satisfied, a.Status)
	require.Equal(t, d.ID, a.SatisfiedBy)
	require.NotZero(t, a.ContinuationJobID)

	m, err := in.Message(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Consumed, m.Status)
	require.Equal(t, a.ID, m.ConsumedBy)
	require.Equal(t, 1, continuations(t, e, c.ID, "supplier.reply"))

	j := jobOf(t, e, a.ContinuationJobID)
	require.Equal(t, c.ID, j.CaseID)
	require.JSONEq(t, `{"step":"confirm"}`, string(j.Payload))
	w, err := cases.WakeOf(j)
	require.NoError(t, err)
	require.Equal(t, cases.WakeMessage, w.Reason)
	require.Equal(t, a.ID, w.WaitID)
	require.Equal(t, "supplier-reply", w.Wait)
	require.Equal(t, "m-1", w.Message.MessageID)
	require.Equal(t, "supplier:4711", w.Message.Producer)
	require.Equal(t, t0, w.Message.ArrivedAt)
	require.JSONEq(t, `{"accepted":true}`, string(w.Message.Payload))
	require.ElementsMatch(t, []cases.Key{key("document", "DOC-1"), key("kind", "confirmation")}, w.Message.Keys)

	// A second wait on the key finds nothing: the message is spent.
	second := reply()
	second.Name = "second-reply"
	a2, err := e.app.Await(ctx, c.ID, second)
	require.NoError(t, err)
	require.Equal(t, cases.Waiting, a2.Status)
	require.Equal(t, 1, continuations(t, e, c.ID, "supplier.reply"))
}

func TestAwaitThenDeliverConsumesOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	in := e.as(t, inbox)

	a, err := e.app.Await(ctx, c.ID, reply())
	require.NoError(t, err)
	require.Equal(t, cases.Waiting, a.Status)
	require.Zero(t, a.ContinuationJobID)

	e.Clock.Advance(time.Hour)
	d, err := in.Deliver(ctx, message("m-1"))
	require.NoError(t, err)
	require.Equal(t, cases.Consumed, d.Status)
	require.Equal(t, a.ID, d.ConsumedBy)
	require.NotZero(t, d.ContinuationJobID)

	// The producer retries: the same message, not a second one.
	again, err := in.Deliver(ctx, message("m-1"))
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, d.ID, again.ID)
	require.Equal(t, d.ContinuationJobID, again.ContinuationJobID)

	w, err := e.app.Wait(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Satisfied, w.Status)
	require.Equal(t, d.ID, w.SatisfiedBy)
	require.Equal(t, d.ContinuationJobID, w.ContinuationJobID)
	require.Equal(t, 1, continuations(t, e, c.ID, "supplier.reply"))
	require.Equal(t, 2, countEvents(t, e.Pool, c.ID, cases.EventWait))
}

// TestAWaitTakesNoMessageThatArrivedAfterItsDeadline: a deliverer whose clock
// runs ahead stores a message "after" a wait's deadline; the wait, registered
// later, does not take it, as a delivery after the deadline would not
// satisfy a waiting wait either.
func TestAWaitTakesNoMessageThatArrivedAfterItsDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	ahead, err := cases.NewClient(e.API, cases.Config{Actor: inbox, Clock: db.NewFakeClock(t0.Add(2 * time.Hour))})
	require.NoError(t, err)
	d, err := ahead.Deliver(ctx, message("m-1"))
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, d.Status)

	spec := reply()
	spec.Deadline = t0.Add(time.Hour)
	a, err := e.app.Await(ctx, c.ID, spec)
	require.NoError(t, err)
	require.Equal(t, cases.Waiting, a.Status)

	// A wait whose deadline is after the arrival takes it.
	later := reply()
	later.Name, later.Deadline = "later-reply", t0.Add(3*time.Hour)
	b, err := e.app.Await(ctx, c.ID, later)
	require.NoError(t, err)
	require.Equal(t, cases.Satisfied, b.Status)
	require.Equal(t, d.ID, b.SatisfiedBy)
}
