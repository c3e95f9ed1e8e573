// Package worker runs Go handlers for docket jobs on River: docket's pump.
//
// One [Client], made with [NewClient], enqueues and runs, as a River client
// does. Enqueueing writes the job into docket.jobs, in the caller's
// transaction when it gives one (beside its business writes): committed, the
// job will run; rolled back, it never existed. Its commit notifies the
// workers of its queue ([NotifyChannel]), whatever path made it — this
// client, package jobs, plain SQL, a case's continuation, a schedule.
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
// River runs batches ([BatchKind]): each claims up to [Batching.Max] due
// jobs of one queue in one statement, runs their handlers at once while
// heartbeats renew their leases, and records the outcomes through the job
// protocol. A claim takes jobs by priority, available_at and id, beginning
// where the queue's last full claim began and from the queue's head at least
// every [Batching.Rescan], so it need not step over every job claimed since
// the jobs table was last vacuumed. The outcomes:
//
//   - nil: succeeded, recorded with the batch's other successes in one
//     statement, in the transaction of its next claim; a [ResultFunc] may
//     return writes that commit with the success or not at all;
//   - a plain error, or a panic (its stack kept in the diagnostic): retryable,
//     queued again after the job's backoff, or dead once its attempts are
//     spent;
//   - [Fail] with [jobs.ClassPermanent]: failed; with [jobs.ClassUncertain]:
//     uncertain, for an operator to reconcile (retried instead when the job
//     is repeatable); [RetryAfter]: retryable after the given wait.
//
// The job's own attempts and backoff govern retries; River's retries of a
// batch cover only failures to reach the database. A handler whose lease is
// lost (the job was cancelled, or its lease expired and was taken over) has
// its context cancelled within one heartbeat, and its outcome is refused. A
// job whose payload schema no handler decodes is never claimed: it stays
// queued, listed in docket.jobs_undecodable.
//
// Every running worker runs the sweeps on its own timers, each run a bounded
// batch in a transaction of its own, safe with several processes: expired
// leases ([SweepLeases]), and those other packages add through
// [Config.Sweeps].
//
// An outcome the worker knows (a success, a failure, a release) whose write
// fails for any reason but a refusal is held and tried again against the
// same lease until it is recorded or the lease has expired; a success or a
// failure is then recorded late, once the lease sweep has made the job
// uncertain (see [Config.LateOutcomes]). A completion in doubt is resolved
// by reading the job back, and never turned into a retry.
//
// [Client.Stop] stops claiming, waits for running handlers and held
// outcomes until its context ends, then cancels the handlers and gives their
// leases back (attempts kept). It returns nil only when nothing is claimed
// by the worker; an outcome it had to abandon is named in its
// [*StopError], with what becomes of the job.
// The end of the context passed to [Client.Start] stops the worker hard, as
// River's does: handlers cancelled at once, then the same release. Start
// refuses a worker whose actor holds job.claim in no project.
//
// The worker writes only job delivery, lease and result facts, and the
// sweeps' deadline transitions: it never imports the coordination layer
// (lanes, cases), and a test enforces that.
//
// See docs/worker.md for the delivery guarantees, the tuning knobs and what
// an operator can see.
package worker
