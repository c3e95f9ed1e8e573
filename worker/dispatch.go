package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// DispatchKind is the River kind of a dispatch: the River job that carries
// one docket job to a worker. Its args are {"job_id": ID, "kind": KIND}.
const DispatchKind = "docket.dispatch"

// SweepQueue is the River queue the worker's sweeps run in. It is reserved:
// a worker refuses it as a job queue.
const SweepQueue = "docket-sweeps"

// dispatchArgs are a dispatch's River args.
type dispatchArgs struct {
	JobID   int64  `json:"job_id"`
	JobKind string `json:"kind"`
}

func (dispatchArgs) Kind() string { return DispatchKind }

// dispatchMaxAttempts bounds River's retries of one dispatch: they cover
// infrastructure failures only (the database unreachable while claiming,
// say); docket's own attempts are the job's.
const dispatchMaxAttempts = 25

// shortWait is the longest a dispatch waits in the worker for its job to
// fall due. A longer wait is River's: the dispatch is scheduled (or snoozed),
// and River's scheduler makes it available, within about 5 s of the instant.
const shortWait = time.Second

// dispatchParams is the River insert of j's dispatch: River queue = j's
// queue, River priority = j's priority, due at j.AvailableAt, or at once when
// that is less than shortWait away (the worker waits out the rest). River
// keeps time by the wall clock and docket by clock, so the instant is
// carried across as an offset from clock's now.
func dispatchParams(j jobs.Job, clock db.Clock) river.InsertManyParams {
	opts := &river.InsertOpts{Queue: j.Queue, Priority: j.Priority, MaxAttempts: dispatchMaxAttempts}
	if wait := j.AvailableAt.Sub(clock.Now()); wait > shortWait {
		opts.ScheduledAt = time.Now().Add(wait)
	}
	return river.InsertManyParams{Args: dispatchArgs{JobID: j.ID, JobKind: j.Kind}, InsertOpts: opts}
}

// dispatchTx inserts, on tx, a dispatch for each job of js that is queued and
// not for external executors.
func dispatchTx(ctx context.Context, rc *river.Client[pgx.Tx], tx pgx.Tx, clock db.Clock, js ...jobs.Job) error {
	params := make([]river.InsertManyParams, 0, len(js))
	for _, j := range js {
		if j.State == jobs.Queued && !j.External {
			params = append(params, dispatchParams(j, clock))
		}
	}
	if len(params) == 0 {
		return nil
	}
	_, err := rc.InsertManyFastTx(ctx, tx, params)
	return err
}
