//go:build unix

package soak

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestSoak runs the form's runs one after another, each on a fresh
// database, logs each one's report, and, when there are several, a table
// comparing them.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak harness runs tens of thousands of jobs through two worker processes: skipped in -short")
	}
	f := theForm()
	var results []*result
	for _, prune := range f.prunes {
		t.Run(pruneName(prune), func(t *testing.T) {
			res := runSoak(t, f, prune)
			results = append(results, res)
			t.Log("soak, " + pruneName(prune) + ", " + f.String() + "\n" + res.report())
			// Checked once the report is out, so that a long run that fails
			// them still says what it measured.
			require.Empty(t, res.workers.errors, "the workers' errors")
			require.Zero(t, res.workers.races, "data races in the workers")
			require.Zero(t, res.workers.sweeps["leases"], "leases expired")
		})
	}
	if len(results) > 1 {
		t.Log("soak, " + f.String() + ", the runs side by side:\n" + contrast(results))
	}
}

// result is what one run measured and found.
type result struct {
	form     form
	prune    bool
	database string
	oid      uint32
	samples  []sample // the looks at the progress, the first once the workers were ready
	probes   []probe  // the enqueues of one job alone, timed, one a look
	sizes    []sizes  // at the start, at each slice's end, and at the end
	workers  workersSummary
	checked  checked
}

// runSoak runs f's jobs through two worker processes, pruning or not,
// measures, stops the workers, checks what the database holds, and
// returns it all.
func runSoak(t *testing.T, f form, prune bool) *result {
	r := newRig(t, f)
	t.Logf("database %s (oid %d)", r.database, r.oid)
	ctx := t.Context()
	res := &result{form: f, prune: prune, database: r.database, oid: r.oid}
	take := func(label string, completed int64) {
		s, err := r.sizes(ctx, label, completed)
		require.NoError(t, err)
		res.sizes = append(res.sizes, s)
	}
	take("start", 0)

	ids := make([]int64, 0, f.jobs)
	enqueue := func() {
		got, err := r.enqueue(ctx, len(ids)+1, min(chunk, f.jobs-len(ids)))
		require.NoError(t, err)
		ids = append(ids, got...)
	}
	// The first backlog is there before the workers start, so that they
	// start on a full queue.
	for len(ids) < min(f.backlog, f.jobs) {
		enqueue()
	}
	children := make([]*child, workers)
	for i := range children {
		children[i] = startWorker(t, fmt.Sprintf("w%d", i+1), r.workerURL(), prune)
	}

	deadline := time.Now().Add(f.limit)
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	next := int64(f.slice) // the completions at which the next slice ends
	for {
		s := look(children)
		res.samples = append(res.samples, s)
		if s.completed >= int64(f.jobs) {
			break
		}
		if s.completed >= next {
			take(thousands(s.completed), s.completed)
			for next <= s.completed {
				next += int64(f.slice)
			}
		}
		// Top the backlog up: the unfinished jobs stay within f.backlog.
		for len(ids) < f.jobs && int64(len(ids)+chunk)-s.completed <= int64(f.backlog) {
			enqueue()
		}
		// One job enqueued alone, timed: an application's enqueue, beside
		// the burn-down, as the tables grow (or do not).
		if len(ids) < f.jobs {
			began := time.Now()
			got, err := r.enqueue(ctx, len(ids)+1, 1)
			require.NoError(t, err)
			res.probes = append(res.probes, probe{completed: s.completed, took: time.Since(began)})
			ids = append(ids, got...)
		}
		<-tick.C
		for _, c := range children {
			if c.Exited() {
				t.Fatalf("worker %s exited mid-run (%v):\n%s", c.Name, c.ExitErr(), c.StderrTail())
			}
		}
		if time.Now().After(deadline) {
			c, err := r.count(ctx)
			require.NoError(t, err)
			t.Fatalf("%d of %d jobs completed within %v (the workers said %d)", c.completed(), f.jobs, f.limit, s.completed)
		}
	}
	// The workers report a success once it has committed.
	c, err := r.count(ctx)
	require.NoError(t, err)
	require.EqualValues(t, f.jobs, c.completed(), "jobs completed, by the database's count, once the workers said all had")

	for _, c := range children {
		_, said, _ := c.Terminate(childStopTimeout + 10*time.Second)
		require.Equal(t, "<nil>", said.Err, "worker %s's stop (it said %q):\n%s", c.Name, said.Line, c.StderrTail())
	}
	// The end's statistics once the workers' backends, and the enqueuer's,
	// have exited, and so reported what they did. (Closing a pool twice,
	// again at the test's end, is harmless.)
	r.login.Pool.Close()
	require.NoError(t, r.waitLoginGone(ctx, 30*time.Second))
	take("end", res.samples[len(res.samples)-1].completed)
	res.workers = summarize(children)
	res.checked = check(t, r, f, prune, ids)
	return res
}

// probe is one job enqueued alone during a run: when, by the completions
// the workers had reported, and how long its enqueue took.
type probe struct {
	completed int64
	took      time.Duration
}

// checked is what the checks found.
type checked struct {
	present     int64 // jobs present, all succeeded
	pruned      int64 // jobs the prunes removed
	prunes      int64 // prune records
	prunedEvent int64 // events the prunes removed
	verified    int   // remaining histories verified
}

