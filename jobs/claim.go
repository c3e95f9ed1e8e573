package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
)

// Decoder names a payload version a claimant can decode: a kind and one of
// its payload schemas, and the handler revision it runs for the kind.
type Decoder struct {
	Kind   string
	Schema int
	// Revision names the claimant's handler code for Kind (a commit, a
	// release): 1-[MaxRevisionLen] characters, none a space or a control
	// character; empty names none. Every claim records it, every call on
	// the lease must come from it, and only a claimant running one of a
	// pinned job's revisions ([Client.Pin]) is handed that job. The
	// decoders of one kind name one revision.
	Revision string
}

// ClaimOptions shape a claim.
type ClaimOptions struct {
	// Limit is the most jobs one claim takes: 1..[MaxClaimBatch]. Defaults
	// to 1.
	Limit int
	// Lease is how long the claim holds each job: 1 s .. 24 h. Zero means each
	// job's own lease.
	Lease time.Duration
	// Decoders, when not empty, are the only (kind, payload schema) pairs the
	// claimant is handed: a job of any other is left for a deployment that
	// can decode it.
	Decoders []Decoder
}

func (o ClaimOptions) validate(op string) (limit int32, lease *time.Duration, kinds []string, schemas []int32, revisions []string, err error) {
	if o.Limit == 0 {
		o.Limit = 1
	}
	if o.Limit < 1 || o.Limit > MaxClaimBatch {
		return 0, nil, nil, nil, nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("limit %d is outside 1..%d", o.Limit, MaxClaimBatch))
	}
	if o.Lease != 0 {
		if o.Lease < MinLease || o.Lease > MaxLease {
			return 0, nil, nil, nil, nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("lease %v is outside %v .. %v", o.Lease, MinLease, MaxLease))
		}
		lease = &o.Lease
	}
	if len(o.Decoders) > 0 {
		kinds = make([]string, len(o.Decoders))
		schemas = make([]int32, len(o.Decoders))
		revisions = make([]string, len(o.Decoders))
		byKind := map[string]string{}
		for i, d := range o.Decoders {
			if !ValidKind(d.Kind) || d.Schema < 1 || d.Schema > math32 {
				return 0, nil, nil, nil, nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid decoder %s@%d", d.Kind, d.Schema))
			}
			if d.Revision != "" && !ValidRevision(d.Revision) {
				return 0, nil, nil, nil, nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("decoder %s@%d: %s", d.Kind, d.Schema, revisionRule(d.Revision)))
			}
			if r, ok := byKind[d.Kind]; ok && r != d.Revision {
				return 0, nil, nil, nil, nil, db.Refuse(db.ErrInvalidArgument, op, "kind "+d.Kind+" is named with two revisions: a deployment runs one revision of a kind")
			}
			byKind[d.Kind] = d.Revision
			kinds[i], schemas[i], revisions[i] = d.Kind, int32(d.Schema), d.Revision
		}
	}
	return int32(o.Limit), lease, kinds, schemas, revisions, nil
}

// Claim claims up to opts.Limit due jobs of queue in the client's project. See
// [Client.ClaimTx].
func (c *Client) Claim(ctx context.Context, queue string, opts ClaimOptions) ([]Job, error) {
	return c.claim(ctx, c.pool, queue, opts)
}

// ClaimTx claims up to opts.Limit due jobs of queue in tx: queued jobs first by
// priority, available_at and id, then expired claims of repeatable jobs with
// attempts left, taken over. Each claimed job has a fresh token, a new lease
// generation and one more attempt; [Job.Lease] is what the holder keeps. Jobs
// another claimant has locked are skipped, never waited for, so concurrent
// claimants get distinct jobs. Each claim records the decoders' revision for
// the job's kind ([Job.ClaimedRevision]); a job pinned to revisions
// ([Client.Pin]) is handed only to a claimant running one of them.
//
// Nothing due is an empty answer, not an error, and so is an actor without
// the job.claim grant on the project: it learns nothing a claimant with
// nothing to do would not. It refuses, with [db.ErrInvalidArgument], a
// malformed queue or options.
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) ClaimTx(ctx context.Context, tx pgx.Tx, queue string, opts ClaimOptions) ([]Job, error) {
	return c.claim(ctx, tx, queue, opts)
}

// claim is [Client.ClaimTx] on q: the client's pool or the caller's transaction.
func (c *Client) claim(ctx context.Context, q db.DBTX, queue string, opts ClaimOptions) ([]Job, error) {
	const op = "job.claim"
	if err := c.needProject(op); err != nil {
		return nil, err
	}
	if !ValidQueue(queue) {
		return nil, db.Refuse(db.ErrInvalidArgument, op, "invalid queue "+quote(queue)+": want 1-63 characters of [a-z0-9_-], starting with a letter or digit")
	}
	limit, lease, kinds, schemas, revisions, err := opts.validate(op)
	if err != nil {
		return nil, err
	}
	rows, err := queries.JobClaim(ctx, q, dbsqlc.JobClaimParams{
		Project: c.project, Queue: queue, MaxJobs: limit, Lease: lease, Kinds: kinds, Schemas: schemas,
		Actor: string(c.actor), Now: c.clock.Now(), Revisions: revisions,
	})
	if err != nil {
		return nil, db.Translate(err, op, "project", c.project, "queue", queue)
	}
	return fromClaimRows(rows), nil
}

// ClaimID claims job id if it is claimable now. See [Client.ClaimIDTx].
func (c *Client) ClaimID(ctx context.Context, id int64, opts ClaimOptions) (Job, bool, error) {
	return c.claimID(ctx, c.pool, id, opts)
}

