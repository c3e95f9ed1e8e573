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
--   * a closed case owes nothing: the UPDATE that closes it refuses while an
--     obligation is pending (DK006), an obligation, wait, timer or key is
--     made only on an open case, under a share lock of its row (DK005), and
--     closing releases the case's keys in the same statement; a key is
--     released only by its case's closing (DK001);
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
--
-- The messages, waits and timers of cases follow in the second part of this
-- file; a case's rules over all its tables are triggers here, so they bind
-- every writer, the owner's hand-written SQL included.

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

-- Malformed arguments are refused (DK010) through docket.require_valid,
-- which names the field, the value and the rule.

-- Capabilities ---------------------------------------------------------------

INSERT INTO docket.capabilities (name, description) VALUES
    ('case.admit', 'admit, correlate, write, close and reopen cases of the project and settle their obligations'),
    ('case.view', 'read the project''s cases, keys, obligations and history'),
    ('case.sweep', 'run the project''s deadline sweeps: breach due obligations, expire due waits, dead-letter unclaimed messages (enqueuing their jobs also needs job.create)'),
    ('message.deliver', 'deliver inbound messages to the project''s waits (with job.create) and read its messages');

-- States and transitions --------------------------------------------------------

-- The machines of this file change only here (docket.refuse_machine_change).
SET LOCAL docket.migrating = 'on';

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('case', 'docket.cases.status', 'a case: open or closed');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'case', * FROM (VALUES
    ('open', true, false, 'the matter is live: its keys correlate, its state is written, it may owe things'),
    ('closed', false, false, 'the matter is settled: it owes nothing and holds no keys; it may be reopened')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'case', from_state, to_state, NULL FROM (VALUES
    ('open', 'closed'),
    ('closed', 'open')) v (from_state, to_state);

SELECT docket.machine_views('case');

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('obligation', 'docket.obligations.state', 'what a case owes: pending until met, breached or withdrawn');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'obligation', * FROM (VALUES
    ('pending', true, false, 'owed, not yet due or not yet swept'),
    ('met', false, true, 'answered in time'),
    ('breached', false, true, 'its deadline passed unmet; its escalation was enqueued'),
    ('withdrawn', false, true, 'no longer owed')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'obligation', from_state, to_state, NULL FROM (VALUES
    ('pending', 'met'),
    ('pending', 'breached'),
    ('pending', 'withdrawn')) v (from_state, to_state);

SELECT docket.machine_views('obligation');

-- Cases -------------------------------------------------------------------------

CREATE TABLE docket.cases (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project    text NOT NULL REFERENCES docket.projects (name),
    kind       text NOT NULL CONSTRAINT cases_kind_valid CHECK (docket.valid_job_kind(kind)),
    status     text NOT NULL DEFAULT 'open',
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

-- cases_guard holds every INSERT and UPDATE of docket.cases to the case
-- machine: a case is born in an initial state (open) at version 1 (DK001)
-- and its status moves only along docket.case_transitions (DK001). What is
-- particular to cases: a closed case's state and version never change
-- (DK005); a change of state moves the version on by one, whatever the
-- writer set, and the version never moves otherwise by more than one
-- (DK015).
-- +goose StatementBegin
CREATE FUNCTION docket.cases_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM docket.machine_birth('case', 'case', NEW.status);
        IF NEW.version IS DISTINCT FROM 1 OR NEW.closed_at IS NOT NULL THEN
            RAISE EXCEPTION 'case: a case is created at version 1, not closed, not at version %', NEW.version
                USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('case', 'case ' || OLD.id, OLD.status, NEW.status);
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

CREATE TRIGGER cases_columns_immutable
    BEFORE UPDATE OF id, project, kind, created_by, created_at ON docket.cases
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

CREATE TRIGGER cases_refuse_delete
    BEFORE DELETE ON docket.cases
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('cases are kept with their history: close a case instead');

CREATE TRIGGER project_takes_work
    BEFORE INSERT ON docket.cases
    FOR EACH ROW EXECUTE FUNCTION docket.project_takes_work();

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
-- otherwise), with the case's project; afterwards only released_at may be set
-- (case_keys_columns_immutable), once (DK015).
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
    IF OLD.released_at IS NOT NULL AND NEW.released_at IS DISTINCT FROM OLD.released_at THEN
        RAISE EXCEPTION 'case key %: released_at is set once', OLD.id
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER case_keys_guard
    BEFORE INSERT OR UPDATE ON docket.case_keys
    FOR EACH ROW EXECUTE FUNCTION docket.case_keys_guard();

CREATE TRIGGER case_keys_columns_immutable
    BEFORE UPDATE OF id, case_id, project, namespace, value, claimed_at ON docket.case_keys
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

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
    state                     text NOT NULL DEFAULT 'pending',
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
        PERFORM docket.machine_birth('obligation', 'obligation ' || NEW.name, NEW.state);
        IF NEW.resolved_at IS NOT NULL OR NEW.escalation_job_id IS NOT NULL THEN
            RAISE EXCEPTION 'obligation %: an obligation is created unresolved, with no escalation', NEW.name
                USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('obligation', 'obligation ' || OLD.id, OLD.state, NEW.state);
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER obligations_guard
    BEFORE INSERT OR UPDATE ON docket.obligations
    FOR EACH ROW EXECUTE FUNCTION docket.obligations_guard();

CREATE TRIGGER obligations_columns_immutable
    BEFORE UPDATE OF id, case_id, project, name, due_at, rule, calendar_digest, escalation_kind,
                     escalation_queue, escalation_payload, escalation_payload_schema,
                     escalation_max_attempts, created_by, created_at
    ON docket.obligations
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

CREATE TRIGGER obligations_refuse_delete
    BEFORE DELETE ON docket.obligations
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('obligations are kept: withdraw one instead');

-- Closing a case ----------------------------------------------------------------

-- cases_close_owes_nothing refuses (DK006) closing a case with a pending
-- obligation, by any writer. The UPDATE holds the case row, and
-- obligations_guard takes a share lock on it before registering, so no
-- obligation is registered between this check and the close.
-- +goose StatementBegin
CREATE FUNCTION docket.cases_close_owes_nothing() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_pending text;
BEGIN
    SELECT string_agg(format('%s (%s)', o.name, o.id), ', ' ORDER BY o.due_at, o.id) INTO v_pending
    FROM docket.obligations o WHERE o.case_id = NEW.id AND o.state = 'pending';
    IF v_pending IS NOT NULL THEN
        RAISE EXCEPTION 'case % cannot close: obligation(s) pending: %', NEW.id, v_pending
            USING ERRCODE = 'DK006';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER cases_close_owes_nothing
    BEFORE UPDATE ON docket.cases
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM 'closed' AND NEW.status = 'closed')
    EXECUTE FUNCTION docket.cases_close_owes_nothing();

-- cases_close_releases_keys releases the keys a closing case holds, at the
-- instant it closed, by any writer. Named to fire before cases_record, so a
-- case's history shows its keys released, then its close.
-- +goose StatementBegin
CREATE FUNCTION docket.cases_close_releases_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE docket.case_keys SET released_at = greatest(claimed_at, NEW.closed_at)
    WHERE case_id = NEW.id AND released_at IS NULL;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER cases_close_releases_keys
    AFTER UPDATE ON docket.cases
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM 'closed' AND NEW.status = 'closed')
    EXECUTE FUNCTION docket.cases_close_releases_keys();

-- case_keys_release_on_close refuses (DK001) releasing a key of a case that
-- is not closed: only its closing releases it.
-- +goose StatementBegin
CREATE FUNCTION docket.case_keys_release_on_close() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT status FROM docket.cases WHERE id = NEW.case_id) IS DISTINCT FROM 'closed' THEN
        RAISE EXCEPTION 'case key %: case % is open: a key is released only when its case closes', OLD.id, OLD.case_id
            USING ERRCODE = 'DK001';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER case_keys_release_on_close
    BEFORE UPDATE ON docket.case_keys
    FOR EACH ROW WHEN (OLD.released_at IS NULL AND NEW.released_at IS NOT NULL)
    EXECUTE FUNCTION docket.case_keys_release_on_close();

-- obligations_on_open_case refuses (DK005) an obligation registered on a
-- closed case, by any writer, under a share lock of the case row that a
-- close's UPDATE must wait for.
-- +goose StatementBegin
CREATE FUNCTION docket.obligations_on_open_case() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT status FROM docket.cases WHERE id = NEW.case_id FOR SHARE) = 'closed' THEN
        RAISE EXCEPTION 'case % is closed: it cannot owe %', NEW.case_id, NEW.name
            USING ERRCODE = 'DK005';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER obligations_on_open_case
    BEFORE INSERT ON docket.obligations
    FOR EACH ROW EXECUTE FUNCTION docket.obligations_on_open_case();

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
                   what IN ('created', 'status', 'state', 'key_claimed', 'key_released', 'obligation', 'late_meet',
                            'wait', 'message', 'timer')),
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
LANGUAGE plpgsql STABLE AS $$
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
LANGUAGE plpgsql STABLE AS $$
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

