package schedules_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/schedules"
	"github.com/docket-dev/docket/worker"
)

// TestSweepRace: 8 sweepers released together on a barrier over 50 due
// schedules, round after round as the clock moves on: every occurrence is
// materialized exactly once, as one job, and the cursors end where they
// should.
func TestSweepRace(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	const nSchedules, nSweepers, rounds = 50, 8, 6
	ids := make([]int64, nSchedules)
	for i := range ids {
		sp := spec(fmt.Sprintf("tick-%02d", i), "*/15 * * * *", "Europe/Berlin")
		sp.Start = t0.Add(-50 * time.Minute) // 08:15, 08:30, 08:45 and 09:00 UTC are due
		sp.CatchUp, sp.Grace = schedules.CatchUpAll, time.Hour
		s, err := e.app.Create(ctx, sp)
		require.NoError(t, err)
		ids[i] = s.ID
	}
	workers := make([]*worker.Client, nSweepers)
	for i := range workers {
		workers[i] = e.sweeperWorker(t, 7) // small batches: the sweepers share the work
	}
	perSchedule := 4
	for round := range rounds {
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		moved := make([]int, nSweepers)
		errs := make([]error, nSweepers)
		for i, w := range workers {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ready.Done()
				<-start
				for {
					n, err := w.Sweep(ctx, schedules.SweepName)
					if err != nil || n == 0 {
						errs[i] = err
						return
					}
					moved[i] += n
				}
			}()
		}
		ready.Wait()
		close(start)
		done.Wait()
		total := 0
		for i := range workers {
			require.NoError(t, errs[i])
			total += moved[i]
		}
		require.Equal(t, nSchedules, total, "round %d: each schedule swept once", round)
		var occurrences, distinct, jobsMade int
		require.NoError(t, e.Pool.QueryRow(ctx, `
			SELECT count(*), count(DISTINCT (schedule_id, local_time, fold)), (SELECT count(*) FROM docket.jobs)
			FROM docket.schedule_occurrences`).Scan(&occurrences, &distinct, &jobsMade))
		require.Equal(t, nSchedules*perSchedule, occurrences, "round %d", round)
		require.Equal(t, occurrences, distinct)
		require.Equal(t, occurrences, jobsMade, "one job per occurrence")
		e.Clock.Advance(15 * time.Minute)
		perSchedule++
	}
	s, err := e.app.Get(ctx, ids[0])
	require.NoError(t, err)
	require.EqualValues(t, 4+rounds-1, s.Runs)
	require.Equal(t, t0.Add(time.Duration(rounds-1)*15*time.Minute), s.Cursor)
	require.Equal(t, s.Cursor.Add(15*time.Minute), s.NextDue)
}

