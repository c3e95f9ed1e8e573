package db_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
)

// Every DK code raised from SQL arrives in Go as its sentinel, and as no
// other.
func TestCatalogueCodesArriveAsSentinels(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	for _, c := range db.Catalogue {
		t.Run(c.Code, func(t *testing.T) {
			t.Parallel()
			_, err := pool.Exec(t.Context(), fmt.Sprintf(
				`DO $$ BEGIN RAISE EXCEPTION 'refused for a reason' USING ERRCODE = '%s'; END $$`, c.Code))
			require.Error(t, err)
			err = db.Translate(err, "test.op", "job", 42)

			require.ErrorIs(t, err, c.Sentinel)
			for _, other := range db.Catalogue {
				if other.Code != c.Code {
					require.NotErrorIs(t, err, other.Sentinel)
				}
			}
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			require.Equal(t, c.Code, pgErr.Code)
			var dbErr *db.Error
			require.ErrorAs(t, err, &dbErr)
			require.Equal(t, c.Code, dbErr.Code)
			require.Equal(t, []any{"job", 42}, dbErr.IDs)
			require.Equal(t,
				fmt.Sprintf("test.op job=42: %s: refused for a reason [%s]", c.Sentinel, c.Code),
				err.Error())
		})
	}
}

// The Go catalogue and docket.error_codes are the same list.
func TestCatalogueMatchesDatabase(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	rows, err := pool.Query(t.Context(), `SELECT code, name FROM docket.error_codes ORDER BY code`)
	require.NoError(t, err)
	type entry struct{ Code, Name string }
	inDB, err := pgx.CollectRows(rows, pgx.RowToStructByPos[entry])
	require.NoError(t, err)
	var inGo []entry
	for _, c := range db.Catalogue {
		inGo = append(inGo, entry{c.Code, c.Name})
	}
	require.Equal(t, inGo, inDB)
}

// Postgres' own refusals with a docket meaning, provoked for real.
func TestPostgresConditionsArriveAsSentinels(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	ctx := t.Context()
	_, err := pool.Exec(ctx, `
		CREATE TABLE parent (id int PRIMARY KEY);
		CREATE TABLE child (id int PRIMARY KEY REFERENCES parent (id),
		                    n int NOT NULL CONSTRAINT child_n_small CHECK (n < 10),
		                    s varchar(3));
		INSERT INTO parent VALUES (1);
		INSERT INTO child VALUES (1, 1, 'a');`)
	require.NoError(t, err)

	cases := []struct {
		name       string
		sql        string
		want       error
		constraint string
	}{
		{"unique", `INSERT INTO parent VALUES (1)`, db.ErrAlreadyExists, "parent_pkey"},
		{"foreign key", `INSERT INTO child VALUES (2, 1, 'a')`, db.ErrMissingReference, "child_id_fkey"},
		{"check", `UPDATE child SET n = 11`, db.ErrInvalidArgument, "child_n_small"},
		{"not null", `UPDATE child SET n = NULL`, db.ErrInvalidArgument, ""},
		{"too long", `UPDATE child SET s = 'abcd'`, db.ErrInvalidArgument, ""},
		{"malformed value", `SELECT 'x'::int`, db.ErrInvalidArgument, ""},
		{"not found from a function", `DO $$ BEGIN RAISE EXCEPTION 'nope' USING ERRCODE = 'P0002'; END $$`, db.ErrNotFound, ""},
		{"serialization failure", `DO $$ BEGIN RAISE EXCEPTION 'lost' USING ERRCODE = '40001'; END $$`, db.ErrSerialization, ""},
		{"deadlock", `DO $$ BEGIN RAISE EXCEPTION 'lost' USING ERRCODE = '40P01'; END $$`, db.ErrSerialization, ""},
		{"read only", `DO $$ BEGIN RAISE EXCEPTION 'on a standby' USING ERRCODE = '25006'; END $$`, db.ErrReadOnly, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pool.Exec(ctx, tc.sql)
			require.Error(t, err)
			err = db.Translate(err, "test.op")
			require.ErrorIs(t, err, tc.want)
			var dbErr *db.Error
			require.ErrorAs(t, err, &dbErr)
			require.Equal(t, tc.constraint, dbErr.Constraint)
			require.Equal(t, tc.want == db.ErrSerialization, db.Retryable(err), "retryable")
		})
	}

	// A serialization failure at commit, as REPEATABLE READ reports one:
	// Retryable knows it translated by WithTx and untranslated.
	t.Run("serialization failure at commit", func(t *testing.T) {
		tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		var n int
		require.NoError(t, tx.QueryRow(ctx, `SELECT n FROM child WHERE id = 1`).Scan(&n))
		_, err = pool.Exec(ctx, `UPDATE child SET n = n + 1 WHERE id = 1`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `UPDATE child SET n = n + 1 WHERE id = 1`)
		require.True(t, db.Retryable(err))
		require.ErrorIs(t, db.Translate(err, "child.bump"), db.ErrSerialization)
		require.False(t, db.Retryable(db.Translate(errors.New("other"), "x")))
	})

	t.Run("no rows", func(t *testing.T) {
		var id int
		err := pool.QueryRow(ctx, `SELECT id FROM parent WHERE id = 99`).Scan(&id)
		err = db.Translate(err, "parent.get", "parent", 99)
		require.ErrorIs(t, err, db.ErrNotFound)
		require.ErrorIs(t, err, pgx.ErrNoRows)
		require.Equal(t, "parent.get parent=99: not found", err.Error())
	})
}

