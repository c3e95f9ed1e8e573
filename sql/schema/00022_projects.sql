-- Projects: the tenants of docket. Grants, jobs, lanes, cases and schedules
-- belong to exactly one project. Its rules are sql/definitions/projects.sql's.

-- +goose Up

-- The machines of this file change only here (docket.refuse_machine_change).
SET LOCAL docket.migrating = 'on';

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('project', 'docket.projects.status', 'a project: whether it takes new work');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'project', * FROM (VALUES
    ('active', true, false, 'takes new work'),
    ('archived', false, false, 'takes no new work; what it holds goes on'),
    ('retired', false, true, 'never changes again')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'project', from_state, to_state, NULL FROM (VALUES
    ('active', 'archived'),
    ('archived', 'active'),
    ('archived', 'retired')) v (from_state, to_state);

CREATE TABLE docket.projects (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text NOT NULL UNIQUE
               CONSTRAINT projects_name_valid CHECK (docket.valid_project_name(name)),
    status     text NOT NULL DEFAULT 'active',
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
    from_state text,
    to_state   text NOT NULL,
    actor      text NOT NULL,
    at         timestamptz NOT NULL
);

CREATE INDEX project_events_project_idx ON docket.project_events (project, id);

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.project_events, docket.projects;
DELETE FROM docket.machine_transitions WHERE machine = 'project';
DELETE FROM docket.machine_states WHERE machine = 'project';
DELETE FROM docket.machines WHERE name = 'project';
