package retention_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/retention"
	"github.com/docket-dev/docket/schedules"
	"github.com/docket-dev/docket/worker"
)

// snapshot renders every table a prune or a policy change writes.
func snapshot(t testing.TB, e env) string {
	t.Helper()
	return testkit.Snapshot(t, e.Pool, "docket.jobs(id, state)", "docket.job_events(job_id, seq, hash)", "docket.prunes(id, jobs)",
		"docket.retention_policies", "docket.retention_events(id, project, horizons)", "docket.cases(id, status)",
		"docket.messages(id, status)", "docket.schedule_occurrences(id, job_id)")
}

// TestConcurrentPrunesRemoveEachRowOnce releases six prunes at once over
// 300 finished jobs, three times: together they remove each job once, and
// their records name every job exactly once.
func TestConcurrentPrunesRemoveEachRowOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 1, 1))
	ctx := t.Context()
	for round := range 3 {
		specs := make([]jobs.Spec, 300)
		for i := range specs {
			specs[i] = jobs.Spec{Kind: "report.build", Payload: json.RawMessage(`{}`)}
		}
		_, err := e.jobs.EnqueueMany(ctx, specs)
		require.NoError(t, err)
		want := map[int64]bool{}
		for {
			claimed, err := e.jobs.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: 100})
			require.NoError(t, err)
			if len(claimed) == 0 {
				break
			}
			batch := make([]jobs.Completion, len(claimed))
			for i, j := range claimed {
				batch[i] = jobs.Completion{Lease: j.Lease()}
				want[j.ID] = true
			}
			_, err = e.jobs.CompleteMany(ctx, batch)
			require.NoError(t, err)
		}
		require.Len(t, want, 300)
		e.Clock.Advance(2 * time.Hour)

		release := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var records []retention.Prune
		errs := make(chan error, 6)
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-release
				for {
					ps, err := e.pruner.Prune(ctx, 20)
					if err != nil {
						errs <- err
						return
					}
					if len(ps) == 0 {
						return
					}
					mu.Lock()
					records = append(records, ps...)
					mu.Unlock()
				}
			}()
		}
		close(release)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		removed := 0
		seen := map[int64]int{}
		for _, p := range records {
			removed += p.Jobs
			var in []int64
			require.NoError(t, e.Pool.QueryRow(ctx, `SELECT array_agg(i ORDER BY i) FROM docket.prunes p,
				generate_series(lower(p.job_ids), upper(p.job_ids) - 1) i WHERE p.id = $1 AND p.job_ids @> i`, p.ID).Scan(&in))
			require.Len(t, in, p.Jobs)
			for _, id := range in {
				seen[id]++
			}
		}
		require.Equal(t, 300, removed, "round %d", round)
		for id := range want {
			require.Equal(t, 1, seen[id], "job %d in round %d", id, round)
		}
		require.Zero(t, rows(t, e, "docket.jobs", "state = 'succeeded'"))
	}
}

// TestAPruneKilledMidwayLeavesNothingHalfRemoved holds a prune inside its
// transaction after it has deleted the events and before it deletes the
// jobs (an operator's SHARE lock on docket.jobs blocks it there), kills its
// backend, and finds every job with all its events and no prune recorded.
func TestAPruneKilledMidwayLeavesNothingHalfRemoved(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 1, 1))
	ctx := t.Context()
	var ids []int64
	for range 5 {
		ids = append(ids, finish(t, e, e.jobs, "", jobs.Succeeded).ID)
	}
	e.Clock.Advance(2 * time.Hour)
	before := snapshot(t, e)

	blocker, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = blocker.Exec(ctx, "LOCK TABLE docket.jobs IN SHARE MODE")
	require.NoError(t, err)

	conn, err := e.API.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var pid int
	require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	done := make(chan error, 1)
	go func() {
		tx, err := conn.Begin(ctx)
		if err != nil {
			done <- err
			return
		}
		_, err = e.pruner.PruneTx(ctx, tx, 100)
		if err == nil {
			err = tx.Commit(ctx)
		}
		done <- err
	}()
	// Wait until the prune waits for the lock: it has removed the events
	// by then, in its transaction.
	for {
		var waiting bool
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)`,
			pid).Scan(&waiting))
		if waiting {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the prune ended before it blocked: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	var deletedEvents bool
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
		WHERE l.pid = $1 AND c.relname = 'job_events' AND l.mode = 'RowExclusiveLock' AND l.granted)`, pid).Scan(&deletedEvents))
	require.True(t, deletedEvents, "the prune was inside its deletes")
	_, err = e.Pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	require.NoError(t, err)
	require.Error(t, <-done)
	require.NoError(t, blocker.Rollback(ctx))

	require.Equal(t, before, snapshot(t, e), "nothing half-removed, no prune recorded")
	for _, id := range ids {
		requireKept(t, e, id)
	}
	ps, err := e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, 5, ps[0].Jobs, "the next prune removes them whole")
}

