package cases

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases/calendar"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/cases"
)

// ObligationState is where an obligation stands. The legal moves are the rows
// of docket.obligation_transitions:
//
//	pending → met | breached | withdrawn
//
// Met, breached and withdrawn are terminal: re-applying the state an
// obligation holds is a no-op (a retry, not an edit), and any other change is
// refused, in the database, for every writer. Meeting a breached obligation
// records an [EventLateMeet] beside the breach and changes nothing.
type ObligationState string

// The obligation states.
const (
	Pending   ObligationState = "pending"   // owed
	Met       ObligationState = "met"       // answered in time
	Breached  ObligationState = "breached"  // its deadline passed unmet; its escalation was enqueued
	Withdrawn ObligationState = "withdrawn" // no longer owed
)

// ObligationStates lists every obligation state, in the order of the machine.
var ObligationStates = []ObligationState{Pending, Met, Breached, Withdrawn}

// Terminal reports whether s is a state an obligation never leaves.
func (s ObligationState) Terminal() bool { return s == Met || s == Breached || s == Withdrawn }

// Escalation is the job a breach enqueues: in the case's project, naming the
// case (jobs.Job.CaseID), under idempotency key "obligation:ID:breach", so
// it is enqueued once however often the breach is applied.
type Escalation struct {
	Kind  string // a job kind, e.g. billing.escalate. Required.
	Queue string // defaults to "default"
	// Payload is the job's payload. Defaults to {}.
	Payload json.RawMessage
	// PayloadSchema is the payload's schema version. Defaults to 1.
	PayloadSchema int
	// MaxAttempts bounds the job's attempts: 1..100. Defaults to 5.
	MaxAttempts int
}

// Obligation is something a case owes by a deadline. Name, due instant,
// rule, calendar digest and escalation never change.
type Obligation struct {
	ID      int64
	CaseID  int64
	Project string
	Name    string
	Due     time.Time
	State   ObligationState
	// Rule is the calendar spec Due was resolved from and CalendarDigest the
	// digest of the calendar that resolved it; empty when Due was given as
	// an instant. Due is never recomputed.
	Rule           string
	CalendarDigest string
	// Escalation is the job a breach enqueues; nil for none.
	Escalation *Escalation
	// EscalationJobID is the job the breach enqueued; 0 until then.
	EscalationJobID int64
	CreatedBy       access.Actor
	CreatedAt       time.Time
	ResolvedAt      time.Time // zero while pending
	ResolvedBy      access.Actor
}

// ObligationSpec describes an obligation to register with
// [Client.RegisterObligation].
type ObligationSpec struct {
	// Name says what is owed, unique among the case's pending obligations:
	// 1-63 characters of [a-z0-9._-], starting with a letter or digit.
	Name string
	// Due is the instant the obligation is breached if still pending.
	// Required.
	Due time.Time
	// Escalation is the job a breach enqueues; nil for none.
	Escalation *Escalation
}

// Deadline is a due instant to resolve through a calendar: Spec counted from
// From, e.g. "5 working days, 17:00".
type Deadline struct {
	Calendar calendar.Calendar
	From     time.Time
	Spec     string
}

// MaxRule bounds a deadline spec stored with its obligation.
const MaxRule = 500

// RegisterObligation registers obligation spec on case caseID, in its own
// transaction. See [Client.RegisterObligationTx].
func (c *Client) RegisterObligation(ctx context.Context, caseID int64, spec ObligationSpec) (Obligation, error) {
	return c.registerObligation(ctx, c.pool, caseID, spec)
}

// RegisterObligationTx registers obligation spec on case caseID in tx and
// returns it pending. Registering again what is already pending under that
// name, on the same terms, is a no-op that returns it. It decides under the
// case row's lock, as [Client.CloseTx] does, so it never gives a closed
// case a duty.
//
// It refuses, writing nothing: a malformed name, a zero due instant, a
// malformed escalation ([db.ErrInvalidArgument]); an unknown case or one the
// actor may not write ([db.ErrNotFound]); a closed case
// ([db.ErrCaseClosed]); a pending obligation of that name on other terms
// ([db.ErrAlreadyExists]).
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) RegisterObligationTx(ctx context.Context, tx pgx.Tx, caseID int64, spec ObligationSpec) (Obligation, error) {
	return c.registerObligation(ctx, tx, caseID, spec)
}

// registerObligation is [Client.RegisterObligationTx] on q: the client's pool or the caller's transaction.
func (c *Client) registerObligation(ctx context.Context, q db.DBTX, caseID int64, spec ObligationSpec) (Obligation, error) {
	return c.register(ctx, q, caseID, spec, "", "")
}

