-- +goose Up
-- Throughput: the per-job statements of a claim, a completion and an
-- enqueue no longer pay for plans or function calls the rules do not need.
-- No rule, event or grant check changes; every hash stays as it was.
--
--   * job_complete_many and job_completion_record find the jobs they settle
--     by id and claim token, not by state. A job holds a claim token exactly
--     while it is claimed (the table CHECK jobs_claimed_holds_lease), so the
--     rows are the same; but with `state = 'claimed'` in the query the
--     planner may walk the partial index jobs_lease_expiry_idx instead of
--     the primary key, and it does whenever the table was analyzed while no
--     job was claimed, as after a backlog is enqueued. Every completion then
--     scans every claimed job and every dead entry of that index, and a
--     burn-down slows as it goes (about 6x at 80,000 jobs).
--   * job_event_hash names each parameter once, so the planner inlines it
--     again (the revision's two branches had made it a function call per
--     event). The digest is byte for byte the one before: the revision, when
--     there is one, is the eleventh element of the same array.
--   * valid_principal is no longer STRICT, and job_pin_bounded is plpgsql.
--     Both run in domain checks of docket.jobs; a STRICT SQL function whose
--     body is an AND is never inlined, and one with a subquery never is, so
--     each was planned again in every statement that wrote a job (about 40
--     and 90 microseconds for a one-job enqueue). A NULL principal is NULL
--     either way; a NULL pin passes its check as before.

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_complete_many(p_ids bigint[], p_tokens uuid[], p_results jsonb[], p_actor text, p_now timestamptz,
                                         p_revisions text[] DEFAULT NULL)
