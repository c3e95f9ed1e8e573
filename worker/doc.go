// Package worker runs Go handlers for docket jobs on River: docket's pump.
//
// One [Client], made with [NewClient], enqueues and runs, as a River client
// does. Enqueueing, each job goes into docket.jobs and, in the same
// transaction (usually the caller's, beside its business writes), a River
// dispatch that carries the job's id to a running client once the job is
// due. Committed, the job will run; rolled back, neither exists.
//
// Started, a [Client] serves queues with the handlers of a [Registry],
// registered per kind with [Handle] or [HandleResult] (a client without
// handlers only enqueues):
//
//	reg := worker.NewRegistry()
//	worker.Handle(reg, invoiceKind, func(ctx context.Context, job *jobs.Typed[Invoice]) error {
//		return send(ctx, job.Args)
//	})
//
// For each dispatch the worker claims the job with a lease (many dispatches'
// claims in one statement and one commit), runs the handler while a heartbeat
// renews the lease, and records the outcome through the job protocol:
//
//   - nil: succeeded (grouped with other successes in one commit); a
//     [ResultFunc] may return writes that commit with the success or not at
//     all;
//   - a plain error, or a panic (its stack kept in the diagnostic): retryable,
//     queued again after the job's backoff, with a new dispatch in the same
//     transaction, or dead once its attempts are spent;
//   - [Fail] with [jobs.ClassPermanent]: failed; with [jobs.ClassUncertain]:
//     uncertain, for an operator to reconcile (retried instead when the job
//     is repeatable); [RetryAfter]: retryable after the given wait.
//
// The job's own attempts and backoff govern retries; River's retries of a
// dispatch cover only failures to reach the database. A handler whose lease
// is lost (the job was cancelled, or its lease expired and was taken over)
// has its context cancelled within one heartbeat, and its outcome is refused.
// A job whose payload schema no handler decodes is never handed to a handler:
// it stays queued, listed in docket.jobs_undecodable.
//
// Sweeps run as River periodic jobs on the elected leader, each a bounded
// batch in a transaction of its own, safe with several processes: expired
// leases ([SweepLeases]) and jobs no dispatch carries, such as jobs enqueued
// by SQL ([SweepDispatch]). Other packages add theirs through
// [Config.Sweeps].
//
// [Client.Stop] stops fetching, waits for running handlers until its context
// ends, then cancels them and gives their leases back (attempts kept, the
// jobs dispatched again), so no job stays claimed by a worker that stopped.
//
// The worker writes only job delivery, lease and result facts, and the
// sweeps' deadline transitions: it never imports the coordination layer
// (lanes, cases), and a test enforces that.
//
// See docs/worker.md for the delivery guarantees, the tuning knobs and what
// an operator can see.
package worker
