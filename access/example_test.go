package access_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/docket-dev/docket/access"
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
	billing := access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobCreate}
	if _, err := access.Allow(ctx, pool, billing, "user:ana", clock.Now()); err != nil {
		log.Fatal(err)
	}

	held, _ := access.Allowed(ctx, pool, billing)
	fmt.Println("job.create on acme:", held)
	held, _ = access.Allowed(ctx, pool, access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobCancel})
	fmt.Println("job.cancel on acme:", held)

	_, err = access.Allow(ctx, pool, access.Grant{Principal: "svc:billing", Project: "acme", Capability: "job.*"}, "user:ana", clock.Now())
	fmt.Println(err)
	// Output:
	// job.create on acme: true
	// job.cancel on acme: false
	// grant.allow principal=svc:billing project=acme capability=job.*: invalid argument: invalid capability 'job.*': want dot-separated lowercase segments, e.g. job.create [DK010]
}
