// Package jobclaim is the worker's side door into the job store: the claim
// of a batch of a queue's due jobs across every project the worker may claim
// in. Only docket's worker uses it, so it is not part of package jobs'
// public API.
//
// Package jobs implements [Store] and registers it at init; jobclaim cannot
// import jobs (jobs imports it), so the store is generic in the job and
// decoder types, and [Of] is instantiated with jobs.Job and jobs.Decoder:
//
//	store := jobclaim.Of[jobs.Job, jobs.Decoder](client)
package jobclaim

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Store is the worker-only part of a job client, J and D being jobs.Job and
// jobs.Decoder.
type Store[J, D any] interface {
	// ClaimQueueTx claims in tx up to limit due jobs of queue, in every
	// project where the actor holds job.claim, in one statement: queued
	// jobs not for external executors, by priority, available_at and id, of
	// the payload versions decoders names (empty: any). Each holds its lease
	// for leases[its kind] when that is set and the kind is a decoder's,
	// else for the job's own. Locked
	// jobs are skipped, never waited for. Nothing due is an empty answer.
	//
	// A project that from names is read from that position on: its jobs
	// at or after it, in the same order (see [Position]); the others, and
	// all when from is empty, from the head of the queue.
	//
	// It refuses, changing nothing, with db.ErrInvalidArgument: a malformed
	// queue, limit outside 1..jobs.MaxClaimBatch, a malformed decoder, a
	// lease outside 1 s .. 24 h, a malformed position.
	ClaimQueueTx(ctx context.Context, tx pgx.Tx, queue string, limit int, decoders []D, leases map[string]time.Duration,
		from map[string]Position) ([]J, error)
}

// Position is where a claim begins reading a project's queue: the claim
// order's key (priority, available_at, id) of a job, most often the first
// its last claim of the project took. A claim from the head reads through
// the index entries of every job claimed since the jobs table was last
// vacuumed; one from a position steps over only those after it. A job
// behind the position (of a higher priority, queued again, or whose
// enqueue committed after later jobs were claimed) is left to a claim from
// the head.
type Position struct {
	Priority    int // 1 .. 4
	AvailableAt time.Time
	ID          int64
}

// Before reports whether p comes before q in the claim order.
func (p Position) Before(q Position) bool {
	if p.Priority != q.Priority {
		return p.Priority < q.Priority
	}
	if !p.AvailableAt.Equal(q.AvailableAt) {
		return p.AvailableAt.Before(q.AvailableAt)
	}
	return p.ID < q.ID
}

// storeOf is what package jobs registered.
var storeOf func(client any) any

// Register records how to get the store of a job client. Package jobs calls
// it once, at init.
func Register(of func(client any) any) { storeOf = of }

// Of returns the store of client, a *jobs.Client.
func Of[J, D any](client any) Store[J, D] {
	if storeOf == nil {
		panic("jobclaim: no store registered: import package jobs")
	}
	s, ok := storeOf(client).(Store[J, D])
	if !ok {
		panic(fmt.Sprintf("jobclaim: %T has no store of these types", client))
	}
	return s
}
