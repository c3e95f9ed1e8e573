-- History that resists rewriting.
--
--   * Each job event records what the transition left the job holding: the
--     lease's expiry (lease_until) and a digest (outcome) of its state,
--     result, diagnostic, holder, claim token, lease generation and attempts,
--     and its hash covers both. job_verify checks that the job still holds
--     what its last event says, so a result, diagnostic or holder rewritten
--     since, by any means, is reported. (The lease's expiry is not compared
--     with the job: a renewal moves it and records no event.)
--   * job_verify judges every transition against the job machine as
--     migrated, written into the function, not against docket.job_states and
--     docket.job_transitions, which it also compares with the machine and
--     reports when they differ.
--   * The states and transitions tables of every machine refuse INSERT,
--     UPDATE and DELETE (DK015) unless a migration says it is changing the
--     machine (SET LOCAL docket.migrating = 'on').
--   * time never runs backwards in a history: an event is recorded at the
--     later of the change context's instant and its predecessor's;
--   * docket.job_chain_heads lists each job's last event hash: exported
--     somewhere the owner cannot write, it lets an auditor show later that a
--     history was not rebuilt (docs/security.md).
-- Events recorded before this migration keep their hash and carry no
-- outcome: they verify as before.

-- +goose Up

ALTER TABLE docket.job_events
    ADD COLUMN lease_until timestamptz,
    ADD COLUMN outcome bytea CONSTRAINT job_events_outcome_sha256 CHECK (octet_length(outcome) = 32);

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

-- job_event_hash, of an event with an outcome, is sha256 of the previous hash
-- followed by the event as canonical JSON text
--     [job_id, seq, from_state, to_state, actor, at (epoch microseconds), attempt, detail,
--      lease_until (epoch microseconds or null), outcome (hex)]
CREATE FUNCTION docket.job_event_hash(p_prev bytea, p_job_id bigint, p_seq integer, p_from text, p_to text,
                                      p_actor text, p_at timestamptz, p_attempt integer, p_detail text,
                                      p_lease_until timestamptz, p_outcome bytea)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN sha256(p_prev || textsend(jsonb_build_array(
           p_job_id, p_seq, p_from, p_to, p_actor, docket.epoch_micros(p_at), p_attempt, p_detail,
           docket.epoch_micros(p_lease_until), encode(p_outcome, 'hex'))::text));

-- jobs_record_insert checks that every job an INSERT created names an existing
-- project (23503 otherwise) and appends each one's first event, set-based, so
-- a bulk enqueue does both in one statement each.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.jobs_record_insert() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    bad record;
    v_actor text;
    v_at    timestamptz;
    v_zero  bytea := decode(repeat('00', 32), 'hex');
    -- Every job is born queued, with nothing held.
    v_born  bytea := docket.job_outcome('queued', NULL, NULL, NULL, NULL, 0, 0);
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_jobs) THEN
        RETURN NULL;
    END IF;
    SELECT n.id, n.project INTO bad FROM new_jobs n
    WHERE NOT EXISTS (SELECT 1 FROM docket.projects p WHERE p.name = n.project)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job %: project % does not exist', bad.id, quote_literal(bad.project)
            USING ERRCODE = '23503', CONSTRAINT = 'jobs_project_exists', TABLE = 'jobs', SCHEMA = 'docket';
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until, outcome,
                                   prev_hash, hash)
    SELECT n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, NULL, NULL, v_born, v_zero,
           docket.job_event_hash(v_zero, n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, NULL, NULL, v_born)
    FROM new_jobs n;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- jobs_record_update appends an event for every job an UPDATE moved (a state
-- change or a new lease generation), chained to that job's previous event,
-- with what the move left the job holding. Lease renewals and other edits
-- that move nothing record nothing.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.jobs_record_update() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    v_actor text;
    v_at    timestamptz;
BEGIN
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
    RETURN NULL;
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

