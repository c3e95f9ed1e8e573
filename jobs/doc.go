// Package jobs is docket's job model: durable knowledge that work is wanted,
// held, done, failed or in doubt, with one holder at a time, bounded
// attempts, and an outcome nobody can rewrite.
//
// A job lives in docket.jobs and moves along docket.job_transitions only:
//
//	queued    → claimed | cancelled | queued (pinned to handler revisions) | exhausted
//	claimed   → queued | claimed | succeeded | failed | dead | uncertain | cancelled | exhausted
//	uncertain → succeeded | failed | queued | cancelled | exhausted | dead (a late failure on its last attempt)
//	exhausted → queued | cancelled
//
// The database enforces the machine for every writer, a hand-written UPDATE
// in psql included, and appends a hash-chained docket.job_events row for
// every move in the same transaction ([Client.History], [Client.Verify]).
//
// # Enqueueing
//
// A [Client] acts for one actor in one project. [Client.EnqueueTx] joins the
// caller's transaction, so a job commits or rolls back with the business
// write beside it; [Client.EnqueueManyTx] enqueues up to 100,000 jobs in one
// statement. An idempotency key makes enqueueing safe to retry: the same key
// and request return the existing job as a duplicate, the same key with
// another payload, params, inputs, output or any other field that changes
// what the job does is refused ([db.ErrIdempotencyConflict]). Creating a job
// needs an explicit job.create grant on the project.
//
// [Kind] gives a kind a typed payload and a payload schema version, so code
// never marshals by hand and never decodes one version as another.
//
// # Budgets
//
// A job may carry a [Budget]: ceilings on the effects and the money (integer
// minor units of one currency) its attempts spend, together. Each attempt
// reports what it spent with its outcome ([Completion.Spent],
// [Failure.Spent]). A success stands whatever it spent; a retryable failure
// that leaves a ceiling reached makes the job [Exhausted], not failed and
// not retried, until [Client.Resume] raises the ceiling. A job with a money
// ceiling reserves what it may still spend in its project's quota at each
// claim; a claim the quota cannot take leaves it exhausted. See
// docs/budgets.md.
//
// # The lease protocol
//
// [Client.Claim] hands out due jobs, each with a fresh random token, a lease
// until an instant, a new lease generation and one more attempt. Concurrent
// claimants get distinct jobs; an actor without the job.claim grant gets the
// same empty answer as one with nothing to do. The token proves the claim:
// [Client.Renew], [Client.Release], [Client.Complete] and [Client.Fail]
// require it and a live lease, and refuse any other token with
// [db.ErrStaleClaim] without touching the job. Only the holder whose claim
// finished a job hears about its outcome: repeating it is a quiet no-op,
// another outcome is [db.ErrTerminal].
//
// A claim is bound to the handler revision that took it: a claimant names
// its revision per kind ([Decoder.Revision]), the claim records it
// ([Job.ClaimedRevision], and each event's [Event.Revision], in the hash),
// and a call on the lease from another revision is [db.ErrStaleClaim].
// [Client.Pin] holds queued jobs to the revisions they may run under; a job
// pinned to revisions no deployment runs is never claimed, and
// [Filter.Unrunnable] lists it.
//
// A retryable failure queues the job again after a backoff from its
// [RetryPolicy] and makes it dead on its last attempt; a permanent failure
// fails it; an uncertain failure, or a lease that expired under a lost
// worker ([Client.ExpireLeases]), leaves it uncertain unless the job is
// repeatable, because the worker may have done the work. An uncertain job
// waits for [Client.Reconcile] or [Client.Cancel].
//
// # Provenance
//
// A job may name the output it is asked for ([Spec.Output]: an asset, a
// representation kind, a logical target root). Its completion then records
// what the worker actually produced and used, a [CompletionRecord] passed
// with [Client.CompleteWith] or [Client.CompleteMany]: storage checks it
// against the request in the completion's transaction, by a rule it alone
// holds (this package has no copy), and refuses a mismatch with
// [db.ErrInvalidArgument]: [Client.CompleteWith]'s whole completion rolls
// back; [Client.CompleteMany] refuses that element and completes the others.
// The job's parameters are never copied onto it. [Client.RerunPlan] reads
// what it takes to do a completed job again as it was done, and
// [Client.ProducedBy] which job produced an output; both only read.
//
// # Reading from a replica
//
// A client given a [Config.Replica], a pool on a hot standby, reads there
// what tolerates lag (Get, List, History, Census, …) and says how far
// behind that may be ([Client.ReplicaLag]); every write, and every …Tx
// read, stays on its pool. See docs/cells.md.
//
// Execution is at-least-once: a lease gives one holder at a time, not one
// execution in the world. Handlers with external effects should carry their
// own idempotency keys. See docs/jobs.md.
//
// Every function takes its instant from the client's [db.Clock], and every
// decision by time is made at it; the database reads its own clock only to
// refuse an instant too far from it (see [db.ErrClockSkew]).
package jobs
