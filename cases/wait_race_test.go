package cases_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
)

// waitJobs counts the jobs under each idempotency key a wait's end uses.
const waitJobs = `
	WITH keyed AS (
		SELECT idempotency_key AS key, count(*) AS n FROM docket.jobs
		WHERE idempotency_key LIKE 'wait:%' GROUP BY idempotency_key)`

// requireMatchInvariants checks, from the database, what no interleaving of
// deliveries, waits, sweeps and closes may break, across every message and
// wait stored so far. Each query counts violations.
func requireMatchInvariants(t testing.TB, e env, msgAndArgs ...any) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct{ what, sql string }{
		{"a consumed message whose wait does not name it back", `
			SELECT count(*) FROM docket.messages m
			WHERE m.status = 'consumed' AND NOT EXISTS (
				SELECT 1 FROM docket.waits w
				WHERE w.id = m.consumed_by AND w.status = 'satisfied' AND w.satisfied_by = m.id)`},
		{"a satisfied wait whose message does not name it back", `
			SELECT count(*) FROM docket.waits w
			WHERE w.status = 'satisfied' AND NOT EXISTS (
				SELECT 1 FROM docket.messages m
				WHERE m.id = w.satisfied_by AND m.status = 'consumed' AND m.consumed_by = w.id)`},
		{"a wait that consumed two messages", `
			SELECT count(*) FROM (SELECT consumed_by FROM docket.messages WHERE consumed_by IS NOT NULL
			                      GROUP BY consumed_by HAVING count(*) > 1) x`},
		{"a message that satisfied two waits", `
			SELECT count(*) FROM (SELECT satisfied_by FROM docket.waits WHERE satisfied_by IS NOT NULL
			                      GROUP BY satisfied_by HAVING count(*) > 1) x`},
		{"a message both consumed and dead-lettered", `
			SELECT count(*) FROM docket.messages
			WHERE (consumed_by IS NOT NULL AND (status <> 'consumed' OR dead_letter_reason IS NOT NULL))
			   OR (status = 'dead_lettered' AND consumed_by IS NOT NULL)`},
		{"a match that breaks the matching rule (keys, project, addressee, deadline)", `
			SELECT count(*) FROM docket.messages m JOIN docket.waits w ON w.id = m.consumed_by
			WHERE NOT (w.keys <@ m.keys) OR w.project <> m.project
			   OR (m.addressee IS NOT NULL AND m.addressee <> w.case_id)
			   OR w.deadline <= m.settled_at OR w.deadline <= m.arrived_at`},
		{"a satisfied wait without exactly one continuation under wait:ID:satisfied", waitJobs + `
			SELECT count(*) FROM docket.waits w
			LEFT JOIN keyed k ON k.key = 'wait:' || w.id || ':satisfied'
			LEFT JOIN docket.jobs j ON j.id = w.continuation_job_id
			WHERE w.status = 'satisfied'
			  AND (k.n IS DISTINCT FROM 1 OR j.id IS NULL OR j.idempotency_key <> k.key OR j.case_id <> w.case_id
			       OR j.project <> w.project OR j.kind <> w.on_arrival_kind)`},
		{"an expired wait without exactly the timeout continuation it names, under wait:ID:expired", waitJobs + `
			SELECT count(*) FROM docket.waits w
			LEFT JOIN keyed k ON k.key = 'wait:' || w.id || ':expired'
			LEFT JOIN docket.jobs j ON j.id = w.continuation_job_id
			WHERE w.status = 'expired' AND CASE
				WHEN w.on_timeout_kind IS NULL THEN w.continuation_job_id IS NOT NULL OR k.n IS NOT NULL
				ELSE k.n IS DISTINCT FROM 1 OR j.id IS NULL OR j.idempotency_key <> k.key OR j.case_id <> w.case_id
				     OR j.project <> w.project OR j.kind <> w.on_timeout_kind END`},
		{"a waiting or withdrawn wait with a continuation", `
			SELECT count(*) FROM docket.waits
			WHERE status IN ('waiting', 'withdrawn') AND continuation_job_id IS NOT NULL`},
		{"a job under a wait's key that is not the continuation of its end", `
			SELECT count(*) FROM docket.jobs j
			LEFT JOIN docket.waits w ON w.continuation_job_id = j.id
			WHERE j.idempotency_key LIKE 'wait:%'
			  AND (w.id IS NULL OR j.idempotency_key <> 'wait:' || w.id || ':' || w.status)`},
		{"a buffered message with a waiting wait it satisfies", `
			SELECT count(*) FROM docket.messages m JOIN docket.waits w
			  ON w.status = 'waiting' AND w.project = m.project AND w.keys <@ m.keys
			 AND (m.addressee IS NULL OR m.addressee = w.case_id) AND w.deadline > m.arrived_at
			WHERE m.status = 'buffered'`},
	} {
		var n int
		require.NoError(t, e.Pool.QueryRow(ctx, c.sql).Scan(&n), c.what)
		require.Zerof(t, n, "%d × %s %s", n, c.what, fmt.Sprint(msgAndArgs...))
	}
}

