package jobs

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
	"github.com/docket-dev/docket/internal/newclient"
	"github.com/docket-dev/docket/internal/replica"
	"github.com/docket-dev/docket/internal/telemetry"
)

var queries = dbsqlc.New()

// Config configures a [Client].
type Config struct {
	// Project is the project the client enqueues into, claims from and
	// lists. Empty makes a client for work by job id across projects (Get,
	// History, Verify, ClaimID, Cancel, Reconcile, ExpireLeases): an
	// operator's tool, on which Enqueue, Claim and List refuse. Grants still
	// decide, per job, what the actor may do and see.
	Project string
	// Actor is who the client acts as; every change it makes is attributed
	// to it, and its grants decide what it may do. Required.
	Actor access.Actor
	// Clock gives the instants the client passes to the database. Defaults
	// to [db.SystemClock].
	Clock db.Clock
	// TracerProvider, when not nil, traces every enqueue in a span whose
	// context is stored with the jobs it creates, for the spans that run
	// them to link to (see docs/telemetry.md). Nil: no span, and nothing
	// more is written or allocated.
	TracerProvider trace.TracerProvider
	// MeterProvider, when not nil, receives the client's metrics (jobs
	// enqueued; for a worker, see worker.Config). Nil: none.
	MeterProvider metric.MeterProvider
	// Replica, when not nil, is a pool on a hot standby of the client's
	// database, read-only: the reads that tolerate lag go there (Get,
	// GetMany, List, History, Verify, Census, ProducedBy), and
	// [Client.ReplicaLag] says how far behind it is. Every write, every
	// read a write rests on (SucceededUnder) and every …Tx read stay on the
	// pool. Nil: every read goes to the pool. See docs/cells.md.
	Replica db.Pool
}

// Client enqueues, claims and settles the jobs of one project as one actor.
// It is safe for concurrent use.
//
// Each operation comes in two forms: one that runs on the client's pool, and
// one ending in Tx that runs in the caller's transaction, so the job change
// commits or rolls back with the caller's own writes.
type Client struct {
	pool    db.Pool
	reads   replica.Reads // the reads that tolerate lag
	project string
	actor   access.Actor
	clock   db.Clock
	tel     *telemetry.Set // nil: telemetry off
	copyAt  int            // batch size from which EnqueueMany copies; 0: copyThreshold
}

// NewClient returns a client on pool. It refuses, with
// [db.ErrInvalidArgument], a nil pool, a malformed project name (empty is
// allowed: see [Config]), a malformed actor, or a MeterProvider that
// refuses docket's instruments. It does not check that the project exists or that the actor holds grants:
// the database decides that on each call.
func NewClient(pool db.Pool, cfg Config) (*Client, error) {
	clock, err := newclient.Check("jobs.new_client", pool, cfg.Actor.Validate, cfg.Clock)
	if err != nil {
		return nil, err
	}
	if cfg.Project != "" && !validProject(cfg.Project) {
		return nil, db.Refuse(db.ErrInvalidArgument, "jobs.new_client",
			"invalid project name "+quote(cfg.Project)+": want 1-63 characters of [a-z0-9._-], starting with a letter or digit")
	}
	tel, err := telemetry.New(cfg.TracerProvider, cfg.MeterProvider)
	if err != nil {
		return nil, db.Refuse(db.ErrInvalidArgument, "jobs.new_client", err.Error())
	}
	return &Client{pool: pool, reads: replica.New(pool, cfg.Replica), project: cfg.Project, actor: cfg.Actor, clock: clock, tel: tel}, nil
}

// Project returns the client's project.
func (c *Client) Project() string { return c.project }

// Actor returns who the client acts as.
func (c *Client) Actor() access.Actor { return c.actor }

// Clock returns the client's clock.
func (c *Client) Clock() db.Clock { return c.clock }

// ReplicaLag says how far behind the primary the client's reads that
// tolerate lag may be (see [Config.Replica]): asked before such a read, it
// bounds it. Without a replica it reports the primary, without asking.
func (c *Client) ReplicaLag(ctx context.Context) (db.Lag, error) {
	return c.reads.Lag(ctx, c.clock, "job.replica_lag")
}

