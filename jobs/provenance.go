package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
)

// OutputRef names an output: an asset, its representation kind, and the
// logical target root it is written under. As a job's request
// ([Spec.Output]) only Asset is needed, and Kind and Root, when set,
// bind the completion; as what a completion produced
// ([CompletionRecord.Output]) Asset and Kind are needed.
type OutputRef struct {
	// Asset names what is produced, e.g. "invoice/2026-0042": 1-1000
	// characters.
	Asset string
	// Kind is the representation produced, e.g. "image/png": 1-128
	// characters of [A-Za-z0-9._+/:-], starting with a letter or digit.
	Kind string
	// Root is the logical target root the output is written under, e.g.
	// "renders": 1-200 characters of [A-Za-z0-9._-], starting with a letter
	// or digit. Empty: none.
	Root string
}

// CompletionRecord is what a worker states when it completes a job: the
// output it produced and the parameters and inputs it actually used. It is
// stored with the completion (docket.job_completions) and is what
// [Client.RerunPlan] plans from. Storage never copies the job's
// [Spec.Params] onto it: a worker that followed them states them, one that
// clamped a size or chose another encoder states what it did.
type CompletionRecord struct {
	// Output is what the job produced. Asset must be the job's requested
	// asset and Kind its requested kind, when the job names them; Root is
	// empty (the job's target root is recorded) or the job's target root.
	Output OutputRef
	// Params are the parameters the worker used: a JSON object of at most
	// [MaxParamsBytes], or nil for none.
	Params json.RawMessage
	// Inputs are the job's inputs the worker read, in the job's order; it
	// may leave out one it did not need, never name another or reorder
	// them. Nil: none.
	Inputs []string
}

// validate refuses, with [db.ErrInvalidArgument], a record the database
// would refuse for its shape alone.
func (r *CompletionRecord) validate(op string, id int64) error {
	bad := func(msg string) error {
		return db.Refuse(db.ErrInvalidArgument, op, "completion record: "+msg, "job", id)
	}
	switch {
	case r.Output.Asset == "" || utf8.RuneCountInString(r.Output.Asset) > MaxOutputLen:
		return bad(fmt.Sprintf("want an output asset of 1-%d characters", MaxOutputLen))
	case !ValidOutputKind(r.Output.Kind):
		return bad(fmt.Sprintf("invalid output kind %q: want 1-%d characters of [A-Za-z0-9._+/:-], starting with a letter or digit", r.Output.Kind, MaxOutputKindLen))
	case r.Output.Root != "" && !ValidTargetRoot(r.Output.Root):
		return bad(fmt.Sprintf("invalid target root %q: want 1-%d characters of [A-Za-z0-9._-], starting with a letter or digit", r.Output.Root, MaxTargetRootLen))
	case r.Params != nil && !validParams(r.Params):
		return bad(fmt.Sprintf("params must be a JSON object of at most %d bytes", MaxParamsBytes))
	case len(r.Inputs) > MaxInputs:
		return bad(fmt.Sprintf("%d inputs, over the bound of %d", len(r.Inputs), MaxInputs))
	}
	for _, in := range r.Inputs {
		if utf8.RuneCountInString(in) > maxInputLen {
			return bad(fmt.Sprintf("an input reference is over %d characters", maxInputLen))
		}
	}
	return nil
}

// CheckRecord refuses, with [db.ErrInvalidArgument], the completion record
// r (nil: none) that storage would refuse for job j: a malformed one, one
// whose output is not j's request or whose inputs are not j's, or none at
// all when j requests an output. A worker checks a handler's record with it
// before completing, so a wrong one fails the attempt instead of the
// completion.
func CheckRecord(j Job, r *CompletionRecord) error {
	const op = "job.complete"
	if r == nil {
		if j.Output.Asset != "" {
			return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("job %d requests output %q: its completion must record the output it produced", j.ID, j.Output.Asset), "job", j.ID)
		}
		return nil
	}
	if err := r.validate(op, j.ID); err != nil {
		return err
	}
	bad := func(msg string) error {
		return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("job %d: %s", j.ID, msg), "job", j.ID)
	}
	switch {
	case j.Output.Asset != "" && r.Output.Asset != j.Output.Asset:
		return bad(fmt.Sprintf("the completion record's output asset %q is not the requested %q", r.Output.Asset, j.Output.Asset))
	case j.Output.Kind != "" && r.Output.Kind != j.Output.Kind:
		return bad(fmt.Sprintf("the completion record's output kind %q is not the requested %q", r.Output.Kind, j.Output.Kind))
	case r.Output.Root != "" && r.Output.Root != j.Output.Root:
		return bad(fmt.Sprintf("the completion record names target root %q, the job's is %q", r.Output.Root, j.Output.Root))
	case !subsequence(r.Inputs, j.Inputs):
		return bad("the completion record's inputs are not the job's: name them in the job's order, leaving out only what was not used")
	}
	return nil
}

// subsequence reports whether used is given with some elements left out,
// as docket.job_inputs_subsequence does.
func subsequence(used, given []string) bool {
	i := 0
	for _, u := range used {
		for i < len(given) && given[i] != u {
			i++
		}
		if i == len(given) {
			return false
		}
		i++
	}
	return true
}

