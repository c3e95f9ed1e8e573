package worker

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/dbsqlc"
	"github.com/docket-dev/docket/jobs"
)

// Sweep is a periodic, bounded pass over something due: expired leases,
// undispatched jobs, breached deadlines, expired waits. Packages add their own
// to [Config.Sweeps]; the worker runs each as a River periodic job, on the
// elected leader only, one batch per run, in a transaction of its own.
type Sweep struct {
	// Name identifies the sweep in logs, events and [Client.Sweep]:
	// lowercase letters, digits, '.', '_' and '-', at most 63 characters.
	Name string
	// Every is the sweep's period: 10 ms .. 24 h. Zero: [Config.SweepEvery].
	Every time.Duration
	// Func moves up to run.Limit items and reports how many it moved. It
	// must select with FOR UPDATE SKIP LOCKED (or decide by a unique index),
	// so several processes may sweep at once and each item moves once.
	Func SweepFunc
}

// SweepFunc is one run of a [Sweep], on the run's transaction.
type SweepFunc func(ctx context.Context, run *SweepRun) (moved int, err error)

// SweepRun is what one run of a sweep works with.
type SweepRun struct {
	// Tx is the run's transaction: the sweep's changes, and the dispatches
	// of jobs it enqueues, commit together or not at all.
	Tx pgx.Tx
	// Now is the instant the run decides by, from the worker's clock.
	Now time.Time
	// Limit is the most items the run may move.
	Limit int
	// Actor is the worker's actor, whom the sweep acts as.
	Actor access.Actor
	// Clock is the worker's clock.
	Clock db.Clock
	// Logger is the worker's logger, for an item the sweep passes over
	// rather than failing the whole run for it.
	Logger *slog.Logger

	w *Client
}

// Dispatch inserts, in the run's transaction, a River dispatch for each job
// of js that is queued and not for external executors: a sweep that queues
// or enqueues jobs calls it so they run.
func (r *SweepRun) Dispatch(ctx context.Context, js ...jobs.Job) error {
	return dispatchTx(ctx, r.w.river, r.Tx, r.Clock, js...)
}

// DispatchIDs dispatches, in the run's transaction, the jobs ids the sweep
// enqueued (read as the run's actor, in batches), as [SweepRun.Dispatch]
// does. It fails if any of them is not visible to the actor.
func (r *SweepRun) DispatchIDs(ctx context.Context, ids ...int64) error {
	if len(ids) == 0 {
		return nil
	}
	jc, err := jobs.NewClient(r.Tx, jobs.Config{Actor: r.Actor, Clock: r.Clock})
	if err != nil {
		return err
	}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), jobs.MaxSweepBatch)]
		ids = ids[len(chunk):]
		js, err := jc.GetManyTx(ctx, r.Tx, chunk)
		if err != nil {
			return err
		}
		if len(js) != len(chunk) {
			return fmt.Errorf("%d of %d jobs are not visible to %s", len(chunk)-len(js), len(chunk), r.Actor)
		}
		if err := r.Dispatch(ctx, js...); err != nil {
			return err
		}
	}
	return nil
}

