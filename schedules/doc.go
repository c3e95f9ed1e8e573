// Package schedules keeps recurring jobs as durable rows in Postgres: a cron
// expression in an IANA zone, the job each occurrence enqueues, a catch-up
// policy and bounds. The schedule sweep ([Sweep]) materializes due
// occurrences as ordinary jobs, in the transaction that moves the
// schedule's cursor on.
//
// Occurrences are exact across daylight-saving transitions ([Next]):
//
//   - An occurrence's identity is (schedule, local date-time, fold), fold 0
//     for the first occurrence of a local time and 1 for the second; a
//     unique key on it means however many sweepers run, each occurrence
//     becomes one job. The resolved UTC instant is stored with the job.
//   - A fixed-time schedule (neither minute nor hour is * or */n) whose
//     local time does not exist (spring forward) runs once at the first
//     instant after the gap; several slots in one gap are one run. An
//     interval-like schedule has no run inside the gap.
//   - A repeated local time (fall back) runs a fixed-time schedule once, at
//     its first occurrence, and an interval-like one at both, so hourly
//     means every 60 real minutes.
//   - The next occurrence is the first strictly after the persisted cursor;
//     the search is bounded ([SearchHorizon]) and a step that would not
//     advance is an error.
//
// After downtime or a pause, occurrences more than a schedule's grace late
// are missed, and its [CatchUp] policy decides: skip none, run one, or run
// all up to MaxCatchUp; the rest are recorded as a skipped window
// ([EventSkipped]), never dropped silently. A sweep runs at most
// [MaxRunsPerSweep] occurrences of a schedule; the oldest caught-up ones
// that do not fit are skipped.
//
// Every schedule declares how it ends: an End, a MaxOccurrences, or
// Unbounded with an UnboundedReason, a decision signed in advance and kept
// on the schedule and in its created event. A schedule past its End or its
// MaxOccurrences is finished, not deleted.
//
// A schedule the sweep cannot plan, or whose plan the database refuses, is
// [Broken], with the reason: the sweep passes it over, and every other
// schedule advances, until [Client.Update] or [Client.Resume] mends it.
//
// Grants: schedule.manage (with job.create) to create and change schedules,
// schedule.view to read them, schedule.sweep (with job.create) for the
// sweep's actor. See docs/schedules.md.
package schedules
