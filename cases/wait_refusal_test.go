package cases_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// Two more of the cast, for the waits' refusals: courier holds
// message.deliver on acme but not job.create; clerk holds case.admit on acme
// but not job.create.
const (
	courier access.Actor = "svc:courier"
	clerk   access.Actor = "svc:clerk"
)

// waitWorld is what the waits' refusal tests refuse things against: case c
// of acme waiting for supplier-reply (reply()) and holding timer reminder;
// of c's other waits, one satisfied, one expired and one withdrawn; closed, a
// closed case of acme to which message dead was addressed (so it is a dead
// letter); theirs, a case of project other; buffered, a message no wait
// claimed.
type waitWorld struct {
	c, closed, theirs                 cases.Case
	waiting, satisfied, expired, gone cases.Wait
	buffered, consumed, dead          cases.Message
	timer                             cases.Timer
	remind                            cases.Continuation
	plainJob                          jobs.Job
	deliver                           func(actor access.Actor, d cases.Delivery) error
	deliverTo                         func(actor access.Actor, caseID int64, d cases.Delivery) error
	await                             func(actor access.Actor, caseID int64, spec cases.WaitSpec) error
	sleep                             func(actor access.Actor, caseID int64, name string, at time.Time, k cases.Continuation) error
	sweepDeadLetters                  func(horizon time.Duration, limit int) (int, error)
	keys33, keyTwice                  []cases.Key
	oneKey                            []cases.Key
	overPayload, farPayload           json.RawMessage
}

