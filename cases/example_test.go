package cases_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
)

// examplePool stands in for your service's pool: a fresh migrated database
// with project acme, where svc:switch may admit cases and each of grants is
// given.
func examplePool(ctx context.Context, clock db.Clock, grants ...access.Grant) *pgxpool.Pool {
	return testkit.ExamplePool(ctx, clock, "user:ops", []string{"acme"},
		append([]access.Grant{{Principal: "svc:switch", Project: "acme", Capability: access.CaseAdmit}}, grants...)...)
}

func Example() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	pool := examplePool(ctx, clock)
	defer pool.Close()
	client, err := cases.NewClient(pool, cases.Config{Actor: "svc:switch", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}

	// Day 0: a request arrives knowing a document number; it opens the case.
	doc := cases.Key{Namespace: "document", Value: "DOC-4711"}
	c, err := client.Admit(ctx, cases.Admission{Project: "acme", Kind: "supplier.switch", Keys: []cases.Key{doc}})
	if err != nil {
		log.Fatal(err)
	}
	ack, err := client.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "acknowledge", Due: clock.Now().Add(72 * time.Hour)})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.PutState(ctx, c.ID, c.Version, json.RawMessage(`{"step": "requested"}`)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("admitted:", c.Status, "created:", c.Created)

	// Day 1: the acknowledgement arrives with the same document number and a
	// meter; it finds the case, and the meter joins it.
	clock.Advance(24 * time.Hour)
	meter := cases.Key{Namespace: "meter", Value: "51238696781"}
	same, err := client.Admit(ctx, cases.Admission{Project: "acme", Kind: "supplier.switch", Keys: []cases.Key{doc, meter}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same case:", same.ID == c.ID, "created:", same.Created)
	if _, err := client.Meet(ctx, ack.ID); err != nil {
		log.Fatal(err)
	}

	// A writer holding an old version is refused; read again, write again.
	_, err = client.PutState(ctx, c.ID, c.Version, json.RawMessage(`{"step": "stale"}`))
	fmt.Println("stale write:", errors.Is(err, db.ErrVersionConflict))
	snap, err := client.State(ctx, c.ID)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.PutState(ctx, c.ID, snap.Version, json.RawMessage(`{"step": "acknowledged"}`)); err != nil {
		log.Fatal(err)
	}

	// Nothing is owed, so the case closes, releasing its keys.
	closed, err := client.Close(ctx, c.ID)
	if err != nil {
		log.Fatal(err)
	}
	_, err = client.Correlate(ctx, "acme", meter)
	fmt.Println("closed:", closed.Status, "meter correlates:", !errors.Is(err, db.ErrNotFound))
	// Output:
	// admitted: open created: true
	// same case: true created: false
	// stale write: true
	// closed: closed meter correlates: false
}

// A supplier's reply that beats the case's wait to the store is held, not
// dropped: the wait finds it in the buffer and its continuation is enqueued
// at once. Whichever comes first, they meet.
func ExampleClient_Await() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	pool := examplePool(ctx, clock,
		access.Grant{Principal: "svc:switch", Project: "acme", Capability: access.JobCreate},
		access.Grant{Principal: "svc:inbox", Project: "acme", Capability: access.MessageDeliver},
		access.Grant{Principal: "svc:inbox", Project: "acme", Capability: access.JobCreate},
	)
	defer pool.Close()
	app, err := cases.NewClient(pool, cases.Config{Actor: "svc:switch", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	inbox, err := cases.NewClient(pool, cases.Config{Actor: "svc:inbox", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	doc := cases.Key{Namespace: "document", Value: "DOC-4711"}
	c, err := app.Admit(ctx, cases.Admission{Project: "acme", Kind: "supplier.switch", Keys: []cases.Key{doc}})
	if err != nil {
		log.Fatal(err)
	}

	// The reply arrives first; the producer retries it, as producers do.
	reply := cases.Delivery{
		Project: "acme", Producer: "supplier:4711", MessageID: "msg-88",
		Keys: []cases.Key{doc}, Payload: json.RawMessage(`{"accepted": true}`),
	}
	first, err := inbox.Deliver(ctx, reply)
	if err != nil {
		log.Fatal(err)
	}
	retry, err := inbox.Deliver(ctx, reply)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("delivered:", first.Status, "retry is the same message:", retry.Duplicate && retry.ID == first.ID)

	// Then the case waits for it, with a deadline.
	clock.Advance(time.Minute)
	w, err := app.Await(ctx, c.ID, cases.WaitSpec{
		Name:      "supplier-reply",
		Keys:      []cases.Key{doc},
		Deadline:  clock.Now().Add(5 * 24 * time.Hour),
		OnArrival: cases.Continuation{Kind: "supplier.reply"},
		OnTimeout: &cases.Continuation{Kind: "supplier.chase"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("wait:", w.Status, "by the reply:", w.SatisfiedBy == first.ID, "continuation enqueued:", w.ContinuationJobID != 0)
	// Output:
	// delivered: buffered retry is the same message: true
	// wait: satisfied by the reply: true continuation enqueued: true
}
