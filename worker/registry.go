package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// HandlerFunc runs one attempt of a job whose payload decoded as T. Its
// error decides the attempt's outcome: nil succeeds; a plain error is
// retryable; wrap it with [Fail] (naming its [jobs.FailureClass]) or
// [RetryAfter] to say otherwise. ctx is cancelled when the job's lease is lost (the job was
// cancelled, or a renewal failed for good), when the handler's timeout
// passes, or when the worker stops; a handler should return promptly then.
type HandlerFunc[T any] func(ctx context.Context, job *jobs.Typed[T]) error

// ResultFunc is a [HandlerFunc] that also returns what to record with
// success: a result and writes to make in the completion transaction.
type ResultFunc[T any] func(ctx context.Context, job *jobs.Typed[T]) (Result, error)

// Result is what a [ResultFunc] returns with success.
type Result struct {
	// Value is recorded as the job's result (JSON); nil records none.
	Value json.RawMessage
	// WritesFunc, when not nil, runs inside the transaction that records
	// success: the writes commit with the job's succeeded state, or, when
	// it returns an error or the lease was lost, not at all (the attempt then
	// fails retryably, or stays as the lease's new holder leaves it).
	WritesFunc func(ctx context.Context, tx pgx.Tx) error
	// Record, when not nil, states what the attempt produced and used: the
	// output, and the parameters and inputs the handler actually used
	// (never copied from the job's). It is stored with the success, in the
	// same transaction as the writes; a job that requests an output
	// ([jobs.Spec.Output]) needs one. A record that does not match the
	// job's request is refused, the writes roll back, and the attempt fails
	// retryably, as when the writes fail.
	Record *jobs.CompletionRecord
}

// HandlerOptions shape how a kind's jobs run. The zero value is ready to use.
type HandlerOptions struct {
	// Lease is how long a claim holds the job, renewed by the heartbeat while
	// the handler runs: 1 s .. 24 h. Zero uses the job's own lease (set at
	// enqueue; 5 minutes by default). A [Client] made with the registry also
	// gives new jobs of the kind this lease.
	Lease time.Duration
	// Timeout bounds one attempt: its context is cancelled after it and the
	// attempt fails retryably. Zero: no bound but the lease's heartbeat.
	Timeout time.Duration
	// Repeatable marks the kind's work as safe to run again: a [Client] made
	// with the registry enqueues its jobs repeatable, so a job whose worker
	// vanished runs again instead of becoming uncertain.
	Repeatable bool
	// Schemas are payload schema versions the handler decodes besides the
	// kind's own: their payloads are decoded as T too. Jobs of any other
	// schema are never handed to this worker: they stay queued, listed in
	// docket.jobs_undecodable, for a deployment that knows them.
	Schemas []int
	// Revision names the handler's code version (a commit, a release):
	// 1-100 characters, none a space or a control character (see
	// [jobs.ValidRevision]); empty names none. It binds: Start records it for
	// the kind in docket.job_decoders, every claim of the kind's jobs records
	// it, and the renewals and the outcome of the attempt must come from it
	// (a lease taken by another revision is refused as stale). A job pinned
	// to revisions ([jobs.Client.Pin]) that do not include it is never handed
	// to this worker. It is carried in the worker's logs and events too, and
	// in the diagnostic of every failure, so an operator can tell which code
	// failed.
	Revision string
}

// handler is one registered kind, with its payload type erased.
type handler struct {
	kind    string
	schemas []int
	opts    HandlerOptions
	run     func(ctx context.Context, j jobs.Job) (Result, error)
}

// Registry holds the handlers a [Client] runs, one per kind. Register every
// kind before the worker starts; a registry is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	handlers map[string]*handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{handlers: map[string]*handler{}} }

// Handle registers fn for kind's jobs. It refuses, with
// [db.ErrInvalidArgument], a nil registry, a zero kind, a nil fn, a kind
// already registered, or malformed options.
func Handle[T any](r *Registry, kind jobs.Kind[T], fn HandlerFunc[T], opts ...HandlerOptions) error {
	if fn == nil {
		return db.Refuse(db.ErrInvalidArgument, "worker.handle", "handler func is nil")
	}
	if r == nil {
		return db.Refuse(db.ErrInvalidArgument, "worker.handle", "registry is nil: make one with worker.NewRegistry")
	}
	return HandleResult(r, kind, func(ctx context.Context, job *jobs.Typed[T]) (Result, error) {
		return Result{}, fn(ctx, job)
	}, opts...)
}

