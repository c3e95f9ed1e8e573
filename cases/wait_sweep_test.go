package cases_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// Chase is the payload of the timeout continuations in these tests.
type Chase struct {
	Step string `json:"step"`
}

var chaseKind = jobs.MustKind[Chase]("supplier.chase", 1)

// waitSweeper returns a worker acting as sweeper with sweeps, moving at most
// limit items a run, not started: w.Sweep runs a sweep, whose commit wakes
// the workers of the queues of the jobs it enqueues, without a process
// running them. handle, when not nil, handles the timeout continuations once
// the worker is started.
func waitSweeper(t testing.TB, e env, limit int, handle worker.HandlerFunc[Chase], sweeps ...worker.Sweep) *worker.Client {
	t.Helper()
	return waitSweeperOn(t, e, e.Clock, limit, handle, sweeps...)
}

// waitSweeperOn is waitSweeper on clock.
func waitSweeperOn(t testing.TB, e env, clock db.Clock, limit int, handle worker.HandlerFunc[Chase], sweeps ...worker.Sweep) *worker.Client {
	t.Helper()
	if handle == nil {
		handle = func(context.Context, *jobs.Typed[Chase]) error { return nil }
	}
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, chaseKind, handle))
	return sweeperWorker(t, e, clock, reg, func(c *worker.Config) { c.SweepLimit, c.Sweeps = limit, sweeps })
}

// chased is a wait on k with a timeout continuation of kind supplier.chase.
func chased(name string, k cases.Key, deadline time.Time) cases.WaitSpec {
	return cases.WaitSpec{
		Name: name, Keys: []cases.Key{k}, Deadline: deadline,
		OnArrival: cases.Continuation{Kind: "supplier.reply"},
		OnTimeout: &cases.Continuation{Kind: chaseKind.Name(), Payload: json.RawMessage(`{"step":"chase"}`)},
	}
}

