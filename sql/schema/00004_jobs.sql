-- Jobs: durable knowledge that work is wanted, held, done, failed or in doubt.
--
-- A job moves along docket.job_transitions only. Whoever changes docket.jobs
-- (a docket function or a hand-written UPDATE in psql) is held to that table by
-- the BEFORE triggers, and every move appends a hash-chained docket.job_events
-- row through the AFTER triggers, attributed to the change context
-- (docket.set_context). The lease protocol (claim, renew, release, complete,
-- fail) lives in the functions below; each states its contract above it.
--
-- Bounds (also in Go, package jobs):
--   payload and result     1 MiB of JSON text each; params 64 KiB
--   kind                   1-128 characters; queue 1-63
--   priority               1 (first) .. 4 (last), as River's
--   max_attempts           1..100 (default 5)
--   lease                  1 second .. 24 hours (default 5 minutes)
--   backoff                base 1 ms .. 24 hours, cap base .. 7 days, jitter 0..1
--   peer retry_after       clamped to 0 .. 24 hours
--   diagnostic             4096 characters (longer ones are cut, marked with …)
--   event detail           1000 characters
--   claim batch            1..1000; sweep batch 1..10000; enqueue batch 1..100000
--
-- Work arrives by notification: every statement that makes jobs due now
-- (created, or queued again) notifies channel docket_jobs with each queue
-- it touched, in the transaction that made them, so a worker (package
-- worker) learns of a job when it commits, whichever path made it: the Go
-- API, plain SQL, a case's continuation, a schedule. The worker claims a
-- batch of a queue's due jobs in one statement (job_claim_queue), runs their
-- handlers, and settles the successes in one statement (job_complete_many).
-- River's tables live in schema docket too, but no docket job needs a River
-- row.
--
-- History that resists rewriting:
--   * each job event records what the transition left the job holding: the
--     lease's expiry (lease_until) and a digest (outcome) of its state,
--     result, diagnostic, holder, claim token, lease generation and attempts,
--     and its hash covers both. job_verify checks that the job still holds
--     what its last event says, so a result, diagnostic or holder rewritten
--     since, by any means, is reported. (The lease's expiry is not compared
--     with the job: a renewal moves it and records no event.);
--   * job_verify judges every transition against the job machine as
--     migrated, written into job_machine_move, not against docket.job_states
--     and docket.job_transitions, which it also compares with the machine
--     and reports when they differ;
--   * time never runs backwards in a history: an event is recorded at the
--     later of the change context's instant and its predecessor's, and a job
--     never finishes before it was created;
--   * docket.job_chain_heads lists each job's last event hash: exported
--     somewhere the owner cannot write, it lets an auditor show later that a
--     history was not rebuilt (docs/security.md).

-- +goose Up


-- Names and bounds ------------------------------------------------------------

-- A job kind: dot-separated segments of [a-z0-9_-], each starting with a letter,
-- at most 128 characters, e.g. billing.invoice.
-- Not STRICT, so the planner can inline it into CHECKs and queries.
CREATE FUNCTION docket.valid_job_kind(p_kind text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_kind) <= 128
   AND p_kind ~ '^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$';

-- A queue: 1-63 characters of [a-z0-9_-], starting with a letter or digit. Every
-- such name is also a valid River queue name. (Lengths are checked apart from
-- the pattern: Postgres' regex engine is slow on bounded repeats such as
-- {0,62}, and these rules run in CHECKs on every write of a job.)
CREATE FUNCTION docket.valid_queue(p_queue text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_queue) <= 63 AND p_queue ~ '^[a-z0-9][a-z0-9_-]*$';

-- job_backoff is the delay before retry number p_attempt (1 = the delay after
-- the first failed attempt): p_base doubled per attempt, capped at p_cap, then
-- shortened by up to p_jitter of itself using p_draw in [0, 1). It is computed
-- in whole microseconds with IEEE doubles, exactly as jobs.RetryPolicy.Backoff.
CREATE FUNCTION docket.job_backoff(p_attempt integer, p_base interval, p_cap interval,
                                   p_jitter double precision, p_draw double precision)
RETURNS interval
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN make_interval(secs => floor(
           (least(extract(epoch FROM p_cap) * 1000000,
                  extract(epoch FROM p_base) * 1000000 * power(2::numeric, least(greatest(p_attempt, 1), 64) - 1))
           )::double precision
           -- A product below 2^-54 leaves 1 - x at exactly 1 in IEEE arithmetic,
           -- as in Go; Postgres would refuse it as an underflow instead.
           * (1 - CASE WHEN p_jitter < 1e-20::double precision OR p_draw < 1e-20::double precision THEN 0
                       ELSE p_jitter * p_draw END)
       ) / 1000000);