-- case_close closes case p_id on behalf of p_actor at p_now; its keys are
-- released and its waits, buffered addressed messages and unfired timers
-- settled by the closing UPDATE's triggers. Closing a closed case is a
-- no-op that returns it. The pending check is made under the case row's lock,
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

-- ==============================================================================
-- Durable waits: messages, waits and timers
--
-- Where an inbound message and the case waiting for it meet,
-- whichever comes first, and what happens when neither comes.
--
--   message   buffered -> consumed | dead_lettered   (docket.message_transitions)
--   wait      waiting  -> satisfied | expired | withdrawn (docket.wait_transitions)
--   timer     a job of the case with available_at at its wake instant
--
-- The invariants live here, for every writer, psql included:
--   * a message is stored before anything looks for its waiter, and is
--     deduplicated on (project, producer, message_id): a producer's retry is
--     the same message, the same id from two producers is two messages;
--   * a message is consumed by at most one wait and a wait satisfied by at
--     most one message: the match locks both rows, and each names the other
--     (messages_consumed_iff_wait, waits_satisfied_iff_message, both unique);
--   * deliveries and waits on one key are decided one at a time: both take a
--     transaction-scoped advisory lock per key (message_lock_keys) before
--     storing and looking, so whichever commits second sees the first --
--     the two meet in the store, not in time;
--   * every wait has a deadline, after the instant it was registered and at
--     most 3650 days (about ten years) ahead (waits_deadline_bounded);
--   * a closed case waits for nothing: closing withdraws its waits,
--     dead-letters the messages addressed to it that it never consumed and
--     cancels its timers that have not fired (cases_settle_waits), and a wait
--     or timer is registered only on an open case, under the case row's lock;
--   * terminal states never change (messages_guard, waits_guard); nothing is
--     deleted;
--   * every change of a case's waits, timers and addressed messages appends a
--     docket.case_events row.
--
-- Matching: a wait names 1-32 keys; a message is filed under 1-32 keys; the
-- message satisfies the wait when it is filed under every key the wait names
-- (and, when addressed to a case, the wait is that case's). Oldest first on
-- both sides. A message that arrives after a wait's deadline does not satisfy
-- it, whether or not the expiry sweep has run.
--
-- Who may do what (explicit grants on the project):
--   message.deliver  deliver messages (with job.create: a delivery may enqueue
--                    the continuation of the wait it satisfies); read messages
--   case.admit       register and withdraw waits, set timers (with
--                    job.create); read waits and messages
--   case.view        read waits and messages
--   case.sweep       expire due waits (with job.create where a wait names a
--                    timeout continuation) and dead-letter unclaimed messages
--
-- Bounds: producer 1-128 characters; message id 1-255; 1-32 keys; payload
-- 60 KiB of JSON (it rides in the continuation job's params, 64 KiB); wait
-- and timer names 1-63; deadlines and wake instants at most 3650 days ahead;
-- dead-letter horizon 1 minute to 366 days; sweep batch 1..10000.
-- ==============================================================================

-- Names and bounds ------------------------------------------------------------

-- A producer: who sent a message, in its own words, e.g. supplier:4711 or
-- edi-gateway. 1-128 characters, no control characters, no leading or
-- trailing space.
CREATE FUNCTION docket.valid_message_producer(p_producer text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_producer) BETWEEN 1 AND 128 AND p_producer !~ '[[:cntrl:]]' AND p_producer = btrim(p_producer);

-- A key set as stored: 1-32 distinct 'namespace:value' strings in byte order
-- (the namespace holds no ':', so the first ':' splits them).
-- +goose StatementBegin
CREATE FUNCTION docket.valid_wait_keys(p_keys text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT cardinality(p_keys) BETWEEN 1 AND 32
       AND array_ndims(p_keys) = 1
       AND p_keys = ARRAY(SELECT d.k FROM (SELECT DISTINCT k FROM unnest(p_keys) k) d ORDER BY d.k COLLATE "C")
       AND NOT EXISTS (
           SELECT 1 FROM unnest(p_keys) k
           WHERE k IS NULL OR strpos(k, ':') = 0
              OR NOT docket.valid_case_key_namespace(split_part(k, ':', 1))
              OR NOT docket.valid_case_key_value(substr(k, strpos(k, ':') + 1)));
END;
-- +goose StatementEnd

-- wait_keys returns the keys (p_namespaces[i], p_values[i]) as stored:
-- 'namespace:value', distinct, in byte order. Refuses malformed keys as
-- case_require_keys does (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.wait_keys(p_namespaces text[], p_values text[]) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.case_require_keys(p_namespaces, p_values);
    RETURN ARRAY(SELECT x.ns || ':' || x.val FROM unnest(p_namespaces, p_values) AS x(ns, val)
                 ORDER BY x.ns || ':' || x.val COLLATE "C");
END
$$;
-- +goose StatementEnd

-- The most JSON a message may carry: with its envelope it must fit the 64 KiB
-- of a job's params, where the continuation that consumes it finds it.
CREATE DOMAIN docket.message_payload AS jsonb
    CONSTRAINT message_payload_size CHECK (docket.json_size(VALUE) <= 61440);

-- States and transitions --------------------------------------------------------

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('message', 'docket.messages.status', 'an inbound message: buffered until consumed or dead-lettered');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'message', * FROM (VALUES
    ('buffered', true, false, 'stored; no wait has claimed it yet'),
    ('consumed', false, true, 'a wait claimed it and its continuation was enqueued'),
    ('dead_lettered', false, true, 'no wait will claim it: unclaimed past the horizon, or its addressee closed')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'message', from_state, to_state, NULL FROM (VALUES
    ('buffered', 'consumed'),
    ('buffered', 'dead_lettered')) v (from_state, to_state);

SELECT docket.machine_views('message');

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('wait', 'docket.waits.status', 'a durable wait: waiting until satisfied, expired or withdrawn');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'wait', * FROM (VALUES
    ('waiting', true, false, 'registered; no message has satisfied it and its deadline has not been swept'),
    ('satisfied', false, true, 'a message satisfied it and its arrival continuation was enqueued'),
    ('expired', false, true, 'its deadline passed first; its timeout continuation (if any) was enqueued'),
    ('withdrawn', false, true, 'no longer waited for: withdrawn, or its case closed')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'wait', from_state, to_state, NULL FROM (VALUES
    ('waiting', 'satisfied'),
    ('waiting', 'expired'),
    ('waiting', 'withdrawn')) v (from_state, to_state);

SELECT docket.machine_views('wait');

-- Messages ---------------------------------------------------------------------

CREATE TABLE docket.messages (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project            text NOT NULL REFERENCES docket.projects (name),
    producer           text NOT NULL CONSTRAINT messages_producer_valid CHECK (docket.valid_message_producer(producer)),
    -- The producer's own id for the message.
    message_id         text NOT NULL CONSTRAINT messages_message_id_valid CHECK (docket.valid_case_key_value(message_id)),
    keys               text[] NOT NULL CONSTRAINT messages_keys_valid CHECK (docket.valid_wait_keys(keys)),
    payload            docket.message_payload NOT NULL,
    -- The one case it was sent to, by name; NULL: any wait on its keys.
    addressee          bigint,
    status             text NOT NULL DEFAULT 'buffered',
    arrived_at         timestamptz NOT NULL CONSTRAINT messages_arrived_at_finite CHECK (isfinite(arrived_at)),
    delivered_by       docket.principal NOT NULL,
    -- The wait that consumed it.
    consumed_by        bigint,
    -- When it was consumed or dead-lettered, and why it was dead-lettered.
    settled_at         timestamptz,
    dead_letter_reason text CONSTRAINT messages_dead_letter_reason_bounded CHECK (length(dead_letter_reason) BETWEEN 1 AND 500),
    CONSTRAINT messages_producer_message_key UNIQUE (project, producer, message_id),
    CONSTRAINT messages_addressee_fkey FOREIGN KEY (addressee, project) REFERENCES docket.cases (id, project),
    CONSTRAINT messages_consumed_iff_wait CHECK ((status = 'consumed') = (consumed_by IS NOT NULL)),
    CONSTRAINT messages_dead_iff_reason CHECK ((status = 'dead_lettered') = (dead_letter_reason IS NOT NULL)),
    CONSTRAINT messages_settled_iff_not_buffered CHECK ((status = 'buffered') = (settled_at IS NULL)),
    CONSTRAINT messages_settled_after_arrival CHECK (settled_at >= arrived_at)
);

COMMENT ON TABLE docket.messages IS
    'Inbound messages, stored before anything looks for their waiter; status moves along docket.message_transitions.';

-- The dead-letter sweep's range scan: buffered messages by arrival.
CREATE INDEX messages_buffered_idx ON docket.messages (arrived_at, id) WHERE status = 'buffered';
-- A wait looking in the buffer: buffered messages filed under all its keys.
-- fastupdate off: a lookup never walks a pending list of recent arrivals.
CREATE INDEX messages_buffered_keys_idx ON docket.messages USING gin (keys) WITH (fastupdate = off)
    WHERE status = 'buffered';
CREATE INDEX messages_addressee_idx ON docket.messages (addressee, id) WHERE addressee IS NOT NULL;
CREATE UNIQUE INDEX messages_consumed_by_key ON docket.messages (consumed_by) WHERE consumed_by IS NOT NULL;
CREATE INDEX messages_dead_idx ON docket.messages (project, id) WHERE status = 'dead_lettered';

-- Waits ------------------------------------------------------------------------

CREATE TABLE docket.waits (
    id                        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    case_id                   bigint NOT NULL,
    -- Copied from the case by waits_guard; never changes.
    project                   text NOT NULL,
    name                      text NOT NULL CONSTRAINT waits_name_valid CHECK (docket.valid_case_key_namespace(name)),
    keys                      text[] NOT NULL CONSTRAINT waits_keys_valid CHECK (docket.valid_wait_keys(keys)),
    deadline                  timestamptz NOT NULL CONSTRAINT waits_deadline_finite CHECK (isfinite(deadline)),
    -- The job a message's arrival enqueues: required.
    on_arrival_kind           docket.job_kind NOT NULL,
    on_arrival_queue          docket.job_queue NOT NULL,
    on_arrival_payload        docket.job_json NOT NULL,
    on_arrival_payload_schema integer NOT NULL CONSTRAINT waits_on_arrival_payload_schema_positive CHECK (on_arrival_payload_schema >= 1),
    on_arrival_max_attempts   integer NOT NULL CONSTRAINT waits_on_arrival_max_attempts_range CHECK (on_arrival_max_attempts BETWEEN 1 AND 100),
    -- The job the deadline enqueues: all of it or none.
    on_timeout_kind           docket.job_kind,
    on_timeout_queue          docket.job_queue,
    on_timeout_payload        docket.job_json,
    on_timeout_payload_schema integer CONSTRAINT waits_on_timeout_payload_schema_positive CHECK (on_timeout_payload_schema >= 1),
    on_timeout_max_attempts   integer CONSTRAINT waits_on_timeout_max_attempts_range CHECK (on_timeout_max_attempts BETWEEN 1 AND 100),
    status                    text NOT NULL DEFAULT 'waiting',
    -- The message that satisfied it, and the job its end enqueued.
    satisfied_by              bigint REFERENCES docket.messages (id),
    continuation_job_id       bigint REFERENCES docket.jobs (id),
    created_by                docket.principal NOT NULL,
    created_at                timestamptz NOT NULL,
    settled_at                timestamptz,
    settled_by                docket.principal,
    CONSTRAINT waits_case_fkey FOREIGN KEY (case_id, project) REFERENCES docket.cases (id, project),
    CONSTRAINT waits_deadline_after_creation CHECK (deadline > created_at),
    CONSTRAINT waits_deadline_bounded CHECK (deadline <= created_at + interval '3650 days'),
    CONSTRAINT waits_on_timeout_whole CHECK (
        (on_timeout_kind IS NULL) = (on_timeout_queue IS NULL)
        AND (on_timeout_kind IS NULL) = (on_timeout_payload IS NULL)
        AND (on_timeout_kind IS NULL) = (on_timeout_payload_schema IS NULL)
        AND (on_timeout_kind IS NULL) = (on_timeout_max_attempts IS NULL)),
    CONSTRAINT waits_satisfied_iff_message CHECK ((status = 'satisfied') = (satisfied_by IS NOT NULL)),
    CONSTRAINT waits_continuation_only_settled CHECK (continuation_job_id IS NULL OR status IN ('satisfied', 'expired')),
    CONSTRAINT waits_settled_iff_not_waiting CHECK (
        (status = 'waiting') = (settled_at IS NULL) AND (settled_at IS NULL) = (settled_by IS NULL))
);

COMMENT ON TABLE docket.waits IS
    'What a case waits for: a message on its keys before a deadline. Status moves along docket.wait_transitions.';

-- Messages and waits name each other; the reference from messages waits for
-- the waits table.
ALTER TABLE docket.messages
    ADD CONSTRAINT messages_consumed_by_fkey FOREIGN KEY (consumed_by) REFERENCES docket.waits (id);

-- The expiry sweep's range scan: waiting waits by deadline.
CREATE INDEX waits_deadline_idx ON docket.waits (deadline, id) WHERE status = 'waiting';
-- A delivery looking for its waiter: waiting waits whose keys its keys cover.
CREATE INDEX waits_waiting_keys_idx ON docket.waits USING gin (keys) WITH (fastupdate = off)
    WHERE status = 'waiting';
CREATE INDEX waits_case_idx ON docket.waits (case_id, id);
-- A case waits for one thing of a name at a time.
CREATE UNIQUE INDEX waits_waiting_name ON docket.waits (case_id, name) WHERE status = 'waiting';
CREATE UNIQUE INDEX waits_satisfied_by_key ON docket.waits (satisfied_by) WHERE satisfied_by IS NOT NULL;

-- Timers -----------------------------------------------------------------------

-- A timer is a job of the case, available at the wake instant. This row
-- records the instant it was set for, which is the wake it reports however
-- late it runs.
CREATE TABLE docket.timers (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    case_id    bigint NOT NULL,
    project    text NOT NULL,
    name       text NOT NULL CONSTRAINT timers_name_valid CHECK (docket.valid_case_key_namespace(name)),
    wake_at    timestamptz NOT NULL CONSTRAINT timers_wake_at_finite CHECK (isfinite(wake_at)),
    job_id     bigint NOT NULL REFERENCES docket.jobs (id),
    created_by docket.principal NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT timers_case_fkey FOREIGN KEY (case_id, project) REFERENCES docket.cases (id, project),
    CONSTRAINT timers_job_key UNIQUE (job_id),
    -- A timer is its case, name and instant: setting it again is a retry.
    CONSTRAINT timers_case_name_wake_key UNIQUE (case_id, name, wake_at),
    CONSTRAINT timers_wake_at_bounded CHECK (wake_at <= created_at + interval '3650 days')
);

COMMENT ON TABLE docket.timers IS
    'Durable timers: each is a job of its case available at wake_at; the job''s state says whether it fired.';

-- Guards -------------------------------------------------------------------------

-- messages_guard: a message is born buffered and unsettled (DK001); nothing
-- but its status, consumer, settlement and reason ever changes (DK015); its
-- status moves only along docket.message_transitions, and a terminal message
-- never changes at all (DK001). An UPDATE that changes nothing passes.
-- +goose StatementBegin
CREATE FUNCTION docket.messages_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM docket.machine_birth('message', format('message %s/%s', NEW.producer, NEW.message_id), NEW.status);
        IF NEW.consumed_by IS NOT NULL OR NEW.settled_at IS NOT NULL OR NEW.dead_letter_reason IS NOT NULL THEN
            RAISE EXCEPTION 'message %/%: a message is stored unconsumed and unsettled', NEW.producer, NEW.message_id
                USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('message', 'message ' || OLD.id, OLD.status, NEW.status);
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER messages_guard
    BEFORE INSERT OR UPDATE ON docket.messages
    FOR EACH ROW EXECUTE FUNCTION docket.messages_guard();

CREATE TRIGGER messages_columns_immutable
    BEFORE UPDATE OF id, project, producer, message_id, keys, payload, addressee, arrived_at,
                     delivered_by
    ON docket.messages
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

CREATE TRIGGER messages_refuse_delete
    BEFORE DELETE ON docket.messages
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('messages are kept: a message no wait will claim is dead-lettered');

-- waits_guard: a wait is born waiting, unsettled, on an open case whose row
-- it locks (FOR SHARE, so a close waits for it or it sees the close: DK005),
-- with the case's project (DK015); nothing but its status, its message, its
-- continuation job and settlement ever changes (DK015); its status moves only
-- along docket.wait_transitions, and a terminal wait never changes (DK001);
-- a wait is satisfied only by a message that matches it (DK001).
-- +goose StatementBegin
CREATE FUNCTION docket.waits_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c docket.cases;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT * INTO c FROM docket.cases WHERE id = NEW.case_id FOR SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'wait %: case % does not exist', NEW.name, coalesce(NEW.case_id::text, 'NULL')
                USING ERRCODE = '23503', CONSTRAINT = 'waits_case_fkey', TABLE = 'waits', SCHEMA = 'docket';
        END IF;
        IF NEW.project IS DISTINCT FROM c.project AND NEW.project IS NOT NULL THEN
            RAISE EXCEPTION 'wait %: its project is its case''s, %, not %', NEW.name, c.project, NEW.project
                USING ERRCODE = 'DK015';
        END IF;
        NEW.project := c.project;
        IF c.status <> 'open' THEN
            RAISE EXCEPTION 'case % is closed: it cannot wait for %', c.id, NEW.name USING ERRCODE = 'DK005';
        END IF;
        PERFORM docket.machine_birth('wait', 'wait ' || NEW.name, NEW.status);
        IF NEW.satisfied_by IS NOT NULL OR NEW.continuation_job_id IS NOT NULL OR NEW.settled_at IS NOT NULL THEN
            RAISE EXCEPTION 'wait %: a wait is registered unsatisfied, with no continuation', NEW.name USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('wait', 'wait ' || OLD.id, OLD.status, NEW.status);
    -- The matching rule, for every writer: the message is the project's,
    -- filed under every key the wait names, arrived before its deadline, and
    -- addressed to no case or to this one.
    IF NEW.status = 'satisfied' AND NEW.satisfied_by IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM docket.messages m
        WHERE m.id = NEW.satisfied_by AND m.project = NEW.project AND m.keys @> NEW.keys
          AND m.arrived_at < NEW.deadline AND (m.addressee IS NULL OR m.addressee = NEW.case_id)) THEN
        RAISE EXCEPTION 'wait %: message % does not satisfy it (keys, project, deadline or addressee)', OLD.id, NEW.satisfied_by
            USING ERRCODE = 'DK001';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER waits_guard
    BEFORE INSERT OR UPDATE ON docket.waits
    FOR EACH ROW EXECUTE FUNCTION docket.waits_guard();

CREATE TRIGGER waits_columns_immutable
    BEFORE UPDATE OF id, case_id, project, name, keys, deadline, on_arrival_kind, on_arrival_queue,
                     on_arrival_payload, on_arrival_payload_schema, on_arrival_max_attempts,
                     on_timeout_kind, on_timeout_queue, on_timeout_payload,
                     on_timeout_payload_schema, on_timeout_max_attempts, created_by, created_at
    ON docket.waits
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

CREATE TRIGGER waits_refuse_delete
    BEFORE DELETE ON docket.waits
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('waits are kept: withdraw one instead');

-- timers_guard: a timer is set on an open case whose row it locks (FOR SHARE),
-- with the case's project, and never changes: its job's state says whether
-- it fired.
-- +goose StatementBegin
CREATE FUNCTION docket.timers_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c docket.cases;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'timer %: a timer never changes; its job''s state says whether it fired', OLD.id
            USING ERRCODE = 'DK015';
    END IF;
    SELECT * INTO c FROM docket.cases WHERE id = NEW.case_id FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'timer %: case % does not exist', NEW.name, coalesce(NEW.case_id::text, 'NULL')
            USING ERRCODE = '23503', CONSTRAINT = 'timers_case_fkey', TABLE = 'timers', SCHEMA = 'docket';
    END IF;
    IF c.status <> 'open' THEN
        RAISE EXCEPTION 'case % is closed: it cannot set timer %', c.id, NEW.name USING ERRCODE = 'DK005';
    END IF;
    NEW.project := c.project;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER timers_guard
    BEFORE INSERT OR UPDATE ON docket.timers
    FOR EACH ROW EXECUTE FUNCTION docket.timers_guard();

CREATE TRIGGER timers_refuse_delete
    BEFORE DELETE ON docket.timers
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('timers are kept: closing the case cancels the ones not fired');

-- Waits and messages ----------------------------------------------------------

-- waits_messages_agree checks, when the transaction commits, that a wait and
-- the message it consumed name each other: a satisfied wait's satisfied_by is
-- a consumed message whose consumed_by is that wait, and a consumed message's
-- consumed_by is a satisfied wait whose satisfied_by is that message
-- (DK001). A dead letter, or a message another wait took, satisfies nothing.
-- +goose StatementBegin
CREATE FUNCTION docket.waits_messages_agree() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'waits' THEN
        IF (NEW.status = 'satisfied') <> (NEW.satisfied_by IS NOT NULL) OR (NEW.satisfied_by IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM docket.messages m
            WHERE m.id = NEW.satisfied_by AND m.status = 'consumed' AND m.consumed_by = NEW.id)) THEN
            RAISE EXCEPTION 'wait %: % by message %, which was not consumed by it', NEW.id, NEW.status,
                coalesce(NEW.satisfied_by::text, 'none')
                USING ERRCODE = 'DK001';
        END IF;
    ELSIF (NEW.status = 'consumed') <> (NEW.consumed_by IS NOT NULL) OR (NEW.consumed_by IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM docket.waits w
            WHERE w.id = NEW.consumed_by AND w.status = 'satisfied' AND w.satisfied_by = NEW.id)) THEN
        RAISE EXCEPTION 'message %: % by wait %, which it did not satisfy', NEW.id, NEW.status,
            coalesce(NEW.consumed_by::text, 'none')
            USING ERRCODE = 'DK001';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER waits_messages_agree
    AFTER INSERT OR UPDATE OF status, satisfied_by ON docket.waits
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION docket.waits_messages_agree();

CREATE CONSTRAINT TRIGGER messages_waits_agree
    AFTER INSERT OR UPDATE OF status, consumed_by ON docket.messages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION docket.waits_messages_agree();

-- Events ------------------------------------------------------------------------
-- New kinds of case event:
--   wait      a wait was registered (to: waiting) or ended (from, to), with
--             the message that satisfied it and the job its end enqueued
--   message   a message addressed to the case was dead-lettered (detail:
--             the message and the reason)
--   timer     a timer was set (detail: name, wake instant, job) or, the case
--             closing, cancelled (from: set, to: cancelled)

-- waits_record appends a wait event for a registration and for its end.
-- +goose StatementBegin
CREATE FUNCTION docket.waits_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.status = OLD.status THEN
        RETURN NULL;
    END IF;
    INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at, detail)
    VALUES (NEW.case_id, 'wait', CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status,
            docket.context_actor(), docket.context_now(),
            jsonb_strip_nulls(jsonb_build_object(
                'wait_id', NEW.id, 'name', NEW.name, 'deadline', NEW.deadline,
                'keys', CASE WHEN TG_OP = 'INSERT' THEN to_jsonb(NEW.keys) END,
                'message_id', NEW.satisfied_by, 'job_id', NEW.continuation_job_id)));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER waits_record
    AFTER INSERT OR UPDATE ON docket.waits
    FOR EACH ROW EXECUTE FUNCTION docket.waits_record();

-- messages_record appends a message event to the addressee's history when a
-- message addressed to it is dead-lettered.
-- +goose StatementBegin
CREATE FUNCTION docket.messages_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.addressee IS NULL OR NEW.status = OLD.status OR NEW.status <> 'dead_lettered' THEN
        RETURN NULL;
    END IF;
    INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at, detail)
    VALUES (NEW.addressee, 'message', OLD.status, NEW.status, docket.context_actor(), docket.context_now(),
            jsonb_build_object('message_id', NEW.id, 'producer', NEW.producer,
                               'producer_message_id', NEW.message_id, 'reason', NEW.dead_letter_reason));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER messages_record
    AFTER UPDATE ON docket.messages
    FOR EACH ROW EXECUTE FUNCTION docket.messages_record();

-- timers_record appends a timer event when a timer is set.
-- +goose StatementBegin
CREATE FUNCTION docket.timers_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO docket.case_events (case_id, what, to_state, actor, at, detail)
    VALUES (NEW.case_id, 'timer', 'set', docket.context_actor(), docket.context_now(),
            jsonb_build_object('timer_id', NEW.id, 'name', NEW.name, 'wake_at', NEW.wake_at, 'job_id', NEW.job_id));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER timers_record
    AFTER INSERT ON docket.timers
    FOR EACH ROW EXECUTE FUNCTION docket.timers_record();

-- Closing a case: its waits, messages and timers ----------------------------------

-- cases_settle_waits runs when a case closes, by any route: it dead-letters
-- the buffered messages addressed to the case (they were its alone), then
-- withdraws its waiting waits, then cancels its timers that have not fired
-- (queued jobs). Locks in that order -- messages, then waits -- which is the
-- order a delivery takes them in, after the case row the close holds.
-- +goose StatementBegin
CREATE FUNCTION docket.cases_settle_waits() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := docket.context_now();
    v_actor text := docket.context_actor();
    t record;
BEGIN
    UPDATE docket.messages
    SET status = 'dead_lettered', settled_at = greatest(arrived_at, v_now),
        dead_letter_reason = format('addressed to case %s, which closed without consuming it', NEW.id)
    WHERE addressee = NEW.id AND status = 'buffered';
    UPDATE docket.waits
    SET status = 'withdrawn', settled_at = greatest(created_at, v_now), settled_by = v_actor
    WHERE case_id = NEW.id AND status = 'waiting';
    FOR t IN
        UPDATE docket.jobs j
        SET state = 'cancelled', diagnostic = format('cancelled: case %s closed before the timer fired', NEW.id),
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            finished_at = greatest(j.updated_at, v_now), updated_at = greatest(j.updated_at, v_now)
        FROM docket.timers tm
        WHERE tm.case_id = NEW.id AND j.id = tm.job_id AND j.state = 'queued'
        RETURNING tm.id, tm.name, tm.wake_at, tm.job_id
    LOOP
        INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at, detail)
        VALUES (NEW.id, 'timer', 'set', 'cancelled', v_actor, v_now,
                jsonb_build_object('timer_id', t.id, 'name', t.name, 'wake_at', t.wake_at, 'job_id', t.job_id));
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER cases_settle_waits
    AFTER UPDATE OF status ON docket.cases
    FOR EACH ROW WHEN (OLD.status = 'open' AND NEW.status = 'closed')
    EXECUTE FUNCTION docket.cases_settle_waits();

