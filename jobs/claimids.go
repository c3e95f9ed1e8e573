package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/dbsqlc"
	"github.com/docket-dev/docket/internal/jobclaim"
)

func init() {
	jobclaim.Register(func(client any) any { return store{client.(*Client)} })
}

// store is the worker-only part of a [Client]; see package jobclaim.
type store struct{ c *Client }

var _ jobclaim.Store[Job, Decoder] = store{}

// ClaimIDsTx: see [jobclaim.Store].
func (s store) ClaimIDsTx(ctx context.Context, tx pgx.Tx, wants []jobclaim.Want, decoders []Decoder) ([]jobclaim.Result[Job], error) {
	c := s.c
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
	rows, err := queries.JobClaimIDs(ctx, tx, dbsqlc.JobClaimIDsParams{
		Ids: ids, Leases: leases, Kinds: kinds, Schemas: schemas, Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return nil, db.Translate(err, op)
	}
	out := make([]jobclaim.Result[Job], len(rows))
	for i, r := range rows {
		out[i] = jobclaim.Result[Job]{Outcome: jobclaim.Outcome(r.Outcome), Job: fromRow(claimOutcomeRow(r))}
	}
	return out, nil
}

// UndispatchedTx: see [jobclaim.Store].
func (s store) UndispatchedTx(ctx context.Context, tx pgx.Tx, queues []string, scan, limit int, decoders []Decoder, runningSince time.Time) ([]Job, error) {
	c := s.c
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
	rows, err := queries.JobUndispatched(ctx, tx, dbsqlc.JobUndispatchedParams{
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