// statusCounts counts the messages filed under k, and the waits naming k, by
// status.
func statusCounts(t testing.TB, e env, k cases.Key) (messages, waits map[string]int) {
	t.Helper()
	ctx := context.Background()
	stored := k.Namespace + ":" + k.Value
	count := func(sql string) map[string]int {
		rows, err := e.Pool.Query(ctx, sql, stored)
		require.NoError(t, err)
		out := map[string]int{}
		for rows.Next() {
			var s string
			var n int
			require.NoError(t, rows.Scan(&s, &n))
			out[s] = n
		}
		require.NoError(t, rows.Err())
		return out
	}
	return count(`SELECT status, count(*) FROM docket.messages WHERE $1 = ANY (keys) GROUP BY status`),
		count(`SELECT status, count(*) FROM docket.waits WHERE $1 = ANY (keys) GROUP BY status`)
}

// raceOnOneKey releases deliverers deliveries of distinct messages and
// waiters registrations of distinct waits of one new case, all on one new
// key, together on a barrier, and checks that they paired off: min of the
// two matched, each once, the rest left buffered or waiting.
func raceOnOneKey(t *testing.T, e env, label string, deliverers, waiters int) {
	t.Helper()
	ctx := context.Background()
	in := e.as(t, inbox)
	k := key("document", "RACE-"+label)
	c := e.admit(t, key("round", label))
	start := make(chan struct{})
	var wg sync.WaitGroup
	delivered := make([]cases.Delivered, deliverers)
	awaited := make([]cases.Awaited, waiters)
	errs := make([]error, deliverers+waiters)
	for i := range max(deliverers, waiters) {
		if i < deliverers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				// Filed under one more key than the waits name: a wait
				// names a subset of its message's keys.
				delivered[i], errs[i] = in.Deliver(ctx, message(fmt.Sprintf("m-%s-%d", label, i), k, key("kind", "reply")))
			}()
		}
		if i < waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				spec := reply(k)
				spec.Name = fmt.Sprintf("reply-%d", i)
				awaited[i], errs[deliverers+i] = e.app.Await(ctx, c.ID, spec)
			}()
		}
	}
	close(start)
	wg.Wait()
	require.NoError(t, errors.Join(errs...), label)

	pairs := min(deliverers, waiters)
	waitOf := map[int64]cases.Awaited{}
	for _, a := range awaited {
		require.True(t, a.Created, label)
		require.Equal(t, c.ID, a.CaseID, label)
		waitOf[a.ID] = a
	}
	// Each match is made by exactly one call: the delivery that found its
	// wait, or the registration that found its message.
	matched := 0
	consumers := map[int64]bool{}
	for _, d := range delivered {
		require.False(t, d.Duplicate, label)
		if d.Status == cases.Consumed {
			matched++
			require.NotZero(t, d.ContinuationJobID, label)
			_, ours := waitOf[d.ConsumedBy]
			require.True(t, ours, "%s: message %d consumed by wait %d, not one of the round's", label, d.ID, d.ConsumedBy)
			require.False(t, consumers[d.ConsumedBy], "%s: wait %d consumed two messages", label, d.ConsumedBy)
			consumers[d.ConsumedBy] = true
		} else {
			require.Equal(t, cases.Buffered, d.Status, label)
			require.Zero(t, d.ContinuationJobID, label)
		}
	}
	for _, a := range awaited {
		if a.Status == cases.Satisfied {
			matched++
			require.NotZero(t, a.ContinuationJobID, label)
			require.False(t, consumers[a.ID], "%s: wait %d satisfied twice", label, a.ID)
			consumers[a.ID] = true
		} else {
			require.Equal(t, cases.Waiting, a.Status, label)
			require.Zero(t, a.ContinuationJobID, label)
		}
	}
	require.Equal(t, pairs, matched, "%s: every match is made once, by one call", label)

	messages, waits := statusCounts(t, e, k)
	require.Equal(t, nonZero(map[string]int{"consumed": pairs, "buffered": deliverers - pairs}), messages, label)
	require.Equal(t, nonZero(map[string]int{"satisfied": pairs, "waiting": waiters - pairs}), waits, label)
	require.Equal(t, pairs, continuations(t, e, c.ID, "supplier.reply"), label)
	requireMatchInvariants(t, e, label)
}

