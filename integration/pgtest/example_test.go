package pgtest_test

import (
	"context"
	"fmt"
	"log"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/db"

	"github.com/docket-dev/docket/integration/pgtest"
)

// testJobs is what a test in a package using docket looks like. Its package
// would also have
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func testJobs(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t) // a fresh database with the docket schema

	var exists bool
	err := pool.QueryRow(t.Context(),
		"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'docket')").Scan(&exists)
	if err != nil || !exists {
		t.Fatalf("docket schema missing: %v", err)
	}
	// The pool is closed and the database dropped when t ends.
}

func Example() {
	// Name the function TestJobs in a _test.go file and go test runs it.
	_ = testJobs
}

// A suite of the application's own: its databases are named
// pgtest_example_…, and its template has the application's table besides
// docket's schema.
func ExampleNew() {
	ctx := context.Background()
	suite, err := pgtest.New(pgtest.Options{
		Prefix: "pgtest_example_",
		Migrate: func(ctx context.Context, pool *pgxpool.Pool) error {
			_, err := pool.Exec(ctx, "CREATE TABLE public.orders (id bigint PRIMARY KEY)")
			return err
		},
		MigrateVersion: "orders-1", // change it when Migrate changes
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(suite.TemplateName()[:len("pgtest_example_tmpl_")])

	// In a test: pool := suite.NewDB(t). An example has no t.
	u, err := suite.Scratch(ctx, true)
	if err != nil {
		log.Fatal(err)
	}
	pool, err := db.Open(ctx, u)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	var orders, docket bool
	err = pool.QueryRow(ctx, `SELECT to_regclass('public.orders') IS NOT NULL, to_regclass('docket.jobs') IS NOT NULL`).Scan(&orders, &docket)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", orders, "docket.jobs:", docket)
	// Output:
	// pgtest_example_tmpl_
	// orders: true docket.jobs: true
}