// TestSweepThroughAWorker: a started worker runs the jobs the sweep
// materializes, with the occurrence in their params.
func TestSweepThroughAWorker(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	sp := spec("daily", "0 9 * * *", "UTC")
	sp.Start = t0.Add(-time.Minute)
	s, err := e.app.Create(ctx, sp)
	require.NoError(t, err)
	require.Equal(t, t0, s.NextDue)
	ran := make(chan int64, 4)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, tickKind, func(_ context.Context, j *jobs.Typed[Tick]) error {
		ran <- j.ID
		return nil
	}))
	w, err := worker.NewClient(e.API, worker.Config{
		Actor: sweeper, Registry: reg, Clock: e.Clock, Deployment: "test", Logger: testkit.Logger,
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		Sweeps: []worker.Sweep{schedules.Sweep(time.Hour)},
	})
	require.NoError(t, err)
	testkit.Start(t, w)
	moved, err := w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	select {
	case id := <-ran:
		var params string
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT params::text FROM docket.jobs WHERE id = $1`, id).Scan(&params))
		require.Contains(t, params, `"due_at": "2026-11-02T09:00:00+00:00"`)
		require.Contains(t, params, `"fold": 0`)
	case <-time.After(30 * time.Second):
		t.Fatal("the scheduled job did not run")
	}
	moved, err = w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	require.Zero(t, moved, "nothing more is due")
}

// fillSchedules inserts n active schedules of acme by SQL, due of them due
// before t0 and the rest a day or more after.
func fillSchedules(t testing.TB, e env, n, due int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, testkit.Raw(ctx, e.Pool, ops, t0, `
		INSERT INTO docket.schedules (project, name, cron, zone, fixed_time, job_kind, job_queue, job_payload,
		    job_payload_schema, job_max_attempts, catch_up, max_catch_up, grace, starts_at, unbounded_reason, cursor_at,
		    next_due_at, created_by, created_at, updated_at)
		SELECT 'acme', 'bulk-' || k, '*/15 * * * *', 'UTC', false, 'report.tick', 'default', '{}', 1, 5, 'skip', 10,
		       interval '1 hour', $3::timestamptz - interval '1 hour', 'runs for as long as the test',
		       $3::timestamptz - interval '1 hour',
		       CASE WHEN k <= $2 THEN $3::timestamptz - interval '45 minutes'
		            ELSE $3::timestamptz + interval '1 day' + k * interval '1 second' END,
		       'user:ops', $3, $3
		FROM generate_series(1, $1::int) k`, n, due, t0))
	_, err := e.Pool.Exec(ctx, `ANALYZE docket.schedules`)
	require.NoError(t, err)
}

// scheduleDueQuery is the statement schedule_due runs to find its batch,
// for EXPLAIN.
const scheduleDueQuery = `
	SELECT * FROM docket.schedules
	WHERE status = 'active' AND next_due_at <= $1
	  AND docket.grant_check($2, project, 'schedule.sweep')
	  AND docket.grant_check($2, project, 'job.create')
	ORDER BY next_due_at, id
	LIMIT 1000
	FOR UPDATE SKIP LOCKED`

// TestSweepIsARangeScan: with 100,000 active schedules of which 100 are
// due, the sweep's batch comes from the partial index by due instant, and
// the sweep reads the 100 due entries only.
func TestSweepIsARangeScan(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	fillSchedules(t, e, 100_000, 100)

	text := pgtest.Explain(t, e.Pool, scheduleDueQuery, t0, string(sweeper))
	t.Logf("schedule sweep plan at 100,000 schedules, 100 due:\n%s", text)
	require.Regexp(t, `Index Scan using schedules_due_idx on schedules \(actual [^)]*rows=100 loops=1\)`, text)
	require.NotContains(t, text, "Seq Scan")

	const stats = `SELECT pg_stat_get_xact_tuples_returned('docket.schedules_due_idx'::regclass),
		pg_stat_get_xact_numscans('docket.schedules'::regclass)`
	var before, after [2]int64
	w := e.sweeperWorker(t, 10000)
	start := time.Now()
	require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, stats).Scan(&before[0], &before[1]); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM docket.schedule_due(10000, $1, $2)`, string(sweeper), t0).Scan(&n); err != nil {
			return err
		}
		require.Equal(t, 100, n)
		return tx.QueryRow(ctx, stats).Scan(&after[0], &after[1])
	}))
	require.EqualValues(t, 100, after[0]-before[0], "the batch reads the 100 due entries of schedules_due_idx, no more")
	require.Zero(t, after[1]-before[1], "the batch never scans docket.schedules")
	moved, err := w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	t.Logf("one sweep of 100 due schedules among 100,000: %v", time.Since(start))
	require.Equal(t, 100, moved)
	var occurrences int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.schedule_occurrences`).Scan(&occurrences))
	require.Equal(t, 400, occurrences, "08:15 to 09:00 of each, on time within the hour's grace")
}

// TestSweepPassesOverAScheduleItCannotPlan: a schedule whose zone this
// worker cannot load stays due and is logged, and the schedules behind it in
// due order are swept all the same.
func TestSweepPassesOverAScheduleItCannotPlan(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	broken := spec("broken", "0 * * * *", "Europe/Berlin")
	broken.Start = t0.Add(-2 * time.Hour)
	b, err := e.app.Create(ctx, broken)
	require.NoError(t, err)
	fine := spec("fine", "30 * * * *", "Europe/Berlin")
	fine.Start, fine.Grace = t0.Add(-time.Hour), 2*time.Hour
	f, err := e.app.Create(ctx, fine)
	require.NoError(t, err)
	require.True(t, b.NextDue.Before(f.NextDue), "the broken one is first in due order")
	// A zone this machine's tz database lacks, as a worker built without
	// one would see every zone.
	require.NoError(t, testkit.Raw(ctx, e.Pool, ops, t0, `UPDATE docket.schedules SET zone = 'Mars/Olympus_Mons' WHERE id = $1`, b.ID))

	w := e.sweeperWorker(t, 1000)
	moved, err := w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	require.Equal(t, 1, moved, "the fine schedule is advanced")
	require.NotEmpty(t, e.runs(t, f.ID))
	require.Empty(t, e.runs(t, b.ID))
	got, err := e.app.Get(ctx, b.ID)
	require.NoError(t, err)
	require.Equal(t, b.NextDue, got.NextDue, "the broken one stays due, for a worker that can plan it")
	moved, err = w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	require.Zero(t, moved, "passing over it again is not progress")
}
