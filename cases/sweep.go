package cases

import (
	"context"
	"fmt"
	"time"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// SweepBreaches is the name of the breach sweep ([BreachSweep]).
const SweepBreaches = "obligations.breach"

// BreachSweep returns the breach sweep, for worker.Config.Sweeps: each run
// moves up to the run's limit of pending obligations due at the run's
// instant (due ≤ now) to breached, soonest first, enqueues the escalation
// job each names (in the case's project, naming the case, once: under
// idempotency key "obligation:ID:breach") and dispatches it, all in the
// run's transaction. every is its period; zero takes worker.Config.SweepEvery.
//
// The sweep acts as the worker's actor and looks only at projects where that
// actor holds case.sweep ([access.CaseSweep]), and at obligations with an
// escalation only where it also holds job.create. It is a range scan of the
// partial index of pending obligations by due instant, so its cost follows
// what is due, not what is pending; obligations another sweeper holds are
// skipped, so several workers may run it at once.
func BreachSweep(every time.Duration) worker.Sweep {
	return worker.Sweep{Name: SweepBreaches, Every: every, Func: sweepBreaches}
}

func sweepBreaches(ctx context.Context, run *worker.SweepRun) (int, error) {
	rows, err := queries.ObligationBreachDue(ctx, run.Tx, int32(run.Limit), string(run.Actor), run.Now)
	if err != nil {
		return 0, fmt.Errorf("breach due obligations: %w", err)
	}
	jc, err := jobs.NewClient(run.Tx, jobs.Config{Actor: run.Actor, Clock: run.Clock})
	if err != nil {
		return 0, err
	}
	ids := make([]int64, 0, len(rows))
	for _, r := range rows {
		if r.EscalationJobID != nil {
			ids = append(ids, *r.EscalationJobID)
		}
	}
	escalations, err := jc.GetMany(ctx, run.Tx, ids)
	if err != nil {
		return 0, fmt.Errorf("escalation jobs: %w", err)
	}
	if len(escalations) != len(ids) {
		return 0, fmt.Errorf("escalation jobs: %d of %d are not visible to %s", len(ids)-len(escalations), len(ids), run.Actor)
	}
	if err := run.Dispatch(ctx, escalations...); err != nil {
		return 0, fmt.Errorf("dispatch escalations: %w", err)
	}
	return len(rows), nil
}
