package jobs

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
)

// Bounds of handler revisions.
const (
	// MaxRevisionLen is the longest handler revision, in characters.
	MaxRevisionLen = 100
	// MaxPinRevisions is the most revisions one pin names.
	MaxPinRevisions = 8
	// MaxPinBatch is the most jobs one [Client.Pin] pins.
	MaxPinBatch = 1000
)

// ValidRevision reports whether r is a well-formed handler revision:
// 1-[MaxRevisionLen] characters, none a space or a control character, as
// docket.valid_job_revision.
func ValidRevision(r string) bool {
	if r == "" || len([]rune(r)) > MaxRevisionLen {
		return false
	}
	return !strings.ContainsFunc(r, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) })
}

func revisionRule(r string) string {
	return fmt.Sprintf("invalid revision %s: want 1-%d characters, none a space or a control character", quote(r), MaxRevisionLen)
}

// Pin pins queued jobs to the handler revisions they may run under. See
// [Client.PinTx].
func (c *Client) Pin(ctx context.Context, ids []int64, revisions []string) ([]Job, error) {
	return c.pin(ctx, c.pool, ids, revisions)
}

// PinTx pins the queued jobs ids in tx to revisions, the handler revisions
// ([Decoder.Revision]) they may run under, and returns them by id. A claim
// then hands a pinned job only to a claimant whose revision for its kind is
// among them, never to one that names none; the job stays [Queued], and keeps
// its pin when a failed attempt queues it again. No revisions unpins: any
// revision may run the jobs again. Fail closed: a job pinned to revisions no
// deployment runs is never claimed, and [Filter.Unrunnable] (the view
// docket.jobs_unrunnable) lists it. Each job whose pin changes records an
// event naming its pin; pinning a job as it is pinned records nothing.
//
// It needs job.pin on each job's project. It refuses, changing nothing: no
// ids or over [MaxPinBatch], an id named twice, over [MaxPinRevisions]
// revisions, a malformed revision ([db.ErrInvalidArgument]); an unknown job
// ([db.ErrNotFound]); an actor without job.pin on a job's project
// ([db.ErrNotPermitted]); a job that is not queued
// ([db.ErrIllegalTransition]).
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) PinTx(ctx context.Context, tx pgx.Tx, ids []int64, revisions []string) ([]Job, error) {
	return c.pin(ctx, tx, ids, revisions)
}

// pin is [Client.PinTx] on q: the client's pool or the caller's transaction.
func (c *Client) pin(ctx context.Context, q db.DBTX, ids []int64, revisions []string) ([]Job, error) {
	const op = "job.pin"
	if len(ids) == 0 || len(ids) > MaxPinBatch {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("%d jobs is outside 1..%d", len(ids), MaxPinBatch))
	}
	if len(revisions) > MaxPinRevisions {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("%d revisions is over %d", len(revisions), MaxPinRevisions))
	}
	for _, r := range revisions {
		if !ValidRevision(r) {
			return nil, db.Refuse(db.ErrInvalidArgument, op, revisionRule(r))
		}
	}
	if len(revisions) == 0 {
		revisions = nil // unpin: NULL
	}
	rows, err := queries.JobPin(ctx, q, ids, revisions, string(c.actor), c.clock.Now())
	if err != nil {
		return nil, db.Translate(err, op, "jobs", ids)
	}
	return fromRows(rows), nil
}
