//go:build unix

package faults

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/docket-dev/docket/internal/testkit"
)

// The test binary started with childEnv set is a worker process (see
// runChild), not a test run.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	os.Exit(m.Run())
}

// longFlag and longEnv select the long form: 20,000 jobs a scenario, 20 s
// outages, and the chaos scenario. The variable serves `go test ./...`,
// where the other packages would refuse the flag.
var longFlag = flag.Bool("docket.faults.long", false, "run the long fault suite: 20,000 jobs, 20 s outages, chaos cycles")

const longEnv = "DOCKET_FAULTS_LONG"

// The cast: ana creates the project and gives the grants; app enqueues and
// runs the jobs.
const project, ana, app = testkit.Acme, testkit.Ana, testkit.App

// The workload's shape, in both forms.
const (
	// lease is every job's lease: short, so that faults outlast it.
	lease = 3 * time.Second
	// sweepEvery is the worker's default lease sweep period.
	sweepEvery = time.Second
	// slack is what the recovery bound allows beyond the lease and the sweep
	// period: a 2-core machine running the race detector is slow.
	slack = 5 * time.Second
	// handlers is how many handlers a worker runs at once.
	handlers = 100
	// cutEvery is how many jobs there are for each one whose completion
	// writes are cut.
	cutEvery = 50
	// stopBound is how long a worker asked to stop during an outage may take
	// to exit.
	stopBound = 15 * time.Second
)

// form is how big the suite runs.
type form struct {
	long   bool
	jobs   int           // jobs in a scenario's workload
	outage time.Duration // how long Postgres stays down in an outage
}

// theForm is the bounded form, or the long one when asked for.
func theForm() form {
	if *longFlag || os.Getenv(longEnv) != "" {
		return form{long: true, jobs: 20000, outage: 20 * time.Second}
	}
	return form{jobs: 3000, outage: 5 * time.Second}
}

// TestFaults runs every scenario, each in parallel with the others on a
// cluster of its own, and logs a table of their results when all have
// ended.
func TestFaults(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the fault suite crashes and restarts PostgreSQL for minutes: skipped in -short")
	}
	f := theForm()
	var table summary
	t.Cleanup(func() { t.Log("fault suite, " + f.String() + ":\n" + table.String()) })
	for _, sc := range scenarios(f) {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sc.run(t, f, &table)
		})
	}
}

func (f form) String() string {
	if f.long {
		return "long form"
	}
	return "bounded form"
}
