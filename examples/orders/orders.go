package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// Order is what a customer buys.
type Order struct {
	Customer string
	Cents    int64
}

// Placed is an order as written: its row and its invoice job.
type Placed struct {
	ID  int64 // shop.orders.id
	Job int64 // docket.jobs.id of the order's invoice job
}

// schema is the service's own table. Setup runs it; it is idempotent.
const schema = `
CREATE SCHEMA IF NOT EXISTS shop;
CREATE TABLE IF NOT EXISTS shop.orders (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer    text        NOT NULL CHECK (customer <> ''),
    cents       bigint      NOT NULL CHECK (cents > 0),
    status      text        NOT NULL DEFAULT 'placed' CHECK (status IN ('placed', 'invoiced')),
    receipt     text,
    invoice_job bigint,
    placed_at   timestamptz NOT NULL
);
COMMENT ON COLUMN shop.orders.invoice_job IS 'The order''s invoice job: docket.jobs.id.';
`

// Setup creates the service's table, shop.orders, unless it exists, on
// pool. It returns the database's error if it cannot.
func Setup(ctx context.Context, pool db.Pool) error {
	if _, err := pool.Exec(ctx, schema); err != nil {
		return fmt.Errorf("orders: setup: %w", err)
	}
	return nil
}

// Config configures a [Service].
type Config struct {
	// Project is the docket project the invoice jobs go into. Required.
	Project string
	// Actor is the service's principal. It needs job.create on Project to
	// place orders; the worker running the invoices needs job.claim.
	// Required.
	Actor access.Actor
	// Retry is the invoice jobs' retry policy. Defaults to
	// [jobs.DefaultRetryPolicy].
	Retry jobs.RetryPolicy
	// Gateway charges the invoices. Defaults to a [SimulatedGateway] that
	// answers at once.
	Gateway Gateway
	// Clock gives the instants written. Defaults to [db.SystemClock].
	Clock db.Clock
}

// Service places orders and runs their invoices.
type Service struct {
	pool    *pgxpool.Pool
	client  *worker.Client
	retry   jobs.RetryPolicy
	gateway Gateway
	clock   db.Clock
}

// NewService returns a service on pool. It refuses, with
// [db.ErrInvalidArgument], a nil pool, a missing project, a malformed actor
// or retry policy.
func NewService(pool *pgxpool.Pool, cfg Config) (*Service, error) {
	if err := cfg.Retry.Validate(); err != nil {
		return nil, err
	}
	if cfg.Gateway == nil {
		cfg.Gateway = &SimulatedGateway{}
	}
	if cfg.Clock == nil {
		cfg.Clock = db.SystemClock{}
	}
	client, err := worker.NewClient(pool, worker.Config{Project: cfg.Project, Actor: cfg.Actor, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	return &Service{pool: pool, client: client, retry: cfg.Retry, gateway: cfg.Gateway, clock: cfg.Clock}, nil
}

// PlaceOrder writes o and enqueues its invoice job in one transaction of
// its own: both are committed, or neither is. See [Service.PlaceOrderTx]
// for what it refuses.
func (s *Service) PlaceOrder(ctx context.Context, o Order) (Placed, error) {
	var p Placed
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		p, err = s.PlaceOrderTx(ctx, tx, o)
		return err
	})
	if err != nil {
		return Placed{}, err
	}
	return p, nil
}

// PlaceOrderTx writes o and enqueues its invoice job in tx, the caller's
// transaction: committed, the order is placed and its invoice will run;
// rolled back, neither ever was. It refuses an order without a customer or
// with an amount that is not positive ([db.ErrInvalidArgument]), and
// returns what [worker.Client.EnqueueTx] refuses, such as
// [db.ErrNotPermitted] when the service's actor lacks job.create.
func (s *Service) PlaceOrderTx(ctx context.Context, tx pgx.Tx, o Order) (Placed, error) {
	if o.Customer == "" || o.Cents <= 0 {
		return Placed{}, db.Refuse(db.ErrInvalidArgument, "orders.place", "an order needs a customer and a positive amount")
	}
	var p Placed
	err := func() error {
		err := tx.QueryRow(ctx,
			"INSERT INTO shop.orders (customer, cents, placed_at) VALUES ($1, $2, $3) RETURNING id",
			o.Customer, o.Cents, s.clock.Now()).Scan(&p.ID)
		if err != nil {
			return err
		}
		spec, err := InvoiceKind.Spec(Invoice{Order: p.ID, Customer: o.Customer, Cents: o.Cents})
		if err != nil {
			return err
		}
		spec.IdempotencyKey = fmt.Sprintf("order-%d", p.ID)
		spec.Retry = s.retry
		enq, err := s.client.EnqueueTx(ctx, tx, spec)
		if err != nil {
			return err
		}
		p.Job = enq.Job.ID
		_, err = tx.Exec(ctx, "UPDATE shop.orders SET invoice_job = $2 WHERE id = $1", p.ID, p.Job)
		return err
	}()
	if err != nil {
		return Placed{}, fmt.Errorf("orders: place order for %s: %w", o.Customer, err)
	}
	return p, nil
}

// Invoice is the payload of an invoice job.
type Invoice struct {
	Order    int64  `json:"order"`
	Customer string `json:"customer"`
	Cents    int64  `json:"cents"`
}

// InvoiceKind is the invoice job's kind, orders.invoice, at payload schema 1.
var InvoiceKind = jobs.MustKind[Invoice]("orders.invoice", 1)

// Register registers the invoice handler on reg, for a worker to run. It
// refuses what [worker.HandleResult] refuses, such as a second registration.
func (s *Service) Register(reg *worker.Registry) error {
	return worker.HandleResult(reg, InvoiceKind, s.invoice, worker.HandlerOptions{Revision: "orders-v1"})
}

// invoice charges the order's customer and says what the answer means for
// the job. A charge that went through marks the order invoiced in the
// transaction that records the job's success.
func (s *Service) invoice(ctx context.Context, job *jobs.Typed[Invoice]) (worker.Result, error) {
	receipt, err := s.gateway.Charge(ctx, job.Args)
	switch {
	case err == nil:
	case errors.Is(err, ErrDeclined):
		return worker.Result{}, worker.Fail(jobs.ClassPermanent, err) // asking again gets the same answer
	case errors.Is(err, ErrNoAnswer):
		return worker.Result{}, worker.Fail(jobs.ClassUncertain, err) // the charge may have happened: never charge twice blindly
	default:
		return worker.Result{}, err // ErrBusy and the like: retry after a backoff
	}
	value, err := json.Marshal(map[string]string{"receipt": receipt})
	if err != nil {
		return worker.Result{}, err
	}
	return worker.Result{
		Value: value,
		WritesFunc: func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE shop.orders SET status = 'invoiced', receipt = $2 WHERE id = $1", job.Args.Order, receipt)
			return err
		},
	}, nil
}
