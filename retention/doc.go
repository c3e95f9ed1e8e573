// Package retention decides how long a project's finished work stays in
// docket, and removes it once it is past that: the prune, the only path by
// which anything docket writes is ever deleted.
//
// A project's [Policy] gives a horizon for succeeded and cancelled jobs,
// failed and dead jobs, dead-lettered messages no case took, schedule
// occurrences, and closed cases ([Defaults] when it set none; [Forever]
// keeps). [Sweep] is the prune, for worker.Config.Sweeps: each run removes,
// in one transaction, a bounded batch of what is past its horizon in the
// projects where the worker's actor holds retention.prune, oldest first,
// skipping what another process holds, so several processes may prune at
// once. It never removes an uncertain or unfinished job, a job of a lane
// still open, or a case that is open or still has such a job; a case goes
// with everything bound to it (keys, obligations, timers, waits, messages,
// jobs and all their events).
//
// Before it deletes anything a prune verifies each job's hash chain (a job
// that does not verify is kept, and counted) and records, append-only in
// docket.prunes, what it removes: the ids as ranges, counts by state and a
// digest over the removed jobs' chain heads ([Prune]). [Client.Verify]
// checks chain heads an auditor kept (from [Client.Heads], taken before the
// prune, or from an archive) against that record. Reading a pruned job
// through jobs.Client.Get answers a *jobs.PrunedError naming its prune.
//
// Idempotency keys, message ids and occurrence identities are honoured as
// long as what holds them is kept: once a job is pruned, enqueueing with its
// key creates a new job. See docs/retention.md.
package retention
