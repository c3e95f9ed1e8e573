package worker_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// Receipt is the payload of the example's kind.
type Receipt struct {
	Order int `json:"order"`
}

var sendReceipt = jobs.MustKind[Receipt]("shop.receipt", 1)

// An order and its receipt job commit together; the same client then runs
// the job.
func Example() {
	ctx := context.Background()
	pool := exampleDB(ctx)
	defer pool.Close()

	reg := worker.NewRegistry()
	done := make(chan int, 1)
	if err := worker.Handle(reg, sendReceipt, func(ctx context.Context, job *jobs.Typed[Receipt]) error {
		done <- job.Args.Order // send the receipt here
		return nil
	}, worker.HandlerOptions{Lease: time.Minute}); err != nil {
		log.Fatal(err)
	}

	client, err := worker.NewClient(pool, worker.Config{Project: "shop", Actor: "svc:shop", Registry: reg, Logger: testLogger})
	if err != nil {
		log.Fatal(err)
	}
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES (42)"); err != nil {
			return err
		}
		spec, err := sendReceipt.Spec(Receipt{Order: 42})
		if err != nil {
			return err
		}
		_, err = client.EnqueueTx(ctx, tx, spec) // the job commits with the order, and its commit notifies the workers
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("receipt sent for order", <-done)
	if err := client.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: receipt sent for order 42
}

// exampleDB returns a pool on a fresh migrated database with project shop,
// where svc:shop may enqueue and run jobs, and a table of orders.
func exampleDB(ctx context.Context) *pgxpool.Pool {
	pool := testkit.ExamplePool(ctx, db.SystemClock{}, "user:ana", []string{"shop"},
		testkit.Grants("svc:shop", "shop", access.JobCreate, access.JobClaim)...)
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id int PRIMARY KEY)"); err != nil {
		log.Fatal(err)
	}
	return pool
}
