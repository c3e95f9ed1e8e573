package db

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what docket's queries run on: a *pgxpool.Pool, a *pgx.Conn or a
// pgx.Tx all satisfy it. Passing the caller's transaction makes docket's
// writes commit or roll back with the caller's own.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Pool is what a docket client runs on when no transaction is given:
// a *pgxpool.Pool, typically, or a *pgx.Conn. Every NewClient takes one;
// each operation X runs on it, in a transaction of its own where it writes
// more than one statement, while its XTx form runs on the caller's pgx.Tx.
type Pool interface {
	DBTX
	Beginner
}

// Beginner starts a transaction: a *pgxpool.Pool or *pgx.Conn starts a real
// one, a pgx.Tx starts a savepoint.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// WithTx runs fn in a transaction begun on b and commits it when fn returns
// nil; it rolls back when fn returns an error, panics, or ends its goroutine
// with runtime.Goexit (as t.FailNow does when a test assertion fails inside
// fn), and the panic or the exit then goes on as if WithTx were not there.
// When b is itself a pgx.Tx, the work runs in a savepoint, so a failure
// undoes fn's writes without aborting the caller's transaction. It returns
// fn's error unchanged, or the error from begin or commit; a commit refused
// because the transaction lost a race (40001, which SERIALIZABLE may report
// only at commit) matches [ErrSerialization].
//
// WithTx does not retry: a transaction that lost a race under REPEATABLE
// READ or SERIALIZABLE ([Retryable] reports true for its error) is the
// caller's to run again, from its first read, as only the caller knows
// whether its own work may be repeated. Under READ COMMITTED docket's rules
// wait for the winner and refuse with their own DK code instead.
func WithTx(ctx context.Context, b Beginner, fn func(tx pgx.Tx) error) (err error) {
	tx, err := b.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	returned := false
	defer func() {
		if !returned {
			// fn panicked or called runtime.Goexit: give the connection
			// back, then let the panic or the exit unwind.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	err = fn(tx)
	returned = true
	if err != nil {
		if rbErr := tx.Rollback(context.WithoutCancel(ctx)); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return Translate(err, "commit")
	}
	return nil
}

// IsNil reports whether v is nil or holds a nil pointer, such as a nil
// *pgxpool.Pool passed as a DBTX, which a nil check of the interface does
// not catch. Constructors use it to refuse a nil connection up front.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

// Every docket list returns pages: a filter's Limit of 0 asks for
// DefaultPage items, and any other limit must be 1..MaxPage.
const (
	DefaultPage = 100
	MaxPage     = 1000
)
