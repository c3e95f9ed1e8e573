package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
	"github.com/docket-dev/docket/internal/telemetry"
)

// Enqueued is one job as enqueueing left it: created now, or found under its
// idempotency key (Duplicate).
type Enqueued struct {
	Job       Job
	Duplicate bool
}

// Receipt is what [Client.EnqueueMany] reports for one spec: the job's id and
// whether it already existed under its idempotency key.
type Receipt struct {
	ID        int64
	Duplicate bool
}

// Enqueue creates the job spec describes, in its own transaction, and returns
// it. See [Client.EnqueueTx] for what it refuses.
func (c *Client) Enqueue(ctx context.Context, spec Spec) (Enqueued, error) {
	return c.enqueue(ctx, c.pool, spec)
}

// EnqueueTx creates the job spec describes in tx, typically the caller's
// transaction: the job and its first event commit with the caller's writes or
// not at all. A spec whose idempotency key names an existing job of the same
// kind in the project returns that job, Duplicate, when it is the same
// request (see [Spec.IdempotencyKey]).
//
// It refuses, writing nothing: a spec that fails [Spec.Validate] with
// [db.ErrInvalidArgument]; an actor without an explicit job.create grant on
// the project, or an unknown project, with [db.ErrNotPermitted]; an
// idempotency key held by a job that is another request (see
// [Spec.IdempotencyKey]) with [db.ErrIdempotencyConflict].
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, spec Spec) (Enqueued, error) {
	return c.enqueue(ctx, tx, spec)
}

// enqueue is [Client.EnqueueTx] on q: the client's pool or the caller's
// transaction.
func (c *Client) enqueue(ctx context.Context, q db.DBTX, spec Spec) (Enqueued, error) {
	if c.tel != nil {
		return c.enqueueObserved(ctx, q, spec)
	}
	return c.enqueueOne(ctx, q, spec, nil)
}

// enqueueOne is [Client.EnqueueTx] on q, storing trace with the job when it
// is not nil (see enqueueObserved).
func (c *Client) enqueueOne(ctx context.Context, q db.DBTX, spec Spec, trace *telemetry.Carrier) (Enqueued, error) {
	if err := c.needProject("job.enqueue"); err != nil {
		return Enqueued{}, err
	}
	p, err := c.enqueueParams(c.clock.Now(), []Spec{spec})
	if err != nil {
		return Enqueued{}, err
	}
	// One job takes the scalar path, with no arrays to unpack.
	inputs := spec.Inputs
	if inputs == nil {
		inputs = []string{}
	}
	one := dbsqlc.JobEnqueueOneParams{
		Project: p.Project, Actor: p.Actor, Now: p.Now,
		Kind: p.Kinds[0], Queue: p.Queues[0], Priority: p.Priorities[0], Payload: p.Payloads[0],
		PayloadSchema: p.PayloadSchemas[0], Key: p.Keys[0], AvailableAt: p.AvailableAt[0],
		MaxAttempts: p.MaxAttempts[0], Repeatable: p.Repeatable[0], External: p.External[0],
		Lease: p.Leases[0], BackoffBase: p.BackoffBase[0], BackoffCap: p.BackoffCap[0],
		BackoffJitter: p.BackoffJitter[0], Params: p.Params[0], Inputs: inputs, Output: p.Outputs[0],
		LaneID: p.LaneIds[0], CaseID: p.CaseIds[0], CompensationKind: p.CompensationKinds[0],
		OutputKind: p.OutputKinds[0], Root: p.Roots[0], Budget: spec.Budget.json(),
	}
	var rows []*dbsqlc.DocketJobEnqueued
	if trace == nil {
		rows, err = queries.JobEnqueueOne(ctx, q, one)
	} else {
		rows, err = queries.JobEnqueueOneTraced(ctx, q, tracedParams(one, *trace))
	}
	if err != nil {
		return Enqueued{}, db.Translate(err, "job.enqueue", "project", c.project, "kind", spec.Kind)
	}
	if len(rows) != 1 {
		return Enqueued{}, fmt.Errorf("job.enqueue: %d rows for one job", len(rows))
	}
	return fromEnqueuedRow(rows[0]), nil
}

// EnqueueMany creates the jobs specs describe, in one transaction of its
// own, and reports each one's id in spec order. See [Client.EnqueueManyTx].
func (c *Client) EnqueueMany(ctx context.Context, specs []Spec) ([]Receipt, error) {
	return c.enqueueMany(ctx, c.pool, specs)
}