// check checks, once the workers have stopped, that every enqueued job is
// either present and succeeded or removed by exactly one prune, that the
// prunes removed succeeded jobs only and kept none that did not verify, and
// that a sample of the remaining histories verifies.
func check(t *testing.T, r *rig, f form, prune bool, ids []int64) checked {
	t.Helper()
	ctx := context.Background()
	var c checked
	require.Len(t, ids, f.jobs, "jobs enqueued")
	enqueued, n := ranges(ids)
	require.EqualValues(t, f.jobs, n, "the enqueued ids are distinct")

	byState := map[string]int64{}
	rows, err := r.owner.Query(ctx, "SELECT state::text, count(*) FROM docket.jobs WHERE project = $1 GROUP BY 1", project)
	require.NoError(t, err)
	var state string
	var count int64
	_, err = pgx.ForEachRow(rows, []any{&state, &count}, func() error {
		byState[state] = count
		return nil
	})
	require.NoError(t, err)
	c.present = byState["succeeded"]
	delete(byState, "succeeded")
	require.Empty(t, byState, "jobs present that did not succeed")
	var others int64
	require.NoError(t, r.owner.QueryRow(ctx, "SELECT count(*) FROM docket.jobs WHERE project <> $1", project).Scan(&others))
	require.Zero(t, others, "jobs of another project")

	var prunedSucceeded, keptUnverified, otherItems, union int64
	require.NoError(t, r.owner.QueryRow(ctx, `SELECT count(*), coalesce(sum(jobs), 0), coalesce(sum(job_events), 0),
			coalesce(sum((job_states ->> 'succeeded')::bigint), 0), coalesce(sum(kept_unverified), 0),
			coalesce(sum(cases + messages + occurrences), 0),
			coalesce((SELECT sum(upper(x) - lower(x)) FROM unnest(range_agg(job_ids)) x), 0)
		FROM docket.prunes WHERE project = $1`, project).Scan(
		&c.prunes, &c.pruned, &c.prunedEvent, &prunedSucceeded, &keptUnverified, &otherItems, &union))
	require.Equal(t, c.pruned, prunedSucceeded, "the prunes removed succeeded jobs only")
	require.Zero(t, keptUnverified, "jobs the prunes kept because they did not verify")
	require.Zero(t, otherItems, "cases, messages and occurrences pruned")
	require.Equal(t, c.pruned, union, "no job is within two prunes' job_ids")
	require.LessOrEqual(t, c.pruned, int64(f.jobs), "pruned jobs within the jobs enqueued")
	if prune {
		require.Positive(t, c.pruned, "the prune removed jobs")
	} else {
		require.Zero(t, c.prunes, "prunes with pruning off")
	}

	var strangers, prunedPresent int64
	var prunedEnqueued bool
	require.NoError(t, r.owner.QueryRow(ctx, `WITH p AS (
			SELECT coalesce(range_agg(job_ids), '{}') AS ids FROM docket.prunes WHERE project = $1)
		SELECT (SELECT count(*) FROM docket.jobs j WHERE j.project = $1 AND NOT $2::int8multirange @> j.id),
		       (SELECT count(*) FROM docket.jobs j, p WHERE j.project = $1 AND p.ids @> j.id),
		       (SELECT $2::int8multirange @> p.ids FROM p)`, project, enqueued).Scan(&strangers, &prunedPresent, &prunedEnqueued))
	require.Zero(t, strangers, "jobs present that were not enqueued")
	require.Zero(t, prunedPresent, "jobs present that a prune says it removed")
	require.True(t, prunedEnqueued, "the prunes removed only jobs enqueued")
	// Present and pruned are disjoint subsets of the enqueued ids: when
	// they add up to them, each enqueued job is one or the other.
	require.Equal(t, int64(f.jobs), c.present+c.pruned, "jobs present (%d) and pruned (%d) are the jobs enqueued", c.present, c.pruned)

	rows, err = r.owner.Query(ctx, `SELECT j.id, v.ok, coalesce(v.problem, '')
		FROM (SELECT id FROM docket.jobs WHERE project = $1 ORDER BY random() LIMIT $2) j
		CROSS JOIN LATERAL docket.job_history_verify(j.id) v`, project, verifySample)
	require.NoError(t, err)
	var bad []string
	var id int64
	var ok bool
	var problem string
	_, err = pgx.ForEachRow(rows, []any{&id, &ok, &problem}, func() error {
		c.verified++
		if !ok {
			bad = append(bad, fmt.Sprintf("job %d: %s", id, problem))
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, bad, "remaining histories that do not verify")
	require.Equal(t, min(int64(verifySample), c.present), int64(c.verified), "histories verified")
	return c
}

// ranges is ids as an int8multirange literal, and how many distinct ids it
// holds.
func ranges(ids []int64) (string, int64) {
	s := slices.Clone(ids)
	slices.Sort(s)
	s = slices.Compact(s)
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(s); {
		j := i + 1
		for j < len(s) && s[j] == s[j-1]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "[%d,%d)", s[i], s[j-1]+1)
		i = j
	}
	b.WriteByte('}')
	return b.String(), int64(len(s))
}