// TestDeletesOutsideThePruneAreRefused tries a raw DELETE of every table a
// prune deletes from, as the schema owner (refused by the triggers) and as
// the application's login (no privilege), and finds nothing changed.
func TestDeletesOutsideThePruneAreRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 1, 1))
	ctx := t.Context()
	m := open(t, e, "o-1")
	run(t, e, m.job, jobs.Succeeded)
	_, err := e.cases.Close(ctx, m.c.ID)
	require.NoError(t, err)
	j := finish(t, e, e.jobs, "", jobs.Succeeded)
	e.Clock.Advance(2 * time.Hour)
	other := finish(t, e, e.jobs, "", jobs.Succeeded)
	ps, err := e.pruner.Prune(ctx, 1)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	requirePruned(t, e, j.ID, ps[0].ID)
	before := snapshot(t, e)

	tables := []string{"docket.jobs", "docket.job_events", "docket.cases", "docket.case_keys", "docket.obligations",
		"docket.case_events", "docket.messages", "docket.waits", "docket.timers", "docket.schedule_occurrences",
		"docket.prunes", "docket.retention_events", "docket.retention_policies"}
	for _, table := range tables {
		err := testkit.Raw(ctx, e.Pool, ops, e.Clock.Now(), "DELETE FROM "+table)
		if table == "docket.schedule_occurrences" {
			require.NoError(t, err, "empty: no row to refuse")
			continue
		}
		require.ErrorIs(t, err, db.ErrImmutable, table)
		_, err = e.API.Exec(ctx, "DELETE FROM "+table)
		require.ErrorIs(t, db.Translate(err, "raw"), db.ErrNotPermitted, table)
	}
	// A forged prune record is no way in for the application either.
	_, err = e.API.Exec(ctx, `INSERT INTO docket.prunes (project, xid, actor, at, horizons, jobs, job_ids, job_states,
		job_events, cases, case_ids, case_events, case_keys, obligations, timers, waits, messages, message_ids, occurrences,
		kept_unverified) VALUES ('acme', pg_current_xact_id(), 'svc:app', now(), '{}', 0, '{}', '{}', 0, 0, '{}', 0, 0, 0, 0, 0, 0, '{}', 0, 0)`)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrNotPermitted)
	require.Equal(t, before, snapshot(t, e))
	requireKept(t, e, m.job)
	requireKept(t, e, other.ID)
}

