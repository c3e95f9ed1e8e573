-- Cases: the durable record of a business matter that outlives any one job:
-- which matter an inbound message belongs to (correlation keys), the matter's
-- state (versioned, never interpreted), and what is still owed by when
-- (obligations).
--
--   case status   open -> closed -> open (docket.case_transitions)
--   obligation    pending -> met | breached | withdrawn
--                 (docket.obligation_transitions; met, breached and withdrawn
--                 are terminal: re-applying the state held is a no-op, any
--                 other change is refused)
--
-- The invariants live here, for every writer, psql included:
--   * one open case per correlation key: a partial unique index over held keys
--     (case_keys_held), so concurrent admissions for one new matter make one
--     case; the index decides, never a read followed by a write;
--   * a state write names the version it read: a predicate on the UPDATE;
--     any change of state moves the version on (cases_guard);
--   * a closed case owes nothing: close counts pending obligations and
--     register checks the status, both under the case row's lock;
--   * obligations end once: terminal states never change (obligations_guard);
--   * every change appends a docket.case_events row carrying case_id.
--
-- Who may do what (explicit grants on the case's project):
--   case.admit  admit, correlate, write state, register, meet, withdraw and
--               breach obligations, close and reopen; read
--   case.view   read cases, keys, obligations and history
--   case.sweep  the breach sweep moves the project's due obligations
--               (and needs job.create to enqueue their escalations)
-- A case the actor may not read is not there: its functions answer P0002, as
-- for an unknown case.
--
-- Bounds: kind 1-128 characters; key namespace 1-63, value 1-255, 1-32 keys
-- per admission; state 1 MiB of JSON; obligation name 1-63; rule 500
-- characters; breach sweep batch 1..10000.

-- +goose Up

-- Names and bounds ------------------------------------------------------------

-- A key namespace: 1-63 characters of [a-z0-9._-], starting with a letter or
-- digit, e.g. document or meter.
CREATE FUNCTION docket.valid_case_key_namespace(p_namespace text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_namespace) <= 63 AND p_namespace ~ '^[a-z0-9][a-z0-9._-]*$';

-- A key value: 1-255 characters, no control characters, no leading or
-- trailing space, e.g. DOC-4711.
CREATE FUNCTION docket.valid_case_key_value(p_value text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_value) BETWEEN 1 AND 255 AND p_value !~ '[[:cntrl:]]' AND p_value = btrim(p_value);

-- A calendar digest: sha256: and 64 lowercase hex digits.
CREATE FUNCTION docket.valid_calendar_digest(p_digest text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_digest) = 71 AND p_digest ~ '^sha256:[0-9a-f]+$';

CREATE DOMAIN docket.case_state AS jsonb CONSTRAINT case_state_size CHECK (docket.json_size(VALUE) <= 1048576);

-- Malformed arguments are refused (DK010) through docket.require_valid
-- (00003_lanes), which names the field, the value and the rule.

-- Capabilities ---------------------------------------------------------------

UPDATE docket.capabilities
SET description = 'admit, correlate, write, close and reopen cases of the project and settle their obligations'
WHERE name = 'case.admit';

INSERT INTO docket.capabilities (name, description) VALUES
    ('case.view', 'read the project''s cases, keys, obligations and history'),
    ('case.sweep', 'breach the project''s due obligations and enqueue their escalations (with job.create)');

-- States and transitions --------------------------------------------------------

CREATE TABLE docket.case_states (
    state    text PRIMARY KEY,
    initial  boolean NOT NULL,
    terminal boolean NOT NULL,
    meaning  text NOT NULL,
    CONSTRAINT case_states_initial_not_terminal CHECK (NOT (initial AND terminal))
);

INSERT INTO docket.case_states (state, initial, terminal, meaning) VALUES
    ('open', true, false, 'the matter is live: its keys correlate, its state is written, it may owe things'),
    ('closed', false, false, 'the matter is settled: it owes nothing and holds no keys; it may be reopened');

CREATE TABLE docket.case_transitions (
    from_state text NOT NULL REFERENCES docket.case_states (state),
    to_state   text NOT NULL REFERENCES docket.case_states (state),
    PRIMARY KEY (from_state, to_state)
);

INSERT INTO docket.case_transitions (from_state, to_state) VALUES
    ('open', 'closed'),
    ('closed', 'open');

CREATE TABLE docket.obligation_states (
    state    text PRIMARY KEY,
    initial  boolean NOT NULL,
    terminal boolean NOT NULL,
    meaning  text NOT NULL,
    CONSTRAINT obligation_states_initial_not_terminal CHECK (NOT (initial AND terminal))
);

INSERT INTO docket.obligation_states (state, initial, terminal, meaning) VALUES
    ('pending', true, false, 'owed, not yet due or not yet swept'),
    ('met', false, true, 'answered in time'),
    ('breached', false, true, 'its deadline passed unmet; its escalation was enqueued'),
    ('withdrawn', false, true, 'no longer owed');

CREATE TABLE docket.obligation_transitions (
    from_state text NOT NULL REFERENCES docket.obligation_states (state),
    to_state   text NOT NULL REFERENCES docket.obligation_states (state),
    PRIMARY KEY (from_state, to_state)
);

INSERT INTO docket.obligation_transitions (from_state, to_state) VALUES
    ('pending', 'met'),
    ('pending', 'breached'),
    ('pending', 'withdrawn');

-- Cases -------------------------------------------------------------------------

CREATE TABLE docket.cases (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project    text NOT NULL REFERENCES docket.projects (name),
    kind       text NOT NULL CONSTRAINT cases_kind_valid CHECK (docket.valid_job_kind(kind)),
    status     text NOT NULL DEFAULT 'open' REFERENCES docket.case_states (state),
    state      docket.case_state NOT NULL DEFAULT '{}',
    version    bigint NOT NULL DEFAULT 1 CONSTRAINT cases_version_positive CHECK (version >= 1),
    created_by docket.principal NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    closed_at  timestamptz,
    -- The target of jobs' and obligations' (case_id, project) references.
    CONSTRAINT cases_id_project_key UNIQUE (id, project),
    CONSTRAINT cases_closed_at_iff_closed CHECK ((status = 'closed') = (closed_at IS NOT NULL)),
    CONSTRAINT cases_updated_not_before_created CHECK (updated_at >= created_at)
);

COMMENT ON TABLE docket.cases IS
    'A business matter: its status moves along docket.case_transitions, its state is versioned JSON docket never interprets; every change is in docket.case_events.';

CREATE INDEX cases_project_idx ON docket.cases (project, id);

-- cases_guard holds every INSERT and UPDATE of docket.cases to the rules: a
-- case is born open at version 1 (DK001); id, project, kind and creation never
-- change (DK015); status moves only along docket.case_transitions (DK001);
-- a closed case's state and version never change (DK005); a change of state
-- moves the version on by one, whatever the writer set, and the version never
-- moves otherwise by more than one (DK015).
-- +goose StatementBegin
CREATE FUNCTION docket.cases_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status IS DISTINCT FROM 'open' OR NEW.version IS DISTINCT FROM 1 OR NEW.closed_at IS NOT NULL THEN
            RAISE EXCEPTION 'case: a case is created open at version 1, not % at version %', NEW.status, NEW.version
                USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF (NEW.id, NEW.project, NEW.kind, NEW.created_by, NEW.created_at)
       IS DISTINCT FROM (OLD.id, OLD.project, OLD.kind, OLD.created_by, OLD.created_at) THEN
        RAISE EXCEPTION 'case %: id, project, kind, created_by and created_at are immutable', OLD.id
            USING ERRCODE = 'DK015';
    END IF;
    IF NEW.status <> OLD.status AND NOT EXISTS (
        SELECT 1 FROM docket.case_transitions WHERE from_state = OLD.status AND to_state = NEW.status) THEN
        RAISE EXCEPTION 'case %: % -> % is not in docket.case_transitions', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'DK001';
    END IF;
    IF (NEW.state IS DISTINCT FROM OLD.state OR NEW.version <> OLD.version)
       AND (OLD.status = 'closed' OR NEW.status = 'closed') THEN
        RAISE EXCEPTION 'case % is closed: its state cannot be written', OLD.id
            USING ERRCODE = 'DK005';
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        NEW.version := OLD.version + 1;
    ELSIF NEW.version NOT IN (OLD.version, OLD.version + 1) THEN
        RAISE EXCEPTION 'case %: version % cannot become %: it moves on by one with each state write', OLD.id, OLD.version, NEW.version
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER cases_guard
    BEFORE INSERT OR UPDATE ON docket.cases
    FOR EACH ROW EXECUTE FUNCTION docket.cases_guard();

CREATE TRIGGER cases_refuse_delete
    BEFORE DELETE ON docket.cases
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('cases are kept with their history: close a case instead');

-- Correlation keys ----------------------------------------------------------------

-- One row per claim of a key by a case: claimed when admitted or reopened,
-- released when the case closes. A key is held while released_at is NULL, and
-- at most one case of a project holds it (case_keys_held).
CREATE TABLE docket.case_keys (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    case_id     bigint NOT NULL,
    -- Copied from the case by case_keys_guard; never changes.
    project     text NOT NULL,
    namespace   text NOT NULL
                CONSTRAINT case_keys_namespace_valid CHECK (docket.valid_case_key_namespace(namespace)),
    value       text NOT NULL CONSTRAINT case_keys_value_valid CHECK (docket.valid_case_key_value(value)),
    claimed_at  timestamptz NOT NULL,
    released_at timestamptz,
    CONSTRAINT case_keys_case_fkey FOREIGN KEY (case_id, project) REFERENCES docket.cases (id, project),
    CONSTRAINT case_keys_released_after_claimed CHECK (released_at >= claimed_at)
);

COMMENT ON TABLE docket.case_keys IS
    'Correlation keys: each row is one claim of (namespace, value) by a case; held while released_at is NULL.';

-- The arbiter of admission: one open case per key per project. Also the index
-- admission and correlation look keys up by.
CREATE UNIQUE INDEX case_keys_held ON docket.case_keys (project, namespace, value) WHERE released_at IS NULL;
CREATE INDEX case_keys_case_idx ON docket.case_keys (case_id, id);

-- case_keys_guard: a key is claimed, unreleased, by an open case (DK005
-- otherwise), with the case's project; afterwards only released_at may be set,
-- once (DK015).
-- +goose StatementBegin
CREATE FUNCTION docket.case_keys_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c docket.cases;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT * INTO c FROM docket.cases WHERE id = NEW.case_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'case key: case % does not exist', coalesce(NEW.case_id::text, 'NULL')
                USING ERRCODE = '23503', CONSTRAINT = 'case_keys_case_fkey', TABLE = 'case_keys', SCHEMA = 'docket';
        END IF;
        IF c.status <> 'open' THEN
            RAISE EXCEPTION 'case % is closed: it cannot claim key (%, %)', c.id, NEW.namespace, NEW.value
                USING ERRCODE = 'DK005';
        END IF;
        IF NEW.project IS DISTINCT FROM c.project AND NEW.project IS NOT NULL THEN
            RAISE EXCEPTION 'case key: its project is its case''s, %, not %', c.project, NEW.project
                USING ERRCODE = 'DK015';
        END IF;
        IF NEW.released_at IS NOT NULL THEN
            RAISE EXCEPTION 'case %: a key is claimed unreleased', c.id USING ERRCODE = 'DK001';
        END IF;
        NEW.project := c.project;
        RETURN NEW;
    END IF;
    IF (NEW.id, NEW.case_id, NEW.project, NEW.namespace, NEW.value, NEW.claimed_at)
       IS DISTINCT FROM (OLD.id, OLD.case_id, OLD.project, OLD.namespace, OLD.value, OLD.claimed_at)
       OR (OLD.released_at IS NOT NULL AND NEW.released_at IS DISTINCT FROM OLD.released_at) THEN
        RAISE EXCEPTION 'case key %: only released_at may be set, once', OLD.id
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER case_keys_guard
    BEFORE INSERT OR UPDATE ON docket.case_keys
    FOR EACH ROW EXECUTE FUNCTION docket.case_keys_guard();

CREATE TRIGGER case_keys_refuse_delete
    BEFORE DELETE ON docket.case_keys
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('case keys are kept: closing the case releases them');

-- Obligations -------------------------------------------------------------------

CREATE TABLE docket.obligations (
    id                        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    case_id                   bigint NOT NULL,
    -- Copied from the case by obligations_guard; never changes.
    project                   text NOT NULL,
    name                      text NOT NULL
                              CONSTRAINT obligations_name_valid CHECK (docket.valid_case_key_namespace(name)),
    due_at                    timestamptz NOT NULL CONSTRAINT obligations_due_at_finite CHECK (isfinite(due_at)),
    state                     text NOT NULL DEFAULT 'pending' REFERENCES docket.obligation_states (state),
    -- The spec the instant was resolved from and the digest of the calendar
    -- that resolved it: both or neither. The instant is never recomputed.
    rule                      text CONSTRAINT obligations_rule_bounded CHECK (length(rule) BETWEEN 1 AND 500),
    calendar_digest           text CONSTRAINT obligations_calendar_digest_valid CHECK (docket.valid_calendar_digest(calendar_digest)),
    -- The job a breach enqueues: all of kind, queue, payload, payload_schema
    -- and max_attempts, or none.
    escalation_kind           docket.job_kind,
    escalation_queue          docket.job_queue,
    escalation_payload        docket.job_json,
    escalation_payload_schema integer CONSTRAINT obligations_escalation_payload_schema_positive CHECK (escalation_payload_schema >= 1),
    escalation_max_attempts   integer CONSTRAINT obligations_escalation_max_attempts_range CHECK (escalation_max_attempts BETWEEN 1 AND 100),
    -- The job the breach enqueued.
    escalation_job_id         bigint REFERENCES docket.jobs (id),
    created_by                docket.principal NOT NULL,
    created_at                timestamptz NOT NULL,
    resolved_at               timestamptz,
    resolved_by               docket.principal,
    CONSTRAINT obligations_case_fkey FOREIGN KEY (case_id, project) REFERENCES docket.cases (id, project),
    CONSTRAINT obligations_rule_with_digest CHECK ((rule IS NULL) = (calendar_digest IS NULL)),
    CONSTRAINT obligations_escalation_whole CHECK (
        (escalation_kind IS NULL) = (escalation_queue IS NULL)
        AND (escalation_kind IS NULL) = (escalation_payload IS NULL)
        AND (escalation_kind IS NULL) = (escalation_payload_schema IS NULL)
        AND (escalation_kind IS NULL) = (escalation_max_attempts IS NULL)),
    CONSTRAINT obligations_escalation_job_only_breached CHECK (escalation_job_id IS NULL OR state = 'breached'),
    CONSTRAINT obligations_resolved_iff_terminal CHECK (
        (state = 'pending') = (resolved_at IS NULL) AND (resolved_at IS NULL) = (resolved_by IS NULL))
);

COMMENT ON TABLE docket.obligations IS
    'What a case owes by when. State moves along docket.obligation_transitions; met, breached and withdrawn are terminal.';

-- The breach sweep's range scan: pending obligations by the instant they fall due.
CREATE INDEX obligations_due_idx ON docket.obligations (due_at, id) WHERE state = 'pending';
CREATE INDEX obligations_case_idx ON docket.obligations (case_id, id);
-- A case owes one thing of a name at a time.
CREATE UNIQUE INDEX obligations_pending_name ON docket.obligations (case_id, name) WHERE state = 'pending';

-- obligations_guard: an obligation is born pending, unresolved, of an existing
-- case, with its project (DK001, 23503, DK015); nothing but its state, its
-- resolution and the job its breach enqueued ever changes (DK015); its state
-- moves only along docket.obligation_transitions, and a terminal obligation
-- never changes at all (DK001). An UPDATE that changes nothing passes: a
-- retry is not an edit.
-- +goose StatementBegin
CREATE FUNCTION docket.obligations_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_project text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT project INTO v_project FROM docket.cases WHERE id = NEW.case_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'obligation %: case % does not exist', NEW.name, coalesce(NEW.case_id::text, 'NULL')
                USING ERRCODE = '23503', CONSTRAINT = 'obligations_case_fkey', TABLE = 'obligations', SCHEMA = 'docket';
        END IF;
        IF NEW.project IS DISTINCT FROM v_project AND NEW.project IS NOT NULL THEN
            RAISE EXCEPTION 'obligation %: its project is its case''s, %, not %', NEW.name, v_project, NEW.project
                USING ERRCODE = 'DK015';
        END IF;
        NEW.project := v_project;
        IF NEW.state IS DISTINCT FROM 'pending' OR NEW.resolved_at IS NOT NULL OR NEW.escalation_job_id IS NOT NULL THEN
            RAISE EXCEPTION 'obligation %: an obligation is created pending and unresolved, not %', NEW.name, NEW.state
                USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    IF (NEW.id, NEW.case_id, NEW.project, NEW.name, NEW.due_at, NEW.rule, NEW.calendar_digest,
        NEW.escalation_kind, NEW.escalation_queue, NEW.escalation_payload, NEW.escalation_payload_schema,
        NEW.escalation_max_attempts, NEW.created_by, NEW.created_at)
       IS DISTINCT FROM
       (OLD.id, OLD.case_id, OLD.project, OLD.name, OLD.due_at, OLD.rule, OLD.calendar_digest,
        OLD.escalation_kind, OLD.escalation_queue, OLD.escalation_payload, OLD.escalation_payload_schema,
        OLD.escalation_max_attempts, OLD.created_by, OLD.created_at) THEN
        RAISE EXCEPTION 'obligation %: only its state, resolution and escalation job change', OLD.id
            USING ERRCODE = 'DK015';
    END IF;
    IF (SELECT terminal FROM docket.obligation_states WHERE state = OLD.state) THEN
        RAISE EXCEPTION 'obligation % is %, a terminal state: it never changes', OLD.id, OLD.state
            USING ERRCODE = 'DK001';
    END IF;
    IF NEW.state <> OLD.state AND NOT EXISTS (
        SELECT 1 FROM docket.obligation_transitions WHERE from_state = OLD.state AND to_state = NEW.state) THEN
        RAISE EXCEPTION 'obligation %: % -> % is not in docket.obligation_transitions', OLD.id, OLD.state, NEW.state
            USING ERRCODE = 'DK001';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER obligations_guard
    BEFORE INSERT OR UPDATE ON docket.obligations
    FOR EACH ROW EXECUTE FUNCTION docket.obligations_guard();

CREATE TRIGGER obligations_refuse_delete
    BEFORE DELETE ON docket.obligations
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('obligations are kept: withdraw one instead');

-- Events ------------------------------------------------------------------------

-- One row per change of a case or anything it holds. what says which:
--   created        the case was admitted (to: open)
--   status         it was closed or reopened (from, to)
--   state          its state was written (to: the new version)
--   key_claimed    it claimed a key (detail: namespace, value)
--   key_released   it released a key on closing (detail: namespace, value)
--   obligation     an obligation was registered (to: pending) or moved (from, to)
--   late_meet      a breached obligation was met after all: recorded beside
--                  the breach, which stands
CREATE TABLE docket.case_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    case_id    bigint NOT NULL REFERENCES docket.cases (id),
    what       text NOT NULL CONSTRAINT case_events_what_known CHECK (
                   what IN ('created', 'status', 'state', 'key_claimed', 'key_released', 'obligation', 'late_meet')),
    from_state text,
    to_state   text,
    actor      text NOT NULL,
    at         timestamptz NOT NULL,
    detail     jsonb CONSTRAINT case_events_detail_bounded CHECK (docket.json_size(detail) <= 4096)
);

