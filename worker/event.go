package worker

import (
	"errors"
	"time"
)

// EventType says what an [Event] reports.
type EventType string

// The events a [Client] reports to [Config.OnEvent].
const (
	// EventStarted: a handler started an attempt.
	EventStarted EventType = "started"
	// EventSucceeded: the attempt succeeded and the job is succeeded.
	EventSucceeded EventType = "succeeded"
	// EventFailed: the attempt failed and was recorded; Job.State says
	// where the job went (queued for a retry, failed, dead, uncertain).
	EventFailed EventType = "failed"
	// EventLeaseLost: the handler's lease was lost while it ran (the job was
	// cancelled, or taken over after an expiry): its context was cancelled
	// and its outcome, Err, was refused ([db.ErrStaleClaim]).
	EventLeaseLost EventType = "lease_lost"
	// EventReleased: the worker stopped while the handler ran; the lease
	// was given back, the attempt kept, and the job dispatched again.
	EventReleased EventType = "released"
	// EventRefused: the job's payload schema is not one this worker
	// decodes; the handler never ran and the job stays queued, listed in
	// docket.jobs_undecodable.
	EventRefused EventType = "refused"
	// EventSkipped: a dispatch found its job not claimable (finished,
	// cancelled, held by another lease, not visible to the worker's actor)
	// and was dropped without running anything.
	EventSkipped EventType = "skipped"
	// EventSnoozed: a dispatch found its job not yet due and waits.
	EventSnoozed EventType = "snoozed"
	// EventSweep: a sweep ran one batch; Count is how many items it moved.
	EventSweep EventType = "sweep"
	// EventError: something failed that the worker will retry (the database
	// unreachable, say); Err says what.
	EventError EventType = "error"
)

// Event is one thing a [Client] did, for metrics and tests. Fields that do
// not apply are zero.
type Event struct {
	Type     EventType
	JobID    int64
	Kind     string
	Attempt  int
	Revision string        // the handler's [HandlerOptions.Revision]
	State    string        // the job's state after the event
	Sweep    string        // for EventSweep: the sweep's name
	Count    int           // for EventSweep: items moved
	Duration time.Duration // for outcomes: how long the handler ran
	Err      error
}

var (
	errStopped    = errors.New("worker: stopped")
	errBatchShape = errors.New("worker: a batch answered a different number of results than it was given")
)
