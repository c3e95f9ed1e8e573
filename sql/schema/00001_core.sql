-- docket's shared core: name validation, the change context (who and when),
-- the error catalogue, projects with their status machine, capabilities and grants.
--
-- The project status machine is the reference for every later state machine:
--   * a states table (state, initial, terminal) and a transitions table
--     (from_state, to_state);
--   * a BEFORE INSERT OR UPDATE trigger that refuses a row born in a state that is
--     not initial, any pair not in the transitions table and any change to a row
--     in a terminal state (DK001), and any change to an immutable column (DK015),
--     so a hand-written INSERT or UPDATE is held to the same rules;
--   * an AFTER trigger that appends an event row (who, when, from, to) in the same
--     transaction, taking the actor and instant from the change context.

-- +goose Up
CREATE SCHEMA IF NOT EXISTS docket;

-- Names ---------------------------------------------------------------------

-- A project name: 1-63 characters of [a-z0-9._-], starting with a letter or digit.
CREATE FUNCTION docket.valid_project_name(p_name text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN p_name ~ '^[a-z0-9][a-z0-9._-]{0,62}$';

-- A principal: "kind:name", e.g. svc:billing or user:ana. kind is 1-32 characters of
-- [a-z0-9_-] starting with a letter; name is 1-200 characters of [A-Za-z0-9._@+:/-]
-- starting with a letter or digit.
CREATE FUNCTION docket.valid_principal(p_principal text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN p_principal ~ '^[a-z][a-z0-9_-]{0,31}:[A-Za-z0-9][A-Za-z0-9._@+:/-]{0,199}$';

-- A capability: two to four dot-separated segments of [a-z0-9_] each starting with a
-- letter, at most 64 characters, e.g. job.create. No wildcard can be spelled.
CREATE FUNCTION docket.valid_capability(p_capability text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN length(p_capability) <= 64
   AND p_capability ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*){1,3}$';

-- require_principal refuses (DK010) a null or malformed principal, naming
-- what the argument is for (actor, principal, …) in the message.
-- +goose StatementBegin
CREATE FUNCTION docket.require_principal(p_what text, p_value text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_value IS NULL OR NOT docket.valid_principal(p_value) THEN
        RAISE EXCEPTION 'invalid % %: want kind:name, e.g. svc:billing', p_what, coalesce(quote_literal(p_value), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
END
$$;
-- +goose StatementEnd

-- require_project_name refuses (DK010) a null or malformed project name.
-- +goose StatementBegin
CREATE FUNCTION docket.require_project_name(p_value text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_value IS NULL OR NOT docket.valid_project_name(p_value) THEN
        RAISE EXCEPTION 'invalid project name %: want 1-63 characters of [a-z0-9._-], starting with a letter or digit',
            coalesce(quote_literal(p_value), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
END
$$;
-- +goose StatementEnd

-- Error catalogue -----------------------------------------------------------

-- Every SQLSTATE docket raises, so an operator in psql can look one up. The Go
-- package db carries the same catalogue; a test keeps the two equal.
CREATE TABLE docket.error_codes (
    code    text PRIMARY KEY CONSTRAINT error_codes_code_valid CHECK (code ~ '^DK[0-9]{3}$'),
    name    text NOT NULL UNIQUE,
    meaning text NOT NULL
);

INSERT INTO docket.error_codes (code, name, meaning) VALUES
    ('DK001', 'ErrIllegalTransition', 'the (from, to) pair is not in the transition table, or the row is in a terminal state'),
    ('DK002', 'ErrStaleClaim', 'token does not hold the current lease (expired, replaced, released)'),
    ('DK003', 'ErrIdempotencyConflict', 'same idempotency key, different payload'),
    ('DK004', 'ErrVersionConflict', 'case state was written by someone else since it was read'),
    ('DK005', 'ErrCaseClosed', 'a write that would give a closed case a duty'),
    ('DK006', 'ErrObligationsOutstanding', 'closing a case with pending obligations'),
    ('DK007', 'ErrAlreadyAnswered', 'a task was settled first by another answer or by expiry'),
    ('DK008', 'ErrExcludedActor', 'four-eyes: this actor may not claim or answer this task'),
    ('DK009', 'ErrNotPermitted', 'actor lacks the role or grant'),
    ('DK010', 'ErrInvalidArgument', 'bad name, size, interval, schedule, time zone, ... (the message says which)'),
    ('DK011', 'ErrAmbiguousCorrelation', 'keys point at two different open cases'),
    ('DK012', 'ErrRefusedRevision', 'payload schema or handler revision this deployment does not know'),
    ('DK013', 'ErrInvalidDependency', 'cross-quorum or cyclic dependency, unknown predecessor'),
    ('DK014', 'ErrTerminal', 're-completing a finished job or lane with a different outcome'),
    ('DK015', 'ErrImmutable', 'a change to an immutable column, or an update or delete of an append-only record');

-- Change context ------------------------------------------------------------

-- set_context records who is changing docket state and at which instant, for the
-- rest of the current transaction. Every docket function calls it; an operator
-- changing tables by hand calls it first:
--     SELECT docket.set_context('user:ana', '2026-11-29 10:00:00+00');
-- Refuses a malformed actor, or a null, infinite or pre-1970 instant, with DK010.
-- +goose StatementBegin
CREATE FUNCTION docket.set_context(p_actor text, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.require_principal('actor', p_actor);
    IF p_now IS NULL OR NOT isfinite(p_now) OR p_now < '1970-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'invalid instant %: the caller''s now must be a finite timestamp after 1970 (a zero time is a bug)', coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    PERFORM set_config('docket.actor', p_actor, true);
    PERFORM set_config('docket.now', p_now::text, true);
END
$$;
-- +goose StatementEnd

-- context_actor returns the actor set by set_context in this transaction.
-- Refuses with DK010 when none is set, so no change goes unattributed.
-- +goose StatementBegin
CREATE FUNCTION docket.context_actor() RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v text := nullif(current_setting('docket.actor', true), '');
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION 'no change context: call docket.set_context(actor, now) in this transaction first'
            USING ERRCODE = 'DK010';
    END IF;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- context_now returns the instant set by set_context in this transaction.
-- Refuses with DK010 when none is set: storage never reads the wall clock.
-- +goose StatementBegin
CREATE FUNCTION docket.context_now() RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v text := nullif(current_setting('docket.now', true), '');
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION 'no change context: call docket.set_context(actor, now) in this transaction first'
            USING ERRCODE = 'DK010';
    END IF;
    RETURN v::timestamptz;
END
$$;
-- +goose StatementEnd

-- refuse_change is the trigger body of every change docket never allows:
-- updating or deleting an append-only record, deleting a row that is retired
-- instead, editing a row that is replaced instead (DK015). The trigger's
-- argument, if any, says what to do instead.
-- +goose StatementBegin
CREATE FUNCTION docket.refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%.%: % refused%', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP,
        CASE WHEN TG_NARGS > 0 THEN ': ' || TG_ARGV[0] ELSE ' (append-only)' END
        USING ERRCODE = 'DK015';
END
$$;
-- +goose StatementEnd

-- Projects ------------------------------------------------------------------

CREATE TABLE docket.project_states (
    state    text PRIMARY KEY,
    initial  boolean NOT NULL, -- a row may be created in this state
    terminal boolean NOT NULL, -- a row in this state never changes again
    CONSTRAINT project_states_initial_not_terminal CHECK (NOT (initial AND terminal))
);

INSERT INTO docket.project_states (state, initial, terminal) VALUES
    ('active', true, false),
    ('archived', false, false),
    ('retired', false, true);

CREATE TABLE docket.project_transitions (
    from_state text NOT NULL REFERENCES docket.project_states (state),
    to_state   text NOT NULL REFERENCES docket.project_states (state),
    PRIMARY KEY (from_state, to_state)
);

INSERT INTO docket.project_transitions (from_state, to_state) VALUES
    ('active', 'archived'),
    ('archived', 'active'),
    ('archived', 'retired');

CREATE TABLE docket.projects (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text NOT NULL UNIQUE
               CONSTRAINT projects_name_valid CHECK (docket.valid_project_name(name)),
    status     text NOT NULL DEFAULT 'active' REFERENCES docket.project_states (state),
    created_by text NOT NULL
               CONSTRAINT projects_created_by_valid CHECK (docket.valid_principal(created_by)),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT projects_updated_not_before_created CHECK (updated_at >= created_at)
);

COMMENT ON TABLE docket.projects IS
    'A tenant of docket: grants, jobs, lanes and cases belong to exactly one project. Status moves only along docket.project_transitions.';

CREATE TABLE docket.project_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project    text NOT NULL REFERENCES docket.projects (name),
    from_state text REFERENCES docket.project_states (state),
    to_state   text NOT NULL REFERENCES docket.project_states (state),
    actor      text NOT NULL,
    at         timestamptz NOT NULL
);

CREATE INDEX project_events_project_idx ON docket.project_events (project, id);

CREATE TRIGGER project_events_append_only
    BEFORE UPDATE OR DELETE ON docket.project_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- projects_guard enforces the status machine and the immutable columns on every
-- INSERT and UPDATE, whoever issues it: a project is born in an initial state
-- and moves only along docket.project_transitions.
-- +goose StatementBegin
CREATE FUNCTION docket.projects_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NOT coalesce((SELECT initial FROM docket.project_states WHERE state = NEW.status), false) THEN
            RAISE EXCEPTION 'project %: cannot be created %, not an initial state', NEW.name, NEW.status
                USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.id <> OLD.id OR NEW.name <> OLD.name
       OR NEW.created_by <> OLD.created_by OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION 'project %: name, created_by and created_at are immutable', OLD.name
            USING ERRCODE = 'DK015';
    END IF;
    IF (SELECT terminal FROM docket.project_states WHERE state = OLD.status) THEN
        RAISE EXCEPTION 'project % is %, a terminal state: it cannot change', OLD.name, OLD.status
            USING ERRCODE = 'DK001';
    END IF;
    IF NEW.status <> OLD.status AND NOT EXISTS (
        SELECT 1 FROM docket.project_transitions
        WHERE from_state = OLD.status AND to_state = NEW.status
    ) THEN
        RAISE EXCEPTION 'project %: % -> % is not in docket.project_transitions', OLD.name, OLD.status, NEW.status
            USING ERRCODE = 'DK001';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER projects_guard
    BEFORE INSERT OR UPDATE ON docket.projects
    FOR EACH ROW EXECUTE FUNCTION docket.projects_guard();

CREATE TRIGGER projects_refuse_delete
    BEFORE DELETE ON docket.projects
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('projects are never deleted: retire them instead');

-- projects_record appends the project_events row for a creation or a status
-- change, attributed to the transaction's change context.
-- +goose StatementBegin
CREATE FUNCTION docket.projects_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status <> OLD.status THEN
        INSERT INTO docket.project_events (project, from_state, to_state, actor, at)
        VALUES (NEW.name, CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status,
                docket.context_actor(), docket.context_now());
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER projects_record
    AFTER INSERT OR UPDATE ON docket.projects
    FOR EACH ROW EXECUTE FUNCTION docket.projects_record();

-- project_create creates project p_name, active, on behalf of p_actor at p_now.
-- Refuses: a malformed name, actor or instant (DK010); a name already taken
-- (unique violation 23505 on projects_name_key).
-- +goose StatementBegin
CREATE FUNCTION docket.project_create(p_name text, p_actor text, p_now timestamptz)
RETURNS docket.projects
LANGUAGE plpgsql AS $$
DECLARE
    v docket.projects;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_name);
    INSERT INTO docket.projects (name, created_by, created_at, updated_at)
    VALUES (p_name, p_actor, p_now, p_now)
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- project_set_status moves project p_name to p_status on behalf of p_actor at
-- p_now. Setting the status it already has is a no-op that records nothing.
-- Refuses: malformed input (DK010); an unknown project (P0002); a move not in
-- docket.project_transitions or out of a terminal state (DK001).
-- +goose StatementBegin
CREATE FUNCTION docket.project_set_status(p_name text, p_status text, p_actor text, p_now timestamptz)
RETURNS docket.projects
LANGUAGE plpgsql AS $$
DECLARE
    v docket.projects;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF p_status IS NULL OR NOT EXISTS (SELECT 1 FROM docket.project_states WHERE state = p_status) THEN
        RAISE EXCEPTION 'invalid project status %: want one of active, archived, retired',
            coalesce(quote_literal(p_status), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    SELECT * INTO v FROM docket.projects WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'project % does not exist', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'P0002';
    END IF;
    IF v.status = p_status THEN
        RETURN v;
    END IF;
    UPDATE docket.projects
    SET status = p_status, updated_at = greatest(updated_at, p_now)
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- Capabilities and grants ---------------------------------------------------

-- The capabilities a grant can name. Later migrations add their own; a grant of
-- a capability not listed here is refused, so a typo cannot silently grant nothing.
CREATE TABLE docket.capabilities (
    name        text PRIMARY KEY
                CONSTRAINT capabilities_name_valid CHECK (docket.valid_capability(name)),
    description text NOT NULL
);

INSERT INTO docket.capabilities (name, description) VALUES
    ('job.create', 'enqueue jobs in the project'),
    ('job.claim', 'claim and run jobs of the project'),
    ('job.cancel', 'cancel jobs of the project'),
    ('lane.view', 'list and read every lane of the project'),
    ('case.admit', 'admit and correlate cases of the project'),
    ('task.review', 'claim and answer human tasks of the project');

-- An explicit grant of one capability on one project to one principal. There is
-- no wildcard: a check is satisfied only by a row naming exactly that triple.
CREATE TABLE docket.grants (
    principal  text NOT NULL
               CONSTRAINT grants_principal_valid CHECK (docket.valid_principal(principal)),
    project    text NOT NULL REFERENCES docket.projects (name),
    capability text NOT NULL REFERENCES docket.capabilities (name),
    granted_by text NOT NULL
               CONSTRAINT grants_granted_by_valid CHECK (docket.valid_principal(granted_by)),
    granted_at timestamptz NOT NULL,
    PRIMARY KEY (project, capability, principal)
);

CREATE INDEX grants_principal_idx ON docket.grants (principal);

CREATE TABLE docket.grant_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    principal  text NOT NULL,
    project    text NOT NULL REFERENCES docket.projects (name),
    capability text NOT NULL,
    action     text NOT NULL CONSTRAINT grant_events_action_known CHECK (action IN ('granted', 'revoked')),
    actor      text NOT NULL,
    at         timestamptz NOT NULL
);

CREATE INDEX grant_events_project_idx ON docket.grant_events (project, id);

CREATE TRIGGER grant_events_append_only
    BEFORE UPDATE OR DELETE ON docket.grant_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- grants_record appends a grant_events row for every grant inserted or deleted,
-- by a docket function or by hand, attributed to the change context. It runs
-- AFTER the change, so an INSERT that ON CONFLICT skips records nothing.
-- +goose StatementBegin
CREATE FUNCTION docket.grants_record() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    g docket.grants := CASE WHEN TG_OP = 'INSERT' THEN NEW ELSE OLD END;
BEGIN
    INSERT INTO docket.grant_events (principal, project, capability, action, actor, at)
    VALUES (g.principal, g.project, g.capability,
            CASE WHEN TG_OP = 'INSERT' THEN 'granted' ELSE 'revoked' END,
            docket.context_actor(), docket.context_now());
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER grants_record
    AFTER INSERT OR DELETE ON docket.grants
    FOR EACH ROW EXECUTE FUNCTION docket.grants_record();

CREATE TRIGGER grants_refuse_update
    BEFORE UPDATE ON docket.grants
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('grants are never edited: revoke and grant instead');

-- grant_validate checks the triple of a grant or revoke. Refuses: a malformed
-- principal or project name, an unknown capability (DK010); an unknown project
-- (P0002).
-- +goose StatementBegin
CREATE FUNCTION docket.grant_validate(p_principal text, p_project text, p_capability text)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_principal('principal', p_principal);
    PERFORM docket.require_project_name(p_project);
    IF p_capability IS NULL OR NOT docket.valid_capability(p_capability) THEN
        RAISE EXCEPTION 'invalid capability %: want dot-separated lowercase segments, e.g. job.create',
            coalesce(quote_literal(p_capability), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM docket.capabilities WHERE name = p_capability) THEN
        RAISE EXCEPTION 'unknown capability %: see docket.capabilities', quote_literal(p_capability)
            USING ERRCODE = 'DK010';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM docket.projects WHERE name = p_project) THEN
        RAISE EXCEPTION 'project % does not exist', quote_literal(p_project)
            USING ERRCODE = 'P0002';
    END IF;
END
$$;
-- +goose StatementEnd

-- grant_add grants p_capability on p_project to p_principal, on behalf of p_actor
-- at p_now. Returns true when the grant is new, false when it was already held
-- (then nothing is written). Refuses as grant_validate, and a malformed actor or
-- instant (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.grant_add(p_principal text, p_project text, p_capability text, p_actor text, p_now timestamptz)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.grant_validate(p_principal, p_project, p_capability);
    INSERT INTO docket.grants (principal, project, capability, granted_by, granted_at)
    VALUES (p_principal, p_project, p_capability, p_actor, p_now)
    ON CONFLICT DO NOTHING;
    RETURN FOUND;
END
$$;
-- +goose StatementEnd

-- grant_revoke removes the grant of p_capability on p_project from p_principal,
-- on behalf of p_actor at p_now. Returns true when a grant was removed, false when
-- there was none. Refuses as grant_add.
-- +goose StatementBegin
CREATE FUNCTION docket.grant_revoke(p_principal text, p_project text, p_capability text, p_actor text, p_now timestamptz)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.grant_validate(p_principal, p_project, p_capability);
    DELETE FROM docket.grants
    WHERE project = p_project AND capability = p_capability AND principal = p_principal;
    RETURN FOUND;
END
$$;
-- +goose StatementEnd

-- grant_check reports whether p_principal holds p_capability on p_project by an
-- explicit grant. It never raises: malformed or unknown input holds nothing, so
-- a caller learns no more from a refusal than from an absent grant.
CREATE FUNCTION docket.grant_check(p_principal text, p_project text, p_capability text)
RETURNS boolean
LANGUAGE sql STABLE
RETURN EXISTS (
    SELECT 1 FROM docket.grants
    WHERE project = p_project AND capability = p_capability AND principal = p_principal
);

-- +goose Down
DROP FUNCTION docket.grant_check(text, text, text);
DROP FUNCTION docket.grant_revoke(text, text, text, text, timestamptz);
DROP FUNCTION docket.grant_add(text, text, text, text, timestamptz);
DROP FUNCTION docket.grant_validate(text, text, text);
DROP TABLE docket.grant_events;
DROP TABLE docket.grants;
DROP FUNCTION docket.grants_record();
DROP TABLE docket.capabilities;
DROP FUNCTION docket.project_set_status(text, text, text, timestamptz);
DROP FUNCTION docket.project_create(text, text, timestamptz);
DROP TABLE docket.project_events;
DROP TABLE docket.projects;
DROP FUNCTION docket.projects_record();
DROP FUNCTION docket.projects_guard();
DROP TABLE docket.project_transitions;
DROP TABLE docket.project_states;
DROP FUNCTION docket.refuse_change();
DROP FUNCTION docket.context_now();
DROP FUNCTION docket.context_actor();
DROP FUNCTION docket.set_context(text, timestamptz);
DROP TABLE docket.error_codes;
DROP FUNCTION docket.require_project_name(text);
DROP FUNCTION docket.require_principal(text, text);
DROP FUNCTION docket.valid_capability(text);
DROP FUNCTION docket.valid_project_name(text);
DROP FUNCTION docket.valid_principal(text);