-- Reading -----------------------------------------------------------------------

-- message_visible reports whether p_principal may read the messages of
-- p_project: it holds message.deliver, case.admit or case.view there.
CREATE FUNCTION docket.message_visible(p_principal text, p_project text) RETURNS boolean
LANGUAGE sql STABLE
RETURN EXISTS (
    SELECT 1 FROM docket.grants
    WHERE project = p_project AND principal = p_principal
      AND capability IN ('message.deliver', 'case.admit', 'case.view')
);

-- Operator views ------------------------------------------------------------------
-- Storage never reads the clock: the views carry the instants and the reader
-- brings theirs, e.g. the age of each dead letter now:
--     SELECT producer, message_id, keys, reason, '2026-11-29 10:00Z' - arrived_at AS age
--     FROM docket.messages_dead;

CREATE VIEW docket.messages_dead AS
SELECT m.id, m.project, m.producer, m.message_id, m.keys, m.addressee, m.dead_letter_reason AS reason,
       m.arrived_at, m.settled_at AS dead_lettered_at, m.settled_at - m.arrived_at AS buffered_for
FROM docket.messages m
WHERE m.status = 'dead_lettered'
ORDER BY m.settled_at DESC, m.id DESC;

COMMENT ON VIEW docket.messages_dead IS
    'Dead letters, newest first: who sent each and the keys it was filed under, never the payload (it is the counterparty''s). A non-empty list means a correlation key is wrong somewhere.';