// newWaitWorld builds a waitWorld on e.
func newWaitWorld(t *testing.T, e env) waitWorld {
	t.Helper()
	ctx := context.Background()
	e.Env.Allow(t, testkit.Join(
		testkit.Grants(courier, project, access.MessageDeliver),
		testkit.Grants(clerk, project, access.CaseAdmit),
	)...)
	in := e.as(t, inbox)
	var w waitWorld
	w.c = e.admit(t, key("document", "DOC-1")).Case

	a, err := e.app.Await(ctx, w.c.ID, reply())
	require.NoError(t, err)
	require.Equal(t, cases.Waiting, a.Status)
	w.waiting = a.Wait

	confirm := reply(key("document", "DOC-2"))
	confirm.Name = "confirmation"
	a, err = e.app.Await(ctx, w.c.ID, confirm)
	require.NoError(t, err)
	d, err := in.Deliver(ctx, message("m-consumed", key("document", "DOC-2")))
	require.NoError(t, err)
	require.Equal(t, cases.Consumed, d.Status)
	w.satisfied, err = e.app.Wait(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Satisfied, w.satisfied.Status)
	w.consumed = d.Message

	ack := reply(key("document", "DOC-3"))
	ack.Name, ack.Deadline, ack.OnTimeout = "ack", t0.Add(time.Hour), nil
	a, err = e.app.Await(ctx, w.c.ID, ack)
	require.NoError(t, err)
	_, err = e.Pool.Exec(ctx, `SELECT docket.wait_expire_due(100, 'svc:sweeper', $1)`, t0.Add(2*time.Hour))
	require.NoError(t, err)
	w.expired, err = e.app.Wait(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Expired, w.expired.Status)

	later := reply(key("document", "DOC-4"))
	later.Name = "later"
	a, err = e.app.Await(ctx, w.c.ID, later)
	require.NoError(t, err)
	w.gone, err = e.app.WithdrawWait(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, cases.WaitWithdrawn, w.gone.Status)

	w.remind = cases.Continuation{Kind: "case.remind", Payload: json.RawMessage(`{"n":1}`)}
	w.timer, err = e.app.SleepUntil(ctx, w.c.ID, "reminder", t0.Add(time.Hour), w.remind)
	require.NoError(t, err)

	d, err = in.Deliver(ctx, message("m-buffered", key("document", "DOC-5")))
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, d.Status)
	w.buffered = d.Message

	w.closed = e.admit(t, key("document", "DOC-9")).Case
	d, err = in.DeliverTo(ctx, w.closed.ID, message("m-dead", key("document", "DOC-9")))
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, d.Status)
	_, err = e.app.Close(ctx, w.closed.ID)
	require.NoError(t, err)
	w.dead, err = in.Message(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, cases.DeadLettered, w.dead.Status)

	theirs, err := e.as(t, rival).Admit(ctx, cases.Admission{Project: other, Kind: "supplier.switch",
		Keys: []cases.Key{key("document", "DOC-1")}})
	require.NoError(t, err)
	w.theirs = theirs.Case

	jc, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	enq, err := jc.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: json.RawMessage(`{"wait_id":1}`)})
	require.NoError(t, err)
	w.plainJob = enq.Job

	w.deliver = func(actor access.Actor, d cases.Delivery) error {
		_, err := e.as(t, actor).Deliver(ctx, d)
		return err
	}
	w.deliverTo = func(actor access.Actor, caseID int64, d cases.Delivery) error {
		_, err := e.as(t, actor).DeliverTo(ctx, caseID, d)
		return err
	}
	w.await = func(actor access.Actor, caseID int64, spec cases.WaitSpec) error {
		_, err := e.as(t, actor).Await(ctx, caseID, spec)
		return err
	}
	w.sleep = func(actor access.Actor, caseID int64, name string, at time.Time, k cases.Continuation) error {
		_, err := e.as(t, actor).SleepUntil(ctx, caseID, name, at, k)
		return err
	}
	w.sweepDeadLetters = func(horizon time.Duration, limit int) (int, error) {
		var n int
		err := db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
			var err error
			n, err = cases.DeadLetterSweep(0, horizon).Func(ctx, &worker.SweepRun{
				Tx: tx, Now: e.Clock.Now(), Limit: limit, Actor: sweeper, Clock: e.Clock})
			return err
		})
		return n, err
	}

	w.keys33 = make([]cases.Key, cases.MaxKeys+1)
	for i := range w.keys33 {
		w.keys33[i] = key("k", strings.Repeat("v", i+1))
	}
	w.keyTwice = []cases.Key{key("document", "DOC-7"), key("document", "DOC-7")}
	w.oneKey = []cases.Key{key("document", "DOC-7")}
	// A JSON string of n bytes of text, which jsonb renders as it came: one
	// byte over the bound, and far over it.
	str := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`) }
	w.overPayload = str(cases.MaxMessagePayload + 1)
	w.farPayload = str(4*cases.MaxMessagePayload + 1)
	return w
}

// TestWaitRefusals: malformed, oversized, out-of-range and unauthorised input
// to messages, waits and timers is refused with its sentinel, and writes
// nothing.
func TestWaitRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	w := newWaitWorld(t, e)

	// delivery is a well-formed delivery of a new message, changed by edit.
	delivery := func(edit func(d *cases.Delivery)) cases.Delivery {
		d := message("m-new", w.oneKey...)
		edit(&d)
		return d
	}
	// spec is a well-formed new wait on c, changed by edit.
	spec := func(edit func(s *cases.WaitSpec)) cases.WaitSpec {
		s := reply(w.oneKey...)
		s.Name = "new-wait"
		edit(&s)
		return s
	}
	timeout := func(k cases.Continuation) func(s *cases.WaitSpec) {
		return func(s *cases.WaitSpec) { s.OnTimeout = &k }
	}
	arrival := func(edit func(k *cases.Continuation)) func(s *cases.WaitSpec) {
		return func(s *cases.WaitSpec) { edit(&s.OnArrival) }
	}
	wakeOf := func(j jobs.Job) error { _, err := cases.WakeOf(j); return err }
	rawWait := `INSERT INTO docket.waits (case_id, project, name, keys, deadline, on_arrival_kind, on_arrival_queue,
		on_arrival_payload, on_arrival_payload_schema, on_arrival_max_attempts, created_by, created_at)
		VALUES ($1, $2, 'by-hand', '{document:DOC-7}', $3, 'case.reply', 'default', '{}', 1, 5, 'user:ops', '2026-11-03T09:00:00Z')`

	for _, tc := range []struct {
		name string
		do   func() error
		want error
	}{
		// Deliver: the message.
		{"deliver: empty producer", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Producer = "" }))
		}, db.ErrInvalidArgument},
		{"deliver: producer over 128 characters", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Producer = strings.Repeat("p", 129) }))
		}, db.ErrInvalidArgument},
		{"deliver: producer with a control character", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Producer = "supplier\t4711" }))
		}, db.ErrInvalidArgument},
		{"deliver: producer with a leading space", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Producer = " supplier" }))
		}, db.ErrInvalidArgument},
		{"deliver: empty message id", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.MessageID = "" }))
		}, db.ErrInvalidArgument},
		{"deliver: message id over 255 characters", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.MessageID = strings.Repeat("m", 256) }))
		}, db.ErrInvalidArgument},
		{"deliver: message id with a control character", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.MessageID = "m\n1" }))
		}, db.ErrInvalidArgument},
		{"deliver: message id with a trailing space", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.MessageID = "m-1 " }))
		}, db.ErrInvalidArgument},
		{"deliver: no keys", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Keys = nil }))
		}, db.ErrInvalidArgument},
		{"deliver: 33 keys", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Keys = w.keys33 }))
		}, db.ErrInvalidArgument},
		{"deliver: a key twice", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Keys = w.keyTwice }))
		}, db.ErrInvalidArgument},
		{"deliver: upper-case namespace", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Keys = []cases.Key{key("Document", "DOC-7")} }))
		}, db.ErrInvalidArgument},
		{"deliver: namespace with a colon", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Keys = []cases.Key{key("doc:ument", "DOC-7")} }))
		}, db.ErrInvalidArgument},
		{"deliver: empty namespace", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Keys = []cases.Key{key("", "DOC-7")} }))
		}, db.ErrInvalidArgument},
		{"deliver: empty key value", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Keys = []cases.Key{key("document", "")} }))
		}, db.ErrInvalidArgument},
		{"deliver: key value over 255 characters", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) {
				d.Keys = []cases.Key{key("document", strings.Repeat("x", 256))}
			}))
		}, db.ErrInvalidArgument},
		{"deliver: key value with a control character", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Keys = []cases.Key{key("document", "DOC\r7")} }))
		}, db.ErrInvalidArgument},
		{"deliver: payload not JSON", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Payload = json.RawMessage(`{"accepted":`) }))
		}, db.ErrInvalidArgument},
		{"deliver: payload one byte over the bound", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Payload = w.overPayload }))
		}, db.ErrInvalidArgument},
		{"deliver: payload far over the bound", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Payload = w.farPayload }))
		}, db.ErrInvalidArgument},
		{"deliver: empty project", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Project = "" }))
		}, db.ErrInvalidArgument},
		{"deliver: malformed project", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Project = "ACME" }))
		}, db.ErrInvalidArgument},
		{"deliver: unknown project", func() error {
			return w.deliver(inbox, delivery(func(d *cases.Delivery) { d.Project = "nowhere" }))
		}, db.ErrNotPermitted},
		{"deliver: by a viewer", func() error { return w.deliver(vic, delivery(func(*cases.Delivery) {})) }, db.ErrNotPermitted},
		{"deliver: by a stranger", func() error { return w.deliver(sam, delivery(func(*cases.Delivery) {})) }, db.ErrNotPermitted},
		{"deliver: by an admitter", func() error { return w.deliver(app, delivery(func(*cases.Delivery) {})) }, db.ErrNotPermitted},
		{"deliver: by another project's actor", func() error {
			return w.deliver(rival, delivery(func(*cases.Delivery) {}))
		}, db.ErrNotPermitted},
		{"deliver: without job.create", func() error { return w.deliver(courier, delivery(func(*cases.Delivery) {})) }, db.ErrNotPermitted},
		{"deliver: same id, other payload", func() error {
			d := message("m-buffered", key("document", "DOC-5"))
			d.Payload = json.RawMessage(`{"accepted":false}`)
			return w.deliver(inbox, d)
		}, db.ErrIdempotencyConflict},
		{"deliver: same id, other keys", func() error {
			return w.deliver(inbox, message("m-buffered", key("document", "DOC-5"), key("kind", "confirmation")))
		}, db.ErrIdempotencyConflict},
		{"deliver: same id, now addressed", func() error {
			return w.deliverTo(inbox, w.c.ID, message("m-buffered", key("document", "DOC-5")))
		}, db.ErrIdempotencyConflict},

		// DeliverTo: the addressee.
		{"deliver to: case 0", func() error { return w.deliverTo(inbox, 0, delivery(func(*cases.Delivery) {})) }, db.ErrInvalidArgument},
		{"deliver to: negative case", func() error { return w.deliverTo(inbox, -1, delivery(func(*cases.Delivery) {})) }, db.ErrInvalidArgument},
		{"deliver to: unknown case", func() error { return w.deliverTo(inbox, 987654, delivery(func(*cases.Delivery) {})) }, db.ErrNotFound},
		{"deliver to: another project's case", func() error {
			return w.deliverTo(inbox, w.theirs.ID, delivery(func(*cases.Delivery) {}))
		}, db.ErrNotFound},
		{"deliver to: by a stranger", func() error { return w.deliverTo(sam, w.c.ID, delivery(func(*cases.Delivery) {})) }, db.ErrNotPermitted},
		{"deliver to: without job.create", func() error {
			return w.deliverTo(courier, w.c.ID, delivery(func(*cases.Delivery) {}))
		}, db.ErrNotPermitted},
		{"deliver to: malformed keys", func() error {
			return w.deliverTo(inbox, w.c.ID, delivery(func(d *cases.Delivery) { d.Keys = w.keyTwice }))
		}, db.ErrInvalidArgument},
		{"deliver to: payload over the bound", func() error {
			return w.deliverTo(inbox, w.c.ID, delivery(func(d *cases.Delivery) { d.Payload = w.overPayload }))
		}, db.ErrInvalidArgument},

		// Await: the wait's terms.
		{"await: no keys", func() error { return w.await(app, w.c.ID, spec(func(s *cases.WaitSpec) { s.Keys = nil })) }, db.ErrInvalidArgument},
		{"await: 33 keys", func() error {
			return w.await(app, w.c.ID, spec(func(s *cases.WaitSpec) { s.Keys = w.keys33 }))
		}, db.ErrInvalidArgument},
		{"await: a key twice", func() error {
			return w.await(app, w.c.ID, spec(func(s *cases.WaitSpec) { s.Keys = w.keyTwice }))
		}, db.ErrInvalidArgument},
		{"await: malformed namespace", func() error {
			return w.await(app, w.c.ID, spec(func(s *cases.WaitSpec) { s.Keys = []cases.Key{key("doc ument", "DOC-7")} }))
		}, db.ErrInvalidArgument},
		{"await: malformed key value", func() error {
			return w.await(app, w.c.ID, spec(func(s *cases.WaitSpec) { s.Keys = []cases.Key{key("document", " DOC-7")} }))
		}, db.ErrInvalidArgument},
		{"await: zero deadline", func() error {
			return w.await(app, w.c.ID, spec(func(s *cases.WaitSpec) { s.Deadline = time.Time{} }))
		}, db.ErrInvalidArgument},
		{"await: deadline now", func() error {
			return w.await(app, w.c.ID, spec(func(s *cases.WaitSpec) { s.Deadline = e.Clock.Now() }))
		}, db.ErrInvalidArgument},
		{"await: deadline past", func() error {
			return w.await(app, w.c.ID, spec(func(s *cases.WaitSpec) { s.Deadline = e.Clock.Now().Add(-time.Microsecond) }))
		}, db.ErrInvalidArgument},
		{"await: deadline over ten years ahead", func() error {
			return w.await(app, w.c.ID, spec(func(s *cases.WaitSpec) { s.Deadline = e.Clock.Now().AddDate(10, 0, 1) }))
		}, db.ErrInvalidArgument},
		{"await: empty name", func() error { return w.await(app, w.c.ID, spec(func(s *cases.WaitSpec) { s.Name = "" })) }, db.ErrInvalidArgument},
		{"await: bad name", func() error {
			return w.await(app, w.c.ID, spec(func(s *cases.WaitSpec) { s.Name = "Supplier Reply" }))
		}, db.ErrInvalidArgument},
		{"await: name over 63 characters", func() error {
			return w.await(app, w.c.ID, spec(func(s *cases.WaitSpec) { s.Name = strings.Repeat("n", 64) }))
		}, db.ErrInvalidArgument},
		{"await: arrival without kind", func() error {
			return w.await(app, w.c.ID, spec(arrival(func(k *cases.Continuation) { k.Kind = "" })))
		}, db.ErrInvalidArgument},
		{"await: arrival bad kind", func() error {
			return w.await(app, w.c.ID, spec(arrival(func(k *cases.Continuation) { k.Kind = "Supplier.Reply" })))
		}, db.ErrInvalidArgument},
		{"await: arrival bad queue", func() error {
			return w.await(app, w.c.ID, spec(arrival(func(k *cases.Continuation) { k.Queue = "the queue" })))
		}, db.ErrInvalidArgument},
		{"await: arrival payload not JSON", func() error {
			return w.await(app, w.c.ID, spec(arrival(func(k *cases.Continuation) { k.Payload = json.RawMessage(`{`) })))
		}, db.ErrInvalidArgument},
		{"await: arrival 101 attempts", func() error {
			return w.await(app, w.c.ID, spec(arrival(func(k *cases.Continuation) { k.MaxAttempts = 101 })))
		}, db.ErrInvalidArgument},
		{"await: arrival negative attempts", func() error {
			return w.await(app, w.c.ID, spec(arrival(func(k *cases.Continuation) { k.MaxAttempts = -1 })))
		}, db.ErrInvalidArgument},
		{"await: arrival negative payload schema", func() error {
			return w.await(app, w.c.ID, spec(arrival(func(k *cases.Continuation) { k.PayloadSchema = -1 })))
		}, db.ErrInvalidArgument},
		{"await: timeout bad kind", func() error {
			return w.await(app, w.c.ID, spec(timeout(cases.Continuation{Kind: "supplier chase"})))
		}, db.ErrInvalidArgument},
		{"await: timeout without kind", func() error {
			return w.await(app, w.c.ID, spec(timeout(cases.Continuation{Queue: "default"})))
		}, db.ErrInvalidArgument},
		{"await: timeout bad queue", func() error {
			return w.await(app, w.c.ID, spec(timeout(cases.Continuation{Kind: "supplier.chase", Queue: "-"})))
		}, db.ErrInvalidArgument},
		{"await: timeout 101 attempts", func() error {
			return w.await(app, w.c.ID, spec(timeout(cases.Continuation{Kind: "supplier.chase", MaxAttempts: 101})))
		}, db.ErrInvalidArgument},
		{"await: timeout negative payload schema", func() error {
			return w.await(app, w.c.ID, spec(timeout(cases.Continuation{Kind: "supplier.chase", PayloadSchema: -3})))
		}, db.ErrInvalidArgument},
		{"await: unknown case", func() error { return w.await(app, 987654, spec(func(*cases.WaitSpec) {})) }, db.ErrNotFound},
		{"await: case 0", func() error { return w.await(app, 0, spec(func(*cases.WaitSpec) {})) }, db.ErrNotFound},
		{"await: another project's case", func() error { return w.await(app, w.theirs.ID, spec(func(*cases.WaitSpec) {})) }, db.ErrNotFound},
		{"await: by another project's actor", func() error { return w.await(rival, w.c.ID, spec(func(*cases.WaitSpec) {})) }, db.ErrNotFound},
		{"await: by a viewer", func() error { return w.await(vic, w.c.ID, spec(func(*cases.WaitSpec) {})) }, db.ErrNotFound},
		{"await: by a stranger", func() error { return w.await(sam, w.c.ID, spec(func(*cases.WaitSpec) {})) }, db.ErrNotFound},
		{"await: by a deliverer", func() error { return w.await(inbox, w.c.ID, spec(func(*cases.WaitSpec) {})) }, db.ErrNotFound},
		{"await: without job.create", func() error { return w.await(clerk, w.c.ID, spec(func(*cases.WaitSpec) {})) }, db.ErrNotPermitted},
		{"await: without job.create in its own project", func() error {
			return w.await(rival, w.theirs.ID, spec(func(*cases.WaitSpec) {}))
		}, db.ErrNotPermitted},
		{"await: closed case", func() error { return w.await(app, w.closed.ID, spec(func(*cases.WaitSpec) {})) }, db.ErrCaseClosed},
		{"await: same name, other deadline", func() error {
			s := reply()
			s.Deadline = s.Deadline.Add(time.Hour)
			return w.await(app, w.c.ID, s)
		}, db.ErrAlreadyExists},
		{"await: same name, other keys", func() error { return w.await(app, w.c.ID, reply(key("document", "DOC-2"))) }, db.ErrAlreadyExists},
		{"await: same name, no timeout", func() error {
			s := reply()
			s.OnTimeout = nil
			return w.await(app, w.c.ID, s)
		}, db.ErrAlreadyExists},
		{"await: same name, other arrival payload", func() error {
			s := reply()
			s.OnArrival.Payload = json.RawMessage(`{"step":"reject"}`)
			return w.await(app, w.c.ID, s)
		}, db.ErrAlreadyExists},

		// WithdrawWait.
		{"withdraw: unknown wait", func() error { _, err := e.app.WithdrawWait(ctx, 987654); return err }, db.ErrNotFound},
		{"withdraw: wait 0", func() error { _, err := e.app.WithdrawWait(ctx, 0); return err }, db.ErrNotFound},
		{"withdraw: by another project's actor", func() error {
			_, err := e.as(t, rival).WithdrawWait(ctx, w.waiting.ID)
			return err
		}, db.ErrNotFound},
		{"withdraw: by a viewer", func() error { _, err := e.as(t, vic).WithdrawWait(ctx, w.waiting.ID); return err }, db.ErrNotFound},
		{"withdraw: by a deliverer", func() error { _, err := e.as(t, inbox).WithdrawWait(ctx, w.waiting.ID); return err }, db.ErrNotFound},
		{"withdraw: satisfied wait", func() error { _, err := e.app.WithdrawWait(ctx, w.satisfied.ID); return err }, db.ErrAlreadyAnswered},
		{"withdraw: expired wait", func() error { _, err := e.app.WithdrawWait(ctx, w.expired.ID); return err }, db.ErrAlreadyAnswered},

		// SleepUntil.
		{"sleep: zero instant", func() error { return w.sleep(app, w.c.ID, "wake", time.Time{}, w.remind) }, db.ErrInvalidArgument},
		{"sleep: over ten years ahead", func() error {
			return w.sleep(app, w.c.ID, "wake", e.Clock.Now().AddDate(10, 0, 1), w.remind)
		}, db.ErrInvalidArgument},
		{"sleep: before 1970", func() error {
			return w.sleep(app, w.c.ID, "wake", time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), w.remind)
		}, db.ErrInvalidArgument},
		{"sleep: empty name", func() error { return w.sleep(app, w.c.ID, "", t0.Add(time.Hour), w.remind) }, db.ErrInvalidArgument},
		{"sleep: bad name", func() error { return w.sleep(app, w.c.ID, "Wake Up", t0.Add(time.Hour), w.remind) }, db.ErrInvalidArgument},
		{"sleep: name over 63 characters", func() error {
			return w.sleep(app, w.c.ID, strings.Repeat("n", 64), t0.Add(time.Hour), w.remind)
		}, db.ErrInvalidArgument},
		{"sleep: no kind", func() error {
			return w.sleep(app, w.c.ID, "wake", t0.Add(time.Hour), cases.Continuation{})
		}, db.ErrInvalidArgument},
		{"sleep: bad queue", func() error {
			return w.sleep(app, w.c.ID, "wake", t0.Add(time.Hour), cases.Continuation{Kind: "case.remind", Queue: "A"})
		}, db.ErrInvalidArgument},
		{"sleep: 101 attempts", func() error {
			return w.sleep(app, w.c.ID, "wake", t0.Add(time.Hour), cases.Continuation{Kind: "case.remind", MaxAttempts: 101})
		}, db.ErrInvalidArgument},
		{"sleep: negative payload schema", func() error {
			return w.sleep(app, w.c.ID, "wake", t0.Add(time.Hour), cases.Continuation{Kind: "case.remind", PayloadSchema: -1})
		}, db.ErrInvalidArgument},
		{"sleep: unknown case", func() error { return w.sleep(app, 987654, "wake", t0.Add(time.Hour), w.remind) }, db.ErrNotFound},
		{"sleep: another project's case", func() error {
			return w.sleep(app, w.theirs.ID, "wake", t0.Add(time.Hour), w.remind)
		}, db.ErrNotFound},
		{"sleep: by a viewer", func() error { return w.sleep(vic, w.c.ID, "wake", t0.Add(time.Hour), w.remind) }, db.ErrNotFound},
		{"sleep: by a stranger", func() error { return w.sleep(sam, w.c.ID, "wake", t0.Add(time.Hour), w.remind) }, db.ErrNotFound},
		{"sleep: without job.create", func() error { return w.sleep(clerk, w.c.ID, "wake", t0.Add(time.Hour), w.remind) }, db.ErrNotPermitted},
		{"sleep: closed case", func() error { return w.sleep(app, w.closed.ID, "wake", t0.Add(time.Hour), w.remind) }, db.ErrCaseClosed},
		{"sleep: same timer, other payload", func() error {
			return w.sleep(app, w.c.ID, "reminder", t0.Add(time.Hour),
				cases.Continuation{Kind: "case.remind", Payload: json.RawMessage(`{"n":2}`)})
		}, db.ErrIdempotencyConflict},
		{"sleep: same timer, other payload schema", func() error {
			return w.sleep(app, w.c.ID, "reminder", t0.Add(time.Hour),
				cases.Continuation{Kind: "case.remind", Payload: json.RawMessage(`{"n":1}`), PayloadSchema: 2})
		}, db.ErrIdempotencyConflict},

		// Reads that refuse.
		{"message: unknown", func() error { _, err := e.app.Message(ctx, 987654); return err }, db.ErrNotFound},
		{"message: by a stranger", func() error { _, err := e.as(t, sam).Message(ctx, w.buffered.ID); return err }, db.ErrNotFound},
		{"message: by another project's actor", func() error {
			_, err := e.as(t, rival).Message(ctx, w.buffered.ID)
			return err
		}, db.ErrNotFound},
		{"message: by a sweeper", func() error { _, err := e.as(t, sweeper).Message(ctx, w.dead.ID); return err }, db.ErrNotFound},
		{"wait: unknown", func() error { _, err := e.app.Wait(ctx, 987654); return err }, db.ErrNotFound},
		{"wait: by a stranger", func() error { _, err := e.as(t, sam).Wait(ctx, w.waiting.ID); return err }, db.ErrNotFound},
		{"wait: by another project's actor", func() error {
			_, err := e.as(t, rival).Wait(ctx, w.waiting.ID)
			return err
		}, db.ErrNotFound},
		{"wait: by a deliverer", func() error { _, err := e.as(t, inbox).Wait(ctx, w.waiting.ID); return err }, db.ErrNotFound},
		{"dead letters: empty project", func() error { _, err := e.app.DeadLetters(ctx, cases.DeadLetterFilter{}); return err }, db.ErrInvalidArgument},
		{"dead letters: limit 1001", func() error {
			_, err := e.app.DeadLetters(ctx, cases.DeadLetterFilter{Project: project, Limit: db.MaxPage + 1})
			return err
		}, db.ErrInvalidArgument},
		{"dead letters: negative limit", func() error {
			_, err := e.app.DeadLetters(ctx, cases.DeadLetterFilter{Project: project, Limit: -1})
			return err
		}, db.ErrInvalidArgument},
		{"dead letters: negative before", func() error {
			_, err := e.app.DeadLetters(ctx, cases.DeadLetterFilter{Project: project, Before: -1})
			return err
		}, db.ErrInvalidArgument},
		{"waiting: empty project", func() error { _, err := e.app.Waiting(ctx, cases.WaitingFilter{}); return err }, db.ErrInvalidArgument},
		{"waiting: limit 1001", func() error {
			_, err := e.app.Waiting(ctx, cases.WaitingFilter{Project: project, Limit: db.MaxPage + 1})
			return err
		}, db.ErrInvalidArgument},
		{"waiting: negative limit", func() error {
			_, err := e.app.Waiting(ctx, cases.WaitingFilter{Project: project, Limit: -1})
			return err
		}, db.ErrInvalidArgument},

		// WakeOf: a job that is no continuation.
		{"wake of: a plain job", func() error { return wakeOf(w.plainJob) }, db.ErrInvalidArgument},
		{"wake of: the zero job", func() error { return wakeOf(jobs.Job{}) }, db.ErrInvalidArgument},
		{"wake of: a case's job without params", func() error { return wakeOf(jobs.Job{ID: 1, CaseID: w.c.ID}) }, db.ErrInvalidArgument},
		{"wake of: params naming nothing", func() error {
			return wakeOf(jobs.Job{ID: 1, CaseID: w.c.ID, Params: json.RawMessage(`{"step":"confirm"}`)})
		}, db.ErrInvalidArgument},
		{"wake of: params not an object", func() error {
			return wakeOf(jobs.Job{ID: 1, CaseID: w.c.ID, Params: json.RawMessage(`[1,2]`)})
		}, db.ErrInvalidArgument},
		{"wake of: a satisfied wait without its message", func() error {
			return wakeOf(jobs.Job{ID: 1, CaseID: w.c.ID, Params: json.RawMessage(`{"wait_id":1,"wait":"w","outcome":"satisfied"}`)})
		}, db.ErrInvalidArgument},
		{"wake of: an unknown outcome", func() error {
			return wakeOf(jobs.Job{ID: 1, CaseID: w.c.ID, Params: json.RawMessage(`{"wait_id":1,"wait":"w","outcome":"withdrawn"}`)})
		}, db.ErrInvalidArgument},
		{"wake of: a timer without its instant", func() error {
			return wakeOf(jobs.Job{ID: 1, CaseID: w.c.ID, Params: json.RawMessage(`{"timer":"reminder"}`)})
		}, db.ErrInvalidArgument},
		{"wake of: a continuation's params on a job of no case", func() error {
			j := jobOf(t, e, w.satisfied.ContinuationJobID)
			j.CaseID = 0
			return wakeOf(j)
		}, db.ErrInvalidArgument},

		// The dead-letter sweep's horizon and batch.
		{"dead-letter sweep: horizon under a minute", func() error {
			_, err := w.sweepDeadLetters(59*time.Second, 100)
			return err
		}, db.ErrInvalidArgument},
		{"dead-letter sweep: horizon over 366 days", func() error {
			_, err := w.sweepDeadLetters(367*24*time.Hour, 100)
			return err
		}, db.ErrInvalidArgument},
		{"dead-letter sweep: negative horizon", func() error {
			_, err := w.sweepDeadLetters(-time.Hour, 100)
			return err
		}, db.ErrInvalidArgument},
		{"dead-letter sweep: batch 0", func() error { _, err := w.sweepDeadLetters(time.Hour, 0); return err }, db.ErrInvalidArgument},
		{"dead-letter sweep: batch 10001", func() error { _, err := w.sweepDeadLetters(time.Hour, 10001); return err }, db.ErrInvalidArgument},
		{"expiry sweep: batch 10001 by SQL", func() error {
			_, err := e.Pool.Exec(ctx, `SELECT docket.wait_expire_due(10001, 'svc:sweeper', $1)`, t0)
			return db.Translate(err, "raw")
		}, db.ErrInvalidArgument},

		// By hand, as an operator in psql.
		{"raw: consumed message back to buffered", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.messages SET status = 'buffered', consumed_by = NULL, settled_at = NULL WHERE id = $1`, w.consumed.ID)
		}, db.ErrIllegalTransition},
		{"raw: dead letter back to buffered", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.messages SET status = 'buffered', dead_letter_reason = NULL, settled_at = NULL WHERE id = $1`, w.dead.ID)
		}, db.ErrIllegalTransition},
		{"raw: dead letter consumed", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.messages SET status = 'consumed', consumed_by = $2, dead_letter_reason = NULL WHERE id = $1`,
				w.dead.ID, w.waiting.ID)
		}, db.ErrIllegalTransition},
		{"raw: message stored consumed", func() error {
			return raw(ctx, e.Pool, `INSERT INTO docket.messages (project, producer, message_id, keys, payload, arrived_at, delivered_by, status, consumed_by, settled_at)
				VALUES ('acme', 'ops', 'by-hand', '{document:DOC-7}', '{}', $1, 'user:ops', 'consumed', $2, $1)`, byHand, w.waiting.ID)
		}, db.ErrIllegalTransition},
		{"raw: message payload changed", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.messages SET payload = '{"accepted":false}' WHERE id = $1`, w.buffered.ID)
		}, db.ErrImmutable},
		{"raw: message keys changed", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.messages SET keys = '{document:DOC-1}' WHERE id = $1`, w.buffered.ID)
		}, db.ErrImmutable},
		{"raw: consumed message's payload changed", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.messages SET payload = '{}' WHERE id = $1`, w.consumed.ID)
		}, db.ErrImmutable},
		{"raw: message readdressed", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.messages SET addressee = $2 WHERE id = $1`, w.buffered.ID, w.c.ID)
		}, db.ErrImmutable},
		{"raw: message payload over the bound", func() error {
			return raw(ctx, e.Pool, `INSERT INTO docket.messages (project, producer, message_id, keys, payload, arrived_at, delivered_by)
				VALUES ('acme', 'ops', 'by-hand', '{document:DOC-7}', to_jsonb(repeat('x', 61439)), $1, 'user:ops')`, byHand)
		}, db.ErrInvalidArgument},
		{"raw: message keys unsorted", func() error {
			return raw(ctx, e.Pool, `INSERT INTO docket.messages (project, producer, message_id, keys, payload, arrived_at, delivered_by)
				VALUES ('acme', 'ops', 'by-hand', '{z:1,a:1}', '{}', $1, 'user:ops')`, byHand)
		}, db.ErrInvalidArgument},
		{"raw: message deleted", func() error {
			return raw(ctx, e.Pool, `DELETE FROM docket.messages WHERE id = $1`, w.buffered.ID)
		}, db.ErrImmutable},
		{"raw: wait deleted", func() error { return raw(ctx, e.Pool, `DELETE FROM docket.waits WHERE id = $1`, w.gone.ID) }, db.ErrImmutable},
		{"raw: timer deleted", func() error { return raw(ctx, e.Pool, `DELETE FROM docket.timers WHERE id = $1`, w.timer.ID) }, db.ErrImmutable},
		{"raw: timer moved", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.timers SET wake_at = wake_at + interval '1 hour' WHERE id = $1`, w.timer.ID)
		}, db.ErrImmutable},
		{"raw: timer on a closed case", func() error {
			return raw(ctx, e.Pool, `INSERT INTO docket.timers (case_id, project, name, wake_at, job_id, created_by, created_at)
				VALUES ($1, 'acme', 'by-hand', $2, $3, 'user:ops', $2)`, w.closed.ID, byHand, w.plainJob.ID)
		}, db.ErrCaseClosed},
		{"raw: wait on a closed case", func() error {
			return raw(ctx, e.Pool, rawWait, w.closed.ID, project, byHand.Add(time.Hour))
		}, db.ErrCaseClosed},
		{"raw: wait in another project than its case's", func() error {
			return raw(ctx, e.Pool, rawWait, w.c.ID, other, byHand.Add(time.Hour))
		}, db.ErrImmutable},
		{"raw: wait with its deadline at its creation", func() error {
			return raw(ctx, e.Pool, rawWait, w.c.ID, project, byHand)
		}, db.ErrInvalidArgument},
		{"raw: wait satisfied without a message", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.waits SET status = 'satisfied', settled_at = $2, settled_by = 'user:ops' WHERE id = $1`,
				w.waiting.ID, byHand)
		}, db.ErrInvalidArgument},
		{"raw: wait satisfied by a message that does not match it", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.waits SET status = 'satisfied', satisfied_by = $2, settled_at = $3, settled_by = 'user:ops'
				WHERE id = $1`, w.waiting.ID, w.buffered.ID, byHand)
		}, db.ErrIllegalTransition},
		{"raw: expired wait back to waiting", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.waits SET status = 'waiting', settled_at = NULL, settled_by = NULL, continuation_job_id = NULL WHERE id = $1`,
				w.expired.ID)
		}, db.ErrIllegalTransition},
		{"raw: withdrawn wait satisfied", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.waits SET status = 'satisfied', satisfied_by = $2 WHERE id = $1`, w.gone.ID, w.buffered.ID)
		}, db.ErrIllegalTransition},
		{"raw: wait deadline moved", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.waits SET deadline = deadline + interval '1 day' WHERE id = $1`, w.waiting.ID)
		}, db.ErrImmutable},
		{"raw: wait keys changed", func() error {
			return raw(ctx, e.Pool, `UPDATE docket.waits SET keys = '{document:DOC-5}' WHERE id = $1`, w.waiting.ID)
		}, db.ErrImmutable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, e.Pool)
			err := tc.do()
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, before, snapshot(t, e.Pool), "a refusal writes nothing")
		})
	}
}

