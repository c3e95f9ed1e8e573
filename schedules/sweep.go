package schedules

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/schedules"
	"github.com/docket-dev/docket/worker"
)

// SweepName is the name of the schedule sweep ([Sweep]).
const SweepName = "schedules"

// Sweep returns the schedule sweep, for worker.Config.Sweeps: each run takes
// up to the run's limit of active schedules due at the run's instant
// (next_due_at ≤ now), soonest first, and for each materializes its due
// occurrences as jobs by its catch-up policy, records what it skipped, and
// moves its cursor on, all in the run's transaction; the jobs' commit wakes
// the workers of their queues. It reports how many schedules it advanced. A schedule this
// worker cannot plan (a zone missing from its tz database) is passed over
// with an error in the worker's log and stays due; it does not hold up the
// others. every is its period; zero takes worker.Config.SweepEvery.
// Keep it below the schedules' grace, or on-time occurrences count as
// missed.
//
// The sweep acts as the worker's actor and looks only at projects where that
// actor holds schedule.sweep and job.create. It is a range scan of the
// partial index of active schedules by due instant; schedules another
// sweeper holds are skipped, and an occurrence's identity (schedule, local
// date-time, fold) is unique, so several workers may run it at once and each
// occurrence becomes one job.
func Sweep(every time.Duration) worker.Sweep {
	return worker.Sweep{Name: SweepName, Every: every, Func: sweep}
}

func sweep(ctx context.Context, run *worker.SweepRun) (int, error) {
	rows, err := queries.ScheduleDue(ctx, run.Tx, int32(run.Limit), string(run.Actor), run.Now)
	if err != nil {
		return 0, fmt.Errorf("due schedules: %w", err)
	}
	advanced := 0
	for _, r := range rows {
		s := fromRow(r)
		p, err := planFor(s, run.Now)
		if err != nil {
			// A schedule this worker cannot plan (its zone missing from this
			// machine's tz database, say) must not hold up the others: it
			// stays due, for a worker that can, and says why in the log.
			run.Logger.ErrorContext(ctx, "docket schedules: passing over a schedule this worker cannot plan",
				"schedule", s.ID, "project", s.Project, "name", s.Name, "err", err)
			continue
		}
		if err := advance(ctx, run, s, p); err != nil {
			return 0, err
		}
		advanced++
	}
	return advanced, nil
}

// planFor decides what a sweep at now does to s.
func planFor(s Schedule, now time.Time) (plan, error) {
	t, err := s.terms()
	if err != nil {
		return plan{}, fmt.Errorf("schedule %d: %w", s.ID, err)
	}
	p, err := planSweep(t, now)
	if err != nil {
		return plan{}, fmt.Errorf("schedule %d: %w", s.ID, err)
	}
	return p, nil
}

// advance records p, one sweep of s.
func advance(ctx context.Context, run *worker.SweepRun, s Schedule, p plan) error {
	var err error
	arg := dbsqlc.ScheduleAdvanceParams{
		ID: s.ID, ExpectedCursor: s.Cursor, CursorAt: p.cursor, Actor: string(run.Actor), Now: run.Now,
		Locals: make([]time.Time, len(p.runs)), Folds: make([]int32, len(p.runs)), Dues: make([]time.Time, len(p.runs)),
		Skipped: make([]json.RawMessage, len(p.skipped)),
	}
	for i, o := range p.runs {
		arg.Locals[i], arg.Folds[i], arg.Dues[i] = o.Local, int32(o.Fold), o.At
	}
	for i, k := range p.skipped {
		if arg.Skipped[i], err = json.Marshal(k); err != nil {
			return err
		}
	}
	if p.next != nil {
		arg.NextDueAt = &p.next.At
	}
	if _, err := queries.ScheduleAdvance(ctx, run.Tx, arg); err != nil {
		return fmt.Errorf("schedule %d: %w", s.ID, err)
	}
	return nil
}
