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
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/projects"
)

// examplePool stands in for your service's pool: a fresh migrated database
// with project acme, where svc:switch may admit cases.
func examplePool(ctx context.Context, clock db.Clock) *pgxpool.Pool {
	url, err := pgtest.Scratch(ctx, true)
	if err != nil {
		log.Fatal(err)
	}
	pool, err := db.Open(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := projects.Create(ctx, pool, "acme", "user:ops", clock.Now()); err != nil {
		log.Fatal(err)
	}
	g := access.Grant{Principal: "svc:switch", Project: "acme", Capability: access.CaseAdmit}
	if _, err := access.Allow(ctx, pool, g, "user:ops", clock.Now()); err != nil {
		log.Fatal(err)
	}
	return pool
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