// TestTwoSweepersExpireEachWaitOnce registers 50 waits with deadlines, lets
// them fall due and releases two workers' expiry sweeps on them together,
// five times over, each run moving at most 7: every wait expires once, its
// timeout continuation is enqueued once under wait:ID:expired, due at once,
// and says why it runs; each run that moved waits woke the workers of the
// continuations' queue once, as it committed.
func TestTwoSweepersExpireEachWaitOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	sweepers := []*worker.Client{
		waitSweeper(t, e, 7, nil, cases.WaitExpirySweep(time.Hour)),
		waitSweeper(t, e, 7, nil, cases.WaitExpirySweep(time.Hour)),
	}
	heard := listen(t, e)
	const waits = 50
	for round := range 5 {
		c := e.admit(t, key("round", fmt.Sprint(round)))
		registered := make([]cases.Awaited, waits)
		for i := range registered {
			a, err := e.app.Await(ctx, c.ID, chased(fmt.Sprintf("reply-%d", i),
				key("document", fmt.Sprintf("EXP-%d-%d", round, i)), e.Clock.Now().Add(time.Duration(i+1)*time.Minute)))
			require.NoError(t, err)
			require.Equal(t, cases.Waiting, a.Status)
			registered[i] = a
		}
		// A wait not yet due stays waiting.
		later, err := e.app.Await(ctx, c.ID, chased("later", key("document", fmt.Sprintf("EXP-%d-later", round)),
			e.Clock.Now().Add(24*time.Hour)))
		require.NoError(t, err)
		e.Clock.Advance(time.Duration(waits) * time.Minute)
		require.Empty(t, heard.since(t), "round %d: waits with nothing to run yet wake nobody", round)

		start := make(chan struct{})
		var wg sync.WaitGroup
		moved := make([]int, len(sweepers))
		runs := make([]int, len(sweepers)) // runs that moved something
		errs := make([]error, len(sweepers))
		for s, w := range sweepers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					n, err := w.Sweep(ctx, cases.SweepWaitExpiry)
					if err != nil || n == 0 {
						errs[s] = err
						return
					}
					moved[s] += n
					runs[s]++
				}
			}()
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "round %d", round)
		notes := heard.since(t)
		require.Len(t, notes, runs[0]+runs[1], "round %d: one notice per run that enqueued: %v", round, notes)
		for _, q := range notes {
			require.Equal(t, "default", q, "round %d", round)
		}
		for _, w := range sweepers {
			n, err := w.Sweep(ctx, cases.SweepWaitExpiry)
			require.NoError(t, err)
			require.Zero(t, n, "round %d: a wait is swept once", round)
		}
		require.Equal(t, waits, moved[0]+moved[1], "round %d: %v", round, moved)

		for _, a := range registered {
			w, err := e.app.Wait(ctx, a.ID)
			require.NoError(t, err)
			require.Equal(t, cases.Expired, w.Status)
			require.Equal(t, sweeper, w.SettledBy)
			require.Equal(t, e.Clock.Now(), w.SettledAt)
			require.Zero(t, w.SatisfiedBy)
			require.NotZero(t, w.ContinuationJobID)
			j := jobOf(t, e, w.ContinuationJobID)
			require.Equal(t, fmt.Sprintf("wait:%d:expired", a.ID), j.IdempotencyKey)
			require.Equal(t, chaseKind.Name(), j.Kind)
			require.Equal(t, c.ID, j.CaseID)
			require.Equal(t, jobs.Queued, j.State)
			require.Equal(t, e.Clock.Now(), j.AvailableAt, "due at once")
			require.JSONEq(t, `{"step":"chase"}`, string(j.Payload))
			wake, err := cases.WakeOf(j)
			require.NoError(t, err)
			require.Equal(t, cases.Wake{Reason: cases.WakeExpired, CaseID: c.ID, WaitID: a.ID, Wait: a.Name, Deadline: a.Deadline}, wake)
		}
		got, err := e.app.Wait(ctx, later.ID)
		require.NoError(t, err)
		require.Equal(t, cases.Waiting, got.Status, "round %d: not due yet", round)
		require.Equal(t, waits, continuations(t, e, c.ID, chaseKind.Name()))
		require.Zero(t, continuations(t, e, c.ID, "supplier.reply"))
		requireMatchInvariants(t, e, "round ", round)
	}

	// Straight from SQL, four sweeps at once, as a fleet of workers would.
	c := e.admit(t, key("round", "sql"))
	for i := range 40 {
		_, err := e.app.Await(ctx, c.ID, chased(fmt.Sprintf("reply-%d", i), key("document", fmt.Sprintf("SQL-%d", i)),
			e.Clock.Now().Add(time.Minute)))
		require.NoError(t, err)
	}
	e.Clock.Advance(25 * time.Hour) // the five rounds' "later" waits fall due too
	start := make(chan struct{})
	var wg sync.WaitGroup
	moved := make([]int, 4)
	errs := make([]error, 4)
	for g := range moved {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				var n int
				err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.wait_expire_due(3, $1, $2)`,
					string(sweeper), e.Clock.Now()).Scan(&n)
				if err != nil || n == 0 {
					errs[g] = err
					return
				}
				moved[g] += n
			}
		}()
	}
	close(start)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, 45, moved[0]+moved[1]+moved[2]+moved[3], "%v", moved)
	require.Equal(t, 40, continuations(t, e, c.ID, chaseKind.Name()))
	requireMatchInvariants(t, e)
}

// TestExpiryRacesJustInTimeDeliveries releases, 20 times over, two
// expiry sweeps at a deadline and eight deliveries a microsecond before it
// on the key eight waits with that deadline name: each wait ends once,
// satisfied by one message or expired, never both, with the one
// continuation of its end; each message is consumed by one wait or left
// buffered, never by an expired wait.
func TestExpiryRacesJustInTimeDeliveries(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	deliverClock, sweepClock := db.NewFakeClock(t0), db.NewFakeClock(t0)
	in, err := cases.NewClient(e.API, cases.Config{Actor: inbox, Clock: deliverClock})
	require.NoError(t, err)
	sweepers := []*worker.Client{
		waitSweeperOn(t, e, sweepClock, 3, nil, cases.WaitExpirySweep(time.Hour)),
		waitSweeperOn(t, e, sweepClock, 3, nil, cases.WaitExpirySweep(time.Hour)),
	}
	const n = 8
	satisfiedTotal := 0
	for round := range 20 {
		c := e.admit(t, key("round", fmt.Sprint(round)))
		k := key("document", fmt.Sprintf("JIT-%d", round))
		deadline := e.Clock.Now().Add(time.Hour)
		for i := range n {
			_, err := e.app.Await(ctx, c.ID, chased(fmt.Sprintf("reply-%d", i), k, deadline))
			require.NoError(t, err)
		}
		e.Clock.Set(deadline)
		deliverClock.Set(deadline.Add(-time.Microsecond))
		sweepClock.Set(deadline)

		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, n+len(sweepers))
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = in.Deliver(ctx, message(fmt.Sprintf("jit-%d-%d", round, i), k))
			}()
			if i%4 == 0 {
				s := i / 4
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for {
						moved, err := sweepers[s].Sweep(ctx, cases.SweepWaitExpiry)
						if err != nil || moved == 0 {
							errs[n+s] = err
							return
						}
					}
				}()
			}
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "round %d", round)
		moved, err := sweepers[0].Sweep(ctx, cases.SweepWaitExpiry)
		require.NoError(t, err)
		require.Zero(t, moved, "round %d", round)

		messages, waits := statusCounts(t, e, k)
		satisfied := waits["satisfied"]
		satisfiedTotal += satisfied
		require.Equal(t, nonZero(map[string]int{"satisfied": satisfied, "expired": n - satisfied}), waits, "round %d", round)
		require.Equal(t, nonZero(map[string]int{"consumed": satisfied, "buffered": n - satisfied}), messages, "round %d", round)
		require.Equal(t, satisfied, continuations(t, e, c.ID, "supplier.reply"), "round %d", round)
		require.Equal(t, n-satisfied, continuations(t, e, c.ID, chaseKind.Name()), "round %d", round)
		requireMatchInvariants(t, e, "round ", round)
	}
	t.Logf("%d of %d waits were satisfied a microsecond before their deadline, the rest expired", satisfiedTotal, 20*n)
}

// TestMessageAfterTheDeadlineLeavesTheWaitToExpire: a message that arrives
// at or after a wait's deadline does not satisfy it, though the expiry sweep
// has not run yet: the message stays buffered, and the wait expires, its
// timeout continuation run by a started worker. A message a microsecond
// before the deadline does satisfy its wait.
func TestMessageAfterTheDeadlineLeavesTheWaitToExpire(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	in := e.as(t, inbox)
	c := e.admit(t, key("document", "DOC-1"))
	deadline := t0.Add(time.Hour)
	late, err := e.app.Await(ctx, c.ID, chased("late-reply", key("document", "DOC-1"), deadline))
	require.NoError(t, err)
	onTime, err := e.app.Await(ctx, c.ID, chased("on-time-reply", key("document", "DOC-2"), deadline))
	require.NoError(t, err)

	e.Clock.Set(deadline.Add(-time.Microsecond))
	d, err := in.Deliver(ctx, message("m-2", key("document", "DOC-2")))
	require.NoError(t, err)
	require.Equal(t, cases.Consumed, d.Status, "a microsecond before the deadline is in time")
	require.Equal(t, onTime.ID, d.ConsumedBy)

	e.Clock.Set(deadline)
	atDeadline, err := in.Deliver(ctx, message("m-at", key("document", "DOC-1")))
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, atDeadline.Status, "the deadline itself is too late")
	e.Clock.Advance(time.Minute)
	after, err := in.Deliver(ctx, message("m-after", key("document", "DOC-1")))
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, after.Status)
	w, err := e.app.Wait(ctx, late.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Waiting, w.Status, "the sweep has not run")
	requireMatchInvariants(t, e)

	type ran struct {
		args Chase
		wake cases.Wake
		err  error
	}
	runs := make(chan ran, 4)
	sw := waitSweeper(t, e, 100, func(_ context.Context, j *jobs.Typed[Chase]) error {
		wake, err := cases.WakeOf(j.Job)
		runs <- ran{j.Args, wake, err}
		return err
	}, cases.WaitExpirySweep(time.Hour))
	testkit.Start(t, sw)
	// The worker's own periodic run may beat this one to it: either way the
	// wait expires once.
	_, err = sw.Sweep(ctx, cases.SweepWaitExpiry)
	require.NoError(t, err)
	select {
	case r := <-runs:
		require.NoError(t, r.err)
		require.Equal(t, Chase{Step: "chase"}, r.args)
		require.Equal(t, cases.Wake{Reason: cases.WakeExpired, CaseID: c.ID, WaitID: late.ID, Wait: "late-reply", Deadline: deadline}, r.wake)
	case <-time.After(30 * time.Second):
		t.Fatal("the timeout continuation did not run")
	}
	w, err = e.app.Wait(ctx, late.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Expired, w.Status)
	require.Zero(t, w.SatisfiedBy)
	for _, id := range []int64{atDeadline.ID, after.ID} {
		m, err := in.Message(ctx, id)
		require.NoError(t, err)
		require.Equal(t, cases.Buffered, m.Status, "the expiry sweep leaves messages alone")
	}
	require.Equal(t, 1, continuations(t, e, c.ID, chaseKind.Name()))
	require.Equal(t, 1, continuations(t, e, c.ID, "supplier.reply"), "the on-time message's")

	// A wait registered now takes the oldest of the two.
	again, err := e.app.Await(ctx, c.ID, chased("late-reply", key("document", "DOC-1"), e.Clock.Now().Add(time.Hour)))
	require.NoError(t, err)
	require.Equal(t, cases.Satisfied, again.Status)
	require.Equal(t, atDeadline.ID, again.SatisfiedBy)
	requireMatchInvariants(t, e)
}

// deadLetterReasons returns the dead-letter reason of each message by the
// producer's id ("" while it is not dead-lettered).
func deadLetterReasons(t testing.TB, e env) map[string]string {
	t.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT message_id, coalesce(dead_letter_reason, '') FROM docket.messages`)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var id, reason string
		require.NoError(t, rows.Scan(&id, &reason))
		out[id] = reason
	}
	require.NoError(t, rows.Err())
	return out
}

