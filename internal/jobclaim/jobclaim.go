// Package jobclaim is the worker's side door into the job store: the batch
// claim by id with which the worker's dispatches group their claims, and the
// scan for queued jobs no dispatch carries. Only docket's worker uses them,
// so they are not part of package jobs' public API.
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

// Outcome says what became of one job a [Store.ClaimIDsTx] wanted.
type Outcome string

// The outcomes of [Store.ClaimIDsTx].
const (
	// Taken: the job is claimed; [Result.Job] holds its lease.
	Taken Outcome = "claimed"
	// Undecodable: the job was claimable, but its (kind, payload schema) is
	// not among the claimant's decoders; it is left as it was.
	Undecodable Outcome = "undecodable"
	// Unavailable: the job is not claimable now (held by a live lease, not
	// yet due, finished, uncertain, or locked by another claimant);
	// [Result.Job] is how the claim saw it.
	Unavailable Outcome = "unavailable"
)

// Want names one job for [Store.ClaimIDsTx] and the lease to hold it for
// (0: the job's own).
type Want struct {
	ID    int64
	Lease time.Duration
}

// Result is one job a [Store.ClaimIDsTx] wanted and what became of it.
type Result[J any] struct {
	Outcome Outcome
	Job     J
}

// Store is the worker-only part of a job client, J and D being jobs.Job and
// jobs.Decoder.
type Store[J, D any] interface {
	// ClaimIDsTx claims in tx each wanted job that is claimable now, as
	// jobs.Client.ClaimIDTx does for one, in one statement: the group
	// commit of a worker's dispatches. It returns a result for each wanted
	// job in a project where the actor holds job.claim, claimed ones first;
	// an unknown job, or one the actor may not claim, has none. Locked jobs
	// are skipped, never waited for.
	//
	// It refuses, changing nothing, with db.ErrInvalidArgument: more than
	// jobs.MaxClaimBatch wants, a repeated id, a lease outside 1 s .. 24 h,
	// a malformed decoder.
	ClaimIDsTx(ctx context.Context, tx pgx.Tx, wants []Want, decoders []D) ([]Result[J], error)

	// UndispatchedTx returns in tx, locked until tx ends, up to limit
	// queued and due jobs of queues that no live River dispatch carries:
	// jobs created by SQL, or queued again by something that dispatched
	// nothing. It looks at the first scan due jobs of each queue, in each
	// project where the actor holds job.claim, in claim order; jobs for
	// external executors and, when decoders is not empty, jobs of other
	// payload versions are left out. A dispatch River has been running
	// since before runningSince (River's clock) counts as dead, not as
	// carrying its job (zero: every running dispatch counts). The worker
	// dispatches what it returns in the same transaction. It refuses, with
	// db.ErrInvalidArgument, limit or scan outside 1..jobs.MaxSweepBatch,
	// a malformed queue or decoder.
	UndispatchedTx(ctx context.Context, tx pgx.Tx, queues []string, scan, limit int, decoders []D, runningSince time.Time) ([]J, error)
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