-- job_inputs_bounded: at most 100 input references, none NULL, none over
-- 1000 characters.
-- plpgsql, so most jobs, which name no inputs, pay for one comparison.
-- +goose StatementBegin
CREATE FUNCTION docket.job_inputs_bounded(p_inputs text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF cardinality(p_inputs) = 0 THEN
        RETURN true;
    END IF;
    RETURN cardinality(p_inputs) <= 100
       AND NOT EXISTS (SELECT 1 FROM unnest(p_inputs) x WHERE x IS NULL OR length(x) > 1000);
END
$$;
-- +goose StatementEnd

-- Domains: the rules of values a job carries. A domain's check runs when a
-- value is written to the column, and not again when an UPDATE of other
-- columns copies it, so a claim or a completion does not re-check a job's
-- kind, queue, creator or payload; Postgres also prepares domain checks once
-- per connection rather than once per statement.
CREATE DOMAIN docket.job_kind AS text CONSTRAINT job_kind_valid CHECK (docket.valid_job_kind(VALUE));
CREATE DOMAIN docket.job_queue AS text CONSTRAINT job_queue_valid CHECK (docket.valid_queue(VALUE));
CREATE DOMAIN docket.job_json AS jsonb CONSTRAINT job_json_size CHECK (docket.json_size(VALUE) <= 1048576);
-- What a job is never changes (jobs_columns_immutable), so the rules of its
-- parameters, inputs, requested output and idempotency key are domains too:
-- checked when a job is created, not again by every transition, as a table
-- CHECK would be.
CREATE DOMAIN docket.job_params AS jsonb
    CONSTRAINT jobs_params_object CHECK (jsonb_typeof(VALUE) = 'object' AND docket.json_size(VALUE) <= 65536);
CREATE DOMAIN docket.job_inputs AS text[] CONSTRAINT jobs_inputs_bounded CHECK (docket.job_inputs_bounded(VALUE));
CREATE DOMAIN docket.job_output AS text
    CONSTRAINT jobs_requested_output_bounded CHECK (length(VALUE) BETWEEN 1 AND 1000);
CREATE DOMAIN docket.job_key AS text CONSTRAINT jobs_idempotency_key_valid CHECK (VALUE ~ '^[^[:cntrl:]]{1,255}$');
-- The rules of a single column are domains as well, which has a second
-- reason: Postgres reads a table's CHECK constraints from their stored text
-- again in every INSERT or UPDATE statement (in a one-job enqueue that was a
-- fifth of the server's time), while a domain's checks are read once per
-- connection. Only the rules that join columns stay table CHECKs.
CREATE DOMAIN docket.job_state AS text
    CONSTRAINT job_state_known CHECK (VALUE IN ('queued', 'claimed', 'succeeded', 'failed', 'dead', 'uncertain', 'cancelled'));
CREATE DOMAIN docket.job_priority AS smallint CONSTRAINT jobs_priority_range CHECK (VALUE BETWEEN 1 AND 4);
CREATE DOMAIN docket.job_payload_schema AS integer CONSTRAINT jobs_payload_schema_positive CHECK (VALUE >= 1);
CREATE DOMAIN docket.job_max_attempts AS integer CONSTRAINT jobs_max_attempts_range CHECK (VALUE BETWEEN 1 AND 100);
CREATE DOMAIN docket.job_lease AS interval CONSTRAINT jobs_lease_range CHECK (VALUE BETWEEN '1 second' AND '24 hours');
CREATE DOMAIN docket.job_backoff_base AS interval
    CONSTRAINT jobs_backoff_base_range CHECK (VALUE BETWEEN '1 millisecond' AND '24 hours');
CREATE DOMAIN docket.job_backoff_jitter AS double precision
    CONSTRAINT jobs_backoff_jitter_range CHECK (VALUE BETWEEN 0 AND 1);
CREATE DOMAIN docket.job_diagnostic AS text CONSTRAINT jobs_diagnostic_bounded CHECK (length(VALUE) <= 4096);
CREATE DOMAIN docket.job_event_seq AS integer CONSTRAINT job_events_seq_positive CHECK (VALUE >= 1);
CREATE DOMAIN docket.job_event_text AS text CONSTRAINT job_events_detail_bounded CHECK (length(VALUE) <= 1000);
CREATE DOMAIN docket.sha256 AS bytea CONSTRAINT sha256_length CHECK (octet_length(VALUE) = 32);

-- Capabilities ---------------------------------------------------------------

INSERT INTO docket.capabilities (name, description) VALUES
    ('job.create', 'enqueue jobs in the project'),
    ('job.claim', 'claim and run jobs of the project'),
    ('job.cancel', 'cancel jobs of the project'),
    ('job.reconcile', 'settle the project''s uncertain jobs');

-- States and transitions ------------------------------------------------------

-- The machines of this file change only here (docket.refuse_machine_change).
SET LOCAL docket.migrating = 'on';

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('job', 'docket.jobs.state', 'a job: queued, held under a lease, finished or in doubt');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'job', * FROM (VALUES
    ('queued', true, false, 'wanted: claimable from available_at'),
    ('claimed', false, false, 'held by one claimant until lease_expires_at'),
    ('succeeded', false, true, 'done; result holds the outcome'),
    ('failed', false, true, 'failed permanently; diagnostic says why'),
    ('dead', false, true, 'ran out of attempts'),
    ('uncertain', false, false, 'its worker may or may not have done the work: reconcile or cancel'),
    ('cancelled', false, true, 'withdrawn before it finished')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'job', * FROM (VALUES
    ('queued', 'claimed', 'claim'),
    ('queued', 'cancelled', 'cancel'),
    ('claimed', 'queued', 'release, retryable failure, or expired lease of a repeatable job'),
    ('claimed', 'claimed', 'an expired lease of a repeatable job taken over by another claimant'),
    ('claimed', 'succeeded', 'complete'),
    ('claimed', 'failed', 'permanent failure'),
    ('claimed', 'dead', 'retryable failure or expiry on the last attempt'),
    ('claimed', 'uncertain', 'uncertain failure, or expired lease, of a job that is not repeatable'),
    ('claimed', 'cancelled', 'cancel'),
    ('uncertain', 'succeeded', 'reconciled: the work was done'),
    ('uncertain', 'failed', 'reconciled: the work was not done and will not be'),
    ('uncertain', 'queued', 'reconciled: run it again'),
    ('uncertain', 'cancelled', 'cancel')) v;

SELECT docket.machine_views('job');

-- Jobs ----------------------------------------------------------------------

CREATE TABLE docket.jobs (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- project, lane_id and case_id are checked by jobs_record_insert, set-based,
    -- rather than by foreign keys.
    project           text NOT NULL,
    kind              docket.job_kind NOT NULL,
    queue             docket.job_queue NOT NULL DEFAULT 'default',
    priority          docket.job_priority NOT NULL DEFAULT 1,
    state             docket.job_state NOT NULL DEFAULT 'queued',
    payload           docket.job_json NOT NULL,
    payload_schema    docket.job_payload_schema NOT NULL DEFAULT 1,
    params            docket.job_params,
    inputs            docket.job_inputs NOT NULL DEFAULT '{}',
    requested_output  docket.job_output,
    lane_id           bigint,
    case_id           bigint,
    idempotency_key   docket.job_key,
    compensation_kind docket.job_kind,
    external          boolean NOT NULL DEFAULT false,
    repeatable        boolean NOT NULL DEFAULT false,
    available_at      timestamptz NOT NULL,
    attempts          integer NOT NULL DEFAULT 0,
    max_attempts      docket.job_max_attempts NOT NULL DEFAULT 5,
    lease             docket.job_lease NOT NULL DEFAULT '5 minutes',
    backoff_base      docket.job_backoff_base NOT NULL DEFAULT '1 second',
    backoff_cap       interval NOT NULL DEFAULT '10 minutes'
                      CONSTRAINT jobs_backoff_cap_range CHECK (backoff_cap >= backoff_base AND backoff_cap <= '7 days'),
    backoff_jitter    docket.job_backoff_jitter NOT NULL DEFAULT 0.2,
    lease_generation  bigint NOT NULL DEFAULT 0,
    claim_token       uuid,
    claimed_by        docket.principal,
    claimed_at        timestamptz,
    lease_expires_at  timestamptz,
    result            docket.job_json,
    diagnostic        docket.job_diagnostic,
    created_by        docket.principal NOT NULL,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    finished_at       timestamptz,
    -- The token of the claim whose holder finished the job (complete or fail),
    -- so a finishing call repeated by that holder is a quiet no-op and
    -- anyone else's is a stale claim. NULL when no holder finished it.
    outcome_token     uuid,
    CONSTRAINT jobs_attempts_range CHECK (attempts BETWEEN 0 AND max_attempts),
    CONSTRAINT jobs_queued_has_attempts_left CHECK (state <> 'queued' OR attempts < max_attempts),
    CONSTRAINT jobs_claimed_holds_lease CHECK (
        (state = 'claimed') = (claim_token IS NOT NULL AND claimed_by IS NOT NULL
                               AND claimed_at IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT jobs_lease_after_claim CHECK (lease_expires_at > claimed_at),
    CONSTRAINT jobs_terminal_finished CHECK (
        (state IN ('succeeded', 'failed', 'dead', 'cancelled')) = (finished_at IS NOT NULL)),
    CONSTRAINT jobs_result_only_succeeded CHECK (result IS NULL OR state = 'succeeded'),
    CONSTRAINT jobs_outcome_token_only_finished CHECK (outcome_token IS NULL OR finished_at IS NOT NULL),
    CONSTRAINT jobs_updated_not_before_created CHECK (updated_at >= created_at),
    CONSTRAINT jobs_finished_not_before_created CHECK (finished_at >= created_at)
);

COMMENT ON TABLE docket.jobs IS
    'A unit of work with a lease protocol. State moves only along docket.job_transitions; every move is in docket.job_events.';

-- Idempotency: one job per (project, kind, key), live or finished.
CREATE UNIQUE INDEX jobs_idempotency_key ON docket.jobs (project, kind, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The claim path: the next due job of a project's queue.
CREATE INDEX jobs_claim_idx ON docket.jobs (project, queue, priority, available_at, id)
    WHERE state = 'queued';

-- Leases by expiry: the expiry sweep.
CREATE INDEX jobs_lease_expiry_idx ON docket.jobs (lease_expires_at, id)
    WHERE state = 'claimed';

-- The takeover of expired claims by a claim of one project's queue: only
-- repeatable jobs with attempts left are ever taken over.
CREATE INDEX jobs_takeover_idx ON docket.jobs (project, queue, lease_expires_at, id)
    WHERE state = 'claimed' AND repeatable AND attempts < max_attempts;

-- The uncertain and dead jobs operators look at.
CREATE INDEX jobs_uncertain_idx ON docket.jobs (project, updated_at, id) WHERE state = 'uncertain';
CREATE INDEX jobs_dead_idx ON docket.jobs (project, finished_at, id) WHERE state = 'dead';

-- Listing by project, newest first, and by lane and case.
CREATE INDEX jobs_project_idx ON docket.jobs (project, id);
CREATE INDEX jobs_lane_idx ON docket.jobs (lane_id, id) WHERE lane_id IS NOT NULL;
CREATE INDEX jobs_case_idx ON docket.jobs (case_id, id) WHERE case_id IS NOT NULL;

-- Events --------------------------------------------------------------------

-- One row per transition, chained: hash = sha256(prev_hash || canonical event),
-- with prev_hash of the first event 32 zero bytes. See docket.job_event_hash.
CREATE TABLE docket.job_events (
    -- Checked set-based by job_events_check rather than by a foreign key:
    -- jobs are never deleted.
    job_id     bigint NOT NULL,
    seq        docket.job_event_seq NOT NULL,
    from_state docket.job_state,
    to_state   docket.job_state NOT NULL,
    actor      text NOT NULL,
    at         timestamptz NOT NULL,
    attempt    integer NOT NULL,
    detail     docket.job_event_text,
    -- What the transition left the job holding: its lease's expiry, and the
    -- digest of its state, result, diagnostic, holder, token, generation and
    -- attempts (docket.job_outcome).
    lease_until timestamptz,
    outcome    docket.sha256 NOT NULL,
    prev_hash  docket.sha256 NOT NULL,
    hash       docket.sha256 NOT NULL,
    PRIMARY KEY (job_id, seq)
);

COMMENT ON TABLE docket.job_events IS
    'Append-only, hash-chained history of every job transition. docket.job_verify(id) checks a job''s chain.';

CREATE TRIGGER job_events_append_only
    BEFORE UPDATE OR DELETE ON docket.job_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- job_events_check refuses (23503) an event of a job that does not exist.
-- +goose StatementBegin
CREATE FUNCTION docket.job_events_check() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    bad bigint;
BEGIN
    SELECT n.job_id INTO bad FROM new_events n
    WHERE NOT EXISTS (SELECT 1 FROM docket.jobs j WHERE j.id = n.job_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job event of job %: the job does not exist', bad
            USING ERRCODE = '23503', CONSTRAINT = 'job_events_job_exists', TABLE = 'job_events', SCHEMA = 'docket';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- Only the owner may insert events (no other role has the privilege), and
-- the events of the jobs triggers below are of the jobs they hold, so the
-- check runs for a statement issued by hand and not for those triggers'
-- inserts (trigger depth 1), which are every transition's.
CREATE TRIGGER job_events_check
    AFTER INSERT ON docket.job_events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT WHEN (pg_trigger_depth() < 1) EXECUTE FUNCTION docket.job_events_check();


-- job_outcome is the digest of what a transition leaves a job holding, as
-- canonical JSON text
--     [state, result, diagnostic, claimed_by, claim_token, lease_generation, attempts]
-- so a verifier in any language can recompute it from the job row.
CREATE FUNCTION docket.job_outcome(p_state text, p_result jsonb, p_diagnostic text, p_claimed_by text,
                                   p_claim_token uuid, p_lease_generation bigint, p_attempts integer)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN sha256(textsend(jsonb_build_array(
           p_state, p_result, p_diagnostic, p_claimed_by, p_claim_token, p_lease_generation, p_attempts)::text));

-- job_event_hash is the chain link of one event: sha256 of the previous hash
-- followed by the event as canonical JSON text
--     [job_id, seq, from_state, to_state, actor, at (epoch microseconds), attempt, detail,
--      lease_until (epoch microseconds or null), outcome (hex)]
-- so a verifier in any language can recompute it from the row. STABLE as
-- jsonb_build_array is, so the planner inlines it: a bulk enqueue hashes
-- 100,000 events in one statement.
CREATE FUNCTION docket.job_event_hash(p_prev bytea, p_job_id bigint, p_seq integer, p_from text, p_to text,
                                      p_actor text, p_at timestamptz, p_attempt integer, p_detail text,
                                      p_lease_until timestamptz, p_outcome bytea)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN sha256(p_prev || textsend(jsonb_build_array(
           p_job_id, p_seq, p_from, p_to, p_actor, docket.epoch_micros(p_at), p_attempt, p_detail,
           docket.epoch_micros(p_lease_until), encode(p_outcome, 'hex'))::text));

-- job_event_detail is what an event says beyond from and to: the claimant and
-- lease generation of a claim, else the job's diagnostic at that moment.
-- It takes the columns, not the row: a whole-row argument would build a copy
-- of every job row an UPDATE moves. STABLE, as text || bigint is, so the
-- planner inlines it.
CREATE FUNCTION docket.job_event_detail(p_state text, p_claimed_by text, p_lease_generation bigint, p_diagnostic text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE
    WHEN p_state = 'claimed' THEN 'claimed by ' || p_claimed_by || ', lease generation ' || p_lease_generation
    ELSE docket.bounded_text(p_diagnostic, 1000)
END;

-- Guards --------------------------------------------------------------------

-- jobs_columns_immutable keeps what a job is as it was enqueued (DK015).
CREATE TRIGGER jobs_columns_immutable
    BEFORE UPDATE OF project, kind, payload, payload_schema, params, inputs, requested_output,
                     lane_id, case_id,
                     idempotency_key, compensation_kind, external, repeatable, max_attempts, created_by, created_at
    ON docket.jobs
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

-- jobs_guard refuses any change at all to a finished job (DK001), by a
-- docket function or by hand, row by row, before the table's own checks see
-- it. A finished job has its finished_at (jobs_terminal_finished), so the
-- WHEN clause names no state, and no transition of a live job calls it: the
-- moves of live jobs are checked set-based, once per statement, by
-- jobs_record_update.
-- +goose StatementBegin
CREATE FUNCTION docket.jobs_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.machine_move('job', 'job ' || OLD.id, OLD.state, NEW.state, true);
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER jobs_guard
    BEFORE UPDATE ON docket.jobs
    FOR EACH ROW
    WHEN (OLD.finished_at IS NOT NULL)
    EXECUTE FUNCTION docket.jobs_guard();

CREATE TRIGGER jobs_refuse_delete
    BEFORE DELETE ON docket.jobs
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('jobs are kept with their history: cancel a job instead');

-- jobs_record_insert holds every job an INSERT created, set-based, in one
-- pass over the new jobs: it is born in an initial state of the job machine
-- with no attempt and no lease counted (DK001); its project exists (23503)
-- and is active, unless the job belongs to one of the project's cases or
-- lanes (DK009); the case or lane it names exists and is of its project
-- (23503). These are checked here rather than by foreign keys, whose per-row
-- checks dominated a bulk enqueue: projects, cases and lanes are never
-- deleted, and what a job belongs to never changes (jobs_columns_immutable),
-- so a reference valid at insert stays valid. Then it appends each job's first
-- event, and notifies docket_jobs with each queue of a job due now.
-- +goose StatementBegin
CREATE FUNCTION docket.jobs_record_insert() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    bad record;
    v_actor text;
    v_at    timestamptz;
    v_zero  bytea := decode(repeat('00', 32), 'hex');
BEGIN
    -- Every rule in one pass: the first job that breaks one, and which.
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
    -- What a job is born holding: nothing. One digest per state born in.
    JOIN (SELECT DISTINCT ON (m.state) m.state, docket.job_outcome(m.state, NULL, NULL, NULL, NULL, 0, 0) AS outcome
          FROM new_jobs m) b ON b.state = n.state;
    -- Wake the workers of each queue that has a job due now.
    PERFORM pg_notify('docket_jobs', q.queue)
    FROM (SELECT DISTINCT n.queue FROM new_jobs n WHERE NOT n.external AND n.available_at <= v_at) q;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER jobs_record_insert
    AFTER INSERT ON docket.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION docket.jobs_record_insert();

-- jobs_record_update holds every UPDATE of docket.jobs, whoever issues it, to
-- the job machine, set-based, in one pass over the statement's rows (DK001):
-- a state change, or a new lease generation, must be a pair in
-- docket.job_transitions; attempts and lease generation move only by a
-- claim, one each; a claim takes a fresh token, and a held job's token
-- changes only with a new lease generation. Then it appends an event for
-- every job the UPDATE moved, chained to that job's previous event, with
-- what the move left the job holding, and notifies docket_jobs with each
-- queue of a job queued again and due now. Lease renewals and other edits
-- that move nothing record nothing.
-- +goose StatementBegin
CREATE FUNCTION docket.jobs_record_update() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
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
        WHERE n.state <> o.state OR n.lease_generation <> o.lease_generation
    ) THEN
        RETURN NULL;
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until, outcome,
                                   prev_hash, hash)
    SELECT m.id, m.seq, m.from_state, m.to_state, v_actor, m.at, m.attempt, m.detail, m.lease_until, m.outcome,
           m.prev_hash,
           docket.job_event_hash(m.prev_hash, m.id, m.seq, m.from_state, m.to_state, v_actor, m.at, m.attempt, m.detail,
                                 m.lease_until, m.outcome)
    FROM (
        -- Time never runs backwards in a history: an event is recorded at
        -- the change context's instant, or at its predecessor's when the
        -- caller's clock is behind it.
        SELECT n.id, last.seq + 1 AS seq, greatest(v_at, last.at) AS at, o.state AS from_state, n.state AS to_state,
               n.attempts AS attempt,
               docket.job_event_detail(n.state, n.claimed_by, n.lease_generation, n.diagnostic) AS detail,
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
        WHERE n.state <> o.state OR n.lease_generation <> o.lease_generation
    ) m;
    -- Wake the workers of each queue that has a job queued again and due.
    PERFORM pg_notify('docket_jobs', q.queue)
    FROM (SELECT DISTINCT n.queue FROM old_jobs o JOIN new_jobs n ON n.id = o.id
          WHERE n.state = 'queued' AND o.state <> 'queued' AND NOT n.external AND n.available_at <= v_at) q;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER jobs_record_update
    AFTER UPDATE ON docket.jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION docket.jobs_record_update();

-- Decoders ------------------------------------------------------------------

-- The payload schemas each deployment can decode, as its workers register
-- them. A queued job whose (kind, payload_schema) is here for no deployment is
-- listed by docket.jobs_undecodable.
CREATE TABLE docket.job_decoders (
    kind           text NOT NULL CONSTRAINT job_decoders_kind_valid CHECK (docket.valid_job_kind(kind)),
    payload_schema integer NOT NULL CONSTRAINT job_decoders_schema_positive CHECK (payload_schema >= 1),
    deployment     text NOT NULL CONSTRAINT job_decoders_deployment_valid CHECK (deployment ~ '^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$'),
    registered_by  text NOT NULL,
    registered_at  timestamptz NOT NULL,
    PRIMARY KEY (kind, payload_schema, deployment)
);

-- job_visible reports whether p_principal may read the jobs of p_project: it
-- holds some job capability there. Listing and reading by id through the Go
-- API are filtered by it; an operator in psql reads everything.
-- plpgsql, as grant_check is, so its plan is kept for the session.
-- +goose StatementBegin
CREATE FUNCTION docket.job_visible(p_principal text, p_project text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM docket.grants g
        WHERE g.project = p_project AND g.principal = p_principal
          AND g.capability IN ('job.create', 'job.claim', 'job.cancel', 'job.reconcile')
    );
END
$$;
-- +goose StatementEnd

-- Operator views --------------------------------------------------------------
-- Storage never reads the clock, so the views order by the instant that matters
-- and leave the present to the reader, who filters with the instant they mean:
--     SELECT * FROM docket.jobs_expired_leases WHERE lease_expires_at <= '2026-11-29 10:00Z'

CREATE VIEW docket.jobs_due AS
SELECT id, project, queue, priority, kind, available_at, attempts, max_attempts, external, created_at
FROM docket.jobs
WHERE state = 'queued'
ORDER BY available_at, priority, id;

COMMENT ON VIEW docket.jobs_due IS
    'Queued jobs, soonest claimable first. Due at instant T: WHERE available_at <= T.';

CREATE VIEW docket.jobs_expired_leases AS
SELECT id, project, queue, kind, claimed_by, claimed_at, lease_expires_at, lease_generation, attempts,
       max_attempts, repeatable
FROM docket.jobs
WHERE state = 'claimed'
ORDER BY lease_expires_at, id;

COMMENT ON VIEW docket.jobs_expired_leases IS
    'Claimed jobs by lease expiry, earliest first. Expired at instant T: WHERE lease_expires_at <= T; docket.job_expire_leases sweeps them.';

CREATE VIEW docket.jobs_dead AS
SELECT id, project, queue, kind, attempts, max_attempts, diagnostic, finished_at
FROM docket.jobs
WHERE state = 'dead'
ORDER BY finished_at DESC, id DESC;

COMMENT ON VIEW docket.jobs_dead IS 'Jobs that ran out of attempts, latest first.';

CREATE VIEW docket.jobs_uncertain AS
SELECT id, project, queue, kind, attempts, max_attempts, diagnostic, updated_at AS uncertain_since
FROM docket.jobs
WHERE state = 'uncertain'
ORDER BY updated_at, id;

COMMENT ON VIEW docket.jobs_uncertain IS
    'Jobs whose worker may or may not have done the work, oldest first: settle each with docket.job_reconcile or cancel it.';

CREATE VIEW docket.jobs_undecodable AS
SELECT j.id, j.project, j.queue, j.kind, j.payload_schema, j.state, j.available_at
FROM docket.jobs j
WHERE j.state IN ('queued', 'claimed', 'uncertain')
  AND NOT EXISTS (SELECT 1 FROM docket.job_decoders d WHERE d.kind = j.kind AND d.payload_schema = j.payload_schema)
ORDER BY j.id;

COMMENT ON VIEW docket.jobs_undecodable IS
    'Unfinished jobs whose payload schema no registered deployment can decode.';

-- Protocol ------------------------------------------------------------------

-- job_require_batch refuses (DK010) a batch size outside 1..p_max.
-- +goose StatementBegin
CREATE FUNCTION docket.job_require_batch(p_what text, p_n integer, p_max integer) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_n IS NULL OR p_n < 1 OR p_n > p_max THEN
        RAISE EXCEPTION 'invalid %: % is outside 1..%', p_what, coalesce(p_n::text, 'NULL'), p_max
            USING ERRCODE = 'DK010';
    END IF;
END
$$;
-- +goose StatementEnd

-- job_require_lease refuses (DK010) a lease outside 1 second .. 24 hours.
-- NULL passes: the job's own lease applies.
-- +goose StatementBegin
CREATE FUNCTION docket.job_require_lease(p_lease interval) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_lease IS NOT NULL AND (p_lease < '1 second' OR p_lease > '24 hours') THEN
        RAISE EXCEPTION 'invalid lease %: want 1 second .. 24 hours', p_lease
            USING ERRCODE = 'DK010';
    END IF;
END
$$;
-- +goose StatementEnd

-- job_require_queue refuses (DK010) a null or malformed queue name.
-- +goose StatementBegin
CREATE FUNCTION docket.job_require_queue(p_queue text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_queue IS NULL OR NOT docket.valid_queue(p_queue) THEN
        RAISE EXCEPTION 'invalid queue %: want 1-63 characters of [a-z0-9_-], starting with a letter or digit',
            coalesce(quote_literal(p_queue), 'NULL') USING ERRCODE = 'DK010';
    END IF;
END
$$;
-- +goose StatementEnd

-- job_require_spec refuses (DK010), naming element p_i and what is wrong, a
-- job spec with a malformed kind or queue, no payload, or max_attempts
-- outside 1..100: the common mistakes, named before the table's constraints
-- (which remain the arbiter) would refuse them less plainly.
-- +goose StatementBegin
CREATE FUNCTION docket.job_require_spec(p_i integer, p_kind text, p_queue text, p_payload jsonb, p_max_attempts integer)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_kind IS NULL OR NOT docket.valid_job_kind(p_kind) THEN
        RAISE EXCEPTION 'job %: invalid kind %: want dot-separated segments of [a-z0-9_-] starting with a letter, at most 128 characters',
            p_i, coalesce(quote_literal(p_kind), 'NULL') USING ERRCODE = 'DK010';
    ELSIF p_queue IS NULL OR NOT docket.valid_queue(p_queue) THEN
        RAISE EXCEPTION 'job %: invalid queue %: want 1-63 characters of [a-z0-9_-], starting with a letter or digit',
            p_i, coalesce(quote_literal(p_queue), 'NULL') USING ERRCODE = 'DK010';
    ELSIF p_payload IS NULL THEN
        RAISE EXCEPTION 'job %: payload is NULL: want a JSON value', p_i USING ERRCODE = 'DK010';
    ELSIF p_max_attempts IS NULL OR p_max_attempts NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'job %: max_attempts % is outside 1..100', p_i, coalesce(p_max_attempts::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
END
$$;
-- +goose StatementEnd

-- job_resolve_duplicate settles a job an enqueue did not insert because its
-- key was taken: the key must be held by a job in p_project of the same kind
-- with an equal payload and payload_schema. It returns that job's id, or
-- refuses with DK003 naming the key. Call it in a statement after the INSERT,
-- so it sees the rows a concurrent enqueue committed.
-- +goose StatementBegin
CREATE FUNCTION docket.job_resolve_duplicate(p_project text, p_kind text, p_key text, p_payload jsonb, p_payload_schema integer)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    SELECT * INTO v FROM docket.jobs
    WHERE project = p_project AND kind = p_kind AND idempotency_key = p_key;
    IF NOT FOUND THEN
        -- Defensive: under READ COMMITTED the INSERT skipped the element
        -- only because a committed or earlier row holds the key.
        RAISE EXCEPTION 'job of kind % with idempotency key % was not created, and no job holds the key: retry the enqueue',
            p_kind, quote_literal(p_key) USING ERRCODE = 'DK003';
    END IF;
    IF v.payload <> p_payload OR v.payload_schema <> p_payload_schema THEN
        RAISE EXCEPTION 'idempotency key % of kind % in project % is held by job % with a different payload',
            quote_literal(p_key), p_kind, p_project, v.id USING ERRCODE = 'DK003';
    END IF;
    RETURN v.id;
END
$$;
-- +goose StatementEnd

-- job_enqueue_many enqueues a batch of jobs in p_project on behalf of p_actor
-- at p_now, in one statement, and returns (ord, duplicate, id) per element in
-- input order. The arrays are parallel, one element per job; '' for a key,
-- output or compensation kind, 0 for a lane or case, and the JSON null for
-- params or inputs mean "none"; a null available_at means p_now.
--
-- A job whose (project, kind, idempotency key) already exists, or repeats an
-- earlier element of the batch, is not created again: the element returns the
-- id of the job holding the key, duplicate = true, when its payload and
-- payload_schema equal the new ones (see job_resolve_duplicate).
--
-- Refuses, writing nothing: a malformed actor or instant, an empty or
-- oversized batch, arrays of different lengths, a malformed kind, queue or
-- other field (DK010, or a check violation naming the constraint); an actor
-- without job.create on p_project, or an unknown project (DK009); a key held by
-- a job with a different payload (DK003).
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

-- job_enqueued is the row job_enqueue_one returns: whether the job was already
-- there under its idempotency key, and the job.
CREATE VIEW docket.job_enqueued AS
SELECT false AS duplicate, j.* FROM docket.jobs j WHERE false;

-- job_enqueue_one enqueues one job as job_enqueue_many does a batch of one, with
-- scalar arguments and no arrays to unpack, and returns the job's row with
-- its duplicate flag: the path of a single enqueue. Refuses as
-- job_enqueue_many.
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

-- job_take claims the jobs p_ids, which the caller chose and holds locked,
-- for p_actor at p_now: a fresh random token, a lease of p_lease (NULL: the
-- element of the parallel p_kinds/p_leases of the job's kind when it is
-- above zero, else the job's own), a new lease generation and one more
-- attempt. The one place a claim is made, for job_claim, job_claim_id and
-- job_claim_queue.
-- +goose StatementBegin
CREATE FUNCTION docket.job_take(p_ids bigint[], p_lease interval, p_actor text, p_now timestamptz,
                                p_kinds text[] DEFAULT NULL, p_leases interval[] DEFAULT NULL)
RETURNS SETOF docket.jobs
-- plpgsql, not SQL: an SQL function's UPDATE is parsed and planned again at
-- every call, a plpgsql one once per session.
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH taken AS (
        UPDATE docket.jobs j
        SET state = 'claimed',
            claim_token = gen_random_uuid(),
            claimed_by = p_actor,
            claimed_at = p_now,
            lease_expires_at = p_now + coalesce(
                p_lease,
                (SELECT d.lease FROM unnest(p_kinds, p_leases) AS d(kind, lease) WHERE d.kind = j.kind AND d.lease > '0' LIMIT 1),
                j.lease),
            lease_generation = j.lease_generation + 1,
            attempts = j.attempts + 1,
            updated_at = greatest(j.updated_at, p_now)
        WHERE j.id = ANY (p_ids)
        RETURNING j.*
    )
    SELECT * FROM taken;
END
$$;
-- +goose StatementEnd

-- job_claim claims up to p_limit due jobs of queue p_queue in p_project for
-- p_actor at p_now, for p_lease (NULL: each job's own lease). Queued jobs come
-- first by priority, available_at and id; then, while the batch has room,
-- expired claims of repeatable jobs with attempts left, earliest expiry first,
-- are taken over atomically. Each claimed job gets a fresh
-- random claim token, a new lease generation and one more attempt. Jobs other
-- claimants hold locked are skipped, never waited for.
--
-- p_kinds and p_schemas, when not NULL, are parallel arrays naming the (kind,
-- payload_schema) pairs the claimant can decode; no other job is handed to it.
--
-- An actor without job.claim on p_project (or an unknown project) gets the
-- empty answer "nothing available" gives. Refuses: a malformed actor, instant,
-- project or queue, a limit outside 1..1000, a lease outside 1 s .. 24 h, decoder
-- arrays of different lengths (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.job_claim(p_project text, p_queue text, p_limit integer, p_lease interval,
                                 p_kinds text[], p_schemas integer[], p_actor text, p_now timestamptz)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.job_require_queue(p_queue);
    PERFORM docket.job_require_batch('claim limit', p_limit, 1000);
    PERFORM docket.job_require_lease(p_lease);
    IF cardinality(p_kinds) IS DISTINCT FROM cardinality(p_schemas) THEN
        RAISE EXCEPTION 'invalid decoders: kinds and schemas must be parallel arrays of one length'
            USING ERRCODE = 'DK010';
    END IF;
    IF NOT docket.grant_check(p_actor, p_project, 'job.claim') THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH queued AS (
        SELECT j.id FROM docket.jobs j
        WHERE j.state = 'queued' AND j.project = p_project AND j.queue = p_queue AND j.available_at <= p_now
          AND (p_kinds IS NULL OR (j.kind, j.payload_schema) IN (SELECT * FROM unnest(p_kinds, p_schemas)))
        ORDER BY j.priority, j.available_at, j.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ),
    -- Only as many takeovers as the queued jobs leave room for, so a claim
    -- never locks an expired lease it does not take.
    expired AS (
        SELECT j.id, j.lease_expires_at FROM docket.jobs j
        WHERE j.state = 'claimed' AND j.repeatable AND j.attempts < j.max_attempts
          AND j.project = p_project AND j.queue = p_queue AND j.lease_expires_at <= p_now
          AND (p_kinds IS NULL OR (j.kind, j.payload_schema) IN (SELECT * FROM unnest(p_kinds, p_schemas)))
        ORDER BY j.lease_expires_at, j.id
        LIMIT greatest(p_limit - (SELECT count(*) FROM queued), 0)
        FOR UPDATE SKIP LOCKED
    )
    SELECT * FROM docket.job_take(ARRAY(SELECT id FROM queued UNION ALL SELECT id FROM expired),
                                  p_lease, p_actor, p_now);
END
$$;
-- +goose StatementEnd

-- job_claim_id claims job p_id for p_actor at p_now as job_claim would, when it
-- is queued and due, or claimed with an expired lease and repeatable with
-- attempts left. Otherwise (unknown, held by a live lease, not yet due,
-- finished, locked by another claimant) it returns no row; so does an actor
-- without job.claim on the job's project.
--
-- Refuses: malformed input (DK010, as job_claim); a claimable job whose (kind,
-- payload_schema) is not among the claimant's decoders (DK012): it is left
-- queued for a deployment that knows it.
-- +goose StatementBegin
CREATE FUNCTION docket.job_claim_id(p_id bigint, p_lease interval, p_kinds text[], p_schemas integer[],
                                    p_actor text, p_now timestamptz)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_lease(p_lease);
    IF cardinality(p_kinds) IS DISTINCT FROM cardinality(p_schemas) THEN
        RAISE EXCEPTION 'invalid decoders: kinds and schemas must be parallel arrays of one length'
            USING ERRCODE = 'DK010';
    END IF;
    -- The grant first, so a caller without one never locks the row.
    IF NOT docket.grant_check(p_actor, (SELECT j.project FROM docket.jobs j WHERE j.id = p_id), 'job.claim') THEN
        RETURN;
    END IF;
    SELECT * INTO v FROM docket.jobs j
    WHERE j.id = p_id
      AND ((j.state = 'queued' AND j.available_at <= p_now)
        OR (j.state = 'claimed' AND j.lease_expires_at <= p_now AND j.repeatable AND j.attempts < j.max_attempts))
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF p_kinds IS NOT NULL AND (v.kind, v.payload_schema) NOT IN (SELECT * FROM unnest(p_kinds, p_schemas)) THEN
        RAISE EXCEPTION 'job %: kind % payload schema % is not one this claimant can decode', v.id, v.kind, v.payload_schema
            USING ERRCODE = 'DK012';
    END IF;
    RETURN QUERY SELECT * FROM docket.job_take(ARRAY[v.id], p_lease, p_actor, p_now);
END
$$;
-- +goose StatementEnd

-- job_lock_held locks job p_id and returns it when p_token holds its live
-- lease at p_now. Otherwise it refuses, naming why: an unknown job (P0002), or
-- a token that does not hold the current lease, because the job is not
-- claimed, was claimed again, or its lease expired (DK002). p_op names the
-- operation for the message.
-- +goose StatementBegin
CREATE FUNCTION docket.job_lock_held(p_op text, p_id bigint, p_token uuid, p_now timestamptz)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    SELECT * INTO v FROM docket.jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', coalesce(p_id::text, 'NULL') USING ERRCODE = 'P0002';
    END IF;
    IF v.state <> 'claimed' THEN
        RAISE EXCEPTION 'job %: cannot %: it is %, not claimed', v.id, p_op, v.state USING ERRCODE = 'DK002';
    ELSIF p_token IS DISTINCT FROM v.claim_token THEN
        RAISE EXCEPTION 'job %: cannot %: the token does not hold its current lease (generation %)', v.id, p_op, v.lease_generation
            USING ERRCODE = 'DK002';
    ELSIF v.lease_expires_at <= p_now THEN
        RAISE EXCEPTION 'job %: cannot %: its lease expired at %', v.id, p_op, v.lease_expires_at USING ERRCODE = 'DK002';
    END IF;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- job_renew extends the live lease p_token holds on job p_id to p_now + p_lease
-- (NULL: the job's own lease). Renewal is not a transition and records no
-- event. Refuses: malformed input (DK010); as job_lock_held (P0002, DK002).
-- +goose StatementBegin
CREATE FUNCTION docket.job_renew(p_id bigint, p_token uuid, p_lease interval, p_actor text, p_now timestamptz)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_lease(p_lease);
    v := docket.job_lock_held('renew', p_id, p_token, p_now);
    UPDATE docket.jobs
    SET lease_expires_at = greatest(lease_expires_at, p_now + coalesce(p_lease, lease)),
        updated_at = greatest(updated_at, p_now)
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- job_release gives the lease p_token holds on job p_id back: the job is queued
-- again, claimable from p_available_at (NULL or earlier than p_now: p_now), with
-- its attempts kept and p_reason as its diagnostic. A job released on its last
-- attempt has none left to run and goes to dead instead.
-- Refuses: malformed input (DK010); as job_lock_held (P0002, DK002).
-- +goose StatementBegin
CREATE FUNCTION docket.job_release(p_id bigint, p_token uuid, p_available_at timestamptz, p_reason text,
                                   p_actor text, p_now timestamptz)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    v := docket.job_lock_held('release', p_id, p_token, p_now);
    IF v.attempts >= v.max_attempts THEN
        UPDATE docket.jobs
        SET state = 'dead', outcome_token = claim_token,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            diagnostic = docket.bounded_text(format('released on its last attempt (%s of %s): %s',
                                                    attempts, max_attempts, coalesce(p_reason, 'no reason given')), 4096),
            finished_at = p_now, updated_at = greatest(updated_at, p_now)
        WHERE id = v.id
        RETURNING * INTO v;
        RETURN v;
    END IF;
    UPDATE docket.jobs
    SET state = 'queued', claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
        available_at = greatest(coalesce(p_available_at, p_now), p_now),
        diagnostic = docket.bounded_text('released: ' || coalesce(p_reason, 'no reason given'), 4096),
        updated_at = greatest(updated_at, p_now)
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- job_settled_code decides a holder's finishing call on a job that is no
-- longer held under its token. Only the holder whose claim finished the job
-- (p_token is its outcome_token) is answered about the outcome: the same
-- outcome again (p_outcome, and for a success p_outcome_result, is what the
-- job holds) is a quiet no-op, NULL; another outcome is DK014. Anyone else's
-- token is a stale claim, DK002 (a job cancelled, settled or taken over
-- under its holder included). A code, not a refusal, so a batch can decide
-- every element in one statement.
CREATE FUNCTION docket.job_settled_code(p_outcome_token uuid, p_state text, p_result jsonb, p_token uuid,
                                        p_outcome text, p_outcome_result jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN p_outcome_token IS NULL OR p_token IS DISTINCT FROM p_outcome_token THEN 'DK002'
    WHEN p_state = p_outcome AND (p_outcome <> 'succeeded' OR p_result IS NOT DISTINCT FROM p_outcome_result) THEN NULL
    ELSE 'DK014'
END;

-- job_settled_outcome refuses, or answers with the job, a holder's
-- finishing call on job v, which is no longer held under p_token, as
-- job_settled_code decides.
-- +goose StatementBegin
CREATE FUNCTION docket.job_settled_outcome(p_op text, v docket.jobs, p_token uuid, p_outcome text, p_result jsonb)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
BEGIN
    CASE docket.job_settled_code(v.outcome_token, v.state, v.result, p_token, p_outcome, p_result)
    WHEN 'DK002' THEN
        RAISE EXCEPTION 'job %: cannot %: it is %, and the token does not hold the claim that finished it', v.id, p_op, v.state
            USING ERRCODE = 'DK002';
    WHEN 'DK014' THEN
        RAISE EXCEPTION '%', format('job %s already finished %s%s: it cannot %s', v.id, v.state,
            CASE WHEN v.state = 'succeeded' AND p_outcome = 'succeeded' THEN ' with another result' ELSE '' END, p_op)
            USING ERRCODE = 'DK014';
    ELSE
        RETURN v;
    END CASE;
END
$$;
-- +goose StatementEnd

-- job_complete finishes job p_id as succeeded with p_result (NULL or JSON null:
-- none),
-- using the live lease p_token holds. Completing a succeeded job again with an
-- equal result is a quiet no-op that returns it. Run in the caller's
-- transaction, the caller's own writes commit with the transition or not at all.
-- Refuses, writing nothing: malformed input, a result over 1 MiB (DK010); an
-- unknown job (P0002); a job finished otherwise, or succeeded with another
-- result (DK014); a token that does not hold a live lease, including on a
-- cancelled job (DK002).
-- +goose StatementBegin
CREATE FUNCTION docket.job_complete(p_id bigint, p_token uuid, p_result jsonb, p_actor text, p_now timestamptz)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    p_result := nullif(p_result, 'null'::jsonb); -- JSON null is no result, as in job_complete_many
    IF docket.json_size(p_result) > 1048576 THEN
        RAISE EXCEPTION 'job %: result is % bytes, over the bound of 1048576', p_id, docket.json_size(p_result)
            USING ERRCODE = 'DK010';
    END IF;
    SELECT * INTO v FROM docket.jobs WHERE id = p_id FOR UPDATE;
    IF FOUND AND docket.machine_terminal('job', v.state) THEN
        RETURN docket.job_settled_outcome('complete', v, p_token, 'succeeded', p_result);
    END IF;
    v := docket.job_lock_held('complete', p_id, p_token, p_now);
    UPDATE docket.jobs
    SET state = 'succeeded', result = p_result, diagnostic = NULL, outcome_token = claim_token,
        claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
        finished_at = p_now, updated_at = greatest(updated_at, p_now)
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- job_complete_many completes a batch in one statement: element i completes
-- job p_ids[i] with token p_tokens[i] and result p_results[i] (JSON null: none).
-- It returns one row per element, in input order: the job's state after the
-- call and, when element i was refused, the SQLSTATE job_complete would have
-- raised (DK002 stale claim, DK014 finished otherwise, P0002 unknown) with
-- nothing written for it. The other elements still complete.
-- Refuses the whole batch: malformed input, arrays of different lengths, a
-- job named twice, a batch outside 1..1000 (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.job_complete_many(p_ids bigint[], p_tokens uuid[], p_results jsonb[], p_actor text, p_now timestamptz)
RETURNS TABLE (id bigint, state text, refusal text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_done bigint[];
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('completion batch size', cardinality(p_ids), 1000);
    IF cardinality(p_tokens) IS DISTINCT FROM cardinality(p_ids) OR cardinality(p_results) IS DISTINCT FROM cardinality(p_ids) THEN
        RAISE EXCEPTION 'invalid completion batch: ids, tokens and results must have one length'
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
        SELECT x.id, x.token, nullif(x.result, 'null'::jsonb) AS result
        FROM unnest(p_ids, p_tokens, p_results) AS x(id, token, result)
    ),
    done AS (
        UPDATE docket.jobs j
        SET state = 'succeeded', result = input.result, diagnostic = NULL, outcome_token = j.claim_token,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            finished_at = p_now, updated_at = greatest(j.updated_at, p_now)
        FROM input
        WHERE j.id = input.id AND j.state = 'claimed' AND j.claim_token = input.token AND j.lease_expires_at > p_now
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
               ELSE docket.job_settled_code(j.outcome_token, j.state, j.result, x.token, 'succeeded',
                                            nullif(x.result, 'null'::jsonb))
           END
    FROM unnest(p_ids, p_tokens, p_results) WITH ORDINALITY AS x(id, token, result, i)
    LEFT JOIN docket.jobs j ON j.id = x.id
    ORDER BY x.i;
END
$$;
-- +goose StatementEnd

-- job_fail reports that the attempt p_token holds on job p_id failed, classed:
--   retryable  back to queued after a backoff from the job's policy, or after
--              p_retry_after (a peer's hint, clamped to 0 .. 24 hours) when
--              given; dead when this was its last attempt;
--   permanent  failed;
--   uncertain  uncertain (its effect may have happened), or as retryable when
--              the job is repeatable.
-- p_diagnostic is kept, cut to 4096 characters. Failing a job already finished
-- with the outcome this call would give is a quiet no-op.
-- Refuses, writing nothing: malformed input or an unknown class (DK010); an
-- unknown job (P0002); a job finished otherwise (DK014); a token that does
-- not hold a live lease (DK002).
-- +goose StatementBegin
CREATE FUNCTION docket.job_fail(p_id bigint, p_token uuid, p_class text, p_diagnostic text, p_retry_after interval,
                                p_actor text, p_now timestamptz)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
    v_class text := p_class;
    v_diag text := docket.bounded_text(coalesce(p_diagnostic, 'no diagnostic given'), 4096);
    v_delay interval;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF p_class IS NULL OR p_class NOT IN ('retryable', 'permanent', 'uncertain') THEN
        RAISE EXCEPTION 'invalid failure class %: want retryable, permanent or uncertain', coalesce(quote_literal(p_class), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    SELECT * INTO v FROM docket.jobs WHERE id = p_id FOR UPDATE;
    IF FOUND AND v.repeatable AND v_class = 'uncertain' THEN
        v_class := 'retryable';
    END IF;
    IF FOUND AND docket.machine_terminal('job', v.state) THEN
        RETURN docket.job_settled_outcome('fail', v, p_token,
            CASE v_class WHEN 'permanent' THEN 'failed' WHEN 'uncertain' THEN 'uncertain' ELSE 'dead' END, NULL);
    END IF;
    v := docket.job_lock_held('fail', p_id, p_token, p_now);
    IF v_class = 'permanent' THEN
        UPDATE docket.jobs
        SET state = 'failed', diagnostic = v_diag, outcome_token = claim_token,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            finished_at = p_now, updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    ELSIF v_class = 'uncertain' THEN
        UPDATE docket.jobs
        SET state = 'uncertain', diagnostic = v_diag,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    ELSIF v.attempts >= v.max_attempts THEN
        UPDATE docket.jobs
        SET state = 'dead', diagnostic = v_diag, outcome_token = claim_token,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            finished_at = p_now, updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    ELSE
        v_delay := CASE
            WHEN p_retry_after IS NOT NULL THEN least(greatest(p_retry_after, '0'::interval), '24 hours'::interval)
            ELSE docket.job_backoff(v.attempts, v.backoff_base, v.backoff_cap, v.backoff_jitter, random())
        END;
        UPDATE docket.jobs
        SET state = 'queued', diagnostic = v_diag, available_at = p_now + v_delay,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    END IF;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- job_cancel withdraws job p_id, queued, claimed or uncertain, on behalf of
-- p_actor at p_now, with p_reason as its diagnostic. A holder learns of it when
-- its next renew, complete or fail is refused as stale. When the job names a
-- compensation kind, a job of that kind is enqueued in the same transaction
-- (payload {"job_id", "kind"}: the handler reads the cancelled job by id;
-- idempotency key compensate:<id>). The creator of the cancelled job, who
-- held job.create, declared it: the canceller needs no job.create of its own.
-- Cancelling a cancelled job again is a quiet no-op.
-- Refuses, writing nothing: malformed input (DK010); an unknown job (P0002);
-- an actor without job.cancel on the job's project (DK009); a job finished
-- otherwise (DK014).
-- +goose StatementBegin
CREATE FUNCTION docket.job_cancel(p_id bigint, p_reason text, p_actor text, p_now timestamptz)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    SELECT * INTO v FROM docket.jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', coalesce(p_id::text, 'NULL') USING ERRCODE = 'P0002';
    END IF;
    IF NOT docket.grant_check(p_actor, v.project, 'job.cancel') THEN
        RAISE EXCEPTION '% may not cancel job %: it needs job.cancel on the job''s project', p_actor, v.id
            USING ERRCODE = 'DK009';
    END IF;
    IF v.state = 'cancelled' THEN
        RETURN v;
    ELSIF docket.machine_terminal('job', v.state) THEN
        RAISE EXCEPTION 'job % already finished %: it cannot be cancelled', v.id, v.state USING ERRCODE = 'DK014';
    END IF;
    UPDATE docket.jobs
    SET state = 'cancelled', diagnostic = docket.bounded_text('cancelled: ' || coalesce(p_reason, 'no reason given'), 4096),
        claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
        finished_at = p_now, updated_at = greatest(updated_at, p_now)
    WHERE id = v.id RETURNING * INTO v;
    IF v.compensation_kind IS NOT NULL THEN
        INSERT INTO docket.jobs (project, kind, queue, priority, payload, idempotency_key, available_at,
                                 created_by, created_at, updated_at)
        VALUES (v.project, v.compensation_kind, v.queue, v.priority,
                jsonb_build_object('job_id', v.id, 'kind', v.kind),
                'compensate:' || v.id, p_now, p_actor, p_now, p_now)
        ON CONFLICT (project, kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
    END IF;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- job_reconcile settles uncertain job p_id on behalf of p_actor at p_now, by
-- someone who found out what happened: p_outcome succeeded (with p_result),
-- failed, or queued (run it again now; only with attempts left). p_note is
-- kept as the diagnostic. Settling a job again with the outcome it has is a
-- quiet no-op.
-- Refuses, writing nothing: malformed input or outcome, queued with no
-- attempts left (DK010); an unknown job (P0002); an actor without
-- job.reconcile on the job's project (DK009); a job that is not uncertain
-- (DK001), or finished otherwise (DK014).
-- +goose StatementBegin
CREATE FUNCTION docket.job_reconcile(p_id bigint, p_outcome text, p_result jsonb, p_note text, p_actor text, p_now timestamptz)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'failed', 'queued') THEN
        RAISE EXCEPTION 'invalid reconcile outcome %: want succeeded, failed or queued', coalesce(quote_literal(p_outcome), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    p_result := nullif(p_result, 'null'::jsonb);
    IF p_result IS NOT NULL AND p_outcome <> 'succeeded' THEN
        RAISE EXCEPTION 'invalid reconcile: only a succeeded outcome carries a result' USING ERRCODE = 'DK010';
    END IF;
    IF docket.json_size(p_result) > 1048576 THEN
        RAISE EXCEPTION 'job %: result is over the bound of 1048576 bytes', p_id USING ERRCODE = 'DK010';
    END IF;
    SELECT * INTO v FROM docket.jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', coalesce(p_id::text, 'NULL') USING ERRCODE = 'P0002';
    END IF;
    IF NOT docket.grant_check(p_actor, v.project, 'job.reconcile') THEN
        RAISE EXCEPTION '% may not reconcile job %: it needs job.reconcile on the job''s project', p_actor, v.id
            USING ERRCODE = 'DK009';
    END IF;
    IF v.state = 'cancelled' THEN
        RAISE EXCEPTION 'job % was cancelled: it cannot be reconciled', v.id USING ERRCODE = 'DK014';
    ELSIF docket.machine_terminal('job', v.state) THEN
        -- A reconciliation repeated after a lost reply is a quiet no-op; a job
        -- that finished any other way is not reconciled after the fact.
        IF v.state = p_outcome AND v.result IS NOT DISTINCT FROM p_result AND EXISTS (
            SELECT 1 FROM docket.job_events e
            WHERE e.job_id = v.id AND e.from_state = 'uncertain' AND e.to_state = v.state) THEN
            RETURN v;
        END IF;
        RAISE EXCEPTION 'job % already finished %: it cannot be reconciled to %', v.id, v.state, p_outcome
            USING ERRCODE = 'DK014';
    ELSIF v.state <> 'uncertain' THEN
        RAISE EXCEPTION 'job % is %: only an uncertain job is reconciled', v.id, v.state USING ERRCODE = 'DK001';
    END IF;
    IF p_outcome = 'queued' THEN
        IF v.attempts >= v.max_attempts THEN
            RAISE EXCEPTION 'job %: cannot queue it again: it has used all % attempts; settle it succeeded or failed, or enqueue a new job',
                v.id, v.max_attempts USING ERRCODE = 'DK010';
        END IF;
        UPDATE docket.jobs
        SET state = 'queued', available_at = p_now,
            diagnostic = docket.bounded_text('reconciled: run again: ' || coalesce(p_note, 'no note given'), 4096),
            updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    ELSE
        UPDATE docket.jobs
        SET state = p_outcome, result = p_result,
            diagnostic = docket.bounded_text('reconciled: ' || coalesce(p_note, 'no note given'), 4096),
            finished_at = p_now, updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    END IF;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- job_expire_leases sweeps up to p_limit claimed jobs whose lease expired at or
-- before p_now, in the projects where p_actor holds job.claim (a sweeper is a
-- claimant's agent), earliest first, skipping any another sweeper holds: a
-- repeatable job goes back to queued after its backoff (dead on its last
-- attempt); any other goes to uncertain, because its worker may have done the
-- work. Returns the jobs it moved. Refuses a malformed actor or instant, or a
-- limit outside 1..10000 (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.job_expire_leases(p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep limit', p_limit, 10000);
    RETURN QUERY
    WITH expired AS (
        SELECT j.id FROM docket.jobs j
        WHERE j.state = 'claimed' AND j.lease_expires_at <= p_now
          AND j.project IN (SELECT g.project FROM docket.grants g
                            WHERE g.principal = p_actor AND g.capability = 'job.claim')
        ORDER BY j.lease_expires_at, j.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE docket.jobs j
    SET state = CASE WHEN NOT j.repeatable THEN 'uncertain'
                     WHEN j.attempts >= j.max_attempts THEN 'dead'
                     ELSE 'queued' END,
        available_at = CASE WHEN j.repeatable AND j.attempts < j.max_attempts
                            THEN p_now + docket.job_backoff(j.attempts, j.backoff_base, j.backoff_cap, j.backoff_jitter, random())
                            ELSE j.available_at END,
        diagnostic = docket.bounded_text(format('lease expired at %s, held by %s (lease generation %s)',
                                                to_char(j.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                                j.claimed_by, j.lease_generation), 4096),
        finished_at = CASE WHEN j.repeatable AND j.attempts >= j.max_attempts THEN p_now END,
        claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
        updated_at = greatest(j.updated_at, p_now)
    FROM expired
    WHERE j.id = expired.id
    RETURNING j.*;
END
$$;
-- +goose StatementEnd

-- job_decoders_register records that deployment p_deployment can decode the
-- (kind, payload_schema) pairs in the parallel arrays p_kinds and p_schemas,
-- on behalf of p_actor at p_now. Registering a pair again refreshes it.
-- Refuses malformed input (DK010, or a check violation naming the constraint).
-- +goose StatementBegin
CREATE FUNCTION docket.job_decoders_register(p_deployment text, p_kinds text[], p_schemas integer[], p_actor text, p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF cardinality(p_kinds) IS DISTINCT FROM cardinality(p_schemas) THEN
        RAISE EXCEPTION 'invalid decoders: kinds and schemas must be parallel arrays of one length'
            USING ERRCODE = 'DK010';
    END IF;
    INSERT INTO docket.job_decoders (kind, payload_schema, deployment, registered_by, registered_at)
    SELECT k, s, p_deployment, p_actor, p_now FROM unnest(p_kinds, p_schemas) AS x(k, s)
    ON CONFLICT (kind, payload_schema, deployment)
    DO UPDATE SET registered_by = EXCLUDED.registered_by, registered_at = EXCLUDED.registered_at;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
-- +goose StatementEnd

-- job_verify checks job p_id's history: consecutive seq from 1, each event
-- chained to the one before and hashing to its contents, starting in the
-- initial state, every move one of the job machine as migrated, attempts
-- counting claims, time never running backwards, and the job now in the state, with the attempts, result,
-- diagnostic, holder, claim token and lease generation its last event says.
-- It reports also when the machine's tables differ from the machine.
-- +goose StatementBegin
CREATE FUNCTION docket.job_verify(p_id bigint)
RETURNS TABLE (ok boolean, events integer, bad_seq integer, problem text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    e docket.job_events;
    last docket.job_events;
    j docket.jobs;
    n integer := 0;
    prev_hash bytea := decode(repeat('00', 32), 'hex');
    prev_state text;
    prev_attempt integer := 0;
    drift text := docket.job_machine_drift();
    want bytea;
BEGIN
    SELECT * INTO j FROM docket.jobs WHERE id = p_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, 0, 0, format('job %s does not exist', coalesce(p_id::text, 'NULL'));
        RETURN;
    END IF;
    FOR e IN SELECT * FROM docket.job_events WHERE job_id = p_id ORDER BY seq LOOP
        n := n + 1;
        want := docket.job_event_hash(e.prev_hash, e.job_id, e.seq, e.from_state, e.to_state, e.actor, e.at, e.attempt, e.detail,
                                      e.lease_until, e.outcome);
        IF e.seq <> n THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('expected event %s, found %s: events are missing', n, e.seq);
            RETURN;
        ELSIF e.prev_hash <> prev_hash THEN
            RETURN QUERY SELECT false, n, e.seq::integer, 'prev_hash does not match the previous event''s hash';
            RETURN;
        ELSIF e.hash <> want THEN
            RETURN QUERY SELECT false, n, e.seq::integer, 'hash does not match the event''s contents: the row was altered';
            RETURN;
        ELSIF e.from_state IS DISTINCT FROM prev_state THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('from_state %s does not follow the previous to_state %s',
                                                         coalesce(e.from_state, 'NULL'), coalesce(prev_state, 'NULL'));
            RETURN;
        ELSIF e.from_state IS NULL AND e.to_state <> 'queued' THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('history starts in %s, not the initial state queued', e.to_state);
            RETURN;
        ELSIF e.from_state IS NOT NULL AND NOT docket.job_machine_move(e.from_state, e.to_state) THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('%s -> %s is not a move of the job machine as migrated', e.from_state, e.to_state);
            RETURN;
        ELSIF e.attempt <> prev_attempt + (CASE WHEN e.to_state = 'claimed' THEN 1 ELSE 0 END) THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('attempt %s after %s: attempts count claims only', e.attempt, prev_attempt);
            RETURN;
        ELSIF e.at < last.at THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('recorded at %s, before the event before it (%s): time ran backwards', e.at, last.at);
            RETURN;
        END IF;
        prev_hash := e.hash;
        prev_state := e.to_state;
        prev_attempt := e.attempt;
        last := e;
    END LOOP;
    IF n = 0 THEN
        RETURN QUERY SELECT false, 0, 0, format('job %s has no events', p_id);
    ELSIF prev_state <> j.state OR prev_attempt <> j.attempts THEN
        RETURN QUERY SELECT false, n, 0, format('events end %s after %s attempts, the job is %s after %s',
                                                 prev_state, prev_attempt, j.state, j.attempts);
    ELSIF last.outcome <> docket.job_outcome(j.state, j.result, j.diagnostic, j.claimed_by,
                                             j.claim_token, j.lease_generation, j.attempts) THEN
        RETURN QUERY SELECT false, n, last.seq::integer, format('the job no longer holds what event %s recorded: its result, diagnostic, holder or token was rewritten',
                                                        last.seq);
    ELSIF drift IS NOT NULL THEN
        RETURN QUERY SELECT false, n, 0, 'the job machine''s tables were changed: ' || drift;
    ELSE
        RETURN QUERY SELECT true, n, 0, NULL::text;
    END IF;
END
$$;
-- +goose StatementEnd

-- job_machine is the job machine as migrated: each legal (from, to) pair,
-- and the initial and terminal states. job_verify judges by it.
CREATE FUNCTION docket.job_machine_move(p_from text, p_to text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (p_from, p_to) IN (
    ('queued', 'claimed'), ('queued', 'cancelled'),
    ('claimed', 'queued'), ('claimed', 'claimed'), ('claimed', 'succeeded'), ('claimed', 'failed'),
    ('claimed', 'dead'), ('claimed', 'uncertain'), ('claimed', 'cancelled'),
    ('uncertain', 'succeeded'), ('uncertain', 'failed'), ('uncertain', 'queued'), ('uncertain', 'cancelled'));

-- job_machine_drift names how docket.job_states and docket.job_transitions
-- differ from the machine as migrated, or is NULL when they do not.
-- +goose StatementBegin
CREATE FUNCTION docket.job_machine_drift() RETURNS text
LANGUAGE sql STABLE
RETURN (
    SELECT string_agg(d, '; ' ORDER BY d) FROM (
        SELECT format('transition %s -> %s is not the machine''s', t.from_state, t.to_state) AS d
        FROM docket.job_transitions t WHERE NOT docket.job_machine_move(t.from_state, t.to_state)
        UNION ALL
        SELECT format('state %s is %s and %s, not as the machine has it', s.state,
                      CASE WHEN s.initial THEN 'initial' ELSE 'not initial' END,
                      CASE WHEN s.terminal THEN 'terminal' ELSE 'not terminal' END)
        FROM docket.job_states s
        WHERE (s.initial, s.terminal) IS DISTINCT FROM (s.state = 'queued', s.state IN ('succeeded', 'failed', 'dead', 'cancelled'))
        UNION ALL
        SELECT 'transitions of the machine are missing from docket.job_transitions'
        WHERE (SELECT count(*) FROM docket.job_transitions WHERE docket.job_machine_move(from_state, to_state)) <> 13
    ) x
);
-- +goose StatementEnd


-- The worker's claim ----------------------------------------------------------------

-- job_claim_queue is how a worker fills a batch: it claims, for p_actor at
-- p_now, up to p_limit due jobs of queue p_queue in every project where the
-- actor holds job.claim, in one statement: queued jobs not for external
-- executors, first by priority, available_at and id, of the (kind, payload
-- schema) pairs the parallel p_kinds/p_schemas name (NULL: any). Each claimed
-- job has a fresh token, a new lease generation and one more attempt, and
-- holds its lease for the element of the parallel p_leases of its kind (NULL
-- or zero there, or p_leases NULL: the job's own lease). Jobs another claimant has locked are skipped,
-- never waited for, so concurrent batches get distinct jobs. A job whose
-- payload version the caller does not decode is left queued for one that
-- does (docket.jobs_undecodable shows it). Nothing due, or no job.claim
-- anywhere, is an empty answer.
-- Refuses: a malformed queue, a limit outside 1..1000, decoder arrays of
-- different lengths, a lease outside 1 s .. 24 h (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.job_claim_queue(p_queue text, p_limit integer, p_kinds text[], p_schemas integer[],
                                       p_leases interval[], p_actor text, p_now timestamptz)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v_projects text[];
    v_ids bigint[] := '{}';
    v_project text;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_queue(p_queue);
    PERFORM docket.job_require_batch('claim limit', p_limit, 1000);
    IF cardinality(p_kinds) IS DISTINCT FROM cardinality(p_schemas)
       OR (p_leases IS NOT NULL AND cardinality(p_leases) IS DISTINCT FROM cardinality(p_kinds)) THEN
        RAISE EXCEPTION 'invalid decoders: kinds, schemas and leases must be parallel arrays of one length'
            USING ERRCODE = 'DK010';
    END IF;
    PERFORM docket.job_require_lease(nullif(l, '0')) FROM unnest(p_leases) l;
    SELECT array_agg(g.project ORDER BY random()) INTO v_projects
    FROM docket.grants g WHERE g.principal = p_actor AND g.capability = 'job.claim';
    -- One index range per project, in an order that changes from claim to
    -- claim, so no project's backlog starves another's.
    FOREACH v_project IN ARRAY coalesce(v_projects, '{}') LOOP
        EXIT WHEN cardinality(v_ids) >= p_limit;
        v_ids := v_ids || ARRAY(
            SELECT j.id FROM docket.jobs j
            WHERE j.state = 'queued' AND j.project = v_project AND j.queue = p_queue AND j.available_at <= p_now
              AND NOT j.external
              AND (p_kinds IS NULL OR (j.kind, j.payload_schema) IN (SELECT * FROM unnest(p_kinds, p_schemas)))
            ORDER BY j.priority, j.available_at, j.id
            LIMIT p_limit - cardinality(v_ids)
            FOR UPDATE SKIP LOCKED);
    END LOOP;
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM docket.job_take(v_ids, NULL, p_actor, p_now, p_kinds, p_leases);
END
$$;
-- +goose StatementEnd

-- The chain heads, for an auditor to export.
CREATE VIEW docket.job_chain_heads AS
SELECT DISTINCT ON (e.job_id) e.job_id, e.seq, e.at, encode(e.hash, 'hex') AS hash
FROM docket.job_events e
ORDER BY e.job_id, e.seq DESC;

COMMENT ON VIEW docket.job_chain_heads IS
    'Each job''s last event and its hash. Exported where the owner cannot write, it shows later that a history was not rebuilt.';

-- The API ---------------------------------------------------------------------

INSERT INTO docket.api_functions (name, role) VALUES
    ('job_enqueue_one', 'app'), ('job_enqueue_many', 'app'), ('job_claim', 'app'), ('job_claim_id', 'app'),
    ('job_claim_queue', 'app'), ('job_renew', 'app'), ('job_release', 'app'), ('job_complete', 'app'),
    ('job_complete_many', 'app'), ('job_fail', 'app'), ('job_cancel', 'app'), ('job_reconcile', 'app'),
    ('job_expire_leases', 'app'), ('job_decoders_register', 'app'), ('job_verify', 'app');

SELECT docket.apply_privileges();

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP VIEW
    docket.job_chain_heads, docket.job_enqueued,
    docket.jobs_undecodable, docket.jobs_uncertain, docket.jobs_dead, docket.jobs_expired_leases,
    docket.jobs_due, docket.job_transitions, docket.job_states CASCADE;
DROP TABLE docket.job_decoders, docket.job_events, docket.jobs CASCADE;
DELETE FROM docket.machine_transitions WHERE machine IN ('job');
DELETE FROM docket.machine_states WHERE machine IN ('job');
DELETE FROM docket.machines WHERE name IN ('job');
DELETE FROM docket.api_functions WHERE name IN ('job_enqueue_one', 'job_enqueue_many', 'job_claim', 'job_claim_id', 'job_claim_queue', 'job_renew',
    'job_release', 'job_complete', 'job_complete_many', 'job_fail', 'job_cancel', 'job_reconcile',
    'job_expire_leases', 'job_decoders_register', 'job_verify');
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name IN ('job.create', 'job.claim', 'job.cancel', 'job.reconcile')
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
DROP DOMAIN docket.sha256, docket.job_event_text, docket.job_event_seq, docket.job_diagnostic,
    docket.job_backoff_jitter, docket.job_backoff_base, docket.job_lease, docket.job_max_attempts,
    docket.job_payload_schema, docket.job_priority, docket.job_state;
DROP DOMAIN docket.job_key;
DROP DOMAIN docket.job_output;
DROP DOMAIN docket.job_inputs;
DROP DOMAIN docket.job_params;
DROP DOMAIN docket.job_json;
DROP DOMAIN docket.job_queue;
DROP DOMAIN docket.job_kind;
DROP FUNCTION IF EXISTS docket.job_claim_queue(text,integer,text[],integer[],interval[],text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_machine_drift();
DROP FUNCTION IF EXISTS docket.job_machine_move(text,text);
DROP FUNCTION IF EXISTS docket.job_verify(bigint);
DROP FUNCTION IF EXISTS docket.job_decoders_register(text,text[],integer[],text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_expire_leases(integer,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_reconcile(bigint,text,jsonb,text,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_cancel(bigint,text,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_fail(bigint,uuid,text,text,interval,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_complete_many(bigint[],uuid[],jsonb[],text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_complete(bigint,uuid,jsonb,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_settled_outcome(text,docket.jobs,uuid,text,jsonb);
DROP FUNCTION IF EXISTS docket.job_settled_code(uuid,text,jsonb,uuid,text,jsonb);
DROP FUNCTION IF EXISTS docket.job_release(bigint,uuid,timestamp with time zone,text,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_renew(bigint,uuid,interval,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_lock_held(text,bigint,uuid,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_claim_id(bigint,interval,text[],integer[],text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_claim(text,text,integer,interval,text[],integer[],text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.job_take(bigint[],interval,text,timestamp with time zone,text[],interval[]);
DROP FUNCTION IF EXISTS docket.job_enqueue_one(text,text,timestamp with time zone,text,text,smallint,jsonb,integer,text,timestamp with time zone,integer,boolean,boolean,interval,interval,interval,double precision,jsonb,text[],text,bigint,bigint,text);
DROP FUNCTION IF EXISTS docket.job_enqueue_many(text,text,timestamp with time zone,text[],text[],smallint[],jsonb[],integer[],text[],timestamp with time zone[],integer[],boolean[],boolean[],interval[],interval[],interval[],double precision[],jsonb[],jsonb[],text[],bigint[],bigint[],text[]);
DROP FUNCTION IF EXISTS docket.job_resolve_duplicate(text,text,text,jsonb,integer);
DROP FUNCTION IF EXISTS docket.job_require_queue(text);
DROP FUNCTION IF EXISTS docket.job_require_spec(integer,text,text,jsonb,integer);
DROP FUNCTION IF EXISTS docket.job_require_lease(interval);
DROP FUNCTION IF EXISTS docket.job_require_batch(text,integer,integer);
DROP FUNCTION IF EXISTS docket.job_visible(text,text);
DROP FUNCTION IF EXISTS docket.jobs_record_update();
DROP FUNCTION IF EXISTS docket.jobs_record_insert();
DROP FUNCTION IF EXISTS docket.jobs_guard();
DROP FUNCTION IF EXISTS docket.job_event_detail(text,text,bigint,text);
DROP FUNCTION IF EXISTS docket.job_event_hash(bytea,bigint,integer,text,text,text,timestamp with time zone,integer,text,timestamp with time zone,bytea);
DROP FUNCTION IF EXISTS docket.job_outcome(text,jsonb,text,text,uuid,bigint,integer);
DROP FUNCTION IF EXISTS docket.job_events_check();
DROP FUNCTION IF EXISTS docket.job_inputs_bounded(text[]);
DROP FUNCTION IF EXISTS docket.job_backoff(integer,interval,interval,double precision,double precision);
DROP FUNCTION IF EXISTS docket.valid_queue(text);
DROP FUNCTION IF EXISTS docket.valid_job_kind(text);
