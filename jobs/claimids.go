package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/dbsqlc"
)

// ClaimOutcome says what became of one job a [Client.ClaimIDsTx] wanted.
type ClaimOutcome string

// The outcomes of [Client.ClaimIDsTx].
const (
	// ClaimTaken: the job is claimed; [ClaimResult.Job] holds its lease.
	ClaimTaken ClaimOutcome = "claimed"
	// ClaimUndecodable: the job was claimable, but its (kind, payload schema) is
	// not among the claimant's decoders; it is left as it was.
	ClaimUndecodable ClaimOutcome = "undecodable"
	// ClaimUnavailable: the job is not claimable now (held by a live lease, not
	// yet due, finished, uncertain, or locked by another claimant);
	// [ClaimResult.Job] is how the claim saw it.
	ClaimUnavailable ClaimOutcome = "unavailable"
)

// ClaimResult is one job a [Client.ClaimIDsTx] wanted and what became of it.
type ClaimResult struct {
	Outcome ClaimOutcome
	Job     Job
}

// ClaimWant names one job for [Client.ClaimIDsTx] and the lease to hold it
// for (0: the job's own).
type ClaimWant struct {
	ID    int64
	Lease time.Duration
}

// ClaimIDsTx claims on q each wanted job that is claimable now, as
// [Client.ClaimIDTx] does for one, in one statement: the group commit of a
// worker's dispatches. It returns a result for each wanted job in a project
// where the actor holds job.claim, claimed ones first; an unknown job, or one
// the actor may not claim, has none. Locked jobs are skipped, never waited for.
//
// It refuses, changing nothing, with [db.ErrInvalidArgument]: more than
// [MaxClaimBatch] wants, a repeated id, a lease outside 1 s .. 24 h, a
// malformed decoder.
func (c *Client) ClaimIDsTx(ctx context.Context, q db.DBTX, wants []ClaimWant, decoders []Decoder) ([]ClaimResult, error) {
	const op = "job.claim_ids"
	if len(wants) == 0 {
		return nil, nil
	}
	if len(wants) > MaxClaimBatch {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("%d jobs is more than %d", len(wants), MaxClaimBatch))
	}
	_, _, kinds, schemas, err := ClaimOptions{Decoders: decoders}.validate(op)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(wants))
	leases := make([]time.Duration, len(wants))
	for i, w := range wants {
		if w.Lease != 0 && (w.Lease < MinLease || w.Lease > MaxLease) {
			return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("lease %v is outside %v .. %v", w.Lease, MinLease, MaxLease), "job", w.ID)
		}
		ids[i], leases[i] = w.ID, w.Lease
	}
	rows, err := queries.JobClaimIDs(ctx, q, dbsqlc.JobClaimIDsParams{
		Ids: ids, Leases: leases, Kinds: kinds, Schemas: schemas, Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return nil, db.Translate(err, op)
	}
	out := make([]ClaimResult, len(rows))
	for i, r := range rows {
		out[i] = ClaimResult{Outcome: ClaimOutcome(r.Outcome), Job: fromRow(claimOutcomeRow(r))}
	}
	return out, nil
}

// UndispatchedTx returns on q, locked until q's transaction ends, up to limit
// queued and due jobs of queues that no live River dispatch carries: jobs
// created by SQL, or queued again by something that dispatched nothing. It
// looks at the first scan due jobs of each queue, in each project where the
// actor holds job.claim, in claim order; jobs for external executors and, when
// decoders is not empty, jobs of other payload versions are left out. A
// dispatch River has been running since before runningSince (River's clock)
// counts as dead, not as carrying its job (zero: every running dispatch
// counts). A worker dispatches what it returns in the same transaction. It
// refuses, with
// [db.ErrInvalidArgument], limit or scan outside 1..[MaxSweepBatch], a
// malformed queue or decoder.
func (c *Client) UndispatchedTx(ctx context.Context, q db.DBTX, queues []string, scan, limit int, decoders []Decoder, runningSince time.Time) ([]Job, error) {
	const op = "job.undispatched"
	if limit < 1 || limit > MaxSweepBatch {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("limit %d is outside 1..%d", limit, MaxSweepBatch))
	}
	if scan < 1 || scan > MaxSweepBatch {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("scan %d is outside 1..%d", scan, MaxSweepBatch))
	}
	for _, queue := range queues {
		if !ValidQueue(queue) {
			return nil, db.Refuse(db.ErrInvalidArgument, op, "invalid queue "+quote(queue))
		}
	}
	_, _, kinds, schemas, err := ClaimOptions{Decoders: decoders}.validate(op)
	if err != nil {
		return nil, err
	}
	rows, err := queries.JobUndispatched(ctx, q, dbsqlc.JobUndispatchedParams{
		Queues: queues, Scan: int32(scan), MaxJobs: int32(limit), Kinds: kinds, Schemas: schemas,
		RunningSince: runningSince, Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return nil, db.Translate(err, op)
	}
	return fromRows(rows), nil
}

// claimOutcomeRow is the job part of a docket.job_claim_ids row.
func claimOutcomeRow(r *dbsqlc.DocketJobClaimOutcome) *dbsqlc.DocketJob {
	return &dbsqlc.DocketJob{
		ID: r.ID, Project: r.Project, Kind: r.Kind, Queue: r.Queue, Priority: r.Priority, State: r.State,
		Payload: r.Payload, PayloadSchema: r.PayloadSchema, Params: r.Params, Inputs: r.Inputs,
		RequestedOutput: r.RequestedOutput, LaneID: r.LaneID, CaseID: r.CaseID, IdempotencyKey: r.IdempotencyKey,
		CompensationKind: r.CompensationKind, External: r.External, Repeatable: r.Repeatable,
		AvailableAt: r.AvailableAt, Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, Lease: r.Lease,
		BackoffBase: r.BackoffBase, BackoffCap: r.BackoffCap, BackoffJitter: r.BackoffJitter,
		LeaseGeneration: r.LeaseGeneration, ClaimToken: r.ClaimToken, ClaimedBy: r.ClaimedBy,
		ClaimedAt: r.ClaimedAt, LeaseExpiresAt: r.LeaseExpiresAt, Result: r.Result, Diagnostic: r.Diagnostic,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt,
		OutcomeToken: r.OutcomeToken,
	}
}
