// Package shop is a program outside docket's module that uses docket as its
// users do, to show that what they need is public: it writes a reminder row
// and enqueues the job that sends it in one transaction, and its handler
// marks the reminder sent in the transaction of the job's success. Its
// tests use dockettest and pgtest with the shop's own migrations.
package shop

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// Migrations are the shop's own tables, applied in name order.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Reminder is the payload of a reminder job.
type Reminder struct {
	ID       int64  `json:"id"`
	Customer string `json:"customer"`
}

// ReminderKind is the reminder job's kind.
var ReminderKind = jobs.MustKind[Reminder]("shop.reminder", 1)

// Service writes reminders and sends them.
type Service struct {
	pool   *pgxpool.Pool
	client *worker.Client
}

// NewService returns a service enqueueing in project as actor, on clock. It
// refuses what worker.NewClient refuses.
func NewService(pool *pgxpool.Pool, project string, actor access.Actor, clock db.Clock) (*Service, error) {
	c, err := worker.NewClient(pool, worker.Config{Project: project, Actor: actor, Clock: clock})
	if err != nil {
		return nil, err
	}
	return &Service{pool: pool, client: c}, nil
}

// Remind is [Service.RemindTx] in a transaction of its own.
func (s *Service) Remind(ctx context.Context, customer string) (int64, error) {
	var id int64
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		id, err = s.RemindTx(ctx, tx, customer)
		return err
	})
	return id, err
}

// RemindTx writes a reminder for customer and enqueues its job in tx:
// committed, the reminder will be sent; rolled back, neither exists. It
// returns the reminder's id.
func (s *Service) RemindTx(ctx context.Context, tx pgx.Tx, customer string) (int64, error) {
	var id int64
	if err := tx.QueryRow(ctx, "INSERT INTO shop.reminders (customer) VALUES ($1) RETURNING id", customer).Scan(&id); err != nil {
		return 0, fmt.Errorf("shop: write reminder: %w", err)
	}
	spec, err := ReminderKind.Spec(Reminder{ID: id, Customer: customer})
	if err != nil {
		return 0, err
	}
	spec.Queue = "mail"
	if _, err := s.client.EnqueueTx(ctx, tx, spec); err != nil {
		return 0, fmt.Errorf("shop: enqueue reminder: %w", err)
	}
	return id, nil
}

// Register registers the reminder handler on reg.
func Register(reg *worker.Registry) error {
	return worker.HandleResult(reg, ReminderKind, send)
}

// send sends a reminder; a customer named "nobody" has no address.
func send(ctx context.Context, j *jobs.Typed[Reminder]) (worker.Result, error) {
	if j.Args.Customer == "nobody" {
		return worker.Result{}, worker.Fail(jobs.ClassPermanent, fmt.Errorf("no address for %s", j.Args.Customer))
	}
	return worker.Result{WritesFunc: func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE shop.reminders SET sent = true, job = $2 WHERE id = $1", j.Args.ID, j.ID)
		return err
	}}, nil
}
