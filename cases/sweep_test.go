package cases_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// Escalate is the escalation jobs' payload in these tests.
type Escalate struct {
	Reason string `json:"reason"`
}

var escalateKind = jobs.MustKind[Escalate]("case.escalate", 1)

// TestBreachSweepEscalatesThroughAWorker registers obligations with an
// escalation, lets two fall due, and runs a real worker with the breach
// sweep: the due ones are breached, each escalation job is enqueued once,
// naming the case, and run by the worker its commit woke; the one not due
// stays pending.
func TestBreachSweepEscalatesThroughAWorker(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	esc := &cases.Escalation{Kind: escalateKind.Name(), Payload: json.RawMessage(`{"reason": "no ack"}`)}
	var obs []cases.Obligation
	for i, due := range []time.Duration{time.Hour, 2 * time.Hour, 48 * time.Hour} {
		o, err := e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: fmt.Sprintf("step-%d", i), Due: t0.Add(due), Escalation: esc})
		require.NoError(t, err)
		obs = append(obs, o)
	}
	ran := make(chan int64, 10)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, escalateKind, func(_ context.Context, j *jobs.Typed[Escalate]) error {
		require.Equal(t, "no ack", j.Args.Reason)
		ran <- j.ID
		return nil
	}))
	w := sweeperWorker(t, e, e.Clock, reg, func(c *worker.Config) { c.Sweeps = []worker.Sweep{cases.BreachSweep(time.Hour)} })
	testkit.Start(t, w)

	heard := listen(t, e)
	e.Clock.Set(t0.Add(2 * time.Hour))
	moved, err := w.Sweep(ctx, cases.SweepBreaches)
	require.NoError(t, err)
	require.Equal(t, 2, moved)
	require.Equal(t, []string{"default"}, heard.since(t), "the sweep's commit woke the workers of the escalations' queue")
	moved, err = w.Sweep(ctx, cases.SweepBreaches)
	require.NoError(t, err)
	require.Zero(t, moved, "a breach is swept once")
	require.Empty(t, heard.since(t), "a run that enqueues nothing wakes nobody")

	jc, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	var runIDs []int64
	for range 2 {
		select {
		case id := <-ran:
			runIDs = append(runIDs, id)
		case <-time.After(30 * time.Second):
			t.Fatal("the escalation jobs did not run")
		}
	}
	slices.Sort(runIDs)
	for i, o := range obs[:2] {
		got, err := e.app.Obligation(ctx, o.ID)
		require.NoError(t, err)
		require.Equal(t, cases.Breached, got.State)
		require.Equal(t, sweeper, got.ResolvedBy)
		require.Equal(t, t0.Add(2*time.Hour), got.ResolvedAt)
		require.Equal(t, runIDs[i], got.EscalationJobID)
		j, err := jc.Get(ctx, got.EscalationJobID)
		require.NoError(t, err)
		require.Equal(t, c.ID, j.CaseID)
		require.Equal(t, fmt.Sprintf("obligation:%d:breach", o.ID), j.IdempotencyKey)
		// Breaching again by hand is a retry: no second escalation.
		again, err := e.app.Breach(ctx, o.ID)
		require.NoError(t, err)
		require.Equal(t, got, again)
	}
	last, err := e.app.Obligation(ctx, obs[2].ID)
	require.NoError(t, err)
	require.Equal(t, cases.Pending, last.State, "not due yet")
	var escalations int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.jobs WHERE case_id = $1`, c.ID).Scan(&escalations))
	require.Equal(t, 2, escalations)
}

// TestBreachSweepNeedsItsGrants: the sweep looks only at projects where its
// actor holds case.sweep, and at escalating obligations only where it may
// also create jobs.
func TestBreachSweepNeedsItsGrants(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	_, err := e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "ack", Due: t0,
		Escalation: &cases.Escalation{Kind: escalateKind.Name()}})
	require.NoError(t, err)
	before := snapshot(t, e.Pool)
	for _, actor := range []string{string(app), string(sam), string(rival)} {
		var n int
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.obligation_breach_due(100, $1, $2)`,
			actor, e.Clock.Now()).Scan(&n))
		require.Zero(t, n, actor)
	}
	require.Equal(t, before, snapshot(t, e.Pool))
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.obligation_breach_due(100, $1, $2)`,
		string(sweeper), e.Clock.Now()).Scan(&n))
	require.Equal(t, 1, n)
}

// fillObligations gives one case of acme pending obligations with an
// escalation: due of them due before t0, the rest a day or more after.
func fillObligations(t testing.TB, e env, pending, due int) {
	t.Helper()
	ctx := context.Background()
	c := e.admit(t, key("document", fmt.Sprintf("BULK-%d", pending)))
	require.NoError(t, raw(ctx, e.Pool, `
		INSERT INTO docket.obligations (case_id, project, name, due_at, escalation_kind, escalation_queue,
		                                escalation_payload, escalation_payload_schema, escalation_max_attempts,
		                                created_by, created_at)
		SELECT $1, 'acme', 'o-' || n,
		       CASE WHEN n <= $3 THEN $4::timestamptz - n * interval '1 second'
		            ELSE $4::timestamptz + interval '1 day' + n * interval '1 second' END,
		       'case.escalate', 'default', '{}', 1, 5, 'svc:app', $4
		FROM generate_series(1, $2::int) n`, c.ID, pending, due, t0))
	_, err := e.Pool.Exec(ctx, `ANALYZE docket.obligations`)
	require.NoError(t, err)
}

// breachSweepQuery is the statement obligation_breach_due runs to find its
// batch, for EXPLAIN.
const breachSweepQuery = `
	SELECT * FROM docket.obligations
	WHERE state = 'pending' AND due_at <= $1
	  AND docket.grant_check($2, project, 'case.sweep')
	  AND (escalation_kind IS NULL OR docket.grant_check($2, project, 'job.create'))
	ORDER BY due_at, id
	LIMIT 1000
	FOR UPDATE SKIP LOCKED`

// TestBreachSweepIsARangeScan: with 100,000 pending obligations of which 100
// are due, the sweep's batch comes from the partial index by due instant,
// and the sweep reads and moves the 100 due ones only.
func TestBreachSweepIsARangeScan(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	fillObligations(t, e, 100_000, 100)

	text := pgtest.Explain(t, e.Pool, breachSweepQuery, t0, string(sweeper))
	t.Logf("breach sweep plan at 100,000 pending, 100 due:\n%s", text)
	require.Regexp(t, `Index Scan using obligations_due_idx on obligations \(actual [^)]*rows=100 loops=1\)`, text,
		"the scan reads the 100 due obligations of the 100,000 pending, no more")
	require.NotContains(t, text, "Seq Scan")

	// What the function itself reads and writes, not only the copy EXPLAINed
	// above: the backend's counters before and after it, in one transaction
	// (they may still hold earlier transactions' counts, so compare).
	const stats = `SELECT pg_stat_get_xact_tuples_updated('docket.obligations'::regclass),
		pg_stat_get_xact_tuples_returned('docket.obligations_due_idx'::regclass),
		pg_stat_get_xact_numscans('docket.obligations'::regclass)`
	var moved int
	var before, after [3]int64
	require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, stats).Scan(&before[0], &before[1], &before[2]); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM docket.obligation_breach_due(10000, $1, $2)`,
			string(sweeper), t0).Scan(&moved); err != nil {
			return err
		}
		return tx.QueryRow(ctx, stats).Scan(&after[0], &after[1], &after[2])
	}))
	require.Equal(t, 100, moved)
	require.EqualValues(t, 100, after[0]-before[0], "only the due obligations are written")
	require.EqualValues(t, 100, after[1]-before[1], "the sweep reads the 100 due entries of obligations_due_idx, no more")
	require.Zero(t, after[2]-before[2], "the sweep never scans docket.obligations")
	var breached, pending, escalations int
	require.NoError(t, e.Pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE state = 'breached'), count(*) FILTER (WHERE state = 'pending'),
		       count(escalation_job_id)
		FROM docket.obligations`).Scan(&breached, &pending, &escalations))
	require.Equal(t, 100, breached)
	require.Equal(t, 99_900, pending)
	require.Equal(t, 100, escalations)
}

// BenchmarkBreachSweep times one breach sweep of the 100 due obligations
// among 1,000 and among 100,000 pending ones (rolled back after each run, so
// every run sweeps the same 100). The partial index keeps the two close:
// docs/cases.md records the ratio.
func BenchmarkBreachSweep(b *testing.B) {
	for _, pending := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			e := setup(b)
			ctx := context.Background()
			fillObligations(b, e, pending, 100)
			b.ResetTimer()
			for b.Loop() {
				tx, err := e.Pool.Begin(ctx)
				require.NoError(b, err)
				var moved int
				require.NoError(b, tx.QueryRow(ctx, `SELECT count(*) FROM docket.obligation_breach_due(10000, $1, $2)`,
					string(sweeper), t0).Scan(&moved))
				require.Equal(b, 100, moved)
				require.NoError(b, tx.Rollback(ctx))
			}
		})
	}
}
