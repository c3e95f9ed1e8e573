package worker

import (
	"fmt"
	"strings"
	"time"
)

// StopError is what [Client.Stop] returns when the worker did not settle
// everything it held: outcomes it knew but could not record before its
// context ended (the database unreachable, say), and handlers still running
// after the release timeout. Its jobs stay claimed by the worker's leases
// until they expire; then the lease sweep of any worker moves each on, as
// after a crash: a repeatable job is queued again, any other becomes
// uncertain, for an operator to reconcile (docket job reconcile). Err is
// what ended the wait, the context's error; errors.Is sees through to it.
type StopError struct {
	// Abandoned are the outcomes the worker knew and did not record.
	Abandoned []Abandoned
	// Held is how many outcomes were still being tried when Stop returned
	// (the release timeout passed while they were).
	Held int
	// Running is how many handlers had not returned by the end of the
	// release timeout.
	Running int
	// Err is what ended the stop's wait: ctx's error, or River's.
	Err error
}

// Abandoned is an outcome a stopping worker could not record.
type Abandoned struct {
	Job        int64
	Kind       string
	Outcome    string    // "success", "failure", "release", ...
	Repeatable bool      // the job is queued again at lease expiry; otherwise it becomes uncertain
	LeaseUntil time.Time // when its lease expires (expired), by the worker's last renewal
}

func (e *StopError) Error() string {
	var b strings.Builder
	b.WriteString("worker: stopped with jobs still claimed")
	if n := len(e.Abandoned); n > 0 {
		var uncertain, requeued []string
		for _, a := range e.Abandoned {
			item := fmt.Sprintf("%d (%s)", a.Job, a.Outcome)
			if a.Repeatable {
				requeued = append(requeued, item)
			} else {
				uncertain = append(uncertain, item)
			}
		}
		fmt.Fprintf(&b, "; abandoned %d %s it could not record", n, plural(n, "outcome", "outcomes"))
		if len(uncertain) > 0 {
			fmt.Fprintf(&b, "; %s %s %s uncertain when the lease sweep finds %s expired (reconcile %s)",
				plural(len(uncertain), "job", "jobs"), strings.Join(uncertain, ", "), plural(len(uncertain), "becomes", "become"),
				plural(len(uncertain), "its lease", "their leases"), plural(len(uncertain), "it", "them"))
		}
		if len(requeued) > 0 {
			fmt.Fprintf(&b, "; repeatable %s %s %s queued again then", plural(len(requeued), "job", "jobs"), strings.Join(requeued, ", "),
				plural(len(requeued), "is", "are"))
		}
	}
	if e.Held > 0 {
		fmt.Fprintf(&b, "; %d %s still held, not recorded, when the release timeout passed", e.Held, plural(e.Held, "outcome", "outcomes"))
	}
	if e.Running > 0 {
		fmt.Fprintf(&b, "; %d %s still running after the release timeout", e.Running, plural(e.Running, "handler", "handlers"))
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *StopError) Unwrap() error { return e.Err }

// Jobs returns the ids of the abandoned outcomes' jobs.
func (e *StopError) Jobs() []int64 {
	ids := make([]int64, len(e.Abandoned))
	for i, a := range e.Abandoned {
		ids[i] = a.Job
	}
	return ids
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
