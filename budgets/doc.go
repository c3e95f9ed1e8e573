// Package budgets bounds what a run of a plan may do: ceilings on the steps
// it admits, the effects it has and the money it spends (integer minor
// units of one currency), and how many of its steps are in flight at once
// (a wide ready set is dispatched in ready order, never more at a time).
//
// A step reports what it spent when its job completes, as the member
// "spent" of its result ([Report]); the run's tally is what was recorded,
// never asked again. Exhaustion is not failure: a run that reaches a
// ceiling stops starting steps and is exhausted, completed work stands, and
// the steps already in flight finish. [Client.Resume] raises its ceilings
// and resumes it, records who raised what, and evaluates the recorded
// refusal again; a run that compensated cannot resume.
//
// The overshoot is bounded, not hidden: a run admits a step only while its
// tally plus one call ([Budget.MaxCall]) for every step in flight, this one
// included, stays within its money ceiling. Steps that keep to MaxCall
// never carry a run past its ceiling; without MaxCall, a run can overshoot
// by what its steps in flight spend, at most one operation's cost per
// step in flight.
//
// A project's spend quota per period ([Client.SetQuota]) reserves each
// run's worst case — its ceiling plus one call per step that may be in
// flight — when the run is admitted, under the quota's lock, so concurrent
// and exhausted runs cannot together carry the period past it; a run's
// reservation shrinks to what it spent when it ends. See docs/budgets.md.
package budgets
