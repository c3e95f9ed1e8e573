package cases

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/cases"
	"github.com/docket-dev/docket/internal/paging"
)

// WaitStatus is where a wait stands. The legal moves are the rows of
// docket.wait_transitions:
//
//	waiting → satisfied | expired | withdrawn
//
// Satisfied, expired and withdrawn are terminal.
type WaitStatus string

// The wait statuses.
const (
	Waiting   WaitStatus = "waiting"   // no message has satisfied it, its deadline not yet swept
	Satisfied WaitStatus = "satisfied" // a message satisfied it; its arrival continuation was enqueued
	Expired   WaitStatus = "expired"   // its deadline came first; its timeout continuation, if any, was enqueued
	// WaitWithdrawn: no longer waited for, withdrawn or its case closed.
	WaitWithdrawn WaitStatus = "withdrawn"
)

// MaxWaitAhead bounds how far ahead a wait's deadline or a timer's wake
// instant may be: 3650 days, about ten years. The database holds every
// writer to it.
const MaxWaitAhead = 3650 * 24 * time.Hour

// Continuation is a job a wait or timer enqueues when it ends: in the case's
// project, naming the case (jobs.Job.CaseID), once (under an idempotency key
// made from the wait or timer), with params saying why it runs (see
// [WakeOf]).
type Continuation struct {
	Kind  string // a job kind, e.g. supplier.reply. Required.
	Queue string // defaults to "default"
	// Payload is the job's payload. Defaults to {}.
	Payload json.RawMessage
	// PayloadSchema is the payload's schema version. Defaults to 1.
	PayloadSchema int
	// MaxAttempts bounds the job's attempts: 1..100. Defaults to 5.
	MaxAttempts int
}

// resolved is k with its defaults filled in; an [Escalation] converts to a
// Continuation to take the same ones.
func (k Continuation) resolved() Continuation {
	if k.Queue == "" {
		k.Queue = "default"
	}
	if len(k.Payload) == 0 {
		k.Payload = json.RawMessage(`{}`)
	}
	if k.PayloadSchema == 0 {
		k.PayloadSchema = 1
	}
	if k.MaxAttempts == 0 {
		k.MaxAttempts = 5
	}
	return k
}

// WaitSpec describes a wait to register with [Client.Await].
type WaitSpec struct {
	// Name says what is awaited, unique among the case's waiting waits:
	// 1-63 characters of [a-z0-9._-], starting with a letter or digit.
	Name string
	// Keys are the 1..[MaxKeys] keys a message must be filed under, all of
	// them, to satisfy the wait.
	Keys []Key
	// Deadline is when the wait expires if no message satisfied it: after
	// now and at most [MaxWaitAhead] ahead. Required: a wait without one
	// could hang forever with nothing to notice it.
	Deadline time.Time
	// OnArrival is the job a satisfying message enqueues, the message
	// attached. Required.
	OnArrival Continuation
	// OnTimeout is the job the deadline enqueues; nil for none.
	OnTimeout *Continuation
}

// Wait is something a case waits for: a message on its keys before its
// deadline.
type Wait struct {
	ID int64
	// CaseID is the case that waits; RunID and StepID the run's step that
	// waits instead (see package plans): a wait has exactly one owner.
	CaseID    int64
	RunID     int64
	StepID    string
	Project   string
	Name      string
	Keys      []Key
	Deadline  time.Time
	OnArrival Continuation  // zero for a run step's wait: its end answers the step
	OnTimeout *Continuation // nil for none
	Status    WaitStatus
	// SatisfiedBy is the message that satisfied it; 0 unless satisfied.
	SatisfiedBy int64
	// ContinuationJobID is the job its end enqueued; 0 while waiting, or
	// when it ended without one.
	ContinuationJobID int64
	CreatedBy         access.Actor
	CreatedAt         time.Time
	SettledAt         time.Time // zero while waiting
	SettledBy         access.Actor
}