CREATE VIEW docket.messages_buffered AS
SELECT m.id, m.project, m.producer, m.message_id, m.keys, m.addressee, m.arrived_at
FROM docket.messages m
WHERE m.status = 'buffered'
ORDER BY m.arrived_at, m.id;

COMMENT ON VIEW docket.messages_buffered IS
    'Messages no wait has claimed yet, oldest first; the dead-letter sweep moves those older than its horizon.';

CREATE VIEW docket.waits_waiting AS
SELECT w.id, w.case_id, w.project, c.kind AS case_kind, w.name, w.keys, w.deadline,
       w.on_arrival_kind, w.on_timeout_kind, w.created_by, w.created_at
FROM docket.waits w
JOIN docket.cases c ON c.id = w.case_id
WHERE w.status = 'waiting'
ORDER BY w.deadline, w.id;

COMMENT ON VIEW docket.waits_waiting IS
    'Waits no message has satisfied, soonest deadline first. Due at instant T: WHERE deadline <= T; the expiry sweep moves them.';

-- Protocol ------------------------------------------------------------------------

-- message_lock_keys takes, for each key of p_keys in p_project, a
-- transaction-scoped advisory lock (class 1684764529, 'dkwq'), in the order
-- of the locks' numbers, so two callers with overlapping keys never
-- deadlock. Deliveries and waits take them before they store and look: of
-- two on a common key, the second sees what the first committed.
-- +goose StatementBegin
CREATE FUNCTION docket.message_lock_keys(p_project text, p_keys text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    h integer;
BEGIN
    FOR h IN SELECT DISTINCT hashtext(p_project || '/' || k) FROM unnest(p_keys) k ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(1684764529, h);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- wait_continue ends wait w (locked by the caller, waiting) as p_status --
-- satisfied by message m (locked, buffered), or expired -- on behalf of
-- p_actor at p_now, and enqueues the continuation it names in the case's
-- project, naming the case, under idempotency key wait:ID:STATUS. The
-- continuation's params say why it runs:
--   {"wait_id", "wait": name, "outcome": "satisfied", "message": {"id",
--    "producer", "message_id", "keys", "arrived_at", "payload"}}
--   {"wait_id", "wait": name, "outcome": "expired", "deadline"}
-- A satisfying message is marked consumed by the wait. Returns the wait.
-- Refuses as job_enqueue_one (DK009 without job.create).
-- +goose StatementBegin
CREATE FUNCTION docket.wait_continue(w docket.waits, m docket.messages, p_status text, p_actor text, p_now timestamptz)
RETURNS docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    v_job bigint;
    v docket.waits;
BEGIN
    IF p_status = 'satisfied' THEN
        SELECT e.id INTO v_job
        FROM docket.job_enqueue_one(
            w.project, p_actor, p_now, w.on_arrival_kind, w.on_arrival_queue, 1::smallint, w.on_arrival_payload,
            w.on_arrival_payload_schema, 'wait:' || w.id || ':satisfied', NULL, w.on_arrival_max_attempts,
            false, false, interval '5 minutes', interval '1 second', interval '10 minutes', 0.2,
            jsonb_build_object('wait_id', w.id, 'wait', w.name, 'outcome', 'satisfied',
                'message', jsonb_build_object('id', m.id, 'producer', m.producer, 'message_id', m.message_id,
                                              'keys', to_jsonb(m.keys), 'arrived_at', m.arrived_at,
                                              'payload', m.payload)),
            '{}', '', 0, w.case_id, '') e;
        UPDATE docket.messages
        SET status = 'consumed', consumed_by = w.id, settled_at = greatest(arrived_at, p_now)
        WHERE id = m.id;
    ELSIF w.on_timeout_kind IS NOT NULL THEN
        SELECT e.id INTO v_job
        FROM docket.job_enqueue_one(
            w.project, p_actor, p_now, w.on_timeout_kind, w.on_timeout_queue, 1::smallint, w.on_timeout_payload,
            w.on_timeout_payload_schema, 'wait:' || w.id || ':expired', NULL, w.on_timeout_max_attempts,
            false, false, interval '5 minutes', interval '1 second', interval '10 minutes', 0.2,
            jsonb_build_object('wait_id', w.id, 'wait', w.name, 'outcome', 'expired', 'deadline', w.deadline),
            '{}', '', 0, w.case_id, '') e;
    END IF;
    UPDATE docket.waits
    SET status = p_status, satisfied_by = m.id, continuation_job_id = v_job,
        settled_at = greatest(created_at, p_now), settled_by = p_actor
    WHERE id = w.id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- message_offer offers buffered message p_id (which the caller holds locked,
-- and whose keys it holds the locks of) to the oldest waiting wait its keys
-- cover whose deadline is after p_now -- of its addressee only, when it has
-- one -- and, finding one, consumes it and enqueues the wait's continuation
-- (wait_continue). Returns the wait it satisfied, or NULL. The wait's row is
-- locked, not skipped: one held by a sweep or a withdrawal is waited for and
-- looked at again.
-- +goose StatementBegin
CREATE FUNCTION docket.message_offer(p_id bigint, p_actor text, p_now timestamptz)
RETURNS docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    m docket.messages;
    w docket.waits;
BEGIN
    SELECT * INTO m FROM docket.messages WHERE id = p_id;
    IF m.status IS DISTINCT FROM 'buffered' THEN
        RETURN NULL;
    END IF;
    -- The candidates come from the keys' index, fenced off: ordered by id,
    -- the planner would rather walk the primary key past every other wait.
    WITH candidates AS MATERIALIZED (
        SELECT id FROM docket.waits WHERE status = 'waiting' AND keys <@ m.keys
    )
    SELECT x.* INTO w FROM docket.waits x
    WHERE x.id IN (SELECT id FROM candidates)
      AND x.status = 'waiting' AND x.keys <@ m.keys AND x.project = m.project AND x.deadline > p_now
      AND (m.addressee IS NULL OR x.case_id = m.addressee)
    ORDER BY x.id
    LIMIT 1
    FOR UPDATE OF x;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN docket.wait_continue(w, m, 'satisfied', p_actor, p_now);
END
$$;
-- +goose StatementEnd

-- message_stored is the row message_store returns: whether the message was
-- stored before (a producer's retry), and the message.
CREATE VIEW docket.message_stored AS
SELECT false AS duplicate, m.* FROM docket.messages m WHERE false;

-- message_store is the first step of message_deliver: it checks the
-- delivery, takes the keys' locks (message_lock_keys) and stores the
-- message, buffered, on behalf of p_actor at p_now. A message stored before
-- under the same producer and id is the same message (a retry): it is
-- returned, locked, with duplicate = true, whatever became of it.
-- Refuses, writing nothing, as message_deliver does.
-- +goose StatementBegin
CREATE FUNCTION docket.message_store(p_project text, p_producer text, p_message_id text,
                                     p_namespaces text[], p_values text[], p_payload jsonb, p_addressee bigint,
                                     p_actor text, p_now timestamptz)
RETURNS SETOF docket.message_stored
LANGUAGE plpgsql AS $$
DECLARE
    v_keys text[];
    v docket.messages;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.require_valid(docket.valid_message_producer(p_producer), 'producer', p_producer,
        '1-128 characters, no control characters, no leading or trailing space');
    PERFORM docket.require_valid(docket.valid_case_key_value(p_message_id), 'message id', p_message_id,
        '1-255 characters, no control characters, no leading or trailing space');
    v_keys := docket.wait_keys(p_namespaces, p_values);
    IF p_payload IS NULL OR docket.json_size(p_payload) > 61440 THEN
        RAISE EXCEPTION 'invalid message payload: % characters of JSON, want 1..61440 (put large documents elsewhere and send a reference)',
            coalesce(docket.json_size(p_payload)::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    IF NOT (docket.grant_check(p_actor, p_project, 'message.deliver') AND docket.grant_check(p_actor, p_project, 'job.create')) THEN
        RAISE EXCEPTION '% may not deliver messages in project %: it needs explicit message.deliver and job.create grants', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    IF p_addressee IS NOT NULL AND NOT EXISTS (SELECT 1 FROM docket.cases WHERE id = p_addressee AND project = p_project) THEN
        RAISE EXCEPTION 'case % does not exist in project %', p_addressee, p_project USING ERRCODE = 'P0002';
    END IF;

    PERFORM docket.message_lock_keys(p_project, v_keys);
    INSERT INTO docket.messages (project, producer, message_id, keys, payload, addressee, arrived_at, delivered_by)
    VALUES (p_project, p_producer, p_message_id, v_keys, p_payload, p_addressee, p_now, p_actor)
    ON CONFLICT (project, producer, message_id) DO NOTHING
    RETURNING * INTO v;
    IF FOUND THEN
        RETURN QUERY SELECT false, (v).*;
        RETURN;
    END IF;
    SELECT * INTO v FROM docket.messages
    WHERE project = p_project AND producer = p_producer AND message_id = p_message_id
    FOR UPDATE;
    IF (v.keys, v.payload, v.addressee) IS DISTINCT FROM (v_keys, p_payload, p_addressee) THEN
        RAISE EXCEPTION 'message %/% was delivered before with other keys, payload or addressee (message %)',
            p_producer, p_message_id, v.id
            USING ERRCODE = 'DK003';
    END IF;
    RETURN QUERY SELECT true, (v).*;
END
$$;
-- +goose StatementEnd

-- message_delivered is the row message_deliver returns: whether the message
-- was stored before (a producer's retry), the message, and the continuation
-- job the wait it satisfied enqueued (NULL while buffered).
CREATE VIEW docket.message_delivered AS
SELECT false AS duplicate, NULL::bigint AS continuation_job_id, m.* FROM docket.messages m WHERE false;

-- message_deliver delivers a message from p_producer, its id p_message_id,
-- filed under keys (p_namespaces[i], p_values[i]), with p_payload, to the
-- waits of p_project -- or, when p_addressee is not NULL, to those of that
-- case alone -- on behalf of p_actor at p_now:
--   1. it takes the keys' locks and stores the message, buffered
--      (message_store); a message stored before under the same producer and
--      id is the same message (a retry) and is returned with duplicate =
--      true -- still buffered, it is offered again, so a delivery that
--      stored it and died before looking is completed by the retry;
--   2. it offers the message to the oldest wait it satisfies
--      (message_offer), consuming it and enqueuing that wait's continuation.
-- A message no wait claims stays buffered: it is dead-lettered by a sweep
-- after a horizon, never on arrival.
-- Refuses, writing nothing: malformed input, a payload over 60 KiB (DK010);
-- an actor without message.deliver and job.create on p_project, or an
-- unknown project (DK009); an addressee that is not a case of p_project
-- (P0002); the same producer and id with other keys, payload or addressee
-- (DK003).
-- +goose StatementBegin
CREATE FUNCTION docket.message_deliver(p_project text, p_producer text, p_message_id text,
                                       p_namespaces text[], p_values text[], p_payload jsonb, p_addressee bigint,
                                       p_actor text, p_now timestamptz)
RETURNS SETOF docket.message_delivered
LANGUAGE plpgsql AS $$
DECLARE
    st docket.message_stored;
    v docket.messages;
    w docket.waits;
BEGIN
    SELECT * INTO STRICT st FROM docket.message_store(p_project, p_producer, p_message_id, p_namespaces, p_values,
                                                      p_payload, p_addressee, p_actor, p_now);
    w := docket.message_offer(st.id, p_actor, p_now);
    SELECT * INTO v FROM docket.messages WHERE id = st.id;
    IF w.id IS NULL AND v.status = 'consumed' THEN
        SELECT * INTO w FROM docket.waits WHERE id = v.consumed_by;
    END IF;
    RETURN QUERY SELECT st.duplicate, w.continuation_job_id, (v).*;
END
$$;
-- +goose StatementEnd

-- wait_registered is the row wait_register returns: whether the wait was
-- created by this call, the continuation job enqueued when a buffered message
-- satisfied it at once, and the wait.
CREATE VIEW docket.wait_registered AS
SELECT false AS created, w.* FROM docket.waits w WHERE false;

-- wait_register registers wait p_name of case p_case_id on the keys
-- (p_namespaces[i], p_values[i]) until p_deadline, with the continuation a
-- message's arrival enqueues (p_arrival_*) and the one the deadline enqueues
-- (p_timeout_kind NULL: none), on behalf of p_actor at p_now:
--   1. it takes the keys' locks (message_lock_keys);
--   2. it stores the wait, waiting (waits_guard locks the case row FOR SHARE
--      and refuses a closed case);
--   3. it looks in the buffer for the oldest message filed under all its
--      keys -- unaddressed, or addressed to this case -- and, finding one,
--      consumes it and enqueues the arrival continuation at once.
-- Registering again what is waiting under that name, on the same terms, is a
-- no-op that returns it with created = false.
-- Refuses, writing nothing: malformed input, a deadline not after p_now or
-- more than 3650 days ahead (DK010); an unknown case or one the actor may not
-- write (P0002); an actor without job.create on its project (DK009); a
-- closed case (DK005); a waiting wait of that name on other terms (23505 on
-- waits_waiting_name).
-- +goose StatementBegin
CREATE FUNCTION docket.wait_register(
    p_case_id bigint, p_name text, p_namespaces text[], p_values text[], p_deadline timestamptz,
    p_arrival_kind text, p_arrival_queue text, p_arrival_payload jsonb, p_arrival_payload_schema integer,
    p_arrival_max_attempts integer,
    p_timeout_kind text, p_timeout_queue text, p_timeout_payload jsonb, p_timeout_payload_schema integer,
    p_timeout_max_attempts integer,
    p_actor text, p_now timestamptz)
RETURNS SETOF docket.wait_registered
LANGUAGE plpgsql AS $$
DECLARE
    v_project text;
    v_keys text[];
    v docket.waits;
    m docket.messages;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(docket.valid_case_key_namespace(p_name), 'wait name', p_name,
        '1-63 characters of [a-z0-9._-], starting with a letter or digit');
    v_keys := docket.wait_keys(p_namespaces, p_values);
    IF p_deadline IS NULL OR NOT isfinite(p_deadline) OR p_deadline <= p_now OR p_deadline > p_now + interval '3650 days' THEN
        RAISE EXCEPTION 'invalid deadline %: every wait has one, after now (%) and at most 3650 days ahead',
            coalesce(p_deadline::text, 'NULL'), p_now
            USING ERRCODE = 'DK010';
    END IF;
    PERFORM docket.job_require_spec(1, p_arrival_kind, p_arrival_queue, p_arrival_payload, p_arrival_max_attempts);
    PERFORM docket.require_valid(p_arrival_payload_schema >= 1, 'arrival payload schema',
        p_arrival_payload_schema::text, '1 or more');
    IF p_timeout_kind IS NOT NULL THEN
        PERFORM docket.job_require_spec(1, p_timeout_kind, p_timeout_queue, p_timeout_payload, p_timeout_max_attempts);
        PERFORM docket.require_valid(p_timeout_payload_schema >= 1, 'timeout payload schema',
            p_timeout_payload_schema::text, '1 or more');
    ELSE
        p_timeout_queue := NULL;
        p_timeout_payload := NULL;
        p_timeout_payload_schema := NULL;
        p_timeout_max_attempts := NULL;
    END IF;
    v_project := docket.case_authorize(p_case_id, p_actor);
    IF NOT docket.grant_check(p_actor, v_project, 'job.create') THEN
        RAISE EXCEPTION '% may not register waits in project %: a wait enqueues its continuation, which needs an explicit job.create grant',
            p_actor, v_project
            USING ERRCODE = 'DK009';
    END IF;

    PERFORM docket.message_lock_keys(v_project, v_keys);
    SELECT * INTO v FROM docket.waits WHERE case_id = p_case_id AND name = p_name AND status = 'waiting';
    IF FOUND THEN
        IF (v.keys, v.deadline, v.on_arrival_kind, v.on_arrival_queue, v.on_arrival_payload,
            v.on_arrival_payload_schema, v.on_arrival_max_attempts, v.on_timeout_kind, v.on_timeout_queue,
            v.on_timeout_payload, v.on_timeout_payload_schema, v.on_timeout_max_attempts)
           IS NOT DISTINCT FROM
           (v_keys, p_deadline, p_arrival_kind, p_arrival_queue, p_arrival_payload,
            p_arrival_payload_schema, p_arrival_max_attempts, p_timeout_kind, p_timeout_queue,
            p_timeout_payload, p_timeout_payload_schema, p_timeout_max_attempts) THEN
            RETURN QUERY SELECT false, (v).*;
            RETURN;
        END IF;
        RAISE EXCEPTION 'case % already waits for % (wait %, until %) on other terms', p_case_id, p_name, v.id, v.deadline
            USING ERRCODE = '23505', CONSTRAINT = 'waits_waiting_name', TABLE = 'waits', SCHEMA = 'docket';
    END IF;
    INSERT INTO docket.waits (case_id, project, name, keys, deadline,
                              on_arrival_kind, on_arrival_queue, on_arrival_payload, on_arrival_payload_schema,
                              on_arrival_max_attempts, on_timeout_kind, on_timeout_queue, on_timeout_payload,
                              on_timeout_payload_schema, on_timeout_max_attempts, created_by, created_at)
    VALUES (p_case_id, v_project, p_name, v_keys, p_deadline,
            p_arrival_kind, p_arrival_queue, p_arrival_payload, p_arrival_payload_schema, p_arrival_max_attempts,
            p_timeout_kind, p_timeout_queue, p_timeout_payload, p_timeout_payload_schema, p_timeout_max_attempts,
            p_actor, p_now)
    RETURNING * INTO v;

    -- Candidates from the keys' index, fenced off as in message_offer.
    WITH candidates AS MATERIALIZED (
        SELECT id FROM docket.messages WHERE status = 'buffered' AND keys @> v_keys
    )
    SELECT x.* INTO m FROM docket.messages x
    WHERE x.id IN (SELECT id FROM candidates)
      AND x.status = 'buffered' AND x.keys @> v_keys AND x.project = v_project
      AND x.arrived_at < p_deadline
      AND (x.addressee IS NULL OR x.addressee = p_case_id)
    ORDER BY x.id
    LIMIT 1
    FOR UPDATE OF x;
    IF FOUND THEN
        v := docket.wait_continue(v, m, 'satisfied', p_actor, p_now);
    END IF;
    RETURN QUERY SELECT true, (v).*;
END
$$;
-- +goose StatementEnd

-- wait_withdraw withdraws wait p_id on behalf of p_actor at p_now and
-- returns it. Withdrawing a withdrawn wait is a no-op that returns it.
-- Refuses, writing nothing: a malformed actor or instant (DK010); an unknown
-- wait or one whose case the actor may not write (P0002); a wait a message
-- satisfied or its deadline expired first (DK007).
-- +goose StatementBegin
CREATE FUNCTION docket.wait_withdraw(p_id bigint, p_actor text, p_now timestamptz)
RETURNS docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    v docket.waits;
    v_project text;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    SELECT project INTO v_project FROM docket.waits WHERE id = p_id;
    IF NOT FOUND OR NOT docket.grant_check(p_actor, v_project, 'case.admit') THEN
        RAISE EXCEPTION 'wait % does not exist (or % holds no case.admit on its project)', coalesce(p_id::text, 'NULL'), p_actor
            USING ERRCODE = 'P0002';
    END IF;
    SELECT * INTO v FROM docket.waits WHERE id = p_id FOR UPDATE;
    IF v.status = 'withdrawn' THEN
        RETURN v;
    END IF;
    IF v.status <> 'waiting' THEN
        RAISE EXCEPTION 'wait % was % first: it cannot be withdrawn', v.id, v.status
            USING ERRCODE = 'DK007', DETAIL = 'status ' || v.status;
    END IF;
    UPDATE docket.waits SET status = 'withdrawn', settled_at = greatest(created_at, p_now), settled_by = p_actor
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- wait_expire_due is the expiry sweep: it moves up to p_limit waiting waits
-- whose deadline has come at p_now (deadline <= p_now), soonest first, to
-- expired on behalf of p_actor, each enqueuing its timeout continuation if it
-- names one, and returns them. It looks only at projects where p_actor holds
-- case.sweep, and at waits with a timeout continuation only where it also
-- holds job.create. A range scan of waits_deadline_idx; waits another
-- transaction holds locked are skipped, never waited for, so several
-- sweepers may run at once.
-- Refuses: a malformed actor or instant, a limit outside 1..10000 (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.wait_expire_due(p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    w docket.waits;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep batch', p_limit, 10000);
    FOR w IN
        SELECT * FROM docket.waits
        WHERE status = 'waiting' AND deadline <= p_now
          AND docket.grant_check(p_actor, project, 'case.sweep')
          AND (on_timeout_kind IS NULL OR docket.grant_check(p_actor, project, 'job.create'))
        ORDER BY deadline, id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        RETURN NEXT docket.wait_continue(w, NULL, 'expired', p_actor, p_now);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- message_dead_letter_due is the dead-letter sweep: it moves up to p_limit
-- messages buffered since p_horizon or longer before p_now (arrived_at <=
-- p_now - p_horizon), oldest first, to dead_lettered on behalf of p_actor,
-- with a reason saying why, and returns them. A message younger than the
-- horizon is never touched: "nobody waits for this yet" is not "nobody ever
-- will". It looks only at projects where p_actor holds case.sweep. A range
-- scan of messages_buffered_idx; messages another transaction holds locked
-- are skipped.
-- Refuses: a malformed actor or instant, a limit outside 1..10000, a horizon
-- outside 1 minute..366 days (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.message_dead_letter_due(p_limit integer, p_horizon interval, p_actor text, p_now timestamptz)
RETURNS SETOF docket.messages
LANGUAGE plpgsql AS $$
DECLARE
    m docket.messages;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep batch', p_limit, 10000);
    IF p_horizon IS NULL OR p_horizon < interval '1 minute' OR p_horizon > interval '366 days' THEN
        RAISE EXCEPTION 'invalid dead-letter horizon %: want 1 minute to 366 days', coalesce(p_horizon::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    FOR m IN
        SELECT * FROM docket.messages
        WHERE status = 'buffered' AND arrived_at <= p_now - p_horizon
          AND docket.grant_check(p_actor, project, 'case.sweep')
        ORDER BY arrived_at, id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        UPDATE docket.messages
        SET status = 'dead_lettered', settled_at = greatest(arrived_at, p_now),
            dead_letter_reason = CASE
                WHEN m.addressee IS NOT NULL AND EXISTS (
                    SELECT 1 FROM docket.cases c WHERE c.id = m.addressee AND c.status = 'closed')
                THEN format('addressed to case %s, which is closed and never consumed it', m.addressee)
                WHEN m.addressee IS NOT NULL
                THEN format('addressed to case %s, which had no wait on its keys within the horizon of %s', m.addressee, justify_interval(p_horizon))
                ELSE format('no wait claimed it within the horizon of %s', justify_interval(p_horizon))
            END
        WHERE id = m.id
        RETURNING * INTO m;
        RETURN NEXT m;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- timer_placed is the row timer_set returns: whether this call set the
-- timer (false: it was set before, and this was a retry), and the timer.
CREATE VIEW docket.timer_placed AS
SELECT false AS created, t.* FROM docket.timers t WHERE false;

-- timer_set sets timer p_name of case p_case_id to wake at p_wake_at: a job
-- of the case (p_kind, p_queue, p_payload, p_payload_schema,
-- p_max_attempts), available at p_wake_at, with params {"timer": name,
-- "wake_at", "case_id"} -- the instant it was due, however late it runs --
-- under idempotency key timer:CASE:NAME:MICROS, on behalf of p_actor at p_now. A
-- wake instant already past wakes at once. Setting again the same timer
-- (case, name and instant) is a no-op that returns it, created false.
-- Closing the case cancels the job if it has not been claimed.
-- Refuses, writing nothing: malformed input, a wake instant more than 3650
-- days ahead (DK010); an unknown case or one the actor may not write
-- (P0002); an actor without job.create on its project (DK009); a closed case
-- (DK005); the same timer with another job (DK003).
-- +goose StatementBegin
CREATE FUNCTION docket.timer_set(p_case_id bigint, p_name text, p_wake_at timestamptz,
                                 p_kind text, p_queue text, p_payload jsonb, p_payload_schema integer,
                                 p_max_attempts integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.timer_placed
LANGUAGE plpgsql AS $$
DECLARE
    v_project text;
    v docket.timers;
    j record;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(docket.valid_case_key_namespace(p_name), 'timer name', p_name,
        '1-63 characters of [a-z0-9._-], starting with a letter or digit');
    IF p_wake_at IS NULL OR NOT isfinite(p_wake_at) OR p_wake_at < '1970-01-01 00:00:00+00'
       OR p_wake_at > p_now + interval '3650 days' THEN
        RAISE EXCEPTION 'invalid wake instant %: want a finite instant at most 3650 days after now (%)',
            coalesce(p_wake_at::text, 'NULL'), p_now
            USING ERRCODE = 'DK010';
    END IF;
    PERFORM docket.job_require_spec(1, p_kind, p_queue, p_payload, p_max_attempts);
    PERFORM docket.require_valid(p_payload_schema >= 1, 'payload schema', p_payload_schema::text, '1 or more');
    v_project := docket.case_authorize(p_case_id, p_actor);
    -- The case row's lock first, as a close takes it, then the job.
    IF (SELECT status FROM docket.cases WHERE id = p_case_id FOR SHARE) <> 'open' THEN
        RAISE EXCEPTION 'case % is closed: it cannot set timer %', p_case_id, p_name USING ERRCODE = 'DK005';
    END IF;
    -- One timer per (case, name, instant), whatever its job: a retry finds
    -- it, under a lock of that name, and must name the same job.
    PERFORM pg_advisory_xact_lock(1684764530, hashtext(p_case_id || '/' || p_name));
    SELECT t.* INTO v FROM docket.timers t WHERE t.case_id = p_case_id AND t.name = p_name AND t.wake_at = p_wake_at;
    IF FOUND THEN
        SELECT jb.kind, jb.queue, jb.payload, jb.payload_schema, jb.max_attempts INTO j
        FROM docket.jobs jb WHERE jb.id = v.job_id;
        IF (j.kind, j.queue, j.payload, j.payload_schema, j.max_attempts)
           IS DISTINCT FROM (p_kind, p_queue, p_payload, p_payload_schema, p_max_attempts) THEN
            RAISE EXCEPTION 'timer % of case % at % was set before with another job (timer %)', p_name, p_case_id, p_wake_at, v.id
                USING ERRCODE = 'DK003';
        END IF;
        RETURN QUERY SELECT false, (v).*;
        RETURN;
    END IF;
    SELECT e.id INTO j
    FROM docket.job_enqueue_one(
        v_project, p_actor, p_now, p_kind, p_queue, 1::smallint, p_payload, p_payload_schema,
        format('timer:%s:%s:%s', p_case_id, p_name, (extract(epoch FROM p_wake_at) * 1000000)::bigint),
        p_wake_at, p_max_attempts, false, false, interval '5 minutes', interval '1 second', interval '10 minutes', 0.2,
        jsonb_build_object('timer', p_name, 'wake_at', p_wake_at, 'case_id', p_case_id),
        '{}', '', 0, p_case_id, '') e;
    INSERT INTO docket.timers (case_id, project, name, wake_at, job_id, created_by, created_at)
    VALUES (p_case_id, v_project, p_name, p_wake_at, j.id, p_actor, p_now)
    RETURNING * INTO v;
    RETURN QUERY SELECT true, (v).*;
END
$$;
-- +goose StatementEnd

-- The API ---------------------------------------------------------------------

INSERT INTO docket.api_functions (name, role) VALUES
    ('case_admit', 'app'), ('case_correlate', 'app'), ('case_put_state', 'app'), ('case_close', 'app'),
    ('case_reopen', 'app'), ('obligation_register', 'app'), ('obligation_settle', 'app'),
    ('obligation_breach_due', 'app'),
    ('message_deliver', 'app'), ('message_store', 'app'), ('message_offer', 'app'),
    ('message_dead_letter_due', 'app'), ('wait_register', 'app'), ('wait_withdraw', 'app'),
    ('wait_expire_due', 'app'), ('timer_set', 'app');

SELECT docket.apply_privileges();

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP VIEW
    docket.timer_placed, docket.wait_registered, docket.message_delivered, docket.message_stored,
    docket.waits_waiting, docket.messages_buffered, docket.messages_dead, docket.wait_transitions,
    docket.wait_states, docket.message_transitions, docket.message_states, docket.case_reopened,
    docket.case_admitted, docket.cases_open_with_obligations, docket.obligations_due,
    docket.obligation_transitions, docket.obligation_states, docket.case_transitions,
    docket.case_states CASCADE;
DROP TABLE
    docket.timers, docket.waits, docket.messages, docket.case_events, docket.obligations,
    docket.case_keys, docket.cases CASCADE;
DELETE FROM docket.machine_transitions WHERE machine IN ('case', 'obligation', 'message', 'wait');
DELETE FROM docket.machine_states WHERE machine IN ('case', 'obligation', 'message', 'wait');
DELETE FROM docket.machines WHERE name IN ('case', 'obligation', 'message', 'wait');
DELETE FROM docket.api_functions WHERE name IN ('case_admit', 'case_correlate', 'case_put_state', 'case_close', 'case_reopen', 'obligation_register',
    'obligation_settle', 'obligation_breach_due', 'message_deliver', 'message_store', 'message_offer', 'message_dead_letter_due',
    'wait_register', 'wait_withdraw', 'wait_expire_due', 'timer_set');
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name IN ('case.admit', 'case.view', 'case.sweep', 'message.deliver')
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
DROP DOMAIN docket.message_payload;
DROP DOMAIN docket.case_state;
DROP FUNCTION IF EXISTS docket.timer_set(bigint,text,timestamp with time zone,text,text,jsonb,integer,integer,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.message_dead_letter_due(integer,interval,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.wait_expire_due(integer,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.wait_withdraw(bigint,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.wait_register(bigint,text,text[],text[],timestamp with time zone,text,text,jsonb,integer,integer,text,text,jsonb,integer,integer,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.message_deliver(text,text,text,text[],text[],jsonb,bigint,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.message_store(text,text,text,text[],text[],jsonb,bigint,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.message_offer(bigint,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.wait_continue(docket.waits,docket.messages,text,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.message_lock_keys(text,text[]);
DROP FUNCTION IF EXISTS docket.message_visible(text,text);
DROP FUNCTION IF EXISTS docket.cases_settle_waits();
DROP FUNCTION IF EXISTS docket.timers_record();
DROP FUNCTION IF EXISTS docket.messages_record();
DROP FUNCTION IF EXISTS docket.waits_record();
DROP FUNCTION IF EXISTS docket.waits_messages_agree();
DROP FUNCTION IF EXISTS docket.timers_guard();
DROP FUNCTION IF EXISTS docket.waits_guard();
DROP FUNCTION IF EXISTS docket.messages_guard();
DROP FUNCTION IF EXISTS docket.wait_keys(text[],text[]);
DROP FUNCTION IF EXISTS docket.valid_wait_keys(text[]);
DROP FUNCTION IF EXISTS docket.valid_message_producer(text);
DROP FUNCTION IF EXISTS docket.obligation_breach_due(integer,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.obligation_settle(bigint,text,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.obligation_breach(docket.obligations,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.obligation_register(bigint,text,timestamp with time zone,text,text,text,text,jsonb,integer,integer,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.case_reopen(bigint,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.case_close(bigint,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.case_put_state(bigint,bigint,jsonb,text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.case_correlate(text,text[],text[],text);
DROP FUNCTION IF EXISTS docket.case_admit(text,text,text[],text[],text,timestamp with time zone);
DROP FUNCTION IF EXISTS docket.case_ambiguous(bigint[]);
DROP FUNCTION IF EXISTS docket.case_key_holders(text,text[],text[]);
DROP FUNCTION IF EXISTS docket.case_require_keys(text[],text[]);
DROP FUNCTION IF EXISTS docket.case_authorize(bigint,text);
DROP FUNCTION IF EXISTS docket.case_visible(text,text);
DROP FUNCTION IF EXISTS docket.obligations_record();
DROP FUNCTION IF EXISTS docket.case_keys_record();
DROP FUNCTION IF EXISTS docket.cases_record();
DROP FUNCTION IF EXISTS docket.obligations_on_open_case();
DROP FUNCTION IF EXISTS docket.case_keys_release_on_close();
DROP FUNCTION IF EXISTS docket.cases_close_releases_keys();
DROP FUNCTION IF EXISTS docket.cases_close_owes_nothing();
DROP FUNCTION IF EXISTS docket.obligations_guard();
DROP FUNCTION IF EXISTS docket.case_keys_guard();
DROP FUNCTION IF EXISTS docket.cases_guard();
DROP FUNCTION IF EXISTS docket.valid_calendar_digest(text);
DROP FUNCTION IF EXISTS docket.valid_case_key_value(text);
DROP FUNCTION IF EXISTS docket.valid_case_key_namespace(text);
