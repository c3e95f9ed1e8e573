package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
)

// Complete finishes the job lease l holds as [Succeeded] with result (nil:
// none). When writes is not nil it runs first, in the same transaction, so the
// caller's outputs commit with the succeeded transition or not at all; an
// error from writes rolls both back and is returned as it is. It is
// [Client.CompleteWith] without a completion record: a job that requests an
// output ([Spec.Output]) is refused at commit with [db.ErrInvalidArgument],
// its writes rolled back. See [Client.CompleteTx] for what else it refuses.
func (c *Client) Complete(ctx context.Context, l Lease, result json.RawMessage, writes func(tx pgx.Tx) error) (Job, error) {
	return c.CompleteWith(ctx, Completion{Lease: l, Result: result}, writes)
}

// CompleteTx finishes the job lease l holds as [Succeeded] with result (nil:
// none) in tx, typically the transaction that also holds the handler's
// outputs. Completing a succeeded job again with an equal result is a quiet
// no-op that returns it, so a completion retried after a lost reply is safe.
//
// It refuses, changing nothing (the caller's writes in the same transaction
// are the caller's to roll back): a result that is not JSON or is over
// [MaxPayloadBytes] with [db.ErrInvalidArgument]; an unknown job with
// [db.ErrNotFound]; a token that does not hold a live lease, and did not
// hold the claim that finished the job, with [db.ErrStaleClaim] (a job
// cancelled, settled or taken over under its holder included), and so is a
// lease whose Revision is not the one that claimed the job; the token of
// the claim that finished the job otherwise (failed, dead, or succeeded with
// another result) with [db.ErrTerminal]; the right token from an actor that
// is not the lease's holder, or that no longer holds job.claim on the job's
// project, with [db.ErrNotPermitted]; a now before the claim with
// [db.ErrClockSkew]. A job that requests an output
// ([Spec.Output]) is completed with [Client.CompleteWithTx] and its record:
// completing it here is refused when tx commits ([db.ErrInvalidArgument]).
func (c *Client) CompleteTx(ctx context.Context, tx pgx.Tx, l Lease, result json.RawMessage) (Job, error) {
	return c.complete(ctx, tx, l, result)
}

// complete is [Client.CompleteTx] on q: the client's pool or the caller's transaction.
func (c *Client) complete(ctx context.Context, q db.DBTX, l Lease, result json.RawMessage) (Job, error) {
	return c.completeSpent(ctx, q, l, result, Spend{})
}

// completeSpent is complete with what the attempt spent.
func (c *Client) completeSpent(ctx context.Context, q db.DBTX, l Lease, result json.RawMessage, spent Spend) (Job, error) {
	const op = "job.complete"
	if result != nil && !json.Valid(result) {
		return Job{}, db.Refuse(db.ErrInvalidArgument, op, "result is not valid JSON", "job", l.JobID)
	}
	if err := spent.validate(op, l.JobID); err != nil {
		return Job{}, err
	}
	row, err := queries.JobComplete(ctx, q, dbsqlc.JobCompleteParams{
		ID: l.JobID, Token: pgUUID(l.Token), Result: result, Actor: string(c.actor), Now: c.clock.Now(), Revision: optional(l.Revision),
		SpentEffects: spent.Effects, SpentMoney: spent.Money,
	})
	if err != nil {
		return Job{}, db.Translate(err, op, "job", l.JobID)
	}
	return fromRow(row), nil
}

// Completion is one completion: of [Client.CompleteWith], or an element of
// [Client.CompleteMany].
type Completion struct {
	Lease  Lease
	Result json.RawMessage // nil: none
	// Record is what the worker produced and used (nil: none stated). A job
	// that requests an output ([Spec.Output]) needs one.
	Record *CompletionRecord
	// Spent is what the attempt spent, added to the job's (see [Budget]).
	Spent Spend
}

// CompleteMany completes a batch of leases, with their completion records,
// in one statement. See [Client.CompleteManyTx].
func (c *Client) CompleteMany(ctx context.Context, batch []Completion) ([]error, error) {
	return c.completeMany(ctx, c.pool, batch)
}

