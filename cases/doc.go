// Package cases keeps the durable record of a business matter that outlives
// any one job: which matter an inbound message belongs to, the matter's
// state, what is still owed by when, and what it waits for.
//
// A [Case] belongs to one project and has a kind, a status (open or closed)
// and a state: JSON docket stores and never interprets, with a version.
// Around it:
//
//   - Correlation keys ([Key]): business identifiers such as (document,
//     DOC-4711). [Client.Admit] finds the one open case holding any of the
//     keys or creates it; concurrent admissions for one new matter make
//     exactly one case, because a unique index over the keys open cases hold
//     decides, not a read followed by a write. Keys held by two different
//     open cases are [db.ErrAmbiguousCorrelation], naming both.
//     [Client.Correlate] looks up without creating.
//   - Versioned state: [Client.PutState] names the version it read, and the
//     check is a predicate on the one UPDATE; a writer that lost the race gets
//     [db.ErrVersionConflict]. There is no write without a version.
//   - Obligations ([Obligation]): pending → met | breached | withdrawn, each
//     terminal and immutable; re-applying the state held is a no-op, and a
//     late meet is recorded beside the breach ([EventLateMeet]). Closing a
//     case with a pending obligation is [db.ErrObligationsOutstanding];
//     registering one on a closed case is [db.ErrCaseClosed]; both decide
//     under the case row's lock.
//   - Close and reopen: closing releases the keys, so a new matter about the
//     same entity opens a fresh case; reopening takes back the keys no other
//     open case claimed since and reports which it took and which it left.
//   - The breach sweep ([BreachSweep]) moves pending obligations that are due
//     to breached and enqueues the escalation job each names, in one
//     transaction, for worker.Config.Sweeps.
//   - Calendars: [Client.RegisterFromSpec] resolves a deadline spec through a
//     calendar.Calendar and stores the instant with the spec and the
//     calendar's digest; the instant is never recomputed, and a spec the
//     calendar cannot resolve exactly is refused.
//   - Durable waits ([Wait]): [Client.Await] registers what a case waits
//     for — a message on its keys, before a deadline — and
//     [Client.Deliver] stores an inbound message (deduplicated on producer
//     and id) and offers it to the oldest wait it satisfies. Whichever comes
//     first, they meet in the store, and the match enqueues the wait's
//     continuation job in the same transaction ([WakeOf] reads why it runs).
//     A message is consumed by one wait at most, a wait satisfied by one
//     message at most. [Client.DeliverTo] sends a message to one case alone.
//     [WaitExpirySweep] expires waits past their deadline and enqueues their
//     timeout continuations; [DeadLetterSweep] dead-letters messages no wait
//     claimed within a horizon, never on arrival ([Client.DeadLetters]).
//   - Timers ([Timer]): [Client.SleepUntil] is a job of the case available at
//     an instant, which it records as the wake it reports; [Client.SetTimer]
//     one of the project, of no case.
//   - Waits, timers and tasks of a run's step (package plans) are these same
//     rows, owned by the step instead of a case: a step's wait answers the
//     step instead of enqueuing a continuation, and a step's timer is fired
//     by [TimerSweep] ([Client.FireTimers]).
//   - Closing a case withdraws its waits, dead-letters the messages addressed
//     to it and cancels its unfired timers.
//
// The rules live in the database (transition tables, triggers, a partial
// unique index), so a hand-written UPDATE in psql is held to them too, and
// every change appends a docket.case_events row carrying the case id in the
// same transaction: [Client.History] is one index range scan.
//
// # Who may do what
//
//	case.admit   admit, correlate, write state, register and settle
//	             obligations, close, reopen; read
//	case.view    read cases, keys, obligations and history
//	case.sweep   the deadline sweeps' actor, per project; enqueuing
//	             escalations and continuations also needs job.create
//	message.deliver  deliver messages (with job.create); read them
//
// An admission or correlation in a project where the actor holds no
// case.admit is [db.ErrNotPermitted]. A case the actor may not write or read
// is not there: [db.ErrNotFound], in the same words as an unknown case, and a
// listing is silently filtered.
//
// Every operation has a form ending in Tx that runs on the caller's
// transaction, so an admission, a state write or an obligation commits or
// rolls back with the caller's business writes. Storage never reads the wall
// clock: every instant comes from [Config.Clock].
package cases
