package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
	"github.com/docket-dev/docket/internal/jobclaim"
)

func init() {
	jobclaim.Register(func(client any) any { return store{client.(*Client)} })
}

// store is the worker-only part of a [Client]; see package jobclaim.
type store struct{ c *Client }

var _ jobclaim.Store[Job, Decoder] = store{}

// ClaimQueueTx: see [jobclaim.Store].
func (s store) ClaimQueueTx(ctx context.Context, tx pgx.Tx, queue string, limit int, decoders []Decoder, leases map[string]time.Duration,
	from map[string]jobclaim.Position) ([]Job, error) {
	c := s.c
	const op = "job.claim_queue"
	if !ValidQueue(queue) {
		return nil, db.Refuse(db.ErrInvalidArgument, op, "invalid queue "+quote(queue))
	}
	if limit < 1 || limit > MaxClaimBatch {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("limit %d is outside 1..%d", limit, MaxClaimBatch))
	}
	max, _, kinds, schemas, revisions, err := ClaimOptions{Limit: limit, Decoders: decoders}.validate(op)
	if err != nil {
		return nil, err
	}
	for k, d := range leases {
		if d != 0 && (d < MinLease || d > MaxLease) {
			return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("kind %s: lease %v is outside %v .. %v", k, d, MinLease, MaxLease))
		}
	}
	var ls []time.Duration // zero: the job's own lease
	if len(leases) > 0 && len(kinds) > 0 {
		ls = make([]time.Duration, len(kinds))
		for i, k := range kinds {
			ls[i] = leases[k]
		}
	}
	p := dbsqlc.JobClaimQueueParams{
		Queue: queue, MaxJobs: max, Kinds: kinds, Schemas: schemas, Leases: ls, Actor: string(c.actor), Now: c.clock.Now(),
		Revisions: revisions,
	}
	if len(from) > MaxClaimBatch {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("%d claim positions: at most %d", len(from), MaxClaimBatch))
	}
	for project, at := range from {
		if !validProject(project) || at.Priority < MinPriority || at.Priority > MaxPriority || at.ID < 1 || at.AvailableAt.IsZero() {
			return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid claim position of project %s: priority %d, id %d, available at %v",
				quote(project), at.Priority, at.ID, at.AvailableAt))
		}
		p.FromProjects = append(p.FromProjects, project)
		p.FromPriorities = append(p.FromPriorities, int16(at.Priority))
		p.FromAt = append(p.FromAt, at.AvailableAt)
		p.FromIds = append(p.FromIds, at.ID)
	}
	rows, err := queries.JobClaimQueue(ctx, tx, p)
	if err != nil {
		return nil, db.Translate(err, op, "queue", queue)
	}
	return fromClaimRows(rows), nil
}