// Get returns job id, or [db.ErrNotFound] when there is none or the actor
// holds no job capability (job.view, job.create, job.claim, job.cancel,
// job.reconcile) on its project: a job the actor may not see is not there,
// and the error says "job 42 not found or not visible to user:ana".
// A job a prune removed is not there either: its error is then also a
// [*PrunedError] naming the prune (errors.As), when the actor may see the
// jobs of the prune's project.
func (c *Client) Get(ctx context.Context, id int64) (Job, error) {
	return c.get(ctx, c.reads.DB, id)
}

// SucceededUnder reports whether the job of lease l succeeded under l's
// claim: a completion whose reply was lost committed. It is false for a job
// that succeeded under another claim, or that the client's actor may not
// read. A job read with [Client.Get] names no token, so this is how a
// holder learns that its outcome was recorded.
func (c *Client) SucceededUnder(ctx context.Context, l Lease) (bool, error) {
	ok, err := queries.JobSucceededUnder(ctx, c.pool, pgUUID(l.Token), l.JobID, string(c.actor))
	if err != nil {
		return false, db.Translate(err, "job.succeeded_under", "job", l.JobID)
	}
	return ok, nil
}

// GetTx is [Client.Get] read in tx, the caller's transaction: it sees what tx
// has written and not yet committed, and writes nothing itself.
func (c *Client) GetTx(ctx context.Context, tx pgx.Tx, id int64) (Job, error) {
	return c.get(ctx, tx, id)
}

// get is [Client.Get] on q: the client's pool or the caller's transaction.
func (c *Client) get(ctx context.Context, q db.DBTX, id int64) (Job, error) {
	row, err := queries.JobGet(ctx, q, id, string(c.actor))
	if errors.Is(err, pgx.ErrNoRows) {
		if p, perr := queries.JobPruned(ctx, q, id, string(c.actor)); perr == nil {
			return Job{}, &PrunedError{Job: id, Prune: p.ID, Project: p.Project, At: p.At.UTC(), By: access.Actor(p.Actor)}
		}
	}
	if err != nil {
		return Job{}, db.TranslateRead(err, "job.get", "job", id, string(c.actor))
	}
	return fromRow(row), nil
}

// PrunedError is the error of reading a job a prune removed (see
// docs/retention.md): which prune, when, and by whom. It is
// [db.ErrNotFound] too: the job is not there.
type PrunedError struct {
	Job     int64
	Prune   int64 // the docket.prunes row that records the removal
	Project string
	At      time.Time
	By      access.Actor
}

func (e *PrunedError) Error() string {
	return fmt.Sprintf("job.get: job %d was pruned at %s by prune %d (project %s, by %s): not found",
		e.Job, e.At.Format(time.RFC3339), e.Prune, e.Project, e.By)
}

// Is makes a PrunedError [db.ErrNotFound].
func (e *PrunedError) Is(target error) bool { return target == db.ErrNotFound }

// GetMany returns the jobs of ids in id order, leaving out those Get would
// answer [db.ErrNotFound] for: one round trip for a batch of reads. It refuses more than
// [MaxSweepBatch] ids with [db.ErrInvalidArgument].
func (c *Client) GetMany(ctx context.Context, ids []int64) ([]Job, error) {
	return c.getMany(ctx, c.reads.DB, ids)
}

// GetManyTx is [Client.GetMany] read in tx, the caller's transaction: it sees what tx
// has written and not yet committed, and writes nothing itself.
func (c *Client) GetManyTx(ctx context.Context, tx pgx.Tx, ids []int64) ([]Job, error) {
	return c.getMany(ctx, tx, ids)
}

// getMany is [Client.GetMany] on q: the client's pool or the caller's transaction.
func (c *Client) getMany(ctx context.Context, q db.DBTX, ids []int64) ([]Job, error) {
	if len(ids) > MaxSweepBatch {
		return nil, db.Refuse(db.ErrInvalidArgument, "job.get_many", fmt.Sprintf("%d ids is more than %d", len(ids), MaxSweepBatch))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := queries.JobGetMany(ctx, q, ids, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "job.get_many")
	}
	return fromRows(rows), nil
}

// needProject refuses op on a client made without a project.
func (c *Client) needProject(op string) error {
	if c.project == "" {
		return db.Refuse(db.ErrInvalidArgument, op, "this client has no project: set Config.Project to enqueue, claim or list")
	}
	return nil
}

// inTx runs fn in a transaction on the client's pool.
func (c *Client) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return db.WithTx(ctx, c.pool, fn)
}

var projectPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func validProject(name string) bool { return projectPattern.MatchString(name) }

func quote(s string) string { return strconv.Quote(s) }
