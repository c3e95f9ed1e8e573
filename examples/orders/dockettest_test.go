package orders_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/dockettest"
	"github.com/docket-dev/docket/examples/orders"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// appEnv is a database where the service runs as an application login
// (a docket_app member), as it would in production, on a fake clock.
type appEnv struct {
	testkit.Env
	svc    *orders.Service
	reader *jobs.Client // reads svc:orders' jobs, as svc:orders
}

// appSetup returns project shop with svc:orders allowed to create and claim
// jobs, shop.orders created by the owner and open to docket_app, and the
// service on the application login's pool.
func appSetup(t *testing.T) appEnv {
	t.Helper()
	ctx := t.Context()
	e := testkit.Setup(t, ana, []string{project}, testkit.Grants(svc, project, access.JobCreate, access.JobClaim)...)
	require.NoError(t, orders.Setup(ctx, e.Pool))
	_, err := e.Pool.Exec(ctx, `GRANT USAGE ON SCHEMA shop TO docket_app;
		GRANT SELECT, INSERT, UPDATE ON shop.orders TO docket_app`)
	require.NoError(t, err)
	s, err := orders.NewService(e.API, orders.Config{Project: project, Actor: svc, Retry: quick, Clock: e.Clock})
	require.NoError(t, err)
	reader, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: svc, Clock: e.Clock})
	require.NoError(t, err)
	return appEnv{Env: e, svc: s, reader: reader}
}

// The invoice job is in the order's transaction, with the order's id and
// key, and goes with it when the transaction rolls back.
func TestPlaceOrderTxEnqueuesTheInvoiceWithTheOrder(t *testing.T) {
	t.Parallel()
	e := appSetup(t)
	ctx := t.Context()

	tx, err := e.API.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	p, err := e.svc.PlaceOrderTx(ctx, tx, orders.Order{Customer: "acme", Cents: 4200})
	require.NoError(t, err)

	job := dockettest.RequireEnqueuedTx(ctx, t, e.reader, tx, orders.InvoiceKind, &dockettest.EnqueuedOpts{
		Queue: jobs.DefaultQueue, State: jobs.Queued, IdempotencyKey: fmt.Sprintf("order-%d", p.ID), MaxAttempts: quick.MaxAttempts,
	})
	require.Equal(t, p.Job, job.ID)
	require.Equal(t, orders.Invoice{Order: p.ID, Customer: "acme", Cents: 4200}, job.Args)
	dockettest.RequireNotEnqueued(ctx, t, e.reader, orders.InvoiceKind, nil) // not committed yet

	require.NoError(t, tx.Rollback(ctx))
	dockettest.RequireNotEnqueued(ctx, t, e.reader, orders.InvoiceKind, nil)

	// Placed in their own transactions, the invoices are there in order.
	var placed []orders.Placed
	for _, c := range []string{"acme", "globex"} {
		p, err := e.svc.PlaceOrder(ctx, orders.Order{Customer: c, Cents: 100})
		require.NoError(t, err)
		placed = append(placed, p)
	}
	got := dockettest.RequireManyEnqueued(ctx, t, e.reader, []dockettest.Expected{
		dockettest.Expect(orders.InvoiceKind, &dockettest.EnqueuedOpts{IdempotencyKey: fmt.Sprintf("order-%d", placed[0].ID)}),
		dockettest.Expect(orders.InvoiceKind, &dockettest.EnqueuedOpts{IdempotencyKey: fmt.Sprintf("order-%d", placed[1].ID)}),
	})
	require.Equal(t, []int64{placed[0].Job, placed[1].Job}, []int64{got[0].ID, got[1].ID})
}

// The invoice handler, run one job at a time on the fake clock with no
// worker loop: each gateway answer ends the job where docs say, and a
// charge marks the order invoiced in the transaction of the job's success.
func TestInvoiceHandlerOutcomesOneJobAtATime(t *testing.T) {
	t.Parallel()
	e := appSetup(t)
	ctx := t.Context()
	reg := worker.NewRegistry()
	require.NoError(t, e.svc.Register(reg))
	w, err := worker.NewClient(e.API, worker.Config{Actor: svc, Registry: reg, Clock: e.Clock, Logger: testkit.Logger})
	require.NoError(t, err)

	place := func(customer string) orders.Placed {
		p, err := e.svc.PlaceOrder(ctx, orders.Order{Customer: customer, Cents: 4200})
		require.NoError(t, err)
		return p
	}

	acme := place("acme")
	run := dockettest.WorkJob(ctx, t, w, acme.Job)
	require.NoError(t, run.Err)
	require.Equal(t, jobs.Succeeded, run.Job.State)
	require.JSONEq(t, fmt.Sprintf(`{"receipt": "R-%06d"}`, acme.ID), string(run.Job.Result))
	require.Equal(t, "invoiced", orderStatus(t, e.API, acme.ID), "the order's update committed with the success")

	initech := place("initech")
	run = dockettest.WorkJob(ctx, t, w, initech.Job)
	require.ErrorIs(t, run.Err, orders.ErrBusy)
	require.Equal(t, jobs.Queued, run.Job.State)
	require.Equal(t, "placed", orderStatus(t, e.API, initech.ID))
	e.Clock.Set(run.Job.AvailableAt) // the backoff is over by the fake clock
	run = dockettest.WorkJob(ctx, t, w, initech.Job)
	require.NoError(t, run.Err)
	require.Equal(t, jobs.Succeeded, run.Job.State)
	require.Equal(t, 2, run.Job.Attempts)

	umbrella := place("umbrella")
	run = dockettest.WorkJob(ctx, t, w, umbrella.Job)
	require.ErrorIs(t, run.Err, orders.ErrDeclined)
	require.Equal(t, jobs.Failed, run.Job.State, "a decline is permanent: no retry")
	require.Contains(t, run.Job.Diagnostic, "[orders-v1] card declined")

	hooli := place("hooli")
	run = dockettest.WorkJob(ctx, t, w, hooli.Job)
	require.ErrorIs(t, run.Err, orders.ErrNoAnswer)
	require.Equal(t, jobs.Uncertain, run.Job.State, "left for an operator to reconcile")
	require.Equal(t, "placed", orderStatus(t, e.API, hooli.ID))
}

func orderStatus(t *testing.T, pool *pgxpool.Pool, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT status FROM shop.orders WHERE id = $1", id).Scan(&s))
	return s
}
