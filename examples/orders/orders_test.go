package orders_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/examples/orders"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The order service works in project shop as svc:orders; ana administers.
const project, ana, svc = "shop", testkit.Ana, access.Actor("svc:orders")

// quick retries, so the always-busy customer's orders die in milliseconds.
var quick = jobs.RetryPolicy{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond, MaxAttempts: 3}

// waitLimit bounds waiting for the invoices to settle.
const waitLimit = time.Minute

// setup returns a fresh database with project shop, svc:orders granted
// caps there, shop.orders created, and a service placing orders as
// svc:orders.
func setup(t *testing.T, caps ...access.Capability) (*pgxpool.Pool, *orders.Service) {
	t.Helper()
	ctx := t.Context()
	pool := testkit.Setup(t, ana, []string{project}, testkit.Grants(svc, project, caps...)...).Pool
	require.NoError(t, orders.Setup(ctx, pool))
	require.NoError(t, orders.Setup(ctx, pool), "Setup is idempotent")
	s, err := orders.NewService(pool, orders.Config{Project: project, Actor: svc, Retry: quick})
	require.NoError(t, err)
	return pool, s
}

// runInvoices starts a worker for s's invoices and returns a channel that
// receives each job id once its job is settled.
func runInvoices(t *testing.T, pool *pgxpool.Pool, s *orders.Service) <-chan int64 {
	t.Helper()
	settled := make(chan int64, 1000)
	reg := worker.NewRegistry()
	require.NoError(t, s.Register(reg))
	w, err := worker.NewClient(pool, worker.Config{
		Actor: svc, Registry: reg, Deployment: "test",
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, SweepEvery: 100 * time.Millisecond,
		OnEvent: func(e worker.Event) {
			if (e.Type == worker.EventSucceeded || e.Type == worker.EventFailed) && e.State != string(jobs.Queued) {
				settled <- e.JobID
			}
		},
	})
	require.NoError(t, err)
	testkit.Start(t, w)
	return settled
}

// waitSettled waits until n jobs have settled.
func waitSettled(t *testing.T, settled <-chan int64, n int) {
	t.Helper()
	deadline := time.After(waitLimit)
	for i := range n {
		select {
		case <-settled:
		case <-deadline:
			t.Fatalf("waited %v for %d settled invoices; have %d", waitLimit, n, i)
		}
	}
}

func TestSampleOrdersEndAsTheirCustomersSay(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, s := setup(t, access.JobCreate, access.JobClaim)
	settled := runInvoices(t, pool, s)

	placed := map[int64]int64{} // order → job
	for _, o := range orders.Sample(20) {
		p, err := s.PlaceOrder(ctx, o)
		require.NoError(t, err)
		placed[p.ID] = p.Job
	}
	waitSettled(t, settled, 20)

	type tally struct {
		state    jobs.State
		jobs     int
		attempts int
	}
	rows, err := pool.Query(ctx, `
		SELECT state, count(*), sum(attempts) FROM docket.jobs
		WHERE project = $1 AND kind = 'orders.invoice'
		GROUP BY state ORDER BY state`, project)
	require.NoError(t, err)
	var got []tally
	for rows.Next() {
		var r tally
		require.NoError(t, rows.Scan(&r.state, &r.jobs, &r.attempts))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []tally{
		{jobs.Dead, 2, 6},        // vandelay: busy on each of 3 attempts
		{jobs.Failed, 2, 2},      // umbrella: declined, never retried
		{jobs.Succeeded, 14, 16}, // 12 at once, initech's 2 on the second attempt
		{jobs.Uncertain, 2, 2},   // hooli: no answer, left for an operator
	}, got)

	// Each order points at its job, and only the succeeded ones are
	// invoiced: the order's update committed with the job's success.
	var mismatched int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM shop.orders o JOIN docket.jobs j ON j.id = o.invoice_job
		WHERE (o.status = 'invoiced') <> (j.state = 'succeeded')
		   OR (o.receipt IS NOT NULL) <> (j.state = 'succeeded')`).Scan(&mismatched))
	require.Zero(t, mismatched)
	for order, job := range placed {
		var linked int64
		require.NoError(t, pool.QueryRow(ctx, "SELECT invoice_job FROM shop.orders WHERE id = $1", order).Scan(&linked))
		require.Equal(t, job, linked)
	}
}

// An order whose invoice job is refused is not written either.
func TestOrderWithoutItsJobIsNotWritten(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, s := setup(t) // svc:orders may not create jobs

	_, err := s.PlaceOrder(ctx, orders.Order{Customer: "acme", Cents: 1200})
	require.ErrorIs(t, err, db.ErrNotPermitted)
	_, err = s.PlaceOrder(ctx, orders.Order{Customer: "acme"})
	require.ErrorIs(t, err, db.ErrInvalidArgument)

	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM shop.orders").Scan(&n))
	require.Zero(t, n)
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM docket.jobs").Scan(&n))
	require.Zero(t, n)
}

func TestSimulatedGatewayAnswersByCustomer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var g orders.SimulatedGateway
	charge := func(order int64, customer string) error {
		_, err := g.Charge(ctx, orders.Invoice{Order: order, Customer: customer, Cents: 100})
		return err
	}
	require.NoError(t, charge(1, "acme"))
	require.NoError(t, charge(2, "someone else"))
	require.ErrorIs(t, charge(3, "initech"), orders.ErrBusy)
	require.NoError(t, charge(3, "initech"))
	require.ErrorIs(t, charge(4, "initech"), orders.ErrBusy, "busy once per order")
	require.ErrorIs(t, charge(5, "umbrella"), orders.ErrDeclined)
	require.ErrorIs(t, charge(6, "hooli"), orders.ErrNoAnswer)
	for range 3 {
		require.ErrorIs(t, charge(7, "vandelay"), orders.ErrBusy)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	slow := &orders.SimulatedGateway{Latency: time.Hour}
	_, err := slow.Charge(cancelled, orders.Invoice{Order: 1, Customer: "acme", Cents: 100})
	require.ErrorIs(t, err, context.Canceled)

	counts := map[orders.Behaviour]int{}
	for _, o := range orders.Sample(40) {
		counts[orders.Customers[o.Customer]]++
	}
	require.Equal(t, map[orders.Behaviour]int{orders.Pays: 24, orders.BusyOnce: 4, orders.Declines: 4, orders.NoAnswer: 4, orders.AlwaysBusy: 4}, counts)
}