// TestDeadLetterSweepKeepsTheHorizon: with a horizon of an hour, messages
// buffered just under, exactly and over an hour: the sweep dead-letters
// those at or over it, with a reason naming the horizon, and never touches
// a younger one. Operators see the dead letters, keys and all, payload none,
// through DeadLetters and docket.messages_dead.
func TestDeadLetterSweepKeepsTheHorizon(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	in := e.as(t, inbox)
	sw := waitSweeper(t, e, 1000, nil, cases.DeadLetterSweep(time.Hour, time.Hour))
	sweep := func() int {
		t.Helper()
		n, err := sw.Sweep(ctx, cases.SweepDeadLetters)
		require.NoError(t, err)
		return n
	}
	quiet := e.admit(t, key("customer", "QUIET"))
	over, err := in.Deliver(ctx, message("over", key("document", "DOC-1"), key("kind", "confirmation")))
	require.NoError(t, err)
	overTo, err := in.DeliverTo(ctx, quiet.ID, message("over-addressed", key("document", "DOC-1")))
	require.NoError(t, err)
	e.Clock.Set(t0.Add(time.Second))
	exact, err := in.Deliver(ctx, message("exact"))
	require.NoError(t, err)
	e.Clock.Set(t0.Add(time.Second + time.Microsecond))
	under, err := in.Deliver(ctx, message("under"))
	require.NoError(t, err)
	for _, d := range []cases.Delivered{over, overTo, exact, under} {
		require.Equal(t, cases.Buffered, d.Status)
	}

	e.Clock.Set(t0.Add(time.Hour - time.Microsecond))
	require.Zero(t, sweep(), "nothing has waited an hour")
	var underBefore string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT x::text FROM docket.messages x WHERE id = $1`, under.ID).Scan(&underBefore))

	sweepAt := t0.Add(time.Hour + time.Second)
	e.Clock.Set(sweepAt) // over: 1h1s; exact: 1h; under: 1h less 1µs
	require.Equal(t, 3, sweep())
	require.Zero(t, sweep(), "a dead letter is swept once")
	var underAfter string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT x::text FROM docket.messages x WHERE id = $1`, under.ID).Scan(&underAfter))
	require.Equal(t, underBefore, underAfter, "a message younger than the horizon is never touched")
	reasons := deadLetterReasons(t, e)
	require.Equal(t, "no wait claimed it within the horizon of 01:00:00", reasons["over"])
	require.Equal(t, "no wait claimed it within the horizon of 01:00:00", reasons["exact"])
	require.Equal(t, fmt.Sprintf("addressed to case %d, which had no wait on its keys within the horizon of 01:00:00", quiet.ID),
		reasons["over-addressed"])
	require.Empty(t, reasons["under"])
	require.Equal(t, 1, countEvents(t, e.Pool, quiet.ID, cases.EventMessage), "the addressee's history records it")

	m, err := in.Message(ctx, over.ID)
	require.NoError(t, err)
	require.Equal(t, cases.DeadLettered, m.Status)
	require.Equal(t, sweepAt, m.SettledAt)
	require.Zero(t, m.ConsumedBy)

	// A wait registered now finds nothing: dead letters are not offered.
	a, err := e.app.Await(ctx, quiet.ID, reply(key("kind", "confirmation")))
	require.NoError(t, err)
	require.Equal(t, cases.Waiting, a.Status)
	_, err = e.app.WithdrawWait(ctx, a.ID)
	require.NoError(t, err)

	e.Clock.Advance(time.Microsecond)
	require.Equal(t, 1, sweep(), "under has now waited the hour")
	require.Equal(t, "no wait claimed it within the horizon of 01:00:00", deadLetterReasons(t, e)["under"])

	// Operators' view: newest first, who sent each and under which keys,
	// never the payload.
	_, hasPayload := reflect.TypeOf(cases.DeadLetter{}).FieldByName("Payload")
	require.False(t, hasPayload)
	dead, err := e.app.DeadLetters(ctx, cases.DeadLetterFilter{Project: project})
	require.NoError(t, err)
	require.Len(t, dead, 4)
	require.Equal(t, []string{"under", "exact", "over-addressed", "over"},
		[]string{dead[0].MessageID, dead[1].MessageID, dead[2].MessageID, dead[3].MessageID})
	require.Equal(t, cases.DeadLetter{
		ID: over.ID, Project: project, Producer: "supplier:4711", MessageID: "over",
		Keys:   []cases.Key{key("document", "DOC-1"), key("kind", "confirmation")},
		Reason: "no wait claimed it within the horizon of 01:00:00", ArrivedAt: t0, DeadLetteredAt: sweepAt,
	}, dead[3])
	require.Equal(t, quiet.ID, dead[2].Addressee)
	page, err := e.app.DeadLetters(ctx, cases.DeadLetterFilter{Project: project, Before: dead[1].ID, Limit: 1})
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, dead[2].ID, page[0].ID)
	none, err := e.as(t, sam).DeadLetters(ctx, cases.DeadLetterFilter{Project: project})
	require.NoError(t, err)
	require.Empty(t, none, "sam may not read acme's messages")

	rows, err := e.Pool.Query(ctx, `SELECT * FROM docket.messages_dead WHERE project = $1`, project)
	require.NoError(t, err)
	var columns []string
	for _, f := range rows.FieldDescriptions() {
		columns = append(columns, f.Name)
	}
	rows.Close()
	require.Subset(t, columns, []string{"producer", "message_id", "keys", "reason"})
	require.NotContains(t, columns, "payload")
	var producer, messageID, reason string
	var keys []string
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT producer, message_id, keys, reason FROM docket.messages_dead WHERE id = $1`, over.ID).
		Scan(&producer, &messageID, &keys, &reason))
	require.Equal(t, "supplier:4711", producer)
	require.Equal(t, "over", messageID)
	require.Equal(t, []string{"document:DOC-1", "kind:confirmation"}, keys)
	require.Equal(t, "no wait claimed it within the horizon of 01:00:00", reason)
	requireMatchInvariants(t, e)

	// Thirty more, 7 s apart, swept every 13 s: at every sweep, what is
	// dead-lettered has waited the hour and what is buffered has not.
	first := e.Clock.Now()
	for i := range 30 {
		_, err := in.Deliver(ctx, message(fmt.Sprintf("batch-%d", i), key("document", fmt.Sprintf("BATCH-%d", i))))
		require.NoError(t, err)
		e.Clock.Advance(7 * time.Second)
	}
	for at := first.Add(time.Hour - 13*time.Second); at.Before(first.Add(time.Hour + 4*time.Minute)); at = at.Add(13 * time.Second) {
		e.Clock.Set(at)
		sweep()
		var early, overdue int
		require.NoError(t, e.Pool.QueryRow(ctx, `
			SELECT count(*) FILTER (WHERE status = 'dead_lettered' AND arrived_at > $1::timestamptz - interval '1 hour'),
			       count(*) FILTER (WHERE status = 'buffered' AND arrived_at <= $1::timestamptz - interval '1 hour')
			FROM docket.messages WHERE message_id LIKE 'batch-%'`, at).Scan(&early, &overdue))
		require.Zero(t, early, "at %v: dead-lettered before the horizon", at)
		require.Zero(t, overdue, "at %v: left buffered past the horizon", at)
	}
	for id, reason := range deadLetterReasons(t, e) {
		require.Contains(t, reason, "within the horizon of 01:00:00", "every message is dead-lettered in the end: %s", id)
	}
}

// TestClosingSettlesWaitsMessagesAndTimers: closing a case dead-letters the
// messages addressed to it that it never consumed, withdraws its waits
// without a continuation, and cancels its timer that has not fired; a
// message delivered to it later is buffered, and the dead-letter sweep gives
// up on it after the horizon, saying the case is closed.
func TestClosingSettlesWaitsMessagesAndTimers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	in := e.as(t, inbox)
	c := e.admit(t, key("customer", "C-1"))
	a, err := e.app.Await(ctx, c.ID, reply())
	require.NoError(t, err)
	require.Equal(t, cases.Waiting, a.Status)
	timer, err := e.app.SleepUntil(ctx, c.ID, "remind", t0.Add(2*time.Hour), cases.Continuation{Kind: "supplier.remind"})
	require.NoError(t, err)
	addressed, err := in.DeliverTo(ctx, c.ID, message("to-c", key("document", "OTHER")))
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, addressed.Status, "c waits on another key")
	open, err := in.Deliver(ctx, message("to-anyone", key("document", "OTHER")))
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, open.Status)

	e.Clock.Advance(time.Hour)
	closedAt := e.Clock.Now()
	closed, err := e.app.Close(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Closed, closed.Status)

	m, err := in.Message(ctx, addressed.ID)
	require.NoError(t, err)
	require.Equal(t, cases.DeadLettered, m.Status)
	require.Equal(t, fmt.Sprintf("addressed to case %d, which closed without consuming it", c.ID), m.DeadLetterReason)
	require.Equal(t, closedAt, m.SettledAt)
	m, err = in.Message(ctx, open.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, m.Status, "a message not addressed to the case is not the case's to give up")
	w, err := e.app.Wait(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, cases.WaitWithdrawn, w.Status)
	require.Zero(t, w.ContinuationJobID)
	require.Equal(t, app, w.SettledBy)
	require.Equal(t, closedAt, w.SettledAt)
	require.Zero(t, continuations(t, e, c.ID, "supplier.reply"))
	require.Zero(t, continuations(t, e, c.ID, "supplier.chase"))
	timers, err := e.app.Timers(ctx, c.ID)
	require.NoError(t, err)
	require.Len(t, timers, 1)
	require.Equal(t, timer.JobID, timers[0].JobID)
	require.Equal(t, jobs.Cancelled, timers[0].JobState)
	require.Equal(t, 1, countEvents(t, e.Pool, c.ID, cases.EventMessage))
	require.Equal(t, 2, countEvents(t, e.Pool, c.ID, cases.EventWait), "registered, withdrawn")
	require.Equal(t, 2, countEvents(t, e.Pool, c.ID, cases.EventTimer), "set, cancelled")

	// Nothing waits on a closed case.
	_, err = e.app.Await(ctx, c.ID, reply(key("document", "OTHER")))
	require.ErrorIs(t, err, db.ErrCaseClosed)
	_, err = e.app.SleepUntil(ctx, c.ID, "again", t0.Add(3*time.Hour), cases.Continuation{Kind: "supplier.remind"})
	require.ErrorIs(t, err, db.ErrCaseClosed)

	// A message sent to it now is held, then given up on.
	e.Clock.Advance(time.Minute)
	lateTo, err := in.DeliverTo(ctx, c.ID, message("to-c-late", key("document", "DOC-1")))
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, lateTo.Status)
	requireMatchInvariants(t, e)
	sw := waitSweeper(t, e, 1000, nil, cases.DeadLetterSweep(time.Hour, time.Hour))
	e.Clock.Advance(time.Hour - time.Microsecond)
	n, err := sw.Sweep(ctx, cases.SweepDeadLetters)
	require.NoError(t, err)
	require.Equal(t, 1, n, "to-anyone, buffered two hours; to-c-late not yet")
	e.Clock.Advance(time.Microsecond)
	n, err = sw.Sweep(ctx, cases.SweepDeadLetters)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	m, err = in.Message(ctx, lateTo.ID)
	require.NoError(t, err)
	require.Equal(t, cases.DeadLettered, m.Status)
	require.Equal(t, fmt.Sprintf("addressed to case %d, which is closed and never consumed it", c.ID), m.DeadLetterReason)
	require.Equal(t, 2, countEvents(t, e.Pool, c.ID, cases.EventMessage))
	requireMatchInvariants(t, e)
}

// TestDeadLetterSweepRefusesAHorizonOutOfRange: a horizon under a minute or
// over 366 days is refused when the sweep runs, and moves nothing; the
// bounds themselves are accepted.
func TestDeadLetterSweepRefusesAHorizonOutOfRange(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	_, err := e.as(t, inbox).Deliver(ctx, message("m-1"))
	require.NoError(t, err)
	e.Clock.Advance(400 * 24 * time.Hour)
	before := snapshot(t, e.Pool)
	for _, horizon := range []time.Duration{10 * time.Second, time.Minute - time.Microsecond, 367 * 24 * time.Hour, -time.Hour} {
		sw := waitSweeper(t, e, 1000, nil, cases.DeadLetterSweep(time.Hour, horizon))
		_, err := sw.Sweep(ctx, cases.SweepDeadLetters)
		require.ErrorIs(t, err, db.ErrInvalidArgument, horizon)
		require.ErrorContains(t, err, "horizon", horizon)
		var n int
		err = e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.message_dead_letter_due(100, $1, $2, $3)`,
			horizon, string(sweeper), e.Clock.Now()).Scan(&n)
		require.ErrorIs(t, db.Translate(err, "test"), db.ErrInvalidArgument, horizon)
	}
	require.Equal(t, before, snapshot(t, e.Pool))
	for _, horizon := range []time.Duration{time.Minute, 366 * 24 * time.Hour} {
		sw := waitSweeper(t, e, 1000, nil, cases.DeadLetterSweep(time.Hour, horizon))
		_, err := sw.Sweep(ctx, cases.SweepDeadLetters)
		require.NoError(t, err, horizon)
	}
	dead, err := e.app.DeadLetters(ctx, cases.DeadLetterFilter{Project: project})
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Contains(t, dead[0].Reason, "horizon")
}

