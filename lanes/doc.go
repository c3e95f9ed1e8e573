// Package lanes is docket's coordination layer above jobs: quorums and
// lanes, with their review and merge records.
//
// A [Quorum] belongs to one project and has one conductor. A [Lane] is a
// named stream of work under one quorum — one branch, one assignee, one task
// thread — that generates many jobs over time (jobs.Spec.LaneID). It takes
// its project from its quorum, for good, and has three independent axes:
//
//	execution  open → in_progress → done | failed; open, in_progress → cancelled
//	review     none → submitted → approved | changes_requested; changes_requested → submitted
//	merge      recorded once, only when done and approved, with a commit
//
// Done, failed and cancelled are terminal; approved is final; a recorded
// merge never changes. Moving one axis never moves another, and completing a
// job of the lane moves none of them. The rules live in the database
// (transition tables, triggers, a CHECK for the merge), so a hand-written
// UPDATE in psql is held to them too, and every change appends a
// docket.lane_events row in the same transaction ([Client.History]).
//
// # Who may do what
//
//	create a quorum                   an explicit quorum.create grant on the project
//	create a lane                     the quorum's conductor
//	move execution, approve,
//	request changes, record a merge   the quorum's conductor
//	submit for review                 the conductor or the lane's assignee
//	read a lane, its history, jobs    the conductor, the assignee, or a lane.view grant
//
// A refused write is [db.ErrNotPermitted], decided from columns that never
// change, read without a lock, before the lane is locked: a refused caller
// waits for nobody and learns nothing about the lane (an unknown lane is
// refused in the same words). Reads are silently filtered: a lane the actor
// may not read is [db.ErrNotFound] to [Client.Get], and absent from
// [Client.List].
//
// Repeating a move or a verdict is refused ([db.ErrIllegalTransition]): when
// two verdicts race, one wins and the other learns that it lost. Only a merge
// is idempotent: recording the same commit again is a quiet no-op, another
// commit is [db.ErrTerminal].
//
// A lane depends only on older lanes of its own quorum, named at creation, so
// no dependency cycle can be written. Dependencies are recorded, and shown;
// they gate nothing.
//
// Every write comes in a form taking the caller's transaction (CreateTx,
// SetStateTx, …), so a lane change commits with the business write beside
// it. Every instant comes from the client's [db.Clock]; storage never reads
// the wall clock. See docs/lanes.md.
package lanes
