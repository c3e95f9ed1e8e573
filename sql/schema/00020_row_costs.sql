-- +goose Up
-- Per-statement and per-event costs of a job's moves that the rules do not
-- need. No rule, event, hash or grant check changes: the same rows are
-- refused with the same SQLSTATEs and constraint names, and every digest is
-- byte for byte the one before.
--
--   * Eight of the ten table CHECK constraints of docket.jobs, those that
--     tie a job's state to its other columns, are checked by the statement
--     triggers, set-based, in the pass they already make over the rows a
--     statement wrote. Postgres reads a table's CHECK constraints from their
--     stored text and plans them again in every INSERT and UPDATE statement:
--     the ten cost about 85 microseconds of server time per statement, an
--     eighth of a one-job enqueue, and as much again in every one-job renew,
--     release, fail or cancel. docket.job_row_rule, inlined into each
--     trigger's pass, names the first of the eight a row breaks, in the order
--     Postgres checked them (by name), and the trigger raises 23514 with that
--     constraint name, as the CHECK did. The two that keep time from running
--     backwards in a job's record (jobs_finished_not_before_created,
--     jobs_updated_not_before_created) stay CHECKs, so they hold even for a
--     writer that disables the triggers.
--     jobs_request_check, a trigger of its own with one query over the new
--     jobs, joins jobs_record_insert's pass the same way.
--   * jobs_record_update's event insert read the outcome digest from a
--     subquery that the planner flattened, so each event's outcome text and
--     SHA-256 were computed twice (once for the column, once inside the
--     chain hash), as were its detail and revision. The subquery is now a
--     fence (OFFSET 0): three digests per event become two.
--   * job_outcome and job_event_hash build their canonical text by
--     concatenation rather than with jsonb_build_array(...)::text: the same
--     bytes (strings through to_json, which escapes as jsonb does; numbers
--     and nulls as jsonb prints them; ", " between elements), about a
--     microsecond less per digest. TestEventHashIsTheDocumentedFormula and
--     TestOutcomeIsTheDocumentedFormula compare them with the documented
--     jsonb formula.
--   * jobs_record_update runs its wake-up query only when a row was queued
--     again: a claim or a completion never is, and the query cost about 30
--     microseconds per statement. jobs_record_insert finds the queues to wake
--     in the statement that writes the events, and wakes them with plain
--     calls: 25 microseconds less of a one-job enqueue.
--   * job_complete_many and job_take keep one plan a session, as the claims
--     and the transition trigger do (00017): with few jobs a call (a claim
--     by id takes one), Postgres judged their custom plans cheaper than the
--     generic one and planned the completion's and the take's UPDATE again
--     at every call (about 100 microseconds each). The generic plans are the
--     ones wanted at every size: each job by primary key.
--
-- A writer that disables the triggers (the owner, by ALTER TABLE ...
-- DISABLE TRIGGER, or a superuser's session_replication_role) is held by the
-- eight rules as it was by the job machine's moves: not at all, and what it
-- writes is caught as docs/security.md says.

-- job_row_rule names the first rule of docket.jobs that one job row breaks,
-- NULL when it breaks none. The rules, by name (a rule whose expression is
-- NULL holds, as a CHECK's does):
--     jobs_attempts_range               0 <= attempts <= max_attempts
--     jobs_backoff_cap_range            backoff_base <= backoff_cap <= 7 days
--     jobs_claimed_holds_lease          a job is claimed exactly when it holds a
--                                       token, holder, claim instant and lease
--                                       expiry, all four
--     jobs_lease_after_claim            lease_expires_at > claimed_at
--     jobs_outcome_token_only_finished  only a finished job has an outcome token
--     jobs_queued_has_attempts_left     a queued job has an attempt left
--     jobs_result_only_succeeded        only a succeeded job has a result
--     jobs_terminal_finished            a job has finished_at exactly when it
--                                       is terminal
-- It takes the columns, not the row, so the planner inlines it and no copy
-- of the row is built.
CREATE FUNCTION docket.job_row_rule(p_state text, p_attempts integer, p_max_attempts integer,
                                    p_backoff_base interval, p_backoff_cap interval,
                                    p_claim_token uuid, p_claimed_by text, p_claimed_at timestamptz,
                                    p_lease_expires_at timestamptz, p_result jsonb, p_outcome_token uuid,
                                    p_finished_at timestamptz)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN NOT (p_attempts BETWEEN 0 AND p_max_attempts) THEN 'jobs_attempts_range'
    WHEN NOT (p_backoff_cap >= p_backoff_base AND p_backoff_cap <= '7 days'::interval) THEN 'jobs_backoff_cap_range'
    WHEN NOT ((p_state = 'claimed') = (p_claim_token IS NOT NULL AND p_claimed_by IS NOT NULL
                                       AND p_claimed_at IS NOT NULL AND p_lease_expires_at IS NOT NULL))
        THEN 'jobs_claimed_holds_lease'
    WHEN NOT (p_lease_expires_at > p_claimed_at) THEN 'jobs_lease_after_claim'
    WHEN NOT (p_outcome_token IS NULL OR p_finished_at IS NOT NULL) THEN 'jobs_outcome_token_only_finished'
    WHEN NOT (p_state <> 'queued' OR p_attempts < p_max_attempts) THEN 'jobs_queued_has_attempts_left'
    WHEN NOT (p_result IS NULL OR p_state = 'succeeded') THEN 'jobs_result_only_succeeded'
    WHEN NOT ((p_state IN ('succeeded', 'failed', 'dead', 'cancelled')) = (p_finished_at IS NOT NULL))
        THEN 'jobs_terminal_finished'
END;

-- job_row_refuse raises the check violation (23514) of rule p_rule, a name
-- job_row_rule returns or jobs_request_names_asset, for job p_id, in the
-- words Postgres uses for a CHECK constraint's, and says what the rule asks.
-- +goose StatementBegin
CREATE FUNCTION docket.job_row_refuse(p_id bigint, p_rule text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'new row for relation "jobs" violates check constraint "%" (job %: %)', p_rule, p_id, CASE p_rule
            WHEN 'jobs_attempts_range' THEN 'attempts must be between 0 and max_attempts'
            WHEN 'jobs_backoff_cap_range' THEN 'backoff_cap must be at least backoff_base and at most 7 days'
            WHEN 'jobs_claimed_holds_lease' THEN
                'a job is claimed exactly when it holds a claim token, holder, claim instant and lease expiry, all four'
            WHEN 'jobs_lease_after_claim' THEN 'a lease expires after its claim'
            WHEN 'jobs_outcome_token_only_finished' THEN 'only a finished job has an outcome token'
            WHEN 'jobs_queued_has_attempts_left' THEN 'a queued job has an attempt left'
            WHEN 'jobs_result_only_succeeded' THEN 'only a succeeded job has a result'
            WHEN 'jobs_terminal_finished' THEN 'a job has finished_at exactly when it is in a terminal state'
            WHEN 'jobs_request_names_asset' THEN 'a requested output kind or target root names no asset'
        END
        USING ERRCODE = '23514', CONSTRAINT = p_rule, TABLE = 'jobs', SCHEMA = 'docket';
END
$$;
-- +goose StatementEnd

-- The digests, by concatenation: the bytes jsonb_build_array(...)::text made.
CREATE OR REPLACE FUNCTION docket.job_outcome(p_state text, p_result jsonb, p_diagnostic text, p_claimed_by text,
                                              p_claim_token uuid, p_lease_generation bigint, p_attempts integer)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN sha256(textsend('[' || coalesce(to_json(p_state)::text, 'null')
    || ', ' || coalesce(p_result::text, 'null')
    || ', ' || coalesce(to_json(p_diagnostic)::text, 'null')
    || ', ' || coalesce(to_json(p_claimed_by)::text, 'null')
    || ', ' || coalesce('"' || p_claim_token::text || '"', 'null')
    || ', ' || coalesce(p_lease_generation::text, 'null')
    || ', ' || coalesce(p_attempts::text, 'null') || ']'));

CREATE OR REPLACE FUNCTION docket.job_event_hash(p_prev bytea, p_job_id bigint, p_seq integer, p_from text, p_to text,
                                                 p_actor text, p_at timestamptz, p_attempt integer, p_detail text,
                                                 p_lease_until timestamptz, p_outcome bytea, p_revision text)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN sha256(p_prev || textsend('[' || coalesce(p_job_id::text, 'null')
    || ', ' || coalesce(p_seq::text, 'null')
    || ', ' || coalesce(to_json(p_from)::text, 'null')
    || ', ' || coalesce(to_json(p_to)::text, 'null')
    || ', ' || coalesce(to_json(p_actor)::text, 'null')
    || ', ' || coalesce(docket.epoch_micros(p_at)::text, 'null')
    || ', ' || coalesce(p_attempt::text, 'null')
    || ', ' || coalesce(to_json(p_detail)::text, 'null')
    || ', ' || coalesce(docket.epoch_micros(p_lease_until)::text, 'null')
    || ', ' || coalesce('"' || encode(p_outcome, 'hex') || '"', 'null')
    || coalesce(', ' || to_json(p_revision)::text, '') || ']'));

-- The form without a revision is the form with none.
CREATE OR REPLACE FUNCTION docket.job_event_hash(p_prev bytea, p_job_id bigint, p_seq integer, p_from text, p_to text,
                                                 p_actor text, p_at timestamptz, p_attempt integer, p_detail text,
                                                 p_lease_until timestamptz, p_outcome bytea)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN docket.job_event_hash(p_prev, p_job_id, p_seq, p_from, p_to, p_actor, p_at, p_attempt, p_detail,
                             p_lease_until, p_outcome, NULL::text);

-- jobs_record_insert as before (00004), and, first, the rules of each new
-- row: job_row_rule's, then what jobs_request_check refused (a check
-- violation of jobs_request_names_asset): a job created with a requested
-- kind or target root and no asset. The events and the queues to wake are
-- one statement, the wake-ups plain calls: one statement's start-up less
-- for every INSERT of jobs.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.jobs_record_insert() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    bad record;
    v_actor text;
    v_at    timestamptz;
    v_zero  bytea := decode(repeat('00', 32), 'hex');
    v_due   text[];
    v_queue text;
BEGIN
    -- Every rule in one pass: the first job that breaks one, and which.
    SELECT x.* INTO bad FROM (
        SELECT n.id, n.project, n.state, n.attempts, n.lease_generation, n.case_id, n.lane_id, p.status,
               coalesce(
                   docket.job_row_rule(n.state, n.attempts, n.max_attempts, n.backoff_base, n.backoff_cap, n.claim_token,
                                       n.claimed_by, n.claimed_at, n.lease_expires_at, n.result, n.outcome_token,
                                       n.finished_at),
                   CASE
                       WHEN n.requested_output IS NULL AND (n.requested_kind IS NOT NULL OR n.target_root IS NOT NULL)
                           THEN 'jobs_request_names_asset'
                       WHEN s.initial IS NOT TRUE OR n.attempts <> 0 OR n.lease_generation <> 0 THEN 'birth'
                       WHEN p.name IS NULL THEN 'project'
                       WHEN p.status <> 'active' AND n.case_id IS NULL AND n.lane_id IS NULL THEN 'status'
                       WHEN n.case_id IS NOT NULL AND NOT EXISTS (
                           SELECT 1 FROM docket.cases c WHERE c.id = n.case_id AND c.project = n.project) THEN 'case'
                       WHEN n.lane_id IS NOT NULL AND NOT EXISTS (
                           SELECT 1 FROM docket.lanes l WHERE l.id = n.lane_id AND l.project = n.project) THEN 'lane'
                   END) AS why
        FROM new_jobs n
        LEFT JOIN docket.machine_states s ON s.machine = 'job' AND s.state = n.state
        LEFT JOIN docket.projects p ON p.name = n.project
    ) x
    WHERE x.why IS NOT NULL
    LIMIT 1;
    IF FOUND THEN
        CASE bad.why
        WHEN 'birth' THEN
            RAISE EXCEPTION 'job %: a job is created in an initial state with no attempts and no lease, not % with % attempts and lease generation %',
                bad.id, bad.state, bad.attempts, bad.lease_generation
                USING ERRCODE = 'DK001';
        WHEN 'project' THEN
            RAISE EXCEPTION 'job %: project % does not exist', bad.id, quote_literal(bad.project)
                USING ERRCODE = '23503', CONSTRAINT = 'jobs_project_exists', TABLE = 'jobs', SCHEMA = 'docket';
        WHEN 'status' THEN
            RAISE EXCEPTION 'project % is %: it takes no new jobs but those of its open cases and lanes', bad.project, bad.status
                USING ERRCODE = 'DK009';
        WHEN 'case' THEN
            RAISE EXCEPTION 'job %: case % of project % does not exist', bad.id, bad.case_id, quote_literal(bad.project)
                USING ERRCODE = '23503', CONSTRAINT = 'jobs_case_fkey', TABLE = 'jobs', SCHEMA = 'docket';
        WHEN 'lane' THEN
            RAISE EXCEPTION 'job %: lane % of project % does not exist', bad.id, bad.lane_id, quote_literal(bad.project)
                USING ERRCODE = '23503', CONSTRAINT = 'jobs_lane_fkey', TABLE = 'jobs', SCHEMA = 'docket';
        ELSE
            PERFORM docket.job_row_refuse(bad.id, bad.why);
        END CASE;
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    -- Each job's first event, and, in the same statement, the queues that
    -- have a job due now.
    WITH recorded AS (
        INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until,
                                       outcome, prev_hash, hash)
        SELECT n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, NULL, NULL, b.outcome, v_zero,
               docket.job_event_hash(v_zero, n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, NULL, NULL, b.outcome)
        FROM new_jobs n
        -- What a job is born holding: nothing. One digest per state born in.
        JOIN (SELECT DISTINCT ON (m.state) m.state, docket.job_outcome(m.state, NULL, NULL, NULL, NULL, 0, 0) AS outcome
              FROM new_jobs m) b ON b.state = n.state
    )
    SELECT array_agg(DISTINCT n.queue) FILTER (WHERE NOT n.external AND n.available_at <= v_at) INTO v_due
    FROM new_jobs n;
    -- Wake their workers.
    FOREACH v_queue IN ARRAY coalesce(v_due, '{}') LOOP
        PERFORM pg_notify('docket_jobs', v_queue);
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

DROP TRIGGER jobs_request_check ON docket.jobs;
DROP FUNCTION docket.jobs_request_check();

-- jobs_record_update as before (00015), and, first, job_row_rule's rules of
-- each row the UPDATE wrote; each event's outcome, detail and revision
-- computed once (the OFFSET 0 keeps the planner from copying their
-- expressions into the chain hash's); the wake-up query only when a job was
-- queued again.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.jobs_record_update() RETURNS trigger
LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_actor  text;
    v_at     timestamptz;
    v_moved  boolean;
    v_queued boolean;
    bad      record;
BEGIN
    SELECT x.* INTO bad FROM (
        SELECT o.id, o.state AS from_state, n.state AS to_state, o.attempts AS from_attempts, n.attempts AS to_attempts,
               o.lease_generation AS from_generation, n.lease_generation AS to_generation,
               coalesce(
                   docket.job_row_rule(n.state, n.attempts, n.max_attempts, n.backoff_base, n.backoff_cap, n.claim_token,
                                       n.claimed_by, n.claimed_at, n.lease_expires_at, n.result, n.outcome_token,
                                       n.finished_at),
                   CASE
                       WHEN (n.state <> o.state OR n.lease_generation <> o.lease_generation) AND NOT EXISTS (
                           SELECT 1 FROM docket.machine_transitions t
                           WHERE t.machine = 'job' AND t.from_state = o.state AND t.to_state = n.state) THEN 'move'
                       WHEN n.revisions IS DISTINCT FROM o.revisions AND (o.state <> 'queued' OR n.state <> 'queued') THEN 'pin'
                       WHEN n.claimed_revision IS DISTINCT FROM o.claimed_revision AND n.lease_generation = o.lease_generation THEN 'revision'
                       WHEN n.state = 'claimed' AND (o.state <> 'claimed' OR n.lease_generation <> o.lease_generation) THEN
                           CASE
                               WHEN n.lease_generation <> o.lease_generation + 1 OR n.attempts <> o.attempts + 1 THEN 'claim_counts'
                               WHEN n.claim_token IS NOT DISTINCT FROM o.claim_token THEN 'claim_token'
                           END
                       WHEN n.attempts <> o.attempts OR n.lease_generation <> o.lease_generation THEN 'counts'
                       WHEN n.state = 'claimed' AND o.state = 'claimed' AND n.claim_token IS DISTINCT FROM o.claim_token THEN 'token'
                   END) AS why
        FROM old_jobs o JOIN new_jobs n ON n.id = o.id
    ) x
    WHERE x.why IS NOT NULL
    LIMIT 1;
    IF FOUND THEN
        CASE bad.why
        WHEN 'move' THEN
            PERFORM docket.machine_move('job', 'job ' || bad.id, bad.from_state, bad.to_state, true);
        WHEN 'claim_counts' THEN
            RAISE EXCEPTION 'job %: a claim counts one attempt and one lease generation (attempts % -> %, generation % -> %)',
                bad.id, bad.from_attempts, bad.to_attempts, bad.from_generation, bad.to_generation
                USING ERRCODE = 'DK001';
        WHEN 'claim_token' THEN
            RAISE EXCEPTION 'job %: a claim takes a fresh token: the previous holder''s must go stale', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'pin' THEN
            RAISE EXCEPTION 'job %: only a queued job that stays queued is pinned (it is % -> %)', bad.id, bad.from_state, bad.to_state
                USING ERRCODE = 'DK001';
        WHEN 'revision' THEN
            RAISE EXCEPTION 'job %: the revision of a claim changes only with a new claim', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'counts' THEN
            RAISE EXCEPTION 'job %: attempts and lease generation change only by a claim', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'token' THEN
            RAISE EXCEPTION 'job %: a new claim token needs a new lease generation', bad.id
                USING ERRCODE = 'DK001';
        ELSE
            PERFORM docket.job_row_refuse(bad.id, bad.why);
        END CASE;
    END IF;
    -- Whether the statement moved a job (else it records nothing), and
    -- whether it queued one again (else it wakes no worker).
    SELECT bool_or(n.state <> o.state OR n.lease_generation <> o.lease_generation OR n.revisions IS DISTINCT FROM o.revisions),
           bool_or(n.state = 'queued' AND (o.state <> 'queued' OR n.revisions IS DISTINCT FROM o.revisions) AND NOT n.external)
    INTO v_moved, v_queued
    FROM old_jobs o JOIN new_jobs n ON n.id = o.id;
    IF v_moved IS NOT TRUE THEN
        RETURN NULL;
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until, outcome,
                                   revision, prev_hash, hash)
    SELECT m.id, m.seq, m.from_state, m.to_state, v_actor, m.at, m.attempt, m.detail, m.lease_until, m.outcome,
           m.revision, m.prev_hash,
           docket.job_event_hash(m.prev_hash, m.id, m.seq, m.from_state, m.to_state, v_actor, m.at, m.attempt, m.detail,
                                 m.lease_until, m.outcome, m.revision)
    FROM (
        -- Time never runs backwards in a history: an event is recorded at
        -- the change context's instant, or at its predecessor's when the
        -- caller's clock is behind it.
        SELECT n.id, last.seq + 1 AS seq, greatest(v_at, last.at) AS at, o.state AS from_state, n.state AS to_state,
               n.attempts AS attempt,
               CASE
                   WHEN n.state = o.state AND n.lease_generation = o.lease_generation THEN
                       coalesce('pinned to revisions ' || array_to_string(n.revisions, ', '), 'unpinned: any revision may run it')
                   ELSE docket.job_event_detail(n.state, n.claimed_by, n.lease_generation, n.diagnostic)
               END AS detail,
               CASE WHEN n.state = 'claimed' THEN n.claimed_revision WHEN o.state = 'claimed' THEN o.claimed_revision END AS revision,
               n.lease_expires_at AS lease_until,
               docket.job_outcome(n.state, n.result, n.diagnostic, n.claimed_by, n.claim_token, n.lease_generation,
                                  n.attempts) AS outcome,
               last.hash AS prev_hash
        FROM old_jobs o
        JOIN new_jobs n ON n.id = o.id
        CROSS JOIN LATERAL (
            SELECT e.seq, e.at, e.hash FROM docket.job_events e
            WHERE e.job_id = n.id ORDER BY e.seq DESC LIMIT 1
        ) last
        WHERE n.state <> o.state OR n.lease_generation <> o.lease_generation OR n.revisions IS DISTINCT FROM o.revisions
        -- A fence: each column above is computed once, not again inside the hash.
        OFFSET 0
    ) m;
    -- Wake the workers of each queue that has a job queued again and due.
    IF v_queued THEN
        PERFORM pg_notify('docket_jobs', q.queue)
        FROM (SELECT DISTINCT n.queue FROM old_jobs o JOIN new_jobs n ON n.id = o.id
              WHERE n.state = 'queued' AND (o.state <> 'queued' OR n.revisions IS DISTINCT FROM o.revisions)
                AND NOT n.external AND n.available_at <= v_at) q;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

ALTER TABLE docket.jobs
    DROP CONSTRAINT jobs_attempts_range,
    DROP CONSTRAINT jobs_backoff_cap_range,
    DROP CONSTRAINT jobs_claimed_holds_lease,
    DROP CONSTRAINT jobs_lease_after_claim,
    DROP CONSTRAINT jobs_outcome_token_only_finished,
    DROP CONSTRAINT jobs_queued_has_attempts_left,
    DROP CONSTRAINT jobs_result_only_succeeded,
    DROP CONSTRAINT jobs_terminal_finished;

ALTER FUNCTION docket.job_complete_many(bigint[], uuid[], jsonb[], text, timestamptz, text[])
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION docket.job_take(bigint[], interval, text, timestamptz, text[], interval[], text[])
    SET plan_cache_mode = force_generic_plan;

-- A replaced function loses SECURITY DEFINER and its search_path: again.
SELECT docket.apply_privileges();

-- +goose Down
-- The constraints, triggers and functions as 00004, 00015, 00016 and 00017
-- made them.

ALTER FUNCTION docket.job_complete_many(bigint[], uuid[], jsonb[], text, timestamptz, text[])
    RESET plan_cache_mode;
ALTER FUNCTION docket.job_take(bigint[], interval, text, timestamptz, text[], interval[], text[])
    RESET plan_cache_mode;

ALTER TABLE docket.jobs
    ADD CONSTRAINT jobs_attempts_range CHECK (attempts BETWEEN 0 AND max_attempts),
    ADD CONSTRAINT jobs_queued_has_attempts_left CHECK (state <> 'queued' OR attempts < max_attempts),
    ADD CONSTRAINT jobs_claimed_holds_lease CHECK (
        (state = 'claimed') = (claim_token IS NOT NULL AND claimed_by IS NOT NULL
                               AND claimed_at IS NOT NULL AND lease_expires_at IS NOT NULL)),
    ADD CONSTRAINT jobs_lease_after_claim CHECK (lease_expires_at > claimed_at),
    ADD CONSTRAINT jobs_terminal_finished CHECK (
        (state IN ('succeeded', 'failed', 'dead', 'cancelled')) = (finished_at IS NOT NULL)),
    ADD CONSTRAINT jobs_result_only_succeeded CHECK (result IS NULL OR state = 'succeeded'),
    ADD CONSTRAINT jobs_outcome_token_only_finished CHECK (outcome_token IS NULL OR finished_at IS NOT NULL),
    ADD CONSTRAINT jobs_backoff_cap_range CHECK (backoff_cap >= backoff_base AND backoff_cap <= '7 days');

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.jobs_record_update() RETURNS trigger
LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_actor text;
    v_at    timestamptz;
    bad     record;
BEGIN
    SELECT x.* INTO bad FROM (
        SELECT o.id, o.state AS from_state, n.state AS to_state, o.attempts AS from_attempts, n.attempts AS to_attempts,
               o.lease_generation AS from_generation, n.lease_generation AS to_generation,
               CASE
                   WHEN (n.state <> o.state OR n.lease_generation <> o.lease_generation) AND NOT EXISTS (
                       SELECT 1 FROM docket.machine_transitions t
                       WHERE t.machine = 'job' AND t.from_state = o.state AND t.to_state = n.state) THEN 'move'
                   WHEN n.revisions IS DISTINCT FROM o.revisions AND (o.state <> 'queued' OR n.state <> 'queued') THEN 'pin'
                   WHEN n.claimed_revision IS DISTINCT FROM o.claimed_revision AND n.lease_generation = o.lease_generation THEN 'revision'
                   WHEN n.state = 'claimed' AND (o.state <> 'claimed' OR n.lease_generation <> o.lease_generation) THEN
                       CASE
                           WHEN n.lease_generation <> o.lease_generation + 1 OR n.attempts <> o.attempts + 1 THEN 'claim_counts'
                           WHEN n.claim_token IS NOT DISTINCT FROM o.claim_token THEN 'claim_token'
                       END
                   WHEN n.attempts <> o.attempts OR n.lease_generation <> o.lease_generation THEN 'counts'
                   WHEN n.state = 'claimed' AND o.state = 'claimed' AND n.claim_token IS DISTINCT FROM o.claim_token THEN 'token'
               END AS why
        FROM old_jobs o JOIN new_jobs n ON n.id = o.id
    ) x
    WHERE x.why IS NOT NULL
    LIMIT 1;
    IF FOUND THEN
        CASE bad.why
        WHEN 'move' THEN
            PERFORM docket.machine_move('job', 'job ' || bad.id, bad.from_state, bad.to_state, true);
        WHEN 'claim_counts' THEN
            RAISE EXCEPTION 'job %: a claim counts one attempt and one lease generation (attempts % -> %, generation % -> %)',
                bad.id, bad.from_attempts, bad.to_attempts, bad.from_generation, bad.to_generation
                USING ERRCODE = 'DK001';
        WHEN 'claim_token' THEN
            RAISE EXCEPTION 'job %: a claim takes a fresh token: the previous holder''s must go stale', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'pin' THEN
            RAISE EXCEPTION 'job %: only a queued job that stays queued is pinned (it is % -> %)', bad.id, bad.from_state, bad.to_state
                USING ERRCODE = 'DK001';
        WHEN 'revision' THEN
            RAISE EXCEPTION 'job %: the revision of a claim changes only with a new claim', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'counts' THEN
            RAISE EXCEPTION 'job %: attempts and lease generation change only by a claim', bad.id
                USING ERRCODE = 'DK001';
        ELSE
            RAISE EXCEPTION 'job %: a new claim token needs a new lease generation', bad.id
                USING ERRCODE = 'DK001';
        END CASE;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM old_jobs o JOIN new_jobs n ON n.id = o.id
        WHERE n.state <> o.state OR n.lease_generation <> o.lease_generation OR n.revisions IS DISTINCT FROM o.revisions
    ) THEN
        RETURN NULL;
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until, outcome,
                                   revision, prev_hash, hash)
    SELECT m.id, m.seq, m.from_state, m.to_state, v_actor, m.at, m.attempt, m.detail, m.lease_until, m.outcome,
           m.revision, m.prev_hash,
           docket.job_event_hash(m.prev_hash, m.id, m.seq, m.from_state, m.to_state, v_actor, m.at, m.attempt, m.detail,
                                 m.lease_until, m.outcome, m.revision)
    FROM (
        SELECT n.id, last.seq + 1 AS seq, greatest(v_at, last.at) AS at, o.state AS from_state, n.state AS to_state,
               n.attempts AS attempt,
               CASE
                   WHEN n.state = o.state AND n.lease_generation = o.lease_generation THEN
                       coalesce('pinned to revisions ' || array_to_string(n.revisions, ', '), 'unpinned: any revision may run it')
                   ELSE docket.job_event_detail(n.state, n.claimed_by, n.lease_generation, n.diagnostic)
               END AS detail,
               CASE WHEN n.state = 'claimed' THEN n.claimed_revision WHEN o.state = 'claimed' THEN o.claimed_revision END AS revision,
               n.lease_expires_at AS lease_until,
               docket.job_outcome(n.state, n.result, n.diagnostic, n.claimed_by, n.claim_token, n.lease_generation,
                                  n.attempts) AS outcome,
               last.hash AS prev_hash
        FROM old_jobs o
        JOIN new_jobs n ON n.id = o.id
        CROSS JOIN LATERAL (
            SELECT e.seq, e.at, e.hash FROM docket.job_events e
            WHERE e.job_id = n.id ORDER BY e.seq DESC LIMIT 1
        ) last
        WHERE n.state <> o.state OR n.lease_generation <> o.lease_generation OR n.revisions IS DISTINCT FROM o.revisions
    ) m;
    PERFORM pg_notify('docket_jobs', q.queue)
    FROM (SELECT DISTINCT n.queue FROM old_jobs o JOIN new_jobs n ON n.id = o.id
          WHERE n.state = 'queued' AND (o.state <> 'queued' OR n.revisions IS DISTINCT FROM o.revisions)
            AND NOT n.external AND n.available_at <= v_at) q;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.jobs_record_insert() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    bad record;
    v_actor text;
    v_at    timestamptz;
    v_zero  bytea := decode(repeat('00', 32), 'hex');