// EnqueueManyTx creates the jobs specs describe in tx (up to
// [MaxEnqueueBatch]), with their first events, and reports each one's id in
// spec order. A batch of fewer than 1,000 specs goes in one statement, as
// arrays; a larger one is copied (COPY FROM) into docket.job_intake, whose
// trigger holds the same rules, and its ids read back in a second statement
// (see docs/jobs.md). Idempotency keys behave as in [Client.EnqueueTx], also between
// specs of the batch. The batch is all or nothing: a refusal of any spec, as
// [Client.EnqueueTx] describes, or an empty or oversized batch
// ([db.ErrInvalidArgument]) writes nothing.
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) EnqueueManyTx(ctx context.Context, tx pgx.Tx, specs []Spec) ([]Receipt, error) {
	return c.enqueueMany(ctx, tx, specs)
}

// enqueueMany is [Client.EnqueueManyTx] on q: the client's pool or the caller's transaction.
func (c *Client) enqueueMany(ctx context.Context, q db.DBTX, specs []Spec) ([]Receipt, error) {
	if c.tel != nil {
		return c.enqueueManyObserved(ctx, q, specs)
	}
	return c.enqueueBatch(ctx, q, specs)
}

// enqueueBatch is [Client.EnqueueManyTx] on q, unobserved.
func (c *Client) enqueueBatch(ctx context.Context, q db.DBTX, specs []Spec) ([]Receipt, error) {
	if err := c.needProject("job.enqueue_many"); err != nil {
		return nil, err
	}
	if len(specs) == 0 || len(specs) > MaxEnqueueBatch {
		return nil, db.Refuse(db.ErrInvalidArgument, "job.enqueue_many",
			fmt.Sprintf("batch of %d specs is outside 1..%d", len(specs), MaxEnqueueBatch))
	}
	params, err := c.enqueueParams(c.clock.Now(), specs)
	if err != nil {
		return nil, err
	}
	copyAt := c.copyAt
	if copyAt == 0 {
		copyAt = copyThreshold
	}
	if len(specs) >= copyAt {
		if q == db.DBTX(c.pool) {
			// The COPY and the read of its receipts share a transaction.
			var out []Receipt
			err := c.inTx(ctx, func(tx pgx.Tx) error {
				var err error
				out, err = c.enqueueCopy(ctx, tx, params)
				return err
			})
			return out, err
		}
		if cq, ok := q.(copier); ok {
			return c.enqueueCopy(ctx, cq, params)
		}
	}
	rows, err := queries.JobEnqueueMany(ctx, q, params)
	if err != nil {
		return nil, db.Translate(err, "job.enqueue_many", "project", c.project)
	}
	out := make([]Receipt, len(rows))
	for i, r := range rows {
		out[i] = Receipt{ID: r.ID, Duplicate: r.Duplicate}
	}
	return out, nil
}

// copyThreshold is the batch size from which [Client.EnqueueManyTx] copies
// its specs into docket.job_intake (COPY FROM) rather than passing them as
// arrays to docket.job_enqueue_many: below it, the array path's one round
// trip costs less than COPY's two and the intake's extra writes.
var copyThreshold = 1000

// copier is what the COPY path needs of its connection: a pgx.Tx.
type copier interface {
	db.DBTX
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error)
}

// intakeColumns are the columns of docket.job_intake a COPY fills, in the
// order enqueueCopy's rows give them.
var intakeColumns = []string{
	"intake", "ord", "project", "actor", "at", "kind", "queue", "priority", "payload", "payload_schema",
	"idempotency_key", "available_at", "max_attempts", "repeatable", "external", "lease", "backoff_base",
	"backoff_cap", "backoff_jitter", "params", "inputs", "output", "lane_id", "case_id", "compensation_kind",
	"output_kind", "root", "budget",
}

