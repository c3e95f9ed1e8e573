package pgtest_test

import (
	"testing"

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