// HandleResult registers fn, which returns a [Result] with success, for
// kind's jobs. It refuses what [Handle] refuses.
func HandleResult[T any](r *Registry, kind jobs.Kind[T], fn ResultFunc[T], opts ...HandlerOptions) error {
	const op = "worker.handle"
	if r == nil {
		return db.Refuse(db.ErrInvalidArgument, op, "registry is nil: make one with worker.NewRegistry")
	}
	if kind.Name() == "" {
		return db.Refuse(db.ErrInvalidArgument, op, "the zero Kind has no name: declare kinds with jobs.NewKind or jobs.MustKind")
	}
	if fn == nil {
		return db.Refuse(db.ErrInvalidArgument, op, "handler func is nil")
	}
	if len(opts) > 1 {
		return db.Refuse(db.ErrInvalidArgument, op, "give at most one HandlerOptions")
	}
	var o HandlerOptions
	if len(opts) == 1 {
		o = opts[0]
	}
	if err := o.validate(kind.Name()); err != nil {
		return err
	}
	schemas := append([]int{kind.Schema()}, o.Schemas...)
	slices.Sort(schemas)
	schemas = slices.Compact(schemas)
	h := &handler{
		kind: kind.Name(), schemas: schemas, opts: o,
		run: func(ctx context.Context, j jobs.Job) (Result, error) {
			var args T
			if err := json.Unmarshal(j.Payload, &args); err != nil {
				return Result{}, Fail(jobs.ClassPermanent, fmt.Errorf("payload does not decode as %T: %w", args, err))
			}
			return fn(ctx, &jobs.Typed[T]{Job: j, Args: args})
		},
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.handlers == nil {
		r.handlers = map[string]*handler{}
	}
	if _, ok := r.handlers[h.kind]; ok {
		return db.Refuse(db.ErrInvalidArgument, op, "kind "+h.kind+" already has a handler")
	}
	r.handlers[h.kind] = h
	return nil
}

func (o HandlerOptions) validate(kind string) error {
	const op = "worker.handle"
	if o.Lease != 0 && (o.Lease < jobs.MinLease || o.Lease > jobs.MaxLease) {
		return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("kind %s: lease %v is outside %v .. %v", kind, o.Lease, jobs.MinLease, jobs.MaxLease))
	}
	if o.Timeout < 0 {
		return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("kind %s: timeout %v is negative", kind, o.Timeout))
	}
	for _, s := range o.Schemas {
		if s < 1 || s > 1<<31-1 {
			return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("kind %s: payload schema %d must be a positive 32-bit integer", kind, s))
		}
	}
	if o.Revision != "" && !jobs.ValidRevision(o.Revision) {
		return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("kind %s: invalid revision %q: want 1-%d characters, none a space or a control character",
			kind, o.Revision, jobs.MaxRevisionLen))
	}
	return nil
}

// lookup returns kind's handler, or nil.
func (r *Registry) lookup(kind string) *handler {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.handlers[kind]
}

// decoders lists every (kind, payload schema) pair the registry decodes, in
// a stable order.
func (r *Registry) decoders() []jobs.Decoder {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []jobs.Decoder
	for _, h := range r.handlers {
		for _, s := range h.schemas {
			out = append(out, jobs.Decoder{Kind: h.kind, Schema: s, Revision: h.opts.Revision})
		}
	}
	slices.SortFunc(out, func(a, b jobs.Decoder) int {
		if a.Kind != b.Kind {
			if a.Kind < b.Kind {
				return -1
			}
			return 1
		}
		return a.Schema - b.Schema
	})
	return out
}

// Kinds returns the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.handlers))
	for k := range r.handlers {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// leases returns the handlers' leases, by kind, for those that set one.
func (r *Registry) leases() map[string]time.Duration {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := map[string]time.Duration{}
	for k, h := range r.handlers {
		if h.opts.Lease != 0 {
			out[k] = h.opts.Lease
		}
	}
	return out
}
