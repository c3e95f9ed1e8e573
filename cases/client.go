package cases

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/cases"
	"github.com/docket-dev/docket/internal/newclient"
	"github.com/docket-dev/docket/internal/replica"
)

var queries = dbsqlc.New()

// Config configures a [Client].
type Config struct {
	// Actor is who the client acts as; every change it makes is attributed
	// to it, and its grants decide what it may do and see. Required.
	Actor access.Actor
	// Clock gives the instants the client passes to the database. Defaults
	// to [db.SystemClock].
	Clock db.Clock
	// Replica, when not nil, is a pool on a hot standby of the client's
	// database, read-only: the reads that tolerate lag go there (Get,
	// List, Keys, Obligations, Obligation, History, Timers, Wait, Waits,
	// Waiting, Message, DeadLetters), and [Client.ReplicaLag] says how far
	// behind it is. Every write, State (whose version a PutState names)
	// and every …Tx read stay on the pool. Nil: every read goes to the
	// pool. See docs/cells.md.
	Replica db.Pool
}

// Client admits, correlates, writes, closes and reads cases and settles
// their obligations, as one actor, in any project where the actor holds the
// grants. It is safe for concurrent use.
//
// Each operation comes in two forms: one that runs on the client's pool, and
// one ending in Tx that runs in the caller's transaction, so an admission,
// a state write or an obligation commits or rolls back with the caller's own
// writes. A refused call writes nothing; in the caller's
// transaction, Postgres then refuses further statements until the caller
// rolls back (or uses a savepoint, as [db.WithTx] on a pgx.Tx does).
type Client struct {
	pool  db.Pool
	reads replica.Reads // the reads that tolerate lag
	actor access.Actor
	clock db.Clock
}

// NewClient returns a client on pool, typically a *pgxpool.Pool. It refuses,
// with [db.ErrInvalidArgument], a nil pool or a malformed actor. It does not
// check the actor's grants: the database decides that on each call.
func NewClient(pool db.Pool, cfg Config) (*Client, error) {
	clock, err := newclient.Check("cases.new_client", pool, cfg.Actor.Validate, cfg.Clock)
	if err != nil {
		return nil, err
	}
	return &Client{pool: pool, reads: replica.New(pool, cfg.Replica), actor: cfg.Actor, clock: clock}, nil
}

// Actor returns who the client acts as.
func (c *Client) Actor() access.Actor { return c.actor }

// ReplicaLag says how far behind the primary the client's reads that
// tolerate lag may be (see [Config.Replica]): asked before such a read, it
// bounds it. Without a replica it reports the primary, without asking.
func (c *Client) ReplicaLag(ctx context.Context) (db.Lag, error) {
	return c.reads.Lag(ctx, c.clock, "case.replica_lag")
}

// inTx runs fn in a transaction of its own on b and returns its result.
func inTx[T any](ctx context.Context, b db.Beginner, fn func(tx pgx.Tx) (T, error)) (T, error) {
	var out T
	err := db.WithTx(ctx, b, func(tx pgx.Tx) error {
		var err error
		out, err = fn(tx)
		return err
	})
	return out, err
}