// CompleteManyTx completes up to [MaxCompleteBatch] leases in tx in one round
// trip, one statement that also writes their completion records. It returns
// one error per element, in order: nil when the job is now succeeded (or
// already was, with an equal result), else the refusal [Client.CompleteTx]
// would have given ([db.ErrStaleClaim], [db.ErrNotPermitted],
// [db.ErrClockSkew], [db.ErrTerminal], [db.ErrNotFound]), or, for an element
// whose lease is live, the refusal of its completion record with
// [db.ErrInvalidArgument] and storage's reason: a record the
// completion-record rule refuses (malformed, or not the job's request: see
// [Client.CompleteWithTx]), or none for a job that requests an output. A
// refused element changed nothing (no record, no completion) while the
// others completed. The rule is storage's alone: no record is checked
// here. The second result refuses the whole batch, changing nothing: empty
// or oversized, a job named twice, or a result that is not JSON
// ([db.ErrInvalidArgument]).
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) CompleteManyTx(ctx context.Context, tx pgx.Tx, batch []Completion) ([]error, error) {
	return c.completeMany(ctx, tx, batch)
}

// completeMany is [Client.CompleteManyTx] on q: the client's pool or the caller's transaction.
func (c *Client) completeMany(ctx context.Context, q db.DBTX, batch []Completion) ([]error, error) {
	const op = "job.complete_many"
	if len(batch) == 0 || len(batch) > MaxCompleteBatch {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("batch of %d is outside 1..%d", len(batch), MaxCompleteBatch))
	}
	seen := make(map[int64]bool, len(batch))
	for _, b := range batch {
		if seen[b.Lease.JobID] {
			return nil, db.Refuse(db.ErrInvalidArgument, op, "a job appears twice in the batch: name each job once", "job", b.Lease.JobID)
		}
		seen[b.Lease.JobID] = true
	}
	ids := make([]int64, len(batch))
	tokens := make([]pgtype.UUID, len(batch))
	results := make([]json.RawMessage, len(batch))
	revisions := make([]string, len(batch))
	var effects, money []int64 // nil unless an element spent something
	for i, b := range batch {
		if err := b.Spent.validate(op, b.Lease.JobID); err != nil {
			return nil, err
		}
		if b.Spent != (Spend{}) && effects == nil {
			effects, money = make([]int64, len(batch)), make([]int64, len(batch))
		}
		if effects != nil {
			effects[i], money[i] = b.Spent.Effects, b.Spent.Money
		}
		ids[i], tokens[i], results[i], revisions[i] = b.Lease.JobID, pgUUID(b.Lease.Token), json.RawMessage("null"), b.Lease.Revision
		if b.Result != nil {
			if !json.Valid(b.Result) {
				return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("element %d: result is not valid JSON", i), "job", b.Lease.JobID)
			}
			results[i] = b.Result
		}
	}
	rows, err := queries.JobCompleteMany(ctx, q, dbsqlc.JobCompleteManyParams{
		Ids: ids, Tokens: tokens, Results: results, Actor: string(c.actor), Now: c.clock.Now(), Revisions: revisions,
		Records: recordsJSON(batch), SpentEffects: effects, SpentMoney: money,
	})
	if err != nil {
		return nil, db.Translate(err, op)
	}
	out := make([]error, len(batch))
	for i, r := range rows {
		switch {
		case r.RefusalReason != "":
			out[i] = db.RefuseCode(r.Refusal, "job.complete", r.RefusalReason, "job", r.ID)
		case r.Refusal != "":
			out[i] = db.RefuseCode(r.Refusal, "job.complete", refusalMessage(r.Refusal, r.State), "job", r.ID)
		}
	}
	return out, nil
}

func refusalMessage(code, state string) string {
	switch code {
	case "P0002":
		return "the job does not exist"
	case "DK014":
		return "the job already finished " + state
	case "DK009":
		return "the actor is not the lease's holder, or no longer holds job.claim on the job's project"
	case "DK016":
		return "the completion is dated before the job's claim"
	default:
		return "the token does not hold a live lease (the job is " + state + ")"
	}
}

