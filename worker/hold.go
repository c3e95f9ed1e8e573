package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// An outcome the worker knows (a success, a failure, a release) is its to
// record for as long as its lease lasts. A write of one that fails for any
// reason but a refusal is held and tried again, against the same lease,
// until it is recorded, refused, or the lease has expired by the worker's
// clock. A success or a failure is then held on, and recorded late
// (jobs.Client.CompleteLate, FailLate) once the lease sweep has made the job
// uncertain, for up to Config.LateOutcomes after the lease expired: the
// holder of the expired lease says what its attempt did, so a job is not
// left uncertain when its worker knew. Only then, or when the worker stops
// hard, is it abandoned, and the job is left to the lease sweep (queued
// again when repeatable, uncertain otherwise), as it would be had the
// worker died.
// holdFirstRetry and holdMaxRetry bound the waits between tries of a held
// outcome. One try may take what is left of the lease (a try after it could
// not record anything), and at least holdMinTry.
const (
	holdFirstRetry = 100 * time.Millisecond
	holdMaxRetry   = 2 * time.Second
	holdMinTry     = time.Second
)

// errAbandoned marks an outcome the worker gave up recording.
var errAbandoned = errors.New("worker: outcome abandoned")

// permanent reports whether err will not go away by trying again: the
// store refused the outcome, or refused the worker (an argument or a
// grant), or a handler's completion writes failed of themselves.
func permanent(err error) bool {
	return isRefusal(err) || errors.Is(err, db.ErrInvalidArgument) || errors.Is(err, db.ErrNotPermitted) || isWritesError(err)
}

// gone says why outcome o, held under a lease expiring at until, can no
// longer be recorded, or is "" while it can: the worker stopped hard (ctx,
// a batch's, ends only then), or the lease has expired by the worker's
// clock and o has no late form, or its late window has passed too.
func (w *Client) gone(ctx context.Context, until time.Time, late bool) string {
	now := w.cfg.Clock.Now()
	switch {
	case ctx.Err() != nil:
		return "the worker stopped"
	case now.Before(until):
		return ""
	case !late || w.cfg.LateOutcomes < 0:
		return "its lease has expired"
	case !now.Before(until.Add(w.cfg.LateOutcomes)):
		return "its lease expired " + w.cfg.LateOutcomes.String() + " ago (Config.LateOutcomes)"
	}
	return ""
}

// expired reports whether a lease expiring at until has expired by the
// worker's clock.
func (w *Client) expired(until time.Time) bool { return !w.cfg.Clock.Now().Before(until) }

// definite reports whether err says for certain that a transaction did not
// commit: the server answered with an error (a failed statement, or a
// commit it refused). Anything else (a connection lost, a timeout) leaves
// a commit in doubt.
func definite(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code[:2] {
	case "08", "57", "53", "58", "XX": // connection, operator intervention, resources, system, internal
		return false
	}
	return true
}

// heldOutcome is an outcome for hold to record.
type heldOutcome struct {
	what string // "success", "failure", ...: for the logs
	// write records the outcome under its lease, while the lease lasts.
	write func(ctx context.Context) error
	// late records it late, after the lease expired and the sweep made the
	// job uncertain (see jobs.Client.CompleteLate). Nil: the outcome has no
	// late form (a release, a success with a completion record), and is
	// abandoned when the lease expires.
	late func(ctx context.Context) error
}

// errNotSwept is a late outcome refused because the sweep has not yet moved
// its job on from the expired lease: tried again, as a write that failed.
var errNotSwept = errors.New("worker: the job's lease has expired but the lease sweep has not yet moved it on")

