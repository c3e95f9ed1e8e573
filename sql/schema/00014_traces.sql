-- +goose Up
-- Traces and census: what OpenTelemetry needs from storage.
--
--   * docket.job_traces holds, per job, the W3C trace context of the span
--     that enqueued it, so the span that runs it, in another transaction and
--     perhaps another process, days later, can link to it. A side table, not
--     a column of docket.jobs: a job enqueued without tracing has no row and
--     costs nothing, and the rules of docket.jobs stay as they are. A row is
--     written once, by job_trace_put, in the transaction that created the
--     job, and never changed; it leaves with its job (a prune's delete
--     cascades to it).
--   * docket.job_census counts the unfinished jobs of each project and queue
--     by state, on the partial indexes the claim, the lease sweep and the
--     operators' views already keep, for gauges read at every scrape.
--     Finished jobs are not counted: their number only grows, and a worker
--     counts outcomes as they happen.

CREATE TABLE docket.job_traces (
    job_id      bigint PRIMARY KEY REFERENCES docket.jobs (id) ON DELETE CASCADE,
    -- version 00, a trace id and a span id neither all zeros, flags: see
    -- https://www.w3.org/TR/trace-context/#traceparent-header
    traceparent text NOT NULL CONSTRAINT job_traces_traceparent_valid CHECK (
        traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
        AND substr(traceparent, 4, 32) <> repeat('0', 32)
        AND substr(traceparent, 37, 16) <> repeat('0', 16)),
    -- At most 32 list members (W3C); 512 characters is what the
    -- specification asks every vendor to accept.
    tracestate  text CONSTRAINT job_traces_tracestate_bounded CHECK (
        length(tracestate) BETWEEN 1 AND 512 AND tracestate !~ '[[:cntrl:]]')
);

COMMENT ON TABLE docket.job_traces IS
    'The trace context of the span that enqueued each traced job (W3C traceparent, tracestate), for the span that runs it to link to. Written once, in the job''s own transaction, by docket.job_trace_put.';

CREATE TRIGGER job_traces_immutable
    BEFORE UPDATE ON docket.job_traces
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('a job''s trace context is written once, with the job');

