//go:build unix

package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// settleLimit bounds the wait for every job to settle once the last fault
// has cleared: far more than the workload and the retries of its jobs need.
const settleLimit = 3 * time.Minute

// settle waits until no job is queued or claimed, failing the test if that
// takes longer than settleLimit, and then fails it if any look, during the
// run or this wait, saw a job claimed past the recovery bound.
func (r *rig) settle() {
	r.t.Helper()
	deadline := time.Now().Add(settleLimit)
	for {
		l, err := r.look()
		if err == nil && l.open == 0 {
			break
		}
		if time.Now().After(deadline) {
			r.fail(checkSettled, "jobs did not settle within %v of the fault clearing: %s", settleLimit, r.states())
			break
		}
		time.Sleep(poll)
	}
	if r.stale > 0 {
		r.fail(checkSwept, "up to %d jobs at once stayed claimed more than %v past their lease's expiry (or the fault's end), the longest %v: the lease sweep did not move them on",
			r.stale, sweepBound, r.staleFor.Round(time.Millisecond))
	}
}

// The checks, as a failure names them.
const (
	checkSettled    = "no job lost"
	checkSwept      = "expired leases moved on in time"
	checkInsideOnce = "completion writes exactly once"
	checkRunOnce    = "no non-repeatable job run twice"
	checkUnstarted  = "no job uncertain whose handler never started"
	checkKnown      = "no job uncertain whose outcome its worker knew"
	checkVerified   = "every history verifies"
	checkWarned     = "retried outcomes logged at WARN"
	checkStopBound  = "a stop during an outage ends in time"
	checkCut        = "the cuts fired"
	checkRaces      = "no data race in the worker"
	checkAcked      = "no acknowledged completion lost"
)

// fail fails the test for check, saying why, and records that check
// failed for the summary.
func (r *rig) fail(check, format string, args ...any) {
	r.t.Helper()
	r.t.Errorf(check+": "+format, args...)
	if !slices.Contains(r.failed, check) {
		r.failed = append(r.failed, check)
	}
}

// verdict is what a scenario's checks found.
type verdict struct {
	states      stateCounts
	wrongInside []string // jobs whose completion writes are not exactly once
	ranTwice    []string // non-repeatable jobs with outside effects of two attempts
	retried     int      // jobs that took more than one attempt
	unverified  []string // jobs whose history does not verify
	uncertain   int
	// uncertainRan is how many uncertain jobs had their outside effect;
	// uncertainUnstarted how many had neither that nor a started marker.
	uncertainRan, uncertainUnstarted int
	unstartedIDs                     []int64
	uncertainIDs                     []int64
	// late is how many jobs had an outcome recorded late, by the holder of
	// a lease that had expired into uncertain.
	late int
}

// examples is how many offending jobs a failure names.
const examples = 10

// check runs the checks on the settled jobs and returns what they found;
// started are the jobs whose handlers a worker said it started.
func (r *rig) check(started map[int64]bool) verdict {
	r.t.Helper()
	ctx := r.t.Context()
	var v verdict
	var err error
	v.states, err = r.byState(ctx)
	require.NoError(r.t, err)

	v.wrongInside = r.strings(ctx, `
		SELECT format('job %s %s after %s attempts: %s inside rows, of attempts %s', j.id, j.state, j.attempts,
		              count(i.job_id), coalesce(array_agg(i.attempt ORDER BY i.attempt) FILTER (WHERE i.job_id IS NOT NULL), '{}'))
		FROM docket.jobs j LEFT JOIN faults.inside i ON i.job_id = j.id
		GROUP BY j.id
		HAVING CASE WHEN j.state = 'succeeded' THEN count(i.job_id) <> 1 OR bool_or(i.attempt <> j.attempts)
		            ELSE count(i.job_id) > 0 END
		ORDER BY j.id`)
	v.ranTwice = r.strings(ctx, `
		SELECT format('job %s %s: outside effects of attempts %s', j.id, j.state, array_agg(o.attempt ORDER BY o.attempt))
		FROM docket.jobs j JOIN faults.outside o ON o.job_id = j.id
		WHERE NOT j.repeatable
		GROUP BY j.id
		HAVING count(*) > 1
		ORDER BY j.id`)
	v.unverified = r.strings(ctx, `
		SELECT format('job %s: %s (event %s)', j.id, v.problem, v.bad_seq)
		FROM docket.jobs j CROSS JOIN LATERAL docket.job_history_verify(j.id) v
		WHERE NOT v.ok
		ORDER BY j.id`)
	require.NoError(r.t, r.owner.QueryRow(ctx, "SELECT count(*) FROM docket.jobs WHERE attempts > 1").Scan(&v.retried))
	require.NoError(r.t, r.owner.QueryRow(ctx, `SELECT count(DISTINCT job_id) FROM docket.job_events
		WHERE from_state = 'uncertain' AND detail LIKE 'recorded late, lease generation %'`).Scan(&v.late))

	rows, err := r.owner.Query(ctx, `SELECT j.id, EXISTS (SELECT 1 FROM faults.outside o WHERE o.job_id = j.id)
		FROM docket.jobs j WHERE j.state = 'uncertain' ORDER BY j.id`)
	require.NoError(r.t, err)
	var id int64
	var ran bool
	_, err = pgx.ForEachRow(rows, []any{&id, &ran}, func() error {
		v.uncertain++
		v.uncertainIDs = append(v.uncertainIDs, id)
		switch {
		case ran:
			v.uncertainRan++
		case !started[id]:
			v.uncertainUnstarted++
			v.unstartedIDs = append(v.unstartedIDs, id)
		}
		return nil
	})
	require.NoError(r.t, err)
	return v
}

