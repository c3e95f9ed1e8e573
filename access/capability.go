package access

import (
	"fmt"
	"regexp"

	"github.com/docket-dev/docket/db"
)

// Capability names one thing an actor may do in a project. The known ones are
// listed in docket.capabilities; granting any other is refused.
type Capability string

// The capabilities docket's packages check.
const (
	JobCreate Capability = "job.create" // enqueue jobs in the project
	JobClaim  Capability = "job.claim"  // claim and run the project's jobs
	JobCancel Capability = "job.cancel" // cancel the project's jobs
	// JobReconcile settles the project's uncertain jobs.
	JobReconcile Capability = "job.reconcile"
	// JobPin pins the project's queued jobs to the handler revisions they
	// may run under (jobs.Client.Pin).
	JobPin Capability = "job.pin"
	// JobView reads the project's jobs and their history, and changes
	// nothing: every other job capability reads them too.
	JobView Capability = "job.view"
	// JobRetry enqueues a finished job of the project again, as a new job
	// that names it (jobs.Client.Retry, RetryMatching).
	JobRetry Capability = "job.retry"
	// QueuePause pauses and resumes the project's queues
	// (jobs.Client.PauseQueue); it reads them too.
	QueuePause Capability = "queue.pause"
	// QueueView reads the project's queues, whether they are paused, and
	// their history (job.view reads them too).
	QueueView Capability = "queue.view"
	LaneView  Capability = "lane.view" // list and read every lane of the project
	// CaseAdmit admits, correlates, writes, closes and reopens the project's
	// cases and settles their obligations; it reads them too.
	CaseAdmit Capability = "case.admit"
	// CaseView reads the project's cases, keys, obligations and history.
	CaseView Capability = "case.view"
	// CaseSweep lets the deadline sweeps move the project's due obligations
	// and waits and dead-letter its unclaimed messages (enqueuing their jobs
	// also needs [JobCreate]).
	CaseSweep Capability = "case.sweep"
	// MessageDeliver delivers inbound messages to the project's waits (with
	// [JobCreate], since a delivery may enqueue a continuation) and reads
	// its messages.
	MessageDeliver Capability = "message.deliver"
	TaskReview     Capability = "task.review" // claim and answer the project's human tasks
	// ScheduleManage creates (with [JobCreate]), changes, pauses, resumes and
	// finishes the project's schedules; it reads them too.
	ScheduleManage Capability = "schedule.manage"
	// ScheduleView reads the project's schedules, their runs and history.
	ScheduleView Capability = "schedule.view"
	// ScheduleSweep lets the schedule sweep materialize the project's due
	// occurrences (enqueuing their jobs also needs [JobCreate]).
	ScheduleSweep Capability = "schedule.sweep"

	// RetentionManage sets how long the project's finished work is kept,
	// and reads it.
	RetentionManage Capability = "retention.manage"
	// RetentionPrune lets the prune sweep remove the project's finished work
	// past its retention horizons.
	RetentionPrune Capability = "retention.prune"

	// BudgetManage sets the project's spend quotas, raises the ceilings of
	// its runs (with [PlanRun]) and resumes its exhausted jobs, raising
	// theirs.
	BudgetManage Capability = "budget.manage"
	// BatchRun opens and resumes batches in the project and admits their
	// items (with [PlanRun] and [JobCreate]), and reads them.
	BatchRun Capability = "batch.run"
	// PlanRun starts, replans and cancels runs of plans in the project
	// (starting also needs [JobCreate]), and reads them.
	PlanRun Capability = "plan.run"

	// QuorumCreate creates quorums in the project, naming their conductor.
	QuorumCreate Capability = "quorum.create"

	// GrantManage gives and revokes grants on the project, to anyone but
	// its holder: a project's administrator. The owner and docket_operator
	// members manage grants without it.
	GrantManage Capability = "grant.manage"
)

var capabilityPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*){1,3}$`)

// Validate refuses a malformed capability name with [db.ErrInvalidArgument]:
// two to four dot-separated segments of [a-z0-9_] each starting with a letter,
// at most 64 characters. It does not check that the capability is known; the
// database does.
func (c Capability) Validate() error {
	if len(c) > 64 || !capabilityPattern.MatchString(string(c)) {
		return db.Refuse(db.ErrInvalidArgument, "capability.validate",
			fmt.Sprintf("invalid capability %q: want dot-separated lowercase segments, e.g. job.create", string(c)))
	}
	return nil
}

func (c Capability) String() string { return string(c) }
