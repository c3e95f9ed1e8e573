// Package faults is docket's fault suite: a worker runs a few thousand jobs
// while the test breaks what it stands on, and then checks that every job
// still ends as docket promises. It has tests only.
//
// Each scenario starts a PostgreSQL cluster of its own from local binaries
// (internal/pgserver's Cluster: never the server of DOCKET_TEST_DATABASE_URL,
// which others share; partition's runs in a container), migrates the docket schema into it, gives the
// application a login role in docket_app and docket_worker bound to its
// actor, and enqueues the workload. The worker runs in a child process (the
// test binary run again, selected by an environment variable, through
// internal/workerproc, which the soak harness shares), on the system clock,
// so that leases really expire and the test can kill it. The waits poll the database
// with a deadline; nothing sleeps to let time pass but an outage itself.
//
// # The workload
//
// Non-repeatable jobs with 3 s leases. Each handler works 10-50 ms, writes a
// row outside its completion (faults.outside, on a connection of its own,
// keyed by job and attempt: the "outside effect") and returns a success
// whose writes add a row inside the completion transaction (faults.inside).
// It says on its standard output when it starts, the "started" marker.
//
// # The scenarios
//
// Faults strike mid-run, once a quarter of the jobs have succeeded.
//
//  1. restart: Postgres restarted mid-run with an immediate shutdown
//     (SIGQUIT to the postmaster, as pg_ctl -m immediate) on the same data
//     directory and port.
//  2. kill: the worker process SIGKILLed mid-run, and a new one started.
//  3. terminate: the worker's connections ended with pg_terminate_backend,
//     every 250 ms for 5 s.
//  4. outage: Postgres stopped (fast shutdown) for 5 s, then started again.
//  5. stop-in-outage: a second into an outage, the worker is sent SIGTERM
//     (it calls Stop) and must exit within 15 s; Postgres returns once it
//     has exited (and the outage has lasted 5 s), and a new worker runs the
//     rest.
//  6. cut-writes and cut-commit: one job in 50 has its connection cut inside
//     its completion transaction, once: a trigger on faults.inside (a
//     deferred constraint trigger, for the cut at COMMIT) records in a
//     session of its own (dblink) that it fired, then calls
//     pg_terminate_backend(pg_backend_pid()).
//  7. failover-sync and failover-async: the cluster has a streaming standby
//     (pg_basebackup; synchronous_standby_names '*', or none), the worker
//     and the checks connect with a multi-host URL (target_session_attrs
//     read-write). Mid-run the primary's WAL sender is stalled for a second
//     (SIGSTOP), the primary killed (SIGKILL to the postmaster and that
//     sender) and the standby promoted. Besides the checks below, every
//     success the job store acknowledged to the worker (its "succeeded"
//     lines) must be succeeded after the failover when replication is
//     synchronous; when it is asynchronous the report says how many were
//     lost and what became of their jobs (docs/operators.md).
//  8. partition: Postgres and the worker each run in a container on a Docker
//     network the test makes (the local clusters listen on 127.0.0.1 alone):
//     Postgres from the image scripts/pg-image builds from the machine's own
//     Debian packages, without a registry (built once per test process if it
//     is not there, in two to five minutes), and the worker on the same
//     image, running the test binary mounted from this machine. The test
//     reaches Postgres through the port its container publishes on
//     127.0.0.1. Mid-run the worker is cut off the network for 10 s (docker
//     network disconnect), then connected again. Neither side is told: their
//     connections stall until TCP's retransmissions, at intervals that
//     double, get through, up to about as long again after the network is
//     back, so the fault clears once Postgres has heard again from every
//     transaction the worker had open (or after 20 s). It needs a Docker
//     engine on this machine and skips without one, or without the image;
//     DOCKET_FAULTS_REQUIRE_DOCKER=1, which CI sets, makes that a failure.
//     DOCKET_FAULTS_PARTITION=apart skips it in a whole run: CI runs it on
//     its own after the README's test command.
//  9. plan-kill: runs of a plan that fans out and in (root, 20 leaves, a
//     join; every step repeatable) instead of the workload, the worker
//     SIGKILLed mid-run among the completions that advance the runs, and a
//     new one started; its own checks (plans_test.go) add that every run
//     succeeded with all its results and no step was enqueued twice.
//  10. batch-kill: a batch (package batches) of a three-step plan over 500
//     items (5,000 in the long form), fed in windowed passes of 100 new
//     items, the worker SIGKILLed mid-batch and a new one started (twice in
//     the long form), and the feeder crashed: a pass cancelled while it
//     admits a page, the feeding resumed from the cursor by a fresh client.
//  11. batch-100k (long form only): 100,000 items of that plan through two
//     workers, no fault, for the throughput and the cost of reading the
//     census at 1,000 and at 100,000 items. Both batch scenarios check
//     (batches_test.go) that the census is exact and agreed with the items
//     at every sample, the cursor is at the last key, every item has one
//     run of its own that succeeded, and no step was enqueued twice.
//
// After the fault, and once every job has settled, each scenario checks:
//
//   - no job lost: every job ended succeeded or uncertain, and while the
//     suite waited no job stayed claimed longer than its lease, the sweep
//     period and a slack after the fault cleared;
//   - completion writes exactly once: one faults.inside row for each
//     succeeded job, of its last attempt, and none for any other job;
//   - no non-repeatable job run twice: no job has outside rows of two
//     attempts;
//   - no job uncertain whose handler provably never started (no outside
//     row, no started marker): a failure where the worker process survives
//     (terminate, outage, partition, cut-writes, cut-commit), a count
//     otherwise;
//   - every job's history verifies (docket.job_verify);
//   - in the cut scenarios, every cut completion the worker tried again was
//     logged at WARN naming its job; in stop-in-outage, the worker exited
//     in time; in all, the race detector found nothing in the worker.
//
// TestChecksFindBreakage shows the checks are not vacuous: it breaks by hand,
// one job for each, what they look for, and each finds its job.
//
// Each scenario logs its jobs by final state, its recovery (fault to the
// first success after it; fault to a second with half the successes of a
// second before it), its uncertain jobs and how many of them had run, and
// the worker's warnings; TestFaults logs a table of all of them at the end.
//
// # Running
//
//	go test -race -count=1 ./integration/faults/          # bounded: 3,000 jobs a scenario, 5 s outages
//	go test -race -count=1 -v ./integration/faults/       # the same, showing the reports
//	go test -race -count=1 -v -timeout 120m ./integration/faults/ -docket.faults.long
//	DOCKET_FAULTS_LONG=1 go test -race -count=1 -timeout 120m ./...
//
// The long form runs 20,000 jobs a scenario with 20 s outages, and adds
// chaos: five faults over one run of 20,000 jobs, alternating an immediate
// restart of Postgres and a SIGKILL of the worker, and batch-100k, whose
// 300,000 jobs take about a quarter of an hour on two cores. go test -short
// skips the suite, and so does a machine without PostgreSQL server binaries
// (initdb, postgres; the packaged ones under /usr/lib/postgresql/*/bin are
// found).
// The cut scenarios need the dblink extension (postgresql-contrib) and skip
// without it.
package faults
