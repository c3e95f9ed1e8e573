// Package soak is docket's soak harness: two worker processes run a long
// stream of no-op jobs in one project while the prune sweep removes the
// finished ones, and the harness measures whether the rate stays flat as
// the job count grows, and what the tables weigh meanwhile. It has tests
// only.
//
// Each run gets a fresh migrated database from integration/pgtest (the
// server of DOCKET_TEST_DATABASE_URL, or whatever pgtest finds), creates
// project acme as user:ana, grants svc:app job.create and worker:soak
// job.claim and retention.prune, gives both a login in docket_app and
// docket_worker bound to them, and sets acme's policy: succeeded jobs kept
// a short horizon, the rest the defaults. The workers are child processes (the test binary run
// again, selected by an environment variable, through internal/workerproc,
// which the fault suite shares), each a worker.Client acting
// as worker:soak with one no-op handler, the default batching and queues,
// a sweep limit of 10,000 and, when pruning is on, retention.Sweep every
// second. The parent enqueues as svc:app with jobs.Client.EnqueueMany in
// chunks of 5,000, topping the backlog of unfinished jobs up to a bound, so
// the rate measured is the workers'. Everything runs on the system clock:
// the harness measures real time.
//
// # What it measures
//
// Each worker reports, every 100 ms, how many jobs it has succeeded (a
// success is reported once it has committed), and once a second the parent
// looks at the sum: that is the run's progress, and what keeps the backlog
// bounded. It costs the database nothing. The count of record is the
// database's, taken as the owner when each slice of completions ends and
// at the end, in one statement: the succeeded jobs present plus the jobs
// the project's prunes removed (sum of docket.prunes.jobs), so it survives
// pruning. (Counting the succeeded jobs once a second took 200 ms a time
// with pruning on and more as the table grew with it off, a load that
// would have been measured with the rest.) From these the harness reports:
//
//   - the rate of each successive slice of completions (100,000 in the
//     long form), interpolated between looks, and the ratio of the last
//     slice's rate to the first's (flat is a ratio near 1; the target is
//     0.9 or more); the buffers the database read or hit for each job
//     completed in the slice (pg_stat_database), a measure of the work that
//     does not depend on what else the machine runs; and, at each slice's
//     end, the database's count, the succeeded jobs not yet pruned, the
//     tables' total sizes, their autovacuums so far and the machine's load
//     average;
//   - the sizes of docket.jobs, docket.job_events, docket.prunes and River's
//     docket.river_job (pg_total_relation_size, pg_relation_size,
//     pg_indexes_size) at the start, once half the jobs completed and at the
//     end, with their live and dead tuples and autovacuum counts from
//     pg_stat_user_tables, and each of their indexes' sizes in the middle
//     and at the end;
//   - the prune's time: each worker times every run of its prune sweep, in
//     the sweep function (docket.prune_run) and through its commit (until
//     the worker reports the run), and prints it; the parent sums them;
//   - what the database's count cost;
//   - an application's enqueue latency as the run goes on: once a look,
//     while jobs remain to enqueue, one job is enqueued alone
//     (jobs.Client.Enqueue) and timed, and the report gives the p50 and
//     p99 of those in the first slice and in the last slice that has any.
//
// The long form runs the same harness a second time with pruning off
// (the workers run no prune sweep), on a fresh database, for contrast, and
// logs a table comparing the two.
//
// # What it checks
//
// After every job completed, the workers are stopped and the harness
// checks, in both forms: every job of the project ended succeeded or was
// pruned; none was lost (each enqueued id is present or within exactly one
// prune's job_ids, and present jobs plus pruned jobs equal the jobs
// enqueued); no prune removed more than was enqueued, or anything but
// succeeded jobs, or kept a job that did not verify; a sample of the
// remaining jobs' histories verifies (docket.job_verify); the workers
// reported no errors and, under -race, no data race. The bounded form
// keeps succeeded jobs only one second, so that the prune removes jobs
// while the run goes on, and checks that it did. Timings are reported,
// never asserted.
//
// # Running
//
//	export DOCKET_TEST_DATABASE_URL='postgres://docket_test:docket_test@127.0.0.1:5432/postgres?sslmode=disable'
//	go test -race -count=1 ./integration/soak/        # bounded: 30,000 jobs, pruning on
//	go test -race -count=1 -v ./integration/soak/     # the same, showing the report
//	go test -count=1 -timeout 90m -v ./integration/soak/ -docket.soak.long
//	DOCKET_SOAK_LONG=1 go test -count=1 -timeout 90m ./...
//
// The long form runs 1,000,000 jobs with pruning on (succeeded jobs kept
// 30 s), then 1,000,000 with pruning off. DOCKET_SOAK_JOBS=N runs the long
// form for N jobs with pruning on only: N = 5,000,000 is ten million events
// (a job's birth is one, each attempt one):
//
//	DOCKET_SOAK_JOBS=5000000 go test -count=1 -timeout 180m -v -run TestSoak ./integration/soak/
//
// The long forms make the history's partitions 100,000 ids wide (the
// jobs' ids start past the migration's million-wide ones), so that their
// prunes drop partitions; DOCKET_SOAK_WIDTH=N runs them with another width,
// and DOCKET_SOAK_WIDTH=default with the migration's, where a million jobs'
// events share one partition and are pruned row by row.
//
// Run the long forms without -race, which
// would measure the race detector. Each run logs its database's name and
// oid, so that pg_stat_statements (keyed by dbid) can be read for it during
// or after the run. go test -short skips the harness.
package soak