// fillWaits gives one case of acme waiting waits, each on a key of its own,
// with both continuations: due of them with a deadline before t0, the rest
// a day or more after.
func fillWaits(t testing.TB, e env, waiting, due int) {
	t.Helper()
	ctx := context.Background()
	c := e.admit(t, key("document", fmt.Sprintf("BULK-WAITS-%d", waiting)))
	require.NoError(t, raw(ctx, e.Pool, `
		INSERT INTO docket.waits (case_id, project, name, keys, deadline,
		                          on_arrival_kind, on_arrival_queue, on_arrival_payload, on_arrival_payload_schema,
		                          on_arrival_max_attempts, on_timeout_kind, on_timeout_queue, on_timeout_payload,
		                          on_timeout_payload_schema, on_timeout_max_attempts, created_by, created_at)
		SELECT $1, 'acme', 'w-' || n, ARRAY['document:W-' || n],
		       CASE WHEN n <= $3 THEN $4::timestamptz - n * interval '1 second'
		            ELSE $4::timestamptz + interval '1 day' + n * interval '1 second' END,
		       'supplier.reply', 'default', '{}', 1, 5, 'supplier.chase', 'default', '{}', 1, 5,
		       'svc:app', $4::timestamptz - interval '1 day'
		FROM generate_series(1, $2::int) n`, c.ID, waiting, due, t0))
	_, err := e.Pool.Exec(ctx, `ANALYZE docket.waits`)
	require.NoError(t, err)
}