var sweepNamePattern = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,62}$`)

func (s Sweep) validate() error {
	const op = "worker.new"
	if !sweepNamePattern.MatchString(s.Name) {
		return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid sweep name %q: want lowercase letters, digits, '.', '_' and '-', at most 63", s.Name))
	}
	if s.Every != 0 && (s.Every < 10*time.Millisecond || s.Every > 24*time.Hour) {
		return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("sweep %s: period %v is outside 10ms .. 24h", s.Name, s.Every))
	}
	if s.Func == nil {
		return db.Refuse(db.ErrInvalidArgument, op, "sweep "+s.Name+" has no Func")
	}
	return nil
}

// The built-in sweeps' names.
const (
	// SweepLeases moves expired leases on: a repeatable job is queued again
	// (and dispatched), any other becomes uncertain.
	SweepLeases = "leases"
	// SweepDispatch dispatches queued jobs no dispatch carries, such as jobs
	// enqueued by SQL.
	SweepDispatch = "dispatch"
)

// dispatchScan is how many due jobs per (project, queue) the dispatch sweep
// looks at in one run.
const dispatchScan = 200

// deadDispatchAfter is how long a dispatch may have been running, by River's
// clock, while its job is queued before the dispatch sweep takes it for one
// a dead process left behind: far longer than any claim takes.
const deadDispatchAfter = 10 * time.Minute

var queries = dbsqlc.New()

func (w *Client) builtinSweeps() []Sweep {
	return []Sweep{
		{Name: SweepLeases, Every: w.cfg.SweepEvery, Func: func(ctx context.Context, run *SweepRun) (int, error) {
			moved, err := w.jobs.ExpireLeasesTx(ctx, run.Tx, run.Limit)
			if err != nil || len(moved) == 0 {
				return 0, err
			}
			// The holders' dispatches are dead or too late: finalize them,
			// then dispatch the jobs queued again.
			ids := make([]int64, len(moved))
			for i, j := range moved {
				ids[i] = j.ID
			}
			if _, err := queries.JobDispatchAbandon(ctx, run.Tx, ids, time.Now()); err != nil {
				return 0, fmt.Errorf("abandon dispatches: %w", err)
			}
			if err := run.Dispatch(ctx, moved...); err != nil {
				return 0, err
			}
			for _, j := range moved {
				w.log.InfoContext(ctx, "docket worker: lease expired", "job", j.ID, "kind", j.Kind, "state", j.State)
			}
			return len(moved), nil
		}},
		{Name: SweepDispatch, Every: w.cfg.SweepEvery, Func: func(ctx context.Context, run *SweepRun) (int, error) {
			found, err := w.store.UndispatchedTx(ctx, run.Tx, w.queues, dispatchScan, run.Limit, w.decoders,
				time.Now().Add(-deadDispatchAfter))
			if err != nil {
				return 0, err
			}
			return len(found), run.Dispatch(ctx, found...)
		}},
	}
}

// Sweep runs one batch of the sweep name now, in a transaction of its own,
// and reports how many items it moved: what the periodic run does, for
// operators and tests. It refuses an unknown name with
// [db.ErrInvalidArgument].
func (w *Client) Sweep(ctx context.Context, name string) (int, error) {
	s, ok := w.sweeps[name]
	if !ok {
		return 0, db.Refuse(db.ErrInvalidArgument, "worker.sweep", fmt.Sprintf("no sweep named %q", name))
	}
	var moved int
	err := db.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
		run := &SweepRun{Tx: tx, Now: w.cfg.Clock.Now(), Limit: w.cfg.SweepLimit, Actor: w.cfg.Actor, Clock: w.cfg.Clock,
			Logger: w.log, w: w}
		var err error
		moved, err = s.Func(ctx, run)
		return err
	})
	if err != nil {
		if !(w.stopping.Load() && ctx.Err() != nil) { // a stop that cut the run short is no failure
			w.emit(Event{Type: EventError, Sweep: name, Err: err})
		}
		return 0, fmt.Errorf("sweep %s: %w", name, err)
	}
	w.emit(Event{Type: EventSweep, Sweep: name, Count: moved})
	return moved, nil
}

// sweepArgs are a sweep run's River args.
type sweepArgs struct {
	Name string `json:"name"`
}

func (sweepArgs) Kind() string { return "docket.sweep" }

// sweepWorker is River's worker for sweep runs.
type sweepWorker struct {
	river.WorkerDefaults[sweepArgs]
	w *Client
}

// Work runs one batch of the named sweep. A failed run is not retried by
// River: the next period runs it again.
func (s *sweepWorker) Work(ctx context.Context, rj *river.Job[sweepArgs]) error {
	moved, err := s.w.Sweep(ctx, rj.Args.Name)
	if err != nil {
		s.w.log.WarnContext(ctx, "docket worker: sweep failed", "sweep", rj.Args.Name, "err", err)
		return river.JobCancel(err)
	}
	if moved > 0 {
		s.w.log.DebugContext(ctx, "docket worker: sweep", "sweep", rj.Args.Name, "moved", moved)
	}
	return nil
}
