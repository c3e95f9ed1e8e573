// Package tasks is docket's worklist: human tasks a case waits on, with
// what a reviewer needs to disagree, four eyes enforced in the database,
// leased claims, a settle that exactly one answer wins, and an expiry
// policy declared when the task is opened.
//
// A task is a durable wait with an operational surface. [Client.Open]
// (a case-bound continuation typically calls it) registers, in one
// transaction, a wait on the task's own key and the task row; the task's id
// is derived from the opening's key, so a retried opening returns the same
// task. [Client.Decide] delivers the decision to that wait as an inbound
// message (producer docket.task, id the task's): the wait consumes it and
// its continuation job is enqueued in the same transaction, and
// [DecisionOf] reads the decision back from that job.
//
// Four eyes: the proposer the opening names, the actor that admitted the
// case and every principal the opening names as acting for someone may
// neither claim nor answer the task ([db.ErrExcludedActor], DK008), however
// they are granted. Claiming is atomic and leased ([Client.Claim]); two
// reviewers never hold one task at once. Settling is a compare-and-set from
// the pending states: of a decision and the expiry sweep, whichever reaches
// the task first wins, and the loser is refused with
// [db.ErrAlreadyAnswered] (DK007) and changes nothing.
//
// What the deadline does is declared at opening, never decided in the
// moment: [Escalate] releases any claim, widens the audience and sets a new
// deadline, after which the sweep owes the task nothing further; or
// [DecideAutomatically] names the decision taken, signed by the opener, and
// the task's history says it was automatic and who signed it. [ExpirySweep]
// applies it, for worker.Config.Sweeps. Closing a case withdraws its
// undecided tasks. See docs/tasks.md.
package tasks