// TestAJobWhoseHistoryDoesNotVerifyIsKept rewrites a finished job by hand
// (the owner disabling the guards): one of its events, or the handler
// revision it records as claimed under, which leaves its chain linked but
// the job not holding what its last claim recorded. Either way the prune
// keeps that job, counts it, and removes the others.
func TestAJobWhoseHistoryDoesNotVerifyIsKept(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, table, trigger, rewrite, problem string // rewrite: of job $1, by hand
	}{
		{"an altered event", "docket.job_events", "job_events_append_only",
			"UPDATE docket.job_events SET actor = 'svc:mallory' WHERE job_id = $1 AND seq = 2", "altered"},
		{"a rewritten revision", "docket.jobs", "USER",
			"UPDATE docket.jobs SET claimed_revision = 'v9' WHERE id = $1", "claimed revision v9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, hours(1, 1, 1))
			ctx := t.Context()
			good := finish(t, e, e.jobs, "", jobs.Succeeded)
			bad := finish(t, e, e.jobs, "", jobs.Succeeded)
			require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
				for _, s := range []string{"ALTER TABLE " + c.table + " DISABLE TRIGGER " + c.trigger, c.rewrite,
					"ALTER TABLE " + c.table + " ENABLE TRIGGER " + c.trigger} {
					var args []any
					if s == c.rewrite {
						args = []any{bad.ID}
					}
					if _, err := tx.Exec(ctx, s, args...); err != nil {
						return err
					}
				}
				return nil
			}))
			e.Clock.Advance(2 * time.Hour)
			ps, err := e.pruner.Prune(ctx, 100)
			require.NoError(t, err)
			require.Len(t, ps, 1)
			require.Equal(t, 1, ps[0].Jobs)
			require.Equal(t, 1, ps[0].KeptUnverified)
			require.Equal(t, bad.ID, *ps[0].FirstUnverified)
			requirePruned(t, e, good.ID, ps[0].ID)
			v, err := e.jobs.Verify(ctx, bad.ID)
			require.NoError(t, err)
			require.False(t, v.OK, "kept, for an operator to look at")
			require.Contains(t, v.Problem, c.problem)
		})
	}
}

// TestAScheduledJobStaysAsLongAsItsOccurrence prunes a schedule's job only
// once its occurrence is past the occurrences horizon, and the occurrence
// with it.
func TestAScheduledJobStaysAsLongAsItsOccurrence(t *testing.T) {
	t.Parallel()
	e := setup(t, retention.Policy{SucceededJobs: time.Hour, FailedJobs: time.Hour, Messages: time.Hour,
		Occurrences: 3 * time.Hour, ClosedCases: time.Hour})
	ctx := t.Context()
	sc, err := schedules.NewClient(e.API, schedules.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	_, err = sc.Create(ctx, schedules.Spec{Project: project, Name: "hourly", Cron: "0 * * * *", Zone: "UTC",
		Job:       schedules.Job{Kind: "report.build", Payload: json.RawMessage(`{}`)},
		Unbounded: true, UnboundedReason: "runs for as long as the test"})
	require.NoError(t, err)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, jobs.MustKind[struct{}]("report.build", 1), func(context.Context, *jobs.Typed[struct{}]) error { return nil }))
	w, err := worker.NewClient(e.API, worker.Config{Actor: pruner, Registry: reg, Clock: e.Clock, Logger: testkit.Logger,
		Deployment: "test", Sweeps: []worker.Sweep{schedules.Sweep(time.Minute), retention.Sweep(0)}})
	require.NoError(t, err)
	e.Clock.Advance(time.Hour)
	n, err := w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var jobID int64
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT job_id FROM docket.schedule_occurrences").Scan(&jobID))
	run(t, e, jobID, jobs.Succeeded)

	e.Clock.Advance(2 * time.Hour)
	n, err = w.Sweep(ctx, retention.SweepName)
	require.NoError(t, err)
	require.Zero(t, n, "past the job horizon, not the occurrence's")
	e.Clock.Advance(time.Hour)
	ps, err := e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, 1, ps[0].Occurrences)
	requirePruned(t, e, jobID, ps[0].ID)
	require.Zero(t, rows(t, e, "docket.schedule_occurrences", "true"))
}