-- job_trace_put stores the trace context p_traceparent (and p_tracestate,
-- NULL or '' for none) with each of jobs p_ids, which p_actor must have
-- created in the current transaction and nobody has claimed yet: a trace
-- context says who asked for the job, so nobody may give one to a job they
-- did not just create, nor change one. "Created in the current
-- transaction" is decided by the row's xmin: the visible version of a row
-- whose xmin is still in progress was written by this transaction (the rows
-- of other transactions in progress are not visible), by its top level or by
-- a savepoint within it. It returns how many rows it wrote.
--
-- Refuses, writing nothing: a malformed actor, or one the session may not
-- act as (DK010, DK009); no ids, or more than 100000 (DK010); an id that is
-- not a job p_actor created in this transaction and nobody has claimed
-- (DK009, naming it); a job that has a trace context already (DK015); a
-- malformed traceparent or tracestate (a check violation naming the
-- constraint).
-- +goose StatementBegin
CREATE FUNCTION docket.job_trace_put(p_ids bigint[], p_traceparent text, p_tracestate text, p_actor text, p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    -- The current transaction's id, with its epoch, and its low 32 bits, as a
    -- row's xmin holds them.
    v_top bigint := pg_current_xact_id()::text::bigint;
    v_low bigint := v_top % 4294967296;
    v_bad bigint;
    v_n integer;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('trace batch size', cardinality(p_ids), 100000);
    -- d is how many xids after the transaction's own the row's xmin was
    -- assigned (the difference of their low 32 bits, signed): 0 for a row the
    -- transaction wrote at its top level, more for one a savepoint of it
    -- wrote, or a transaction begun since wrote (which is no longer in
    -- progress if its row is visible), less for one written before it began.
    SELECT i.id INTO v_bad
    FROM unnest(p_ids) AS i(id)
    LEFT JOIN LATERAL (
        SELECT j.created_by, j.lease_generation,
               (((j.xmin::text::bigint - v_low) % 4294967296 + 4294967296 + 2147483648) % 4294967296) - 2147483648 AS d
        FROM docket.jobs j WHERE j.id = i.id
    ) j ON true
    WHERE i.id IS NULL OR j.d IS NULL OR j.created_by <> p_actor OR j.lease_generation <> 0 OR j.d < 0
       OR (j.d > 0 AND pg_xact_status((v_top + j.d)::text::xid8) <> 'in progress')
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job % is not one % created in this transaction: only a job''s creator gives it a trace context, with the job',
            coalesce(v_bad::text, 'NULL'), p_actor USING ERRCODE = 'DK009';
    END IF;
    INSERT INTO docket.job_traces (job_id, traceparent, tracestate)
    SELECT DISTINCT i.id, p_traceparent, nullif(p_tracestate, '') FROM unnest(p_ids) AS i(id)
    ON CONFLICT (job_id) DO NOTHING;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n < (SELECT count(DISTINCT i) FROM unnest(p_ids) i) THEN
        RAISE EXCEPTION 'a job of % has a trace context already: it is written once, with the job', p_ids
            USING ERRCODE = 'DK015';
    END IF;
    RETURN v_n;
END
$$;
-- +goose StatementEnd

-- job_census counts, at p_now, the unfinished jobs of every project whose
-- jobs p_actor may see (docket.job_visible), by queue and state: queued
-- (and of those, due: available_at <= p_now), claimed, uncertain. Each
-- state is read on its own partial index (jobs_claim_idx, jobs_lease_expiry_idx,
-- jobs_uncertain_idx), so the census costs what the unfinished jobs number,
-- however many finished ones the table keeps. No row for a (project, queue,
-- state) with no job.
-- Refuses a malformed actor or instant, or an actor the session may not act
-- as (DK010, DK009).
-- +goose StatementBegin
CREATE FUNCTION docket.job_census(p_actor text, p_now timestamptz)
RETURNS TABLE (project text, queue text, state text, jobs bigint, due bigint)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    v_projects text[];
BEGIN
    PERFORM docket.require_principal('actor', p_actor);
    IF p_now IS NULL OR NOT isfinite(p_now) THEN
        RAISE EXCEPTION 'invalid instant %: want a finite timestamp', coalesce(p_now::text, 'NULL') USING ERRCODE = 'DK010';
    END IF;
    IF NOT docket.may_act_as(p_actor) THEN
        RAISE EXCEPTION 'login role % may not act as %: bind it first (docket actor bind)', session_user, p_actor
            USING ERRCODE = 'DK009';
    END IF;
    SELECT array_agg(DISTINCT g.project) INTO v_projects FROM docket.grants g
    WHERE g.principal = p_actor AND docket.job_visible(p_actor, g.project);
    IF v_projects IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT j.project::text, j.queue::text, 'queued'::text, count(*), count(*) FILTER (WHERE j.available_at <= p_now)
    FROM docket.jobs j WHERE j.state = 'queued' AND j.project = ANY (v_projects)
    GROUP BY j.project, j.queue
    UNION ALL
    SELECT j.project::text, j.queue::text, 'claimed'::text, count(*), 0::bigint
    FROM docket.jobs j WHERE j.state = 'claimed' AND j.project = ANY (v_projects)
    GROUP BY j.project, j.queue
    UNION ALL
    SELECT j.project::text, j.queue::text, 'uncertain'::text, count(*), 0::bigint
    FROM docket.jobs j WHERE j.state = 'uncertain' AND j.project = ANY (v_projects)
    GROUP BY j.project, j.queue;
END
$$;
-- +goose StatementEnd

INSERT INTO docket.api_functions (name, role) VALUES ('job_trace_put', 'app'), ('job_census', 'app');

SELECT docket.apply_privileges();

-- +goose Down
DELETE FROM docket.api_functions WHERE name IN ('job_trace_put', 'job_census');
DROP FUNCTION IF EXISTS docket.job_census(text, timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_trace_put(bigint[], text, text, text, timestamp with time zone);
DROP TABLE docket.job_traces;