// CompleteWith finishes the job c.Lease holds as [Succeeded] with c.Result
// and, when c.Record is not nil, its completion record. When writes is not
// nil it runs first, in the same transaction, so the caller's outputs, the
// record and the succeeded transition commit together or not at all. See
// [Client.CompleteWithTx] for what it refuses.
func (c *Client) CompleteWith(ctx context.Context, cm Completion, writes func(tx pgx.Tx) error) (Job, error) {
	if writes == nil && cm.Record == nil {
		return c.complete(ctx, c.pool, cm.Lease, cm.Result)
	}
	var job Job
	err := c.inTxChecked(ctx, "job.complete", func(tx pgx.Tx) error {
		if writes != nil {
			if err := writes(tx); err != nil {
				return err
			}
		}
		var err error
		job, err = c.CompleteWithTx(ctx, tx, cm)
		return err
	})
	return job, err
}

// inTxChecked runs fn in a transaction of its own, as inTx, and translates
// an error of the commit itself: the refusal of a constraint checked at
// commit (a job that requests an output completed without a record). An
// error of fn is returned as it is.
func (c *Client) inTxChecked(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	ran := false
	err := c.inTx(ctx, func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		ran = true
		return nil
	})
	if err != nil && ran {
		return db.Translate(err, op)
	}
	return err
}

// CompleteWithTx is [Client.CompleteTx] with a completion record: in tx, it
// records cm.Record (when not nil) under the live claim cm.Lease holds, then
// completes the job with cm.Result. A job that requests an output
// ([Spec.Output]) must be completed with a record: completing it without
// one is refused when tx commits, with [db.ErrInvalidArgument], and the
// whole transaction (the caller's writes included) rolls back.
//
// It refuses, changing nothing (the caller's writes in the same transaction
// are the caller's to roll back): a malformed record, or one whose output
// is not the job's request (another asset or kind, another target root) or
// whose inputs are not the job's (see [CompletionRecord.Inputs]), with
// [db.ErrInvalidArgument]; otherwise as [Client.CompleteTx]. A completion
// retried after a lost reply is a quiet no-op, as CompleteTx's, and does
// not record again.
func (c *Client) CompleteWithTx(ctx context.Context, tx pgx.Tx, cm Completion) (Job, error) {
	if cm.Record != nil {
		if _, err := c.record(ctx, tx, "job.complete", []Completion{cm}); err != nil {
			return Job{}, err
		}
	}
	return c.complete(ctx, tx, cm.Lease, cm.Result)
}

// record writes the completion records of batch (those that have one) in
// one statement. Elements whose token holds no live claim record nothing:
// the completion that follows refuses them.
func (c *Client) record(ctx context.Context, q db.DBTX, op string, batch []Completion) (int, error) {
	var p dbsqlc.JobCompletionRecordParams
	for _, b := range batch {
		r := b.Record
		if r == nil {
			continue
		}
		if err := r.validate(op, b.Lease.JobID); err != nil {
			return 0, err
		}
		params := json.RawMessage("null")
		if r.Params != nil {
			params = r.Params
		}
		inputs := json.RawMessage("null")
		if len(r.Inputs) > 0 {
			var err error
			if inputs, err = json.Marshal(r.Inputs); err != nil {
				return 0, db.Refuse(db.ErrInvalidArgument, op, "completion record: inputs: "+err.Error(), "job", b.Lease.JobID)
			}
		}
		p.Ids = append(p.Ids, b.Lease.JobID)
		p.Tokens = append(p.Tokens, b.Lease.Token)
		p.Assets = append(p.Assets, r.Output.Asset)
		p.Kinds = append(p.Kinds, r.Output.Kind)
		p.Roots = append(p.Roots, r.Output.Root)
		p.Params = append(p.Params, params)
		p.Inputs = append(p.Inputs, inputs)
	}
	if len(p.Ids) == 0 {
		return 0, nil
	}
	p.Actor, p.Now = string(c.actor), c.clock.Now()
	ids, err := queries.JobCompletionRecord(ctx, q, p)
	if err != nil {
		return 0, db.Translate(err, op)
	}
	return len(ids), nil
}

// RerunPlan is what it takes to do a completed job again as it was done:
// enqueue [RerunPlan.Spec] in a transaction of the caller's choosing.
type RerunPlan struct {
	// JobID is the completed job the plan redoes.
	JobID int64
	// Kind, Queue, Payload and PayloadSchema are the job's, so the work
	// reaches the same workers.
	Kind          string
	Queue         string
	Payload       json.RawMessage
	PayloadSchema int
	// Output is the job's request: its asset and kind, and its target root
	// when the job was completed with a record (so the work reaches the
	// same destination). What the worker produced may differ in kind; it is
	// in Produced.
	Output OutputRef
	// Recorded reports whether the job's completion has a record. When it
	// does not (a job completed without one, or reconciled to succeeded by
	// an operator) the plan names the job's kind and no target root,
	// inputs or parameters: nothing says what its worker used.
	Recorded bool
	// Params and Inputs are those the completion record says the worker
	// used, never the job's requested ones. Nil when not Recorded.
	Params json.RawMessage
	Inputs []string
	// Produced is the output the record names; RecordedBy and RecordedAt
	// who recorded it, and when. Zero when not Recorded.
	Produced   OutputRef
	RecordedBy access.Actor
	RecordedAt time.Time
}