BEGIN
    SELECT x.* INTO bad FROM (
        SELECT n.id, n.project, n.state, n.attempts, n.lease_generation, n.case_id, n.lane_id, p.status,
               CASE
                   WHEN s.initial IS NOT TRUE OR n.attempts <> 0 OR n.lease_generation <> 0 THEN 'birth'
                   WHEN p.name IS NULL THEN 'project'
                   WHEN p.status <> 'active' AND n.case_id IS NULL AND n.lane_id IS NULL THEN 'status'
                   WHEN n.case_id IS NOT NULL AND NOT EXISTS (
                       SELECT 1 FROM docket.cases c WHERE c.id = n.case_id AND c.project = n.project) THEN 'case'
                   WHEN n.lane_id IS NOT NULL AND NOT EXISTS (
                       SELECT 1 FROM docket.lanes l WHERE l.id = n.lane_id AND l.project = n.project) THEN 'lane'
               END AS why
        FROM new_jobs n
        LEFT JOIN docket.machine_states s ON s.machine = 'job' AND s.state = n.state
        LEFT JOIN docket.projects p ON p.name = n.project
    ) x
    WHERE x.why IS NOT NULL
    LIMIT 1;
    IF FOUND THEN
        CASE bad.why
        WHEN 'birth' THEN
            RAISE EXCEPTION 'job %: a job is created in an initial state with no attempts and no lease, not % with % attempts and lease generation %',
                bad.id, bad.state, bad.attempts, bad.lease_generation
                USING ERRCODE = 'DK001';
        WHEN 'project' THEN
            RAISE EXCEPTION 'job %: project % does not exist', bad.id, quote_literal(bad.project)
                USING ERRCODE = '23503', CONSTRAINT = 'jobs_project_exists', TABLE = 'jobs', SCHEMA = 'docket';
        WHEN 'status' THEN
            RAISE EXCEPTION 'project % is %: it takes no new jobs but those of its open cases and lanes', bad.project, bad.status
                USING ERRCODE = 'DK009';
        WHEN 'case' THEN
            RAISE EXCEPTION 'job %: case % of project % does not exist', bad.id, bad.case_id, quote_literal(bad.project)
                USING ERRCODE = '23503', CONSTRAINT = 'jobs_case_fkey', TABLE = 'jobs', SCHEMA = 'docket';
        ELSE
            RAISE EXCEPTION 'job %: lane % of project % does not exist', bad.id, bad.lane_id, quote_literal(bad.project)
                USING ERRCODE = '23503', CONSTRAINT = 'jobs_lane_fkey', TABLE = 'jobs', SCHEMA = 'docket';
        END CASE;
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until, outcome,
                                   prev_hash, hash)
    SELECT n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, NULL, NULL, b.outcome, v_zero,
           docket.job_event_hash(v_zero, n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, NULL, NULL, b.outcome)
    FROM new_jobs n
    JOIN (SELECT DISTINCT ON (m.state) m.state, docket.job_outcome(m.state, NULL, NULL, NULL, NULL, 0, 0) AS outcome
          FROM new_jobs m) b ON b.state = n.state;
    PERFORM pg_notify('docket_jobs', q.queue)
    FROM (SELECT DISTINCT n.queue FROM new_jobs n WHERE NOT n.external AND n.available_at <= v_at) q;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE FUNCTION docket.job_event_hash(p_prev bytea, p_job_id bigint, p_seq integer, p_from text, p_to text,
                                                 p_actor text, p_at timestamptz, p_attempt integer, p_detail text,
                                                 p_lease_until timestamptz, p_outcome bytea)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN sha256(p_prev || textsend(jsonb_build_array(
           p_job_id, p_seq, p_from, p_to, p_actor, docket.epoch_micros(p_at), p_attempt, p_detail,
           docket.epoch_micros(p_lease_until), encode(p_outcome, 'hex'))::text));

