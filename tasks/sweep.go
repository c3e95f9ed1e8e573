package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// SweepExpiry is the expiry sweep's name, for worker.Client.Sweep.
const SweepExpiry = "tasks.expiry"

// ExpirySweep returns the expiry sweep, for worker.Config.Sweeps: each run
// applies the declared policy of up to the run's limit of tasks whose
// deadline has passed and whose policy has not fired, soonest first: an
// escalating task is escalated, a deciding one decided automatically. It
// acts as the worker's actor, in the projects where that actor holds
// case.sweep and job.create. It is a range scan of the partial index of
// pending tasks by deadline; tasks another transaction holds (a decision
// being made) are skipped, so the decision wins and sweeps in several
// processes apply each policy once. every is its period (zero:
// worker.Config.SweepEvery).
func ExpirySweep(every time.Duration) worker.Sweep {
	return worker.Sweep{Name: SweepExpiry, Every: every, Func: func(ctx context.Context, run *worker.SweepRun) (int, error) {
		rows, err := queries.TaskExpireDue(ctx, run.Tx, int32(run.Limit), string(run.Actor), run.Now)
		if err != nil {
			return 0, db.Translate(err, "task.expire")
		}
		return len(rows), nil
	}}
}

// Decision is the answer a task's continuation job runs with.
type Decision struct {
	TaskID   int64
	Key      string
	Decision string
	Note     string
	// DecidedBy answered it; for an automatic decision, the sweep's actor,
	// and SignedBy opened the task and so signed the policy.
	DecidedBy access.Actor
	Automatic bool
	SignedBy  access.Actor
	// At is when the decision was delivered.
	At time.Time
}

// DecisionOf reads the decision a task's continuation job j runs with. It
// refuses, with [db.ErrInvalidArgument], a job that is not a task's
// continuation.
func DecisionOf(j jobs.Job) (Decision, error) {
	w, err := cases.WakeOf(j)
	if err != nil {
		return Decision{}, err
	}
	if w.Reason != cases.WakeMessage || w.Message == nil || w.Message.Producer != "docket.task" {
		return Decision{}, db.Refuse(db.ErrInvalidArgument, "task.decision_of", fmt.Sprintf("job %d is not a task's continuation", j.ID), "job", j.ID)
	}
	var p struct {
		TaskID    int64   `json:"task_id"`
		Key       string  `json:"key"`
		Decision  string  `json:"decision"`
		Note      *string `json:"note"`
		DecidedBy string  `json:"decided_by"`
		Automatic bool    `json:"automatic"`
		SignedBy  *string `json:"signed_by"`
	}
	if err := json.Unmarshal(w.Message.Payload, &p); err != nil {
		return Decision{}, db.Refuse(db.ErrInvalidArgument, "task.decision_of", fmt.Sprintf("job %d: %v", j.ID, err), "job", j.ID)
	}
	return Decision{TaskID: p.TaskID, Key: p.Key, Decision: p.Decision, Note: deref(p.Note), DecidedBy: access.Actor(p.DecidedBy),
		Automatic: p.Automatic, SignedBy: access.Actor(deref(p.SignedBy)), At: w.Message.ArrivedAt}, nil
}
