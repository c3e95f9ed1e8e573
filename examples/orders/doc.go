// Package orders is a small order service built on docket, the one
// "docket demo" runs: read it to see how a service uses docket end to end.
//
// [Service.PlaceOrder] writes an order row and enqueues the order's invoice
// job in one transaction, so there is never an order without its invoice job,
// nor an invoice job for an order that was rolled back. The invoice handler
// ([Service.Register]) charges the customer through a [Gateway] and turns
// its answer into a docket outcome:
//
//   - charged: the job succeeds, and the order is marked invoiced in the same
//     transaction that records the success;
//   - [ErrBusy]: a plain error, so docket retries the job after a backoff, and
//     makes it dead once its attempts run out;
//   - [ErrDeclined]: [worker.Fail] with [jobs.ClassPermanent], so the job fails at once: retrying
//     cannot change the answer;
//   - [ErrNoAnswer]: [worker.Fail] with [jobs.ClassUncertain], so the job waits in
//     docket.jobs_uncertain for an operator to find out whether the charge
//     happened, since charging twice is worse than asking.
//
// [SimulatedGateway] answers by customer, so what becomes of an order is
// known in advance: see [Customers] and [Sample].
//
// The service keeps its orders in its own table, shop.orders, created by
// [Setup]; docket keeps the jobs in docket.jobs. They meet in
// shop.orders.invoice_job.
package orders
