package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
)

// fillTasks gives acme pending tasks on one case, each with its wait: due
// of them past their deadline at t0, the rest due in a day or more.
func fillTasks(t testing.TB, e env, pending, due int) {
	t.Helper()
	ctx := context.Background()
	c := e.admit(t, fmt.Sprintf("BULK-%d", pending))
	require.NoError(t, testkit.Raw(ctx, e.Pool, ops, t0, `
		WITH w AS (
			INSERT INTO docket.waits (case_id, project, name, keys, deadline, on_arrival_kind, on_arrival_queue,
			                          on_arrival_payload, on_arrival_payload_schema, on_arrival_max_attempts, created_by, created_at)
			SELECT $1, 'acme', 'task.bulk-' || n, ARRAY['task:bulk-' || n], $3::timestamptz + interval '3000 days',
			       'payment.decided', 'default', '{}', 1, 5, 'svc:app', $3::timestamptz - interval '2 days'
			FROM generate_series(1, $2::int) n
			RETURNING id, name
		)
		INSERT INTO docket.tasks (case_id, project, key, title, summary, proposal, evidence, decisions, audience,
		                          audience_caps, proposer, acting_for, excluded, deadline, on_expiry, escalate_to,
		                          escalate_caps, escalate_for, wait_id, opened_by, opened_at, updated_at)
		SELECT $1, 'acme', w.name, 'Bulk ' || w.name, '', '{}', '{}', ARRAY['approve', 'reject'], '{}', ARRAY['task.review'],
		       'user:pat', '{}', '{}',
		       CASE WHEN split_part(w.name, '-', 2)::int <= $4 THEN $3::timestamptz - split_part(w.name, '-', 2)::int * interval '1 second'
		            ELSE $3::timestamptz + interval '1 day' + split_part(w.name, '-', 2)::int * interval '1 second' END,
		       'escalate', ARRAY['user:boss'], '{}', interval '1 day', w.id, 'svc:app',
		       $3::timestamptz - interval '2 days', $3::timestamptz - interval '2 days'
		FROM w`, c.ID, pending, t0, due))
	_, err := e.Pool.Exec(ctx, `ANALYZE docket.tasks`)
	require.NoError(t, err)
}

// expirySweepQuery is the statement task_expire_due runs to find its batch.
const expirySweepQuery = `
	SELECT * FROM docket.tasks t
	WHERE t.status = 'pending' AND t.deadline <= $1
	  AND docket.grant_check($2, t.project, 'case.sweep') AND docket.grant_check($2, t.project, 'job.create')
	ORDER BY t.deadline, t.id
	LIMIT 1000
	FOR NO KEY UPDATE SKIP LOCKED`

// TestTheExpirySweepIsARangeScan: with 100,000 pending tasks of which 100
// are due, the sweep's batch comes from tasks_expiry_idx, reading and
// moving the 100 due tasks only.
func TestTheExpirySweepIsARangeScan(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const rows = 100_000
	fillTasks(t, e, rows, 100)
	plan := pgtest.Explain(t, e.Pool, expirySweepQuery, t0, string(sweeper))
	t.Logf("expiry sweep plan at %d pending, 100 due:\n%s", rows, plan)
	require.Regexp(t, `Index Scan using tasks_expiry_idx on tasks t \(actual [^)]*rows=100 loops=1\)`, plan,
		"the scan reads the 100 due tasks, no more")
	require.NotContains(t, plan, "Seq Scan")

	ctx := context.Background()
	stats := `SELECT pg_stat_get_xact_tuples_updated('docket.tasks'::regclass),
		pg_stat_get_xact_tuples_returned('docket.tasks_expiry_idx'::regclass),
		pg_stat_get_xact_numscans('docket.tasks'::regclass)`
	var before, after [3]int64
	var moved int
	require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, stats).Scan(&before[0], &before[1], &before[2]); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM docket.task_expire_due(10000, $1, $2)`, string(sweeper), t0).Scan(&moved); err != nil {
			return err
		}
		return tx.QueryRow(ctx, stats).Scan(&after[0], &after[1], &after[2])
	}))
	require.Equal(t, 100, moved)
	require.EqualValues(t, 100, after[0]-before[0], "only the due tasks are written")
	require.EqualValues(t, 100, after[1]-before[1], "the sweep reads the 100 due entries of tasks_expiry_idx, no more")
	require.Zero(t, after[2]-before[2], "the sweep never scans docket.tasks")
}

var errRollback = errors.New("roll back")

// BenchmarkExpirySweep times one expiry sweep of 100 due tasks among 1,000
// and among 100,000 pending, each run rolled back so the next finds the
// same 100. Compare the two ns/op: the sweep's cost follows what is due,
// not what is pending.
//
//	go test -run XXX -bench BenchmarkExpirySweep -benchtime 50x ./tasks/
func BenchmarkExpirySweep(b *testing.B) {
	for _, pending := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			e := setup(b)
			fillTasks(b, e, pending, 100)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				err := db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
					var n int
					if err := tx.QueryRow(ctx, `SELECT count(*) FROM docket.task_expire_due(1000, $1, $2)`, string(sweeper), t0).Scan(&n); err != nil {
						return err
					}
					if n != 100 {
						return fmt.Errorf("moved %d", n)
					}
					return errRollback
				})
				if !errors.Is(err, errRollback) {
					b.Fatal(err)
				}
			}
		})
	}
}
