-- Worker: what the River-based worker (package worker) asks of the job store.
--
-- The worker hands every docket job to River as one dispatch: a River job of
-- kind 'docket.dispatch' whose args are {"job_id": ID}, in River queue = the
-- docket queue. River's tables live in schema docket too (db.Migrate runs
-- River's migrations first), so the functions here may look at
-- docket.river_job. Claims by id come in batches (group commit); the
-- dispatch sweep finds queued jobs that nobody dispatched (an operator's or a
-- trigger's INSERT through docket.job_enqueue_*) so they run too.

-- +goose Up

-- The row type of docket.job_claim_ids: what became of one wanted job, and
-- the job as it is now. Empty, like docket.job_enqueued: only its type is used.
CREATE VIEW docket.job_claim_outcome AS
SELECT ''::text AS outcome, j.* FROM docket.jobs j WHERE false;

COMMENT ON VIEW docket.job_claim_outcome IS
    'row type of docket.job_claim_ids: outcome (claimed, undecodable, unavailable) and the job';

-- job_claim_ids claims, for p_actor at p_now, each job of p_ids that is
-- claimable now (queued and due, or claimed with an expired lease and
-- repeatable with attempts left), as job_claim_id does for one: the group
-- commit of many dispatches. p_leases is parallel to p_ids (an element NULL or
-- zero: that job's own lease). It returns one row for each wanted job the actor may
-- claim in (job.claim on the job's project):
--
--   claimed      the job, claimed: fresh token, new lease generation, one more
--                attempt
--   undecodable  claimable, but its (kind, payload_schema) is not among the
--                parallel p_kinds/p_schemas (when those are not NULL): left
--                as it was, for a deployment that can decode it
--   unavailable  not claimable now (held by a live lease, not yet due,
--                finished, uncertain, or locked by another claimant): the
--                job as this statement saw it, unlocked
--
-- An unknown job, or one in a project where the actor holds no job.claim,
-- has no row: the caller learns nothing about it. Jobs are locked in id
-- order, and locked jobs are skipped, never waited for.
-- Refuses: more than 1000 ids, a duplicate id, leases not parallel to ids or
-- outside 1 s .. 24 h, decoder arrays of different lengths (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.job_claim_ids(p_ids bigint[], p_leases interval[], p_kinds text[], p_schemas integer[],
                                     p_actor text, p_now timestamptz)
RETURNS SETOF docket.job_claim_outcome
LANGUAGE plpgsql AS $$
DECLARE
    v_lease interval;
    v_bad interval;
    v_permitted bigint[];
    v_locked bigint[];
    v_take bigint[];
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('claim batch', cardinality(p_ids), 1000);
    IF cardinality(p_leases) IS DISTINCT FROM cardinality(p_ids) THEN
        RAISE EXCEPTION 'invalid leases: want one per id (% ids, % leases)', cardinality(p_ids), coalesce(cardinality(p_leases), 0)
            USING ERRCODE = 'DK010';
    END IF;
    p_leases := ARRAY(SELECT nullif(l, interval '0') FROM unnest(p_leases) WITH ORDINALITY AS x(l, n) ORDER BY n);
    SELECT l INTO v_bad FROM unnest(p_leases) l
    WHERE l IS NOT NULL AND (l < interval '1 second' OR l > interval '24 hours') LIMIT 1;
    IF FOUND THEN
        PERFORM docket.job_require_lease(v_bad);
    END IF;
    IF cardinality(p_kinds) IS DISTINCT FROM cardinality(p_schemas) THEN
        RAISE EXCEPTION 'invalid decoders: kinds and schemas must be parallel arrays of one length'
            USING ERRCODE = 'DK010';
    END IF;
    IF (SELECT count(DISTINCT i) <> count(*) OR count(i) <> count(*) FROM unnest(p_ids) i) THEN
        RAISE EXCEPTION 'invalid claim batch: ids must be distinct and not NULL' USING ERRCODE = 'DK010';
    END IF;

    -- The grants first, without locks, so a job the actor may not claim is
    -- neither locked nor reported.
    v_permitted := ARRAY(SELECT j.id FROM docket.jobs j
                         WHERE j.id = ANY (p_ids) AND docket.grant_check(p_actor, j.project, 'job.claim'));
    -- Lock the claimable ones, in id order. The test is a CASE so that the
    -- planner finds the rows by primary key: written as an OR of ANDs, it
    -- matches the claim indexes' predicates and walks a whole queue.
    v_locked := ARRAY(SELECT j.id FROM docket.jobs j
                      WHERE j.id = ANY (v_permitted)
                        AND CASE j.state
                                WHEN 'queued' THEN j.available_at <= p_now
                                WHEN 'claimed' THEN j.lease_expires_at <= p_now AND j.repeatable
                                                    AND j.attempts < j.max_attempts
                                ELSE false
                            END
                      ORDER BY j.id
                      FOR UPDATE SKIP LOCKED);
    v_take := CASE WHEN p_kinds IS NULL THEN v_locked
                   ELSE ARRAY(SELECT j.id FROM docket.jobs j
                              WHERE j.id = ANY (v_locked)
                                AND (j.kind, j.payload_schema) IN (SELECT * FROM unnest(p_kinds, p_schemas))) END;
    -- One claim per distinct lease: job_take is the one place a claim is made.
    FOR v_lease IN SELECT DISTINCT w.lease FROM unnest(p_ids, p_leases) AS w(id, lease) WHERE w.id = ANY (v_take) LOOP
        RETURN QUERY
        SELECT 'claimed'::text, t.*
        FROM docket.job_take(ARRAY(SELECT w.id FROM unnest(p_ids, p_leases) AS w(id, lease)
                                   WHERE w.id = ANY (v_take) AND w.lease IS NOT DISTINCT FROM v_lease),
                             v_lease, p_actor, p_now) t;
    END LOOP;
    IF cardinality(v_take) < cardinality(v_permitted) THEN
        RETURN QUERY
        SELECT CASE WHEN j.id = ANY (v_locked) THEN 'undecodable' ELSE 'unavailable' END, j.*
        FROM docket.jobs j
        WHERE j.id = ANY (v_permitted) AND NOT j.id = ANY (v_take);
    END IF;
END
$$;
-- +goose StatementEnd

-- Dispatches by docket job id, for job_dispatch_live. The index is docket's,
-- on River's table: River's own GIN index on args answers "which dispatch
-- carries job N" too slowly to ask it once per queued job.
CREATE INDEX river_job_docket_dispatch_idx ON docket.river_job (((args ->> 'job_id')::bigint))
    WHERE kind = 'docket.dispatch';

-- job_dispatch_live reports whether job p_id has a River dispatch River has
-- not finalized: available, pending, retryable, scheduled, or running since
-- p_running_since (NULL: running at all). A dispatch left running by a worker
-- process that died stays running for a day, until River rescues it: a
-- caller passes an instant well past any claim's duration so that such a
-- dispatch stops counting, while one claiming its job this moment counts.
-- +goose StatementBegin
CREATE FUNCTION docket.job_dispatch_live(p_id bigint, p_running_since timestamptz) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM docket.river_job r
        WHERE (r.args ->> 'job_id')::bigint = p_id
          AND r.kind = 'docket.dispatch'
          AND (r.state IN ('available', 'pending', 'retryable', 'scheduled')
               OR (r.state = 'running' AND (p_running_since IS NULL OR r.attempted_at >= p_running_since))));
$$;
-- +goose StatementEnd

-- job_dispatch_abandon finalizes, as discarded at p_at (River's clock), the
-- running dispatches of the jobs p_ids: the lease sweep calls it for the jobs
-- whose leases it moves on, whose holders are gone or too late. A holder that
-- was only late finds, when it returns, its lease refused (DK002) and River's
-- own completion of the dispatch a no-op. Returns how many it finalized.
-- +goose StatementBegin
CREATE FUNCTION docket.job_dispatch_abandon(p_ids bigint[], p_at timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'invalid instant: NULL' USING ERRCODE = 'DK010';
    END IF;
    UPDATE docket.river_job r
    SET state = 'discarded', finalized_at = p_at,
        errors = r.errors || jsonb_build_object('at', p_at, 'attempt', r.attempt,
                                                'error', 'docket: the job''s lease expired; this dispatch was abandoned')
    WHERE r.kind = 'docket.dispatch' AND r.state = 'running'
      AND (r.args ->> 'job_id')::bigint = ANY (p_ids);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
-- +goose StatementEnd

-- job_undispatched finds, for p_actor at p_now, queued and due jobs that no
-- live River dispatch carries, so the worker can dispatch them: jobs created
-- by SQL, or re-queued by an operator or a sweep that dispatched nothing. It
-- looks, in each project where the actor holds job.claim and each queue of
-- p_queues, at the first p_scan due queued jobs in claim order (priority,
-- available_at, id): a job further back is looked at once the queue has
-- drained up to it, which is as soon as it could run anyway. So a run costs
-- the same however long the queues are. Jobs for external executors are
-- never dispatched; neither are jobs whose (kind, payload_schema) is not
-- among the parallel p_kinds/p_schemas (when not NULL). A dispatch running
-- since before p_running_since (River's clock) counts as dead: see
-- job_dispatch_live. It returns at most
-- p_limit jobs, locked (skipping locked ones) and checked again once locked,
-- so that two sweepers never both dispatch one job: the caller inserts the
-- dispatches in the same transaction, at READ COMMITTED.
-- Refuses: p_limit outside 1..10000, p_scan outside 1..10000, a malformed
-- queue, decoder arrays of different lengths (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.job_undispatched(p_queues text[], p_scan integer, p_limit integer,
                                        p_kinds text[], p_schemas integer[], p_running_since timestamptz,
                                        p_actor text, p_now timestamptz)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v_queue text;
    v_candidates bigint[];
    v_locked bigint[];
BEGIN
    PERFORM docket.job_require_batch('sweep limit', p_limit, 10000);
    PERFORM docket.job_require_batch('scan limit', p_scan, 10000);
    IF cardinality(p_kinds) IS DISTINCT FROM cardinality(p_schemas) THEN
        RAISE EXCEPTION 'invalid decoders: kinds and schemas must be parallel arrays of one length'
            USING ERRCODE = 'DK010';
    END IF;
    FOREACH v_queue IN ARRAY coalesce(p_queues, '{}') LOOP
        IF v_queue IS NULL OR NOT docket.valid_queue(v_queue) THEN
            RAISE EXCEPTION 'invalid queue %: want 1-63 characters of [a-z0-9_-], starting with a letter or digit',
                coalesce(quote_literal(v_queue), 'NULL') USING ERRCODE = 'DK010';
        END IF;
    END LOOP;
    -- The candidates, unlocked; then lock them; then look again, in a
    -- statement of its own and so with a fresh snapshot, for dispatches that
    -- a sweeper which held them a moment ago has committed since.
    v_candidates := ARRAY(
        SELECT c.id
        FROM (SELECT DISTINCT g.project FROM docket.grants g
              WHERE g.principal = p_actor AND g.capability = 'job.claim') p
        CROSS JOIN unnest(p_queues) AS q(name)
        CROSS JOIN LATERAL (
            SELECT h.id, h.external, h.kind, h.payload_schema FROM docket.jobs h
            WHERE h.state = 'queued' AND h.project = p.project AND h.queue = q.name AND h.available_at <= p_now
            ORDER BY h.priority, h.available_at, h.id
            LIMIT p_scan) c
        WHERE NOT c.external
          AND (p_kinds IS NULL OR (c.kind, c.payload_schema) IN (SELECT * FROM unnest(p_kinds, p_schemas)))
          AND NOT docket.job_dispatch_live(c.id, p_running_since));
    IF cardinality(v_candidates) = 0 THEN
        RETURN;
    END IF;
    v_locked := ARRAY(
        SELECT j.id FROM docket.jobs j
        WHERE j.id = ANY (v_candidates) AND j.state = 'queued'
        ORDER BY j.priority, j.available_at, j.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED);
    RETURN QUERY
    SELECT j.* FROM docket.jobs j
    WHERE j.id = ANY (v_locked) AND NOT docket.job_dispatch_live(j.id, p_running_since)
    ORDER BY j.priority, j.available_at, j.id;
END
$$;
-- +goose StatementEnd

-- Operators: queued jobs no River dispatch carries (a dispatch left running
-- by a dead process still counts here). A job shows here for a
-- moment between an SQL enqueue and the worker's next dispatch sweep; one
-- that stays is in a queue no worker serves, or of a kind none decodes.
CREATE VIEW docket.jobs_undispatched AS
SELECT j.id, j.project, j.queue, j.kind, j.payload_schema, j.priority, j.available_at, j.created_at
FROM docket.jobs j
WHERE j.state = 'queued' AND NOT j.external AND NOT docket.job_dispatch_live(j.id, NULL);

COMMENT ON VIEW docket.jobs_undispatched IS
    'queued jobs that no live River dispatch carries (not for external executors)';

-- +goose Down
DROP VIEW docket.jobs_undispatched;
DROP FUNCTION docket.job_undispatched(text[], integer, integer, text[], integer[], timestamptz, text, timestamptz);
DROP FUNCTION docket.job_dispatch_abandon(bigint[], timestamptz);
DROP FUNCTION docket.job_dispatch_live(bigint, timestamptz);
DROP INDEX docket.river_job_docket_dispatch_idx;
DROP FUNCTION docket.job_claim_ids(bigint[], interval[], text[], integer[], text, timestamptz);
DROP VIEW docket.job_claim_outcome;
