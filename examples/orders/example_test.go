package orders_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/examples/orders"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// One order per behaviour of the simulated gateway, each placed with its
// invoice job in one transaction, and what became of each job.
func Example() {
	ctx := context.Background()

	// Once, by an operator: the project, and what the service may do there.
	pool := testkit.ExamplePool(ctx, db.SystemClock{}, "user:ana", []string{"shop"},
		testkit.Grants("svc:orders", "shop", access.JobCreate, access.JobClaim)...) // stands in for your service's pool
	defer pool.Close()

	if err := orders.Setup(ctx, pool); err != nil {
		log.Fatal(err)
	}

	svc, err := orders.NewService(pool, orders.Config{
		Project: "shop", Actor: "svc:orders",
		Retry: jobs.RetryPolicy{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond, MaxAttempts: 3},
	})
	if err != nil {
		log.Fatal(err)
	}
	reg := worker.NewRegistry()
	if err := svc.Register(reg); err != nil {
		log.Fatal(err)
	}
	settled := make(chan int64, 10)
	w, err := worker.NewClient(pool, worker.Config{
		Actor: "svc:orders", Registry: reg,
		OnEvent: func(e worker.Event) {
			if (e.Type == worker.EventSucceeded || e.Type == worker.EventFailed) && e.State != string(jobs.Queued) {
				settled <- e.JobID
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}

	customers := []string{"acme", "initech", "umbrella", "hooli", "vandelay"}
	placed := make([]orders.Placed, len(customers))
	for i, c := range customers {
		if placed[i], err = svc.PlaceOrder(ctx, orders.Order{Customer: c, Cents: 4200}); err != nil {
			log.Fatal(err)
		}
	}
	for range customers {
		select {
		case <-settled:
		case <-time.After(time.Minute):
			log.Fatal("the invoices did not settle within a minute")
		}
	}
	if err := w.Stop(ctx); err != nil {
		log.Fatal(err)
	}

	for i, p := range placed {
		var state string
		var attempts int
		err := pool.QueryRow(ctx, "SELECT state, attempts FROM docket.jobs WHERE id = $1", p.Job).Scan(&state, &attempts)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-8s %-11s %-9s after %d attempt(s)\n", customers[i], orders.Customers[customers[i]], state, attempts)
	}
	// Output:
	// acme     pays        succeeded after 1 attempt(s)
	// initech  busy once   succeeded after 2 attempt(s)
	// umbrella declines    failed    after 1 attempt(s)
	// hooli    no answer   uncertain after 1 attempt(s)
	// vandelay always busy dead      after 3 attempt(s)
}
