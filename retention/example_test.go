package retention_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/retention"
)

// A project keeps succeeded jobs a day. An auditor exports a job's chain
// head before the prune; the prune removes the job two days later, and the
// exported head verifies against the prune's record. Reading the job by id
// names the prune.
func Example() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	pool := testkit.ExamplePool(ctx, clock, "user:ops", []string{"acme"},
		access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobCreate},
		access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobClaim},
		access.Grant{Principal: "user:ops", Project: "acme", Capability: access.RetentionManage},
		access.Grant{Principal: "user:ops", Project: "acme", Capability: access.JobCancel},
		access.Grant{Principal: "worker:janitor", Project: "acme", Capability: access.RetentionPrune},
	)
	defer pool.Close()
	ops, err := retention.NewClient(pool, retention.Config{Actor: "user:ops", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	policy := retention.Defaults
	policy.SucceededJobs = 24 * time.Hour
	if _, err := ops.Set(ctx, "acme", policy); err != nil {
		log.Fatal(err)
	}

	billing, err := jobs.NewClient(pool, jobs.Config{Project: "acme", Actor: "svc:billing", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	enq, err := billing.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: json.RawMessage(`{"order": 42}`)})
	if err != nil {
		log.Fatal(err)
	}
	claimed, _, err := billing.ClaimID(ctx, enq.Job.ID, jobs.ClaimOptions{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := billing.Complete(ctx, claimed.Lease(), nil, nil); err != nil {
		log.Fatal(err)
	}
	heads, err := ops.Heads(ctx, []int64{enq.Job.ID}) // exported to storage the owner cannot write
	if err != nil {
		log.Fatal(err)
	}

	clock.Advance(48 * time.Hour)
	janitor, err := retention.NewClient(pool, retention.Config{Actor: "worker:janitor", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	prunes, err := janitor.Prune(ctx, 1000) // what retention.Sweep runs in a worker
	if err != nil {
		log.Fatal(err)
	}
	p := prunes[0]
	fmt.Println("pruned:", p.Jobs, "jobs", p.JobStates, p.JobEvents, "events")

	v, err := ops.Verify(ctx, p.ID, heads)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exported heads verify:", v.OK)

	_, err = billing.Get(ctx, enq.Job.ID)
	var pruned *jobs.PrunedError
	fmt.Println("not found:", errors.Is(err, db.ErrNotFound), "pruned by its prune:", errors.As(err, &pruned) && pruned.Prune == p.ID)
	// Output:
	// pruned: 1 jobs map[succeeded:1] 2 events
	// exported heads verify: true
	// not found: true pruned by its prune: true
}