// nonZero drops the statuses counted zero: statusCounts reports none of
// them.
func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for s, n := range m {
		if n != 0 {
			out[s] = n
		}
	}
	return out
}

// TestDeliveriesAndWaitsRaceOnOneKey releases 32 deliveries and 32 waits on
// one key together, 50 times over: every round pairs them off exactly, each
// message consumed once, each wait satisfied once, one continuation each,
// nothing left buffered that a waiting wait would take.
func TestDeliveriesAndWaitsRaceOnOneKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for round := range 50 {
		raceOnOneKey(t, e, fmt.Sprintf("even-%d", round), 32, 32)
	}
}

// TestUnequalDeliveriesAndWaitsRace: 32 deliveries against 20 waits leave
// 20 consumed and 12 buffered; 20 deliveries against 32 waits leave 20
// satisfied and 12 waiting.
func TestUnequalDeliveriesAndWaitsRace(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for round := range 10 {
		raceOnOneKey(t, e, fmt.Sprintf("more-messages-%d", round), 32, 20)
		raceOnOneKey(t, e, fmt.Sprintf("more-waits-%d", round), 20, 32)
	}
	var consumed, buffered, waiting int
	require.NoError(t, e.Pool.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM docket.messages WHERE status = 'consumed'),
		       (SELECT count(*) FROM docket.messages WHERE status = 'buffered'),
		       (SELECT count(*) FROM docket.waits WHERE status = 'waiting')`).Scan(&consumed, &buffered, &waiting))
	require.Equal(t, 10*40, consumed)
	require.Equal(t, 10*12, buffered)
	require.Equal(t, 10*12, waiting)
}

// TestDuplicateDeliveriesStoreOneMessage releases 16 deliveries of the same
// producer and id together, 20 times over, half of them with a wait
// waiting: one message is stored, every call succeeds and gets it, one only
// reports it new, and the wait's continuation is enqueued once.
func TestDuplicateDeliveriesStoreOneMessage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	in := e.as(t, inbox)
	c := e.admit(t, key("document", "DUP"))
	const copies = 16
	for round := range 20 {
		withWait := round%2 == 0
		k := key("document", fmt.Sprintf("DUP-%d", round))
		var a cases.Awaited
		if withWait {
			spec := reply(k)
			spec.Name = fmt.Sprintf("reply-%d", round)
			var err error
			a, err = e.app.Await(ctx, c.ID, spec)
			require.NoError(t, err)
			require.Equal(t, cases.Waiting, a.Status)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		got := make([]cases.Delivered, copies)
		errs := make([]error, copies)
		for g := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got[g], errs[g] = in.Deliver(ctx, message(fmt.Sprintf("dup-%d", round), k))
			}()
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "round %d", round)

		fresh := 0
		for _, d := range got {
			require.Equal(t, got[0].ID, d.ID, "round %d: every call gets the one message", round)
			if !d.Duplicate {
				fresh++
			}
			if withWait {
				require.Equal(t, cases.Consumed, d.Status, "round %d", round)
				require.Equal(t, a.ID, d.ConsumedBy, "round %d", round)
				require.Equal(t, got[0].ContinuationJobID, d.ContinuationJobID, "round %d", round)
				require.NotZero(t, d.ContinuationJobID, "round %d", round)
			} else {
				require.Equal(t, cases.Buffered, d.Status, "round %d", round)
				require.Zero(t, d.ContinuationJobID, "round %d", round)
			}
		}
		require.Equal(t, 1, fresh, "round %d: exactly one delivery stored the message", round)
		var rows, jobs int
		require.NoError(t, e.Pool.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM docket.messages WHERE producer = 'supplier:4711' AND message_id = $1),
			       (SELECT count(*) FROM docket.jobs WHERE idempotency_key = 'wait:' || $2::bigint || ':satisfied')`,
			fmt.Sprintf("dup-%d", round), a.ID).Scan(&rows, &jobs))
		require.Equal(t, 1, rows, "round %d", round)
		if withWait {
			require.Equal(t, 1, jobs, "round %d", round)
		}
	}
	require.Equal(t, 10, continuations(t, e, c.ID, "supplier.reply"))
	requireMatchInvariants(t, e)

	// The same id from another producer is another message.
	d, err := in.Deliver(ctx, cases.Delivery{Project: project, Producer: "supplier:4712", MessageID: "dup-1",
		Keys: []cases.Key{key("document", "DUP-1")}})
	require.NoError(t, err)
	require.False(t, d.Duplicate)
	require.Equal(t, cases.Buffered, d.Status)
}

