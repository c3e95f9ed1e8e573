package dockettest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"testing"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/dockettest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// Reminder is the payload of the example's kind.
type Reminder struct {
	Customer string `json:"customer"`
}

var reminderKind = jobs.MustKind[Reminder]("shop.reminder", 1)

// A test of a service that enqueues a reminder in its own transaction, and
// of the reminder's handler, which fails once and then succeeds: the
// assertion finds the job before the commit, and the handler runs twice on
// a fake clock, with no worker loop.
func Example() {
	ctx := context.Background()
	var t testing.TB = exampleT{} // in a test: the test's *testing.T

	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	// In a test: pgtest.NewDB(t), with the project and grants made by an
	// operator's setup.
	pool := testkit.ExamplePool(ctx, clock, "user:ana", []string{"shop"},
		testkit.Grants("svc:shop", "shop", access.JobCreate, access.JobClaim)...)
	defer pool.Close()

	reg := worker.NewRegistry()
	err := worker.Handle(reg, reminderKind, func(ctx context.Context, j *jobs.Typed[Reminder]) error {
		if j.Attempts == 1 {
			return errors.New("mail server busy")
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	w, err := worker.NewClient(pool, worker.Config{Project: "shop", Actor: "svc:shop", Registry: reg, Clock: clock})
	if err != nil {
		log.Fatal(err)
	}

	// The code under test enqueues in its transaction.
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	spec, err := reminderKind.Spec(Reminder{Customer: "acme"})
	if err != nil {
		log.Fatal(err)
	}
	spec.Queue = "mail"
	if _, err := w.EnqueueTx(ctx, tx, spec); err != nil {
		log.Fatal(err)
	}

	job := dockettest.RequireEnqueuedTx(ctx, t, w.Jobs(), tx, reminderKind, &dockettest.EnqueuedOpts{Queue: "mail"})
	fmt.Println("enqueued a reminder for", job.Args.Customer)
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	run := dockettest.WorkJob(ctx, t, w, job.ID)
	fmt.Println("first attempt:", run.Outcome, run.Job.State, run.Err)

	clock.Set(run.Job.AvailableAt) // the retry's wait is over
	run = dockettest.WorkJob(ctx, t, w, job.ID)
	fmt.Println("second attempt:", run.Outcome, run.Job.State, run.Err)
	// Output:
	// enqueued a reminder for acme
	// first attempt: failed queued mail server busy
	// second attempt: succeeded succeeded <nil>
}

// exampleT stands in for a test's *testing.T in an example, which has none:
// a failure ends the example.
type exampleT struct{ testing.TB }

func (exampleT) Helper()                           {}
func (exampleT) Fatal(args ...any)                 { log.Fatal(args...) }
func (exampleT) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }
