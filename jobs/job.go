package jobs

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/docket-dev/docket/access"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
)

// State is where a job stands. The legal moves between states are the rows of
// docket.job_transitions:
//
//	queued    → claimed | cancelled | queued (pinned to handler revisions: [Client.Pin]) | exhausted (quota)
//	claimed   → queued | claimed (expired lease taken over) | succeeded | failed | dead | uncertain | cancelled | exhausted
//	uncertain → succeeded | failed | queued | cancelled | exhausted | dead (a late failure on its last attempt)
//	exhausted → queued ([Client.Resume]) | cancelled
//
// Succeeded, failed, dead and cancelled are terminal.
type State string

// The job states.
const (
	Queued    State = "queued"    // wanted: claimable from AvailableAt
	Claimed   State = "claimed"   // held by one claimant until its lease expires
	Succeeded State = "succeeded" // done; Result holds the outcome
	Failed    State = "failed"    // failed permanently; Diagnostic says why
	Dead      State = "dead"      // ran out of attempts
	Uncertain State = "uncertain" // its worker may or may not have done the work
	Cancelled State = "cancelled" // withdrawn before it finished
	Exhausted State = "exhausted" // a ceiling of its [Budget] (or its quota) stopped it until it is resumed
)

// States lists every state, in the order of the machine.
var States = []State{Queued, Claimed, Succeeded, Failed, Dead, Uncertain, Cancelled, Exhausted}

// Terminal reports whether s is a state a job never leaves.
func (s State) Terminal() bool {
	return s == Succeeded || s == Failed || s == Dead || s == Cancelled
}

// Job is a job as stored.
type Job struct {
	ID               int64
	Project          string
	Kind             string
	Queue            string
	Priority         int // 1 (first) .. 4 (last)
	State            State
	Payload          json.RawMessage
	PayloadSchema    int
	Params           json.RawMessage // nil when none
	Inputs           []string
	Output           OutputRef // what the job is asked to produce; zero when nothing
	LaneID           int64     // 0 when none
	CaseID           int64     // 0 when none
	IdempotencyKey   string
	CompensationKind string
	External         bool // run by an executor outside docket's worker
	Repeatable       bool // safe to run again after an uncertain outcome
	AvailableAt      time.Time
	Attempts         int // claims so far
	MaxAttempts      int
	LeaseDuration    time.Duration // the lease a claim gets unless it asks for another
	Retry            RetryPolicy
	LeaseGeneration  int64
	ClaimedBy        access.Actor
	ClaimedAt        time.Time // zero unless Claimed
	LeaseExpiresAt   time.Time // zero unless Claimed
	// Renewals counts the renewals of the current attempt's lease (of the
	// last attempt's, once it ended), and RenewedAt is the last one's
	// instant (zero when none). A claim starts them again from none; the
	// event that ends the attempt records both (see docs/jobs.md).
	Renewals  int
	RenewedAt time.Time
	// Budget is what the job's attempts may spend ([Spec.Budget]), and
	// Spent what they reported so far.
	Budget     Budget
	Spent      Spend
	Result     json.RawMessage
	Diagnostic string
	CreatedBy  access.Actor
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt time.Time // zero unless terminal
	// ClaimedRevision is the handler revision of the job's latest claim (see
	// [Decoder.Revision]); empty when it was never claimed, or claimed by a
	// claimant that names no revision. It stays after the claim ends.
	ClaimedRevision string
	// Revisions are the handler revisions the job may run under, set by
	// [Client.Pin]; nil when any may.
	Revisions []string
	// RetryOf is the finished job this job retries ([Client.Retry]); 0 for
	// a job enqueued afresh. [Client.Retries] lists the other direction.
	RetryOf int64

	// token is the claim token, on a job a claim (or a renewal of its
	// lease) returned, and only there: docket stores a digest of it, which
	// no read returns.
	token uuid.UUID
}

// Lease is what a claim hands its holder: the job and the token that proves
// the claim. [Client.Renew], [Client.Release], [Client.Complete] and
// [Client.Fail] take it. A token is a capability for this one claim, not a
// credential: keep it for as long as the claim lasts and no longer.
//
// A claim is bound to the handler revision that took it: Revision is passed
// with every call the lease makes, and a call from another revision is
// refused with [db.ErrStaleClaim].
type Lease struct {
	JobID      int64
	Token      uuid.UUID
	Generation int64
	ExpiresAt  time.Time
	Revision   string // the claimant's handler revision; empty when it named none
}

// Lease returns the lease j's claim holds, on a job that a claim
// ([Client.Claim], [Client.ClaimID], [Client.ClaimQueue]) or a renewal
// ([Client.Renew]) returned: the token is handed to the claimant once, and
// docket stores only its digest. On a job read ([Client.Get], [Client.List]
// ...) or not claimed it is the zero Lease: a read never yields a token.
func (j Job) Lease() Lease {
	if j.State != Claimed || j.token == (uuid.UUID{}) {
		return Lease{}
	}
	return Lease{JobID: j.ID, Token: j.token, Generation: j.LeaseGeneration, ExpiresAt: j.LeaseExpiresAt,
		Revision: j.ClaimedRevision}
}

// Event is one recorded transition of a job. Seq counts from 1; From is empty
// for the creation. Hash is sha256(PrevHash || canonical event): see
// docket.job_event_hash.
//
// A history has one event per attempt: a claim is not an event of its own.
// While an attempt runs, its claim is on the job ([Job.ClaimedBy],
// [Job.ClaimedAt], [Job.LeaseGeneration]); the move that ends it (a
// completion, failure, release, expiry, takeover or cancel) is one event
// From [Claimed] that names the claim (ClaimedAt, ClaimedBy), and the claim
// it implies, from the event before, counts as the attempt's start. Events
// written by docket before this shape record each claim as an event To
// [Claimed] and name no claim on the event that ends it.
type Event struct {
	JobID   int64
	Seq     int
	From    State
	To      State
	Actor   access.Actor
	At      time.Time
	Attempt int
	Detail  string
	// Revision is the handler revision of the claim the event made or
	// ended; empty for other events. The hash covers it.
	Revision string
	// ClaimedAt and ClaimedBy are set on an event that ends an attempt:
	// when the attempt was claimed, and by whom. The hash covers them, and
	// the digest of the claim's token, which a history keeps and a read
	// does not return.
	ClaimedAt time.Time
	ClaimedBy access.Actor
	PrevHash  []byte
	Hash      []byte
}

// EndsAttempt reports whether e is the event that ends an attempt whose
// claim was recorded with it rather than as an event of its own.
func (e Event) EndsAttempt() bool { return !e.ClaimedAt.IsZero() }

// Verification is what [Client.Verify] found in a job's history.
type Verification struct {
	OK      bool
	Events  int    // events checked
	BadSeq  int    // the first bad event; 0 when the job row disagrees with its events, or OK
	Problem string // empty when OK
}