-- job_verify checks job p_id's history: consecutive seq from 1, each event
-- chained to the one before and hashing to its contents, starting in the
-- initial state, every move one of the job machine as migrated, attempts
-- counting claims, time never running backwards, and the job now in the state, with the attempts, result,
-- diagnostic, holder, claim token and lease generation its last event says.
-- It reports also when the machine's tables differ from the machine.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_verify(p_id bigint)
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
        -- An event recorded before outcomes were has the older hash.
        IF e.outcome IS NULL THEN
            want := docket.job_event_hash(e.prev_hash, e.job_id, e.seq, e.from_state, e.to_state, e.actor, e.at, e.attempt, e.detail);
        ELSE
            want := docket.job_event_hash(e.prev_hash, e.job_id, e.seq, e.from_state, e.to_state, e.actor, e.at, e.attempt, e.detail,
                                          e.lease_until, e.outcome);
        END IF;
        IF e.seq <> n THEN
            RETURN QUERY SELECT false, n, e.seq, format('expected event %s, found %s: events are missing', n, e.seq);
            RETURN;
        ELSIF e.prev_hash <> prev_hash THEN
            RETURN QUERY SELECT false, n, e.seq, 'prev_hash does not match the previous event''s hash';
            RETURN;
        ELSIF e.hash <> want THEN
            RETURN QUERY SELECT false, n, e.seq, 'hash does not match the event''s contents: the row was altered';
            RETURN;
        ELSIF e.from_state IS DISTINCT FROM prev_state THEN
            RETURN QUERY SELECT false, n, e.seq, format('from_state %s does not follow the previous to_state %s',
                                                         coalesce(e.from_state, 'NULL'), coalesce(prev_state, 'NULL'));
            RETURN;
        ELSIF e.from_state IS NULL AND e.to_state <> 'queued' THEN
            RETURN QUERY SELECT false, n, e.seq, format('history starts in %s, not the initial state queued', e.to_state);
            RETURN;
        ELSIF e.from_state IS NOT NULL AND NOT docket.job_machine_move(e.from_state, e.to_state) THEN
            RETURN QUERY SELECT false, n, e.seq, format('%s -> %s is not a move of the job machine as migrated', e.from_state, e.to_state);
            RETURN;
        ELSIF e.attempt <> prev_attempt + (CASE WHEN e.to_state = 'claimed' THEN 1 ELSE 0 END) THEN
            RETURN QUERY SELECT false, n, e.seq, format('attempt %s after %s: attempts count claims only', e.attempt, prev_attempt);
            RETURN;
        ELSIF e.outcome IS NOT NULL AND e.at < last.at THEN
            RETURN QUERY SELECT false, n, e.seq, format('recorded at %s, before the event before it (%s): time ran backwards', e.at, last.at);
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
    ELSIF last.outcome IS NOT NULL AND last.outcome <> docket.job_outcome(j.state, j.result, j.diagnostic, j.claimed_by,
                                                                         j.claim_token, j.lease_generation, j.attempts) THEN
        RETURN QUERY SELECT false, n, last.seq, format('the job no longer holds what event %s recorded: its result, diagnostic, holder or token was rewritten',
                                                        last.seq);
    ELSIF drift IS NOT NULL THEN
        RETURN QUERY SELECT false, n, 0, 'the job machine''s tables were changed: ' || drift;
    ELSE
        RETURN QUERY SELECT true, n, 0, NULL::text;
    END IF;
END
$$;
-- +goose StatementEnd

-- The machines' tables ----------------------------------------------------------

