package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/tasks"
)

// Opened is the task an opening found or created.
type Opened struct {
	Task
	// Created is false when the task was there under the key (a retry).
	Created bool
}

// Open opens a task of case caseID, in its own transaction. See
// [Client.OpenTx].
func (c *Client) Open(ctx context.Context, caseID int64, spec Spec) (Opened, error) {
	return c.open(ctx, c.pool, caseID, spec)
}

// OpenTx opens task spec.Key of case caseID in tx: the wait its decision is
// delivered to, and the task, pending and unclaimed. Opening again what is
// there under the key, on the same terms, returns it with Created false.
// Both commit with tx, or roll back with it.
//
// It refuses, writing nothing: a malformed, oversized or out-of-range
// field, a deadline not after now or more than [MaxAhead] ahead, an expiry
// policy that is not whole ([db.ErrInvalidArgument], naming the field); an
// unknown case or one the actor may not write ([db.ErrNotFound]); an actor
// without job.create on its project ([db.ErrNotPermitted]); a closed case
// ([db.ErrCaseClosed]); the key taken by a task on other terms
// ([db.ErrIdempotencyConflict]).
func (c *Client) OpenTx(ctx context.Context, tx pgx.Tx, caseID int64, spec Spec) (Opened, error) {
	return c.open(ctx, tx, caseID, spec)
}

func (c *Client) open(ctx context.Context, q db.DBTX, caseID int64, s Spec) (Opened, error) {
	const op = "task.open"
	ids := []any{"case", caseID, "task", s.Key}
	bad := func(format string, args ...any) (Opened, error) {
		return Opened{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf(format, args...), ids...)
	}
	now := c.clock.Now()
	switch {
	case s.Deadline.IsZero():
		return bad("a task needs a deadline")
	case !s.Deadline.After(now) || s.Deadline.Sub(now) > MaxAhead:
		return bad("invalid deadline %s: after now (%s) and at most %v ahead", s.Deadline.Format(time.RFC3339), now.Format(time.RFC3339), MaxAhead)
	case s.Expiry.decision == "" && s.Expiry.escalateFor == 0:
		return bad("a task needs an expiry policy: tasks.Escalate or tasks.DecideAutomatically")
	case s.Continuation.Kind == "":
		return bad("a task needs a continuation: the job its decision enqueues")
	case len(s.Proposal) > MaxJSON || len(s.Evidence) > MaxJSON:
		return bad("proposal and evidence are at most %d bytes of JSON each", MaxJSON)
	}
	for _, v := range s.Audience {
		if err := v.Validate(); err != nil {
			return Opened{}, err
		}
	}
	proposal, evidence := orEmpty(s.Proposal), orEmpty(s.Evidence)
	if !json.Valid(proposal) || !json.Valid(evidence) {
		return bad("proposal and evidence must be JSON")
	}
	onExpiry := "escalate"
	var escalateFor *time.Duration
	var auto *string
	if d, ok := s.Expiry.Automatic(); ok {
		onExpiry, auto = "decide", &d
	} else {
		escalateFor = &s.Expiry.escalateFor
	}
	k := s.Continuation
	if k.Queue == "" {
		k.Queue = "default"
	}
	if len(k.Payload) == 0 {
		k.Payload = json.RawMessage(`{}`)
	}
	if k.PayloadSchema == 0 {
		k.PayloadSchema = 1
	}
	if k.MaxAttempts == 0 {
		k.MaxAttempts = 5
	}
	r, err := queries.TaskOpen(ctx, q, dbsqlc.TaskOpenParams{
		CaseID: caseID, Key: s.Key, Title: s.Title, Summary: s.Summary, Proposal: proposal, Evidence: evidence,
		Decisions: nonNil(s.Decisions), Audience: strs(s.Audience), AudienceCaps: strs(s.AudienceCapabilities),
		Proposer: string(s.Proposer), ActingFor: strs(s.ActingFor), Deadline: s.Deadline, OnExpiry: onExpiry,
		EscalateTo: strs(s.Expiry.escalateTo), EscalateCaps: strs(s.Expiry.escalateCaps), EscalateFor: escalateFor,
		AutoDecision: auto, Kind: k.Kind, Queue: k.Queue, Payload: k.Payload, PayloadSchema: int32(k.PayloadSchema),
		MaxAttempts: int32(k.MaxAttempts), Actor: string(c.actor), Now: now,
	})
	if err != nil {
		return Opened{}, db.Translate(err, op, ids...)
	}
	return Opened{Task: fromRow(taskOf(r)), Created: r.Created}, nil
}

func orEmpty(j json.RawMessage) json.RawMessage {
	if len(j) == 0 {
		return json.RawMessage(`{}`)
	}
	return j
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// taskOf is the task of task_open's row.
func taskOf(r *dbsqlc.DocketTaskOpened) *dbsqlc.DocketTask {
	return &dbsqlc.DocketTask{
		ID: r.ID, CaseID: r.CaseID, RunID: r.RunID, StepID: r.StepID, Project: r.Project, Key: r.Key, Title: r.Title, Summary: r.Summary,
		Proposal: r.Proposal, Evidence: r.Evidence, Decisions: r.Decisions, Audience: r.Audience,
		AudienceCaps: r.AudienceCaps, Proposer: r.Proposer, ActingFor: r.ActingFor, Excluded: r.Excluded,
		Deadline: r.Deadline, OnExpiry: r.OnExpiry, EscalateTo: r.EscalateTo, EscalateCaps: r.EscalateCaps,
		EscalateFor: r.EscalateFor, AutoDecision: r.AutoDecision, WaitID: r.WaitID, Status: r.Status,
		ClaimedBy: r.ClaimedBy, ClaimToken: r.ClaimToken, ClaimedAt: r.ClaimedAt, ClaimExpiresAt: r.ClaimExpiresAt,
		Decision: r.Decision, DecidedBy: r.DecidedBy, Automatic: r.Automatic, Note: r.Note, SettledAt: r.SettledAt,
		OpenedBy: r.OpenedBy, OpenedAt: r.OpenedAt, UpdatedAt: r.UpdatedAt, EscalatedAt: r.EscalatedAt,
	}
}
