-- +goose Up
-- Provenance: a job's requested output names an asset, a representation
-- kind and a logical target root; the completion of a job records what its
-- worker actually produced and used; a re-run is planned from that record.
--
--   * docket.jobs gains requested_kind and target_root beside
--     requested_output (the asset). A kind or a root needs an asset. They
--     are what the job is, fixed at enqueue as the other request columns.
--   * docket.job_completions holds, per succeeded job, the output its worker
--     produced (asset, kind, root), the parameters and the inputs it
--     actually used, who recorded it, when, and under which claim. It is
--     written by job_completion_record in the completion's transaction,
--     before the completion itself, by the holder of the job's live claim,
--     and never changed; it leaves with its job (a prune's delete cascades
--     to it). The job's requested parameters are never copied onto it.
--   * Two constraint triggers, checked at commit, hold the two together
--     whoever writes: a job with a requested output that its holder
--     completed has a record under the completing claim's token; a record
--     exists only for a job that succeeded under the record's token. So a
--     failure, a release or a cancellation leaves no record, and a completion
--     without its record rolls back whole, the handler's writes included.
--     An operator's reconcile to succeeded is exempt: nobody held a claim
--     that finished the job, so there is no record, and the job's re-run
--     plan names its kind and no target root.
--
-- Bounds (also in Go, package jobs):
--   output kind     1-128 characters of [A-Za-z0-9._+/:-], starting with a letter or digit
--   target root     1-200 characters of [A-Za-z0-9._-], starting with a letter or digit
--   record params   as a job's params (an object, 64 KiB); record inputs as a job's inputs
--   record batch    1..1000, as a completion batch

CREATE FUNCTION docket.valid_output_kind(p text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p) <= 128 AND p ~ '^[A-Za-z0-9][A-Za-z0-9._+/:-]*$';

CREATE FUNCTION docket.valid_target_root(p text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p) <= 200 AND p ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$';

CREATE DOMAIN docket.job_output_kind AS text CONSTRAINT job_output_kind_valid CHECK (docket.valid_output_kind(VALUE));
CREATE DOMAIN docket.job_target_root AS text CONSTRAINT job_target_root_valid CHECK (docket.valid_target_root(VALUE));

ALTER TABLE docket.jobs
    ADD COLUMN requested_kind docket.job_output_kind,
    ADD COLUMN target_root docket.job_target_root;

-- jobs_request_check refuses (a check violation of jobs_request_names_asset)
-- a job created with a requested kind or target root and no asset. A
-- statement trigger over the new rows, not a table CHECK, which Postgres
-- would read again in every UPDATE of a job (see 00004's domains); the
-- columns never change after the INSERT (jobs_request_immutable).
-- +goose StatementBegin
CREATE FUNCTION docket.jobs_request_check() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    bad bigint;
BEGIN
    SELECT n.id INTO bad FROM new_jobs n
    WHERE n.requested_output IS NULL AND (n.requested_kind IS NOT NULL OR n.target_root IS NOT NULL)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job %: a requested output kind or target root names no asset', bad
            USING ERRCODE = '23514', CONSTRAINT = 'jobs_request_names_asset', TABLE = 'jobs', SCHEMA = 'docket';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER jobs_request_check
    AFTER INSERT ON docket.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION docket.jobs_request_check();

-- What a job is asked to produce is fixed at enqueue, as its other request
-- columns are (jobs_columns_immutable).
CREATE TRIGGER jobs_request_immutable
    BEFORE UPDATE OF requested_kind, target_root ON docket.jobs
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

-- The view job_enqueue_one returns, with the new columns appended.
CREATE OR REPLACE VIEW docket.job_enqueued AS
SELECT false AS duplicate, j.* FROM docket.jobs j WHERE false;

-- job_resolve_duplicate, as in 00004, also comparing what the job is asked
-- to produce: a key held by a job with another requested output (asset,
-- kind or root) is a conflict (DK003), as one with another payload is.
-- +goose StatementBegin
CREATE FUNCTION docket.job_resolve_duplicate(p_project text, p_kind text, p_key text, p_payload jsonb, p_payload_schema integer,
                                             p_output text, p_output_kind text, p_root text)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint := docket.job_resolve_duplicate(p_project, p_kind, p_key, p_payload, p_payload_schema);
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM docket.jobs j
        WHERE j.id = v_id
          AND j.requested_output IS NOT DISTINCT FROM nullif(p_output, '')
          AND j.requested_kind IS NOT DISTINCT FROM nullif(p_output_kind, '')
          AND j.target_root IS NOT DISTINCT FROM nullif(p_root, '')) THEN
        RAISE EXCEPTION 'idempotency key % of kind % in project % is held by job % with a different requested output',
            quote_literal(p_key), p_kind, p_project, v_id USING ERRCODE = 'DK003';
    END IF;
    RETURN v_id;