// Awaited is what registering a wait did.
type Awaited struct {
	Wait
	// Created is false when the same wait was already waiting (a retry).
	Created bool
}

// Await registers wait spec on case caseID, in its own transaction. See
// [Client.AwaitTx].
func (c *Client) Await(ctx context.Context, caseID int64, spec WaitSpec) (Awaited, error) {
	return inTx(ctx, c.pool, func(tx pgx.Tx) (Awaited, error) { return c.AwaitTx(ctx, tx, caseID, spec) })
}

// AwaitTx registers wait spec on case caseID in tx. It stores the wait first,
// then looks in the buffer for the oldest message filed under all its keys
// (unaddressed, or addressed to this case): finding one, the wait consumes it
// at once and enqueues its arrival continuation in the same transaction, and
// is returned satisfied. Otherwise it is returned waiting, for the delivery
// of such a message ([Client.DeliverTx]) or its deadline ([WaitExpirySweep])
// to end it. Registering again what is already waiting under that name, on
// the same terms, returns it with Created false.
//
// Deliveries and waits on a common key are decided one at a time, so a
// message and its wait meet whichever comes first. The wait is registered
// under a share lock of the case row, so a concurrent close either withdraws
// it or refuses it. A continuation enqueued at once runs as
// [Client.DeliverTx] says. On rollback nothing is recorded.
//
// It refuses, writing nothing: a malformed name, key set or continuation, a
// deadline that is zero, not after now or more than [MaxWaitAhead] ahead
// ([db.ErrInvalidArgument]); an unknown case or one the actor may not write
// ([db.ErrNotFound]); an actor without job.create on the case's project
// ([db.ErrNotPermitted]); a closed case ([db.ErrCaseClosed]); a waiting
// wait of that name on other terms ([db.ErrAlreadyExists]).
func (c *Client) AwaitTx(ctx context.Context, tx pgx.Tx, caseID int64, spec WaitSpec) (Awaited, error) {
	const op = "wait.register"
	ids := []any{"case", caseID, "wait", spec.Name}
	if len(spec.Keys) == 0 || len(spec.Keys) > MaxKeys {
		return Awaited{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("%d keys: want 1..%d", len(spec.Keys), MaxKeys), ids...)
	}
	if spec.Deadline.IsZero() {
		return Awaited{}, db.Refuse(db.ErrInvalidArgument, op, "deadline is zero: every wait has one", ids...)
	}
	ns, vals := keyArrays(spec.Keys)
	arrival := spec.OnArrival.resolved()
	p := dbsqlc.WaitRegisterParams{
		CaseID: caseID, Name: spec.Name, Namespaces: ns, KeyValues: vals, Deadline: spec.Deadline,
		ArrivalKind: arrival.Kind, ArrivalQueue: arrival.Queue, ArrivalPayload: arrival.Payload,
		ArrivalPayloadSchema: int32(arrival.PayloadSchema), ArrivalMaxAttempts: int32(arrival.MaxAttempts),
		Actor: string(c.actor), Now: c.clock.Now(),
	}
	if spec.OnTimeout != nil {
		t := spec.OnTimeout.resolved()
		schema, attempts := int32(t.PayloadSchema), int32(t.MaxAttempts)
		p.TimeoutKind, p.TimeoutQueue, p.TimeoutPayload = &t.Kind, &t.Queue, t.Payload
		p.TimeoutPayloadSchema, p.TimeoutMaxAttempts = &schema, &attempts
	}
	row, err := queries.WaitRegister(ctx, tx, p)
	if err != nil {
		return Awaited{}, db.Translate(err, op, ids...)
	}
	w := fromWaitRow(&dbsqlc.DocketWait{
		ID: row.ID, CaseID: row.CaseID, Project: row.Project, Name: row.Name, Keys: row.Keys, Deadline: row.Deadline,
		OnArrivalKind: row.OnArrivalKind, OnArrivalQueue: row.OnArrivalQueue, OnArrivalPayload: row.OnArrivalPayload,
		OnArrivalPayloadSchema: row.OnArrivalPayloadSchema, OnArrivalMaxAttempts: row.OnArrivalMaxAttempts,
		OnTimeoutKind: row.OnTimeoutKind, OnTimeoutQueue: row.OnTimeoutQueue, OnTimeoutPayload: row.OnTimeoutPayload,
		OnTimeoutPayloadSchema: row.OnTimeoutPayloadSchema, OnTimeoutMaxAttempts: row.OnTimeoutMaxAttempts,
		Status: row.Status, SatisfiedBy: row.SatisfiedBy, ContinuationJobID: row.ContinuationJobID,
		CreatedBy: row.CreatedBy, CreatedAt: row.CreatedAt, SettledAt: row.SettledAt, SettledBy: row.SettledBy,
	})
	return Awaited{Wait: w, Created: row.Created}, nil
}

