package worker

import "time"

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
	// was given back and the attempt kept: the job is queued again.
	EventReleased EventType = "released"
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
