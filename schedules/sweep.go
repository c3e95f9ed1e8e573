package schedules

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/docket-dev/docket/internal/dbsqlc"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// SweepName is the name of the schedule sweep ([Sweep]).
const SweepName = "schedules"

// Sweep returns the schedule sweep, for worker.Config.Sweeps: each run takes
// up to the run's limit of active schedules due at the run's instant
// (next_due_at ≤ now), soonest first, and for each materializes its due
// occurrences as jobs by its catch-up policy, records what it skipped, and
// moves its cursor on, all in the run's transaction; it dispatches the jobs
// so they run. every is its period; zero takes worker.Config.SweepEvery.
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
	var ids []int64
	for _, r := range rows {
		got, err := advance(ctx, run, fromRow(r))
		if err != nil {
			return 0, err
		}
		ids = append(ids, got...)
	}
	if len(ids) == 0 {
		return len(rows), nil
	}
	jc, err := jobs.NewClient(run.Tx, jobs.Config{Actor: run.Actor, Clock: run.Clock})
	if err != nil {
		return 0, err
	}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), jobs.MaxSweepBatch)]
		ids = ids[len(chunk):]
		js, err := jc.GetMany(ctx, run.Tx, chunk)
		if err != nil {
			return 0, fmt.Errorf("scheduled jobs: %w", err)
		}
		if err := run.Dispatch(ctx, js...); err != nil {
			return 0, fmt.Errorf("dispatch scheduled jobs: %w", err)
		}
	}
	return len(rows), nil
}

// advance plans and records one sweep of s, and returns the ids of the jobs
// it enqueued.
func advance(ctx context.Context, run *worker.SweepRun, s Schedule) ([]int64, error) {
	t, err := s.terms()
	if err != nil {
		return nil, fmt.Errorf("schedule %d: %w", s.ID, err)
	}
	p, err := planSweep(t, run.Now)
	if err != nil {
		return nil, fmt.Errorf("schedule %d: %w", s.ID, err)
	}
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
			return nil, err
		}
	}
	if p.next != nil {
		arg.NextDueAt = &p.next.At
	}
	js, err := queries.ScheduleAdvance(ctx, run.Tx, arg)
	if err != nil {
		return nil, fmt.Errorf("schedule %d: %w", s.ID, err)
	}
	ids := make([]int64, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	return ids, nil
}