// RegisterFromSpec registers obligation name on case caseID, due at the
// instant d.Calendar resolves d.Spec to from d.From, in its own transaction.
// See [Client.RegisterFromSpecTx].
func (c *Client) RegisterFromSpec(ctx context.Context, caseID int64, name string, d Deadline, esc *Escalation) (Obligation, error) {
	return c.registerFromSpec(ctx, c.pool, caseID, name, d, esc)
}

// RegisterFromSpecTx registers obligation name on case caseID in tx, due at
// the instant d.Calendar resolves d.Spec to from d.From. It stores the
// instant with the spec and the calendar's digest, and never recomputes it:
// a corrected calendar does not move an obligation already registered, and
// the digest says which rules produced it. A spec the calendar cannot
// resolve exactly is refused with [db.ErrInvalidArgument] (wrapping the
// calendar's error), as is a nil calendar or a spec over [MaxRule]
// characters; otherwise it refuses as [Client.RegisterObligationTx].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) RegisterFromSpecTx(ctx context.Context, tx pgx.Tx, caseID int64, name string, d Deadline, esc *Escalation) (Obligation, error) {
	return c.registerFromSpec(ctx, tx, caseID, name, d, esc)
}

// registerFromSpec is [Client.RegisterFromSpecTx] on q: the client's pool or the caller's transaction.
func (c *Client) registerFromSpec(ctx context.Context, q db.DBTX, caseID int64, name string, d Deadline, esc *Escalation) (Obligation, error) {
	const op = "obligation.register"
	if db.IsNil(d.Calendar) {
		return Obligation{}, db.Refuse(db.ErrInvalidArgument, op, "no calendar to resolve the deadline", "case", caseID)
	}
	if d.Spec == "" || len([]rune(d.Spec)) > MaxRule {
		return Obligation{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("deadline spec must be 1..%d characters", MaxRule), "case", caseID)
	}
	due, err := d.Calendar.Resolve(d.From, d.Spec)
	if err != nil {
		return Obligation{}, &db.Error{Op: op, IDs: []any{"case", caseID}, Sentinel: db.ErrInvalidArgument,
			Message: fmt.Sprintf("the calendar cannot resolve %q: %v", d.Spec, err), Err: err}
	}
	return c.register(ctx, q, caseID, ObligationSpec{Name: name, Due: due, Escalation: esc}, d.Spec, d.Calendar.Digest())
}

func (c *Client) register(ctx context.Context, q db.DBTX, caseID int64, spec ObligationSpec, rule, digest string) (Obligation, error) {
	const op = "obligation.register"
	if spec.Due.IsZero() {
		return Obligation{}, db.Refuse(db.ErrInvalidArgument, op, "due instant is zero", "case", caseID)
	}
	p := dbsqlc.ObligationRegisterParams{
		CaseID: caseID, Name: spec.Name, DueAt: spec.Due, Actor: string(c.actor), Now: c.clock.Now(),
	}
	if rule != "" {
		p.Rule, p.CalendarDigest = &rule, &digest
	}
	if spec.Escalation != nil {
		e := Continuation(*spec.Escalation).resolved()
		schema, attempts := int32(e.PayloadSchema), int32(e.MaxAttempts)
		p.EscalationKind, p.EscalationQueue, p.EscalationPayload = &e.Kind, &e.Queue, e.Payload
		p.EscalationPayloadSchema, p.EscalationMaxAttempts = &schema, &attempts
	}
	row, err := queries.ObligationRegister(ctx, q, p)
	if err != nil {
		return Obligation{}, db.Translate(err, op, "case", caseID, "obligation", spec.Name)
	}
	return fromObligationRow(row), nil
}

// Meet records that obligation id was met, in its own transaction. See
// [Client.MeetTx].
func (c *Client) Meet(ctx context.Context, id int64) (Obligation, error) {
	return c.meet(ctx, c.pool, id)
}

// MeetTx records in tx that obligation id was met: [Client.SettleTx] to
// [Met]. Meeting a breached obligation records a late meet beside the
// breach and returns it still breached.
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) MeetTx(ctx context.Context, tx pgx.Tx, id int64) (Obligation, error) {
	return c.meet(ctx, tx, id)
}

// meet is [Client.MeetTx] on q: the client's pool or the caller's transaction.
func (c *Client) meet(ctx context.Context, q db.DBTX, id int64) (Obligation, error) {
	return c.settle(ctx, q, id, Met)
}

// Withdraw records that obligation id is no longer owed, in its own
// transaction. See [Client.WithdrawTx].
func (c *Client) Withdraw(ctx context.Context, id int64) (Obligation, error) {
	return c.withdraw(ctx, c.pool, id)
}