// enqueueCopy enqueues the batch p lays out by COPY into docket.job_intake,
// whose statement trigger checks and enqueues it as docket.job_enqueue_many
// would (every refusal the same) and records each job's receipt under a
// fresh intake id; it then reads the receipts back, in spec order. Both run
// in q's transaction.
func (c *Client) enqueueCopy(ctx context.Context, q copier, p dbsqlc.JobEnqueueManyParams) ([]Receipt, error) {
	intake, err := uuid.NewRandom()
	if err != nil {
		return nil, fmt.Errorf("job.enqueue_many: intake id: %w", err)
	}
	n := len(p.Kinds)
	// The intake id as pgx encodes it directly, built once for every row.
	intakeID := pgUUID(intake)
	row := make([]any, len(intakeColumns))
	i := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		var budget any
		if p.Budgets != nil {
			budget = p.Budgets[i]
		}
		row = append(row[:0], intakeID, int32(i+1), p.Project, p.Actor, p.Now, p.Kinds[i], p.Queues[i],
			p.Priorities[i], p.Payloads[i], p.PayloadSchemas[i], p.Keys[i], p.AvailableAt[i], p.MaxAttempts[i],
			p.Repeatable[i], p.External[i], p.Leases[i], p.BackoffBase[i], p.BackoffCap[i], p.BackoffJitter[i],
			p.Params[i], p.Inputs[i], p.Outputs[i], p.LaneIds[i], p.CaseIds[i], p.CompensationKinds[i],
			p.OutputKinds[i], p.Roots[i], budget)
		i++
		return row, nil
	})
	if _, err := q.CopyFrom(ctx, pgx.Identifier{db.Schema, "job_intake"}, intakeColumns, src); err != nil {
		return nil, db.Translate(err, "job.enqueue_many", "project", c.project)
	}
	rows, err := queries.JobIntakeTake(ctx, q, intakeID, p.Actor)
	if err != nil {
		return nil, db.Translate(err, "job.enqueue_many", "project", c.project)
	}
	if len(rows) != n {
		return nil, fmt.Errorf("job.enqueue_many: %d receipts for %d specs", len(rows), n)
	}
	out := make([]Receipt, n)
	for k, r := range rows {
		if int(r.Ord) != k+1 {
			return nil, fmt.Errorf("job.enqueue_many: receipt %d out of order (ordinal %d)", k+1, r.Ord)
		}
		out[k] = Receipt{ID: r.ID, Duplicate: r.Duplicate}
	}
	return out, nil
}

// enqueueParams validates specs and lays them out as the parallel arrays
// docket.job_enqueue_many takes.
func (c *Client) enqueueParams(now time.Time, specs []Spec) (dbsqlc.JobEnqueueManyParams, error) {
	n := len(specs)
	p := dbsqlc.JobEnqueueManyParams{
		Project: c.project, Actor: string(c.actor), Now: now,
		Kinds: make([]string, n), Queues: make([]string, n), Priorities: make([]int16, n),
		Payloads: make([]json.RawMessage, n), PayloadSchemas: make([]int32, n), Keys: make([]string, n),
		AvailableAt: make([]time.Time, n), MaxAttempts: make([]int32, n), Repeatable: make([]bool, n),
		External: make([]bool, n), Leases: make([]time.Duration, n), BackoffBase: make([]time.Duration, n),
		BackoffCap: make([]time.Duration, n), BackoffJitter: make([]float64, n), Params: make([]json.RawMessage, n),
		Inputs: make([]json.RawMessage, n), Outputs: make([]string, n), LaneIds: make([]int64, n),
		CaseIds: make([]int64, n), CompensationKinds: make([]string, n),
		OutputKinds: make([]string, n), Roots: make([]string, n),
	}
	null := json.RawMessage("null")
	for i, s := range specs {
		if err := s.Validate(); err != nil {
			if n > 1 {
				return p, fmt.Errorf("spec %d: %w", i, err)
			}
			return p, err
		}
		s = s.Resolved(now)
		p.Kinds[i] = s.Kind
		p.Queues[i] = s.Queue
		p.Priorities[i] = int16(s.Priority)
		p.Payloads[i] = s.Payload
		p.PayloadSchemas[i] = int32(s.PayloadSchema)
		p.Keys[i] = s.IdempotencyKey
		p.AvailableAt[i] = s.AvailableAt
		p.MaxAttempts[i] = int32(s.Retry.MaxAttempts)
		p.Repeatable[i] = s.Repeatable
		p.External[i] = s.External
		p.Leases[i] = s.Lease
		p.BackoffBase[i] = s.Retry.Base
		p.BackoffCap[i] = s.Retry.Cap
		p.BackoffJitter[i] = s.Retry.Jitter
		p.Params[i] = null
		if s.Params != nil {
			p.Params[i] = s.Params
		}
		p.Inputs[i] = null
		if len(s.Inputs) > 0 {
			in, err := json.Marshal(s.Inputs)
			if err != nil {
				return p, invalid("kind %s: inputs: %v", s.Kind, err)
			}
			p.Inputs[i] = in
		}
		p.Outputs[i] = s.Output.Asset
		p.OutputKinds[i] = s.Output.Kind
		p.Roots[i] = s.Output.Root
		p.LaneIds[i] = s.LaneID
		p.CaseIds[i] = s.CaseID
		p.CompensationKinds[i] = s.CompensationKind
		if !s.Budget.IsZero() {
			if p.Budgets == nil {
				p.Budgets = make([]json.RawMessage, n)
				for k := range p.Budgets {
					p.Budgets[k] = null
				}
			}
			p.Budgets[i] = s.Budget.json()
		}
	}
	return p, nil
}
