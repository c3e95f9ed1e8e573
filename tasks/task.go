package tasks

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/tasks"
	"github.com/docket-dev/docket/internal/newclient"
)

var queries = dbsqlc.New()

// Status is where a task is in its machine (docket.task_states).
type Status string

const (
	// Pending waits for a decision; its expiry policy has not fired.
	Pending Status = "pending"
	// Escalated passed its deadline and was escalated: queued again to a
	// wider audience, owed nothing further by the sweep.
	Escalated Status = "escalated"
	// Decided was answered, by a reviewer or automatically.
	Decided Status = "decided"
	// Withdrawn's case closed before anybody answered.
	Withdrawn Status = "withdrawn"
)

// Bounds of what a task carries.
const (
	MaxTitle      = 200
	MaxSummary    = 4000
	MaxJSON       = 16384 // proposal and evidence, each, in characters of JSON
	MaxDecisions  = 16
	MaxPrincipals = 64 // audience, acting-for, escalation, each
	MaxCaps       = 16
	MaxNote       = 2000
	MaxAhead      = 3650 * 24 * time.Hour // how far ahead a deadline may be
	// MinClaim and MaxClaim bound a claim's lease; DefaultClaim is used
	// when none is given.
	MinClaim     = time.Minute
	MaxClaim     = 24 * time.Hour
	DefaultClaim = 30 * time.Minute
	// MinEscalation and MaxEscalation bound the deadline an escalation sets.
	MinEscalation = time.Minute
	MaxEscalation = 366 * 24 * time.Hour
)

// Expiry is what a task's deadline does, declared when it is opened: build
// one with [Escalate] or [DecideAutomatically].
type Expiry struct {
	escalateTo   []access.Actor
	escalateCaps []access.Capability
	escalateFor  time.Duration
	decision     string
}

// Escalate is the policy that, at the deadline, releases any claim, adds to
// the audience the principals to and the holders of caps on the project,
// and sets a new deadline after later (for the backlog; the sweep owes an
// escalated task nothing further).
func Escalate(to []access.Actor, caps []access.Capability, after time.Duration) Expiry {
	return Expiry{escalateTo: to, escalateCaps: caps, escalateFor: after}
}

// DecideAutomatically is the policy that, at the deadline, decides decision,
// signed by whoever opened the task: "nobody answered, so we did it" exists
// only where it was written down in advance.
func DecideAutomatically(decision string) Expiry { return Expiry{decision: decision} }

// Automatic reports the decision a [DecideAutomatically] policy takes.
func (e Expiry) Automatic() (string, bool) { return e.decision, e.decision != "" }

// EscalatesTo reports who an [Escalate] policy adds, and how long after the
// deadline the escalated task is due.
func (e Expiry) EscalatesTo() ([]access.Actor, []access.Capability, time.Duration) {
	return e.escalateTo, e.escalateCaps, e.escalateFor
}

// Spec is what [Client.Open] opens.
type Spec struct {
	// Key names the opening: a retried opening with the same key returns
	// the same task. 1-255 characters, no control characters.
	Key string
	// Title and Summary say what is to be decided: 1-200 characters, and
	// up to 4000.
	Title, Summary string
	// Proposal is what the proposer wants done, and Evidence what a
	// reviewer needs to disagree: JSON up to [MaxJSON] characters each, or
	// references to larger documents. Default {}.
	Proposal, Evidence json.RawMessage
	// Decisions are the answers the task admits: 1..16 names of
	// [a-z0-9._-], e.g. approve, reject.
	Decisions []string
	// Audience may take the task: these principals, and the holders of
	// AudienceCapabilities on the project. Not both empty.
	Audience             []access.Actor
	AudienceCapabilities []access.Capability
	// Proposer proposed what the task decides; it may not answer it.
	// Required.
	Proposer access.Actor
	// ActingFor names every principal in whose name the work runs (the
	// root of a delegation chain, the workload acting for them): none of
	// them may answer it either. The actor that admitted the case is
	// excluded without being named.
	ActingFor []access.Actor
	// Deadline is required: after now, at most [MaxAhead] ahead.
	Deadline time.Time
	// Expiry is what the deadline does. Required.
	Expiry Expiry
	// Continuation is the job the decision enqueues, in the case's
	// project, naming the case; [DecisionOf] reads the decision from it.
	Continuation cases.Continuation
}

// Claim is a reviewer's lease on a task.
type Claim struct {
	Holder access.Actor
	Token  uuid.UUID
	At     time.Time
	Until  time.Time
}