// TestRetryCompletesADeliveryThatDiedBeforeMatching: a delivery that stored
// its message and died before looking for its waiter leaves it buffered
// beside the wait it satisfies. The producer's retry is the same message,
// and completes the match, once; a "retry" with another payload or other
// keys is refused and changes nothing.
func TestRetryCompletesADeliveryThatDiedBeforeMatching(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	in := e.as(t, inbox)
	c := e.admit(t, key("document", "DOC-1"))
	a, err := e.app.Await(ctx, c.ID, reply())
	require.NoError(t, err)
	require.Equal(t, cases.Waiting, a.Status)

	// The delivery stores the message, and its match step dies: the store
	// commits, the match is rolled back.
	e.Clock.Advance(time.Hour)
	arrived := e.Clock.Now()
	require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		var stored int64
		if err := tx.QueryRow(ctx, `SELECT id FROM docket.message_store('acme', 'supplier:4711', 'm-1',
			ARRAY['document'], ARRAY['DOC-1'], '{"accepted":true}', NULL, $1, $2)`, string(inbox), arrived).Scan(&stored); err != nil {
			return err
		}
		match, err := tx.Begin(ctx) // a savepoint
		if err != nil {
			return err
		}
		var satisfied *int64
		if err := match.QueryRow(ctx, `SELECT (docket.message_offer($1, $2, $3)).id`, stored, string(inbox), arrived).Scan(&satisfied); err != nil {
			return err
		}
		require.NotNil(t, satisfied, "the match step found the wait")
		return match.Rollback(ctx) // and died
	}))
	var id int64
	var status string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT id, status FROM docket.messages WHERE message_id = 'm-1'`).Scan(&id, &status))
	require.Equal(t, "buffered", status, "the crash left the message stored and unmatched")

	// A retry that is not the same message is refused and changes nothing.
	e.Clock.Advance(time.Minute)
	before := snapshot(t, e.Pool)
	other := message("m-1")
	other.Payload = []byte(`{"accepted":false}`)
	_, err = in.Deliver(ctx, other)
	require.ErrorIs(t, err, db.ErrIdempotencyConflict)
	_, err = in.Deliver(ctx, message("m-1", key("document", "DOC-1"), key("kind", "confirmation")))
	require.ErrorIs(t, err, db.ErrIdempotencyConflict)
	_, err = in.DeliverTo(ctx, c.ID, message("m-1"))
	require.ErrorIs(t, err, db.ErrIdempotencyConflict)
	require.Equal(t, before, snapshot(t, e.Pool))

	// The real retry completes the delivery.
	d, err := in.Deliver(ctx, message("m-1"))
	require.NoError(t, err)
	require.True(t, d.Duplicate)
	require.Equal(t, id, d.ID)
	require.Equal(t, cases.Consumed, d.Status)
	require.Equal(t, a.ID, d.ConsumedBy)
	require.Equal(t, arrived, d.ArrivedAt, "the message arrived when it was stored, not when it was retried")
	require.NotZero(t, d.ContinuationJobID)
	w, err := e.app.Wait(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Satisfied, w.Status)
	require.Equal(t, id, w.SatisfiedBy)
	require.Equal(t, d.ContinuationJobID, w.ContinuationJobID)
	require.Equal(t, 1, continuations(t, e, c.ID, "supplier.reply"))
	wake, err := cases.WakeOf(jobOf(t, e, d.ContinuationJobID))
	require.NoError(t, err)
	require.Equal(t, cases.WakeMessage, wake.Reason)
	require.Equal(t, id, wake.Message.ID)
	require.Equal(t, arrived, wake.Message.ArrivedAt)

	// Retried again, and conflicting again: nothing moves.
	before = snapshot(t, e.Pool)
	again, err := in.Deliver(ctx, message("m-1"))
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, d.ContinuationJobID, again.ContinuationJobID)
	_, err = in.Deliver(ctx, other)
	require.ErrorIs(t, err, db.ErrIdempotencyConflict)
	require.Equal(t, before, snapshot(t, e.Pool))
	requireMatchInvariants(t, e)
}

// TestAddressedMessageReachesItsCaseAlone: a message delivered to case A on
// a key both A and B wait on is consumed by A's wait or stays buffered for
// it, never taken by B's, however A's and B's registrations race it.
func TestAddressedMessageReachesItsCaseAlone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	in := e.as(t, inbox)
	caseA := e.admit(t, key("customer", "A"))
	caseB := e.admit(t, key("customer", "B"))
	const bWaits = 8
	for round := range 12 {
		k := key("document", fmt.Sprintf("ADDR-%d", round))
		spec := func(who string, i int) cases.WaitSpec {
			s := reply(k)
			s.Name = fmt.Sprintf("%s-%d-%d", who, round, i)
			return s
		}
		// Round 0, 3, ...: A waits before; 1, 4, ...: A waits in the race;
		// 2, 5, ...: A waits after it.
		when := round % 3
		var aWait cases.Awaited
		var aErr error
		if when == 0 {
			aWait, aErr = e.app.Await(ctx, caseA.ID, spec("a", 0))
			require.NoError(t, aErr)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var d cases.Delivered
		var dErr error
		bErrs := make([]error, bWaits)
		bGot := make([]cases.Awaited, bWaits)
		for i := range bWaits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				bGot[i], bErrs[i] = e.app.Await(ctx, caseB.ID, spec("b", i))
			}()
			if i == bWaits/2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					d, dErr = in.DeliverTo(ctx, caseA.ID, message(fmt.Sprintf("addr-%d", round), k))
				}()
				if when == 1 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						aWait, aErr = e.app.Await(ctx, caseA.ID, spec("a", 0))
					}()
				}
			}
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(append(bErrs, dErr, aErr)...), "round %d", round)
		for _, b := range bGot {
			require.Equal(t, cases.Waiting, b.Status, "round %d: B's wait took A's message", round)
		}
		require.Equal(t, caseA.ID, d.Addressee)
		if when == 2 {
			require.Equal(t, cases.Buffered, d.Status, "round %d", round)
			aWait, aErr = e.app.Await(ctx, caseA.ID, spec("a", 0))
			require.NoError(t, aErr)
		}
		aNow, err := e.app.Wait(ctx, aWait.ID)
		require.NoError(t, err)
		require.Equal(t, cases.Satisfied, aNow.Status, "round %d", round)
		m, err := in.Message(ctx, d.ID)
		require.NoError(t, err)
		require.Equal(t, cases.Consumed, m.Status, "round %d", round)
		require.Equal(t, aWait.ID, m.ConsumedBy, "round %d", round)
		require.Equal(t, m.ID, aNow.SatisfiedBy, "round %d", round)
		messages, waits := statusCounts(t, e, k)
		require.Equal(t, map[string]int{"consumed": 1}, messages, "round %d", round)
		require.Equal(t, map[string]int{"satisfied": 1, "waiting": bWaits}, waits, "round %d", round)
		requireMatchInvariants(t, e, "round ", round)
	}
	require.Equal(t, 12, continuations(t, e, caseA.ID, "supplier.reply"))
	require.Zero(t, continuations(t, e, caseB.ID, "supplier.reply"))

	// An unaddressed message on the key goes to the oldest waiting wait:
	// B's, A's being spent.
	d, err := in.Deliver(ctx, message("open-0", key("document", "ADDR-0")))
	require.NoError(t, err)
	require.Equal(t, cases.Consumed, d.Status)
	w, err := e.app.Wait(ctx, d.ConsumedBy)
	require.NoError(t, err)
	require.Equal(t, caseB.ID, w.CaseID)
	requireMatchInvariants(t, e)
}

// TestCloseRacesDeliveriesAndWaits releases, 20 times over, the close of a
// case that waits and has a timer set, together with deliveries to it and to
// anyone on its key and registrations of more waits on it: no deadlock, no
// refusal but a registration that came too late, and once closed, the case
// waits for nothing: its waits are satisfied or withdrawn, its timers
// cancelled, its continuations those of waits a message satisfied.
func TestCloseRacesDeliveriesAndWaits(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	in := e.as(t, inbox)
	for round := range 20 {
		c := e.admit(t, key("round", fmt.Sprint(round)))
		k := key("document", fmt.Sprintf("CLOSE-%d", round))
		for i := range 4 {
			spec := reply(k)
			spec.Name = fmt.Sprintf("before-%d", i)
			_, err := e.app.Await(ctx, c.ID, spec)
			require.NoError(t, err)
		}
		_, err := e.app.SleepUntil(ctx, c.ID, "remind", t0.Add(time.Hour), cases.Continuation{Kind: "supplier.remind"})
		require.NoError(t, err)
		// A message for it that it has not consumed: on another key.
		_, err = in.DeliverTo(ctx, c.ID, message(fmt.Sprintf("held-%d", round), key("document", fmt.Sprintf("HELD-%d", round))))
		require.NoError(t, err)

		start := make(chan struct{})
		var wg sync.WaitGroup
		var closeErr error
		var mu sync.Mutex
		var errs []error
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		}
		for i := range 8 {
			if i == 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, closeErr = e.app.Close(ctx, c.ID)
				}()
			}
			wg.Add(3)
			go func() {
				defer wg.Done()
				<-start
				if _, err := in.DeliverTo(ctx, c.ID, message(fmt.Sprintf("to-%d-%d", round, i), k)); err != nil {
					fail(err)
				}
			}()
			go func() {
				defer wg.Done()
				<-start
				if _, err := in.Deliver(ctx, message(fmt.Sprintf("any-%d-%d", round, i), k)); err != nil {
					fail(err)
				}
			}()
			go func() {
				defer wg.Done()
				<-start
				spec := reply(k)
				spec.Name = fmt.Sprintf("during-%d", i)
				if _, err := e.app.Await(ctx, c.ID, spec); err != nil && !errors.Is(err, db.ErrCaseClosed) {
					fail(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		require.NoError(t, closeErr, "round %d", round)
		require.NoError(t, errors.Join(errs...), "round %d", round)

		var waiting, queuedTimers, heldBuffered, strayJobs int
		require.NoError(t, e.Pool.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM docket.waits WHERE case_id = $1 AND status NOT IN ('satisfied', 'withdrawn')),
			       (SELECT count(*) FROM docket.timers t JOIN docket.jobs j ON j.id = t.job_id
			        WHERE t.case_id = $1 AND j.state <> 'cancelled'),
			       (SELECT count(*) FROM docket.messages WHERE message_id = $2 AND status <> 'dead_lettered'),
			       (SELECT count(*) FROM docket.jobs j WHERE j.case_id = $1 AND j.kind = 'supplier.reply'
			          AND NOT EXISTS (SELECT 1 FROM docket.waits w WHERE w.continuation_job_id = j.id AND w.status = 'satisfied'))`,
			c.ID, fmt.Sprintf("held-%d", round)).Scan(&waiting, &queuedTimers, &heldBuffered, &strayJobs))
		require.Zero(t, waiting, "round %d: a closed case waits for nothing", round)
		require.Zero(t, queuedTimers, "round %d: its timer is cancelled", round)
		require.Zero(t, heldBuffered, "round %d: the message it never consumed is dead-lettered", round)
		require.Zero(t, strayJobs, "round %d", round)
		requireMatchInvariants(t, e, "round ", round)
	}
}
