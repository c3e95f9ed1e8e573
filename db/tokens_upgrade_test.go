package db_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/sql/definitions"
	"github.com/docket-dev/docket/sql/schema"
)

// definitions33 are the definition files of the build before claim tokens
// were stored as digests (migration 34): its claims stored each token, and
// its events' outcomes name the token itself.
//
//go:embed testdata/definitions33.tar.gz
var definitions33 []byte

// migrateTo33 migrates the database behind pool as the build before
// migration 34 did: River's migrations, docket's versioned migrations to 33,
// then that build's definitions and privileges.
func migrateTo33(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := t.Context()
	_, err := pool.Exec(ctx, `CREATE SCHEMA docket`)
	require.NoError(t, err)
	river, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: db.Schema, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	_, err = river.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer func(d *sql.DB) { require.NoError(t, d.Close()) }(sqlDB)
	sub, err := fs.Sub(schema.FS, ".")
	require.NoError(t, err)
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, sub,
		goose.WithTableName(db.Schema+".goose_db_version"), goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 33)
	require.NoError(t, err)

	zr, err := gzip.NewReader(bytes.NewReader(definitions33))
	require.NoError(t, err)
	files := map[string]string{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = string(data)
	}
	require.NoError(t, db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		for _, name := range append(append([]string{}, definitions.Order...), definitions.Privileges) {
			text, ok := files[name]
			if !ok {
				continue // a file made since: that build had none of it
			}
			if _, err := tx.Exec(ctx, text); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	}))
	require.NoError(t, db.RecordDefinitionsMadeByHand(ctx, pool, "definitions33"))
}

// A database whose jobs were claimed and completed before claim tokens were
// stored as digests is migrated: every token it held, live or spent, is
// replaced by its digest, so none is stored any more; every history written
// before still verifies, a job held across the upgrade included; and the
// holder of that job completes it with the token its claim handed it then,
// which verifies too. Nothing the upgrade needs a token for reads one.
func TestUpgradeStoresClaimTokensAsDigests(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _ := pgtest.NewEmptyDB(t)
	migrateTo33(t, pool)
	const at = "2026-11-02T09:00:00Z"
	for _, stmt := range []string{
		`SELECT docket.project_create('acme', 'user:ana', $1)`,
		`SELECT docket.grant_add('svc:app', 'acme', c, 'user:ana', $1) FROM unnest('{job.create,job.claim,job.view}'::text[]) c`,
		`SELECT docket.job_enqueue_many('acme', 'svc:app', $1, '{a.b,a.b,a.c}', '{default,default,default}', '{1,1,1}',
			'{1,2,3}', '{1,1,1}', '{"","",""}', '{NULL,NULL,NULL}', '{5,5,5}', '{f,f,f}', '{f,t,f}', '{5 min,5 min,5 min}',
			'{1s,1s,1s}', '{10 min,10 min,10 min}', '{0.2,0.2,0.2}', '{null,null,null}', '{null,null,null}', '{"","",""}',
			'{0,0,0}', '{0,0,0}', '{"","",""}')`,
		`SELECT docket.job_claim('acme', 'default', 2, NULL, NULL, NULL, 'svc:app', $1)`,
		`SELECT docket.job_complete_many(array_agg(id ORDER BY id), array_agg(claim_token ORDER BY id),
			array_agg('{"done": true}'::jsonb), 'svc:app', $1::timestamptz + interval '1 minute', NULL)
		 FROM (SELECT id, claim_token FROM docket.jobs WHERE state = 'claimed' ORDER BY id LIMIT 1) j`,
	} {
		_, err := pool.Exec(ctx, stmt, at)
		require.NoError(t, err, stmt)
	}
	var held int64
	var token, spent uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `SELECT id, claim_token FROM docket.jobs WHERE state = 'claimed'`).Scan(&held, &token))
	require.NoError(t, pool.QueryRow(ctx, `SELECT outcome_token FROM docket.jobs WHERE state = 'succeeded'`).Scan(&spent))
	require.NotEqual(t, token, spent)
	histories := jobHistories(t, pool)
	require.Len(t, histories, 3)

	require.NoError(t, db.Migrate(ctx, pool))

	require.Equal(t, histories, jobHistories(t, pool), "the histories written before")
	var stored, digest uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `SELECT claim_token, docket.job_token_digest($2) FROM docket.jobs WHERE id = $1`,
		held, token).Scan(&stored, &digest))
	require.Equal(t, digest, stored, "the live token is now its digest")
	var tokens int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM docket.jobs j, docket.job_completions c
		WHERE $1::uuid IN (j.claim_token, j.outcome_token) OR $2::uuid IN (j.claim_token, j.outcome_token)
		   OR c.claim_token IN ($1, $2)`, token, spent).Scan(&tokens))
	require.Zero(t, tokens, "no token is stored")
	verifyAll := func() {
		t.Helper()
		require.Equal(t, []string{"1 true <nil>", "2 true <nil>", "3 true <nil>"}, historyVerdicts(t, pool))
	}
	verifyAll()

	// The holder completes with the token it was handed before the upgrade.
	var state string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM docket.job_complete($1, $2, '{"done": true}', 'svc:app', $3::timestamptz + interval '2 minutes')`,
		held, token, at).Scan(&state))
	require.Equal(t, "succeeded", state)
	verifyAll()
}