COMMENT ON TABLE docket.case_events IS
    'Append-only history of every case change: admission, keys, state writes, status, obligations, late answers.';

-- History is one range scan of this index.
CREATE INDEX case_events_case_idx ON docket.case_events (case_id, id);

CREATE TRIGGER case_events_append_only
    BEFORE UPDATE OR DELETE ON docket.case_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- cases_record appends the case_events rows of a case's creation, status
-- change and state write, attributed to the change context.
-- +goose StatementBegin
CREATE FUNCTION docket.cases_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at, detail)
        VALUES (NEW.id, 'created', NULL, NEW.status, docket.context_actor(), docket.context_now(),
                jsonb_build_object('kind', NEW.kind));
        RETURN NULL;
    END IF;
    IF NEW.status <> OLD.status THEN
        INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at)
        VALUES (NEW.id, 'status', OLD.status, NEW.status, docket.context_actor(), docket.context_now());
    END IF;
    IF NEW.version <> OLD.version THEN
        INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at)
        VALUES (NEW.id, 'state', OLD.version::text, NEW.version::text, docket.context_actor(), docket.context_now());
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER cases_record
    AFTER INSERT OR UPDATE ON docket.cases
    FOR EACH ROW EXECUTE FUNCTION docket.cases_record();

-- case_keys_record appends key_claimed and key_released events.
-- +goose StatementBegin
CREATE FUNCTION docket.case_keys_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NOT (OLD.released_at IS NULL AND NEW.released_at IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    INSERT INTO docket.case_events (case_id, what, actor, at, detail)
    VALUES (NEW.case_id, CASE TG_OP WHEN 'INSERT' THEN 'key_claimed' ELSE 'key_released' END,
            docket.context_actor(), docket.context_now(),
            jsonb_build_object('namespace', NEW.namespace, 'value', NEW.value));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER case_keys_record
    AFTER INSERT OR UPDATE ON docket.case_keys
    FOR EACH ROW EXECUTE FUNCTION docket.case_keys_record();

-- obligations_record appends an obligation event for a registration and for
-- each move of an obligation's state.
-- +goose StatementBegin
CREATE FUNCTION docket.obligations_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        RETURN NULL;
    END IF;
    INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at, detail)
    VALUES (NEW.case_id, 'obligation', CASE WHEN TG_OP = 'UPDATE' THEN OLD.state END, NEW.state,
            docket.context_actor(), docket.context_now(),
            jsonb_strip_nulls(jsonb_build_object(
                'obligation_id', NEW.id, 'name', NEW.name, 'due_at', NEW.due_at,
                'rule', CASE WHEN TG_OP = 'INSERT' THEN NEW.rule END,
                'calendar_digest', CASE WHEN TG_OP = 'INSERT' THEN NEW.calendar_digest END,
                'escalation_job_id', NEW.escalation_job_id)));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER obligations_record
    AFTER INSERT OR UPDATE ON docket.obligations
    FOR EACH ROW EXECUTE FUNCTION docket.obligations_record();

