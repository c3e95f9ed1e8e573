-- Handler revisions: every claim is bound to the code that took it.
--
--   * a worker records, per kind, the handler revision it runs, beside the
--     payload schemas it decodes (docket.job_decoders.revision);
--   * a claim records the revision that took it (docket.jobs.claimed_revision:
--     the claimant's revision for the job's kind, NULL for a claimant that
--     names none). It stays after the claim ends: it is the revision of the
--     job's latest claim;
--   * renew, release, complete (one or many) and fail take the caller's
--     revision, and an outcome from a revision other than the claim's is a
--     stale claim (DK002): the token alone no longer proves the claim;
--   * an operator pins a queued job to the revisions it may run under
--     (docket.jobs.revisions, NULL: any) with docket.job_pin, which needs
--     job.pin and is recorded as a queued -> queued event of the job
--     machine. A claim skips a job whose pin lacks its revision for the
--     job's kind; a claimant naming no revision never takes a pinned job.
--     Fail closed: a job pinned to revisions no deployment records is never
--     claimed, and docket.jobs_unrunnable lists it;
--   * the hash chain covers the revision: each job event carries the
--     revision of the claim it made or ended (docket.job_events.revision),
--     hashed after the other fields when it is not NULL, so events written
--     before this migration hash as they did.

-- +goose Up
SET LOCAL docket.migrating = 'on';

-- Names and bounds ------------------------------------------------------------

-- A handler revision: 1-100 characters, none a space or a control character,
-- e.g. v1.4.2, 9f3c2ab, 2026-11-30.1.
CREATE FUNCTION docket.valid_job_revision(p_revision text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_revision) BETWEEN 1 AND 100 AND p_revision !~ '[[:space:][:cntrl:]]';

CREATE DOMAIN docket.job_revision AS text CONSTRAINT job_revision_valid CHECK (docket.valid_job_revision(VALUE));

-- A pin: 1-8 revisions, none NULL or malformed.
CREATE FUNCTION docket.job_pin_bounded(p_revisions text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN cardinality(p_revisions) BETWEEN 1 AND 8
   AND array_position(p_revisions, NULL) IS NULL
   AND (SELECT bool_and(docket.valid_job_revision(r)) FROM unnest(p_revisions) r);

CREATE DOMAIN docket.job_pin AS text[] CONSTRAINT jobs_revisions_bounded CHECK (docket.job_pin_bounded(VALUE));

-- Columns -------------------------------------------------------------------

ALTER TABLE docket.jobs
    ADD COLUMN claimed_revision docket.job_revision,
    ADD COLUMN revisions docket.job_pin;

COMMENT ON COLUMN docket.jobs.claimed_revision IS
    'The handler revision of the job''s latest claim; NULL when never claimed, or claimed by a claimant naming none.';
COMMENT ON COLUMN docket.jobs.revisions IS
    'The handler revisions the job may run under (docket.job_pin); NULL: any.';

-- job_enqueued names the columns of docket.jobs as they were when it was
-- created: it takes the new ones at the end.
CREATE OR REPLACE VIEW docket.job_enqueued AS
SELECT false AS duplicate, j.* FROM docket.jobs j WHERE false;

ALTER TABLE docket.job_events ADD COLUMN revision docket.job_revision;

COMMENT ON COLUMN docket.job_events.revision IS
    'The handler revision of the claim the event made or ended; NULL for other events and claimants naming none.';

ALTER TABLE docket.job_decoders ADD COLUMN revision docket.job_revision;

COMMENT ON COLUMN docket.job_decoders.revision IS
    'The handler revision the deployment runs for the kind; NULL when it names none.';

-- The pinned jobs operators look at (docket.jobs_unrunnable).
CREATE INDEX jobs_pinned_idx ON docket.jobs (id) WHERE revisions IS NOT NULL AND state IN ('queued', 'uncertain');

-- Capability ------------------------------------------------------------------

-- A down migration keeps job.pin while it is granted, so the next up finds
-- it there.
INSERT INTO docket.capabilities (name, description) VALUES
    ('job.pin', 'pin the project''s queued jobs to the handler revisions they may run under')
ON CONFLICT (name) DO NOTHING;

-- job_visible: job.pin lets an actor read the jobs it pins, as every job
-- capability does.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_visible(p_principal text, p_project text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM docket.grants g
        WHERE g.project = p_project AND g.principal = p_principal
          AND g.capability IN ('job.view', 'job.create', 'job.claim', 'job.cancel', 'job.reconcile', 'job.pin')
    );
END
$$;
-- +goose StatementEnd

-- The machine -----------------------------------------------------------------

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning) VALUES
    ('job', 'queued', 'queued', 'pin: the handler revisions it may run under changed');

