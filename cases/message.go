package cases

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/cases"
	"github.com/docket-dev/docket/internal/paging"
)

// MessageStatus is where an inbound message stands. The legal moves are the
// rows of docket.message_transitions:
//
//	buffered → consumed | dead_lettered
//
// Consumed and dead-lettered are terminal.
type MessageStatus string

// The message statuses.
const (
	Buffered     MessageStatus = "buffered"      // stored; no wait has claimed it yet
	Consumed     MessageStatus = "consumed"      // a wait claimed it and its continuation was enqueued
	DeadLettered MessageStatus = "dead_lettered" // no wait will claim it
)

// MaxMessagePayload bounds a message's payload, in bytes of JSON text: with
// its envelope it rides in the params of the continuation that consumes it
// (64 KiB). A larger document belongs elsewhere, with a reference in the
// message.
const MaxMessagePayload = 61440

// Delivery is an inbound message to deliver with [Client.Deliver] or
// [Client.DeliverTo].
type Delivery struct {
	// Project is the project whose waits the message is for. Required.
	Project string
	// Producer is who sent it, in its own words, e.g. supplier:4711:
	// 1-128 characters, no control characters, no leading or trailing space.
	Producer string
	// MessageID is the producer's id for it: 1-255 characters, no control
	// characters, no leading or trailing space. A producer's retry carries
	// the same id and is the same message; two producers' ids never clash.
	MessageID string
	// Keys are the 1..[MaxKeys] keys the message is filed under. It
	// satisfies a wait that names a subset of them.
	Keys []Key
	// Payload is the message body, at most [MaxMessagePayload] bytes of
	// JSON. Defaults to {}.
	Payload json.RawMessage
}

// Message is an inbound message as stored.
type Message struct {
	ID        int64
	Project   string
	Producer  string
	MessageID string
	Keys      []Key
	Payload   json.RawMessage
	// Addressee is the one case the message was sent to; 0 for any wait on
	// its keys.
	Addressee   int64
	Status      MessageStatus
	ArrivedAt   time.Time
	DeliveredBy access.Actor
	// ConsumedBy is the wait that consumed it; 0 unless consumed.
	ConsumedBy int64
	// SettledAt is when it was consumed or dead-lettered; zero while
	// buffered.
	SettledAt time.Time
	// DeadLetterReason says why no wait will claim it; empty unless
	// dead-lettered.
	DeadLetterReason string
}

// Delivered is what a delivery did.
type Delivered struct {
	Message
	// Duplicate is true when the message was stored before under the same
	// producer and id: this delivery was a retry.
	Duplicate bool
	// ContinuationJobID is the job the wait that consumed the message
	// enqueued; 0 while the message is buffered.
	ContinuationJobID int64
}

// Deliver delivers d to the waits of d.Project, in its own transaction. See
// [Client.DeliverTx].
func (c *Client) Deliver(ctx context.Context, d Delivery) (Delivered, error) {
	return inTx(ctx, c.pool, func(tx pgx.Tx) (Delivered, error) { return c.DeliverTx(ctx, tx, d) })
}

// DeliverTx delivers d to the waits of d.Project in tx. It stores the message
// first, then offers it to the oldest waiting wait of the project that names
// a subset of its keys and whose deadline is after now; that wait consumes
// it and enqueues its arrival continuation in the same transaction (see
// [Wake]). No such wait: the message stays buffered, for a wait registered
// later to find ([Client.AwaitTx] looks in the buffer), until the dead-letter
// sweep ([DeadLetterSweep]) gives up on it. A message stored before under
// the same producer and id is the same message: it is returned with
// Duplicate set and, still buffered, offered again, so a retry completes a
// delivery that stored it and died before looking.
//
// Deliveries and waits on a common key are decided one at a time (a
// transaction-scoped lock per key, held until q's transaction ends), so a
// message and its wait meet whichever comes first, and a message is
// consumed by one wait at most, a wait satisfied by one message at most. The
// continuation job is enqueued in the same transaction, and its commit wakes
// the workers of its queue. On rollback nothing is recorded.
//
// It refuses, writing nothing: a malformed project, producer, id or key set,
// or a payload over [MaxMessagePayload] ([db.ErrInvalidArgument]); an actor
// without both message.deliver and job.create on the project, or an unknown
// project ([db.ErrNotPermitted]); the same producer and id with other keys,
// payload or addressee ([db.ErrIdempotencyConflict]).
func (c *Client) DeliverTx(ctx context.Context, tx pgx.Tx, d Delivery) (Delivered, error) {
	return c.deliver(ctx, tx, d, 0)
}

