package worker

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
)

// Sweep is a periodic, bounded pass over something due: expired leases,
// breached deadlines, expired waits. Packages add their own
// to [Config.Sweeps]; every running worker runs each on its own timer, one
// batch per run, in a transaction of its own.
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
	// Tx is the run's transaction: the sweep's changes commit together or
	// not at all. Jobs it enqueues or queues again need nothing more: their
	// commit wakes the workers of their queues.
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

// SweepLeases is the built-in sweep's name: it moves expired leases on (a
// repeatable job is queued again after its backoff, any other becomes
// uncertain).
const SweepLeases = "leases"

func (w *Client) builtinSweeps() []Sweep {
	return []Sweep{
		{Name: SweepLeases, Every: w.cfg.SweepEvery, Func: func(ctx context.Context, run *SweepRun) (int, error) {
			moved, err := w.jobs.ExpireLeasesTx(ctx, run.Tx, run.Limit)
			for _, j := range moved {
				w.log.InfoContext(ctx, "docket worker: lease expired", "job", j.ID, "kind", j.Kind, "state", j.State)
			}
			return len(moved), err
		}},
		{Name: SweepBatches, Every: w.cfg.SweepEvery, Func: w.sweepBatches},
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
	ctx, st := w.sweepStarted(ctx, name)
	err := db.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
		run := &SweepRun{Tx: tx, Now: w.cfg.Clock.Now(), Limit: w.cfg.SweepLimit, Actor: w.cfg.Actor, Clock: w.cfg.Clock,
			Logger: w.log}
		var err error
		moved, err = s.Func(ctx, run)
		return err
	})
	if err != nil {
		if !(w.quitting() && ctx.Err() != nil) { // a stop that cut the run short is no failure
			w.emit(Event{Type: EventError, Sweep: name, Err: err})
		}
		err = fmt.Errorf("sweep %s: %w", name, err)
		w.sweepEnded(ctx, st, 0, err)
		return 0, err
	}
	w.sweepEnded(ctx, st, moved, nil)
	w.emit(Event{Type: EventSweep, Sweep: name, Count: moved})
	return moved, nil
}

// sweepLoop runs sweep s every s.Every, the first one period after Start,
// until ctx ends (Stop). Every worker process sweeps on its own clock: a sweep's items are
// taken with FOR UPDATE SKIP LOCKED, so processes sweeping at once move
// each item once, and work a dead process held is swept by the others
// within one period of its lease's end, whoever leads River.
func (w *Client) sweepLoop(ctx context.Context, s Sweep) {
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		moved, err := w.Sweep(ctx, s.Name)
		switch {
		case err != nil && ctx.Err() == nil:
			w.log.WarnContext(ctx, "docket worker: sweep failed; trying again next period", "sweep", s.Name, "err", err)
		case moved > 0:
			w.log.DebugContext(ctx, "docket worker: sweep", "sweep", s.Name, "moved", moved)
		}
	}
}
