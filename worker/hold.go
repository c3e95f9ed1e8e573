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
// clock; only then is it abandoned, and the job is left to the lease sweep
// (queued again when repeatable, uncertain otherwise), as it would be had
// the worker died.

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

// gone says why an outcome held under a lease expiring at until can no
// longer be recorded, or is "" while it can: the lease has expired by the
// worker's clock, or the worker stopped hard (ctx, a batch's, ends only
// then).
func (w *Client) gone(ctx context.Context, until time.Time) string {
	switch {
	case ctx.Err() != nil:
		return "the worker stopped"
	case !w.cfg.Clock.Now().Before(until):
		return "its lease has expired"
	}
	return ""
}

// afterGone is what happens to a job whose outcome was abandoned.
const afterGone = "the lease sweep moves it on (uncertain, or queued again when repeatable)"

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

// hold runs write, the recording of what for job j, until it returns nil or
// a permanent error, or until the lease (expiring at until) is gone or the
// worker is stopped hard, and returns the last error: nil when recorded, a
// refusal, or one wrapping errAbandoned. ctx is the batch's: it ends only
// when the worker stops hard.
//
// What it logs is shaped for an outage, where every outcome in flight fails
// at once: the first outcome to fail while none is held is logged at WARN,
// naming its job, lease generation and what happens next; those failing
// while it is held are counted into the same spell, and when the last held
// outcome of the spell is settled one WARN line sums it up (how many were
// held, recorded, refused and abandoned, for how long, and which jobs). An
// abandoned outcome is always logged at WARN on its own: it is a loss the
// lease sweep will act on. Every held outcome emits one EventError.
func (w *Client) hold(ctx context.Context, j jobs.Job, until time.Time, what string, write func(context.Context) error) (err error) {
	settle := context.WithoutCancel(ctx) // recorded even as the worker stops, until it stops hard
	wait := holdFirstRetry
	for tries := 1; ; tries++ {
		tctx, cancel := context.WithTimeout(settle, max(until.Sub(w.cfg.Clock.Now()), holdMinTry))
		err = write(tctx)
		cancel()
		switch {
		case err == nil:
			if tries > 1 {
				w.log.DebugContext(ctx, "docket worker: held outcome recorded", "job", j.ID, "kind", j.Kind,
					"generation", j.LeaseGeneration, "outcome", what, "tries", tries)
				w.held.settle(ctx, w, heldRecorded)
			}
			return nil
		case permanent(err):
			if tries > 1 {
				w.held.settle(ctx, w, heldRefused)
			}
			return err
		}
		if why := w.gone(ctx, until); why != "" {
			w.log.WarnContext(ctx, "docket worker: abandoned an outcome: "+why, "job", j.ID, "kind", j.Kind,
				"generation", j.LeaseGeneration, "outcome", what, "tries", tries, "next", afterGone, "err", err)
			if tries > 1 {
				w.held.settle(ctx, w, heldAbandoned)
			}
			return errors.Join(errAbandoned, err)
		}
		if tries == 1 {
			level := slog.LevelDebug
			if w.held.begin(j.ID, w.cfg.Clock.Now()) {
				level = slog.LevelWarn
			}
			w.log.Log(ctx, level, "docket worker: recording an outcome failed; holding it and trying again until its lease expires",
				"job", j.ID, "kind", j.Kind, "generation", j.LeaseGeneration, "outcome", what, "lease_until", until, "err", err)
			w.emit(Event{Type: EventError, JobID: j.ID, Kind: j.Kind, Attempt: j.Attempts, Err: err})
		}
		t := time.NewTimer(min(wait, until.Sub(w.cfg.Clock.Now())))
		select {
		case <-t.C:
		case <-ctx.Done():
			// A hard stop: one last try, then gone abandons.
		}
		t.Stop()
		wait = min(2*wait, holdMaxRetry)
	}
}

// heldListed bounds how many job ids a spell's summary names.
const heldListed = 50

// How a held outcome ended.
const (
	heldRecorded = iota
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
}

// spell is what a spell of held outcomes came to.
type spell struct {
	since time.Time // when it began
	jobs  []int64   // the first heldListed jobs held in it
	held  int       // outcomes held in it
	ended [3]int    // of those, recorded, refused and abandoned
}

// begin counts job's outcome as held, and reports whether it opens a spell.
func (h *holding) begin(job int64, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := h.now == 0
	if first {
		h.spell = spell{since: now}
	}
	h.now++
	h.spell.held++
	if len(h.spell.jobs) < heldListed {
		h.spell.jobs = append(h.spell.jobs, job)
	}
	return first
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
		"held", s.held, "recorded", s.ended[heldRecorded], "refused", s.ended[heldRefused], "abandoned", s.ended[heldAbandoned],
		"over", w.cfg.Clock.Now().Sub(s.since).Round(time.Millisecond), "jobs", s.jobs)
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
