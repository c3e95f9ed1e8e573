package access_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
)

func Example() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	pool := testkit.ExamplePool(ctx, clock, "user:ana", []string{"acme"}) // your service's pool, with project acme
	defer pool.Close()

	// An operator, user:ana, gives the grants.
	ac, err := access.NewClient(pool, access.Config{Actor: "user:ana", Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	billing := access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobCreate}
	if _, err := ac.Allow(ctx, billing); err != nil {
		log.Fatal(err)
	}

	held, _ := ac.Allowed(ctx, billing)
	fmt.Println("job.create on acme:", held)
	held, _ = ac.Allowed(ctx, access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobCancel})
	fmt.Println("job.cancel on acme:", held)

	_, err = ac.Allow(ctx, access.Grant{Principal: "svc:billing", Project: "acme", Capability: "job.*"})
	fmt.Println(err)
	// Output:
	// job.create on acme: true
	// job.cancel on acme: false
	// grant.allow principal=svc:billing project=acme capability=job.*: invalid argument: invalid capability 'job.*': want dot-separated lowercase segments, e.g. job.create [DK010]
}
