package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// The bulk path by COPY: docket.job_intake and its statement trigger. Every
// other test of EnqueueMany runs through it too when the package's tests run
// with DOCKET_TEST_COPY_THRESHOLD=1 (see export_test.go).

// intakeEmpty asserts that the intake and its receipts hold nothing, as the
// owner sees them.
func intakeEmpty(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var rows, receipts int
	require.NoError(t, pool.QueryRow(t.Context(),
		`SELECT (SELECT count(*) FROM docket.job_intake), (SELECT count(*) FROM docket.job_intake_receipts)`).Scan(&rows, &receipts))
	require.Zero(t, rows, "rows left in docket.job_intake")
	require.Zero(t, receipts, "receipts left in docket.job_intake_receipts")
}

func TestEnqueueManyByCopyReportsInOrder(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := jobs.CopyingFrom(e.client, 1)

	held := spec(`{"held": 1}`)
	held.IdempotencyKey = "held"
	first, err := e.client.Enqueue(ctx, held)
	require.NoError(t, err)

	specs := make([]jobs.Spec, 0, 60)
	for i := range 57 {
		s := spec(fmt.Sprintf(`{"n": %d}`, i))
		s.Priority = 1 + i%4
		s.Retry = jobs.RetryPolicy{MaxAttempts: 1 + i%5}
		s.Inputs = []string{fmt.Sprintf("asset:%d", i)}
		if i%7 == 0 {
			s.Budget = jobs.Budget{Effects: int64(i + 1)}
		}
		specs = append(specs, s)
	}
	again := spec(`{"again": 1}`)
	again.IdempotencyKey = "again"
	specs = append(specs, held, again, again) // one already held, one repeated in the batch

	receipts, err := c.EnqueueMany(ctx, specs)
	require.NoError(t, err)
	require.Len(t, receipts, len(specs))
	for i, r := range receipts[:57] {
		require.False(t, r.Duplicate, "receipt %d", i)
		j, err := e.client.Get(ctx, r.ID)
		require.NoError(t, err)
		require.JSONEq(t, fmt.Sprintf(`{"n": %d}`, i), string(j.Payload), "receipt %d names its spec's job", i)
		require.Equal(t, 1+i%4, j.Priority)
		require.Equal(t, 1+i%5, j.MaxAttempts)
		require.Equal(t, []string{fmt.Sprintf("asset:%d", i)}, j.Inputs)
	}
	require.Equal(t, jobs.Receipt{ID: first.Job.ID, Duplicate: true}, receipts[57], "a key held resolves to its job")
	require.False(t, receipts[58].Duplicate)
	require.Equal(t, jobs.Receipt{ID: receipts[58].ID, Duplicate: true}, receipts[59], "a key repeated in the batch is one job")

	// Each new job has its birth event, as the array path writes it.
	var born int
	require.NoError(t, e.Pool.QueryRow(ctx,
		`SELECT count(*) FROM docket.job_events WHERE job_id = ANY ($1) AND seq = 1`, receiptIDs(receipts)).Scan(&born))
	require.Equal(t, 59, born, "one first event a job, the held one's too")
	intakeEmpty(t, e.Pool)
}

