package schedules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/docket-dev/docket/db"
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
// the workers of their queues. It reports how many schedules it advanced or
// found broken.
//
// A schedule it cannot plan (an expression no longer parsed, a walk that
// does not advance), or whose plan the database refuses, is recorded as
// [Broken], with the reason, and passed over; every other schedule still
// advances in the same run. A schedule whose zone this worker's tz
// database lacks is not the schedule's fault: it is passed over with an
// error in the worker's log and stays due, for a worker that can plan it.
// every is its period; zero takes worker.Config.SweepEvery.
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
	moved := 0
	for _, r := range rows {
		s := fromRow(r)
		p, err := planFor(s, run.Now)
		var zone *zoneError
		switch {
		case errors.As(err, &zone):
			// This machine's tz database lacks the zone: the schedule is not
			// at fault, so it stays due, for a worker that can plan it, and
			// the log says why.
			run.Logger.ErrorContext(ctx, "docket schedules: passing over a schedule whose zone this worker cannot load",
				"schedule", s.ID, "project", s.Project, "name", s.Name, "err", err)
			continue
		case err != nil:
			err = markBroken(ctx, run, s, err)
		default:
			err = advance(ctx, run, s, p)
		}
		if errors.Is(err, errMovedOn) {
			continue
		}
		if err != nil {
			return 0, err
		}
		moved++
	}
	return moved, nil
}

// errMovedOn: the schedule was no longer active at the cursor the sweep
// read (it cannot happen while schedule_due's lock holds); the next sweep
// sees where it is.
var errMovedOn = errors.New("schedule moved on since it was read")

// markBroken records that s cannot be planned, for why, and logs it. The
// reason is cut to [MaxReason] characters.
func markBroken(ctx context.Context, run *worker.SweepRun, s Schedule, why error) error {
	reason := why.Error()
	if r := []rune(reason); len(r) > MaxReason {
		reason = string(r[:MaxReason-1]) + "…"
	}
	run.Logger.ErrorContext(ctx, "docket schedules: a schedule cannot be planned; recorded as broken until updated or resumed",
		"schedule", s.ID, "project", s.Project, "name", s.Name, "reason", reason)
	err := savepoint(ctx, run.Tx, func(q pgx.Tx) error {
		_, err := queries.ScheduleBreak(ctx, q, dbsqlc.ScheduleBreakParams{
			ID: s.ID, ExpectedCursor: s.Cursor, Reason: reason, Actor: string(run.Actor), Now: run.Now})
		return err
	})
	if isMovedOn(err) {
		return errMovedOn
	}
	if err != nil {
		return fmt.Errorf("schedule %d: recording it broken: %w", s.ID, err)
	}
	return nil
}

// savepoint runs f under a savepoint of tx: what f wrote is kept when it
// succeeds and rolled back when it fails, and tx goes on either way.
func savepoint(ctx context.Context, tx pgx.Tx, f func(pgx.Tx) error) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	if err := f(sp); err != nil {
		if rb := sp.Rollback(ctx); rb != nil {
			return errors.Join(err, rb)
		}
		return err
	}
	return sp.Commit(ctx)
}

// isMovedOn reports whether err is the database's answer that a schedule is
// not active at the cursor the sweep read (40001).
func isMovedOn(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40001"
}

// isRefusal reports whether err is the database refusing what it was given
// (a DK refusal, a data exception or a broken constraint), rather than the
// connection or the transaction failing: a refusal of a schedule's plan
// breaks that schedule, anything else fails the run.
func isRefusal(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code[:2] {
	case "DK", "22", "23":
		return true
	}
	return false
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

// advance records p, one sweep of s, under a savepoint: when the database
// refuses the plan, what it wrote is rolled back and s is recorded broken
// with the refusal, so that the run goes on to the others.
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
	err = savepoint(ctx, run.Tx, func(q pgx.Tx) error {
		_, err := queries.ScheduleAdvance(ctx, q, arg)
		return err
	})
	switch {
	case err == nil:
		return nil
	case isMovedOn(err):
		return errMovedOn
	case isRefusal(err):
		return markBroken(ctx, run, s, fmt.Errorf("the database refused its sweep: %w", db.Translate(err, "schedule.sweep")))
	}
	return fmt.Errorf("schedule %d: %w", s.ID, err)
}
