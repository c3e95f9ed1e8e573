package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
)

// backlogClaimed enqueues n jobs (requesting an output when output is set),
// ANALYZEs docket.jobs while every one of them is queued, as after a
// backlog's bulk enqueue, and claims claim of them.
func backlogClaimed(t *testing.T, e env, n, claim int, output bool) []jobs.Job {
	t.Helper()
	ctx := t.Context()
	specs := make([]jobs.Spec, n)
	for i := range specs {
		specs[i] = spec(fmt.Sprintf(`{"n": %d}`, i))
		if output {
			specs[i].Output = jobs.OutputRef{Asset: fmt.Sprintf("poster/%d", i), Kind: "image/png"}
		}
	}
	_, err := e.client.EnqueueMany(ctx, specs)
	require.NoError(t, err)
	_, err = e.Pool.Exec(ctx, `ANALYZE docket.jobs`)
	require.NoError(t, err)
	claimed, err := e.client.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: claim})
	require.NoError(t, err)
	require.Len(t, claimed, claim)
	return claimed
}

// requireLeaseIndexUnread completes batch in one transaction of the API
// login and fails if the completion read jobs_lease_expiry_idx, as its own
// transaction's statistics (pg_stat_get_xact_numscans) show: no waiting for
// statistics to flush.
func requireLeaseIndexUnread(t *testing.T, e env, batch []jobs.Completion) {
	t.Helper()
	ctx := t.Context()
	tx, err := e.API.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	scans := func() int64 {
		var n int64
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_stat_get_xact_numscans('docket.jobs_lease_expiry_idx'::regclass)`).Scan(&n))
		return n
	}
	before := scans()
	errs, err := e.client.CompleteManyTx(ctx, tx, batch)
	require.NoError(t, err)
	for i, err := range errs {
		require.NoError(t, err, "element %d", i)
	}
	require.Equal(t, before, scans(), "the completion read the lease index: it scans every claimed job")
	require.NoError(t, tx.Commit(ctx))
}

// A batch completion finds its jobs by id, whatever the statistics say.
// Analyzed while a backlog was all queued, docket.jobs looks as if no job
// were claimed; a completion that named the claimed state would then walk
// jobs_lease_expiry_idx (every claimed job, and every dead entry that each
// completion leaves behind) instead of the primary key, and a burn-down would
// slow as it went.
func TestCompleteManyReadsJobsByIDAfterABacklogsAnalyze(t *testing.T) {
	t.Parallel()
	e := setup(t)
	claimed := backlogClaimed(t, e, 500, 100, false)
	batch := make([]jobs.Completion, len(claimed))
	for i, j := range claimed {
		batch[i] = jobs.Completion{Lease: j.Lease()}
	}
	requireLeaseIndexUnread(t, e, batch)
}

// The completion records of a batch find their jobs by id as well.
func TestCompletionRecordsReadJobsByIDAfterABacklogsAnalyze(t *testing.T) {
	t.Parallel()
	e := setup(t)
	claimed := backlogClaimed(t, e, 500, 100, true)
	batch := make([]jobs.Completion, len(claimed))
	for i, j := range claimed {
		batch[i] = jobs.Completion{Lease: j.Lease(), Record: &jobs.CompletionRecord{Output: j.Output}}
	}
	requireLeaseIndexUnread(t, e, batch)
	var n int
	require.NoError(t, e.Pool.QueryRow(t.Context(), `SELECT count(*) FROM docket.job_completions`).Scan(&n))
	require.Equal(t, len(claimed), n)
}

// The functions every job row's statements call are inlined by the planner,
// not called, with the arguments the jobs triggers give them: a call of a
// SQL function the planner cannot inline is planned again in every
// statement (the domain checks of a one-job enqueue) or run through the
// executor once per row (an event's hash).
func TestHotFunctionsAreInlined(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for name, expr := range map[string]string{
		"valid_principal": `docket.valid_principal($1::text)`,
		// As the jobs triggers call it: the detail and the outcome are
		// expressions of the row, too dear to evaluate twice.
		"job_event_hash": `docket.job_event_hash('\x00'::bytea, 1, 2, 'queued', 'claimed', $1::text, '2026-01-01'::timestamptz, 1,
		                                          (SELECT 'd'::text), '2026-01-02'::timestamptz, (SELECT '\x01'::bytea), $1::text)`,
		"job_outcome": `docket.job_outcome('claimed', (SELECT '{"a": 1}'::jsonb), (SELECT 'd'::text), $1::text,
		                                    gen_random_uuid(), 1, 1)`,
	} {
		rows, err := e.Pool.Query(t.Context(), `EXPLAIN (VERBOSE, COSTS OFF) SELECT `+expr, "svc:x")
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		plan := strings.Join(lines, "\n")
		require.NotContains(t, plan, name+"(", "%s is called, not inlined:\n%s", name, plan)
	}
}

// The chain's digest is the one it always was: job_event_hash, with or
// without a revision, with or without the claim an event ends, gives the
// digest the formula of docs/jobs.md gives, so histories written before a
// change of its text still verify.
func TestEventHashIsTheDocumentedFormula(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var same, all int
	require.NoError(t, e.Pool.QueryRow(t.Context(), `
		SELECT count(*) FILTER (WHERE docket.job_event_hash(p, i, s, f, t, a, x.at, att, d, l, o, r, ca, cb, ct) = sha256(p || textsend(
		           CASE WHEN ca IS NOT NULL
		           THEN jsonb_build_array(i, s, f, t, a, (extract(epoch FROM x.at) * 1000000)::bigint, att, d,
		                                  (extract(epoch FROM l) * 1000000)::bigint, encode(o, 'hex'), r,
		                                  (extract(epoch FROM ca) * 1000000)::bigint, cb, ct)
		           WHEN r IS NULL
		           THEN jsonb_build_array(i, s, f, t, a, (extract(epoch FROM x.at) * 1000000)::bigint, att, d,
		                                  (extract(epoch FROM l) * 1000000)::bigint, encode(o, 'hex'))
		           ELSE jsonb_build_array(i, s, f, t, a, (extract(epoch FROM x.at) * 1000000)::bigint, att, d,
		                                  (extract(epoch FROM l) * 1000000)::bigint, encode(o, 'hex'), r)
		           END::text))
		           AND (ca IS NOT NULL OR docket.job_event_hash(p, i, s, f, t, a, x.at, att, d, l, o, r)
		                                  = docket.job_event_hash(p, i, s, f, t, a, x.at, att, d, l, o, r, ca, cb, ct))),
		       count(*)
		FROM (SELECT sha256(g::text::bytea) AS p, g::bigint AS i, g AS s,
		             CASE WHEN g % 5 < 2 THEN NULL ELSE '2025-12-31'::timestamptz + g * interval '1.000003 s' END AS ca,
		             CASE WHEN g % 5 < 2 THEN NULL WHEN g % 11 = 0 THEN 'svc:"é\' || chr(1 + g % 31) ELSE 'svc:w' || g END AS cb,
		             CASE WHEN g % 5 < 2 OR g % 13 = 0 THEN NULL ELSE gen_random_uuid() END AS ct,
		             CASE WHEN g % 3 = 0 THEN NULL ELSE 'queued' END AS f, 'claimed' AS t, 'svc:x' || g AS a,
		             '2026-01-01'::timestamptz + g * interval '1.000001 s' AS at, g % 5 AS att,
		             CASE WHEN g % 2 = 0 THEN NULL ELSE 'détail "q" \ ' || chr(1 + g % 31) || chr(128512) || g END AS d,
		             CASE WHEN g % 4 = 0 THEN NULL ELSE '2026-03-01'::timestamptz + g * interval '1 ms' END AS l,
		             CASE WHEN g % 7 = 0 THEN NULL ELSE sha256(('o' || g)::bytea) END AS o,
		             CASE WHEN g % 2 = 0 THEN NULL ELSE 'v1.' || g || '"é\' END AS r
		      FROM generate_series(1, 5000) g) x`).Scan(&same, &all))
	require.Equal(t, all, same, "digests differ from the formula")
	require.Equal(t, 5000, all)
}

// What a move leaves a job holding is digested as it always was: job_outcome
// gives the digest the formula of docs/jobs.md gives, for every kind of
// value a job holds (JSON results of each type, unicode, control characters,
// quotes and backslashes, NULLs), so histories written before a change of
// its text still verify.
func TestOutcomeIsTheDocumentedFormula(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var same, all int
	require.NoError(t, e.Pool.QueryRow(t.Context(), `
		SELECT count(*) FILTER (WHERE docket.job_outcome(st, r, d, b, tok, gen, att)
		                              = sha256(textsend(jsonb_build_array(st, r, d, b, tok, gen, att)::text))),
		       count(*)
		FROM (SELECT CASE WHEN g % 11 = 0 THEN NULL ELSE (ARRAY['queued', 'claimed', 'succeeded', 'failed'])[1 + g % 4] END AS st,
		             CASE g % 6
		                 WHEN 0 THEN NULL
		                 WHEN 1 THEN to_jsonb('r "' || chr(1 + g % 31) || '" \ é' || chr(128512) || g)
		                 WHEN 2 THEN jsonb_build_object('k', g, 'nested', jsonb_build_array(1.50, -0.0, 1e20, 'x', NULL, true))
		                 WHEN 3 THEN to_jsonb(g * 1.25)
		                 WHEN 4 THEN 'null'::jsonb
		                 ELSE jsonb_build_array()
		             END AS r,
		             CASE WHEN g % 2 = 0 THEN NULL ELSE 'diag "' || chr(1 + g % 31) || E'\n\t' || g END AS d,
		             CASE WHEN g % 3 = 0 THEN NULL ELSE 'svc:w' || g END AS b,
		             CASE WHEN g % 5 = 0 THEN NULL ELSE md5(g::text)::uuid END AS tok,
		             CASE WHEN g % 7 = 0 THEN NULL ELSE g::bigint * 1000003 END AS gen,
		             CASE WHEN g % 13 = 0 THEN NULL ELSE g % 101 END AS att
		      FROM generate_series(1, 5000) g) x`).Scan(&same, &all))
	require.Equal(t, all, same, "outcome digests differ from the formula")
	require.Equal(t, 5000, all)

	// With renewals, the array goes on with their count and the last one's
	// instant in epoch microseconds; with none, it is the form above.
	require.NoError(t, e.Pool.QueryRow(t.Context(), `
		SELECT count(*) FILTER (WHERE docket.job_outcome('succeeded', NULL, NULL, NULL, NULL, 3, 2, n, at)
		                              = CASE WHEN n > 0
		                                     THEN sha256(textsend(jsonb_build_array('succeeded', NULL, NULL, NULL, NULL, 3, 2, n,
		                                                                            docket.epoch_micros(at))::text))
		                                     ELSE sha256(textsend(jsonb_build_array('succeeded', NULL, NULL, NULL, NULL, 3, 2)::text)) END),
		       count(*)
		FROM (SELECT g % 4 AS n, CASE WHEN g % 4 = 0 THEN NULL
		                              ELSE '2026-11-02 09:00:00.000123+00'::timestamptz + g * interval '1.000007 seconds' END AS at
		      FROM generate_series(1, 500) g) x`).Scan(&same, &all))
	require.Equal(t, all, same, "outcome digests with renewals differ from the formula")

	// Once the job spent anything, the renewals' two elements (0 and null
	// when none) and both spent columns follow.
	require.NoError(t, e.Pool.QueryRow(t.Context(), `
		SELECT count(*) FILTER (WHERE docket.job_outcome('queued', NULL, 'd', NULL, NULL, 3, 2, n, at, fx, m)
		                              = CASE WHEN fx > 0 OR m > 0
		                                     THEN sha256(textsend(jsonb_build_array('queued', NULL, 'd', NULL, NULL, 3, 2, n,
		                                                                            docket.epoch_micros(at), fx, m)::text))
		                                     WHEN n > 0
		                                     THEN sha256(textsend(jsonb_build_array('queued', NULL, 'd', NULL, NULL, 3, 2, n,
		                                                                            docket.epoch_micros(at))::text))
		                                     ELSE sha256(textsend(jsonb_build_array('queued', NULL, 'd', NULL, NULL, 3, 2)::text)) END),
		       count(*)
		FROM (SELECT g % 3 AS n, CASE WHEN g % 3 = 0 THEN NULL
		                              ELSE '2026-11-02 09:00:00.000123+00'::timestamptz + g * interval '1.000007 seconds' END AS at,
		             (g / 3) % 3 AS fx, ((g / 9) % 2) * 12345678901 AS m
		      FROM generate_series(1, 500) g) x`).Scan(&same, &all))
	require.Equal(t, all, same, "outcome digests with spending differ from the formula")
}

// The statements a worker runs per batch keep one plan a session: the claims
// (and job_take, which every claim calls), the completions and the
// transition trigger force generic plans, so batches of varying size, or of
// one job, do not make Postgres plan them again at most calls. A
// CREATE OR REPLACE of one of them drops the setting; this test then names
// it.
func TestBatchStatementsKeepTheirPlans(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rows, err := e.Pool.Query(t.Context(), `
		SELECT p.proname, coalesce('plan_cache_mode=force_generic_plan' = ANY (p.proconfig), false)
		FROM pg_proc p
		WHERE p.pronamespace = 'docket'::regnamespace
		  AND p.proname IN ('jobs_record_update', 'job_claim', 'job_claim_queue', 'job_complete_many', 'job_take')`)
	require.NoError(t, err)
	kept, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var name string
		var generic bool
		err := r.Scan(&name, &generic)
		return fmt.Sprintf("%s %v", name, generic), err
	})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"jobs_record_update true", "job_claim true", "job_claim_queue true", "job_complete_many true",
		"job_take true"}, kept,
		"functions planning their statements again per call")
}

// A claim and a completion are not HOT updates (the state is in the partial
// indexes' predicates), so each writes an entry in every index whose
// predicate its new row version satisfies. Only the primary key may cover
// every job: an index without a predicate is written by every transition of
// every job, whatever the job.
func TestOnlyThePrimaryKeyIndexesEveryJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rows, err := e.Pool.Query(t.Context(), `
		SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = 'docket.jobs'::regclass AND i.indpred IS NULL
		ORDER BY c.relname`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"jobs_pkey"}, names, "indexes that every transition of every job writes")
}
