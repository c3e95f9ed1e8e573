-- Cases: the durable record of a business matter that outlives any one job:
-- the cases, their correlation keys, obligations and events; the case and
-- obligation machines. Their rules are sql/definitions/cases.sql's.

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

-- Capabilities ---------------------------------------------------------------

-- Kept by a down migration while granted: an up finds them there.
INSERT INTO docket.capabilities (name, description) VALUES
    ('case.admit', 'admit, correlate, write, close and reopen cases of the project and settle their obligations'),
    ('case.view', 'read the project''s cases, keys, obligations and history'),
    ('case.sweep', 'run the project''s deadline sweeps: breach due obligations, expire due waits, dead-letter unclaimed messages (enqueuing their jobs also needs job.create)'),
    ('message.deliver', 'deliver inbound messages to the project''s waits (with job.create) and read its messages')
ON CONFLICT (name) DO NOTHING;

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

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.case_events, docket.obligations, docket.case_keys, docket.cases;
DELETE FROM docket.machine_transitions WHERE machine IN ('case', 'obligation');
DELETE FROM docket.machine_states WHERE machine IN ('case', 'obligation');
DELETE FROM docket.machines WHERE name IN ('case', 'obligation');
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name IN ('case.admit', 'case.view', 'case.sweep', 'message.deliver')
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
DROP DOMAIN docket.case_state;
DROP FUNCTION docket.valid_calendar_digest(text);
DROP FUNCTION docket.valid_case_key_value(text);
DROP FUNCTION docket.valid_case_key_namespace(text);