CREATE OR REPLACE FUNCTION docket.job_event_hash(p_prev bytea, p_job_id bigint, p_seq integer, p_from text, p_to text,
                                                 p_actor text, p_at timestamptz, p_attempt integer, p_detail text,
                                                 p_lease_until timestamptz, p_outcome bytea, p_revision text)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN sha256(p_prev || textsend((jsonb_build_array(
           p_job_id, p_seq, p_from, p_to, p_actor, docket.epoch_micros(p_at), p_attempt, p_detail,
           docket.epoch_micros(p_lease_until), encode(p_outcome, 'hex'))
       || CASE WHEN p_revision IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(p_revision) END)::text));

CREATE OR REPLACE FUNCTION docket.job_outcome(p_state text, p_result jsonb, p_diagnostic text, p_claimed_by text,
                                              p_claim_token uuid, p_lease_generation bigint, p_attempts integer)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN sha256(textsend(jsonb_build_array(
           p_state, p_result, p_diagnostic, p_claimed_by, p_claim_token, p_lease_generation, p_attempts)::text));


DROP FUNCTION docket.job_row_refuse(bigint, text);
DROP FUNCTION docket.job_row_rule(text, integer, integer, interval, interval, uuid, text, timestamptz, timestamptz,
                                  jsonb, uuid, timestamptz);

SELECT docket.apply_privileges();
