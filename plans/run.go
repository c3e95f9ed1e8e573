package plans

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/budgets"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/plans"
	"github.com/docket-dev/docket/internal/newclient"
	"github.com/docket-dev/docket/internal/replica"
	"github.com/docket-dev/docket/jobs"
)

var queries = dbsqlc.New()

// Status is where a run is (docket.run_states).
type Status string

const (
	Running     Status = "running"
	Exhausted   Status = "exhausted" // a ceiling was reached: see package budgets
	Unwinding   Status = "unwinding"
	Succeeded   Status = "succeeded"
	Compensated Status = "compensated"
	Failed      Status = "failed"
)

// StepState is where an admitted step is (docket.run_step_states).
type StepState string

const (
	StepAdmitted           StepState = "admitted"
	StepRefused            StepState = "refused"
	StepSucceeded          StepState = "succeeded"
	StepFailed             StepState = "failed"
	StepUncertain          StepState = "uncertain"
	StepCancelled          StepState = "cancelled"
	StepCompensating       StepState = "compensating"
	StepCompensated        StepState = "compensated"
	StepCompensationFailed StepState = "compensation_failed"
	// StepWaiting: a waiting step (see [Wait]) registered what it waits on;
	// it holds no job, no worker and no lease.
	StepWaiting StepState = "waiting"
)

// MaxInput is the most a run's input may be, in characters of JSON.
const MaxInput = 65536

// MaxReplans bounds a run's replan limit.
const MaxReplans = 100

// Config configures a [Client].
type Config struct {
	// Actor is who the client acts as: it needs plan.run and job.create on
	// the project to start runs. Required.
	Actor access.Actor
	// Clock gives the instants the client passes to the database. Defaults
	// to [db.SystemClock].
	Clock db.Clock
	// Limits bound the plans it starts; zero fields take [DefaultLimits].
	Limits Limits
	// Known, when set, says which job kinds the deployment knows; a plan
	// naming another is refused before it is stored.
	Known func(kind string) bool
	// Replica, when not nil, is a pool on a hot standby of the client's
	// database, read-only: the reads that tolerate lag go there (Get, List,
	// Steps, Waits, Versions), and [Client.ReplicaLag] says how far behind
	// it is. Every write, and the run a write returns, stay on the pool.
	// Nil: every read goes to the pool. See docs/cells.md.
	Replica db.Pool
}

// Client starts, replans, cancels and reads runs, as one actor. It is safe
// for concurrent use.
type Client struct {
	pool   db.Pool
	reads  replica.Reads // the reads that tolerate lag
	actor  access.Actor
	clock  db.Clock
	limits Limits
	known  func(string) bool
}

// NewClient returns a client on pool. It refuses, with
// [db.ErrInvalidArgument], a nil pool or a malformed actor.
func NewClient(pool db.Pool, cfg Config) (*Client, error) {
	clock, err := newclient.Check("plans.new_client", pool, cfg.Actor.Validate, cfg.Clock)
	if err != nil {
		return nil, err
	}
	return &Client{pool: pool, reads: replica.New(pool, cfg.Replica), actor: cfg.Actor, clock: clock, limits: cfg.Limits, known: cfg.Known}, nil
}

// ReplicaLag says how far behind the primary the client's reads that
// tolerate lag may be (see [Config.Replica]): asked before such a read, it
// bounds it. Without a replica it reports the primary, without asking.
func (c *Client) ReplicaLag(ctx context.Context) (db.Lag, error) {
	return c.reads.Lag(ctx, c.clock, "plan.replica_lag")
}

// Start is what [Client.Start] starts a run with.
type Start struct {
	Project string
	Plan    Plan
	// Input is the run's input, JSON up to [MaxInput] characters; {} when
	// empty. InputTrusted is its trust label: the caller's to give.
	Input        json.RawMessage
	InputTrusted bool
	// CaseID binds the run to an open case of the project (0: none).
	CaseID int64
	// ReplanLimit is how many times the run may be replanned: 0 ..
	// [MaxReplans].
	ReplanLimit int
	// Budget is the run's ceilings (the zero value: none); a money ceiling
	// reserves the run's worst case in the project's quota at start. See
	// package budgets.
	Budget budgets.Budget
}