// DeliverTo delivers d to the waits of case caseID alone, in its own
// transaction. See [Client.DeliverToTx].
func (c *Client) DeliverTo(ctx context.Context, caseID int64, d Delivery) (Delivered, error) {
	return inTx(ctx, c.pool, func(tx pgx.Tx) (Delivered, error) { return c.DeliverToTx(ctx, tx, caseID, d) })
}

// DeliverToTx delivers d in tx as [Client.DeliverTx] does, to the waits of
// case caseID of d.Project alone: it reaches that case or no one. If the case
// closes without consuming it, it is dead-lettered with a reason saying so.
// Beyond DeliverTx's refusals, it refuses a case that is not one of
// d.Project's ([db.ErrNotFound]).
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) DeliverToTx(ctx context.Context, tx pgx.Tx, caseID int64, d Delivery) (Delivered, error) {
	if caseID <= 0 {
		return Delivered{}, db.Refuse(db.ErrInvalidArgument, "message.deliver", fmt.Sprintf("addressee case %d: want a case id", caseID))
	}
	return c.deliver(ctx, tx, d, caseID)
}

func (c *Client) deliver(ctx context.Context, q db.DBTX, d Delivery, caseID int64) (Delivered, error) {
	const op = "message.deliver"
	ids := []any{"project", d.Project, "producer", d.Producer, "message", d.MessageID}
	if len(d.Keys) == 0 || len(d.Keys) > MaxKeys {
		return Delivered{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("%d keys: want 1..%d", len(d.Keys), MaxKeys), ids...)
	}
	payload := d.Payload
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	if !json.Valid(payload) {
		return Delivered{}, db.Refuse(db.ErrInvalidArgument, op, "payload is not valid JSON", ids...)
	}
	if len(payload) > 4*MaxMessagePayload {
		// Far over the bound however Postgres lays it out: refuse before
		// sending it.
		return Delivered{}, db.Refuse(db.ErrInvalidArgument, op,
			fmt.Sprintf("payload of %d bytes: want at most %d bytes of JSON", len(payload), MaxMessagePayload), ids...)
	}
	ns, vals := keyArrays(d.Keys)
	p := dbsqlc.MessageDeliverParams{
		Project: d.Project, Producer: d.Producer, MessageID: d.MessageID, Namespaces: ns, KeyValues: vals,
		Payload: payload, Actor: string(c.actor), Now: c.clock.Now(),
	}
	if caseID != 0 {
		p.Addressee = &caseID
		ids = append(ids, "case", caseID)
	}
	row, err := queries.MessageDeliver(ctx, q, p)
	if err != nil {
		return Delivered{}, db.Translate(err, op, ids...)
	}
	out := Delivered{Message: fromMessageRow(&dbsqlc.DocketMessage{
		ID: row.ID, Project: row.Project, Producer: row.Producer, MessageID: row.MessageID, Keys: row.Keys,
		Payload: row.Payload, Addressee: row.Addressee, Status: row.Status, ArrivedAt: row.ArrivedAt,
		DeliveredBy: row.DeliveredBy, ConsumedBy: row.ConsumedBy, SettledAt: row.SettledAt,
		DeadLetterReason: row.DeadLetterReason,
	}), Duplicate: row.Duplicate}
	if row.ContinuationJobID != nil {
		out.ContinuationJobID = *row.ContinuationJobID
	}
	return out, nil
}

// Message returns message id, or [db.ErrNotFound] when there is
// none or the actor may not read its project's messages (it needs
// message.deliver, case.admit or case.view there).
func (c *Client) Message(ctx context.Context, id int64) (Message, error) {
	return c.message(ctx, c.reads.DB, id)
}

// MessageTx is [Client.Message] read in tx, the caller's transaction: it sees what tx
// has written and not yet committed, and writes nothing itself.
func (c *Client) MessageTx(ctx context.Context, tx pgx.Tx, id int64) (Message, error) {
	return c.message(ctx, tx, id)
}

