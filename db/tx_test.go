package db_test

import (
	"context"
	"errors"
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