// WithdrawWait withdraws wait id, in its own transaction. See
// [Client.WithdrawWaitTx].
func (c *Client) WithdrawWait(ctx context.Context, id int64) (Wait, error) {
	return c.withdrawWait(ctx, c.pool, id)
}

// WithdrawWaitTx withdraws wait id in tx and returns it: it no longer waits,
// and a message that would have satisfied it stays buffered for another.
// Withdrawing a withdrawn wait is a no-op that returns it.
//
// It refuses, writing nothing: an unknown wait or one whose case the actor
// may not write ([db.ErrNotFound]); a wait a message satisfied or its
// deadline expired first ([db.ErrAlreadyAnswered]).
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) WithdrawWaitTx(ctx context.Context, tx pgx.Tx, id int64) (Wait, error) {
	return c.withdrawWait(ctx, tx, id)
}

// withdrawWait is [Client.WithdrawWaitTx] on q: the client's pool or the caller's transaction.
func (c *Client) withdrawWait(ctx context.Context, q db.DBTX, id int64) (Wait, error) {
	row, err := queries.WaitWithdraw(ctx, q, id, string(c.actor), c.clock.Now())
	if err != nil {
		return Wait{}, db.Translate(err, "wait.withdraw", "wait", id)
	}
	return fromWaitRow(row), nil
}

// Wait returns wait id, or [db.ErrNotFound] when there is none or
// the actor may not read its case.
func (c *Client) Wait(ctx context.Context, id int64) (Wait, error) {
	return c.wait(ctx, c.reads.DB, id)
}

// WaitTx is [Client.Wait] read in tx, the caller's transaction: it sees what tx
// has written and not yet committed, and writes nothing itself.
func (c *Client) WaitTx(ctx context.Context, tx pgx.Tx, id int64) (Wait, error) {
	return c.wait(ctx, tx, id)
}

// wait is [Client.Wait] on q: the client's pool or the caller's transaction.
func (c *Client) wait(ctx context.Context, q db.DBTX, id int64) (Wait, error) {
	row, err := queries.WaitGet(ctx, q, id, string(c.actor))
	if err != nil {
		return Wait{}, db.TranslateRead(err, "wait.get", "wait", id, string(c.actor))
	}
	return fromWaitRow(row), nil
}

// Waits returns the waits of case id, oldest first, in its own transaction.
// See [Client.WaitsTx].
func (c *Client) Waits(ctx context.Context, id int64) ([]Wait, error) {
	return c.waits(ctx, c.reads.DB, id)
}

// WaitsTx returns every wait of case id read in tx, oldest first: none when
// the case does not exist or the actor may not read it.
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) WaitsTx(ctx context.Context, tx pgx.Tx, id int64) ([]Wait, error) {
	return c.waits(ctx, tx, id)
}

// waits is [Client.WaitsTx] on q: the client's pool or the caller's transaction.
func (c *Client) waits(ctx context.Context, q db.DBTX, id int64) ([]Wait, error) {
	rows, err := queries.CaseWaits(ctx, q, id, string(c.actor))
	return paging.Collect(rows, err, fromWaitRow, "case.waits", "case", id)
}

