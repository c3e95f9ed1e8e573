package docketotel_test

import (
	"os"
	"testing"

	"github.com/docket-dev/docket/integration/pgtest"
)

// The test binary started with childEnv set is an enqueuing process (see
// runChild), not a test run.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	pgtest.Main(m)
}
