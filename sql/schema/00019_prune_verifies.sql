-- +goose Up
-- A prune checks each job's history as job_verify does.
--
-- job_heads, the set-based check a prune runs before it removes jobs (and
-- whose heads it records as evidence), checked each chain's links and that
-- the job holds what its last event recorded. job_verify has checked more
-- since the revisions migration, and a prune removed a job job_verify
-- refused. job_heads now refuses what job_verify refuses:
--
--   * an event whose from_state is not the previous event's to_state, or a
--     history that does not start in queued;
--   * a move that is not the job machine's as migrated, or a machine whose
--     tables were changed (docket.job_machine_drift);
--   * attempts that count anything but claims; time running backwards;
--   * a job whose claimed revision is not the one its last claim recorded,
--     or whose pin is not what its last pin recorded.
--
-- A chain re-hashed by hand to fit a rewritten history links; these are the
-- checks that catch it. Jobs that fail them are kept, and counted as
-- kept_unverified, as before.

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_heads(p_ids bigint[])
RETURNS TABLE (job_id bigint, ok boolean, events integer, head bytea)
LANGUAGE sql STABLE AS $$
    WITH e AS (
        SELECT e.job_id, e.seq, e.hash, e.from_state, e.to_state, e.attempt, e.outcome, e.revision, e.detail,
               e.seq = row_number() OVER w
               AND e.prev_hash = coalesce(lag(e.hash) OVER w, decode(repeat('00', 32), 'hex'))
               AND e.hash = docket.job_event_hash(e.prev_hash, e.job_id, e.seq, e.from_state, e.to_state, e.actor, e.at,
                                                  e.attempt, e.detail, e.lease_until, e.outcome, e.revision)
               AND e.from_state IS NOT DISTINCT FROM lag(e.to_state) OVER w
               AND (e.from_state IS NOT NULL OR e.to_state = 'queued')
               AND (e.from_state IS NULL OR docket.job_machine_move(e.from_state, e.to_state))
               AND e.attempt = coalesce(lag(e.attempt) OVER w, 0) + CASE WHEN e.to_state = 'claimed' THEN 1 ELSE 0 END
               AND e.at >= coalesce(lag(e.at) OVER w, e.at) AS linked,
               lead(e.seq) OVER w IS NULL AS last
        FROM docket.job_events e
        WHERE e.job_id = ANY (p_ids)
        WINDOW w AS (PARTITION BY e.job_id ORDER BY e.seq)
    ), chains AS (
        SELECT e.job_id, bool_and(e.linked) AS linked, count(*)::integer AS events,
               (array_agg(e.hash) FILTER (WHERE e.last))[1] AS head,
               (array_agg(e.to_state::text) FILTER (WHERE e.last))[1] AS to_state,
               (array_agg(e.attempt) FILTER (WHERE e.last))[1] AS attempt,
               (array_agg(e.outcome::bytea) FILTER (WHERE e.last))[1] AS outcome,
               -- What the last claim and the last pin recorded.
               (array_agg(e.revision::text ORDER BY e.seq DESC) FILTER (WHERE e.to_state = 'claimed'))[1] AS claim_revision,
               (array_agg(e.detail::text ORDER BY e.seq DESC)
                    FILTER (WHERE e.from_state = 'queued' AND e.to_state = 'queued'))[1] AS pin_detail
        FROM e GROUP BY e.job_id
    )
    SELECT j.id,
           coalesce(c.linked AND c.to_state = j.state AND c.attempt = j.attempts
                    AND c.outcome = docket.job_outcome(j.state, j.result, j.diagnostic, j.claimed_by, j.claim_token,
                                                       j.lease_generation, j.attempts)
                    AND c.claim_revision IS NOT DISTINCT FROM j.claimed_revision::text
                    AND coalesce(c.pin_detail, 'unpinned: any revision may run it')
                        = CASE WHEN j.revisions IS NULL THEN 'unpinned: any revision may run it'
                               ELSE 'pinned to revisions ' || array_to_string(j.revisions, ', ') END
                    -- Once a call (an InitPlan), not once a job.
                    AND (SELECT docket.job_machine_drift()) IS NULL, false),
           coalesce(c.events, 0), c.head
    FROM docket.jobs j
    LEFT JOIN chains c ON c.job_id = j.id
    WHERE j.id = ANY (p_ids);
$$;
-- +goose StatementEnd

SELECT docket.apply_privileges();

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_heads(p_ids bigint[])
RETURNS TABLE (job_id bigint, ok boolean, events integer, head bytea)
LANGUAGE sql STABLE AS $$
    WITH e AS (
        SELECT e.job_id, e.seq, e.hash, e.to_state, e.attempt, e.outcome,
               e.seq = row_number() OVER w
               AND e.prev_hash = coalesce(lag(e.hash) OVER w, decode(repeat('00', 32), 'hex'))
               AND e.hash = docket.job_event_hash(e.prev_hash, e.job_id, e.seq, e.from_state, e.to_state, e.actor, e.at,
                                                  e.attempt, e.detail, e.lease_until, e.outcome, e.revision) AS linked,
               lead(e.seq) OVER w IS NULL AS last
        FROM docket.job_events e
        WHERE e.job_id = ANY (p_ids)
        WINDOW w AS (PARTITION BY e.job_id ORDER BY e.seq)
    ), chains AS (
        SELECT e.job_id, bool_and(e.linked) AS linked, count(*)::integer AS events,
               (array_agg(e.hash) FILTER (WHERE e.last))[1] AS head,
               (array_agg(e.to_state::text) FILTER (WHERE e.last))[1] AS to_state,
               (array_agg(e.attempt) FILTER (WHERE e.last))[1] AS attempt,
               (array_agg(e.outcome::bytea) FILTER (WHERE e.last))[1] AS outcome
        FROM e GROUP BY e.job_id
    )
    SELECT j.id,
           coalesce(c.linked AND c.to_state = j.state AND c.attempt = j.attempts
                    AND c.outcome = docket.job_outcome(j.state, j.result, j.diagnostic, j.claimed_by, j.claim_token,
                                                       j.lease_generation, j.attempts), false),
           coalesce(c.events, 0), c.head
    FROM docket.jobs j
    LEFT JOIN chains c ON c.job_id = j.id
    WHERE j.id = ANY (p_ids);
$$;
-- +goose StatementEnd

SELECT docket.apply_privileges();
