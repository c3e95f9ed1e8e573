package cases

import (
	"context"
	"fmt"
	"time"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/worker"
)

// SweepBreaches is the name of the breach sweep ([BreachSweep]).
const SweepBreaches = "obligations.breach"

// BreachSweep returns the breach sweep, for worker.Config.Sweeps: each run
// moves up to the run's limit of pending obligations due at the run's
// instant (due ≤ now) to breached, soonest first, enqueues the escalation
// job each names (in the case's project, naming the case, once: under
// idempotency key "obligation:ID:breach"), all in the
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
	return len(rows), nil
}

// SweepTimers is the name of the timer sweep ([TimerSweep]).
const SweepTimers = "timers.fire"

// TimerSweep returns the timer sweep, for worker.Config.Sweeps: each run
// fires up to the run's limit of armed timers of run steps whose instant
// has come (wake_at ≤ now), soonest first, and answers each one's step
// (see package plans), all in the run's transaction; see
// [Client.FireTimers]. every is its period; zero takes
// worker.Config.SweepEvery. It is a range scan of the partial index of
// armed step timers by instant.
func TimerSweep(every time.Duration) worker.Sweep {
	return worker.Sweep{Name: SweepTimers, Every: every, Func: func(ctx context.Context, run *worker.SweepRun) (int, error) {
		fired, err := fireTimers(ctx, run.Tx, run.Limit, run.Actor, run.Now)
		return len(fired), err
	}}
}

// The names of the waits' sweeps.
const (
	SweepWaitExpiry  = "waits.expire"        // [WaitExpirySweep]
	SweepDeadLetters = "messages.deadletter" // [DeadLetterSweep]
)

// DefaultDeadLetterHorizon is how long [DeadLetterSweep] leaves a message
// buffered, by default, before it gives up on it.
const DefaultDeadLetterHorizon = 7 * 24 * time.Hour

// WaitExpirySweep returns the wait expiry sweep, for worker.Config.Sweeps:
// each run moves up to the run's limit of waiting waits whose deadline has
// come (deadline ≤ now) to expired, soonest first, enqueues the timeout
// continuation each names (once: under idempotency key "wait:ID:expired")
// all in the run's transaction. every is its period;
// zero takes worker.Config.SweepEvery.
//
// It acts as the worker's actor and looks only at projects where that actor
// holds case.sweep, and at waits with a timeout continuation only where it
// also holds job.create. It is a range scan of the partial index of waiting
// waits by deadline; waits another transaction holds are skipped, so several
// workers may run it at once and a wait expires once.
func WaitExpirySweep(every time.Duration) worker.Sweep {
	return worker.Sweep{Name: SweepWaitExpiry, Every: every, Func: sweepWaitExpiry}
}

func sweepWaitExpiry(ctx context.Context, run *worker.SweepRun) (int, error) {
	rows, err := queries.WaitExpireDue(ctx, run.Tx, int32(run.Limit), string(run.Actor), run.Now)
	if err != nil {
		return 0, fmt.Errorf("expire due waits: %w", err)
	}
	return len(rows), nil
}

// DeadLetterSweep returns the dead-letter sweep, for worker.Config.Sweeps:
// each run moves up to the run's limit of messages buffered for horizon or
// longer (arrived ≤ now − horizon), oldest first, to dead-lettered, with a
// reason naming the horizon, or the addressee that closed without consuming
// the message. A message younger than the horizon is never touched: "nobody
// waits for this yet" is not "nobody ever will". every is its period (zero
// takes worker.Config.SweepEvery); horizon is 1 minute to 366 days, zero
// taking [DefaultDeadLetterHorizon] (a horizon out of range is refused when
// the sweep runs, with [db.ErrInvalidArgument]).
//
// It acts as the worker's actor and looks only at projects where that actor
// holds case.sweep. It is a range scan of the partial index of buffered
// messages by arrival; messages another transaction holds are skipped.
func DeadLetterSweep(every, horizon time.Duration) worker.Sweep {
	if horizon == 0 {
		horizon = DefaultDeadLetterHorizon
	}
	return worker.Sweep{Name: SweepDeadLetters, Every: every, Func: func(ctx context.Context, run *worker.SweepRun) (int, error) {
		rows, err := queries.MessageDeadLetterDue(ctx, run.Tx, int32(run.Limit), horizon, string(run.Actor), run.Now)
		if err != nil {
			return 0, db.Translate(err, "messages.dead_letter", "horizon", horizon)
		}
		return len(rows), nil
	}}
}