END
$$;
-- +goose StatementEnd

-- job_enqueue_many and job_enqueue_one take the requested output's kind and
-- target root ('' or NULL: none) after the arguments of 00004, which a
-- caller that names neither may leave out. Otherwise as in 00004; a kind or
-- a root without an asset is refused (DK010), as is a malformed one.
DROP FUNCTION docket.job_enqueue_many(text,text,timestamp with time zone,text[],text[],smallint[],jsonb[],integer[],text[],timestamp with time zone[],integer[],boolean[],boolean[],interval[],interval[],interval[],double precision[],jsonb[],jsonb[],text[],bigint[],bigint[],text[]);
DROP FUNCTION docket.job_enqueue_one(text,text,timestamp with time zone,text,text,smallint,jsonb,integer,text,timestamp with time zone,integer,boolean,boolean,interval,interval,interval,double precision,jsonb,text[],text,bigint,bigint,text);

-- job_require_request refuses (DK010), naming element p_i, a requested
-- output kind or target root that is malformed or names no asset.
-- +goose StatementBegin
CREATE FUNCTION docket.job_require_request(p_i integer, p_output text, p_output_kind text, p_root text)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF nullif(p_output_kind, '') IS NOT NULL AND NOT docket.valid_output_kind(p_output_kind) THEN
        RAISE EXCEPTION 'job %: invalid requested output kind %: want 1-128 characters of [A-Za-z0-9._+/:-], starting with a letter or digit',
            p_i, quote_literal(p_output_kind) USING ERRCODE = 'DK010';
    ELSIF nullif(p_root, '') IS NOT NULL AND NOT docket.valid_target_root(p_root) THEN
        RAISE EXCEPTION 'job %: invalid target root %: want 1-200 characters of [A-Za-z0-9._-], starting with a letter or digit',
            p_i, quote_literal(p_root) USING ERRCODE = 'DK010';
    ELSIF nullif(p_output, '') IS NULL AND (nullif(p_output_kind, '') IS NOT NULL OR nullif(p_root, '') IS NOT NULL) THEN
        RAISE EXCEPTION 'job %: a requested output kind or target root names no asset: set the requested output too', p_i
            USING ERRCODE = 'DK010';
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION docket.job_enqueue_many(
    p_project text, p_actor text, p_now timestamptz,
    p_kinds text[], p_queues text[], p_priorities smallint[], p_payloads jsonb[], p_payload_schemas integer[],
    p_keys text[], p_available_at timestamptz[], p_max_attempts integer[], p_repeatable boolean[],
    p_external boolean[], p_leases interval[], p_backoff_base interval[], p_backoff_cap interval[],
    p_backoff_jitter double precision[], p_params jsonb[], p_inputs jsonb[], p_outputs text[],
    p_lane_ids bigint[], p_case_ids bigint[], p_compensation_kinds text[],
    p_output_kinds text[] DEFAULT NULL, p_roots text[] DEFAULT NULL)
