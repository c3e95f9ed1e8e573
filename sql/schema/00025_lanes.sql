-- Lanes: named streams of work under a quorum, each with one branch, one
-- assignee and one task thread, carrying a review and a merge record. The
-- quorums, lanes, their dependencies and events; the lane and lane_review
-- machines. Their rules are sql/definitions/lanes.sql's.

-- +goose Up

-- Names and bounds ------------------------------------------------------------

-- A quorum or lane name follows the project name rule,
-- docket.valid_project_name: 1-63 characters of [a-z0-9._-], starting with a
-- letter or digit.

-- A branch: a git branch name, conservatively: 1-255 characters of
-- [A-Za-z0-9._/-], starting with a letter, digit or underscore; no component
-- starting with a dot or ending in .lock; no "..", no "//"; not ending in "/"
-- or "."; not HEAD.
CREATE FUNCTION docket.valid_branch(p_branch text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_branch) <= 255
   AND p_branch ~ '^[A-Za-z0-9_][A-Za-z0-9._/-]*$'
   AND p_branch !~ '(^|/)\.|\.\.|//|/$|\.$|\.lock(/|$)'
   AND p_branch <> 'HEAD';

-- A task reference: 1-500 characters, no control characters, no leading or
-- trailing space; e.g. PROJ-123 or a URL. docket never follows it.
CREATE FUNCTION docket.valid_task_ref(p_task_ref text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_task_ref) BETWEEN 1 AND 500
   AND p_task_ref !~ '[[:cntrl:]]'
   AND p_task_ref = btrim(p_task_ref);

-- A merge commit: a git object id, 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
CREATE FUNCTION docket.valid_commit(p_commit text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_commit) IN (40, 64) AND p_commit ~ '^[0-9a-f]+$';

-- Capabilities ---------------------------------------------------------------

-- Kept by a down migration while granted: an up finds them there.
INSERT INTO docket.capabilities (name, description) VALUES
    ('quorum.create', 'create quorums in the project, naming their conductor'),
    ('lane.view', 'list and read every lane of the project')
ON CONFLICT (name) DO NOTHING;

-- States and transitions ------------------------------------------------------

