package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// Invoice is a job payload.
type Invoice struct {
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
}

// SendInvoice is a kind with a typed payload, at payload schema version 1.
var SendInvoice = jobs.MustKind[Invoice]("billing.invoice", 1)

// examplePool stands in for your service's pool: a fresh migrated database
// with project acme, where svc:billing may create and claim jobs.
func examplePool(ctx context.Context, clock db.Clock) *pgxpool.Pool {
	return testkit.ExamplePool(ctx, clock, "user:ana", []string{"acme"},
		testkit.Grants("svc:billing", "acme", access.JobCreate, access.JobClaim)...)
}

func ExampleClient_EnqueueTx() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	pool := examplePool(ctx, clock)
	defer pool.Close()

	client, err := jobs.NewClient(pool, jobs.Config{Project: "acme", Actor: "svc:billing", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	spec, err := SendInvoice.Spec(Invoice{Customer: "globex", Cents: 12000})
	if err != nil {
		log.Fatal(err)
	}
	spec.IdempotencyKey = "invoice-2026-0042"

	// The job commits with the business write beside it, or not at all.
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		// ... INSERT the invoice row here ...
		enq, err := client.EnqueueTx(ctx, tx, spec)
		if err != nil {
			return err
		}
		fmt.Println("enqueued:", enq.Job.Kind, enq.Job.State, "duplicate:", enq.Duplicate)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// A retry with the same key and payload finds the same job.
	again, err := client.Enqueue(ctx, spec)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("again: duplicate:", again.Duplicate)

	// The same key with another payload is refused.
	other, _ := SendInvoice.Spec(Invoice{Customer: "globex", Cents: 1})
	other.IdempotencyKey = spec.IdempotencyKey
	_, err = client.Enqueue(ctx, other)
	fmt.Println("other payload refused:", errors.Is(err, db.ErrIdempotencyConflict))
	// Output:
	// enqueued: billing.invoice queued duplicate: false
	// again: duplicate: true
	// other payload refused: true
}

func ExampleClient_Claim() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	pool := examplePool(ctx, clock)
	defer pool.Close()

	client, err := jobs.NewClient(pool, jobs.Config{Project: "acme", Actor: "svc:billing", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	spec, _ := SendInvoice.Spec(Invoice{Customer: "globex", Cents: 12000})
	if _, err := client.Enqueue(ctx, spec); err != nil {
		log.Fatal(err)
	}

	// An external executor: claim, do the work, complete with the token.
	claimed, err := client.Claim(ctx, "default", jobs.ClaimOptions{Limit: 10, Decoders: []jobs.Decoder{SendInvoice.Decoder()}})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range claimed {
		inv, err := SendInvoice.Decode(j)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("attempt %d of %d: invoice %s for %d cents\n", inv.Attempts, inv.MaxAttempts, inv.Args.Customer, inv.Args.Cents)
		done, err := client.Complete(ctx, j.Lease(), []byte(`{"sent": true}`), nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("state:", done.State)

		// The token is spent: a second holder's word no longer counts.
		_, err = client.Fail(ctx, j.Lease(), jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: "late"})
		fmt.Println("late failure refused:", errors.Is(err, db.ErrTerminal))
	}
	// Output:
	// attempt 1 of 5: invoice globex for 12000 cents
	// state: succeeded
	// late failure refused: true
}

func ExampleRetryPolicy_Backoff() {
	p := jobs.RetryPolicy{Base: time.Second, Cap: time.Minute, Jitter: 0.5, MaxAttempts: 8}
	var delays []string
	for attempt := 1; attempt <= 8; attempt++ {
		// draw 0 is the longest delay the jitter allows; the database draws at random.
		delays = append(delays, p.Backoff(attempt, 0).String())
	}
	fmt.Println(strings.Join(delays, " "))
	fmt.Println(p.Backoff(3, 0.5)) // shortened by jitter × draw = 25%
	// Output:
	// 1s 2s 4s 8s 16s 32s 1m0s 1m0s
	// 3s
}

func ExampleClient_RerunPlan() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	pool := examplePool(ctx, clock)
	defer pool.Close()
	client, err := jobs.NewClient(pool, jobs.Config{Project: "acme", Actor: "svc:billing", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}

	// A render asked for at 4000 px.
	enq, err := client.Enqueue(ctx, jobs.Spec{Kind: "media.render", Payload: []byte(`{"poster": 42}`),
		Output: jobs.OutputRef{Asset: "poster/42", Kind: "image/png", Root: "renders"},
		Params: []byte(`{"width": 4000}`), Inputs: []string{"src:poster/42"}})
	if err != nil {
		log.Fatal(err)
	}
	j, _, err := client.ClaimID(ctx, enq.Job.ID, jobs.ClaimOptions{})
	if err != nil {
		log.Fatal(err)
	}
	// The worker clamps the size to 2048 px, and records that.
	_, err = client.CompleteWith(ctx, jobs.Completion{Lease: j.Lease(), Record: &jobs.CompletionRecord{
		Output: jobs.OutputRef{Asset: "poster/42", Kind: "image/png"},
		Params: []byte(`{"width": 2048}`), Inputs: []string{"src:poster/42"},
	}}, nil)
	if err != nil {
		log.Fatal(err)
	}

	plan, err := client.RerunPlan(ctx, j.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(plan.Kind, plan.Output.Asset, plan.Output.Kind, "under", plan.Output.Root)
	fmt.Println("params:", string(plan.Params), "inputs:", plan.Inputs)
	producers, err := client.ProducedBy(ctx, "poster/42", "image/png")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("produced by job", producers[0] == j.ID)
	// Output:
	// media.render poster/42 image/png under renders
	// params: {"width": 2048} inputs: [src:poster/42]
	// produced by job true
}

// A job pinned to a handler revision runs only under it: a claimant running
// another revision is not handed it, and the claim records the revision that
// took it, which every later call on the lease must come from.
func ExampleClient_Pin() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	pool := testkit.ExamplePool(ctx, clock, "user:ana", []string{"acme"},
		testkit.Grants("svc:billing", "acme", access.JobCreate, access.JobClaim, access.JobPin)...)
	defer pool.Close()

	client, err := jobs.NewClient(pool, jobs.Config{Project: "acme", Actor: "svc:billing", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	spec, err := SendInvoice.Spec(Invoice{Customer: "globex", Cents: 12000})
	if err != nil {
		log.Fatal(err)
	}
	enq, err := client.Enqueue(ctx, spec)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.Pin(ctx, []int64{enq.Job.ID}, []string{"v2.4.1"}); err != nil {
		log.Fatal(err)
	}
	runs := func(revision string) jobs.ClaimOptions {
		return jobs.ClaimOptions{Decoders: []jobs.Decoder{{Kind: "billing.invoice", Schema: 1, Revision: revision}}}
	}
	old, err := client.Claim(ctx, "default", runs("v2.4.0"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("v2.4.0 claimed:", len(old))
	cur, err := client.Claim(ctx, "default", runs("v2.4.1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("v2.4.1 claimed:", len(cur), "under", cur[0].ClaimedRevision)

	// The same token from another revision is a stale claim.
	lease := cur[0].Lease()
	other := lease
	other.Revision = "v2.4.0"
	_, err = client.Complete(ctx, other, nil, nil)
	fmt.Println("from v2.4.0:", errors.Is(err, db.ErrStaleClaim))
	done, err := client.Complete(ctx, lease, nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("from v2.4.1:", done.State)
	// Output:
	// v2.4.0 claimed: 0
	// v2.4.1 claimed: 1 under v2.4.1
	// from v2.4.0: true
	// from v2.4.1: succeeded
}

func ExampleClient_Census() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	pool := examplePool(ctx, clock)
	defer pool.Close()

	client, err := jobs.NewClient(pool, jobs.Config{Project: "acme", Actor: "svc:billing", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	for _, queue := range []string{"mail", "mail", "billing"} {
		spec, _ := SendInvoice.Spec(Invoice{Customer: "globex", Cents: 100})
		spec.Queue = queue
		if _, err := client.Enqueue(ctx, spec); err != nil {
			log.Fatal(err)
		}
	}
	// Counted by queue, then state, at most 10,000 jobs of each state.
	census, err := client.Census(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range census.Cells {
		fmt.Println(c.Queue, c.State, c.Jobs)
	}
	fmt.Println("states over the bound:", len(census.Capped))
	// Output:
	// billing queued 1
	// mail queued 2
	// states over the bound: 0
}
