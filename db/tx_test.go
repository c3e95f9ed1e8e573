package db_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
)

func TestWithTx(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	ctx := t.Context()
	_, err := pool.Exec(ctx, `CREATE TABLE notes (body text)`)
	require.NoError(t, err)
	count := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notes`).Scan(&n))
		return n
	}
	insert := func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO notes VALUES ('x')`)
		return err
	}

	require.NoError(t, db.WithTx(ctx, pool, insert))
	require.Equal(t, 1, count(), "commit on nil")

	boom := errors.New("boom")
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, insert(tx))
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, count(), "rollback on error")

	require.PanicsWithValue(t, "kaput", func() {
		_ = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			require.NoError(t, insert(tx))
			panic("kaput")
		})
	})
	require.Equal(t, 1, count(), "rollback on panic")

	// Nested in the caller's transaction: a savepoint. The inner failure
	// undoes only the inner write; the outer transaction goes on.
	require.NoError(t, db.WithTx(ctx, pool, func(outer pgx.Tx) error {
		require.NoError(t, insert(outer))
		err := db.WithTx(ctx, outer, func(inner pgx.Tx) error {
			require.NoError(t, insert(inner))
			return boom
		})
		require.ErrorIs(t, err, boom)
		return nil
	}))
	require.Equal(t, 2, count())
}

func TestWithTxBeginFails(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	err := db.WithTx(ctx, pool, func(pgx.Tx) error { called = true; return nil })
	require.Error(t, err)
	require.False(t, called)
}

// A function that ends its goroutine inside WithTx (runtime.Goexit, as
// t.FailNow does when an assertion fails) leaves nothing written, and the
// transaction's connection is back in the pool, so closing the pool does
// not wait for it. The same for the savepoint of a nested WithTx.
func TestWithTxRollsBackOnGoexit(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	ctx := t.Context()
	_, err := pool.Exec(ctx, `CREATE TABLE notes (body text)`)
	require.NoError(t, err)
	insert := func(tx pgx.Tx) {
		_, err := tx.Exec(ctx, `INSERT INTO notes VALUES ('x')`)
		require.NoError(t, err)
	}
	exits := func(fn func()) {
		done := make(chan bool)
		go func() {
			returned := false
			defer func() { done <- returned }()
			fn()
			returned = true
		}()
		require.False(t, <-done, "the goroutine went on after runtime.Goexit")
	}

	exits(func() {
		_ = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			insert(tx)
			runtime.Goexit()
			return nil
		})
	})
	exits(func() {
		_ = db.WithTx(ctx, pool, func(outer pgx.Tx) error {
			insert(outer)
			return db.WithTx(ctx, outer, func(inner pgx.Tx) error {
				insert(inner)
				runtime.Goexit()
				return nil
			})
		})
	})

	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notes`).Scan(&n))
	require.Zero(t, n, "rolled back")
	require.Zero(t, pool.Stat().AcquiredConns(), "every connection is back in the pool")
}
