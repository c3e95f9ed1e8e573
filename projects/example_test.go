package projects_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/projects"
)

func Example() {
	ctx := context.Background()
	url, err := pgtest.Scratch(ctx, true) // your service's database URL
	if err != nil {
		log.Fatal(err)
	}
	pool, err := db.Open(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))

	if _, err := projects.Create(ctx, pool, "acme", "user:ana", clock.Now()); err != nil {
		log.Fatal(err)
	}
	// active → retired is not a legal move: archive first.
	_, err = projects.SetStatus(ctx, pool, "acme", projects.Retired, "user:ana", clock.Advance(time.Hour))
	fmt.Println(errors.Is(err, db.ErrIllegalTransition))

	for _, to := range []projects.Status{projects.Archived, projects.Retired} {
		if _, err := projects.SetStatus(ctx, pool, "acme", to, "user:ana", clock.Advance(time.Hour)); err != nil {
			log.Fatal(err)
		}
	}
	history, err := projects.History(ctx, pool, "acme")
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