// hold runs o's write for job j until it returns nil or a permanent error,
// or until the lease (expiring at until) is gone or the worker is stopped
// hard, and returns the last error: nil when recorded, a refusal, or one
// wrapping errAbandoned. Once the lease has expired by the worker's clock,
// it records o late instead (o.late), until its late window passes. ctx is
// the batch's: it ends only when the worker stops hard.
//
// What it logs is shaped for an outage, where every outcome in flight fails
// at once: the first outcome to fail while none is held is logged at WARN,
// naming its job, lease generation and what happens next; those failing
// while it is held are counted into the same spell, and when the last held
// outcome of the spell is settled one WARN line sums it up (how many were
// held, recorded, recorded late, refused and abandoned, for how long, and
// which jobs). Every job held is named at WARN: a long spell names its
// jobs in lines of heldListed as they fill, and its summary the rest. An
// abandoned outcome is always logged at WARN on its own: it
// is a loss the lease sweep will act on. Every held outcome emits one
// EventError.
func (w *Client) hold(ctx context.Context, j jobs.Job, until time.Time, o heldOutcome) (err error) {
	settle := context.WithoutCancel(ctx) // recorded even as the worker stops, until it stops hard
	wait := holdFirstRetry
	canLate := o.late != nil && w.cfg.LateOutcomes >= 0
	for tries := 1; ; tries++ {
		late := canLate && w.expired(until)
		bound := until
		if late {
			bound = until.Add(w.cfg.LateOutcomes)
		}
		tctx, cancel := context.WithTimeout(settle, max(bound.Sub(w.cfg.Clock.Now()), holdMinTry))
		if late {
			err = o.late(tctx)
			if errors.Is(err, db.ErrStaleClaim) {
				err = w.notSwept(tctx, j, until, err)
			}
		} else {
			err = o.write(tctx)
			if canLate && errors.Is(err, db.ErrStaleClaim) && w.expired(until) {
				// Refused as the lease expired while the try ran: late now.
				err = errNotSwept
			}
		}
		cancel()
		var lives leaseLives
		if errors.As(err, &lives) {
			until = lives.until // a renewal whose reply was lost: the lease lasts
			err = errNotSwept
		}
		switch {
		case err == nil:
			if late {
				w.log.InfoContext(ctx, "docket worker: outcome recorded late, after its lease expired", "job", j.ID, "kind", j.Kind,
					"generation", j.LeaseGeneration, "outcome", o.what, "lease_until", until, "tries", tries)
			}
			if tries > 1 {
				w.log.DebugContext(ctx, "docket worker: held outcome recorded", "job", j.ID, "kind", j.Kind,
					"generation", j.LeaseGeneration, "outcome", o.what, "tries", tries)
				how := heldRecorded
				if late {
					how = heldLate
				}
				w.held.settle(ctx, w, how)
			}
			return nil
		case permanent(err):
			if tries > 1 {
				w.held.settle(ctx, w, heldRefused)
			}
			return err
		}
		if why := w.gone(ctx, until, canLate); why != "" {
			next := afterGone
			if late || w.expired(until) {
				next = afterLateGone
			}
			w.log.WarnContext(ctx, "docket worker: abandoned an outcome: "+why, "job", j.ID, "kind", j.Kind,
				"generation", j.LeaseGeneration, "outcome", o.what, "tries", tries, "next", next, "err", err)
			w.held.abandon(j, o.what, until)
			if tries > 1 {
				w.held.settle(ctx, w, heldAbandoned)
			}
			return errors.Join(errAbandoned, err)
		}
		if tries == 1 {
			level := slog.LevelDebug
			first, named := w.held.begin(j.ID, w.cfg.Clock.Now())
			if first {
				level = slog.LevelWarn
			}
			w.log.Log(ctx, level, "docket worker: recording an outcome failed; holding it and trying again, late once its lease has expired",
				"job", j.ID, "kind", j.Kind, "generation", j.LeaseGeneration, "outcome", o.what, "lease_until", until, "err", err)
			if named != nil {
				w.log.WarnContext(ctx, "docket worker: still holding outcomes; their jobs so far",
					"held", named.held, "since", named.since, "jobs", named.jobs)
			}
			w.emit(Event{Type: EventError, JobID: j.ID, Kind: j.Kind, Attempt: j.Attempts, Err: err})
		}
		next := wait
		if !late && !w.expired(until) {
			next = min(wait, until.Sub(w.cfg.Clock.Now()))
		}
		t := time.NewTimer(next)
		select {
		case <-t.C:
		case <-ctx.Done():
			// A hard stop: one last try, then gone abandons.
		}
		t.Stop()
		wait = min(2*wait, holdMaxRetry)
	}
}

// leaseLives is a late outcome refused because its lease has not expired
// after all: a renewal committed whose reply was lost. The outcome is
// recorded on time, until the lease's real expiry.
type leaseLives struct{ until time.Time }

func (e leaseLives) Error() string {
	return "worker: the lease lasts until " + e.until.Format(time.RFC3339Nano)
}

// notSwept says what a late outcome's refusal as stale (refused) means for
// job j, held under a lease expiring at until by the worker's last
// renewal: the lease still lasts (leaseLives), the sweep has not yet moved
// the job on (errNotSwept: try again), or the refusal stands (someone else
// claimed the job, cancelled it, or the window passed). A read that fails is
// tried again.
func (w *Client) notSwept(ctx context.Context, j jobs.Job, until time.Time, refused error) error {
	now, err := w.jobs.Get(ctx, j.ID)
	switch {
	case err != nil && !permanent(err):
		return err
	case err != nil || now.LeaseGeneration != j.LeaseGeneration:
		return refused
	case now.State == jobs.Uncertain:
		return errNotSwept // swept since the refusal: try again
	case now.State != jobs.Claimed:
		return refused
	case now.LeaseExpiresAt.After(until) && now.LeaseExpiresAt.After(w.cfg.Clock.Now()):
		return leaseLives{until: now.LeaseExpiresAt}
	}
	return errNotSwept
}