// FailureClass says what a failed attempt means for the job.
type FailureClass string

// The failure classes.
const (
	// ClassRetryable: try again after a backoff, until the attempts run
	// out ([Dead]).
	ClassRetryable FailureClass = "retryable"
	// ClassPermanent: it will never succeed ([Failed]).
	ClassPermanent FailureClass = "permanent"
	// ClassUncertain: the attempt may or may not have had its effect; the
	// job becomes [Uncertain] for someone to reconcile, unless it is
	// repeatable (then as ClassRetryable).
	ClassUncertain FailureClass = "uncertain"
)

// Failure describes a failed attempt.
type Failure struct {
	Class FailureClass // defaults to ClassRetryable
	// Diagnostic says what went wrong; cut to [MaxDiagnosticLen] characters.
	Diagnostic string
	// RetryAfter, when positive, replaces the policy's backoff for a
	// retryable failure: a peer's hint such as an HTTP Retry-After, clamped to
	// [MaxRetryAfter]. Negative retries at once; zero uses the policy.
	RetryAfter time.Duration
	// Spent is what the attempt spent, added to the job's. A retryable
	// failure that leaves a ceiling of the job's [Budget] reached makes it
	// [Exhausted] rather than queued again.
	Spent Spend
}

// Fail reports that the attempt lease l holds failed. See [Client.FailTx].
func (c *Client) Fail(ctx context.Context, l Lease, f Failure) (Job, error) {
	return c.fail(ctx, c.pool, l, f)
}

// FailTx reports in tx that the attempt lease l holds failed, and moves the job
// by f.Class: [ClassRetryable] to [Queued] after a backoff ([Dead] on its
// last attempt; [Exhausted] when f.Spent left a ceiling of its [Budget]
// reached), [ClassPermanent] to [Failed], [ClassUncertain] to
// [Uncertain] (or as retryable when the job is repeatable). The holder whose
// claim finished the job reporting the same outcome again is a quiet no-op;
// a failure that queued the job again, or left it uncertain, has spent the
// token, and a repeat is [db.ErrStaleClaim].
//
// It refuses, changing nothing: an unknown class or a negative f.Spent with
// [db.ErrInvalidArgument];
// an unknown job with [db.ErrNotFound]; the finishing holder's token on a job
// that finished otherwise with [db.ErrTerminal]; any other token that does
// not hold a live lease, or a lease from another revision than the claim's,
// with [db.ErrStaleClaim]; an actor that is not the lease's holder, or no
// longer holds job.claim, with [db.ErrNotPermitted]; a now before the claim
// with [db.ErrClockSkew].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) FailTx(ctx context.Context, tx pgx.Tx, l Lease, f Failure) (Job, error) {
	return c.fail(ctx, tx, l, f)
}

// fail is [Client.FailTx] on q: the client's pool or the caller's transaction.
func (c *Client) fail(ctx context.Context, q db.DBTX, l Lease, f Failure) (Job, error) {
	const op = "job.fail"
	f, retryAfter, err := f.checked(op, l.JobID)
	if err != nil {
		return Job{}, err
	}
	row, err := queries.JobFail(ctx, q, dbsqlc.JobFailParams{
		ID: l.JobID, Token: pgUUID(l.Token), Class: string(f.Class), Diagnostic: optional(f.Diagnostic),
		RetryAfter: retryAfter, Actor: string(c.actor), Now: c.clock.Now(), Revision: optional(l.Revision),
		SpentEffects: f.Spent.Effects, SpentMoney: f.Spent.Money,
	})
	if err != nil {
		return Job{}, db.Translate(err, op, "job", l.JobID)
	}
	return fromRow(row), nil
}

// checked is f as recorded for job id by op: its class, retryable when
// none, and its RetryAfter clamped to [MaxRetryAfter] (nil: the policy's
// backoff); or a refusal of an unknown class or a negative spend.
func (f Failure) checked(op string, id int64) (Failure, *time.Duration, error) {
	if f.Class == "" {
		f.Class = ClassRetryable
	}
	if f.Class != ClassRetryable && f.Class != ClassPermanent && f.Class != ClassUncertain {
		return f, nil, db.Refuse(db.ErrInvalidArgument, op, "unknown failure class "+quote(string(f.Class)), "job", id)
	}
	if err := f.Spent.validate(op, id); err != nil {
		return f, nil, err
	}
	if f.RetryAfter == 0 {
		return f, nil, nil
	}
	d := min(max(f.RetryAfter, 0), MaxRetryAfter)
	return f, &d, nil
}

