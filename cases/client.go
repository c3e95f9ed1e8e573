package cases

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/cases"
	"github.com/docket-dev/docket/internal/newclient"
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
	return &Client{pool: pool, actor: cfg.Actor, clock: clock}, nil
}

// Actor returns who the client acts as.
func (c *Client) Actor() access.Actor { return c.actor }

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
