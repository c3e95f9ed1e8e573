// Package plans runs frozen, content-addressed job graphs: a [Plan] is
// data (steps with a job kind, arguments that each declare their source,
// predecessors, terminal flags and compensations), validated in full
// ([Validate] reports every problem at once, each naming its step) and
// frozen before anything runs, stored once under the sha256 of its
// canonical form ([Digest]). A run records the digest it runs.
//
// Scheduling is in SQL: when a step's job succeeds, the same transaction
// records its result and admits the steps whose predecessors have all
// succeeded, assembling their arguments from recorded results and joining
// their trust labels, and enqueues them as ordinary docket jobs in
// ascending step id. Outcomes are applied, and steps admitted, in ready
// order, whatever order the jobs finish in, so the order a run unwinds is
// a property of the plan and its history. A permanent failure, a refusal
// (a step that requires trusted input and would not get it), an uncertain
// step or a cancel unwinds the run: nothing more is admitted, the steps
// already running finish, and the compensations of the completed steps run
// one after another in reverse of the recorded order.
//
// A run can be replanned ([Client.Replan]): the successor names the plan it
// replaces and why, within the run's replan limit, never once an
// untrusted value has been read, and may carry a completed step over only
// unchanged. Every version stays on record. See docs/plans.md.
package plans