-- Jobs of a case ------------------------------------------------------------------

-- A job may name a case of its own project. A job enqueued before cases
-- existed cannot name one, and this migration refuses to guess what it meant.
-- +goose StatementBegin
DO $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) INTO n FROM docket.jobs WHERE case_id IS NOT NULL;
    IF n > 0 THEN
        RAISE EXCEPTION '% jobs name a case_id, but no case existed before this migration: set their case_id to NULL first', n;
    END IF;
END
$$;
-- +goose StatementEnd

ALTER TABLE docket.jobs
    ADD CONSTRAINT jobs_case_fkey FOREIGN KEY (case_id, project) REFERENCES docket.cases (id, project);

-- Reading -------------------------------------------------------------------------

-- case_visible reports whether p_principal may read the cases of p_project: it
-- holds case.admit or case.view there. The Go API filters every read by it;
-- an operator in psql reads everything.
CREATE FUNCTION docket.case_visible(p_principal text, p_project text) RETURNS boolean
LANGUAGE sql STABLE
RETURN EXISTS (
    SELECT 1 FROM docket.grants
    WHERE project = p_project AND principal = p_principal AND capability IN ('case.admit', 'case.view')
);

-- Operator views ------------------------------------------------------------------
-- Storage never reads the clock: the views order by the instant that matters
-- and the reader filters with the instant they mean:
--     SELECT * FROM docket.obligations_due WHERE due_at <= '2026-11-29 10:00Z'