func receiptIDs(rs []jobs.Receipt) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// TestEnqueueManyByCopyMatchesTheArrays enqueues the same batch by both
// paths, in two projects: the jobs and their first events are the same but
// for ids, project and hashes.
func TestEnqueueManyByCopyMatchesTheArrays(t *testing.T) {
	t.Parallel()
	e := setup(t, testkit.Other)
	e.Allow(t, testkit.Grants(app, testkit.Other, access.JobCreate)...)
	ctx := t.Context()
	other, err := jobs.NewClient(e.API, jobs.Config{Project: testkit.Other, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	arrays := jobs.CopyingFrom(e.client, jobs.MaxEnqueueBatch+1)
	copies := jobs.CopyingFrom(other, 1)

	var specs []jobs.Spec
	for i := range 20 {
		s := spec(fmt.Sprintf(`{"n": %d}`, i))
		s.Queue = fmt.Sprintf("q%d", i%3)
		s.External = i%2 == 0
		s.Repeatable = i%3 == 0
		s.AvailableAt = t0.Add(time.Duration(i) * time.Minute)
		s.Lease = time.Duration(i+1) * time.Minute
		s.Params = []byte(fmt.Sprintf(`{"p": %d}`, i))
		if i%4 == 0 {
			s.IdempotencyKey = fmt.Sprintf("k%d", i)
			s.Output = jobs.OutputRef{Asset: fmt.Sprintf("out:%d", i)}
		}
		if i%5 == 0 {
			s.Budget = jobs.Budget{Effects: 3, Money: 100, Currency: "EUR"}
		}
		specs = append(specs, s)
	}
	_, err = arrays.EnqueueMany(ctx, specs)
	require.NoError(t, err)
	_, err = copies.EnqueueMany(ctx, specs)
	require.NoError(t, err)

	render := func(project string) []string {
		rows, err := e.Pool.Query(ctx, `
			SELECT (to_jsonb(j) - 'id' - 'project')::text || ' ' || (to_jsonb(v) - 'id' - 'job_id' - 'hash' - 'prev_hash' - 'project')::text
			FROM docket.jobs j JOIN docket.job_events v ON v.job_id = j.id
			WHERE j.project = $1 ORDER BY j.id, v.seq`, project)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	require.Equal(t, render(project), render(testkit.Other))
	intakeEmpty(t, e.Pool)
}

// intakeRow is one row of docket.job_intake as the client copies it, for
// the tests that copy by hand.
func intakeRow(intake uuid.UUID, ord int, project string, actor access.Actor, at time.Time, payload string) []any {
	return []any{intake, int32(ord), project, string(actor), at, "billing.invoice", "default", int16(1),
		[]byte(payload), int32(1), "", at, int32(25), false, false, 5 * time.Minute, time.Second,
		10 * time.Minute, 0.2, []byte("null"), []byte("null"), "", int64(0), int64(0), "", "", "", nil}
}

var intakeCols = []string{
	"intake", "ord", "project", "actor", "at", "kind", "queue", "priority", "payload", "payload_schema",
	"idempotency_key", "available_at", "max_attempts", "repeatable", "external", "lease", "backoff_base",
	"backoff_cap", "backoff_jitter", "params", "inputs", "output", "lane_id", "case_id", "compensation_kind",
	"output_kind", "root", "budget",
}

// copyIntake copies rows into docket.job_intake on pool, in a transaction
// it commits, and reads the receipts back as actor.
func copyIntake(ctx context.Context, pool *pgxpool.Pool, intake uuid.UUID, actor access.Actor, rows [][]any) (int, error) {
	var n int
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"docket", "job_intake"}, intakeCols, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM docket.job_intake_take($1, $2)`, intake, string(actor)).Scan(&n)
	})
	return n, err
}

// TestTheIntakeChecksItsCaller copies rows by hand, as application logins:
// every copy that names an actor its login is not bound to, an actor
// without job.create on the project, another project, or rows that do not
// make one batch, is refused with its code, and leaves no job, no event,
// no intake row and no receipt.
func TestTheIntakeChecksItsCaller(t *testing.T) {
	t.Parallel()
	e := setup(t, testkit.Other)
	ctx := t.Context()
	before := snapshot(t, e.Pool)
	now := e.Clock.Now()
	mallory := e.Login(t, testkit.AppRole, "svc:mallory")
	e.Allow(t, testkit.Grants("svc:mallory", testkit.Other, access.JobCreate)...)

	batch := func(project string, actor access.Actor, n int) (uuid.UUID, [][]any) {
		id := uuid.New()
		var rows [][]any
		for i := 1; i <= n; i++ {
			rows = append(rows, intakeRow(id, i, project, actor, now, fmt.Sprintf(`{"i": %d}`, i)))
		}
		return id, rows
	}
	for _, tc := range []struct {
		name string
		pool *pgxpool.Pool
		rows func() (uuid.UUID, access.Actor, [][]any)
		code string
	}{
		{"a login bound to another actor", mallory.Pool, func() (uuid.UUID, access.Actor, [][]any) {
			id, rows := batch(project, app, 3)
			return id, app, rows
		}, "DK009"},
		{"an actor without job.create", e.API, func() (uuid.UUID, access.Actor, [][]any) {
			id, rows := batch(project, nobody, 3)
			return id, nobody, rows
		}, "DK009"},
		{"another project", e.API, func() (uuid.UUID, access.Actor, [][]any) {
			id, rows := batch(testkit.Other, app, 3)
			return id, app, rows
		}, "DK009"},
		{"a project that does not exist", e.API, func() (uuid.UUID, access.Actor, [][]any) {
			id, rows := batch("nowhere", app, 3)
			return id, app, rows
		}, "DK009"},
		{"a second actor in the batch, its login bound to the first", mallory.Pool, func() (uuid.UUID, access.Actor, [][]any) {
			id, rows := batch(testkit.Other, "svc:mallory", 3)
			rows[2][3] = string(app)
			return id, "svc:mallory", rows
		}, "DK010"},
		{"a second project in the batch", mallory.Pool, func() (uuid.UUID, access.Actor, [][]any) {
			id, rows := batch(testkit.Other, "svc:mallory", 3)
			rows[1][2] = project
			return id, "svc:mallory", rows
		}, "DK010"},
		{"a second intake in the statement", e.API, func() (uuid.UUID, access.Actor, [][]any) {
			id, rows := batch(project, app, 3)
			rows[1][0] = uuid.New()
			return id, app, rows
		}, "DK010"},
		{"ordinals out of order", e.API, func() (uuid.UUID, access.Actor, [][]any) {
			id, rows := batch(project, app, 3)
			rows[1], rows[2] = rows[2], rows[1]
			return id, app, rows
		}, "DK010"},
		{"ordinals that are not 1..n", e.API, func() (uuid.UUID, access.Actor, [][]any) {
			id, rows := batch(project, app, 3)
			rows[2][1] = int32(2)
			return id, app, rows
		}, "DK010"},
		{"a malformed spec", e.API, func() (uuid.UUID, access.Actor, [][]any) {
			id, rows := batch(project, app, 3)
			rows[1][5] = "Not A Kind"
			return id, app, rows
		}, "DK010"},
		{"an invalid budget", e.API, func() (uuid.UUID, access.Actor, [][]any) {
			id, rows := batch(project, app, 3)
			rows[1][27] = []byte(`{"effects": -1}`)
			return id, app, rows
		}, "DK010"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, actor, rows := tc.rows()
			_, err := copyIntake(ctx, tc.pool, id, actor, rows)
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "refused: %v", err)
			require.Equal(t, tc.code, pgErr.Code, pgErr.Message)
			require.Equal(t, before, snapshot(t, e.Pool), "a refused copy changed something")
			intakeEmpty(t, e.Pool)
		})
	}

	// The same login and actor, in its own project, is taken.
	id, rows := batch(testkit.Other, "svc:mallory", 3)
	n, err := copyIntake(ctx, mallory.Pool, id, "svc:mallory", rows)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	intakeEmpty(t, e.Pool)

	// Both tables are unlogged; the intake alone has no row-level security.
	var persistence string
	var rls []bool
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT string_agg(relpersistence::text, '' ORDER BY relname), array_agg(relrowsecurity ORDER BY relname) FROM pg_class
		WHERE oid IN ('docket.job_intake'::regclass, 'docket.job_intake_receipts'::regclass)`).Scan(&persistence, &rls))
	require.Equal(t, "uu", persistence)
	require.Equal(t, []bool{false, true}, rls)

	// The application role may insert into the intake and nothing else: no
	// UPDATE or DELETE, and no other table.
	for _, sql := range []string{
		`UPDATE docket.job_intake SET ord = 1`,
		`DELETE FROM docket.job_intake`,
		`DELETE FROM docket.job_intake_receipts`,
		`INSERT INTO docket.jobs (project, kind, payload, created_by, created_at, updated_at) VALUES ('acme', 'a.b', '{}', 'svc:app', now(), now())`,
	} {
		_, err := e.API.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: %v", sql, err)
		require.Equal(t, "42501", pgErr.Code, "%s: %s", sql, pgErr.Message)
	}
}