RETURNS TABLE (id bigint, state text, refusal text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_done bigint[];
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('completion batch size', cardinality(p_ids), 1000);
    IF cardinality(p_tokens) IS DISTINCT FROM cardinality(p_ids) OR cardinality(p_results) IS DISTINCT FROM cardinality(p_ids)
       OR (p_revisions IS NOT NULL AND cardinality(p_revisions) IS DISTINCT FROM cardinality(p_ids)) THEN
        RAISE EXCEPTION 'invalid completion batch: ids, tokens, results and revisions must have one length'
            USING ERRCODE = 'DK010';
    END IF;
    IF (SELECT count(DISTINCT i) FROM unnest(p_ids) i) <> cardinality(p_ids) OR array_position(p_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'invalid completion batch: a job appears twice, or an id is NULL: name each job once'
            USING ERRCODE = 'DK010';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_results) r WHERE docket.json_size(r) > 1048576) THEN
        RAISE EXCEPTION 'invalid completion batch: a result is over the bound of 1048576 bytes'
            USING ERRCODE = 'DK010';
    END IF;
    -- The successes in one statement, which locks only the rows it
    -- changes; then, in a statement of its own (so it sees what a concurrent
    -- transaction committed meanwhile), why each other element was refused.
    WITH input AS (
        SELECT x.id, x.token, nullif(x.result, 'null'::jsonb) AS result, nullif(x.revision, '') AS revision
        FROM unnest(p_ids, p_tokens, p_results, p_revisions) AS x(id, token, result, revision)
    ),
    done AS (
        UPDATE docket.jobs j
        SET state = 'succeeded', result = input.result, diagnostic = NULL, outcome_token = j.claim_token,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            finished_at = p_now, updated_at = greatest(j.updated_at, p_now)
        FROM input
        -- The claim token, not the state, names the claimed jobs: a job holds a
        -- token exactly while it is claimed (jobs_claimed_holds_lease), and a
        -- state predicate would let the planner walk jobs_lease_expiry_idx,
        -- whose statistics say no job is claimed after a backlog's ANALYZE.
        WHERE j.id = input.id AND j.claim_token = input.token AND j.lease_expires_at > p_now
          AND j.claimed_revision IS NOT DISTINCT FROM input.revision
        RETURNING j.id
    )
    SELECT array_agg(done.id) INTO v_done FROM done;
    IF cardinality(v_done) = cardinality(p_ids) THEN
        RETURN QUERY SELECT x.id, 'succeeded'::text, NULL::text FROM unnest(p_ids) AS x(id);
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.id,
           CASE WHEN x.id = ANY (v_done) THEN 'succeeded' ELSE j.state::text END,
           CASE
               WHEN x.id = ANY (v_done) THEN NULL
               WHEN j.id IS NULL THEN 'P0002'
               WHEN (x.token = j.claim_token OR x.token = j.outcome_token)
                    AND j.claimed_revision IS DISTINCT FROM nullif(x.revision, '') THEN 'DK002'
               ELSE docket.job_settled_code(j.outcome_token, j.state, j.result, x.token, 'succeeded',
                                            nullif(x.result, 'null'::jsonb))
           END
    FROM unnest(p_ids, p_tokens, p_results, p_revisions) WITH ORDINALITY AS x(id, token, result, revision, i)
    LEFT JOIN docket.jobs j ON j.id = x.id
    ORDER BY x.i;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_completion_record(p_ids bigint[], p_tokens uuid[], p_assets text[], p_kinds text[],
                                             p_roots text[], p_params jsonb[], p_inputs jsonb[],
                                             p_actor text, p_now timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
    n integer := cardinality(p_ids);
    bad record;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('completion record batch size', n, 1000);
    IF n = ALL (ARRAY[cardinality(p_tokens), cardinality(p_assets), cardinality(p_kinds), cardinality(p_roots),
                      cardinality(p_params), cardinality(p_inputs)]) IS NOT TRUE THEN
        RAISE EXCEPTION 'invalid completion records: every field array must have % elements', n USING ERRCODE = 'DK010';
    END IF;
    IF (SELECT count(DISTINCT i) FROM unnest(p_ids) i) <> n OR array_position(p_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'invalid completion records: a job appears twice, or an id is NULL: name each job once'
            USING ERRCODE = 'DK010';
    END IF;
    -- The shape of each record, before any job is read.
    SELECT x.i, x.id,
           CASE
               WHEN x.asset IS NULL OR length(x.asset) NOT BETWEEN 1 AND 1000 THEN 'an output asset of 1-1000 characters'
               WHEN x.kind IS NULL OR NOT docket.valid_output_kind(x.kind) THEN
                   'an output kind of 1-128 characters of [A-Za-z0-9._+/:-], starting with a letter or digit'
               WHEN nullif(x.root, '') IS NOT NULL AND NOT docket.valid_target_root(x.root) THEN
                   'a target root of 1-200 characters of [A-Za-z0-9._-], starting with a letter or digit, or none'
               WHEN x.params IS NOT NULL AND x.params <> 'null'::jsonb
                    AND (jsonb_typeof(x.params) <> 'object' OR docket.json_size(x.params) > 65536) THEN
                   'params that are a JSON object of at most 65536 bytes, or none'
               WHEN x.inputs IS NOT NULL AND x.inputs <> 'null'::jsonb
                    AND (jsonb_typeof(x.inputs) <> 'array' OR jsonb_array_length(x.inputs) > 100
                         OR EXISTS (SELECT 1 FROM jsonb_array_elements(x.inputs) e
                                    WHERE jsonb_typeof(e) <> 'string' OR length(e #>> '{}') > 1000)) THEN
                   'inputs that are an array of at most 100 strings of at most 1000 characters, or none'
           END AS want
    INTO bad
    FROM unnest(p_ids, p_assets, p_kinds, p_roots, p_params, p_inputs) WITH ORDINALITY
         AS x(id, asset, kind, root, params, inputs, i)
    WHERE x.asset IS NULL OR length(x.asset) NOT BETWEEN 1 AND 1000
       OR x.kind IS NULL OR NOT docket.valid_output_kind(x.kind)
       OR (nullif(x.root, '') IS NOT NULL AND NOT docket.valid_target_root(x.root))
       OR (x.params IS NOT NULL AND x.params <> 'null'::jsonb
           AND (jsonb_typeof(x.params) <> 'object' OR docket.json_size(x.params) > 65536))
       OR (x.inputs IS NOT NULL AND x.inputs <> 'null'::jsonb
           AND (jsonb_typeof(x.inputs) <> 'array' OR jsonb_array_length(x.inputs) > 100
                OR EXISTS (SELECT 1 FROM jsonb_array_elements(x.inputs) e
                           WHERE jsonb_typeof(e) <> 'string' OR length(e #>> '{}') > 1000)))
    ORDER BY x.i
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job %: invalid completion record: want %', bad.id, bad.want USING ERRCODE = 'DK010';
    END IF;

    -- The jobs each element's token holds live, locked as the completion
    -- that follows locks them (only its holder's calls wait on the lock);
    -- then the first record that does not match.
    SELECT x.i, x.id, x.asset, x.kind, x.root, j.requested_output, j.requested_kind, j.target_root,
           CASE
               WHEN j.requested_output IS NOT NULL AND x.asset <> j.requested_output THEN 'asset'
               WHEN j.requested_kind IS NOT NULL AND x.kind <> j.requested_kind THEN 'kind'
               WHEN x.root IS NOT NULL AND x.root IS DISTINCT FROM j.target_root THEN 'root'
               WHEN NOT docket.job_inputs_subsequence(x.inputs, j.inputs) THEN 'inputs'
           END AS why
    INTO bad
    FROM (
        SELECT x.i, x.id, x.token, x.asset, x.kind, nullif(x.root, '') AS root, nullif(x.params, 'null'::jsonb) AS params,
               CASE WHEN x.inputs IS NULL OR x.inputs = 'null'::jsonb THEN '{}'::text[]
                    ELSE ARRAY(SELECT jsonb_array_elements_text(x.inputs)) END AS inputs
        FROM unnest(p_ids, p_tokens, p_assets, p_kinds, p_roots, p_params, p_inputs) WITH ORDINALITY
             AS x(id, token, asset, kind, root, params, inputs, i)
    ) x
    JOIN LATERAL (
        SELECT j.* FROM docket.jobs j
        WHERE j.id = x.id AND j.claim_token = x.token AND j.lease_expires_at > p_now
        FOR UPDATE
    ) j ON true
    WHERE (j.requested_output IS NOT NULL AND x.asset <> j.requested_output)
       OR (j.requested_kind IS NOT NULL AND x.kind <> j.requested_kind)
       OR (x.root IS NOT NULL AND x.root IS DISTINCT FROM j.target_root)
       OR NOT docket.job_inputs_subsequence(x.inputs, j.inputs)
    ORDER BY x.i
    LIMIT 1;
    IF FOUND THEN
        CASE bad.why
        WHEN 'asset' THEN
            RAISE EXCEPTION 'job %: the completion record''s output asset % is not the requested %', bad.id,
                quote_literal(bad.asset), quote_literal(bad.requested_output) USING ERRCODE = 'DK010';
        WHEN 'kind' THEN
            RAISE EXCEPTION 'job %: the completion record''s output kind % is not the requested %', bad.id,
                quote_literal(bad.kind), quote_literal(bad.requested_kind) USING ERRCODE = 'DK010';
        WHEN 'root' THEN
            RAISE EXCEPTION 'job %: the completion record names target root %, the job''s is %', bad.id,
                quote_literal(bad.root), coalesce(quote_literal(bad.target_root), 'none') USING ERRCODE = 'DK010';
        ELSE
            RAISE EXCEPTION 'job %: the completion record''s inputs are not the job''s: name them in the job''s order, leaving out only what was not used',
                bad.id USING ERRCODE = 'DK010';
        END CASE;
    END IF;

    RETURN QUERY
    INSERT INTO docket.job_completions AS c (job_id, output_asset, output_kind, output_root, params_used, inputs_used,
                                            recorded_by, recorded_at, claim_token)
    SELECT x.id, x.asset, x.kind, j.target_root, x.params, x.inputs, p_actor, p_now, x.token
    FROM (
        SELECT x.i, x.id, x.token, x.asset, x.kind, nullif(x.root, '') AS root, nullif(x.params, 'null'::jsonb) AS params,
               CASE WHEN x.inputs IS NULL OR x.inputs = 'null'::jsonb THEN '{}'::text[]
                    ELSE ARRAY(SELECT jsonb_array_elements_text(x.inputs)) END AS inputs
        FROM unnest(p_ids, p_tokens, p_assets, p_kinds, p_roots, p_params, p_inputs) WITH ORDINALITY
             AS x(id, token, asset, kind, root, params, inputs, i)
    ) x
    JOIN docket.jobs j ON j.id = x.id AND j.claim_token = x.token AND j.lease_expires_at > p_now
    ORDER BY x.id
    ON CONFLICT (job_id) DO NOTHING
    RETURNING c.job_id;
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE FUNCTION docket.job_event_hash(p_prev bytea, p_job_id bigint, p_seq integer, p_from text, p_to text,
                                                 p_actor text, p_at timestamptz, p_attempt integer, p_detail text,
                                                 p_lease_until timestamptz, p_outcome bytea, p_revision text)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN sha256(p_prev || textsend((jsonb_build_array(
           p_job_id, p_seq, p_from, p_to, p_actor, docket.epoch_micros(p_at), p_attempt, p_detail,
           docket.epoch_micros(p_lease_until), encode(p_outcome, 'hex'))
       || CASE WHEN p_revision IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(p_revision) END)::text));

CREATE OR REPLACE FUNCTION docket.valid_principal(p_principal text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_principal ~ '^[a-z][a-z0-9_-]*:[A-Za-z0-9][A-Za-z0-9._@+:/-]*$'
   AND length(split_part(p_principal, ':', 1)) <= 32
   AND length(p_principal) - length(split_part(p_principal, ':', 1)) <= 201;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_pin_bounded(p_revisions text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF p_revisions IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN cardinality(p_revisions) BETWEEN 1 AND 8
       AND array_position(p_revisions, NULL) IS NULL
       AND NOT EXISTS (SELECT 1 FROM unnest(p_revisions) r WHERE NOT docket.valid_job_revision(r));
END
$$;
-- +goose StatementEnd

-- Plans kept, not made again per call. A plpgsql statement with parameters
-- is planned afresh for its first five calls in a session, and afterwards
-- whenever its generic plan looks dearer than the custom ones did: the
-- claims' scans and the event insert of the transition trigger were planned
-- again at most calls (270 - 600 microseconds each, per batch) when the
-- batches a session runs vary in size, as a worker's do. Their generic plans
-- are the plans wanted at every size (the claim index under a LIMIT; a hash
-- join of the transition tables, then each job's last event by its key). A
-- CREATE OR REPLACE of these functions drops the setting: set it again.
ALTER FUNCTION docket.jobs_record_update() SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION docket.job_claim(text, text, integer, interval, text[], integer[], text, timestamptz, text[])
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION docket.job_claim_queue(text, integer, text[], integer[], interval[], text, timestamptz, text[])
    SET plan_cache_mode = force_generic_plan;

-- A replaced function loses SECURITY DEFINER and its search_path: again.
SELECT docket.apply_privileges();

-- +goose Down
-- The functions as 00001, 00015 and 00016 made them.

ALTER FUNCTION docket.jobs_record_update() RESET plan_cache_mode;
ALTER FUNCTION docket.job_claim(text, text, integer, interval, text[], integer[], text, timestamptz, text[])
    RESET plan_cache_mode;
ALTER FUNCTION docket.job_claim_queue(text, integer, text[], integer[], interval[], text, timestamptz, text[])
    RESET plan_cache_mode;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_complete_many(p_ids bigint[], p_tokens uuid[], p_results jsonb[], p_actor text, p_now timestamptz,
                                         p_revisions text[] DEFAULT NULL)
RETURNS TABLE (id bigint, state text, refusal text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_done bigint[];
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('completion batch size', cardinality(p_ids), 1000);
    IF cardinality(p_tokens) IS DISTINCT FROM cardinality(p_ids) OR cardinality(p_results) IS DISTINCT FROM cardinality(p_ids)
       OR (p_revisions IS NOT NULL AND cardinality(p_revisions) IS DISTINCT FROM cardinality(p_ids)) THEN
        RAISE EXCEPTION 'invalid completion batch: ids, tokens, results and revisions must have one length'
            USING ERRCODE = 'DK010';
    END IF;
    IF (SELECT count(DISTINCT i) FROM unnest(p_ids) i) <> cardinality(p_ids) OR array_position(p_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'invalid completion batch: a job appears twice, or an id is NULL: name each job once'
            USING ERRCODE = 'DK010';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_results) r WHERE docket.json_size(r) > 1048576) THEN
        RAISE EXCEPTION 'invalid completion batch: a result is over the bound of 1048576 bytes'
            USING ERRCODE = 'DK010';
    END IF;
    -- The successes in one statement, which locks only the rows it
    -- changes; then, in a statement of its own (so it sees what a concurrent
    -- transaction committed meanwhile), why each other element was refused.
    WITH input AS (
        SELECT x.id, x.token, nullif(x.result, 'null'::jsonb) AS result, nullif(x.revision, '') AS revision
        FROM unnest(p_ids, p_tokens, p_results, p_revisions) AS x(id, token, result, revision)
    ),
    done AS (
        UPDATE docket.jobs j
        SET state = 'succeeded', result = input.result, diagnostic = NULL, outcome_token = j.claim_token,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            finished_at = p_now, updated_at = greatest(j.updated_at, p_now)
        FROM input
        WHERE j.id = input.id AND j.state = 'claimed' AND j.claim_token = input.token AND j.lease_expires_at > p_now
          AND j.claimed_revision IS NOT DISTINCT FROM input.revision
        RETURNING j.id
    )
    SELECT array_agg(done.id) INTO v_done FROM done;
    IF cardinality(v_done) = cardinality(p_ids) THEN
        RETURN QUERY SELECT x.id, 'succeeded'::text, NULL::text FROM unnest(p_ids) AS x(id);
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.id,
           CASE WHEN x.id = ANY (v_done) THEN 'succeeded' ELSE j.state::text END,
           CASE
               WHEN x.id = ANY (v_done) THEN NULL
               WHEN j.id IS NULL THEN 'P0002'
               WHEN (x.token = j.claim_token OR x.token = j.outcome_token)
                    AND j.claimed_revision IS DISTINCT FROM nullif(x.revision, '') THEN 'DK002'
               ELSE docket.job_settled_code(j.outcome_token, j.state, j.result, x.token, 'succeeded',
                                            nullif(x.result, 'null'::jsonb))
           END
    FROM unnest(p_ids, p_tokens, p_results, p_revisions) WITH ORDINALITY AS x(id, token, result, revision, i)
    LEFT JOIN docket.jobs j ON j.id = x.id
    ORDER BY x.i;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_completion_record(p_ids bigint[], p_tokens uuid[], p_assets text[], p_kinds text[],
                                             p_roots text[], p_params jsonb[], p_inputs jsonb[],
                                             p_actor text, p_now timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
    n integer := cardinality(p_ids);
    bad record;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('completion record batch size', n, 1000);
    IF n = ALL (ARRAY[cardinality(p_tokens), cardinality(p_assets), cardinality(p_kinds), cardinality(p_roots),
                      cardinality(p_params), cardinality(p_inputs)]) IS NOT TRUE THEN
        RAISE EXCEPTION 'invalid completion records: every field array must have % elements', n USING ERRCODE = 'DK010';
    END IF;
    IF (SELECT count(DISTINCT i) FROM unnest(p_ids) i) <> n OR array_position(p_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'invalid completion records: a job appears twice, or an id is NULL: name each job once'
            USING ERRCODE = 'DK010';
    END IF;
    -- The shape of each record, before any job is read.
    SELECT x.i, x.id,
           CASE
               WHEN x.asset IS NULL OR length(x.asset) NOT BETWEEN 1 AND 1000 THEN 'an output asset of 1-1000 characters'
               WHEN x.kind IS NULL OR NOT docket.valid_output_kind(x.kind) THEN
                   'an output kind of 1-128 characters of [A-Za-z0-9._+/:-], starting with a letter or digit'
               WHEN nullif(x.root, '') IS NOT NULL AND NOT docket.valid_target_root(x.root) THEN
                   'a target root of 1-200 characters of [A-Za-z0-9._-], starting with a letter or digit, or none'
               WHEN x.params IS NOT NULL AND x.params <> 'null'::jsonb
                    AND (jsonb_typeof(x.params) <> 'object' OR docket.json_size(x.params) > 65536) THEN
                   'params that are a JSON object of at most 65536 bytes, or none'
               WHEN x.inputs IS NOT NULL AND x.inputs <> 'null'::jsonb
                    AND (jsonb_typeof(x.inputs) <> 'array' OR jsonb_array_length(x.inputs) > 100
                         OR EXISTS (SELECT 1 FROM jsonb_array_elements(x.inputs) e
                                    WHERE jsonb_typeof(e) <> 'string' OR length(e #>> '{}') > 1000)) THEN
                   'inputs that are an array of at most 100 strings of at most 1000 characters, or none'
           END AS want
    INTO bad
    FROM unnest(p_ids, p_assets, p_kinds, p_roots, p_params, p_inputs) WITH ORDINALITY
         AS x(id, asset, kind, root, params, inputs, i)
    WHERE x.asset IS NULL OR length(x.asset) NOT BETWEEN 1 AND 1000
       OR x.kind IS NULL OR NOT docket.valid_output_kind(x.kind)
       OR (nullif(x.root, '') IS NOT NULL AND NOT docket.valid_target_root(x.root))
       OR (x.params IS NOT NULL AND x.params <> 'null'::jsonb
           AND (jsonb_typeof(x.params) <> 'object' OR docket.json_size(x.params) > 65536))
       OR (x.inputs IS NOT NULL AND x.inputs <> 'null'::jsonb
           AND (jsonb_typeof(x.inputs) <> 'array' OR jsonb_array_length(x.inputs) > 100
                OR EXISTS (SELECT 1 FROM jsonb_array_elements(x.inputs) e
                           WHERE jsonb_typeof(e) <> 'string' OR length(e #>> '{}') > 1000)))
    ORDER BY x.i
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job %: invalid completion record: want %', bad.id, bad.want USING ERRCODE = 'DK010';
    END IF;

    -- The jobs each element's token holds live, locked as the completion
    -- that follows locks them (only its holder's calls wait on the lock);
    -- then the first record that does not match.
    SELECT x.i, x.id, x.asset, x.kind, x.root, j.requested_output, j.requested_kind, j.target_root,
           CASE
               WHEN j.requested_output IS NOT NULL AND x.asset <> j.requested_output THEN 'asset'
               WHEN j.requested_kind IS NOT NULL AND x.kind <> j.requested_kind THEN 'kind'
               WHEN x.root IS NOT NULL AND x.root IS DISTINCT FROM j.target_root THEN 'root'
               WHEN NOT docket.job_inputs_subsequence(x.inputs, j.inputs) THEN 'inputs'
           END AS why
    INTO bad
    FROM (
        SELECT x.i, x.id, x.token, x.asset, x.kind, nullif(x.root, '') AS root, nullif(x.params, 'null'::jsonb) AS params,
               CASE WHEN x.inputs IS NULL OR x.inputs = 'null'::jsonb THEN '{}'::text[]
                    ELSE ARRAY(SELECT jsonb_array_elements_text(x.inputs)) END AS inputs
        FROM unnest(p_ids, p_tokens, p_assets, p_kinds, p_roots, p_params, p_inputs) WITH ORDINALITY
             AS x(id, token, asset, kind, root, params, inputs, i)
    ) x
    JOIN LATERAL (
        SELECT j.* FROM docket.jobs j
        WHERE j.id = x.id AND j.state = 'claimed' AND j.claim_token = x.token AND j.lease_expires_at > p_now
        FOR UPDATE
    ) j ON true
    WHERE (j.requested_output IS NOT NULL AND x.asset <> j.requested_output)
       OR (j.requested_kind IS NOT NULL AND x.kind <> j.requested_kind)
       OR (x.root IS NOT NULL AND x.root IS DISTINCT FROM j.target_root)
       OR NOT docket.job_inputs_subsequence(x.inputs, j.inputs)
    ORDER BY x.i
    LIMIT 1;
    IF FOUND THEN
        CASE bad.why
        WHEN 'asset' THEN
            RAISE EXCEPTION 'job %: the completion record''s output asset % is not the requested %', bad.id,
                quote_literal(bad.asset), quote_literal(bad.requested_output) USING ERRCODE = 'DK010';
        WHEN 'kind' THEN
            RAISE EXCEPTION 'job %: the completion record''s output kind % is not the requested %', bad.id,
                quote_literal(bad.kind), quote_literal(bad.requested_kind) USING ERRCODE = 'DK010';
        WHEN 'root' THEN
            RAISE EXCEPTION 'job %: the completion record names target root %, the job''s is %', bad.id,
                quote_literal(bad.root), coalesce(quote_literal(bad.target_root), 'none') USING ERRCODE = 'DK010';
        ELSE
            RAISE EXCEPTION 'job %: the completion record''s inputs are not the job''s: name them in the job''s order, leaving out only what was not used',
                bad.id USING ERRCODE = 'DK010';
        END CASE;
    END IF;

    RETURN QUERY
    INSERT INTO docket.job_completions AS c (job_id, output_asset, output_kind, output_root, params_used, inputs_used,
                                            recorded_by, recorded_at, claim_token)
    SELECT x.id, x.asset, x.kind, j.target_root, x.params, x.inputs, p_actor, p_now, x.token
    FROM (
        SELECT x.i, x.id, x.token, x.asset, x.kind, nullif(x.root, '') AS root, nullif(x.params, 'null'::jsonb) AS params,
               CASE WHEN x.inputs IS NULL OR x.inputs = 'null'::jsonb THEN '{}'::text[]
                    ELSE ARRAY(SELECT jsonb_array_elements_text(x.inputs)) END AS inputs
        FROM unnest(p_ids, p_tokens, p_assets, p_kinds, p_roots, p_params, p_inputs) WITH ORDINALITY
             AS x(id, token, asset, kind, root, params, inputs, i)
    ) x
    JOIN docket.jobs j ON j.id = x.id AND j.state = 'claimed' AND j.claim_token = x.token AND j.lease_expires_at > p_now
    ORDER BY x.id
    ON CONFLICT (job_id) DO NOTHING
    RETURNING c.job_id;
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE FUNCTION docket.job_event_hash(p_prev bytea, p_job_id bigint, p_seq integer, p_from text, p_to text,
                                      p_actor text, p_at timestamptz, p_attempt integer, p_detail text,
                                      p_lease_until timestamptz, p_outcome bytea, p_revision text)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN sha256(p_prev || textsend(CASE
    WHEN p_revision IS NULL THEN jsonb_build_array(
           p_job_id, p_seq, p_from, p_to, p_actor, docket.epoch_micros(p_at), p_attempt, p_detail,
           docket.epoch_micros(p_lease_until), encode(p_outcome, 'hex'))
    ELSE jsonb_build_array(
           p_job_id, p_seq, p_from, p_to, p_actor, docket.epoch_micros(p_at), p_attempt, p_detail,
           docket.epoch_micros(p_lease_until), encode(p_outcome, 'hex'), p_revision)
    END::text));

CREATE OR REPLACE FUNCTION docket.valid_principal(p_principal text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN p_principal ~ '^[a-z][a-z0-9_-]*:[A-Za-z0-9][A-Za-z0-9._@+:/-]*$'
   AND length(split_part(p_principal, ':', 1)) <= 32
   AND length(p_principal) - length(split_part(p_principal, ':', 1)) <= 201;

CREATE OR REPLACE FUNCTION docket.job_pin_bounded(p_revisions text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN cardinality(p_revisions) BETWEEN 1 AND 8
   AND array_position(p_revisions, NULL) IS NULL
   AND (SELECT bool_and(docket.valid_job_revision(r)) FROM unnest(p_revisions) r);

SELECT docket.apply_privileges();
