package worker

import (
	"context"
	"errors"
	"io"
	"net"
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
// when the worker stops hard. It logs the first failure and the end at WARN,
// naming the job, its lease generation and what happens next, and emits an
// EventError for the first failure.
func (w *Client) hold(ctx context.Context, j jobs.Job, until time.Time, what string, write func(context.Context) error) error {
	settle := context.WithoutCancel(ctx) // recorded even as the worker stops, until it stops hard
	wait := holdFirstRetry
	for tries := 1; ; tries++ {
		tctx, cancel := context.WithTimeout(settle, max(until.Sub(w.cfg.Clock.Now()), holdMinTry))
		err := write(tctx)
		cancel()
		switch {
		case err == nil:
			if tries > 1 {
				w.log.WarnContext(ctx, "docket worker: held outcome recorded", "job", j.ID, "kind", j.Kind,
					"generation", j.LeaseGeneration, "outcome", what, "tries", tries)
			}
			return nil
		case permanent(err):
			return err
		}
		if why := w.gone(ctx, until); why != "" {
			w.log.WarnContext(ctx, "docket worker: abandoned an outcome: "+why, "job", j.ID, "kind", j.Kind,
				"generation", j.LeaseGeneration, "outcome", what, "tries", tries, "next", afterGone, "err", err)
			return errors.Join(errAbandoned, err)
		}
		if tries == 1 {
			w.log.WarnContext(ctx, "docket worker: recording an outcome failed; holding it and trying again until its lease expires",
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