// Run is a run as stored, with the digest of the plan it runs now.
type Run struct {
	ID           int64
	Project      string
	Digest       string
	Version      int
	CaseID       int64
	Input        json.RawMessage
	InputTrusted bool
	Status       Status
	// Suspended: the run is running, with steps waiting (see [Wait]) and
	// none running; [Client.Waits] says on what.
	Suspended     bool
	ReplanLimit   int
	UntrustedRead string // the first untrusted value a step was admitted with
	Output        json.RawMessage
	Failure       string // why it unwound
	// Budget is its ceilings; Spent what its steps reported; Exhausted why
	// it is exhausted ("" while it is not).
	Budget    budgets.Budget
	Spent     budgets.Spent
	Exhausted string
	// Refusals is how many of its steps the policy refused; Elapsed the
	// time between the earliest and latest instants it read at its step
	// boundaries (only under a wall-clock ceiling).
	Refusals   int
	Elapsed    time.Duration
	CreatedBy  access.Actor
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

// Start validates s.Plan, stores it (once: content-addressed) and starts a
// run of it, in its own transaction. See [Client.StartTx].
func (c *Client) Start(ctx context.Context, s Start) (Run, error) {
	return c.start(ctx, c.pool, s)
}

// StartTx validates s.Plan, stores it and starts a run of it in tx: its
// first steps (those after no other) are admitted, and their jobs
// enqueued, in ascending id. All of it commits with tx, or rolls back with
// it.
//
// It refuses, writing nothing: a plan that does not validate (a
// [*Invalid] naming every problem, which is [db.ErrInvalidArgument]), an
// oversized input or a replan limit out of range ([db.ErrInvalidArgument]);
// an actor without plan.run and job.create on the project
// ([db.ErrNotPermitted]); a case not of the project ([db.ErrNotFound]) or
// closed ([db.ErrCaseClosed]).
func (c *Client) StartTx(ctx context.Context, tx pgx.Tx, s Start) (Run, error) {
	return c.start(ctx, tx, s)
}

func (c *Client) start(ctx context.Context, q db.DBTX, s Start) (Run, error) {
	const op = "plan.start"
	if err := Check(s.Plan, c.known, c.limits); err != nil {
		return Run{}, err
	}
	input := s.Input
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	if len(input) > 4*MaxInput || !json.Valid(input) {
		return Run{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid run input: JSON of at most %d characters", MaxInput))
	}
	if s.ReplanLimit < 0 || s.ReplanLimit > MaxReplans {
		return Run{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid replan limit %d: want 0..%d", s.ReplanLimit, MaxReplans))
	}
	if err := s.Budget.Validate(); err != nil {
		return Run{}, err
	}
	canonical := Canonical(s.Plan)
	digest := digestOf(canonical)
	// The start returns the run as RunGet reads it, in the same statement:
	// no second round trip.
	if s.Budget.Zero() {
		r, err := queries.RunStart(ctx, q, dbsqlc.RunStartParams{
			Project: s.Project, Digest: digest, Canonical: string(canonical), Input: input, InputTrusted: s.InputTrusted,
			CaseID: s.CaseID, ReplanLimit: int32(s.ReplanLimit), Actor: string(c.actor), Now: c.clock.Now(),
		})
		if err != nil {
			return Run{}, db.Translate(err, op, "project", s.Project)
		}
		return fromRow((*dbsqlc.RunGetRow)(r)), nil
	}
	steps, effects, money, currency, call, parallel := s.Budget.Args()
	duration, refusals := s.Budget.Extra()
	r, err := queries.RunStartBudgeted(ctx, q, dbsqlc.RunStartBudgetedParams{
		Project: s.Project, Digest: digest, Canonical: string(canonical), Input: input, InputTrusted: s.InputTrusted,
		CaseID: s.CaseID, ReplanLimit: int32(s.ReplanLimit), MaxSteps: steps, MaxEffects: effects, MaxMoney: money,
		Currency: currency, MaxCall: call, MaxParallel: parallel, MaxDuration: duration, MaxRefusals: refusals,
		Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Run{}, db.Translate(err, op, "project", s.Project)
	}
	return fromRow((*dbsqlc.RunGetRow)(r)), nil
}

// Replan replaces the plan run id runs, in its own transaction. See
// [Client.ReplanTx].
func (c *Client) Replan(ctx context.Context, id int64, predecessor string, successor Plan, reason string) (Run, error) {
	return c.replan(ctx, c.pool, id, predecessor, successor, reason)
}

// ReplanTx replaces, in tx, the plan run id runs with successor, which
// names the plan it replaces (predecessor: its digest) and why (reason),
// and admits what the successor makes ready. Both versions stay on record.
// It commits with tx, or rolls back with it.
//
// It refuses, writing nothing, with [db.ErrInvalidArgument] naming the
// cause: no reason; a predecessor that is not the plan the run runs now; a
// run past its replan limit; a run that has admitted an untrusted value
// (naming its source); a completed step the successor carries over
// changed, or a started step whose kind it changed, measured against what
// the step was admitted as under any earlier version (naming the step and
// both kinds); a
// successor that does not validate (a [*Invalid]). A run that is not
// running is [db.ErrTerminal]; one the actor may not replan,
// [db.ErrNotFound].
func (c *Client) ReplanTx(ctx context.Context, tx pgx.Tx, id int64, predecessor string, successor Plan, reason string) (Run, error) {
	return c.replan(ctx, tx, id, predecessor, successor, reason)
}

func (c *Client) replan(ctx context.Context, q db.DBTX, id int64, predecessor string, successor Plan, reason string) (Run, error) {
	const op = "plan.replan"
	if err := Check(successor, c.known, c.limits); err != nil {
		return Run{}, err
	}
	canonical := Canonical(successor)
	r, err := queries.RunReplan(ctx, q, dbsqlc.RunReplanParams{
		ID: id, Predecessor: predecessor, Digest: digestOf(canonical), Canonical: string(canonical),
		Reason: reason, Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Run{}, db.Translate(err, op, "run", id)
	}
	return c.get(ctx, q, r.ID)
}

// Cancel cancels run id: the steps not started are cancelled, and the run
// unwinds once those running have finished. Cancelling a run that is not
// running is a no-op that returns it. A run the actor may not cancel is
// [db.ErrNotFound].
func (c *Client) Cancel(ctx context.Context, id int64, reason string) (Run, error) {
	r, err := queries.RunCancel(ctx, c.pool, id, reason, string(c.actor), c.clock.Now())
	if err != nil {
		return Run{}, db.Translate(err, "plan.cancel", "run", id)
	}
	return c.get(ctx, c.pool, r.ID)
}

// Get returns run id, or [db.ErrNotFound] when there is none or the actor
// holds none of plan.run, case.admit and case.view on its project.
func (c *Client) Get(ctx context.Context, id int64) (Run, error) {
	return c.get(ctx, c.reads.DB, id)
}

func (c *Client) get(ctx context.Context, q db.DBTX, id int64) (Run, error) {
	r, err := queries.RunGet(ctx, q, id, string(c.actor))
	if err != nil {
		return Run{}, db.TranslateRead(err, "plan.get", "run", id, string(c.actor))
	}
	return fromRow(r), nil
}

// fromRow is the run r, as read.
func fromRow(r *dbsqlc.RunGetRow) Run {
	out := Run{
		ID: r.ID, Project: r.Project, Digest: r.Digest, Version: int(r.Version), Input: r.Input, InputTrusted: r.InputTrusted,
		Status: Status(r.Status), Suspended: r.Suspended, ReplanLimit: int(r.ReplanLimit), Output: r.Output, CreatedBy: access.Actor(r.CreatedBy),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), FinishedAt: r.FinishedAt,
	}
	if r.CaseID != nil {
		out.CaseID = *r.CaseID
	}
	if r.UntrustedRead != nil {
		out.UntrustedRead = *r.UntrustedRead
	}
	if r.Failure != nil {
		out.Failure = *r.Failure
	}
	if r.Exhausted != nil {
		out.Exhausted = *r.Exhausted
	}
	out.Budget = budgets.FromRow(r.MaxSteps, r.MaxEffects, r.MaxMoney, r.Currency, r.MaxCall, r.MaxParallel)
	if r.MaxDuration != nil {
		out.Budget.MaxDuration = *r.MaxDuration
	}
	if r.MaxRefusals != nil {
		out.Budget.MaxRefusals = int(*r.MaxRefusals)
	}
	out.Spent = budgets.Spent{Effects: r.SpentEffects, Money: r.SpentMoney}
	out.Refusals = int(r.Refusals)
	if r.ClockFirst != nil && r.ClockLast != nil {
		out.Elapsed = r.ClockLast.Sub(*r.ClockFirst)
	}
	return out
}

// RunStep is a step a run admitted.
type RunStep struct {
	RunID    int64
	StepID   string
	Version  int // the plan version it was admitted under
	Kind     string
	State    StepState
	ReadySeq int // its place in ready order: the run's recorded order
	Args     json.RawMessage
	Trusted  bool // its arguments' trust label
	JobID    int64
	Result   json.RawMessage
	// ResultTrusted is its result's trust label: false when its arguments
	// were untrusted or it labelled its result untrusted ([LabelUntrusted]),
	// and while it has no result.
	ResultTrusted bool
	// Compensation is the kind that undoes it; CompensationJobID its job
	// once the unwind reached it.
	Compensation      string
	CompensationJobID int64
	Reason            string
	// Wait is what a waiting step waits on ("" for a job's step): its
	// result is the answer.
	Wait       WaitType
	AdmittedAt time.Time
	UpdatedAt  time.Time
}

// Steps returns the steps run id admitted, in ready order; none when the
// actor may not read it (see [Client.Get]).
func (c *Client) Steps(ctx context.Context, id int64) ([]RunStep, error) {
	rows, err := queries.RunSteps(ctx, c.reads.DB, id, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "plan.steps", "run", id)
	}
	out := make([]RunStep, len(rows))
	for i, r := range rows {
		out[i] = RunStep{RunID: r.RunID, StepID: r.StepID, Version: int(r.Version), Kind: r.Kind, State: StepState(r.State),
			ReadySeq: int(r.ReadySeq), Args: r.Args, Trusted: r.Trusted, Result: r.Result, AdmittedAt: r.AdmittedAt.UTC(),
			UpdatedAt: r.UpdatedAt.UTC()}
		if r.JobID != nil {
			out[i].JobID = *r.JobID
		}
		out[i].ResultTrusted = r.Result != nil && r.Trusted && (!r.ResultTrusted.Valid || r.ResultTrusted.Bool)
		if r.Compensation != nil {
			out[i].Compensation = *r.Compensation
		}
		if r.CompensationJobID != nil {
			out[i].CompensationJobID = *r.CompensationJobID
		}
		if r.Reason != nil {
			out[i].Reason = *r.Reason
		}
		if r.Wait != nil {
			out[i].Wait = WaitType(*r.Wait)
		}
	}
	return out, nil
}

// StepWait is what a waiting step of a running run waits on: a timer (its
// instant), a wait for a message (its keys and deadline) or a task (its
// deadline and status).
type StepWait struct {
	RunID  int64
	StepID string
	Type   WaitType
	// Suspended: the run has no step running, only waiting ones.
	Suspended  bool
	TimerID    int64
	WakeAt     time.Time
	WaitID     int64
	Keys       []string
	Deadline   time.Time
	TaskID     int64
	TaskStatus string
	AdmittedAt time.Time
}

// Waits returns what the waiting steps of run id wait on, by step id; none
// when the run waits on nothing, has ended, or the actor may not read it.
func (c *Client) Waits(ctx context.Context, id int64) ([]StepWait, error) {
	rows, err := queries.RunWaits(ctx, c.reads.DB, id, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "plan.waits", "run", id)
	}
	out := make([]StepWait, len(rows))
	for i, r := range rows {
		w := StepWait{RunID: r.RunID, StepID: r.StepID, Suspended: r.Suspended, Keys: r.Keys, AdmittedAt: r.AdmittedAt.UTC()}
		if r.Wait != nil {
			w.Type = WaitType(*r.Wait)
		}
		if r.TimerID != nil {
			w.TimerID, w.WakeAt = *r.TimerID, r.WakeAt.UTC()
		}
		if r.WaitID != nil {
			w.WaitID, w.Deadline = *r.WaitID, r.Deadline.UTC()
		}
		if r.TaskID != nil {
			w.TaskID, w.Deadline, w.TaskStatus = *r.TaskID, r.TaskDeadline.UTC(), *r.TaskStatus
		}
		out[i] = w
	}
	return out, nil
}

// Version is one version of the plan a run ran.
type Version struct {
	Version     int
	Digest      string
	Plan        Plan
	Predecessor string // the digest it replaced; "" for the first
	Reason      string
	Actor       access.Actor
	At          time.Time
}

// Versions returns every version of run id's plan, oldest first; none when
// the actor may not read it.
func (c *Client) Versions(ctx context.Context, id int64) ([]Version, error) {
	rows, err := queries.RunVersions(ctx, c.reads.DB, id, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "plan.versions", "run", id)
	}
	out := make([]Version, len(rows))
	for i, r := range rows {
		out[i] = Version{Version: int(r.Version), Digest: r.Digest, Predecessor: r.Predecessor, Reason: r.Reason,
			Actor: access.Actor(r.Actor), At: r.At.UTC()}
		if err := json.Unmarshal([]byte(r.Canonical), &out[i].Plan); err != nil {
			return nil, fmt.Errorf("plan.versions: run %d version %d: %w", id, r.Version, err)
		}
	}
	return out, nil
}

// StepOf says which run and step job j is, when it is a step's job (or a
// compensation's): ok false for any other job.
func StepOf(j jobs.Job) (run int64, step string, compensation bool, ok bool) {
	var p struct {
		RunID       int64  `json:"run_id"`
		Step        string `json:"step"`
		Compensates string `json:"compensates"`
	}
	if len(j.Params) == 0 || json.Unmarshal(j.Params, &p) != nil || p.RunID == 0 {
		return 0, "", false, false
	}
	return p.RunID, p.Step, p.Compensates != "", true
}