CREATE OR REPLACE FUNCTION docket.job_machine_move(p_from text, p_to text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (p_from, p_to) IN (
    ('queued', 'claimed'), ('queued', 'cancelled'), ('queued', 'queued'),
    ('claimed', 'queued'), ('claimed', 'claimed'), ('claimed', 'succeeded'), ('claimed', 'failed'),
    ('claimed', 'dead'), ('claimed', 'uncertain'), ('claimed', 'cancelled'),
    ('uncertain', 'succeeded'), ('uncertain', 'failed'), ('uncertain', 'queued'), ('uncertain', 'cancelled'));

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_machine_drift() RETURNS text
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
        WHERE (SELECT count(*) FROM docket.job_transitions WHERE docket.job_machine_move(from_state, to_state)) <> 14
    ) x
);
-- +goose StatementEnd

-- The chain -------------------------------------------------------------------

-- job_event_hash with a revision: as the one without when p_revision is NULL
-- (so every event written before revisions were recorded hashes as it did),
-- else sha256 of the previous hash followed by
--     [job_id, seq, from_state, to_state, actor, at (epoch microseconds), attempt, detail,
--      lease_until (epoch microseconds or null), outcome (hex), revision]
CREATE FUNCTION docket.job_event_hash(p_prev bytea, p_job_id bigint, p_seq integer, p_from text, p_to text,
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

-- jobs_record_update, as before, and: a job's pin changes only while it is
-- queued and stays queued, and records a queued -> queued event; the
-- revision of a claim changes only with a new claim (DK001); each event
-- carries the revision of the claim it made or ended, in its hash. A pin
-- that leaves a job due wakes its queue's workers.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.jobs_record_update() RETURNS trigger
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
    ) m;
    -- Wake the workers of each queue that has a job queued again and due.
    PERFORM pg_notify('docket_jobs', q.queue)
    FROM (SELECT DISTINCT n.queue FROM old_jobs o JOIN new_jobs n ON n.id = o.id
          WHERE n.state = 'queued' AND (o.state <> 'queued' OR n.revisions IS DISTINCT FROM o.revisions)
            AND NOT n.external AND n.available_at <= v_at) q;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- job_verify and job_heads (package retention) hash each event with its
-- revision. job_verify checks also that the job still holds the revision its
-- last claim recorded and the pin its last pin recorded, so either rewritten
-- since, by any means, is reported.
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
    claim_revision text;   -- the revision the last claim recorded
    pin_detail text;       -- what the last pin recorded