// Cancel withdraws job id. See [Client.CancelTx].
func (c *Client) Cancel(ctx context.Context, id int64, reason string) (Job, error) {
	return c.cancel(ctx, c.pool, id, reason)
}

// CancelTx withdraws job id in tx, queued, claimed or uncertain, with reason as
// its diagnostic. A holder learns of it when its next renew, complete or fail
// is refused with [db.ErrStaleClaim]. A job that names a compensation kind
// gets its compensation job enqueued in the same transaction, with payload
// {"job_id", "kind", "payload"}: the cancelled job's id, kind and payload
// (the payload left out when it is within 1 KiB of [MaxPayloadBytes]); the canceller needs no job.create for it, since the job's
// creator declared it. Cancelling a cancelled job is a quiet no-op.
//
// It refuses, changing nothing: an unknown job with [db.ErrNotFound]; an actor
// without job.cancel on the job's project with [db.ErrNotPermitted]; a job
// that already finished otherwise with [db.ErrTerminal].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) CancelTx(ctx context.Context, tx pgx.Tx, id int64, reason string) (Job, error) {
	return c.cancel(ctx, tx, id, reason)
}

// cancel is [Client.CancelTx] on q: the client's pool or the caller's transaction.
func (c *Client) cancel(ctx context.Context, q db.DBTX, id int64, reason string) (Job, error) {
	row, err := queries.JobCancel(ctx, q, id, optional(reason), string(c.actor), c.clock.Now())
	if err != nil {
		return Job{}, db.Translate(err, "job.cancel", "job", id)
	}
	return fromRow(row), nil
}

// Outcome is how [Client.Reconcile] settles an uncertain job.
type Outcome string

// The outcomes of a reconciliation.
const (
	// DidSucceed: the work was done; the job becomes [Succeeded].
	DidSucceed Outcome = "succeeded"
	// DidFail: the work was not done and will not be; [Failed].
	DidFail Outcome = "failed"
	// RunAgain: the work was not done; the job is [Queued] at once.
	RunAgain Outcome = "queued"
)

// Reconcile settles uncertain job id. See [Client.ReconcileTx].
func (c *Client) Reconcile(ctx context.Context, id int64, outcome Outcome, result json.RawMessage, note string) (Job, error) {
	return c.reconcile(ctx, c.pool, id, outcome, result, note)
}

// ReconcileTx settles uncertain job id in tx, by an actor who found out what
// its lost attempt did: [DidSucceed] (with result), [DidFail] or [RunAgain].
// note is kept as the diagnostic, and the change is recorded as every other.
// Settling a reconciled job again to succeeded or failed with the outcome it
// has is a quiet no-op (a retry after a lost reply); a repeated [RunAgain]
// finds the job queued and is refused.
//
// It refuses, changing nothing: an unknown outcome, a result with an outcome
// other than DidSucceed, or RunAgain for a job with no attempts left, with
// [db.ErrInvalidArgument]; an unknown job with [db.ErrNotFound]; an actor
// without job.reconcile on the job's project with [db.ErrNotPermitted]; a job
// that is queued or claimed with [db.ErrIllegalTransition]; a job that
// finished any other way (completed, failed, dead, cancelled, or reconciled
// to another outcome) with [db.ErrTerminal].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) ReconcileTx(ctx context.Context, tx pgx.Tx, id int64, outcome Outcome, result json.RawMessage, note string) (Job, error) {
	return c.reconcile(ctx, tx, id, outcome, result, note)
}