// fillMessages gives acme buffered messages, each under a key of its own:
// due of them buffered for more than the default horizon of seven days at
// t0, the rest for at most 28 hours.
func fillMessages(t testing.TB, e env, buffered, due int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, raw(ctx, e.Pool, `
		INSERT INTO docket.messages (project, producer, message_id, keys, payload, arrived_at, delivered_by)
		SELECT 'acme', 'supplier:bulk', 'b-' || n, ARRAY['document:B-' || n], jsonb_build_object('n', n),
		       CASE WHEN n <= $2 THEN $3::timestamptz - interval '8 days' - n * interval '1 second'
		            ELSE $3::timestamptz - n * interval '1 second' END,
		       'svc:inbox'
		FROM generate_series(1, $1::int) n`, buffered, due, t0))
	_, err := e.Pool.Exec(ctx, `ANALYZE docket.messages`)
	require.NoError(t, err)
}

// The statements wait_expire_due and message_dead_letter_due run to find
// their batch, for EXPLAIN.
const (
	expirySweepQuery = `
		SELECT * FROM docket.waits
		WHERE status = 'waiting' AND deadline <= $1
		  AND docket.grant_check($2, project, 'case.sweep')
		  AND (on_timeout_kind IS NULL OR docket.grant_check($2, project, 'job.create'))
		ORDER BY deadline, id
		LIMIT 1000
		FOR UPDATE SKIP LOCKED`
	deadLetterSweepQuery = `
		SELECT * FROM docket.messages
		WHERE status = 'buffered' AND arrived_at <= $1::timestamptz - $3::interval
		  AND docket.grant_check($2, project, 'case.sweep')
		ORDER BY arrived_at, id
		LIMIT 1000
		FOR UPDATE SKIP LOCKED`
)