BEGIN
    SELECT * INTO j FROM docket.jobs WHERE id = p_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, 0, 0, format('job %s does not exist', coalesce(p_id::text, 'NULL'));
        RETURN;
    END IF;
    FOR e IN SELECT * FROM docket.job_events WHERE job_id = p_id ORDER BY seq LOOP
        n := n + 1;
        want := docket.job_event_hash(e.prev_hash, e.job_id, e.seq, e.from_state, e.to_state, e.actor, e.at, e.attempt, e.detail,
                                      e.lease_until, e.outcome, e.revision);
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
        IF e.to_state = 'claimed' THEN
            claim_revision := e.revision;
        ELSIF e.from_state = 'queued' AND e.to_state = 'queued' THEN
            pin_detail := e.detail;
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
    ELSIF claim_revision IS DISTINCT FROM j.claimed_revision THEN
        RETURN QUERY SELECT false, n, 0, format('the job''s claimed revision %s is not %s, which its last claim recorded',
                                                 coalesce(j.claimed_revision, 'NULL'), coalesce(claim_revision, 'NULL'));
    ELSIF (CASE WHEN j.revisions IS NULL THEN 'unpinned: any revision may run it'
                ELSE 'pinned to revisions ' || array_to_string(j.revisions, ', ') END)
          IS DISTINCT FROM coalesce(pin_detail, 'unpinned: any revision may run it') THEN
        RETURN QUERY SELECT false, n, 0, format('the job''s pin %s is not what its last pin recorded (%s)',
                                                 coalesce(j.revisions::text, 'NULL'), coalesce(pin_detail, 'no pin'));
    ELSIF drift IS NOT NULL THEN
        RETURN QUERY SELECT false, n, 0, 'the job machine''s tables were changed: ' || drift;
    ELSE
        RETURN QUERY SELECT true, n, 0, NULL::text;
    END IF;
END
$$;
-- +goose StatementEnd


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

-- Claims ----------------------------------------------------------------------

-- job_claim_revisions checks a claimant's revisions, the array parallel to
-- its decoders' p_kinds, and returns them with '' read as NULL (none).
-- Refuses (DK010): an array of another length than p_kinds, a malformed
-- revision, or a kind named with two revisions (a deployment runs one
-- revision of a kind).
-- +goose StatementBegin
CREATE FUNCTION docket.job_claim_revisions(p_kinds text[], p_revisions text[]) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    bad record;
BEGIN
    IF p_revisions IS NULL THEN
        RETURN NULL;
    ELSIF cardinality(p_revisions) IS DISTINCT FROM cardinality(p_kinds) THEN
        RAISE EXCEPTION 'invalid decoders: revisions must be parallel to kinds, of one length' USING ERRCODE = 'DK010';
    END IF;
    p_revisions := ARRAY(SELECT nullif(r, '') FROM unnest(p_revisions) WITH ORDINALITY AS x(r, i) ORDER BY i);
    SELECT r INTO bad FROM unnest(p_revisions) r WHERE r IS NOT NULL AND NOT docket.valid_job_revision(r) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid revision %: want 1-100 characters, none a space or a control character', quote_literal(bad.r)
            USING ERRCODE = 'DK010';
    END IF;
    SELECT k INTO bad FROM unnest(p_kinds, p_revisions) AS x(k, r)
    GROUP BY k HAVING count(DISTINCT r) > 1 OR (count(r) > 0 AND count(r) < count(*)) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid decoders: kind % is named with two revisions: a deployment runs one revision of a kind', bad.k
            USING ERRCODE = 'DK010';
    END IF;
    RETURN p_revisions;
END
$$;
-- +goose StatementEnd

-- job_take as before, and it records the claimant's revision for each job's
-- kind, the element of p_revisions parallel to p_kinds (NULL: none).
DROP FUNCTION docket.job_take(bigint[], interval, text, timestamptz, text[], interval[]);
-- +goose StatementBegin
CREATE FUNCTION docket.job_take(p_ids bigint[], p_lease interval, p_actor text, p_now timestamptz,
                                p_kinds text[] DEFAULT NULL, p_leases interval[] DEFAULT NULL,
                                p_revisions text[] DEFAULT NULL)
RETURNS SETOF docket.jobs
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
            claimed_revision = (SELECT d.revision FROM unnest(p_kinds, p_revisions) AS d(kind, revision)
                                WHERE d.kind = j.kind AND d.revision IS NOT NULL LIMIT 1),
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

