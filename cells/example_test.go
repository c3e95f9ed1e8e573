package cells_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cells"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// Two cells, each a database of its own: acme lives in eu-1, globex in
// eu-2. Jobs are enqueued in their project's cell, and a read across the
// cells names each row's cell and how far behind it may be.
func Example() {
	ctx := context.Background()
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	eu1 := testkit.ExamplePool(ctx, clock, "user:ops", []string{"acme"},
		testkit.Grants("svc:billing", "acme", access.JobCreate)...)
	defer eu1.Close()
	eu2 := testkit.ExamplePool(ctx, clock, "user:ops", []string{"globex"},
		testkit.Grants("svc:billing", "globex", access.JobCreate)...)
	defer eu2.Close()

	m, err := cells.New(ctx, cells.Config{
		Cells:    map[string]cells.Cell{"eu-1": {Pool: eu1}, "eu-2": {Pool: eu2}},
		Projects: map[string]string{"acme": "eu-1", "globex": "eu-2"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, project := range []string{"acme", "globex"} {
		jc, err := m.Jobs(jobs.Config{Project: project, Actor: "svc:billing", Clock: clock})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := jc.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: []byte(`{}`)}); err != nil {
			log.Fatal(err)
		}
	}

	rows, err := m.List(ctx, jobs.Config{Actor: "svc:billing", Clock: clock}, jobs.Filter{})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rows {
		fmt.Println(r.Cell, r.Project, r.Kind, r.State, "read on the", r.Lag)
	}
	// Output:
	// eu-1 acme billing.invoice queued read on the primary
	// eu-2 globex billing.invoice queued read on the primary
}