// TestIntakeReceiptsAreTheCopiersOwn shows a transaction reading the
// receipts of its own copy only: not another actor's, and not those another
// transaction left unread, which the next copy deletes.
func TestIntakeReceiptsAreTheCopiersOwn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	now := e.Clock.Now()
	id := uuid.New()
	// A copy whose transaction commits without reading its receipts.
	require.NoError(t, db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"docket", "job_intake"}, intakeCols,
			pgx.CopyFromRows([][]any{intakeRow(id, 1, project, app, now, `{"left": 1}`)}))
		return err
	}))
	var left int
	require.NoError(t, e.API.QueryRow(ctx, `SELECT count(*) FROM docket.job_intake_take($1, $2)`, id, string(app)).Scan(&left))
	require.Zero(t, left, "another transaction's receipts are not read")

	// Another actor may not read this transaction's receipts.
	id2 := uuid.New()
	require.NoError(t, db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"docket", "job_intake"}, intakeCols,
			pgx.CopyFromRows([][]any{intakeRow(id2, 1, project, app, now, `{"next": 1}`)})); err != nil {
			return err
		}
		var n int
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM docket.job_intake_take($1, 'svc:someone')`, id2).Scan(&n))
		require.Zero(t, n, "another actor's receipts")
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM docket.job_intake_take($1, $2)`, id2, string(app)).Scan(&n))
		require.Equal(t, 1, n)
		return nil
	}))
	intakeEmpty(t, e.Pool) // the left receipt went with the next copy

	// An intake id is copied once.
	before := snapshot(t, e.Pool)
	id3 := uuid.New()
	err := db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		for range 2 {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"docket", "job_intake"}, intakeCols,
				pgx.CopyFromRows([][]any{intakeRow(id3, 1, project, app, now, `{"twice": 1}`)})); err != nil {
				return err
			}
		}
		return nil
	})
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "refused: %v", err)
	require.Equal(t, "DK010", pgErr.Code, pgErr.Message)
	require.Equal(t, before, snapshot(t, e.Pool))
	intakeEmpty(t, e.Pool)
}