-- job_claim as before, with p_revisions parallel to p_kinds: the claimant's
-- handler revision for each decoder's kind ('' or NULL: none), recorded with
-- each claim. A job pinned to revisions (docket.job_pin) is handed only to a
-- claimant whose revision for its kind is among them: never to one naming
-- none. Refuses also malformed revisions (DK010, see job_claim_revisions).
DROP FUNCTION docket.job_claim(text, text, integer, interval, text[], integer[], text, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION docket.job_claim(p_project text, p_queue text, p_limit integer, p_lease interval,
                                 p_kinds text[], p_schemas integer[], p_actor text, p_now timestamptz,
                                 p_revisions text[] DEFAULT NULL)
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
    p_revisions := docket.job_claim_revisions(p_kinds, p_revisions);
    IF NOT docket.grant_check(p_actor, p_project, 'job.claim') THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH queued AS (
        SELECT j.id FROM docket.jobs j
        WHERE j.state = 'queued' AND j.project = p_project AND j.queue = p_queue AND j.available_at <= p_now
          AND (p_kinds IS NULL OR (j.kind, j.payload_schema) IN (SELECT * FROM unnest(p_kinds, p_schemas)))
          AND (j.revisions IS NULL OR EXISTS (SELECT 1 FROM unnest(p_kinds, p_revisions) AS d(kind, revision)
                                              WHERE d.kind = j.kind AND d.revision = ANY (j.revisions)))
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
          AND (j.revisions IS NULL OR EXISTS (SELECT 1 FROM unnest(p_kinds, p_revisions) AS d(kind, revision)
                                              WHERE d.kind = j.kind AND d.revision = ANY (j.revisions)))
        ORDER BY j.lease_expires_at, j.id
        LIMIT greatest(p_limit - (SELECT count(*) FROM queued), 0)
        FOR UPDATE SKIP LOCKED
    )
    SELECT * FROM docket.job_take(ARRAY(SELECT id FROM queued UNION ALL SELECT id FROM expired),
                                  p_lease, p_actor, p_now, p_kinds, NULL, p_revisions);
END
$$;
-- +goose StatementEnd

-- job_claim_id as before, with p_revisions as job_claim's. Refuses also a
-- claimable job pinned to revisions that do not include the claimant's for
-- its kind (DK012): it is left queued for a deployment that runs one.
DROP FUNCTION docket.job_claim_id(bigint, interval, text[], integer[], text, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION docket.job_claim_id(p_id bigint, p_lease interval, p_kinds text[], p_schemas integer[],
                                    p_actor text, p_now timestamptz, p_revisions text[] DEFAULT NULL)
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
    p_revisions := docket.job_claim_revisions(p_kinds, p_revisions);
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
    IF v.revisions IS NOT NULL AND NOT EXISTS (SELECT 1 FROM unnest(p_kinds, p_revisions) AS d(kind, revision)
                                               WHERE d.kind = v.kind AND d.revision = ANY (v.revisions)) THEN
        RAISE EXCEPTION 'job %: it is pinned to revisions %, and this claimant runs %', v.id, array_to_string(v.revisions, ', '),
            coalesce((SELECT d.revision FROM unnest(p_kinds, p_revisions) AS d(kind, revision)
                      WHERE d.kind = v.kind AND d.revision IS NOT NULL LIMIT 1), 'no revision')
            USING ERRCODE = 'DK012';
    END IF;
    RETURN QUERY SELECT * FROM docket.job_take(ARRAY[v.id], p_lease, p_actor, p_now, p_kinds, NULL, p_revisions);
END
$$;
-- +goose StatementEnd

-- job_claim_queue as before, with p_revisions parallel to p_kinds as
-- job_claim's: each claim records the worker's revision for the job's kind,
-- and a pinned job is handed only to a worker whose revision for its kind it
-- names (docket.jobs_unrunnable lists those no deployment runs).
DROP FUNCTION docket.job_claim_queue(text, integer, text[], integer[], interval[], text, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION docket.job_claim_queue(p_queue text, p_limit integer, p_kinds text[], p_schemas integer[],
                                       p_leases interval[], p_actor text, p_now timestamptz,
                                       p_revisions text[] DEFAULT NULL)
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
    p_revisions := docket.job_claim_revisions(p_kinds, p_revisions);
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
              AND (j.revisions IS NULL OR EXISTS (SELECT 1 FROM unnest(p_kinds, p_revisions) AS d(kind, revision)
                                                  WHERE d.kind = j.kind AND d.revision = ANY (j.revisions)))
            ORDER BY j.priority, j.available_at, j.id
            LIMIT p_limit - cardinality(v_ids)
            FOR UPDATE SKIP LOCKED);
    END LOOP;
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM docket.job_take(v_ids, NULL, p_actor, p_now, p_kinds, p_leases, p_revisions);
END
$$;
-- +goose StatementEnd

-- Outcomes --------------------------------------------------------------------

-- job_require_revision refuses (DK002) a call by the holder of job v's claim
-- (p_token is its claim or outcome token) from a revision other than the
-- claim's: a lease is held by its token and the revision that took it. Other
-- tokens are left for the caller's own checks to answer.
-- +goose StatementBegin
CREATE FUNCTION docket.job_require_revision(p_op text, v docket.jobs, p_token uuid, p_revision text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF (p_token = v.claim_token OR p_token = v.outcome_token)
       AND v.claimed_revision IS DISTINCT FROM nullif(p_revision, '') THEN
        RAISE EXCEPTION 'job %: cannot %: it was claimed by revision %, not %', v.id, p_op,
            coalesce(quote_literal(v.claimed_revision), 'none'), coalesce(quote_literal(nullif(p_revision, '')), 'none')
            USING ERRCODE = 'DK002';
    END IF;
END
$$;
-- +goose StatementEnd

-- job_renew, job_release, job_complete and job_fail as before, and each takes
-- the caller's handler revision (NULL or '': none) and refuses one other
-- than the claim's (DK002, job_require_revision), writing nothing.
DROP FUNCTION docket.job_renew(bigint, uuid, interval, text, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION docket.job_renew(p_id bigint, p_token uuid, p_lease interval, p_actor text, p_now timestamptz,
                                 p_revision text DEFAULT NULL)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_lease(p_lease);
    v := docket.job_lock_held('renew', p_id, p_token, p_now);
    PERFORM docket.job_require_revision('renew', v, p_token, p_revision);
    UPDATE docket.jobs
    SET lease_expires_at = greatest(lease_expires_at, p_now + coalesce(p_lease, lease)),
        updated_at = greatest(updated_at, p_now)
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd


DROP FUNCTION docket.job_release(bigint, uuid, timestamptz, text, text, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION docket.job_release(p_id bigint, p_token uuid, p_available_at timestamptz, p_reason text,
                                   p_actor text, p_now timestamptz, p_revision text DEFAULT NULL)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    v := docket.job_lock_held('release', p_id, p_token, p_now);
    PERFORM docket.job_require_revision('release', v, p_token, p_revision);
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


DROP FUNCTION docket.job_complete(bigint, uuid, jsonb, text, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION docket.job_complete(p_id bigint, p_token uuid, p_result jsonb, p_actor text, p_now timestamptz,
                                    p_revision text DEFAULT NULL)
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
    IF FOUND THEN
        PERFORM docket.job_require_revision('complete', v, p_token, p_revision);
    END IF;
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


DROP FUNCTION docket.job_fail(bigint, uuid, text, text, interval, text, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION docket.job_fail(p_id bigint, p_token uuid, p_class text, p_diagnostic text, p_retry_after interval,
                                p_actor text, p_now timestamptz, p_revision text DEFAULT NULL)
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
    IF FOUND THEN
        PERFORM docket.job_require_revision('fail', v, p_token, p_revision);
    END IF;
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


-- job_complete_many as before, with p_revisions parallel to p_ids (NULL: no
-- revision for any): an element from a revision other than its claim's is
-- refused DK002 and changes nothing.
DROP FUNCTION docket.job_complete_many(bigint[], uuid[], jsonb[], text, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION docket.job_complete_many(p_ids bigint[], p_tokens uuid[], p_results jsonb[], p_actor text, p_now timestamptz,
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


-- job_decoders_register as before, with p_revisions parallel to p_kinds: the
-- handler revision the deployment runs for each kind (NULL or '': none).
-- Registering a pair again records its revision anew. Refuses malformed
-- revisions (DK010, see job_claim_revisions).
DROP FUNCTION docket.job_decoders_register(text, text[], integer[], text, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION docket.job_decoders_register(p_deployment text, p_kinds text[], p_schemas integer[], p_actor text, p_now timestamptz,
                                             p_revisions text[] DEFAULT NULL)
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
    p_revisions := docket.job_claim_revisions(p_kinds, p_revisions);
    INSERT INTO docket.job_decoders (kind, payload_schema, deployment, registered_by, registered_at, revision)
    SELECT k, s, p_deployment, p_actor, p_now, r FROM unnest(p_kinds, p_schemas, p_revisions) AS x(k, s, r)
    ON CONFLICT (kind, payload_schema, deployment)
    DO UPDATE SET registered_by = EXCLUDED.registered_by, registered_at = EXCLUDED.registered_at,
                  revision = EXCLUDED.revision;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
-- +goose StatementEnd

-- Pins ------------------------------------------------------------------------

-- job_pin pins the queued jobs p_ids to the handler revisions p_revisions
-- (NULL: unpins them, any revision may run them) on behalf of p_actor at
-- p_now, and returns them by id. A claim then hands a pinned job only to a
-- claimant whose revision for its kind is among its pin; the job stays
-- queued, and the pin stays with it when it is queued again after a claim.
-- Each job whose pin changes records a queued -> queued event naming the
-- pin; pinning a job as it is pinned records nothing.
-- Refuses, writing nothing: malformed input, no ids or over 1000, an id
-- NULL or named twice, a pin of no revision or over 8, a malformed revision
-- (DK010); an unknown job (P0002); an actor without job.pin on a job's
-- project (DK009); a job that is not queued (DK001).
-- +goose StatementBegin
CREATE FUNCTION docket.job_pin(p_ids bigint[], p_revisions text[], p_actor text, p_now timestamptz)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('pin batch size', cardinality(p_ids), 1000);
    IF (SELECT count(DISTINCT i) FROM unnest(p_ids) i) <> cardinality(p_ids) OR array_position(p_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'invalid pin: a job appears twice, or an id is NULL: name each job once' USING ERRCODE = 'DK010';
    END IF;
    IF p_revisions IS NOT NULL THEN
        IF cardinality(p_revisions) NOT BETWEEN 1 AND 8 THEN
            RAISE EXCEPTION 'invalid pin: % revisions: want 1..8 (no revisions at all unpins: pass NULL)', cardinality(p_revisions)
                USING ERRCODE = 'DK010';
        END IF;
        SELECT r INTO bad FROM unnest(p_revisions) r WHERE r IS NULL OR NOT docket.valid_job_revision(r) LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'invalid revision %: want 1-100 characters, none a space or a control character',
                coalesce(quote_literal(bad.r), 'NULL') USING ERRCODE = 'DK010';
        END IF;
    END IF;
    -- Lock in id order, so two pins of overlapping sets never deadlock.
    PERFORM 1 FROM docket.jobs j WHERE j.id = ANY (p_ids) ORDER BY j.id FOR UPDATE;
    SELECT x.id, j.id AS found, j.project, j.state INTO bad
    FROM unnest(p_ids) AS x(id)
    LEFT JOIN docket.jobs j ON j.id = x.id
    WHERE j.id IS NULL OR NOT docket.grant_check(p_actor, j.project, 'job.pin') OR j.state <> 'queued'
    ORDER BY (j.id IS NULL) DESC, x.id
    LIMIT 1;
    IF FOUND THEN
        IF bad.found IS NULL THEN
            RAISE EXCEPTION 'job % does not exist', bad.id USING ERRCODE = 'P0002';
        ELSIF NOT docket.grant_check(p_actor, bad.project, 'job.pin') THEN
            RAISE EXCEPTION '% may not pin job %: it needs job.pin on the job''s project', p_actor, bad.id
                USING ERRCODE = 'DK009';
        END IF;
        RAISE EXCEPTION 'job % is %: only a queued job is pinned', bad.id, bad.state USING ERRCODE = 'DK001';
    END IF;
    UPDATE docket.jobs j
    SET revisions = p_revisions, updated_at = greatest(j.updated_at, p_now)
    WHERE j.id = ANY (p_ids) AND j.revisions IS DISTINCT FROM p_revisions;
    RETURN QUERY SELECT * FROM docket.jobs j WHERE j.id = ANY (p_ids) ORDER BY j.id;
END
$$;
-- +goose StatementEnd

-- Operator view ---------------------------------------------------------------

CREATE VIEW docket.jobs_unrunnable AS
SELECT j.id, j.project, j.queue, j.kind, j.payload_schema, j.state, j.revisions, j.available_at,
       ARRAY(SELECT DISTINCT d.revision FROM docket.job_decoders d
             WHERE d.kind = j.kind AND d.payload_schema = j.payload_schema AND d.revision IS NOT NULL
             ORDER BY d.revision) AS deployed
FROM docket.jobs j
WHERE j.revisions IS NOT NULL AND j.state IN ('queued', 'uncertain')
  AND NOT EXISTS (SELECT 1 FROM docket.job_decoders d
                  WHERE d.kind = j.kind AND d.payload_schema = j.payload_schema AND d.revision = ANY (j.revisions))
ORDER BY j.id;

COMMENT ON VIEW docket.jobs_unrunnable IS
    'Unfinished jobs pinned to handler revisions no registered deployment runs for their kind and payload schema: no worker will claim them. deployed lists the revisions that are.';

-- The API ---------------------------------------------------------------------

INSERT INTO docket.api_functions (name, role) VALUES ('job_pin', 'app');

SELECT docket.apply_privileges();


-- +goose Down
-- Down restores the functions as migration 4 (and 8, 13) left them. It
-- refuses while any history holds a revision or a pin: without the column
-- those events no longer hash to what they recorded, and the older machine
-- has no queued -> queued move, so the histories would stop verifying. To go
-- down regardless, discarding that evidence, set docket.discard_revisions to
-- on in the migrating session (options=-c docket.discard_revisions=on in its
-- connection URL, or PGOPTIONS).
-- +goose StatementBegin
DO $$
DECLARE
    n bigint;
BEGIN
    SELECT count(DISTINCT job_id) INTO n FROM docket.job_events
    WHERE revision IS NOT NULL OR (from_state = 'queued' AND to_state = 'queued');
    IF n > 0 AND current_setting('docket.discard_revisions', true) IS DISTINCT FROM 'on' THEN
        RAISE EXCEPTION 'migrating below 15 would break the histories of % jobs, which record handler revisions or pins', n
            USING ERRCODE = 'DK010',
                  HINT = 'to go down regardless, set docket.discard_revisions = on in the migrating session (options=-c docket.discard_revisions=on)';
    END IF;
END
$$;
-- +goose StatementEnd
SET LOCAL docket.migrating = 'on';
DROP VIEW docket.jobs_unrunnable;
DELETE FROM docket.api_functions WHERE name = 'job_pin';
DROP FUNCTION docket.job_pin(bigint[], text[], text, timestamptz);

DROP FUNCTION docket.job_decoders_register(text, text[], integer[], text, timestamptz, text[]);
DROP FUNCTION docket.job_complete_many(bigint[], uuid[], jsonb[], text, timestamptz, text[]);
DROP FUNCTION docket.job_fail(bigint, uuid, text, text, interval, text, timestamptz, text);
DROP FUNCTION docket.job_complete(bigint, uuid, jsonb, text, timestamptz, text);
DROP FUNCTION docket.job_release(bigint, uuid, timestamptz, text, text, timestamptz, text);
DROP FUNCTION docket.job_renew(bigint, uuid, interval, text, timestamptz, text);
DROP FUNCTION docket.job_require_revision(text, docket.jobs, uuid, text);
DROP FUNCTION docket.job_claim_queue(text, integer, text[], integer[], interval[], text, timestamptz, text[]);
DROP FUNCTION docket.job_claim_id(bigint, interval, text[], integer[], text, timestamptz, text[]);
DROP FUNCTION docket.job_claim(text, text, integer, interval, text[], integer[], text, timestamptz, text[]);
DROP FUNCTION docket.job_take(bigint[], interval, text, timestamptz, text[], interval[], text[]);
DROP FUNCTION docket.job_claim_revisions(text[], text[]);

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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.jobs_record_update() RETURNS trigger
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_heads(p_ids bigint[])
RETURNS TABLE (job_id bigint, ok boolean, events integer, head bytea)
LANGUAGE sql STABLE AS $$
    WITH e AS (
        SELECT e.job_id, e.seq, e.hash, e.to_state, e.attempt, e.outcome,
               e.seq = row_number() OVER w
               AND e.prev_hash = coalesce(lag(e.hash) OVER w, decode(repeat('00', 32), 'hex'))
               AND e.hash = docket.job_event_hash(e.prev_hash, e.job_id, e.seq, e.from_state, e.to_state, e.actor, e.at,
                                                  e.attempt, e.detail, e.lease_until, e.outcome) AS linked,
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

DROP FUNCTION docket.job_event_hash(bytea, bigint, integer, text, text, text, timestamptz, integer, text, timestamptz, bytea, text);

DELETE FROM docket.machine_transitions WHERE machine = 'job' AND from_state = 'queued' AND to_state = 'queued';

CREATE OR REPLACE FUNCTION docket.job_machine_move(p_from text, p_to text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (p_from, p_to) IN (
    ('queued', 'claimed'), ('queued', 'cancelled'),
    ('claimed', 'queued'), ('claimed', 'claimed'), ('claimed', 'succeeded'), ('claimed', 'failed'),
    ('claimed', 'dead'), ('claimed', 'uncertain'), ('claimed', 'cancelled'),
    ('uncertain', 'succeeded'), ('uncertain', 'failed'), ('uncertain', 'queued'), ('uncertain', 'cancelled'));

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_machine_drift() RETURNS text
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_visible(p_principal text, p_project text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM docket.grants g
        WHERE g.project = p_project AND g.principal = p_principal
          AND g.capability IN ('job.view', 'job.create', 'job.claim', 'job.cancel', 'job.reconcile')
    );
END
$$;
-- +goose StatementEnd
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name = 'job.pin' AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);

DROP INDEX docket.jobs_pinned_idx;
ALTER TABLE docket.job_decoders DROP COLUMN revision;
ALTER TABLE docket.job_events DROP COLUMN revision;
-- job_enqueued cannot lose columns in place: it goes, with the function
-- returning its rows, and both come back as migration 4 made them.
DROP FUNCTION docket.job_enqueue_one(text, text, timestamptz, text, text, smallint, jsonb, integer, text, timestamptz, integer,
    boolean, boolean, interval, interval, interval, double precision, jsonb, text[], text, bigint, bigint, text);
DROP VIEW docket.job_enqueued;
ALTER TABLE docket.jobs DROP COLUMN revisions, DROP COLUMN claimed_revision;
CREATE VIEW docket.job_enqueued AS
SELECT false AS duplicate, j.* FROM docket.jobs j WHERE false;

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

DROP DOMAIN docket.job_pin;
DROP FUNCTION docket.job_pin_bounded(text[]);
DROP DOMAIN docket.job_revision;
DROP FUNCTION docket.valid_job_revision(text);

SELECT docket.apply_privileges();