func TestTranslateLeavesOtherErrorsTheirIdentity(t *testing.T) {
	t.Parallel()
	require.NoError(t, db.Translate(nil, "op"))

	plain := errors.New("connection reset")
	err := db.Translate(plain, "job.claim", "job", 7)
	require.ErrorIs(t, err, plain)
	require.Equal(t, "job.claim job=7: connection reset", err.Error())
	for _, c := range db.Catalogue {
		require.NotErrorIs(t, err, c.Sentinel)
	}

	syntax := &pgconn.PgError{Code: "42601", Message: "syntax error"}
	err = db.Translate(syntax, "op")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.NotErrorIs(t, err, db.ErrInvalidArgument)

	// Translating twice keeps the first translation.
	once := db.Translate(&pgconn.PgError{Code: "DK002", Message: "lease lost"}, "job.renew", "job", 1)
	require.Same(t, once, db.Translate(once, "outer"))
}

func TestRefuse(t *testing.T) {
	t.Parallel()
	err := db.Refuse(db.ErrInvalidArgument, "project.list", "limit 0 is outside 1..1000")
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.Equal(t, "project.list: invalid argument: limit 0 is outside 1..1000", err.Error())
}

// A read by id that finds nothing says so in words naming the thing and the
// actor, and is still db.ErrNotFound wrapping what pgx said; any other error
// keeps Translate's form.
func TestNotVisible(t *testing.T) {
	t.Parallel()
	err := db.NotVisible("case.history", "case", int64(7), "user:ana")
	require.ErrorIs(t, err, db.ErrNotFound)
	require.Equal(t, "case.history: case 7 not found or not visible to user:ana", err.Error())
	var e *db.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "user:ana", e.Actor)
	require.Equal(t, []any{"case", int64(7)}, e.IDs)

	err = db.TranslateRead(pgx.ErrNoRows, "job.get", "job", int64(42), "svc:app")
	require.ErrorIs(t, err, db.ErrNotFound)
	require.ErrorIs(t, err, pgx.ErrNoRows)
	require.Equal(t, "job.get: job 42 not found or not visible to svc:app", err.Error())

	err = db.TranslateRead(&pgconn.PgError{Code: "P0002", Message: "no such task"}, "task.get", "task", int64(3), "user:bo")
	require.ErrorIs(t, err, db.ErrNotFound)
	require.Equal(t, "task.get: task 3 not found or not visible to user:bo [P0002]", err.Error())

	err = db.TranslateRead(&pgconn.PgError{Code: "DK010", Message: "bad"}, "task.get", "task", int64(3), "user:bo")
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.Equal(t, "task.get task=3: invalid argument: bad [DK010]", err.Error())
	require.NoError(t, db.TranslateRead(nil, "task.get", "task", int64(3), "user:bo"))
}
