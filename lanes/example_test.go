package lanes_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/lanes"
)

// examplePool stands in for your service's pool: a fresh migrated database
// with project acme, where user:ops may create quorums.
func examplePool(ctx context.Context, clock db.Clock) *pgxpool.Pool {
	return testkit.ExamplePool(ctx, clock, "user:ops", []string{"acme"},
		access.Grant{Principal: "user:ops", Project: "acme", Capability: access.QuorumCreate})
}

func Example() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	pool := examplePool(ctx, clock)
	defer pool.Close()
	client := func(actor access.Actor) *lanes.Client {
		c, err := lanes.NewClient(pool, lanes.Config{Actor: actor, Clock: clock})
		if err != nil {
			log.Fatal(err)
		}
		return c
	}
	ops, conductor, assignee := client("user:ops"), client("user:cora"), client("user:ann")

	// A quorum with its conductor, and a lane in it.
	web, err := ops.CreateQuorum(ctx, lanes.QuorumSpec{Project: "acme", Name: "web", Conductor: "user:cora"})
	if err != nil {
		log.Fatal(err)
	}
	lane, err := conductor.Create(ctx, lanes.Spec{
		Quorum: web.ID, Name: "login", Branch: "feature/login", Assignee: "user:ann", Task: "WEB-42",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(lane.Name, lane.State, lane.Review)

	// The conductor moves the work, the assignee submits it, the conductor
	// gives the verdict; the assignee may not.
	if _, err := conductor.SetState(ctx, lane.ID, lanes.InProgress, ""); err != nil {
		log.Fatal(err)
	}
	if _, err := assignee.Submit(ctx, lane.ID, "ready"); err != nil {
		log.Fatal(err)
	}
	_, err = assignee.Approve(ctx, lane.ID, "")
	fmt.Println("assignee approves:", errors.Is(err, db.ErrNotPermitted))
	if _, err := conductor.Approve(ctx, lane.ID, "looks good"); err != nil {
		log.Fatal(err)
	}
	if _, err := conductor.SetState(ctx, lane.ID, lanes.Done, ""); err != nil {
		log.Fatal(err)
	}

	// Recording the merge executes nothing; it needs done and approved.
	lane, err = conductor.Merge(ctx, lane.ID, "4b825dc642cb6eb9a060e54bf8d69288fbee4904")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(lane.State, lane.Review, "merged:", lane.Merged())

	history, err := assignee.History(ctx, lane.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range history {
		fmt.Println(e.Type, e.From, "->", e.To, "by", e.Actor)
	}
	// Output:
	// login open none
	// assignee approves: true
	// done approved merged: true
	// created  -> open by user:cora
	// execution open -> in_progress by user:cora
	// review none -> submitted by user:ann
	// review submitted -> approved by user:cora
	// execution in_progress -> done by user:cora
	// merge unmerged -> merged by user:cora
}

func ExampleClient_CreateTx() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	pool := examplePool(ctx, clock)
	defer pool.Close()
	ops, _ := lanes.NewClient(pool, lanes.Config{Actor: "user:ops", Clock: clock})
	conductor, _ := lanes.NewClient(pool, lanes.Config{Actor: "user:cora", Clock: clock})
	web, err := ops.CreateQuorum(ctx, lanes.QuorumSpec{Project: "acme", Name: "web", Conductor: "user:cora"})
	if err != nil {
		log.Fatal(err)
	}

	// Two lanes and the business write beside them commit together, or not
	// at all. The second depends on the first.
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		// ... INSERT the plan's own rows here ...
		schema, err := conductor.CreateTx(ctx, tx, lanes.Spec{
			Quorum: web.ID, Name: "schema", Branch: "feature/schema", Assignee: "user:ann", Task: "WEB-41",
		})
		if err != nil {
			return err
		}
		login, err := conductor.CreateTx(ctx, tx, lanes.Spec{
			Quorum: web.ID, Name: "login", Branch: "feature/login", Assignee: "user:bo", Task: "WEB-42",
			DependsOn: []int64{schema.ID},
		})
		if err != nil {
			return err
		}
		fmt.Println(login.Name, "depends on", len(login.DependsOn), "lane")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// A dependency outside the quorum is refused when the lane is created.
	_, err = conductor.Create(ctx, lanes.Spec{
		Quorum: web.ID, Name: "logout", Branch: "feature/logout", Assignee: "user:bo", Task: "WEB-43",
		DependsOn: []int64{999},
	})
	fmt.Println("unknown dependency refused:", errors.Is(err, db.ErrInvalidDependency))
	// Output:
	// login depends on 1 lane
	// unknown dependency refused: true
}