// reconcile is [Client.ReconcileTx] on q: the client's pool or the caller's transaction.
func (c *Client) reconcile(ctx context.Context, q db.DBTX, id int64, outcome Outcome, result json.RawMessage, note string) (Job, error) {
	const op = "job.reconcile"
	if result != nil && !json.Valid(result) {
		return Job{}, db.Refuse(db.ErrInvalidArgument, op, "result is not valid JSON", "job", id)
	}
	row, err := queries.JobReconcile(ctx, q, dbsqlc.JobReconcileParams{
		ID: id, Outcome: string(outcome), Result: result, Note: optional(note),
		Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Job{}, db.Translate(err, op, "job", id, "outcome", outcome)
	}
	return fromRow(row), nil
}

// ExpireLeases sweeps up to limit expired leases, in a transaction of its
// own. See [Client.ExpireLeasesTx].
func (c *Client) ExpireLeases(ctx context.Context, limit int) ([]Job, error) {
	return c.expireLeases(ctx, c.pool, limit)
}

// ExpireLeasesTx sweeps up to limit expired leases in tx, in every project
// where the actor holds job.claim (a sweeper acts for the claimants): a
// repeatable job is queued again after its backoff ([Dead] on its last
// attempt); any other becomes [Uncertain], because its worker may have done
// the work. It returns the jobs it moved; jobs another sweeper holds are
// skipped, so several sweepers may run at once. It refuses a limit outside
// 1..[MaxSweepBatch] with [db.ErrInvalidArgument].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) ExpireLeasesTx(ctx context.Context, tx pgx.Tx, limit int) ([]Job, error) {
	return c.expireLeases(ctx, tx, limit)
}

// expireLeases is [Client.ExpireLeasesTx] on q: the client's pool or the caller's transaction.
func (c *Client) expireLeases(ctx context.Context, q db.DBTX, limit int) ([]Job, error) {
	const op = "job.expire_leases"
	if limit < 1 || limit > MaxSweepBatch {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("limit %d is outside 1..%d", limit, MaxSweepBatch))
	}
	rows, err := queries.JobExpireLeases(ctx, q, int32(limit), string(c.actor), c.clock.Now())
	if err != nil {
		return nil, db.Translate(err, op)
	}
	return fromRows(rows), nil
}

// RegisterDecoders records that deployment can decode the given payload
// versions. See [Client.RegisterDecodersTx].
func (c *Client) RegisterDecoders(ctx context.Context, deployment string, decoders []Decoder) error {
	return c.registerDecoders(ctx, c.pool, deployment, decoders)
}

// RegisterDecodersTx records in tx that deployment (a name such as
// "billing-worker@v42") can decode the given payload versions, so
// docket.jobs_undecodable lists only jobs nobody can decode. Registering a
// pair again refreshes it. A deployment's registrations belong to the login
// role that first registered it. It refuses a malformed deployment or
// decoder with [db.ErrInvalidArgument]; an actor holding job.claim on no
// project, or a deployment another login role registered, with
// [db.ErrNotPermitted].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) RegisterDecodersTx(ctx context.Context, tx pgx.Tx, deployment string, decoders []Decoder) error {
	return c.registerDecoders(ctx, tx, deployment, decoders)
}

// registerDecoders is [Client.RegisterDecodersTx] on q: the client's pool or the caller's transaction.
func (c *Client) registerDecoders(ctx context.Context, q db.DBTX, deployment string, decoders []Decoder) error {
	const op = "job.register_decoders"
	if !deploymentPattern.MatchString(deployment) {
		return db.Refuse(db.ErrInvalidArgument, op, "invalid deployment name "+quote(deployment)+
			fmt.Sprintf(": want 1-%d characters of [A-Za-z0-9._:@/-], starting with a letter or digit", maxDeploymentName))
	}
	_, _, kinds, schemas, revisions, err := ClaimOptions{Decoders: decoders}.validate(op)
	if err != nil {
		return err
	}
	if len(kinds) == 0 {
		return nil
	}
	_, err = queries.JobDecodersRegister(ctx, q, dbsqlc.JobDecodersRegisterParams{
		Deployment: deployment, Kinds: kinds, Schemas: schemas, Actor: string(c.actor), Now: c.clock.Now(), Revisions: revisions,
	})
	return db.Translate(err, op, "deployment", deployment)
}
