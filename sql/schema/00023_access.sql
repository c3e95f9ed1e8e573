-- Access: who may act as whom (docket.actor_bindings), and who may do what
-- where (docket.capabilities, docket.grants), with their histories. Its rules
-- are sql/definitions/access.sql's.

-- +goose Up

-- Actor bindings ------------------------------------------------------------

-- A binding pattern: a principal, or "kind:*" for every principal of a kind.
CREATE FUNCTION docket.valid_binding_principal(p_principal text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN docket.valid_principal(p_principal) OR p_principal ~ '^[a-z][a-z0-9_-]{0,31}:\*$';

-- Which login role may act as which principal. The owner needs no binding.
CREATE TABLE docket.actor_bindings (
    role      text NOT NULL
              CONSTRAINT actor_bindings_role_valid CHECK (length(role) BETWEEN 1 AND 63),
    principal text NOT NULL
              CONSTRAINT actor_bindings_principal_valid CHECK (docket.valid_binding_principal(principal)),
    bound_by  text NOT NULL
              CONSTRAINT actor_bindings_bound_by_valid CHECK (docket.valid_principal(bound_by)),
    bound_at  timestamptz NOT NULL,
    PRIMARY KEY (role, principal)
);

COMMENT ON TABLE docket.actor_bindings IS
    'Which login role (session_user) may act as which principal; "kind:*" binds every principal of a kind. Changed only by docket.actor_bind and docket.actor_unbind.';

CREATE TABLE docket.actor_binding_events (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    role         text NOT NULL,
    principal    text NOT NULL,
    action       text NOT NULL CONSTRAINT actor_binding_events_action_known CHECK (action IN ('bound', 'unbound')),
    actor        text NOT NULL,
    session_role text NOT NULL DEFAULT session_user,
    at           timestamptz NOT NULL
);

-- Capabilities and grants ---------------------------------------------------

-- The capabilities a grant can name. Later migrations add their own; a grant of
-- a capability not listed here is refused, so a typo cannot silently grant nothing.
CREATE TABLE docket.capabilities (
    name        text PRIMARY KEY
                CONSTRAINT capabilities_name_valid CHECK (docket.valid_capability(name)),
    description text NOT NULL
);

-- Each aggregate's migration lists the capabilities it checks.
INSERT INTO docket.capabilities (name, description) VALUES
    ('grant.manage', 'give and revoke grants on the project, except to oneself'),
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
    at         timestamptz NOT NULL,
    session_role text NOT NULL DEFAULT session_user
);

CREATE INDEX grant_events_project_idx ON docket.grant_events (project, id);

-- +goose Down
DROP TABLE docket.grant_events, docket.grants, docket.capabilities, docket.actor_binding_events,
    docket.actor_bindings;
DROP FUNCTION docket.valid_binding_principal(text);
