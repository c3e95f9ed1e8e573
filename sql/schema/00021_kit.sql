-- docket's versioned migrations hold what has data or state: schemas, types
-- and domains, tables, indexes, constraints, seed rows, and the few IMMUTABLE
-- functions that a CHECK or a domain calls. One file per aggregate, in the
-- order they stand on each other; goose applies each in a transaction of its
-- own and records it in docket.goose_db_version. Everything without data --
-- functions, triggers, views, privileges -- is in sql/definitions, one file
-- per aggregate, applied by docket migrate after these.
--
-- They are numbered from 21: they replace migrations 1-20, which built the
-- same tables and functions change by change, and a database those made
-- (at version 20) is recognised by docket migrate, which records 21-33 as
-- applied for it instead of running them (db.Migrate).
--
-- The kit: what every aggregate's migration stands on --
--   * names and bounds: principals, project names, capabilities, JSON sizes;
--   * the error catalogue (docket.error_codes), the same as package db's;
--   * the machine kit: every state machine's states and moves as rows;
--   * the list of API functions (docket.api_functions), which the
--     definitions fill.
-- Each aggregate's migration that follows holds its own tables, and alters
-- another's only where it says so.

-- +goose Up

CREATE SCHEMA IF NOT EXISTS docket;

-- Names ---------------------------------------------------------------------

-- A project name: 1-63 characters of [a-z0-9._-], starting with a letter or digit.
CREATE FUNCTION docket.valid_project_name(p_name text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN p_name ~ '^[a-z0-9][a-z0-9._-]{0,62}$';

-- A principal: "kind:name", e.g. svc:billing or user:ana. kind is 1-32 characters of
-- [a-z0-9_-] starting with a letter; name is 1-200 characters of [A-Za-z0-9._@+:/-]
-- starting with a letter or digit. The lengths are checked apart from the
-- pattern, which has no bounded repeats: the same rule, several times cheaper,
-- since every job row checks it. Not STRICT, so the planner inlines it into
-- the domain checks of docket.jobs (a STRICT SQL function whose body is an
-- AND is never inlined); a NULL principal is NULL either way.
CREATE FUNCTION docket.valid_principal(p_principal text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_principal ~ '^[a-z][a-z0-9_-]*:[A-Za-z0-9][A-Za-z0-9._@+:/-]*$'
   AND length(split_part(p_principal, ':', 1)) <= 32
   AND length(p_principal) - length(split_part(p_principal, ':', 1)) <= 201;

-- A capability: two to four dot-separated segments of [a-z0-9_] each starting with a
-- letter, at most 64 characters, e.g. job.create. No wildcard can be spelled.
CREATE FUNCTION docket.valid_capability(p_capability text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN length(p_capability) <= 64
   AND p_capability ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*){1,3}$';

-- json_size is the size of a JSON value as docket bounds it: the bytes of its
-- canonical text.
CREATE FUNCTION docket.json_size(p_value jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN octet_length(p_value::text);

-- A column holding a principal.
CREATE DOMAIN docket.principal AS text CONSTRAINT principal_valid CHECK (docket.valid_principal(VALUE));

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
    ('DK009', 'ErrNotPermitted', 'actor lacks the role or grant'),
    ('DK010', 'ErrInvalidArgument', 'bad name, size, interval, schedule, time zone, ... (the message says which)'),
    ('DK011', 'ErrAmbiguousCorrelation', 'keys point at two different open cases'),
    ('DK012', 'ErrRefusedRevision', 'payload schema or handler revision this deployment does not know'),
    ('DK013', 'ErrInvalidDependency', 'cross-quorum or cyclic dependency, unknown predecessor'),
    ('DK014', 'ErrTerminal', 're-completing a finished job or lane with a different outcome'),
    ('DK015', 'ErrImmutable', 'a change to an immutable column, or an update or delete of an append-only record');

-- The machine kit -------------------------------------------------------------

-- Every state machine of docket is declared here, as rows: its states (which
-- a row may be born in, which it never leaves) and its moves. Each
-- aggregate's migration inserts its own machine's rows; its definitions make
-- views of them by the machine's name (docket.job_states,
-- docket.job_transitions, ...) and its guards check every move against them
-- (sql/definitions/kit.sql: machine_birth, machine_move). The rows change only
-- by a migration that says so (SET LOCAL docket.migrating = 'on'); for
-- everyone else, the owner included, they are as migrated
-- (refuse_machine_change).

CREATE TABLE docket.machines (
    name    text PRIMARY KEY CONSTRAINT machines_name_valid CHECK (name ~ '^[a-z][a-z_]{0,31}$'),
    subject text NOT NULL, -- the table and column the machine moves, e.g. docket.jobs.state
    meaning text NOT NULL
);

COMMENT ON TABLE docket.machines IS
    'docket''s state machines: each has its states in docket.machine_states and its moves in docket.machine_transitions.';

CREATE TABLE docket.machine_states (
    machine  text NOT NULL REFERENCES docket.machines (name),
    state    text NOT NULL,
    initial  boolean NOT NULL, -- a row may be created in this state
    terminal boolean NOT NULL, -- a row in this state never changes again
    meaning  text NOT NULL,
    PRIMARY KEY (machine, state),
    CONSTRAINT machine_states_initial_not_terminal CHECK (NOT (initial AND terminal))
);

CREATE TABLE docket.machine_transitions (
    machine    text NOT NULL,
    from_state text NOT NULL,
    to_state   text NOT NULL,
    meaning    text,
    PRIMARY KEY (machine, from_state, to_state),
    FOREIGN KEY (machine, from_state) REFERENCES docket.machine_states (machine, state),
    FOREIGN KEY (machine, to_state) REFERENCES docket.machine_states (machine, state)
);

-- The API --------------------------------------------------------------------

-- The functions the group roles may call, by name (every overload), and the
-- least role that may: 'reader' (every group role: the read-only predicates
-- the views call), 'app' (docket_app and docket_operator) or 'operator'
-- (docket_operator). They run SECURITY DEFINER; nothing else is granted.
CREATE TABLE docket.api_functions (
    name text PRIMARY KEY,
    role text NOT NULL CONSTRAINT api_functions_role_known CHECK (role IN ('reader', 'app', 'operator'))
);

COMMENT ON TABLE docket.api_functions IS
    'The functions of docket''s API and the least group role that may call them; docket.apply_privileges() makes them SECURITY DEFINER and grants them.';

-- +goose Down
-- The schema stays: River's tables live in it.
DROP TABLE docket.api_functions, docket.machine_transitions, docket.machine_states, docket.machines,
    docket.error_codes;
DROP DOMAIN docket.principal;
DROP FUNCTION docket.json_size(jsonb);
DROP FUNCTION docket.valid_capability(text);
DROP FUNCTION docket.valid_principal(text);
DROP FUNCTION docket.valid_project_name(text);