// TestWaitRetriesAndEmptyReadsWriteNothing: what is asked again on the same
// terms, and what an actor may not see, returns without a write or an error.
func TestWaitRetriesAndEmptyReadsWriteNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	w := newWaitWorld(t, e)
	for _, tc := range []struct {
		name string
		do   func(t *testing.T)
	}{
		{"await again on the same terms", func(t *testing.T) {
			a, err := e.app.Await(ctx, w.c.ID, reply())
			require.NoError(t, err)
			require.False(t, a.Created)
			require.Equal(t, w.waiting, a.Wait)
		}},
		{"withdraw a withdrawn wait", func(t *testing.T) {
			got, err := e.app.WithdrawWait(ctx, w.gone.ID)
			require.NoError(t, err)
			require.Equal(t, w.gone, got)
		}},
		{"set the same timer again", func(t *testing.T) {
			got, err := e.app.SleepUntil(ctx, w.c.ID, "reminder", t0.Add(time.Hour), w.remind)
			require.NoError(t, err)
			require.Equal(t, w.timer, got)
		}},
		{"deliver the same message again", func(t *testing.T) {
			d, err := e.as(t, inbox).Deliver(ctx, message("m-buffered", key("document", "DOC-5")))
			require.NoError(t, err)
			require.True(t, d.Duplicate)
			require.Equal(t, w.buffered, d.Message)
		}},
		{"deliver a consumed message again", func(t *testing.T) {
			d, err := e.as(t, inbox).Deliver(ctx, message("m-consumed", key("document", "DOC-2")))
			require.NoError(t, err)
			require.True(t, d.Duplicate)
			require.Equal(t, cases.Consumed, d.Status)
			require.Equal(t, w.satisfied.ContinuationJobID, d.ContinuationJobID)
		}},
		{"waiting: limit 0 takes the default", func(t *testing.T) {
			list, err := e.as(t, vic).Waiting(ctx, cases.WaitingFilter{Project: project})
			require.NoError(t, err)
			require.Equal(t, []cases.Wait{w.waiting}, list)
		}},
		{"dead letters: limit 0 takes the default", func(t *testing.T) {
			list, err := e.as(t, vic).DeadLetters(ctx, cases.DeadLetterFilter{Project: project})
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.Equal(t, w.dead.ID, list[0].ID)
			require.Equal(t, w.closed.ID, list[0].Addressee)
			require.NotEmpty(t, list[0].Reason)
		}},
		{"dead letters: before the first is empty", func(t *testing.T) {
			list, err := e.as(t, vic).DeadLetters(ctx, cases.DeadLetterFilter{Project: project, Before: w.dead.ID})
			require.NoError(t, err)
			require.Empty(t, list)
		}},
		{"unauthorised readers get empty lists", func(t *testing.T) {
			for _, actor := range []access.Actor{sam, rival, sweeper} {
				r := e.as(t, actor)
				waiting, err := r.Waiting(ctx, cases.WaitingFilter{Project: project})
				require.NoError(t, err)
				require.Empty(t, waiting, string(actor))
				dead, err := r.DeadLetters(ctx, cases.DeadLetterFilter{Project: project})
				require.NoError(t, err)
				require.Empty(t, dead, string(actor))
				waits, err := r.Waits(ctx, w.c.ID)
				require.NoError(t, err)
				require.Empty(t, waits, string(actor))
				timers, err := r.Timers(ctx, w.c.ID)
				require.NoError(t, err)
				require.Empty(t, timers, string(actor))
			}
			// A deliverer reads messages, not waits.
			waiting, err := e.as(t, inbox).Waiting(ctx, cases.WaitingFilter{Project: project})
			require.NoError(t, err)
			require.Empty(t, waiting)
		}},
		{"lists of an unknown project are empty", func(t *testing.T) {
			waiting, err := e.app.Waiting(ctx, cases.WaitingFilter{Project: "nowhere"})
			require.NoError(t, err)
			require.Empty(t, waiting)
			dead, err := e.app.DeadLetters(ctx, cases.DeadLetterFilter{Project: "nowhere"})
			require.NoError(t, err)
			require.Empty(t, dead)
		}},
		{"waits of an unknown case are none", func(t *testing.T) {
			waits, err := e.app.Waits(ctx, 987654)
			require.NoError(t, err)
			require.Empty(t, waits)
		}},
		{"dead-letter sweep at its bounds moves nothing young", func(t *testing.T) {
			for _, h := range []time.Duration{time.Minute, 366 * 24 * time.Hour, 0} {
				n, err := w.sweepDeadLetters(h, 10000)
				require.NoError(t, err, h)
				require.Zero(t, n, h)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, e.Pool)
			tc.do(t)
			require.Equal(t, before, snapshot(t, e.Pool), "nothing is written")
		})
	}
}