// Spec returns the spec that enqueues the plan's work: the job's kind,
// queue, payload and requested output, with the parameters and inputs the
// completion record names. Its other fields take their defaults; set them
// (an idempotency key, a priority) before enqueueing.
func (p RerunPlan) Spec() Spec {
	return Spec{
		Kind: p.Kind, Queue: p.Queue, Payload: p.Payload, PayloadSchema: p.PayloadSchema,
		Output: p.Output, Params: p.Params, Inputs: p.Inputs,
	}
}

// RerunPlan reads the plan that redoes completed job id. See
// [Client.RerunPlanTx].
func (c *Client) RerunPlan(ctx context.Context, id int64) (RerunPlan, error) {
	return c.rerunPlan(ctx, c.pool, id)
}

// RerunPlanTx reads, in tx, the plan that redoes completed job id as its
// completion record says it was done. It is a read: it sees what tx has
// written and not yet committed, writes nothing and enqueues nothing, so
// tx's commit or rollback changes nothing of it; enqueueing
// [RerunPlan.Spec] is the caller's to do, in a transaction of its choosing.
//
// It refuses: an unknown job, or one the actor may not read, with
// [db.ErrNotFound] ("job 42 not found or not visible to ACTOR"); a job that
// has not succeeded with [db.ErrInvalidArgument].
func (c *Client) RerunPlanTx(ctx context.Context, tx pgx.Tx, id int64) (RerunPlan, error) {
	return c.rerunPlan(ctx, tx, id)
}

// rerunPlan is [Client.RerunPlanTx] on q: the client's pool or the caller's transaction.
func (c *Client) rerunPlan(ctx context.Context, q db.DBTX, id int64) (RerunPlan, error) {
	const op = "job.rerun_plan"
	r, err := queries.JobRerunPlan(ctx, q, id, string(c.actor))
	if err != nil {
		return RerunPlan{}, db.TranslateRead(err, op, "job", id, string(c.actor))
	}
	if State(r.State) != Succeeded {
		return RerunPlan{}, db.Refuse(db.ErrInvalidArgument, op,
			fmt.Sprintf("job %d is %s: only a succeeded job has a re-run plan", id, r.State), "job", id)
	}
	p := RerunPlan{
		JobID: r.ID, Kind: r.Kind, Queue: r.Queue, Payload: r.Payload, PayloadSchema: int(r.PayloadSchema),
		Output:   OutputRef{Asset: r.RequestedOutput, Kind: r.RequestedKind},
		Recorded: r.Recorded,
	}
	if r.Recorded {
		p.Output.Root = r.TargetRoot
		p.Params = r.ParamsUsed
		if len(bytes.TrimSpace(p.Params)) == 0 || bytes.Equal(p.Params, []byte("null")) {
			p.Params = nil
		}
		if len(r.InputsUsed) > 0 {
			p.Inputs = r.InputsUsed
		}
		p.Produced = OutputRef{Asset: r.OutputAsset, Kind: r.OutputKind, Root: r.OutputRoot}
		p.RecordedBy = access.Actor(r.RecordedBy)
		p.RecordedAt = r.RecordedAt.UTC()
	}
	return p, nil
}

// ProducedBy returns the ids of the jobs, oldest first, whose completion
// record names output (asset, kind), in the projects the actor may read
// (up to 1000). It reads one index entry per record. See
// [Client.ProducedByTx].
func (c *Client) ProducedBy(ctx context.Context, asset, kind string) ([]int64, error) {
	return c.producedBy(ctx, c.pool, asset, kind)
}

// ProducedByTx is [Client.ProducedBy] read in tx: it sees what tx has
// written and not yet committed, and writes nothing itself, so tx's commit
// or rollback changes nothing of it. It refuses a
// malformed asset or kind with [db.ErrInvalidArgument]; an output nobody
// visible produced is an empty answer.
func (c *Client) ProducedByTx(ctx context.Context, tx pgx.Tx, asset, kind string) ([]int64, error) {
	return c.producedBy(ctx, tx, asset, kind)
}

// producedBy is [Client.ProducedByTx] on q: the client's pool or the caller's transaction.
func (c *Client) producedBy(ctx context.Context, q db.DBTX, asset, kind string) ([]int64, error) {
	const op = "job.produced_by"
	if asset == "" || utf8.RuneCountInString(asset) > MaxOutputLen {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("want an output asset of 1-%d characters", MaxOutputLen))
	}
	if !ValidOutputKind(kind) {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid output kind %q: want 1-%d characters of [A-Za-z0-9._+/:-], starting with a letter or digit", kind, MaxOutputKindLen))
	}
	ids, err := queries.JobProducedBy(ctx, q, asset, kind, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, op)
	}
	return ids, nil
}
