// Package dockettest helps the tests of programs that use docket: it asserts
// what a test's code enqueued, and runs one job's handler against a real
// job, without a worker loop, on the clock the test controls.
//
// # Asserting what was enqueued
//
// [RequireEnqueuedTx] finds the one job of a kind that a transaction sees,
// checks the fields a test names in [EnqueuedOpts], and returns it with its
// payload decoded; [RequireEnqueued] does the same on committed jobs. Call
// them after the code under test wrote its business rows and enqueued its
// jobs in one transaction:
//
//	tx, _ := pool.Begin(ctx)
//	placeOrderTx(ctx, tx, order)
//	job := dockettest.RequireEnqueuedTx(ctx, t, reader, tx, orders.InvoiceKind,
//		&dockettest.EnqueuedOpts{Queue: "billing", Priority: 2})
//	require.Equal(t, order.ID, job.Args.Order)
//
// [RequireNotEnqueued] and [RequireNotEnqueuedTx] fail when a matching job
// exists; [RequireManyEnqueued] and [RequireManyEnqueuedTx] check the jobs of
// several kinds, in the order they were enqueued.
//
// The assertions read through docket's API with the *jobs.Client they are
// given, in its project and as its actor: grants decide what they see, as
// they decide what the application sees, so they work on the pool of an
// application login (a docket_app member, see docs/security.md), and the
// actor must hold a grant that lets it read the project's jobs (see
// docs/security.md). A job the actor may not see is not there.
//
// # Running one job
//
// [WorkJob] runs the handler of one existing job with
// [worker.Client.RunJob]: it claims exactly that job under the lease
// protocol, runs its handler from the client's registry as a started worker
// would (decoding, the lease's context, the heartbeat, the classification of
// the handler's error, a panic, the result's writes in the completion
// transaction), records the outcome, and returns the job as it is after with
// the handler's error. [Work] enqueues a job first. Neither starts the
// worker: no batch, no sweep, no River job runs, so the application login
// needs no docket_worker membership (River's tables), which a test that
// starts a worker.Client does (docs/security.md).
//
// Time is the worker client's clock. Give it a [db.FakeClock]
// (db.NewFakeClock) and move it: a retry's wait ends when the test sets the
// clock to the job's AvailableAt, and WorkJob refuses a job that is not due
// yet by that clock. A fake clock needs a login that is a member of the group
// role docket_clock (or the schema's owner, as pgtest.NewDB's pool is):
// docket refuses any other login an instant further than its clock_skew
// setting from the database's clock, with db.ErrClockSkew (DK016). Make a
// test's application login a member (CREATE ROLE ... IN ROLE docket_app,
// docket_clock); never a production login (docs/security.md).
//
// # Databases
//
// The database comes from package integration/pgtest: pgtest.NewDB(t) for a
// migrated database per test, with the options of pgtest.New for the
// application's own migrations in the template.
package dockettest