// TestPolicyChangesAreRecorded: each Set is a retention_events row with
// the horizons before and after, attributed to its actor; Get reads the
// policy back, or the defaults for a project that set none.
func TestPolicyChangesAreRecorded(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 2, 3))
	ctx := t.Context()
	p := retention.Policy{SucceededJobs: 90 * time.Minute, FailedJobs: retention.Forever, Messages: time.Second,
		Occurrences: retention.MaxHorizon, ClosedCases: 36 * time.Hour}
	got, err := e.keeper.Set(ctx, project, p)
	require.NoError(t, err)
	require.Equal(t, p, got)
	read, set, err := e.keeper.Get(ctx, project)
	require.NoError(t, err)
	require.True(t, set)
	require.Equal(t, p, read)
	var n int
	var actor, previous, horizons string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) OVER (), actor, previous::text, horizons::text
		FROM docket.retention_events WHERE project = 'acme' ORDER BY id DESC LIMIT 1`).Scan(&n, &actor, &previous, &horizons))
	require.Equal(t, 2, n)
	require.Equal(t, string(keeper), actor)
	require.Contains(t, previous, `"jobs_failed": 7200000000`)
	require.Contains(t, horizons, `"jobs_failed": null`)

	e.Allow(t, access.Grant{Principal: keeper, Project: other, Capability: access.RetentionManage})
	def, set, err := e.keeper.Get(ctx, other)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, retention.Defaults, def)
}

// TestRefusalsChangeNothing: malformed, out-of-range and unauthorised
// calls are refused with typed errors and leave the database as it was.
func TestRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 1, 1))
	ctx := t.Context()
	finish(t, e, e.jobs, "", jobs.Succeeded)
	e.Clock.Advance(2 * time.Hour)
	before := snapshot(t, e)
	sam := e.as(t, sam)
	bad := func(f func(*retention.Policy)) retention.Policy { p := hours(1, 1, 1); f(&p); return p }
	for name, tc := range map[string]struct {
		c    *retention.Client
		proj string
		p    retention.Policy
		want error
	}{
		"zero horizon":        {e.keeper, project, bad(func(p *retention.Policy) { p.Messages = 0 }), db.ErrInvalidArgument},
		"negative horizon":    {e.keeper, project, bad(func(p *retention.Policy) { p.SucceededJobs = -time.Hour }), db.ErrInvalidArgument},
		"under a second":      {e.keeper, project, bad(func(p *retention.Policy) { p.FailedJobs = 999 * time.Millisecond }), db.ErrInvalidArgument},
		"over a century":      {e.keeper, project, bad(func(p *retention.Policy) { p.ClosedCases = retention.MaxHorizon + time.Hour }), db.ErrInvalidArgument},
		"malformed project":   {e.keeper, "ACME", hours(1, 1, 1), db.ErrInvalidArgument},
		"oversized project":   {e.keeper, strings.Repeat("a", 64), hours(1, 1, 1), db.ErrInvalidArgument},
		"unknown project":     {e.keeper, "initech", hours(1, 1, 1), db.ErrNotPermitted},
		"without the grant":   {sam, project, hours(1, 1, 1), db.ErrNotPermitted},
		"pruner sets nothing": {e.pruner, project, hours(1, 1, 1), db.ErrNotPermitted},
	} {
		_, err := tc.c.Set(ctx, tc.proj, tc.p)
		require.ErrorIs(t, err, tc.want, name)
	}
	_, _, err := sam.Get(ctx, project)
	require.ErrorIs(t, err, db.ErrNotFound)
	for _, limit := range []int{0, -1, retention.MaxBatch + 1} {
		_, err := e.pruner.Prune(ctx, limit)
		require.ErrorIs(t, err, db.ErrInvalidArgument, "limit %d", limit)
	}
	// In SQL too: the limit is checked by the database.
	_, err = e.API.Exec(ctx, "SELECT docket.prune_run(0, 'worker:pruner', $1)", e.Clock.Now())
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument)
	_, err = e.API.Exec(ctx, "SELECT docket.retention_set('acme', interval '0 seconds', NULL, NULL, NULL, NULL, 'user:keeper', $1)", e.Clock.Now())
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument)
	ps, err := sam.Prune(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, ps, "sam holds retention.prune nowhere")
	_, err = sam.GetPrune(ctx, 1)
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = e.keeper.Verify(ctx, 424242, nil)
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = e.keeper.Verify(ctx, 1, make([]retention.Head, retention.MaxHeads+1))
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = e.keeper.Heads(ctx, make([]int64, retention.MaxHeads+1))
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = e.keeper.Prunes(ctx, project, 0, 0)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = retention.NewClient(nil, retention.Config{Actor: keeper})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = retention.NewClient(e.API, retention.Config{Actor: "keeper"})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.Equal(t, before, snapshot(t, e))
}
