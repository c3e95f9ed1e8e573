package testkit

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
)

// ExamplePool stands in, in a runnable example, for a service's pool: a
// fresh migrated scratch database with projects created by admin and each
// grant given by admin, at clock's now. An example has no testing.T, so it
// exits on any failure.
func ExamplePool(ctx context.Context, clock db.Clock, admin access.Actor, projectNames []string, grants ...access.Grant) *pgxpool.Pool {
	url, err := pgtest.Scratch(ctx, true)
	if err != nil {
		log.Fatal(err)
	}
	pool, err := db.Open(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	if err := populate(ctx, pool, clock, admin, projectNames, grants); err != nil {
		log.Fatal(err)
	}
	return pool
}