// TestWaitBoundsThatFit: input exactly at its bounds is accepted, and zero
// fields take their defaults.
func TestWaitBoundsThatFit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	in := e.as(t, inbox)
	keys32 := make([]cases.Key, cases.MaxKeys)
	for i := range keys32 {
		keys32[i] = key("k", strings.Repeat("v", i+1))
	}

	// A payload of exactly MaxMessagePayload bytes of JSON, a producer of 128
	// characters, an id of 255 and 32 keys.
	fits := json.RawMessage(`"` + strings.Repeat("x", cases.MaxMessagePayload-2) + `"`)
	big, err := in.Deliver(ctx, cases.Delivery{Project: project, Producer: strings.Repeat("p", 128),
		MessageID: strings.Repeat("m", 255), Keys: keys32, Payload: fits})
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, big.Status)
	require.Len(t, big.Payload, cases.MaxMessagePayload)
	require.Len(t, big.Keys, cases.MaxKeys)

	// An empty payload is {}.
	d, err := in.Deliver(ctx, cases.Delivery{Project: project, Producer: "p", MessageID: "empty", Keys: []cases.Key{key("document", "DOC-2")}})
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(d.Payload))

	// A deadline a microsecond after now, and one exactly MaxWaitAhead ahead;
	// zero attempts, schema and queue take their defaults.
	soon := cases.WaitSpec{Name: "soon", Keys: []cases.Key{key("document", "DOC-3")}, Deadline: t0.Add(time.Microsecond),
		OnArrival: cases.Continuation{Kind: "supplier.reply"}, OnTimeout: &cases.Continuation{Kind: "supplier.chase"}}
	a, err := e.app.Await(ctx, c.ID, soon)
	require.NoError(t, err)
	require.True(t, a.Created)
	require.Equal(t, cases.Continuation{Kind: "supplier.reply", Queue: "default", Payload: json.RawMessage(`{}`), PayloadSchema: 1, MaxAttempts: 5}, a.OnArrival)
	require.Equal(t, &cases.Continuation{Kind: "supplier.chase", Queue: "default", Payload: json.RawMessage(`{}`), PayloadSchema: 1, MaxAttempts: 5}, a.OnTimeout)
	far := soon
	far.Name, far.Deadline, far.Keys = "far", t0.Add(cases.MaxWaitAhead), keys32
	far.OnArrival.MaxAttempts, far.OnTimeout = 100, nil
	a, err = e.app.Await(ctx, c.ID, far)
	require.NoError(t, err)
	require.Equal(t, cases.Satisfied, a.Status, "the message filed under the 32 keys satisfies it")
	require.Equal(t, big.ID, a.SatisfiedBy)
	j := jobOf(t, e, a.ContinuationJobID)
	require.Equal(t, 100, j.MaxAttempts)
	wake, err := cases.WakeOf(j)
	require.NoError(t, err)
	require.Equal(t, cases.WakeMessage, wake.Reason)
	require.JSONEq(t, string(fits), string(wake.Message.Payload), "the payload rides in the continuation whole")

	// A timer exactly MaxWaitAhead ahead, and one already past, which wakes at once.
	_, err = e.app.SleepUntil(ctx, c.ID, "far", t0.Add(cases.MaxWaitAhead), cases.Continuation{Kind: "case.remind"})
	require.NoError(t, err)
	past, err := e.app.SleepUntil(ctx, c.ID, "past", t0.Add(-time.Hour), cases.Continuation{Kind: "case.remind"})
	require.NoError(t, err)
	j = jobOf(t, e, past.JobID)
	require.Equal(t, t0.Add(-time.Hour), j.AvailableAt.UTC())
	wake, err = cases.WakeOf(j)
	require.NoError(t, err)
	require.Equal(t, cases.WakeTimer, wake.Reason)
	require.Equal(t, t0.Add(-time.Hour), wake.At)
}