// message is [Client.Message] on q: the client's pool or the caller's transaction.
func (c *Client) message(ctx context.Context, q db.DBTX, id int64) (Message, error) {
	row, err := queries.MessageGet(ctx, q, id, string(c.actor))
	if err != nil {
		return Message{}, db.TranslateRead(err, "message.get", "message", id, string(c.actor))
	}
	return fromMessageRow(row), nil
}

// DeadLetter is a message no wait will claim, as operators see it: who sent
// it and the keys it was filed under, beside why it was given up on. The
// payload is deliberately absent: the diagnosis is in the keys, and the
// payload is the counterparty's.
type DeadLetter struct {
	ID        int64
	Project   string
	Producer  string
	MessageID string
	Keys      []Key
	Addressee int64 // 0 unless sent to one case
	Reason    string
	ArrivedAt time.Time
	// DeadLetteredAt is when the sweep, or its addressee's closing, gave up
	// on it.
	DeadLetteredAt time.Time
}

// DeadLetterFilter selects dead letters for [Client.DeadLetters]. Project is
// required.
type DeadLetterFilter struct {
	Project string
	// Before continues a listing: only dead letters with a smaller id. Pass
	// the last id of one page to get the next.
	Before int64
	// Limit is the page size, 1..[db.MaxPage]. Defaults to [db.DefaultPage].
	Limit int
}

// DeadLetters returns the dead letters of f.Project, newest first, in its
// own transaction. See [Client.DeadLettersTx].
func (c *Client) DeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	return c.deadLetters(ctx, c.reads.DB, f)
}

// DeadLettersTx returns a page of the dead letters of f.Project read in tx,
// newest first. A non-empty list means a correlation key is wrong somewhere:
// a message arrived, was held, and nothing ever asked for it. An actor that
// may not read the project's messages gets an empty list, not an error. It
// refuses an empty project, a limit outside 1..[db.MaxPage] or a negative
// Before with [db.ErrInvalidArgument].
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) DeadLettersTx(ctx context.Context, tx pgx.Tx, f DeadLetterFilter) ([]DeadLetter, error) {
	return c.deadLetters(ctx, tx, f)
}

// deadLetters is [Client.DeadLettersTx] on q: the client's pool or the caller's transaction.
func (c *Client) deadLetters(ctx context.Context, q db.DBTX, f DeadLetterFilter) ([]DeadLetter, error) {
	const op = "message.dead_letters"
	limit, err := paging.For(op).Project("dead letters", f.Project).Cursor("before", f.Before).Limit(f.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := queries.MessagesDead(ctx, q, f.Project, f.Before, string(c.actor), limit)
	return paging.Collect(rows, err, fromDeadLetterRow, op, "project", f.Project)
}

func fromDeadLetterRow(r *dbsqlc.MessagesDeadRow) DeadLetter {
	d := DeadLetter{
		ID: r.ID, Project: r.Project, Producer: r.Producer, MessageID: r.MessageID, Keys: parseKeys(r.Keys),
		ArrivedAt: r.ArrivedAt.UTC(),
	}
	if r.Addressee != nil {
		d.Addressee = *r.Addressee
	}
	if r.DeadLetterReason != nil {
		d.Reason = *r.DeadLetterReason
	}
	if r.SettledAt != nil {
		d.DeadLetteredAt = r.SettledAt.UTC()
	}
	return d
}

func fromMessageRow(r *dbsqlc.DocketMessage) Message {
	m := Message{
		ID: r.ID, Project: r.Project, Producer: r.Producer, MessageID: r.MessageID, Keys: parseKeys(r.Keys),
		Payload: r.Payload, Status: MessageStatus(r.Status), ArrivedAt: r.ArrivedAt.UTC(),
		DeliveredBy: access.Actor(r.DeliveredBy),
	}
	if r.Addressee != nil {
		m.Addressee = *r.Addressee
	}
	if r.ConsumedBy != nil {
		m.ConsumedBy = *r.ConsumedBy
	}
	if r.SettledAt != nil {
		m.SettledAt = r.SettledAt.UTC()
	}
	if r.DeadLetterReason != nil {
		m.DeadLetterReason = *r.DeadLetterReason
	}
	return m
}

// parseKeys reads keys stored as namespace:value (a namespace holds no ':').
func parseKeys(stored []string) []Key {
	out := make([]Key, len(stored))
	for i, s := range stored {
		ns, val, _ := strings.Cut(s, ":")
		out[i] = Key{Namespace: ns, Value: val}
	}
	return out
}