// Task is a human task as stored.
type Task struct {
	ID, CaseID int64
	// RunID and StepID are the run's step that opened it (see package
	// plans), when no case did: a task has exactly one owner.
	RunID              int64
	StepID             string
	Project, Key       string
	Title, Summary     string
	Proposal, Evidence json.RawMessage
	Decisions          []string
	Audience           []access.Actor
	AudienceCaps       []access.Capability
	Proposer           access.Actor
	ActingFor          []access.Actor
	// Excluded may neither claim nor answer: the proposer, the case's
	// admitter, and ActingFor.
	Excluded []access.Actor
	Deadline time.Time
	Expiry   Expiry
	WaitID   int64
	Status   Status
	// Claim is the current claim; nil when none is held.
	Claim *Claim
	// Decision, DecidedBy, Automatic and Note are set once decided.
	Decision    string
	DecidedBy   access.Actor
	Automatic   bool
	Note        string
	SettledAt   *time.Time
	OpenedBy    access.Actor
	OpenedAt    time.Time
	UpdatedAt   time.Time
	EscalatedAt *time.Time
}

// Pending reports whether the plane still waits on the task's decision
// (docket.task_is_pending): pending or escalated.
func (t Task) Pending() bool { return t.Status == Pending || t.Status == Escalated }

// Queued reports whether somebody of its audience may take it at now
// (docket.task_is_queued): pending and held by no live claim.
func (t Task) Queued(now time.Time) bool {
	return t.Pending() && (t.Claim == nil || !t.Claim.Until.After(now))
}

// AwaitsExpiry reports whether the sweep still owes it its expiry policy
// (docket.task_awaits_expiry).
func (t Task) AwaitsExpiry() bool { return t.Status == Pending }

// Config configures a [Client].
type Config struct {
	// Actor is who the client acts as. Required.
	Actor access.Actor
	// Clock gives the instants the client passes to the database. Defaults
	// to [db.SystemClock].
	Clock db.Clock
}

// Client opens, claims, releases, decides and reads tasks, as one actor. It
// is safe for concurrent use.
type Client struct {
	pool  db.Pool
	actor access.Actor
	clock db.Clock
}

// NewClient returns a client on pool. It refuses, with
// [db.ErrInvalidArgument], a nil pool or a malformed actor.
func NewClient(pool db.Pool, cfg Config) (*Client, error) {
	clock, err := newclient.Check("tasks.new_client", pool, cfg.Actor.Validate, cfg.Clock)
	if err != nil {
		return nil, err
	}
	return &Client{pool: pool, actor: cfg.Actor, clock: clock}, nil
}

// Actor returns who the client acts as.
func (c *Client) Actor() access.Actor { return c.actor }

func actors(s []string) []access.Actor {
	out := make([]access.Actor, len(s))
	for i, a := range s {
		out[i] = access.Actor(a)
	}
	return out
}

func strs[T ~string](s []T) []string {
	out := make([]string, len(s))
	for i, a := range s {
		out[i] = string(a)
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func fromRow(r *dbsqlc.DocketTask) Task {
	t := Task{
		ID: r.ID, CaseID: deref(r.CaseID), RunID: deref(r.RunID), StepID: deref(r.StepID), Project: r.Project, Key: r.Key,
		Title: r.Title, Summary: r.Summary, Proposal: r.Proposal, Evidence: r.Evidence, Decisions: r.Decisions,
		Audience: actors(r.Audience),
		Proposer: access.Actor(r.Proposer), ActingFor: actors(r.ActingFor), Excluded: actors(r.Excluded),
		Deadline: r.Deadline.UTC(), WaitID: r.WaitID, Status: Status(r.Status),
		Decision: deref(r.Decision), DecidedBy: access.Actor(deref(r.DecidedBy)), Automatic: r.Automatic,
		Note: deref(r.Note), SettledAt: r.SettledAt, OpenedBy: access.Actor(r.OpenedBy), OpenedAt: r.OpenedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC(), EscalatedAt: r.EscalatedAt,
	}
	for _, c := range r.AudienceCaps {
		t.AudienceCaps = append(t.AudienceCaps, access.Capability(c))
	}
	if r.OnExpiry == "decide" {
		t.Expiry = DecideAutomatically(deref(r.AutoDecision))
	} else {
		var caps []access.Capability
		for _, c := range r.EscalateCaps {
			caps = append(caps, access.Capability(c))
		}
		t.Expiry = Escalate(actors(r.EscalateTo), caps, deref(r.EscalateFor))
	}
	if r.ClaimedBy != nil {
		t.Claim = &Claim{Holder: access.Actor(*r.ClaimedBy), Token: r.ClaimToken.Bytes, At: deref(r.ClaimedAt).UTC(),
			Until: deref(r.ClaimExpiresAt).UTC()}
	}
	return t
}