// TestWaitAndTimerBoundsHold: a deadline or wake instant past MaxWaitAhead is
// refused to the API and to a hand-written INSERT alike, and a timer (case,
// name, instant) set again with any other job is a conflict, not a second
// timer or a silent no-op.
func TestWaitAndTimerBoundsHold(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	w := newWaitWorld(t, e)
	beyond := t0.Add(cases.MaxWaitAhead + time.Hour)
	for _, tc := range []struct {
		name string
		do   func() error
		want error
	}{
		{"await: deadline past MaxWaitAhead", func() error {
			s := reply(key("document", "DOC-7"))
			s.Name, s.Deadline = "beyond", beyond
			return w.await(app, w.c.ID, s)
		}, db.ErrInvalidArgument},
		{"sleep: instant past MaxWaitAhead", func() error {
			return w.sleep(app, w.c.ID, "beyond", beyond, w.remind)
		}, db.ErrInvalidArgument},
		{"sleep: same timer, other kind", func() error {
			return w.sleep(app, w.c.ID, "reminder", t0.Add(time.Hour),
				cases.Continuation{Kind: "case.nudge", Payload: json.RawMessage(`{"n":1}`)})
		}, db.ErrIdempotencyConflict},
		{"sleep: same timer, other queue", func() error {
			return w.sleep(app, w.c.ID, "reminder", t0.Add(time.Hour),
				cases.Continuation{Kind: "case.remind", Queue: "slow", Payload: json.RawMessage(`{"n":1}`)})
		}, db.ErrIdempotencyConflict},
		{"sleep: same timer, other attempts", func() error {
			return w.sleep(app, w.c.ID, "reminder", t0.Add(time.Hour),
				cases.Continuation{Kind: "case.remind", Payload: json.RawMessage(`{"n":1}`), MaxAttempts: 1})
		}, db.ErrIdempotencyConflict},
		{"raw: wait deadline fifty years ahead", func() error {
			return raw(ctx, e.Pool, `INSERT INTO docket.waits (case_id, project, name, keys, deadline, on_arrival_kind, on_arrival_queue,
				on_arrival_payload, on_arrival_payload_schema, on_arrival_max_attempts, created_by, created_at)
				VALUES ($1, 'acme', 'by-hand', '{document:DOC-7}', '2076-11-03T09:00:00Z', 'case.reply', 'default', '{}', 1, 5,
				'user:ops', '2026-11-03T09:00:00Z')`, w.c.ID)
		}, db.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, e.Pool)
			err := tc.do()
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, before, snapshot(t, e.Pool), "a refusal writes nothing")
		})
	}
}