// WaitingFilter selects waiting waits for [Client.Waiting]. Project is
// required.
type WaitingFilter struct {
	Project string
	// After continues a listing: only waits after this one in (deadline, id)
	// order. Pass the last wait of one page to get the next.
	After *Wait
	// Limit is the page size, 1..[db.MaxPage]. Defaults to [db.DefaultPage].
	Limit int
}

// Waiting returns the waiting waits of f.Project, soonest deadline first, in
// its own transaction. See [Client.WaitingTx].
func (c *Client) Waiting(ctx context.Context, f WaitingFilter) ([]Wait, error) {
	return c.waiting(ctx, c.reads.DB, f)
}

// WaitingTx returns a page of the waiting waits of f.Project read in tx,
// soonest deadline first. An actor that may not read the project's cases
// gets an empty list, not an error. It refuses an empty project or a limit
// outside 1..[db.MaxPage] with [db.ErrInvalidArgument].
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) WaitingTx(ctx context.Context, tx pgx.Tx, f WaitingFilter) ([]Wait, error) {
	return c.waiting(ctx, tx, f)
}

// waiting is [Client.WaitingTx] on q: the client's pool or the caller's transaction.
func (c *Client) waiting(ctx context.Context, q db.DBTX, f WaitingFilter) ([]Wait, error) {
	const op = "wait.list"
	limit, err := paging.For(op).Project("waits", f.Project).Limit(f.Limit)
	if err != nil {
		return nil, err
	}
	p := dbsqlc.WaitsWaitingParams{
		Project: f.Project, AfterDeadline: time.Unix(0, 0).UTC(), Actor: string(c.actor), MaxRows: limit,
	}
	if f.After != nil {
		p.AfterDeadline, p.AfterID = f.After.Deadline, f.After.ID
	}
	rows, err := queries.WaitsWaiting(ctx, q, p)
	return paging.Collect(rows, err, fromWaitRow, op, "project", f.Project)
}

func fromWaitRow(r *dbsqlc.DocketWait) Wait {
	w := Wait{
		ID: r.ID, CaseID: deref(r.CaseID), RunID: deref(r.RunID), StepID: deref(r.StepID), Project: r.Project, Name: r.Name,
		Keys: parseKeys(r.Keys), Deadline: r.Deadline.UTC(),
		OnArrival: Continuation{
			Kind: deref(r.OnArrivalKind), Queue: deref(r.OnArrivalQueue), Payload: r.OnArrivalPayload,
			PayloadSchema: int(deref(r.OnArrivalPayloadSchema)), MaxAttempts: int(deref(r.OnArrivalMaxAttempts)),
		},
		Status: WaitStatus(r.Status), CreatedBy: access.Actor(r.CreatedBy), CreatedAt: r.CreatedAt.UTC(),
	}
	if r.OnTimeoutKind != nil {
		t := Continuation{Kind: *r.OnTimeoutKind, Payload: r.OnTimeoutPayload}
		if r.OnTimeoutQueue != nil {
			t.Queue = *r.OnTimeoutQueue
		}
		if r.OnTimeoutPayloadSchema != nil {
			t.PayloadSchema = int(*r.OnTimeoutPayloadSchema)
		}
		if r.OnTimeoutMaxAttempts != nil {
			t.MaxAttempts = int(*r.OnTimeoutMaxAttempts)
		}
		w.OnTimeout = &t
	}
	if r.SatisfiedBy != nil {
		w.SatisfiedBy = *r.SatisfiedBy
	}
	if r.ContinuationJobID != nil {
		w.ContinuationJobID = *r.ContinuationJobID
	}
	if r.SettledAt != nil {
		w.SettledAt = r.SettledAt.UTC()
	}
	if r.SettledBy != nil {
		w.SettledBy = access.Actor(*r.SettledBy)
	}
	return w
}

// deref is *p, or the zero value when p is nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
