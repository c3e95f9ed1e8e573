package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// recordJSON is a completion record as job_complete_many takes it.
type recordJSON struct {
	Asset  string          `json:"asset"`
	Kind   string          `json:"kind"`
	Root   string          `json:"root"`
	Params json.RawMessage `json:"params"`
	Inputs []string        `json:"inputs"`
}

// paramsJSON is params as storage takes them: JSON null for none, and, for
// bytes that are not JSON, a JSON string of them, which storage refuses as
// it refuses any params that are not an object. Whether a record may
// complete its job is storage's rule alone (docket.job_record_refusal).
func paramsJSON(params json.RawMessage) json.RawMessage {
	switch {
	case params == nil:
		return json.RawMessage("null")
	case json.Valid(params):
		return params
	}
	s, _ := json.Marshal(string(params)) // a string always marshals
	return s
}

// inputsJSON is inputs as storage takes them: JSON null for none.
func inputsJSON(inputs []string) json.RawMessage {
	if len(inputs) == 0 {
		return json.RawMessage("null")
	}
	s, _ := json.Marshal(inputs) // strings always marshal
	return s
}

// recordsJSON is the records of batch as job_complete_many takes them:
// nil when no element has one, else one per element, JSON null for none.
func recordsJSON(batch []Completion) []json.RawMessage {
	var out []json.RawMessage
	for i, b := range batch {
		if b.Record == nil {
			continue
		}
		if out == nil {
			out = make([]json.RawMessage, len(batch))
			for k := range out {
				out[k] = json.RawMessage("null")
			}
		}
		r := b.Record
		out[i], _ = json.Marshal(recordJSON{ // its fields always marshal
			Asset: r.Output.Asset, Kind: r.Output.Kind, Root: r.Output.Root,
			Params: paramsJSON(r.Params), Inputs: r.Inputs,
		})
	}
	return out
}

// CompleteWith finishes the job c.Lease holds as [Succeeded] with c.Result
// and, when c.Record is not nil, its completion record. When writes is not
// nil it runs first, in the same transaction, so the caller's outputs, the
// record and the succeeded transition commit together or not at all. See
// [Client.CompleteWithTx] for what it refuses.
func (c *Client) CompleteWith(ctx context.Context, cm Completion, writes func(tx pgx.Tx) error) (Job, error) {
	if writes == nil && cm.Record == nil {
		return c.completeSpent(ctx, c.pool, cm.Lease, cm.Result, cm.Spent)
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
		// WithTx names a refused commit's operation "commit"; here the
		// commit is the completion's, and so is the refusal.
		var e *db.Error
		if errors.As(err, &e) && e.Op == "commit" {
			named := *e
			named.Op = op
			return &named
		}
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
	return c.completeSpent(ctx, tx, cm.Lease, cm.Result, cm.Spent)
}

// record writes the completion records of batch (those that have one) in
// one statement, docket.job_completion_record, which refuses a record its
// rule refuses. Elements whose token holds no live claim record nothing:
// the completion that follows refuses them.
func (c *Client) record(ctx context.Context, q db.DBTX, op string, batch []Completion) (int, error) {
	var p dbsqlc.JobCompletionRecordParams
	for _, b := range batch {
		r := b.Record
		if r == nil {
			continue
		}
		p.Ids = append(p.Ids, b.Lease.JobID)
		p.Tokens = append(p.Tokens, pgUUID(b.Lease.Token))
		p.Assets = append(p.Assets, r.Output.Asset)
		p.Kinds = append(p.Kinds, r.Output.Kind)
		p.Roots = append(p.Roots, r.Output.Root)
		p.Params = append(p.Params, paramsJSON(r.Params))
		p.Inputs = append(p.Inputs, inputsJSON(r.Inputs))
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
	return c.producedBy(ctx, c.reads.DB, asset, kind)
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
