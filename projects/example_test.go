package projects_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/projects"
)

func Example() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	pool := testkit.ExamplePool(ctx, clock, "user:ana", nil) // your service's pool
	defer pool.Close()
	pc, err := projects.NewClient(pool, projects.Config{Actor: "user:ana", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}

	if _, err := pc.Create(ctx, "acme"); err != nil {
		log.Fatal(err)
	}
	// active → retired is not a legal move: archive first.
	clock.Advance(time.Hour)
	_, err = pc.SetStatus(ctx, "acme", projects.Retired)
	fmt.Println(errors.Is(err, db.ErrIllegalTransition))

	for _, to := range []projects.Status{projects.Archived, projects.Retired} {
		clock.Advance(time.Hour)
		if _, err := pc.SetStatus(ctx, "acme", to); err != nil {
			log.Fatal(err)
		}
	}
	history, err := pc.History(ctx, "acme")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range history {
		fmt.Printf("%s %-8s -> %-8s by %s\n", e.At.Format(time.Kitchen), e.From, e.To, e.Actor)
	}
	// Output:
	// true
	// 9:00AM          -> active   by user:ana
	// 11:00AM active   -> archived by user:ana
	// 12:00PM archived -> retired  by user:ana
}