// strings runs query, which returns one text column, and returns its rows.
func (r *rig) strings(ctx context.Context, query string) []string {
	r.t.Helper()
	rows, err := r.owner.Query(ctx, query)
	require.NoError(r.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(r.t, err)
	return out
}

// judge fails the test for each check v does not pass. strict makes an
// uncertain job whose handler never started a failure, for scenarios in
// which the worker process survives; otherwise they are only counted.
func (r *rig) judge(v verdict, total int, strict bool) {
	r.t.Helper()
	settled := v.states[jobs.Succeeded] + v.states[jobs.Uncertain]
	if settled != total {
		r.fail(checkSettled, "of %d jobs %d ended succeeded or uncertain; all: %s", total, settled, v.states)
	}
	failList(r, checkInsideOnce, v.wrongInside)
	failList(r, checkRunOnce, v.ranTwice)
	failList(r, checkVerified, v.unverified)
	if strict && v.uncertainUnstarted > 0 {
		r.fail(checkUnstarted, "%d are (no outside effect, no started marker), e.g. %v",
			v.uncertainUnstarted, v.unstartedIDs[:min(examples, len(v.unstartedIDs))])
	}
}

// judgeKnown fails the test for every uncertain job, in a scenario whose
// worker survives and knows every outcome: each handler ran to its end, and
// what the worker could not record in time it recorded late.
func (r *rig) judgeKnown(v verdict) {
	r.t.Helper()
	if v.uncertain > 0 {
		r.fail(checkKnown, "%d jobs are uncertain (recorded late: %d), e.g. %v", v.uncertain, v.late,
			v.uncertainIDs[:min(examples, len(v.uncertainIDs))])
	}
}

// failList fails the test for a check that found offenders, naming the
// first few.
func failList(r *rig, check string, offenders []string) {
	r.t.Helper()
	if len(offenders) == 0 {
		return
	}
	more := ""
	if len(offenders) > examples {
		more = fmt.Sprintf("\n\t… and %d more", len(offenders)-examples)
	}
	r.fail(check, "%d jobs fail it:\n\t%s%s", len(offenders), strings.Join(offenders[:min(examples, len(offenders))], "\n\t"), more)
}

// The checks are not vacuous: on a run that went well, then had its rows
// broken by hand, each finds the job broken for it.
func TestChecksFindBreakage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster of its own: skipped in -short")
	}
	r := newRig(t)
	ids := r.enqueue(10)
	r.startWorker()
	r.waitSucceeded(len(ids), time.Minute)
	r.children[0].Terminate(stopBound)
	clean := r.check(startedAny(r.children))
	require.Equal(t, stateCounts{jobs.Succeeded: len(ids)}, clean.states)
	require.Empty(t, clean.wrongInside)
	require.Empty(t, clean.ranTwice)
	require.Empty(t, clean.unverified)

	ctx := t.Context()
	twice, again, forged, unsure := ids[0], ids[1], ids[2], ids[3]
	_, err := r.owner.Exec(ctx, `INSERT INTO faults.inside (job_id, attempt, worker) VALUES ($1, 1, 'by hand')`, twice)
	require.NoError(t, err)
	_, err = r.owner.Exec(ctx, `INSERT INTO faults.outside (job_id, attempt, worker) VALUES ($1, 2, 'by hand')`, again)
	require.NoError(t, err)
	// Past docket's triggers, as only a superuser can.
	require.NoError(t, db.WithTx(ctx, r.owner, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica")
		if err == nil {
			_, err = tx.Exec(ctx, `UPDATE docket.jobs SET result = '{"forged": true}' WHERE id = $1`, forged)
		}
		if err == nil {
			_, err = tx.Exec(ctx, `UPDATE docket.jobs SET state = 'uncertain', finished_at = NULL, result = NULL, outcome_token = NULL
				WHERE id = $1`, unsure)
		}
		if err == nil {
			_, err = tx.Exec(ctx, `DELETE FROM faults.outside WHERE job_id = $1`, unsure)
		}
		return err
	}))

	broken := r.check(map[int64]bool{}) // as though no worker had said it started any
	named := func(offenders []string) []int64 {
		var out []int64
		for _, o := range offenders {
			var id int64
			_, err := fmt.Sscanf(o, "job %d", &id)
			require.NoError(t, err, o)
			out = append(out, id)
		}
		return out
	}
	require.Equal(t, []int64{twice, unsure}, named(broken.wrongInside), "an extra row, and a row for a job not succeeded")
	require.Equal(t, []int64{again}, named(broken.ranTwice))
	require.Equal(t, []int64{forged, unsure}, named(broken.unverified))
	require.Equal(t, 1, broken.uncertain)
	require.Equal(t, []int64{unsure}, broken.unstartedIDs)
	require.Zero(t, r.check(startedAny(r.children)).uncertainUnstarted, "its handler said it started")
}
