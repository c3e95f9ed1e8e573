package cases

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/dbsqlc"
	"github.com/docket-dev/docket/internal/newclient"
	"github.com/docket-dev/docket/jobs"
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
	// Dispatcher, when set, dispatches the continuation a delivery or a wait
	// enqueues in the caller's transaction, so it runs as soon as that
	// commits; a *worker.Client is one. Without it, or when the call runs on
	// a connection rather than a pgx.Tx, the worker's dispatch sweep
	// dispatches the job at its next run.
	Dispatcher Dispatcher
}

// Dispatcher dispatches jobs enqueued in tx to the workers that run them.
// *worker.Client implements it.
type Dispatcher interface {
	DispatchTx(ctx context.Context, tx pgx.Tx, js ...jobs.Job) error
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
	pool       db.Pool
	actor      access.Actor
	clock      db.Clock
	dispatcher Dispatcher
}

// NewClient returns a client on pool, typically a *pgxpool.Pool. It refuses,
// with [db.ErrInvalidArgument], a nil pool or a malformed actor. It does not
// check the actor's grants: the database decides that on each call.
func NewClient(pool db.Pool, cfg Config) (*Client, error) {
	clock, err := newclient.Check("cases.new_client", pool, cfg.Actor.Validate, cfg.Clock)
	if err != nil {
		return nil, err
	}
	return &Client{pool: pool, actor: cfg.Actor, clock: clock, dispatcher: cfg.Dispatcher}, nil
}

// Actor returns who the client acts as.
func (c *Client) Actor() access.Actor { return c.actor }

// dispatch hands the jobs ids, enqueued on q, to the client's dispatcher
// when it has one and q is a transaction; otherwise the dispatch sweep will.
func (c *Client) dispatch(ctx context.Context, q db.DBTX, ids ...int64) error {
	tx, ok := q.(pgx.Tx)
	if db.IsNil(c.dispatcher) || !ok || len(ids) == 0 {
		return nil
	}
	jc, err := jobs.NewClient(tx, jobs.Config{Actor: c.actor, Clock: c.clock})
	if err != nil {
		return err
	}
	js, err := jc.GetManyTx(ctx, tx, ids)
	if err != nil {
		return err
	}
	return c.dispatcher.DispatchTx(ctx, tx, js...)
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
