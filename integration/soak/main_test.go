//go:build unix

package soak

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
)

// The test binary started with childEnv set is a worker process (see
// runChild), not a test run.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	pgtest.Main(m)
}

// longFlag and longEnv select the long form. The variable serves
// `go test ./...`, where the other packages would refuse the flag.
var longFlag = flag.Bool("docket.soak.long", false, "run the long soak: 1,000,000 jobs with pruning on, then with pruning off")

const longEnv = "DOCKET_SOAK_LONG"

// The cast: ana creates the project, gives the grants and sets its
// retention; app enqueues; the workers act as runner, which claims and
// prunes.
const (
	project = testkit.Acme
	ana     = testkit.Ana
	app     = testkit.App
)

const runner access.Actor = "worker:soak"

// The workload's shape, in both forms.
const (
	// workers is how many worker processes run the jobs.
	workers = 2
	// chunk is how many jobs one EnqueueMany creates.
	chunk = 5000
	// sweepEvery is the prune sweep's period.
	sweepEvery = time.Second
	// sweepLimit is the most items one sweep run moves (the prune's batch).
	sweepLimit = 10000
	// sampleEvery is how often the parent counts the completed jobs.
	sampleEvery = time.Second
	// verifySample is how many of the remaining jobs' histories are verified
	// at the end.
	verifySample = 1000
	// poolConns is each worker's pool size.
	poolConns = 20
)

// form is how big the harness runs.
type form struct {
	long    bool
	jobs    int           // jobs in a run
	slice   int           // completions per row of the rate table
	backlog int           // most unfinished jobs at once
	horizon time.Duration // how long succeeded jobs are kept
	prunes  []bool        // the runs: pruning on, off
	limit   time.Duration // how long a run may take before the harness gives up
	// width, when not 0, is the history's partition width
	// (history_partition_width) for the run, its jobs' ids starting past
	// the partitions the migration made: a width the run's jobs fill
	// several times over, so that the prune's upkeep drops partitions.
	width int64
}

// longWidth is the long forms' partition width: a tenth of the long form's
// jobs, as a width near a day's jobs would be.
const longWidth = 100_000

// jobsEnv, when it names a number of jobs, runs the long form with pruning
// on only, for that many jobs: DOCKET_SOAK_JOBS=5000000 runs to ten million
// events (an event a job's birth, one an attempt).
const jobsEnv = "DOCKET_SOAK_JOBS"

// widthEnv, set to a number of ids, is the long forms' partition width
// instead of longWidth; "default" keeps the migration's (a million ids:
// a 1,000,000-job run's events in one partition, pruned row by row).
const widthEnv = "DOCKET_SOAK_WIDTH"

// theForm is the bounded form, or the long one when asked for.
func theForm() form {
	f := theFormAlone()
	if w := os.Getenv(widthEnv); f.long && w != "" {
		f.width, _ = strconv.ParseInt(w, 10, 64) // "default", or anything not a number: 0
	}
	return f
}

// theFormAlone is theForm without widthEnv.
func theFormAlone() form {
	if n, _ := strconv.Atoi(os.Getenv(jobsEnv)); n > 0 {
		return form{long: true, jobs: n, slice: max(n/10, 1), backlog: 50_000, horizon: 30 * time.Second,
			prunes: []bool{true}, limit: max(40*time.Minute, time.Duration(n/1000)*time.Second), width: longWidth}
	}
	if *longFlag || os.Getenv(longEnv) != "" {
		return form{long: true, jobs: 1_000_000, slice: 100_000, backlog: 50_000, horizon: 30 * time.Second,
			prunes: []bool{true, false}, limit: 40 * time.Minute, width: longWidth}
	}
	return form{jobs: 30_000, slice: 5_000, backlog: 10_000, horizon: time.Second,
		prunes: []bool{true}, limit: 5 * time.Minute}
}

func (f form) String() string {
	name := "bounded form"
	if f.long {
		name = "long form"
	}
	width := "the default"
	if f.width > 0 {
		width = thousands(f.width) + " ids"
	}
	return fmt.Sprintf("%s: %s jobs a run, %d workers, succeeded jobs kept %v, chunks of %s, backlog ≤ %s, history partitions of %s",
		name, thousands(int64(f.jobs)), workers, f.horizon, thousands(chunk), thousands(int64(f.backlog)), width)
}

// pruneName names a run by whether it prunes.
func pruneName(prune bool) string {
	if prune {
		return "prune-on"
	}
	return "prune-off"
}