// ClaimIDTx claims job id in tx when it is queued and due, or claimed with an
// expired lease and repeatable with attempts left; it reports false, with no
// error, when it is not (unknown, held, not yet due, finished, locked by
// another claimant) or when the actor lacks job.claim on its project. The job
// may belong to any project. opts.Limit is ignored.
//
// It refuses malformed options with [db.ErrInvalidArgument], and a claimable
// job whose payload schema is not among opts.Decoders, or that is pinned
// ([Client.Pin]) to revisions that do not include the decoders' revision for
// its kind, with [db.ErrRefusedRevision], leaving it as it was for a
// deployment that can run it.
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) ClaimIDTx(ctx context.Context, tx pgx.Tx, id int64, opts ClaimOptions) (Job, bool, error) {
	return c.claimID(ctx, tx, id, opts)
}

// claimID is [Client.ClaimIDTx] on q: the client's pool or the caller's transaction.
func (c *Client) claimID(ctx context.Context, q db.DBTX, id int64, opts ClaimOptions) (Job, bool, error) {
	const op = "job.claim_id"
	opts.Limit = 1
	_, lease, kinds, schemas, revisions, err := opts.validate(op)
	if err != nil {
		return Job{}, false, err
	}
	rows, err := queries.JobClaimID(ctx, q, dbsqlc.JobClaimIDParams{
		ID: id, Lease: lease, Kinds: kinds, Schemas: schemas, Actor: string(c.actor), Now: c.clock.Now(), Revisions: revisions,
	})
	if err != nil {
		return Job{}, false, db.Translate(err, op, "job", id)
	}
	if len(rows) == 0 {
		return Job{}, false, nil
	}
	return fromClaimRow(rows[0]), true, nil
}

// Renew extends the live lease l to the clock's now plus d (0: the job's own
// lease). See [Client.RenewTx].
func (c *Client) Renew(ctx context.Context, l Lease, d time.Duration) (Job, error) {
	return c.renew(ctx, c.pool, l, d)
}

// RenewTx extends the live lease l in tx to now plus d (0: the job's own
// lease); a lease never shortens. Renewal records no event.
//
// It refuses, changing nothing: d outside 1 s .. 24 h with
// [db.ErrInvalidArgument]; an unknown job with [db.ErrNotFound]; a token that
// no longer holds a live lease (it expired, another claimant took the job
// over, it was released, completed or cancelled), or a lease whose Revision
// is not the one that claimed the job, with [db.ErrStaleClaim]; a client
// whose actor is not the lease's holder, or no longer holds job.claim on the
// job's project, with [db.ErrNotPermitted] (a token alone is not enough); a
// now before the claim with [db.ErrClockSkew]. A holder that gets
// ErrStaleClaim or ErrNotPermitted must stop working on the job.
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) RenewTx(ctx context.Context, tx pgx.Tx, l Lease, d time.Duration) (Job, error) {
	return c.renew(ctx, tx, l, d)
}

// renew is [Client.RenewTx] on q: the client's pool or the caller's transaction.
func (c *Client) renew(ctx context.Context, q db.DBTX, l Lease, d time.Duration) (Job, error) {
	const op = "job.renew"
	var lease *time.Duration
	if d != 0 {
		if d < MinLease || d > MaxLease {
			return Job{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("lease %v is outside %v .. %v", d, MinLease, MaxLease), "job", l.JobID)
		}
		lease = &d
	}
	row, err := queries.JobRenew(ctx, q, dbsqlc.JobRenewParams{
		ID: l.JobID, Token: pgUUID(l.Token), Lease: lease, Actor: string(c.actor), Now: c.clock.Now(), Revision: optional(l.Revision),
	})
	if err != nil {
		return Job{}, db.Translate(err, op, "job", l.JobID)
	}
	j := fromRow(row)
	j.token = l.Token // the renewed lease is the same claim's
	return j, nil
}

// Release gives lease l back. See [Client.ReleaseTx].
func (c *Client) Release(ctx context.Context, l Lease, availableAt time.Time, reason string) (Job, error) {
	return c.release(ctx, c.pool, l, availableAt, reason)
}

// ReleaseTx gives the live lease l back in tx without using up anything but
// the attempt already counted: the job is queued again, claimable from
// availableAt (zero, or earlier than now: now), with reason as its
// diagnostic. A job released on its last attempt has none left and becomes
// [Dead].
//
// It refuses, changing nothing: an unknown job with [db.ErrNotFound]; a token
// that does not hold a live lease, or a lease from another revision than the
// claim's, with [db.ErrStaleClaim]; an actor that is not the lease's holder
// or no longer holds job.claim, with [db.ErrNotPermitted]; a now before the
// claim with [db.ErrClockSkew].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) ReleaseTx(ctx context.Context, tx pgx.Tx, l Lease, availableAt time.Time, reason string) (Job, error) {
	return c.release(ctx, tx, l, availableAt, reason)
}

// release is [Client.ReleaseTx] on q: the client's pool or the caller's transaction.
func (c *Client) release(ctx context.Context, q db.DBTX, l Lease, availableAt time.Time, reason string) (Job, error) {
	var at *time.Time
	if !availableAt.IsZero() {
		at = &availableAt
	}
	row, err := queries.JobRelease(ctx, q, dbsqlc.JobReleaseParams{
		ID: l.JobID, Token: pgUUID(l.Token), AvailableAt: at, Reason: optional(reason), Actor: string(c.actor), Now: c.clock.Now(),
		Revision: optional(l.Revision),
	})
	if err != nil {
		return Job{}, db.Translate(err, "job.release", "job", l.JobID)
	}
	return fromRow(row), nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