func fromRow(r *dbsqlc.DocketJob) Job {
	j := Job{
		ID:              r.ID,
		Project:         r.Project,
		Kind:            r.Kind,
		Queue:           r.Queue,
		Priority:        int(r.Priority),
		State:           State(r.State),
		Payload:         r.Payload,
		PayloadSchema:   int(r.PayloadSchema),
		Params:          r.Params,
		Inputs:          r.Inputs,
		External:        r.External,
		Repeatable:      r.Repeatable,
		AvailableAt:     r.AvailableAt.UTC(),
		Attempts:        int(r.Attempts),
		MaxAttempts:     int(r.MaxAttempts),
		LeaseDuration:   r.Lease,
		LeaseGeneration: r.LeaseGeneration,
		Result:          r.Result,
		CreatedBy:       access.Actor(r.CreatedBy),
		CreatedAt:       r.CreatedAt.UTC(),
		UpdatedAt:       r.UpdatedAt.UTC(),
		Retry: RetryPolicy{
			Base:        r.BackoffBase,
			Cap:         r.BackoffCap,
			Jitter:      r.BackoffJitter,
			MaxAttempts: int(r.MaxAttempts),
		},
	}
	j.Output = OutputRef{Asset: deref(r.RequestedOutput), Kind: deref(r.RequestedKind), Root: deref(r.TargetRoot)}
	j.IdempotencyKey = deref(r.IdempotencyKey)
	j.CompensationKind = deref(r.CompensationKind)
	j.Diagnostic = deref(r.Diagnostic)
	j.ClaimedBy = access.Actor(deref(r.ClaimedBy))
	j.ClaimedRevision = deref(r.ClaimedRevision)
	if r.Revisions != nil {
		j.Revisions = r.Revisions
	}
	if r.LaneID != nil {
		j.LaneID = *r.LaneID
	}
	if r.CaseID != nil {
		j.CaseID = *r.CaseID
	}
	j.ClaimedAt = utc(r.ClaimedAt)
	j.LeaseExpiresAt = utc(r.LeaseExpiresAt)
	j.FinishedAt = utc(r.FinishedAt)
	j.Renewals = int(r.Renewals)
	j.RenewedAt = utc(r.RenewedAt)
	j.Budget = budgetOf(r.MaxEffects, r.MaxMoney, r.Currency)
	j.Spent = Spend{Effects: r.SpentEffects, Money: r.SpentMoney}
	if r.RetryOf != nil {
		j.RetryOf = *r.RetryOf
	}
	return j
}

// fromEnqueuedRow converts a job_enqueue row, which is a job row with the
// duplicate flag in front.
func fromEnqueuedRow(r *dbsqlc.DocketJobEnqueued) Enqueued {
	return Enqueued{Duplicate: r.Duplicate, Job: fromRow(&dbsqlc.DocketJob{
		ID: r.ID, Project: r.Project, Kind: r.Kind, Queue: r.Queue, Priority: r.Priority, State: r.State,
		Payload: r.Payload, PayloadSchema: r.PayloadSchema, Params: r.Params, Inputs: r.Inputs,
		RequestedOutput: r.RequestedOutput, LaneID: r.LaneID, CaseID: r.CaseID, IdempotencyKey: r.IdempotencyKey,
		CompensationKind: r.CompensationKind, External: r.External, Repeatable: r.Repeatable,
		AvailableAt: r.AvailableAt, Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, Lease: r.Lease,
		BackoffBase: r.BackoffBase, BackoffCap: r.BackoffCap, BackoffJitter: r.BackoffJitter,
		LeaseGeneration: r.LeaseGeneration, ClaimedBy: r.ClaimedBy,
		ClaimedAt: r.ClaimedAt, LeaseExpiresAt: r.LeaseExpiresAt, Result: r.Result, Diagnostic: r.Diagnostic,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt,
		ClaimedRevision: r.ClaimedRevision, Revisions: r.Revisions,
		RequestedKind: r.RequestedKind, TargetRoot: r.TargetRoot, Renewals: r.Renewals, RenewedAt: r.RenewedAt,
		MaxEffects: r.MaxEffects, MaxMoney: r.MaxMoney, Currency: r.Currency, SpentEffects: r.SpentEffects,
		SpentMoney: r.SpentMoney, RetryOf: r.RetryOf,
	})}
}

// fromClaimRow converts a row a claim returned, which carries the claim's
// token: the one answer that does.
func fromClaimRow(r *dbsqlc.DocketJob) Job {
	j := fromRow(r)
	if r.ClaimToken.Valid {
		j.token = r.ClaimToken.Bytes
	}
	return j
}

func fromClaimRows(rows []*dbsqlc.DocketJob) []Job {
	out := make([]Job, len(rows))
	for i, r := range rows {
		out[i] = fromClaimRow(r)
	}
	return out
}

func fromRows(rows []*dbsqlc.DocketJob) []Job {
	out := make([]Job, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// pgUUID is u as the queries take it: a pgtype.UUID, which pgx encodes as
// binary at once (a uuid.UUID, a driver.Valuer, goes through text).
func pgUUID(u uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: u, Valid: true} }