// WithdrawTx records in tx that obligation id is no longer owed:
// [Client.SettleTx] to [Withdrawn].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) WithdrawTx(ctx context.Context, tx pgx.Tx, id int64) (Obligation, error) {
	return c.withdraw(ctx, tx, id)
}

// withdraw is [Client.WithdrawTx] on q: the client's pool or the caller's transaction.
func (c *Client) withdraw(ctx context.Context, q db.DBTX, id int64) (Obligation, error) {
	return c.settle(ctx, q, id, Withdrawn)
}

// Breach records that obligation id was breached and enqueues its
// escalation, in its own transaction. See [Client.BreachTx].
func (c *Client) Breach(ctx context.Context, id int64) (Obligation, error) {
	return c.breach(ctx, c.pool, id)
}

// BreachTx records in tx that obligation id was breached and enqueues its
// escalation in the same transaction: [Client.SettleTx] to [Breached].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) BreachTx(ctx context.Context, tx pgx.Tx, id int64) (Obligation, error) {
	return c.breach(ctx, tx, id)
}

// breach is [Client.BreachTx] on q: the client's pool or the caller's transaction.
func (c *Client) breach(ctx context.Context, q db.DBTX, id int64) (Obligation, error) {
	return c.settle(ctx, q, id, Breached)
}

// SettleTx moves obligation id from pending to to (met, withdrawn or
// breached) in tx and returns it. A breach enqueues the obligation's
// escalation job in the same transaction; its commit wakes the workers of
// its queue. Re-applying
// the state it holds is a no-op that records nothing. Meeting a breached
// obligation records an [EventLateMeet] beside the breach (once) and returns
// it still breached.
//
// It refuses, writing nothing: a state other than met, withdrawn or breached
// ([db.ErrInvalidArgument]); an unknown obligation or one whose case the
// actor may not write ([db.ErrNotFound]); any other move out of a terminal
// state ([db.ErrIllegalTransition]); a breach whose escalation the actor may
// not enqueue, without job.create ([db.ErrNotPermitted]).
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) SettleTx(ctx context.Context, tx pgx.Tx, id int64, to ObligationState) (Obligation, error) {
	return c.settle(ctx, tx, id, to)
}

// Settle moves obligation id from pending to to, in its own transaction. See
// [Client.SettleTx].
func (c *Client) Settle(ctx context.Context, id int64, to ObligationState) (Obligation, error) {
	return c.settle(ctx, c.pool, id, to)
}

// settle is [Client.SettleTx] on q: the client's pool or the caller's transaction.
func (c *Client) settle(ctx context.Context, q db.DBTX, id int64, to ObligationState) (Obligation, error) {
	const op = "obligation.settle"
	if to != Met && to != Withdrawn && to != Breached {
		return Obligation{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("state %q: want met, withdrawn or breached", to), "obligation", id)
	}
	row, err := queries.ObligationSettle(ctx, q, id, string(to), string(c.actor), c.clock.Now())
	if err != nil {
		return Obligation{}, db.Translate(err, op, "obligation", id, "to", string(to))
	}
	return fromObligationRow(row), nil
}

func fromObligationRow(r *dbsqlc.DocketObligation) Obligation {
	o := Obligation{
		ID: r.ID, CaseID: r.CaseID, Project: r.Project, Name: r.Name, Due: r.DueAt.UTC(),
		State: ObligationState(r.State), CreatedBy: access.Actor(r.CreatedBy), CreatedAt: r.CreatedAt.UTC(),
	}
	if r.Rule != nil {
		o.Rule = *r.Rule
	}
	if r.CalendarDigest != nil {
		o.CalendarDigest = *r.CalendarDigest
	}
	if r.EscalationKind != nil {
		o.Escalation = &Escalation{Kind: *r.EscalationKind, Payload: r.EscalationPayload}
		if r.EscalationQueue != nil {
			o.Escalation.Queue = *r.EscalationQueue
		}
		if r.EscalationPayloadSchema != nil {
			o.Escalation.PayloadSchema = int(*r.EscalationPayloadSchema)
		}
		if r.EscalationMaxAttempts != nil {
			o.Escalation.MaxAttempts = int(*r.EscalationMaxAttempts)
		}
	}
	if r.EscalationJobID != nil {
		o.EscalationJobID = *r.EscalationJobID
	}
	if r.ResolvedAt != nil {
		o.ResolvedAt = r.ResolvedAt.UTC()
	}
	if r.ResolvedBy != nil {
		o.ResolvedBy = access.Actor(*r.ResolvedBy)
	}
	return o
}