RETURNS TABLE (ord integer, duplicate boolean, id bigint)
LANGUAGE plpgsql SET jit = off AS $$
#variable_conflict use_column
DECLARE
    n integer := cardinality(p_kinds);
    bad record;
    v_ids bigint[];
    v_inserted integer;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.job_require_batch('enqueue batch size', n, 100000);
    p_output_kinds := coalesce(p_output_kinds, array_fill(NULL::text, ARRAY[n]));
    p_roots := coalesce(p_roots, array_fill(NULL::text, ARRAY[n]));
    IF n = ALL (ARRAY[cardinality(p_queues), cardinality(p_priorities), cardinality(p_payloads),
                      cardinality(p_payload_schemas), cardinality(p_keys), cardinality(p_available_at),
                      cardinality(p_max_attempts), cardinality(p_repeatable), cardinality(p_external),
                      cardinality(p_leases), cardinality(p_backoff_base), cardinality(p_backoff_cap),
                      cardinality(p_backoff_jitter), cardinality(p_params), cardinality(p_inputs),
                      cardinality(p_outputs), cardinality(p_lane_ids), cardinality(p_case_ids),
                      cardinality(p_compensation_kinds), cardinality(p_output_kinds), cardinality(p_roots)]) IS NOT TRUE THEN
        RAISE EXCEPTION 'invalid enqueue batch: every field array must have % elements', n
            USING ERRCODE = 'DK010';
    END IF;
    IF NOT docket.grant_check(p_actor, p_project, 'job.create') THEN
        RAISE EXCEPTION '% may not create jobs in project %: it needs an explicit job.create grant', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;

    -- Early, named refusals for the common mistakes; the table's CHECKs
    -- remain the arbiter.
    SELECT x.i, x.kind, x.queue, x.payload, x.max_attempts INTO bad
    FROM unnest(p_kinds, p_queues, p_payloads, p_max_attempts) WITH ORDINALITY AS x(kind, queue, payload, max_attempts, i)
    WHERE x.kind IS NULL OR NOT docket.valid_job_kind(x.kind)
       OR x.queue IS NULL OR NOT docket.valid_queue(x.queue)
       OR x.payload IS NULL
       OR x.max_attempts IS NULL OR x.max_attempts NOT BETWEEN 1 AND 100
    LIMIT 1;
    IF FOUND THEN
        PERFORM docket.job_require_spec(bad.i::integer, bad.kind, bad.queue, bad.payload, bad.max_attempts);
    END IF;
    SELECT x.i, x.output, x.output_kind, x.root INTO bad
    FROM unnest(p_outputs, p_output_kinds, p_roots) WITH ORDINALITY AS x(output, output_kind, root, i)
    WHERE (nullif(x.output_kind, '') IS NOT NULL AND NOT docket.valid_output_kind(x.output_kind))
       OR (nullif(x.root, '') IS NOT NULL AND NOT docket.valid_target_root(x.root))
       OR (nullif(x.output, '') IS NULL AND (nullif(x.output_kind, '') IS NOT NULL OR nullif(x.root, '') IS NOT NULL))
    LIMIT 1;
    IF FOUND THEN
        PERFORM docket.job_require_request(bad.i::integer, bad.output, bad.output_kind, bad.root);
    END IF;

    v_ids := ARRAY(SELECT nextval('docket.jobs_id_seq') FROM generate_series(1, n));
    WITH inserted AS (
        INSERT INTO docket.jobs AS j (
            id, project, kind, queue, priority, payload, payload_schema, params, inputs, requested_output,
            requested_kind, target_root,
            lane_id, case_id, idempotency_key, compensation_kind, external, repeatable, available_at,
            max_attempts, lease, backoff_base, backoff_cap, backoff_jitter, created_by, created_at, updated_at)
        OVERRIDING SYSTEM VALUE
        SELECT x.new_id, p_project, x.kind, x.queue, x.priority, x.payload, x.payload_schema,
               nullif(x.params, 'null'::jsonb),
               CASE WHEN x.inputs IS NULL OR x.inputs = 'null'::jsonb THEN '{}'::text[]
                    ELSE ARRAY(SELECT jsonb_array_elements_text(x.inputs)) END,
               nullif(x.output, ''), nullif(x.output_kind, ''), nullif(x.root, ''),
               nullif(x.lane_id, 0), nullif(x.case_id, 0), nullif(x.key, ''),
               nullif(x.compensation_kind, ''), x.external, x.repeatable, coalesce(x.available_at, p_now),
               x.max_attempts, x.lease, x.backoff_base, x.backoff_cap, x.backoff_jitter, p_actor, p_now, p_now
        FROM unnest(v_ids, p_kinds, p_queues, p_priorities, p_payloads, p_payload_schemas, p_keys, p_available_at,
                    p_max_attempts, p_repeatable, p_external, p_leases, p_backoff_base, p_backoff_cap,
                    p_backoff_jitter, p_params, p_inputs, p_outputs, p_lane_ids, p_case_ids, p_compensation_kinds,
                    p_output_kinds, p_roots)
             AS x(new_id, kind, queue, priority, payload, payload_schema, key, available_at, max_attempts,
                  repeatable, external, lease, backoff_base, backoff_cap, backoff_jitter, params,
                  inputs, output, lane_id, case_id, compensation_kind, output_kind, root)
        ON CONFLICT (project, kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING j.id
    )
    SELECT count(*) INTO v_inserted FROM inserted;
    IF v_inserted = n THEN
        RETURN QUERY SELECT x.i::integer, false, x.id FROM unnest(v_ids) WITH ORDINALITY AS x(id, i);
    ELSE
        -- A statement of its own, so it sees the rows the INSERT made and
        -- those concurrent enqueues committed; each element not inserted
        -- names the job that holds its key.
        RETURN QUERY
        SELECT x.i::integer, j.id IS NULL,
               coalesce(j.id, docket.job_resolve_duplicate(p_project, p_kinds[x.i], p_keys[x.i],
                                                           p_payloads[x.i], p_payload_schemas[x.i],
                                                           p_outputs[x.i], p_output_kinds[x.i], p_roots[x.i]))
        FROM unnest(v_ids) WITH ORDINALITY AS x(id, i)
        LEFT JOIN docket.jobs j ON j.id = x.id
        ORDER BY x.i;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION docket.job_enqueue_one(
    p_project text, p_actor text, p_now timestamptz,
    p_kind text, p_queue text, p_priority smallint, p_payload jsonb, p_payload_schema integer,
    p_key text, p_available_at timestamptz, p_max_attempts integer, p_repeatable boolean,
    p_external boolean, p_lease interval, p_backoff_base interval, p_backoff_cap interval,
    p_backoff_jitter double precision, p_params jsonb, p_inputs text[], p_output text,
    p_lane_id bigint, p_case_id bigint, p_compensation_kind text,
    p_output_kind text DEFAULT NULL, p_root text DEFAULT NULL)
RETURNS SETOF docket.job_enqueued
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
    v_id bigint;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    IF NOT docket.grant_check(p_actor, p_project, 'job.create') THEN
        RAISE EXCEPTION '% may not create jobs in project %: it needs an explicit job.create grant', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    PERFORM docket.job_require_spec(1, p_kind, p_queue, p_payload, p_max_attempts);
    IF nullif(p_output_kind, '') IS NOT NULL OR nullif(p_root, '') IS NOT NULL THEN
        PERFORM docket.job_require_request(1, p_output, p_output_kind, p_root);
    END IF;
    INSERT INTO docket.jobs AS j (
        project, kind, queue, priority, payload, payload_schema, params, inputs, requested_output,
        requested_kind, target_root,
        lane_id, case_id, idempotency_key, compensation_kind, external, repeatable, available_at,
        max_attempts, lease, backoff_base, backoff_cap, backoff_jitter, created_by, created_at, updated_at)
    VALUES (p_project, p_kind, p_queue, p_priority, p_payload, p_payload_schema, nullif(p_params, 'null'::jsonb),
            coalesce(p_inputs, '{}'), nullif(p_output, ''), nullif(p_output_kind, ''), nullif(p_root, ''),
            nullif(p_lane_id, 0), nullif(p_case_id, 0),
            nullif(p_key, ''), nullif(p_compensation_kind, ''), p_external, p_repeatable,
            coalesce(p_available_at, p_now), p_max_attempts, p_lease, p_backoff_base, p_backoff_cap,
            p_backoff_jitter, p_actor, p_now, p_now)
    ON CONFLICT (project, kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING * INTO v;
    IF FOUND THEN
        RETURN QUERY SELECT false, (v).*;
        RETURN;
    END IF;
    v_id := docket.job_resolve_duplicate(p_project, p_kind, p_key, p_payload, p_payload_schema,
                                         p_output, p_output_kind, p_root);
    SELECT * INTO v FROM docket.jobs WHERE id = v_id;
    RETURN QUERY SELECT true, (v).*;
END
$$;
-- +goose StatementEnd

-- Completion records -----------------------------------------------------------

CREATE TABLE docket.job_completions (
    job_id       bigint PRIMARY KEY REFERENCES docket.jobs (id) ON DELETE CASCADE,
    output_asset docket.job_output NOT NULL,
    output_kind  docket.job_output_kind NOT NULL,
    -- The job's target root, when it has one: a record names no other.
    output_root  docket.job_target_root,
    -- What the worker used, as it says: NULL params when it names none.
    params_used  docket.job_params,
    inputs_used  docket.job_inputs NOT NULL DEFAULT '{}',
    recorded_by  docket.principal NOT NULL,
    recorded_at  timestamptz NOT NULL,
    -- The claim the record was made under, which completed the job.
    claim_token  uuid NOT NULL
);

COMMENT ON TABLE docket.job_completions IS
    'What the worker that completed each job actually produced and used: output asset, kind and root, its parameters and inputs. Written once, by the claim''s holder in the completion''s transaction (docket.job_completion_record).';

-- "Which job produced output X": one index entry per record.
CREATE INDEX job_completions_output_idx ON docket.job_completions (output_asset, output_kind);

CREATE TRIGGER job_completions_immutable
    BEFORE UPDATE ON docket.job_completions
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('a completion record is written once, with the completion');

-- job_inputs_subsequence reports whether p_used is a subsequence of
-- p_given: each element one of p_given's, in p_given's order, none used
-- twice. A worker may leave out an input it did not need; it never names
-- one it was not given, nor reorders them.
-- +goose StatementBegin
CREATE FUNCTION docket.job_inputs_subsequence(p_used text[], p_given text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    i integer := 1;
    u text;
BEGIN
    IF cardinality(p_used) = 0 THEN
        RETURN true;
    END IF;
    FOREACH u IN ARRAY p_used LOOP
        WHILE i <= cardinality(p_given) AND p_given[i] IS DISTINCT FROM u LOOP
            i := i + 1;
        END LOOP;
        IF i > cardinality(p_given) THEN
            RETURN false;
        END IF;
        i := i + 1;
    END LOOP;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- job_completion_record writes, for p_actor at p_now, the completion record
-- of each element i: job p_ids[i], whose live claim p_tokens[i] holds,
-- produced output (p_assets[i], p_kinds[i], p_roots[i]: '' or NULL for the
-- job's own root) using parameters p_params[i] (JSON null: none named) and
-- inputs p_inputs[i] (a JSON array of strings; JSON null: none). Call it in
-- the completion's transaction, before job_complete or job_complete_many: the
-- record is checked against the job at commit (see the constraint triggers
-- below), so a record without its completion rolls the transaction back.
--
-- The record must match the request: the asset is the job's requested
-- output, when it has one; the kind is the requested kind, when it has one;
-- the root is the job's target root (a record names no other); the inputs
-- are a subsequence of the job's (docket.job_inputs_subsequence). The
-- parameters are the worker's own, never the job's.
--
-- An element whose token does not hold the job's live claim at p_now (an
-- unknown job, a stale or spent token) records nothing and is left to the
-- completion that follows, which refuses it as it refuses any such token;
-- so does an element whose job already has a record (a completion retried
-- after a lost reply). It returns the ids it recorded.
--
-- Refuses the whole call, writing nothing: a malformed actor or instant, an
-- actor the session may not act as (DK010, DK009); arrays of different
-- lengths, an empty batch or one over 1000, a job named twice; a missing or
-- malformed asset or kind, a malformed root, params that are not an object
-- of at most 64 KiB, inputs that are not an array of at most 100 strings of
-- at most 1000 characters; a record whose output or inputs do not match the
-- request, naming the job and what differs (all DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.job_completion_record(p_ids bigint[], p_tokens uuid[], p_assets text[], p_kinds text[],
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

-- job_completion_required refuses (DK010), at commit, a job with a
-- requested output that its holder completed without a completion record
-- under the completing claim's token.
-- +goose StatementBegin
CREATE FUNCTION docket.job_completion_required() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM docket.job_completions c WHERE c.job_id = NEW.id AND c.claim_token = NEW.outcome_token) THEN
        RAISE EXCEPTION 'job % requests output %: its completion must record the output it produced (docket.job_completion_record)',
            NEW.id, quote_literal(NEW.requested_output) USING ERRCODE = 'DK010';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER jobs_completion_recorded
    AFTER UPDATE ON docket.jobs
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NEW.state = 'succeeded' AND OLD.state = 'claimed' AND NEW.outcome_token IS NOT NULL
          AND NEW.requested_output IS NOT NULL)
    EXECUTE FUNCTION docket.job_completion_required();

-- job_completion_completed refuses (DK010), at commit, a completion record
-- of a job that did not succeed under the record's claim: a record made and
-- then followed by a failure, a release or nothing at all.
-- +goose StatementBegin
CREATE FUNCTION docket.job_completion_completed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM docket.jobs j
                   WHERE j.id = NEW.job_id AND j.state = 'succeeded' AND j.outcome_token = NEW.claim_token) THEN
        RAISE EXCEPTION 'job %: a completion record without its completion: complete the job under the claim that recorded it, in the same transaction',
            NEW.job_id USING ERRCODE = 'DK010';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER job_completions_completed
    AFTER INSERT ON docket.job_completions
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION docket.job_completion_completed();

INSERT INTO docket.api_functions (name, role) VALUES ('job_completion_record', 'app');

SELECT docket.apply_privileges();

-- +goose Down
DELETE FROM docket.api_functions WHERE name = 'job_completion_record';
DROP TABLE docket.job_completions;
DROP TRIGGER IF EXISTS jobs_completion_recorded ON docket.jobs;
DROP FUNCTION IF EXISTS docket.job_completion_completed();
DROP FUNCTION IF EXISTS docket.job_completion_required();
DROP FUNCTION IF EXISTS docket.job_completion_record(bigint[], uuid[], text[], text[], text[], jsonb[], jsonb[], text, timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_inputs_subsequence(text[], text[]);
DROP FUNCTION docket.job_enqueue_one(text,text,timestamp with time zone,text,text,smallint,jsonb,integer,text,timestamp with time zone,integer,boolean,boolean,interval,interval,interval,double precision,jsonb,text[],text,bigint,bigint,text,text,text);
DROP FUNCTION docket.job_enqueue_many(text,text,timestamp with time zone,text[],text[],smallint[],jsonb[],integer[],text[],timestamp with time zone[],integer[],boolean[],boolean[],interval[],interval[],interval[],double precision[],jsonb[],jsonb[],text[],bigint[],bigint[],text[],text[],text[]);
DROP FUNCTION docket.job_require_request(integer, text, text, text);
DROP FUNCTION docket.job_resolve_duplicate(text, text, text, jsonb, integer, text, text, text);
DROP VIEW docket.job_enqueued;
DROP TRIGGER jobs_request_immutable ON docket.jobs;
DROP TRIGGER jobs_request_check ON docket.jobs;
DROP FUNCTION docket.jobs_request_check();
ALTER TABLE docket.jobs DROP COLUMN target_root, DROP COLUMN requested_kind;
DROP DOMAIN docket.job_target_root;
DROP DOMAIN docket.job_output_kind;
DROP FUNCTION docket.valid_target_root(text);
DROP FUNCTION docket.valid_output_kind(text);

-- The view and the enqueue functions as 00004 made them.
CREATE VIEW docket.job_enqueued AS
SELECT false AS duplicate, j.* FROM docket.jobs j WHERE false;

-- +goose StatementBegin
CREATE FUNCTION docket.job_enqueue_many(
    p_project text, p_actor text, p_now timestamptz,
    p_kinds text[], p_queues text[], p_priorities smallint[], p_payloads jsonb[], p_payload_schemas integer[],
    p_keys text[], p_available_at timestamptz[], p_max_attempts integer[], p_repeatable boolean[],
    p_external boolean[], p_leases interval[], p_backoff_base interval[], p_backoff_cap interval[],
    p_backoff_jitter double precision[], p_params jsonb[], p_inputs jsonb[], p_outputs text[],
    p_lane_ids bigint[], p_case_ids bigint[], p_compensation_kinds text[])
RETURNS TABLE (ord integer, duplicate boolean, id bigint)
LANGUAGE plpgsql SET jit = off AS $$
#variable_conflict use_column
DECLARE
    n integer := cardinality(p_kinds);
    bad record;
    v_ids bigint[];
    v_inserted integer;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.job_require_batch('enqueue batch size', n, 100000);
    IF n = ALL (ARRAY[cardinality(p_queues), cardinality(p_priorities), cardinality(p_payloads),
                      cardinality(p_payload_schemas), cardinality(p_keys), cardinality(p_available_at),
                      cardinality(p_max_attempts), cardinality(p_repeatable), cardinality(p_external),
                      cardinality(p_leases), cardinality(p_backoff_base), cardinality(p_backoff_cap),
                      cardinality(p_backoff_jitter), cardinality(p_params), cardinality(p_inputs),
                      cardinality(p_outputs), cardinality(p_lane_ids), cardinality(p_case_ids),
                      cardinality(p_compensation_kinds)]) IS NOT TRUE THEN
        RAISE EXCEPTION 'invalid enqueue batch: every field array must have % elements', n
            USING ERRCODE = 'DK010';
    END IF;
    IF NOT docket.grant_check(p_actor, p_project, 'job.create') THEN
        RAISE EXCEPTION '% may not create jobs in project %: it needs an explicit job.create grant', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;

    -- Early, named refusals for the common mistakes; the table's CHECKs
    -- remain the arbiter.
    SELECT x.i, x.kind, x.queue, x.payload, x.max_attempts INTO bad
    FROM unnest(p_kinds, p_queues, p_payloads, p_max_attempts) WITH ORDINALITY AS x(kind, queue, payload, max_attempts, i)
    WHERE x.kind IS NULL OR NOT docket.valid_job_kind(x.kind)
       OR x.queue IS NULL OR NOT docket.valid_queue(x.queue)
       OR x.payload IS NULL
       OR x.max_attempts IS NULL OR x.max_attempts NOT BETWEEN 1 AND 100
    LIMIT 1;
    IF FOUND THEN
        PERFORM docket.job_require_spec(bad.i::integer, bad.kind, bad.queue, bad.payload, bad.max_attempts);
    END IF;

    v_ids := ARRAY(SELECT nextval('docket.jobs_id_seq') FROM generate_series(1, n));
    WITH inserted AS (
        INSERT INTO docket.jobs AS j (
            id, project, kind, queue, priority, payload, payload_schema, params, inputs, requested_output,
            lane_id, case_id, idempotency_key, compensation_kind, external, repeatable, available_at,
            max_attempts, lease, backoff_base, backoff_cap, backoff_jitter, created_by, created_at, updated_at)
        OVERRIDING SYSTEM VALUE
        SELECT x.new_id, p_project, x.kind, x.queue, x.priority, x.payload, x.payload_schema,
               nullif(x.params, 'null'::jsonb),
               CASE WHEN x.inputs IS NULL OR x.inputs = 'null'::jsonb THEN '{}'::text[]
                    ELSE ARRAY(SELECT jsonb_array_elements_text(x.inputs)) END,
               nullif(x.output, ''), nullif(x.lane_id, 0), nullif(x.case_id, 0), nullif(x.key, ''),
               nullif(x.compensation_kind, ''), x.external, x.repeatable, coalesce(x.available_at, p_now),
               x.max_attempts, x.lease, x.backoff_base, x.backoff_cap, x.backoff_jitter, p_actor, p_now, p_now
        FROM unnest(v_ids, p_kinds, p_queues, p_priorities, p_payloads, p_payload_schemas, p_keys, p_available_at,
                    p_max_attempts, p_repeatable, p_external, p_leases, p_backoff_base, p_backoff_cap,
                    p_backoff_jitter, p_params, p_inputs, p_outputs, p_lane_ids, p_case_ids, p_compensation_kinds)
             AS x(new_id, kind, queue, priority, payload, payload_schema, key, available_at, max_attempts,
                  repeatable, external, lease, backoff_base, backoff_cap, backoff_jitter, params,
                  inputs, output, lane_id, case_id, compensation_kind)
        ON CONFLICT (project, kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING j.id
    )
    SELECT count(*) INTO v_inserted FROM inserted;
    IF v_inserted = n THEN
        RETURN QUERY SELECT x.i::integer, false, x.id FROM unnest(v_ids) WITH ORDINALITY AS x(id, i);
    ELSE
        -- A statement of its own, so it sees the rows the INSERT made and
        -- those concurrent enqueues committed; each element not inserted
        -- names the job that holds its key.
        RETURN QUERY
        SELECT x.i::integer, j.id IS NULL,
               coalesce(j.id, docket.job_resolve_duplicate(p_project, p_kinds[x.i], p_keys[x.i],
                                                           p_payloads[x.i], p_payload_schemas[x.i]))
        FROM unnest(v_ids) WITH ORDINALITY AS x(id, i)
        LEFT JOIN docket.jobs j ON j.id = x.id
        ORDER BY x.i;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION docket.job_enqueue_one(
    p_project text, p_actor text, p_now timestamptz,
    p_kind text, p_queue text, p_priority smallint, p_payload jsonb, p_payload_schema integer,
    p_key text, p_available_at timestamptz, p_max_attempts integer, p_repeatable boolean,
    p_external boolean, p_lease interval, p_backoff_base interval, p_backoff_cap interval,
    p_backoff_jitter double precision, p_params jsonb, p_inputs text[], p_output text,
    p_lane_id bigint, p_case_id bigint, p_compensation_kind text)
RETURNS SETOF docket.job_enqueued
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
    v_id bigint;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    IF NOT docket.grant_check(p_actor, p_project, 'job.create') THEN
        RAISE EXCEPTION '% may not create jobs in project %: it needs an explicit job.create grant', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    PERFORM docket.job_require_spec(1, p_kind, p_queue, p_payload, p_max_attempts);
    INSERT INTO docket.jobs AS j (
        project, kind, queue, priority, payload, payload_schema, params, inputs, requested_output,
        lane_id, case_id, idempotency_key, compensation_kind, external, repeatable, available_at,
        max_attempts, lease, backoff_base, backoff_cap, backoff_jitter, created_by, created_at, updated_at)
    VALUES (p_project, p_kind, p_queue, p_priority, p_payload, p_payload_schema, nullif(p_params, 'null'::jsonb),
            coalesce(p_inputs, '{}'), nullif(p_output, ''), nullif(p_lane_id, 0), nullif(p_case_id, 0),
            nullif(p_key, ''), nullif(p_compensation_kind, ''), p_external, p_repeatable,
            coalesce(p_available_at, p_now), p_max_attempts, p_lease, p_backoff_base, p_backoff_cap,
            p_backoff_jitter, p_actor, p_now, p_now)
    ON CONFLICT (project, kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING * INTO v;
    IF FOUND THEN
        RETURN QUERY SELECT false, (v).*;
        RETURN;
    END IF;
    v_id := docket.job_resolve_duplicate(p_project, p_kind, p_key, p_payload, p_payload_schema);
    SELECT * INTO v FROM docket.jobs WHERE id = v_id;
    RETURN QUERY SELECT true, (v).*;
END
$$;
-- +goose StatementEnd

SELECT docket.apply_privileges();