// TestEnqueueManyByCopyRefusesAConflictWhole: an idempotency key held by
// another request refuses the whole batch (DK003), and a refused batch in
// the caller's transaction leaves nothing when it rolls back.
func TestEnqueueManyByCopyRefusesAConflictWhole(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := jobs.CopyingFrom(e.client, 1)
	held := spec(`{"held": 1}`)
	held.IdempotencyKey = "held"
	_, err := e.client.Enqueue(ctx, held)
	require.NoError(t, err)
	before := snapshot(t, e.Pool)

	other := spec(`{"held": 2}`)
	other.IdempotencyKey = "held"
	_, err = c.EnqueueMany(ctx, []jobs.Spec{spec(`{"a": 1}`), spec(`{"a": 2}`), other})
	require.ErrorIs(t, err, db.ErrIdempotencyConflict)
	var typed *db.Error
	require.ErrorAs(t, err, &typed)
	require.Equal(t, before, snapshot(t, e.Pool))
	intakeEmpty(t, e.Pool)

	err = db.WithTx(ctx, e.API, func(tx pgx.Tx) error {
		_, err := c.EnqueueManyTx(ctx, tx, []jobs.Spec{spec(`{"b": 1}`), other})
		return err
	})
	require.ErrorIs(t, err, db.ErrIdempotencyConflict)
	require.Equal(t, before, snapshot(t, e.Pool))
	intakeEmpty(t, e.Pool)

	// In the caller's transaction, rolled back: nothing stays.
	tx, err := e.API.Begin(ctx)
	require.NoError(t, err)
	rs, err := c.EnqueueManyTx(ctx, tx, []jobs.Spec{spec(`{"c": 1}`), spec(`{"c": 2}`)})
	require.NoError(t, err)
	require.Len(t, rs, 2)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, before, snapshot(t, e.Pool))
}

// TestCopyAndArraysSettleOneJob races a COPY and an array enqueue naming the
// same idempotency key, many times: each race makes one job, which both
// receipts name, one of them a duplicate.
func TestCopyAndArraysSettleOneJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	copies := jobs.CopyingFrom(e.client, 1)
	arrays := jobs.CopyingFrom(e.client, jobs.MaxEnqueueBatch+1)
	for round := range 20 {
		s := spec(`{"raced": true}`)
		s.IdempotencyKey = fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		var got [2][]jobs.Receipt
		var errs [2]error
		start := make(chan struct{})
		for i, c := range []*jobs.Client{copies, arrays} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got[i], errs[i] = c.EnqueueMany(ctx, []jobs.Spec{spec(fmt.Sprintf(`{"round": %d, "by": %d}`, round, i)), s})
			}()
		}
		close(start)
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.Equal(t, got[0][1].ID, got[1][1].ID, "round %d: one job for the key", round)
		require.NotEqual(t, got[0][1].Duplicate, got[1][1].Duplicate, "round %d: one made it, the other found it", round)
	}
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.jobs WHERE idempotency_key LIKE 'race-%'`).Scan(&n))
	require.Equal(t, 20, n)
	intakeEmpty(t, e.Pool)
}