// lateTo reports whether the attempt of claimed job j, whose lease renewal
// was refused as refused, may still record its outcome late, so its
// handler should run on: the lease expired (the job is still claimed under
// it, unswept, or the sweep made it uncertain) and nothing else happened to
// the job; the worker records late. A read that fails says no.
func (w *Client) lateTo(ctx context.Context, j jobs.Job, refused error) bool {
	if w.cfg.LateOutcomes < 0 || !errors.Is(refused, db.ErrStaleClaim) {
		return false
	}
	now, err := w.jobs.Get(ctx, j.ID)
	if err != nil || now.LeaseGeneration != j.LeaseGeneration {
		return false
	}
	return now.State == jobs.Uncertain || now.State == jobs.Claimed && !now.LeaseExpiresAt.After(w.cfg.Clock.Now())
}

// afterGone is what happens to a job whose outcome was abandoned.
const afterGone = "the lease sweep moves it on (uncertain, or queued again when repeatable)"

// afterLateGone is what happens to a job whose outcome was abandoned after
// its lease expired.
const afterLateGone = "the lease sweep moves it on, or has (uncertain, or queued again when repeatable): reconcile it"

// heldListed bounds how many job ids one line names: a spell holding more
// names them in lines of heldListed as they fill, and its summary names the
// rest.
const heldListed = 50

// How a held outcome ended.
const (
	heldRecorded = iota
	heldLate
	heldRefused
	heldAbandoned
)

// holding counts the outcomes a worker holds, in spells: a spell begins
// when an outcome fails to be recorded while none is held, and ends when
// the last outcome held in it is settled.
type holding struct {
	mu    sync.Mutex
	now   int // outcomes held now
	spell spell
	// abandoned are the outcomes abandoned since the stop began, for
	// Stop's error; nil before (an abandon then is logged, and the lease
	// sweep acts on it).
	abandoned *[]Abandoned
}

// spell is what a spell of held outcomes came to.
type spell struct {
	since time.Time // when it began
	jobs  []int64   // the jobs held in it and not yet named in a log line
	held  int       // outcomes held in it
	ended [4]int    // of those, recorded, recorded late, refused and abandoned
}

// begin counts job's outcome as held, and reports whether it opens a
// spell. When the spell's list of jobs is full it returns the list, to be
// logged on a line of its own, and starts a new one: every job held in a
// spell is named once, in lines of at most heldListed.
func (h *holding) begin(job int64, now time.Time) (first bool, named *heldNamed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	first = h.now == 0
	if first {
		h.spell = spell{since: now}
	}
	h.now++
	h.spell.held++
	h.spell.jobs = append(h.spell.jobs, job)
	if len(h.spell.jobs) == heldListed {
		named = &heldNamed{held: h.spell.held, since: h.spell.since, jobs: h.spell.jobs}
		h.spell.jobs = nil
	}
	return first, named
}

// heldNamed is a full list of the jobs held in a spell: how many the
// spell has held, since when, and the jobs not named before.
type heldNamed struct {
	held  int
	since time.Time
	jobs  []int64
}

// settle counts a held outcome as ended how, and when it was the spell's
// last logs the spell's summary at WARN.
func (h *holding) settle(ctx context.Context, w *Client, how int) {
	h.mu.Lock()
	h.now--
	h.spell.ended[how]++
	if h.now > 0 {
		h.mu.Unlock()
		return
	}
	s := h.spell
	h.mu.Unlock()
	w.log.WarnContext(ctx, "docket worker: held outcomes settled",
		"held", s.held, "recorded", s.ended[heldRecorded], "late", s.ended[heldLate], "refused", s.ended[heldRefused],
		"abandoned", s.ended[heldAbandoned],
		"over", w.cfg.Clock.Now().Sub(s.since).Round(time.Millisecond), "jobs", s.jobs)
}

// abandon notes, once the stop has begun, that the outcome what of job j,
// held under a lease expiring at until, was abandoned.
func (h *holding) abandon(j jobs.Job, what string, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.abandoned != nil {
		*h.abandoned = append(*h.abandoned, Abandoned{Job: j.ID, Kind: j.Kind, Outcome: what, Repeatable: j.Repeatable, LeaseUntil: until})
	}
}

// count is how many outcomes are held now.
func (h *holding) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

// stopBegun starts noting abandoned outcomes, for stopEnded.
func (h *holding) stopBegun() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.abandoned = new([]Abandoned)
}

// stopEnded returns the outcomes abandoned since stopBegun, and how many
// are held still.
func (h *holding) stopEnded() ([]Abandoned, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Abandoned
	if h.abandoned != nil {
		out = append(out, *h.abandoned...)
	}
	return out, h.now
}

// connectionLost reports whether err is the database connection failing
// rather than a statement: the connection closed or reset, a network
// timeout, the server shutting down or terminating the backend.
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return !definite(err)
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connectErr) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}