-- The machines of this file change only here (docket.refuse_machine_change).
SET LOCAL docket.migrating = 'on';

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('lane', 'docket.lanes.state', 'a lanes execution');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'lane', * FROM (VALUES
    ('open', true, false, 'created; no work started'),
    ('in_progress', false, false, 'work under way'),
    ('done', false, true, 'the work is finished; it may be merged once approved'),
    ('failed', false, true, 'the work will not be finished'),
    ('cancelled', false, true, 'withdrawn before it finished')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'lane', from_state, to_state, NULL FROM (VALUES
    ('open', 'in_progress'),
    ('open', 'cancelled'),
    ('in_progress', 'done'),
    ('in_progress', 'failed'),
    ('in_progress', 'cancelled')) v (from_state, to_state);

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('lane_review', 'docket.lanes.review', 'a lanes review');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'lane_review', * FROM (VALUES
    ('none', true, false, 'not submitted for review'),
    ('submitted', false, false, 'waiting for the conductor''s verdict'),
    ('approved', false, true, 'approved by the conductor: final'),
    ('changes_requested', false, false, 'the conductor asked for changes; submit again')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'lane_review', from_state, to_state, NULL FROM (VALUES
    ('none', 'submitted'),
    ('submitted', 'approved'),
    ('submitted', 'changes_requested'),
    ('changes_requested', 'submitted')) v (from_state, to_state);

-- Quorums ---------------------------------------------------------------------

CREATE TABLE docket.quorums (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project    text NOT NULL REFERENCES docket.projects (name),
    name       text NOT NULL CONSTRAINT quorums_name_valid CHECK (docket.valid_project_name(name)),
    conductor  docket.principal NOT NULL,
    created_by docket.principal NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT quorums_name_key UNIQUE (project, name),
    -- The target of lanes' (quorum_id, project) reference.
    CONSTRAINT quorums_id_project_key UNIQUE (id, project)
);

COMMENT ON TABLE docket.quorums IS
    'A group of lanes in one project under one conductor. Never changed, never deleted.';

CREATE INDEX quorums_conductor_idx ON docket.quorums (conductor);

-- Lanes -----------------------------------------------------------------------

CREATE TABLE docket.lanes (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    quorum_id    bigint NOT NULL,
    -- Copied from the quorum by lanes_guard; never changes.
    project      text NOT NULL,
    name         text NOT NULL CONSTRAINT lanes_name_valid CHECK (docket.valid_project_name(name)),
    branch       text NOT NULL CONSTRAINT lanes_branch_valid CHECK (docket.valid_branch(branch)),
    assignee     docket.principal NOT NULL,
    task_ref     text NOT NULL CONSTRAINT lanes_task_ref_valid CHECK (docket.valid_task_ref(task_ref)),
    state        text NOT NULL DEFAULT 'open',
    review       text NOT NULL DEFAULT 'none',
    merge_commit text CONSTRAINT lanes_merge_commit_valid CHECK (docket.valid_commit(merge_commit)),
    merged_at    timestamptz,
    merged_by    docket.principal,
    created_by   docket.principal NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    CONSTRAINT lanes_name_key UNIQUE (quorum_id, name),
    CONSTRAINT lanes_quorum_fkey FOREIGN KEY (quorum_id, project) REFERENCES docket.quorums (id, project),
    -- The targets of jobs' (lane_id, project) check and dependencies' (lane, quorum) references.
    CONSTRAINT lanes_id_project_key UNIQUE (id, project),
    CONSTRAINT lanes_id_quorum_key UNIQUE (id, quorum_id),
    -- A merge is recorded whole, and only for a lane that is done and approved.
    CONSTRAINT lanes_merge_record_whole CHECK (
        (merge_commit IS NULL) = (merged_at IS NULL) AND (merged_at IS NULL) = (merged_by IS NULL)),
    CONSTRAINT lanes_merged_only_done_approved CHECK (
        merged_at IS NULL OR (state = 'done' AND review = 'approved' AND merge_commit IS NOT NULL)),
    CONSTRAINT lanes_updated_not_before_created CHECK (updated_at >= created_at)
);

COMMENT ON TABLE docket.lanes IS
    'A named stream of work under a quorum. Execution moves along docket.lane_transitions, review along docket.lane_review_transitions; every change is in docket.lane_events.';

CREATE INDEX lanes_project_idx ON docket.lanes (project, id);

CREATE INDEX lanes_quorum_idx ON docket.lanes (quorum_id, id);

CREATE INDEX lanes_assignee_idx ON docket.lanes (assignee, id);

-- Dependencies ------------------------------------------------------------------

-- lane_id depends on depends_on, a lane of the same quorum created before it.
-- Because a lane depends only on lanes with a smaller id (a CHECK), the graph
-- is ordered by id and no writer, psql included, can close a cycle.
CREATE TABLE docket.lane_dependencies (
    lane_id    bigint NOT NULL,
    depends_on bigint NOT NULL,
    quorum_id  bigint NOT NULL,
    PRIMARY KEY (lane_id, depends_on),
    CONSTRAINT lane_dependencies_earlier CHECK (depends_on < lane_id),
    CONSTRAINT lane_dependencies_lane_fkey FOREIGN KEY (lane_id, quorum_id) REFERENCES docket.lanes (id, quorum_id),
    CONSTRAINT lane_dependencies_depends_on_fkey FOREIGN KEY (depends_on, quorum_id) REFERENCES docket.lanes (id, quorum_id)
);

COMMENT ON TABLE docket.lane_dependencies IS
    'Same-quorum dependencies between lanes; each points at an earlier lane, so none forms a cycle. Append-only.';

CREATE INDEX lane_dependencies_depends_on_idx ON docket.lane_dependencies (depends_on);

-- Events ------------------------------------------------------------------------

-- One row per change of a lane: its creation, each dependency, each move of
-- the execution or review axis, and its merge. from_state is NULL for a
-- creation and a dependency.
CREATE TABLE docket.lane_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lane_id    bigint NOT NULL REFERENCES docket.lanes (id),
    axis       text NOT NULL
               CONSTRAINT lane_events_axis_known CHECK (axis IN ('created', 'dependency', 'execution', 'review', 'merge')),
    from_state text,
    to_state   text NOT NULL,
    actor      text NOT NULL,
    at         timestamptz NOT NULL,
    detail     text CONSTRAINT lane_events_detail_bounded CHECK (length(detail) <= 2000)
);

COMMENT ON TABLE docket.lane_events IS
    'Append-only history of every lane change: creation, dependencies, execution and review moves, merges.';

CREATE INDEX lane_events_lane_idx ON docket.lane_events (lane_id, id);

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.lane_events, docket.lane_dependencies, docket.lanes, docket.quorums;
DELETE FROM docket.machine_transitions WHERE machine IN ('lane', 'lane_review');
DELETE FROM docket.machine_states WHERE machine IN ('lane', 'lane_review');
DELETE FROM docket.machines WHERE name IN ('lane', 'lane_review');
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name IN ('quorum.create', 'lane.view')
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
DROP FUNCTION docket.valid_commit(text);
DROP FUNCTION docket.valid_task_ref(text);
DROP FUNCTION docket.valid_branch(text);