-- refuse_machine_change keeps a machine's states and transitions as migrated
-- (DK015): only a migration that says so, with SET LOCAL docket.migrating =
-- 'on', changes them.
-- +goose StatementBegin
CREATE FUNCTION docket.refuse_machine_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('docket.migrating', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION '%.%: % refused: a state machine changes only by migration', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'DK015';
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT c.oid::regclass AS rel FROM pg_class c
        WHERE c.relnamespace = 'docket'::regnamespace AND c.relkind = 'r'
          AND (c.relname LIKE '%\_states' OR c.relname LIKE '%\_transitions')
    LOOP
        EXECUTE format('CREATE TRIGGER refuse_machine_change BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH STATEMENT EXECUTE FUNCTION docket.refuse_machine_change()', t.rel);
    END LOOP;
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

SELECT docket.apply_privileges();

-- +goose Down
DROP VIEW docket.job_chain_heads;
-- +goose StatementBegin
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT g.tgrelid::regclass AS rel FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
        WHERE c.relnamespace = 'docket'::regnamespace AND g.tgname = 'refuse_machine_change'
    LOOP
        EXECUTE format('DROP TRIGGER refuse_machine_change ON %s', t.rel);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP FUNCTION docket.refuse_machine_change();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_verify(p_id bigint)
RETURNS TABLE (ok boolean, events integer, bad_seq integer, problem text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    e docket.job_events;
    j docket.jobs;
    n integer := 0;
    prev_hash bytea := decode(repeat('00', 32), 'hex');
    prev_state text;
    prev_attempt integer := 0;
BEGIN
    SELECT * INTO j FROM docket.jobs WHERE id = p_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, 0, 0, format('job %s does not exist', coalesce(p_id::text, 'NULL'));
        RETURN;
    END IF;
    FOR e IN SELECT * FROM docket.job_events WHERE job_id = p_id ORDER BY seq LOOP
        n := n + 1;
        IF e.seq <> n THEN
            RETURN QUERY SELECT false, n, e.seq, format('expected event %s, found %s: events are missing', n, e.seq);
            RETURN;
        ELSIF e.prev_hash <> prev_hash THEN
            RETURN QUERY SELECT false, n, e.seq, 'prev_hash does not match the previous event''s hash';
            RETURN;
        ELSIF e.hash <> docket.job_event_hash(e.prev_hash, e.job_id, e.seq, e.from_state, e.to_state, e.actor, e.at, e.attempt, e.detail) THEN
            RETURN QUERY SELECT false, n, e.seq, 'hash does not match the event''s contents: the row was altered';
            RETURN;
        ELSIF e.from_state IS DISTINCT FROM prev_state THEN
            RETURN QUERY SELECT false, n, e.seq, format('from_state %s does not follow the previous to_state %s',
                                                         coalesce(e.from_state, 'NULL'), coalesce(prev_state, 'NULL'));
            RETURN;
        ELSIF e.from_state IS NULL AND NOT (SELECT initial FROM docket.job_states WHERE state = e.to_state) THEN
            RETURN QUERY SELECT false, n, e.seq, format('history starts in %s, not an initial state', e.to_state);
            RETURN;
        ELSIF e.from_state IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM docket.job_transitions WHERE from_state = e.from_state AND to_state = e.to_state) THEN
            RETURN QUERY SELECT false, n, e.seq, format('%s -> %s is not in docket.job_transitions', e.from_state, e.to_state);
            RETURN;
        ELSIF e.attempt <> prev_attempt + (CASE WHEN e.to_state = 'claimed' THEN 1 ELSE 0 END) THEN
            RETURN QUERY SELECT false, n, e.seq, format('attempt %s after %s: attempts count claims only', e.attempt, prev_attempt);
            RETURN;
        END IF;
        prev_hash := e.hash;
        prev_state := e.to_state;
        prev_attempt := e.attempt;
    END LOOP;
    IF n = 0 THEN
        RETURN QUERY SELECT false, 0, 0, format('job %s has no events', p_id);
    ELSIF prev_state <> j.state OR prev_attempt <> j.attempts THEN
        RETURN QUERY SELECT false, n, 0, format('events end %s after %s attempts, the job is %s after %s',
                                                 prev_state, prev_attempt, j.state, j.attempts);
    ELSE
        RETURN QUERY SELECT true, n, 0, NULL::text;
    END IF;
END
$$;
-- +goose StatementEnd
DROP FUNCTION docket.job_machine_drift();
DROP FUNCTION docket.job_machine_move(text, text);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.jobs_record_update() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    v_actor text;
    v_at    timestamptz;
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM old_jobs o JOIN new_jobs n ON n.id = o.id
        WHERE n.state <> o.state OR n.lease_generation <> o.lease_generation
    ) THEN
        RETURN NULL;
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, prev_hash, hash)
    SELECT m.id, m.seq, m.from_state, m.to_state, v_actor, v_at, m.attempt, m.detail, m.prev_hash,
           docket.job_event_hash(m.prev_hash, m.id, m.seq, m.from_state, m.to_state, v_actor, v_at, m.attempt, m.detail)
    FROM (
        SELECT n.id, last.seq + 1 AS seq, o.state AS from_state, n.state AS to_state, n.attempts AS attempt,
               docket.job_event_detail(n.state, n.claimed_by, n.lease_generation, n.diagnostic) AS detail,
               last.hash AS prev_hash
        FROM old_jobs o
        JOIN new_jobs n ON n.id = o.id
        CROSS JOIN LATERAL (
            SELECT e.seq, e.hash FROM docket.job_events e
            WHERE e.job_id = n.id ORDER BY e.seq DESC LIMIT 1
        ) last
        WHERE n.state <> o.state OR n.lease_generation <> o.lease_generation
    ) m;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.jobs_record_insert() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    bad record;
    v_actor text;
    v_at    timestamptz;
    v_zero  bytea := decode(repeat('00', 32), 'hex');
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_jobs) THEN
        RETURN NULL;
    END IF;
    SELECT n.id, n.project INTO bad FROM new_jobs n
    WHERE NOT EXISTS (SELECT 1 FROM docket.projects p WHERE p.name = n.project)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job %: project % does not exist', bad.id, quote_literal(bad.project)
            USING ERRCODE = '23503', CONSTRAINT = 'jobs_project_exists', TABLE = 'jobs', SCHEMA = 'docket';
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, prev_hash, hash)
    SELECT n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, NULL, v_zero,
           docket.job_event_hash(v_zero, n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, NULL)
    FROM new_jobs n;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP FUNCTION docket.job_event_hash(bytea, bigint, integer, text, text, text, timestamptz, integer, text, timestamptz, bytea);
DROP FUNCTION docket.job_outcome(text, jsonb, text, text, uuid, bigint, integer);
ALTER TABLE docket.job_events DROP COLUMN outcome, DROP COLUMN lease_until;