CREATE VIEW docket.obligations_due AS
SELECT o.id, o.case_id, o.project, c.kind AS case_kind, o.name, o.due_at, o.rule, o.calendar_digest,
       o.escalation_kind, o.created_at
FROM docket.obligations o
JOIN docket.cases c ON c.id = o.case_id
WHERE o.state = 'pending'
ORDER BY o.due_at, o.id;

COMMENT ON VIEW docket.obligations_due IS
    'Pending obligations, soonest due first. Due at instant T: WHERE due_at <= T; the breach sweep moves them.';

CREATE VIEW docket.cases_open_with_obligations AS
SELECT c.id, c.project, c.kind, c.version, count(*) AS pending, min(o.due_at) AS next_due, c.updated_at
FROM docket.cases c
JOIN docket.obligations o ON o.case_id = c.id AND o.state = 'pending'
WHERE c.status = 'open'
GROUP BY c.id
ORDER BY min(o.due_at), c.id;

COMMENT ON VIEW docket.cases_open_with_obligations IS
    'Open cases that still owe something: how many obligations are pending and when the next falls due.';

-- Protocol --------------------------------------------------------------------------

-- case_authorize returns the project of case p_id when p_actor holds case.admit
-- there, reading the case's project (which never changes) unlocked. It
-- refuses with P0002, in the same words, an unknown case and one the actor
-- may not write, so a refused caller learns nothing and waits for nobody.
-- +goose StatementBegin
CREATE FUNCTION docket.case_authorize(p_id bigint, p_actor text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_project text;
BEGIN
    SELECT project INTO v_project FROM docket.cases WHERE id = p_id;
    IF NOT FOUND OR NOT docket.grant_check(p_actor, v_project, 'case.admit') THEN
        RAISE EXCEPTION 'case % does not exist (or % holds no case.admit on its project)', coalesce(p_id::text, 'NULL'), p_actor
            USING ERRCODE = 'P0002';
    END IF;
    RETURN v_project;
END
$$;
-- +goose StatementEnd

-- case_require_keys refuses (DK010) a key set that is not 1-32 well-formed,
-- distinct (namespace, value) pairs given as parallel arrays.
-- +goose StatementBegin
CREATE FUNCTION docket.case_require_keys(p_namespaces text[], p_values text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    bad record;
BEGIN
    IF cardinality(p_namespaces) IS DISTINCT FROM cardinality(p_values) THEN
        RAISE EXCEPTION 'invalid keys: namespaces and values must be parallel arrays of one length' USING ERRCODE = 'DK010';
    END IF;
    IF cardinality(p_namespaces) NOT BETWEEN 1 AND 32 THEN
        RAISE EXCEPTION 'invalid keys: % keys, want 1..32', cardinality(p_namespaces) USING ERRCODE = 'DK010';
    END IF;
    SELECT x.ns, x.val INTO bad FROM unnest(p_namespaces, p_values) AS x(ns, val)
    WHERE NOT coalesce(docket.valid_case_key_namespace(x.ns), false) LIMIT 1;
    IF FOUND THEN
        PERFORM docket.require_valid(false, 'key namespace', bad.ns, '1-63 characters of [a-z0-9._-], starting with a letter or digit');
    END IF;
    SELECT x.ns, x.val INTO bad FROM unnest(p_namespaces, p_values) AS x(ns, val)
    WHERE NOT coalesce(docket.valid_case_key_value(x.val), false) LIMIT 1;
    IF FOUND THEN
        PERFORM docket.require_valid(false, 'key value', bad.val, '1-255 characters, no control characters, no leading or trailing space');
    END IF;
    SELECT x.ns, x.val INTO bad FROM unnest(p_namespaces, p_values) AS x(ns, val)
    GROUP BY x.ns, x.val HAVING count(*) > 1 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid keys: (%, %) is given twice', bad.ns, bad.val USING ERRCODE = 'DK010';
    END IF;
END
$$;
-- +goose StatementEnd

-- case_key_holders returns the ids of the cases of p_project that hold any of
-- the keys, ascending. VOLATILE, so each call sees what committed before it.
CREATE FUNCTION docket.case_key_holders(p_project text, p_namespaces text[], p_values text[]) RETURNS bigint[]
LANGUAGE sql VOLATILE
RETURN ARRAY(
    SELECT DISTINCT k.case_id
    FROM unnest(p_namespaces, p_values) AS x(ns, val)
    JOIN docket.case_keys k ON k.project = p_project AND k.namespace = x.ns AND k.value = x.val AND k.released_at IS NULL
    ORDER BY k.case_id);

-- case_ambiguous refuses (DK011) keys held by the open cases p_holders,
-- naming the first two.
-- +goose StatementBegin
CREATE FUNCTION docket.case_ambiguous(p_holders bigint[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RAISE EXCEPTION 'keys point at two different open cases: % and %', p_holders[1], p_holders[2]
        USING ERRCODE = 'DK011', DETAIL = 'cases ' || array_to_string(p_holders, ', ');
END
$$;
-- +goose StatementEnd

-- case_admitted is the row case_admit returns: whether the case was created by
-- this admission, and the case.
CREATE VIEW docket.case_admitted AS
SELECT false AS created, c.* FROM docket.cases c WHERE false;

-- case_admit finds the open case of p_project holding any of the keys
-- (p_namespaces[i], p_values[i]), or creates one of kind p_kind holding them
-- all, on behalf of p_actor at p_now, and returns it with created = true when
-- it is new. The keys of a found case that no case holds are attached to it;
-- p_kind is used only to create.
--
-- Concurrent admissions for one new matter make exactly one case: each tries
-- to create the case and claim its keys, and the unique index case_keys_held
-- lets one claim win; the others roll their attempt back to a savepoint, find
-- the winner's case and return it. A case found is locked (FOR NO KEY UPDATE)
-- before keys are attached, so an admission racing a close either attaches
-- before the close (which then releases them) or sees the case closed and
-- looks again. Needs READ COMMITTED: under a stricter isolation level a lost
-- race is a serialization failure (40001), to be retried.
--
-- Refuses, writing nothing: a malformed project, kind, actor, instant or key
-- set (DK010); an actor without case.admit on p_project, or an unknown
-- project (DK009); keys held by two different open cases (DK011, naming
-- both).
-- +goose StatementBegin
CREATE FUNCTION docket.case_admit(p_project text, p_kind text, p_namespaces text[], p_values text[],
                                  p_actor text, p_now timestamptz)
RETURNS SETOF docket.case_admitted
LANGUAGE plpgsql AS $$
DECLARE
    v docket.cases;
    v_holders bigint[];
    v_constraint text;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.require_valid(docket.valid_job_kind(p_kind), 'case kind', p_kind,
        'dot-separated segments of [a-z0-9_-], each starting with a letter, at most 128 characters');
    PERFORM docket.case_require_keys(p_namespaces, p_values);
    IF NOT docket.grant_check(p_actor, p_project, 'case.admit') THEN
        RAISE EXCEPTION '% may not admit cases in project %: it needs an explicit case.admit grant', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;

    FOR attempt IN 1..16 LOOP
        v_holders := docket.case_key_holders(p_project, p_namespaces, p_values);
        IF cardinality(v_holders) > 1 THEN
            PERFORM docket.case_ambiguous(v_holders);
        END IF;
        IF cardinality(v_holders) = 1 THEN
            SELECT * INTO v FROM docket.cases WHERE id = v_holders[1] FOR NO KEY UPDATE;
            IF v.status = 'open' THEN
                INSERT INTO docket.case_keys (case_id, project, namespace, value, claimed_at)
                SELECT v.id, p_project, x.ns, x.val, p_now
                FROM unnest(p_namespaces, p_values) AS x(ns, val)
                ORDER BY x.ns, x.val
                ON CONFLICT (project, namespace, value) WHERE released_at IS NULL DO NOTHING;
                v_holders := docket.case_key_holders(p_project, p_namespaces, p_values);
                IF cardinality(v_holders) > 1 THEN
                    PERFORM docket.case_ambiguous(v_holders);
                END IF;
                RETURN QUERY SELECT false, (v).*;
                RETURN;
            END IF;
            -- Closed since the keys were read: its keys are free now.
            CONTINUE;
        END IF;
        BEGIN
            INSERT INTO docket.cases (project, kind, created_by, created_at, updated_at)
            VALUES (p_project, p_kind, p_actor, p_now, p_now)
            RETURNING * INTO v;
            INSERT INTO docket.case_keys (case_id, project, namespace, value, claimed_at)
            SELECT v.id, p_project, x.ns, x.val, p_now
            FROM unnest(p_namespaces, p_values) AS x(ns, val)
            ORDER BY x.ns, x.val;
            RETURN QUERY SELECT true, (v).*;
            RETURN;
        EXCEPTION WHEN unique_violation THEN
            GET STACKED DIAGNOSTICS v_constraint = CONSTRAINT_NAME;
            IF v_constraint IS DISTINCT FROM 'case_keys_held' THEN
                RAISE;
            END IF;
            -- Another admission claimed a key first: look again.
        END;
    END LOOP;
    RAISE EXCEPTION 'case admission in project %: the keys kept changing hands; retry', p_project
        USING ERRCODE = '40001';
END
$$;
-- +goose StatementEnd

-- case_correlate returns the open case of p_project holding any of the keys,
-- or no row when none does; it creates and attaches nothing.
-- Refuses: malformed input (DK010); an actor without case.admit on p_project,
-- or an unknown project (DK009); keys held by two open cases (DK011).
-- +goose StatementBegin
CREATE FUNCTION docket.case_correlate(p_project text, p_namespaces text[], p_values text[], p_actor text)
RETURNS SETOF docket.cases
LANGUAGE plpgsql AS $$
DECLARE
    v_holders bigint[];
BEGIN
    PERFORM docket.require_principal('actor', p_actor);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.case_require_keys(p_namespaces, p_values);
    IF NOT docket.grant_check(p_actor, p_project, 'case.admit') THEN
        RAISE EXCEPTION '% may not correlate cases in project %: it needs an explicit case.admit grant', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    v_holders := docket.case_key_holders(p_project, p_namespaces, p_values);
    IF cardinality(v_holders) > 1 THEN
        PERFORM docket.case_ambiguous(v_holders);
    END IF;
    -- A case closed since its keys were read holds none now.
    RETURN QUERY SELECT * FROM docket.cases WHERE id = v_holders[1] AND status = 'open';
END
$$;
-- +goose StatementEnd

-- case_put_state writes p_state as case p_id's state if its version is still
-- p_expected_version, on behalf of p_actor at p_now, and returns the case at
-- its new version (p_expected_version + 1). The check is a predicate on the
-- one UPDATE, never a read followed by a write. The state is stored as given
-- and never interpreted.
-- Refuses, writing nothing: a malformed actor or instant, a NULL state or
-- expected version (DK010); a state over 1 MiB (23514 on case_state_size);
-- an unknown case or one the actor may not write (P0002); a closed case
-- (DK005); a version other than p_expected_version (DK004, naming the
-- current one).
-- +goose StatementBegin
CREATE FUNCTION docket.case_put_state(p_id bigint, p_expected_version bigint, p_state jsonb,
                                      p_actor text, p_now timestamptz)
RETURNS docket.cases
LANGUAGE plpgsql AS $$
DECLARE
    v docket.cases;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF p_state IS NULL THEN
        RAISE EXCEPTION 'invalid state: NULL (write {} or null JSON instead)' USING ERRCODE = 'DK010';
    END IF;
    IF p_expected_version IS NULL OR p_expected_version < 1 THEN
        RAISE EXCEPTION 'invalid expected version %: a write names the version it read (1 or more)',
            coalesce(p_expected_version::text, 'NULL') USING ERRCODE = 'DK010';
    END IF;
    PERFORM docket.case_authorize(p_id, p_actor);
    UPDATE docket.cases
    SET state = p_state, version = version + 1, updated_at = greatest(updated_at, p_now)
    WHERE id = p_id AND version = p_expected_version AND status = 'open'
    RETURNING * INTO v;
    IF FOUND THEN
        RETURN v;
    END IF;
    SELECT * INTO v FROM docket.cases WHERE id = p_id;
    IF v.status = 'closed' THEN
        RAISE EXCEPTION 'case % is closed: its state cannot be written', p_id USING ERRCODE = 'DK005';
    END IF;
    RAISE EXCEPTION 'case %: version is %, not %: its state was written since it was read', p_id, v.version, p_expected_version
        USING ERRCODE = 'DK004', DETAIL = 'current version ' || v.version;
END
$$;
-- +goose StatementEnd

-- case_close closes case p_id on behalf of p_actor at p_now and releases its
-- keys, so a new matter with the same keys opens a fresh case. Closing a
-- closed case is a no-op that returns it. Decided under the case row's lock,
-- which obligation_register takes too: no obligation can be registered
-- between the count and the close.
-- Refuses, writing nothing: a malformed actor or instant (DK010); an unknown
-- case or one the actor may not write (P0002); pending obligations (DK006,
-- naming up to ten).
-- +goose StatementBegin
CREATE FUNCTION docket.case_close(p_id bigint, p_actor text, p_now timestamptz)
RETURNS docket.cases
LANGUAGE plpgsql AS $$
DECLARE
    v docket.cases;
    v_pending text;
    v_count bigint;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.case_authorize(p_id, p_actor);
    SELECT * INTO v FROM docket.cases WHERE id = p_id FOR NO KEY UPDATE;
    IF v.status = 'closed' THEN
        RETURN v;
    END IF;
    SELECT count(*), string_agg(format('%s (%s, due %s)', name, id, due_at), ', ' ORDER BY due_at, id)
           FILTER (WHERE rn <= 10)
    INTO v_count, v_pending
    FROM (SELECT o.*, row_number() OVER (ORDER BY o.due_at, o.id) AS rn
          FROM docket.obligations o WHERE o.case_id = p_id AND o.state = 'pending') p;
    IF v_count > 0 THEN
        RAISE EXCEPTION 'case % cannot close: % obligation(s) pending: %', p_id, v_count, v_pending
            USING ERRCODE = 'DK006';
    END IF;
    UPDATE docket.case_keys SET released_at = greatest(claimed_at, p_now)
    WHERE case_id = p_id AND released_at IS NULL;
    UPDATE docket.cases SET status = 'closed', closed_at = p_now, updated_at = greatest(updated_at, p_now)
    WHERE id = p_id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- case_reopened is a row of what case_reopen returns: a key the case held
-- when it closed, and whether the reopening took it back.
CREATE VIEW docket.case_reopened AS
SELECT ''::text AS namespace, ''::text AS value, false AS taken WHERE false;

-- case_reopen reopens case p_id on behalf of p_actor at p_now and takes back
-- the keys it held when it closed that no open case has claimed since; a key
-- another case claimed stays with that case. It returns each of those keys
-- with taken true or false, by namespace and value. Reopening an open case is
-- a no-op that returns no rows.
-- Refuses, writing nothing: a malformed actor or instant (DK010); an unknown
-- case or one the actor may not write (P0002).
-- +goose StatementBegin
CREATE FUNCTION docket.case_reopen(p_id bigint, p_actor text, p_now timestamptz)
RETURNS SETOF docket.case_reopened
LANGUAGE plpgsql AS $$
DECLARE
    v docket.cases;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.case_authorize(p_id, p_actor);
    SELECT * INTO v FROM docket.cases WHERE id = p_id FOR NO KEY UPDATE;
    IF v.status = 'open' THEN
        RETURN;
    END IF;
    UPDATE docket.cases SET status = 'open', closed_at = NULL, updated_at = greatest(updated_at, p_now)
    WHERE id = p_id;
    RETURN QUERY
    WITH wanted AS (
        SELECT DISTINCT k.namespace, k.value FROM docket.case_keys k
        WHERE k.case_id = p_id AND k.released_at = greatest(k.claimed_at, v.closed_at)
    ), taken AS (
        INSERT INTO docket.case_keys (case_id, project, namespace, value, claimed_at)
        SELECT p_id, v.project, w.namespace, w.value, greatest(p_now, v.closed_at)
        FROM wanted w ORDER BY w.namespace, w.value
        ON CONFLICT (project, namespace, value) WHERE released_at IS NULL DO NOTHING
        RETURNING case_keys.namespace, case_keys.value
    )
    SELECT w.namespace, w.value, t.namespace IS NOT NULL
    FROM wanted w LEFT JOIN taken t ON t.namespace = w.namespace AND t.value = w.value
    ORDER BY w.namespace, w.value;
END
$$;
-- +goose StatementEnd

-- obligation_register registers obligation p_name of case p_id, due at
-- p_due_at, on behalf of p_actor at p_now, and returns it pending. p_rule and
-- p_calendar_digest (both or neither) record the spec the instant was resolved
-- from and the calendar that resolved it; the instant is never recomputed.
-- p_escalation_kind (NULL: none) with its queue, payload, payload schema and
-- max attempts is the job a breach enqueues, in the case's project, naming
-- the case. Registering again what is already pending under that name, on the
-- same terms, is a no-op that returns it. Decided under the case row's lock,
-- which case_close takes too.
-- Refuses, writing nothing: malformed input (DK010); an unknown case or one
-- the actor may not write (P0002); a closed case (DK005); a pending
-- obligation of that name on other terms (23505 on obligations_pending_name).
-- +goose StatementBegin
CREATE FUNCTION docket.obligation_register(
    p_case_id bigint, p_name text, p_due_at timestamptz, p_rule text, p_calendar_digest text,
    p_escalation_kind text, p_escalation_queue text, p_escalation_payload jsonb,
    p_escalation_payload_schema integer, p_escalation_max_attempts integer,
    p_actor text, p_now timestamptz)
RETURNS docket.obligations
LANGUAGE plpgsql AS $$
DECLARE
    c docket.cases;
    v docket.obligations;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(docket.valid_case_key_namespace(p_name), 'obligation name', p_name,
        '1-63 characters of [a-z0-9._-], starting with a letter or digit');
    IF p_due_at IS NULL OR NOT isfinite(p_due_at) OR p_due_at < '1970-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'invalid due instant %: want a finite instant after 1970', coalesce(p_due_at::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    IF (p_rule IS NULL) <> (p_calendar_digest IS NULL) THEN
        RAISE EXCEPTION 'invalid obligation %: a rule and a calendar digest come together, or neither', p_name
            USING ERRCODE = 'DK010';
    END IF;
    IF p_rule IS NOT NULL THEN
        PERFORM docket.require_valid(length(p_rule) BETWEEN 1 AND 500, 'rule', p_rule, '1-500 characters');
        PERFORM docket.require_valid(docket.valid_calendar_digest(p_calendar_digest), 'calendar digest', p_calendar_digest,
            'sha256: and 64 lowercase hex digits');
    END IF;
    IF p_escalation_kind IS NOT NULL THEN
        PERFORM docket.job_require_spec(1, p_escalation_kind, p_escalation_queue, p_escalation_payload,
                                        p_escalation_max_attempts);
        PERFORM docket.require_valid(p_escalation_payload_schema >= 1, 'escalation payload schema',
            p_escalation_payload_schema::text, '1 or more');
    ELSE
        -- No escalation: its other terms mean nothing, and are not stored.
        p_escalation_queue := NULL;
        p_escalation_payload := NULL;
        p_escalation_payload_schema := NULL;
        p_escalation_max_attempts := NULL;
    END IF;
    PERFORM docket.case_authorize(p_case_id, p_actor);

    SELECT * INTO c FROM docket.cases WHERE id = p_case_id FOR NO KEY UPDATE;
    IF c.status <> 'open' THEN
        RAISE EXCEPTION 'case % is closed: it cannot be given obligation %', p_case_id, p_name
            USING ERRCODE = 'DK005';
    END IF;
    SELECT * INTO v FROM docket.obligations WHERE case_id = p_case_id AND name = p_name AND state = 'pending';
    IF FOUND THEN
        IF (v.due_at, v.rule, v.calendar_digest, v.escalation_kind, v.escalation_queue, v.escalation_payload,
            v.escalation_payload_schema, v.escalation_max_attempts)
           IS NOT DISTINCT FROM
           (p_due_at, p_rule, p_calendar_digest, p_escalation_kind, p_escalation_queue, p_escalation_payload,
            p_escalation_payload_schema, p_escalation_max_attempts) THEN
            RETURN v;
        END IF;
        RAISE EXCEPTION 'case % already owes % (obligation %, due %) on other terms', p_case_id, p_name, v.id, v.due_at
            USING ERRCODE = '23505', CONSTRAINT = 'obligations_pending_name', TABLE = 'obligations', SCHEMA = 'docket';
    END IF;
    INSERT INTO docket.obligations (case_id, project, name, due_at, rule, calendar_digest, escalation_kind,
                                    escalation_queue, escalation_payload, escalation_payload_schema,
                                    escalation_max_attempts, created_by, created_at)
    VALUES (p_case_id, c.project, p_name, p_due_at, p_rule, p_calendar_digest, p_escalation_kind,
            p_escalation_queue, p_escalation_payload, p_escalation_payload_schema, p_escalation_max_attempts,
            p_actor, p_now)
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- obligation_breach moves the pending obligation p (which the caller holds
-- locked) to breached on behalf of p_actor at p_now, enqueuing its escalation
-- job (if it names one) in the same transaction, in the case's project, naming
-- the case, under idempotency key obligation:ID:breach so it is never enqueued
-- twice. Refuses as job_enqueue_one (DK009 without job.create).
-- +goose StatementBegin
CREATE FUNCTION docket.obligation_breach(p docket.obligations, p_actor text, p_now timestamptz)
RETURNS docket.obligations
LANGUAGE plpgsql AS $$
DECLARE
    v_job bigint;
    v docket.obligations;
BEGIN
    IF p.escalation_kind IS NOT NULL THEN
        SELECT e.id INTO v_job
        FROM docket.job_enqueue_one(
            p.project, p_actor, p_now, p.escalation_kind, p.escalation_queue, 1::smallint, p.escalation_payload,
            p.escalation_payload_schema, 'obligation:' || p.id || ':breach', NULL, p.escalation_max_attempts,
            false, false, interval '5 minutes', interval '1 second', interval '10 minutes', 0.2,
            NULL, '{}', '', 0, p.case_id, '') e;
    END IF;
    UPDATE docket.obligations
    SET state = 'breached', resolved_at = greatest(created_at, p_now), resolved_by = p_actor, escalation_job_id = v_job
    WHERE id = p.id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- obligation_settle moves obligation p_id to p_state (met, withdrawn or
-- breached) on behalf of p_actor at p_now and returns it. A breach enqueues
-- the escalation job the obligation names (see obligation_breach).
-- Re-applying the state it holds is a no-op that records nothing. Meeting a
-- breached obligation records a late_meet event beside the breach (once) and
-- changes nothing: the breach stands.
-- Refuses, writing nothing: a malformed state, actor or instant (DK010); an
-- unknown obligation or one whose case the actor may not write (P0002); any
-- other move out of a terminal state (DK001); a breach whose escalation the
-- actor may not enqueue (DK009).
-- +goose StatementBegin
CREATE FUNCTION docket.obligation_settle(p_id bigint, p_state text, p_actor text, p_now timestamptz)
RETURNS docket.obligations
LANGUAGE plpgsql AS $$
DECLARE
    v docket.obligations;
    v_project text;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF p_state IS NULL OR p_state NOT IN ('met', 'withdrawn', 'breached') THEN
        RAISE EXCEPTION 'invalid obligation state %: want met, withdrawn or breached',
            coalesce(quote_literal(docket.bounded_text(p_state, 80)), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    -- The privilege first, reading the project (which never changes) unlocked.
    SELECT project INTO v_project FROM docket.obligations WHERE id = p_id;
    IF NOT FOUND OR NOT docket.grant_check(p_actor, v_project, 'case.admit') THEN
        RAISE EXCEPTION 'obligation % does not exist (or % holds no case.admit on its project)', coalesce(p_id::text, 'NULL'), p_actor
            USING ERRCODE = 'P0002';
    END IF;
    SELECT * INTO v FROM docket.obligations WHERE id = p_id FOR UPDATE;
    IF v.state = p_state THEN
        RETURN v;
    END IF;
    IF v.state = 'breached' AND p_state = 'met' THEN
        IF NOT EXISTS (SELECT 1 FROM docket.case_events e
                       WHERE e.case_id = v.case_id AND e.what = 'late_meet' AND (e.detail ->> 'obligation_id')::bigint = v.id) THEN
            INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at, detail)
            VALUES (v.case_id, 'late_meet', 'breached', 'met', p_actor, p_now,
                    jsonb_build_object('obligation_id', v.id, 'name', v.name, 'due_at', v.due_at,
                                       'breached_at', v.resolved_at));
        END IF;
        RETURN v;
    END IF;
    IF v.state <> 'pending' THEN
        RAISE EXCEPTION 'obligation % is %, a terminal state: it cannot become %', v.id, v.state, p_state
            USING ERRCODE = 'DK001';
    END IF;
    IF p_state = 'breached' THEN
        RETURN docket.obligation_breach(v, p_actor, p_now);
    END IF;
    UPDATE docket.obligations SET state = p_state, resolved_at = greatest(created_at, p_now), resolved_by = p_actor
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- obligation_breach_due is the breach sweep: it moves up to p_limit pending
-- obligations due at p_now (due_at <= p_now), soonest first, to breached on
-- behalf of p_actor, each enqueuing its escalation job, and returns them. It
-- looks only at projects where p_actor holds case.sweep, and at obligations
-- with an escalation only where it also holds job.create. A range scan of
-- obligations_due_idx; obligations another sweeper holds locked are skipped,
-- never waited for, so several sweepers may run at once.
-- Refuses: a malformed actor or instant, a limit outside 1..10000 (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.obligation_breach_due(p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.obligations
LANGUAGE plpgsql AS $$
DECLARE
    o docket.obligations;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep batch', p_limit, 10000);
    FOR o IN
        SELECT * FROM docket.obligations
        WHERE state = 'pending' AND due_at <= p_now
          AND docket.grant_check(p_actor, project, 'case.sweep')
          AND (escalation_kind IS NULL OR docket.grant_check(p_actor, project, 'job.create'))
        ORDER BY due_at, id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        RETURN NEXT docket.obligation_breach(o, p_actor, p_now);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION docket.obligation_breach_due(integer, text, timestamptz);
DROP FUNCTION docket.obligation_settle(bigint, text, text, timestamptz);
DROP FUNCTION docket.obligation_breach(docket.obligations, text, timestamptz);
DROP FUNCTION docket.obligation_register(bigint, text, timestamptz, text, text, text, text, jsonb, integer, integer, text, timestamptz);
DROP FUNCTION docket.case_reopen(bigint, text, timestamptz);
DROP VIEW docket.case_reopened;
DROP FUNCTION docket.case_close(bigint, text, timestamptz);
DROP FUNCTION docket.case_put_state(bigint, bigint, jsonb, text, timestamptz);
DROP FUNCTION docket.case_correlate(text, text[], text[], text);
DROP FUNCTION docket.case_admit(text, text, text[], text[], text, timestamptz);
DROP VIEW docket.case_admitted;
DROP FUNCTION docket.case_ambiguous(bigint[]);
DROP FUNCTION docket.case_key_holders(text, text[], text[]);
DROP FUNCTION docket.case_require_keys(text[], text[]);
DROP FUNCTION docket.case_authorize(bigint, text);
DROP VIEW docket.cases_open_with_obligations;
DROP VIEW docket.obligations_due;
DROP FUNCTION docket.case_visible(text, text);
ALTER TABLE docket.jobs DROP CONSTRAINT jobs_case_fkey;
DROP TABLE docket.case_events;
DROP TABLE docket.obligations;
DROP FUNCTION docket.obligations_record();
DROP FUNCTION docket.obligations_guard();
DROP TABLE docket.case_keys;
DROP FUNCTION docket.case_keys_record();
DROP FUNCTION docket.case_keys_guard();
DROP TABLE docket.cases;
DROP FUNCTION docket.cases_record();
DROP FUNCTION docket.cases_guard();
DROP TABLE docket.obligation_transitions;
DROP TABLE docket.obligation_states;
DROP TABLE docket.case_transitions;
DROP TABLE docket.case_states;
-- A capability still granted stays: revoking grants is a recorded act.
DELETE FROM docket.capabilities c WHERE c.name IN ('case.view', 'case.sweep')
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
UPDATE docket.capabilities SET description = 'admit and correlate cases of the project' WHERE name = 'case.admit';
DROP DOMAIN docket.case_state;
DROP FUNCTION docket.valid_calendar_digest(text);
DROP FUNCTION docket.valid_case_key_value(text);
DROP FUNCTION docket.valid_case_key_namespace(text);