// sweepCounters runs sweep in a transaction of its own and reports how many
// rows it returned, and what it did to table by the backend's counters:
// tuples updated, entries of index returned, sequential scans of table.
func sweepCounters(t testing.TB, e env, table, index, sweep string, args ...any) (moved int, updated, read, seqScans int64) {
	t.Helper()
	ctx := context.Background()
	stats := fmt.Sprintf(`SELECT pg_stat_get_xact_tuples_updated('docket.%[1]s'::regclass),
		pg_stat_get_xact_tuples_returned('docket.%[2]s'::regclass),
		pg_stat_get_xact_numscans('docket.%[1]s'::regclass)`, table, index)
	var before, after [3]int64
	require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, stats).Scan(&before[0], &before[1], &before[2]); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+sweep, args...).Scan(&moved); err != nil {
			return err
		}
		return tx.QueryRow(ctx, stats).Scan(&after[0], &after[1], &after[2])
	}))
	return moved, after[0] - before[0], after[1] - before[1], after[2] - before[2]
}

// TestWaitSweepsAreRangeScans: with 100,000 waiting waits and 100,000
// buffered messages, of which 100 each are due, the expiry sweep's batch
// comes from waits_deadline_idx and the dead-letter sweep's from
// messages_buffered_idx, each reading and moving the 100 due rows only.
func TestWaitSweepsAreRangeScans(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// Filling takes about ten seconds (each row runs the tables' checks,
	// guards and event triggers and enters a GIN index); the rest of the
	// package runs meanwhile. BenchmarkWaitSweeps times the sweeps.
	const rows = 100_000
	fillWaits(t, e, rows, 100)
	fillMessages(t, e, rows, 100)
	horizon := cases.DefaultDeadLetterHorizon

	plan := pgtest.Explain(t, e.Pool, expirySweepQuery, t0, string(sweeper))
	t.Logf("expiry sweep plan at %d waiting, 100 due:\n%s", rows, plan)
	require.Regexp(t, `Index Scan using waits_deadline_idx on waits \(actual [^)]*rows=100 loops=1\)`, plan,
		"the scan reads the 100 due waits, no more")
	require.NotContains(t, plan, "Seq Scan")

	plan = pgtest.Explain(t, e.Pool, deadLetterSweepQuery, t0, string(sweeper), horizon)
	t.Logf("dead-letter sweep plan at %d buffered, 100 due:\n%s", rows, plan)
	require.Regexp(t, `Index Scan using messages_buffered_idx on messages \(actual [^)]*rows=100 loops=1\)`, plan,
		"the scan reads the 100 due messages, no more")
	require.NotContains(t, plan, "Seq Scan")

	// What the functions themselves read and write, not only the copies
	// EXPLAINed above.
	moved, updated, read, seqScans := sweepCounters(t, e, "waits", "waits_deadline_idx",
		`docket.wait_expire_due(10000, $1, $2)`, string(sweeper), t0)
	require.Equal(t, 100, moved)
	require.EqualValues(t, 100, updated, "only the due waits are written")
	require.EqualValues(t, 100, read, "the sweep reads the 100 due entries of waits_deadline_idx, no more")
	require.Zero(t, seqScans, "the sweep never scans docket.waits")

	moved, updated, read, seqScans = sweepCounters(t, e, "messages", "messages_buffered_idx",
		`docket.message_dead_letter_due(10000, $3, $1, $2)`, string(sweeper), t0, horizon)
	require.Equal(t, 100, moved)
	require.EqualValues(t, 100, updated, "only the due messages are written")
	require.EqualValues(t, 100, read, "the sweep reads the 100 due entries of messages_buffered_idx, no more")
	require.Zero(t, seqScans, "the sweep never scans docket.messages")

	var expired, waiting, chases, dead, buffered int
	require.NoError(t, e.Pool.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM docket.waits WHERE status = 'expired'),
		       (SELECT count(*) FROM docket.waits WHERE status = 'waiting'),
		       (SELECT count(*) FROM docket.jobs WHERE kind = 'supplier.chase' AND idempotency_key LIKE 'wait:%:expired'),
		       (SELECT count(*) FROM docket.messages WHERE status = 'dead_lettered'),
		       (SELECT count(*) FROM docket.messages WHERE status = 'buffered')`).
		Scan(&expired, &waiting, &chases, &dead, &buffered))
	require.Equal(t, []int{100, rows - 100, 100, 100, rows - 100}, []int{expired, waiting, chases, dead, buffered})
}

// BenchmarkWaitSweeps times one run of the expiry sweep and one of the
// dead-letter sweep, each moving the 100 due items among 1,000 and among
// 100,000 waiting waits and buffered messages (rolled back after each run,
// so every run moves the same 100), and reports the median of 11 runs of
// each, in milliseconds, and the ratio of the 100,000 time to the 1,000
// time: the partial indexes keep it near 1. The runs at the two sizes
// alternate, so a drift in the machine's load falls on both.
func BenchmarkWaitSweeps(b *testing.B) {
	ctx := context.Background()
	sizes := []int{1_000, 100_000}
	envs := make([]env, len(sizes))
	for i, n := range sizes {
		envs[i] = setup(b)
		fillWaits(b, envs[i], n, 100)
		fillMessages(b, envs[i], n, 100)
	}
	sweeps := []struct{ name, query string }{
		{"expiry", `SELECT count(*) FROM docket.wait_expire_due(10000, $1, $2)`},
		{"deadletter", `SELECT count(*) FROM docket.message_dead_letter_due(10000, '7 days', $1, $2)`},
	}
	once := func(e env, query string) float64 {
		tx, err := e.Pool.Begin(ctx)
		require.NoError(b, err)
		defer func() { require.NoError(b, tx.Rollback(ctx)) }()
		var moved int
		start := time.Now()
		require.NoError(b, tx.QueryRow(ctx, query, string(sweeper), t0).Scan(&moved))
		took := time.Since(start)
		require.Equal(b, 100, moved)
		return float64(took.Microseconds()) / 1000
	}
	median := func(ms []float64) float64 {
		sort.Float64s(ms)
		return ms[len(ms)/2]
	}
	times := map[string][2]float64{}
	for b.Loop() {
		for _, s := range sweeps {
			var ms [2][]float64
			for _, e := range envs {
				once(e, s.query) // warm: plans and caches
			}
			for range 11 {
				for i, e := range envs {
					ms[i] = append(ms[i], once(e, s.query))
				}
			}
			times[s.name] = [2]float64{median(ms[0]), median(ms[1])}
		}
	}
	for _, s := range sweeps {
		t := times[s.name]
		b.ReportMetric(t[0], "ms/"+s.name+"-1k")
		b.ReportMetric(t[1], "ms/"+s.name+"-100k")
		b.ReportMetric(t[1]/t[0], s.name+"-ratio")
	}
}
