-- Plans: frozen, content-addressed job graphs, and their runs. The plans,
-- their steps and dependencies, the runs, their versions and steps; the run
-- and run_step machines. Their rules are sql/definitions/plans.sql's.

-- +goose Up

-- Kept by a down migration while granted: an up finds them there.
INSERT INTO docket.capabilities (name, description) VALUES
    ('plan.run', 'start, replan and cancel runs of plans in the project (with job.create), and read them')
ON CONFLICT (name) DO NOTHING;

-- The machines of this file change only here (docket.refuse_machine_change).
SET LOCAL docket.migrating = 'on';

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('run', 'docket.runs.status', 'a run of a plan: running until its terminal steps succeeded, or unwound'),
    ('run_step', 'docket.run_steps.state', 'a step a run admitted: its job, its outcome, its compensation');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'run', * FROM (VALUES
    ('running', true, false, 'admitting and applying steps in ready order'),
    ('unwinding', false, false, 'a step failed, was refused or cancelled, or the run was cancelled: compensating completed steps in reverse of their recorded order'),
    ('succeeded', false, true, 'every terminal step succeeded; the output is the lowest terminal step''s result'),
    ('compensated', false, true, 'unwound: every completed step with a compensation was compensated'),
    ('failed', false, true, 'a compensation failed: what remains is an operator''s')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'run', from_state, to_state, NULL FROM (VALUES
    ('running', 'succeeded'),
    ('running', 'unwinding'),
    ('unwinding', 'compensated'),
    ('unwinding', 'failed')) v (from_state, to_state);

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'run_step', * FROM (VALUES
    ('admitted', true, false, 'its job is enqueued'),
    ('refused', true, false, 'it required trusted input and would not get it; its job was never enqueued'),
    ('succeeded', false, false, 'its job succeeded; its result is recorded'),
    ('failed', false, true, 'its job failed for good (failed or dead)'),
    ('uncertain', false, false, 'its job''s holder vanished: it may have acted'),
    ('cancelled', false, true, 'its job was cancelled before it ran'),
    ('compensating', false, false, 'its compensation job is enqueued'),
    ('compensated', false, true, 'its compensation succeeded'),
    ('compensation_failed', false, true, 'its compensation did not succeed')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'run_step', from_state, to_state, NULL FROM (VALUES
    ('admitted', 'succeeded'),
    ('admitted', 'failed'),
    ('admitted', 'uncertain'),
    ('admitted', 'cancelled'),
    ('succeeded', 'compensating'),
    ('uncertain', 'compensating'),
    ('uncertain', 'succeeded'),
    ('compensating', 'compensated'),
    ('compensating', 'compensation_failed')) v (from_state, to_state);

-- Plans ----------------------------------------------------------------------------------

-- valid_step_id: 1-63 characters of [a-z0-9._-], starting with a letter.
CREATE FUNCTION docket.valid_step_id(p text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p ~ '^[a-z][a-z0-9._-]{0,62}$';

CREATE TABLE docket.plans (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project    text NOT NULL REFERENCES docket.projects (name),
    -- sha256 of canonical, lowercase hex.
    digest     text NOT NULL CONSTRAINT plans_digest_hex CHECK (digest ~ '^[0-9a-f]{64}$'),
    canonical  text NOT NULL CONSTRAINT plans_canonical_bounded CHECK (length(canonical) <= 16777216),
    steps      integer NOT NULL CONSTRAINT plans_steps_range CHECK (steps BETWEEN 1 AND 10000),
    created_by docket.principal NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT plans_project_digest_key UNIQUE (project, digest),
    CONSTRAINT plans_digest_of_canonical CHECK (encode(sha256(convert_to(canonical, 'UTF8')), 'hex') = digest)
);

COMMENT ON TABLE docket.plans IS
    'Frozen plans, each its canonical text under its sha256 digest: never changed, never deleted while a run names it.';

CREATE TABLE docket.plan_steps (
    plan_id      bigint NOT NULL REFERENCES docket.plans (id),
    step_id      text NOT NULL CONSTRAINT plan_steps_id_valid CHECK (docket.valid_step_id(step_id)),
    kind         docket.job_kind NOT NULL,
    -- [{"name": ..., "source": {"kind": step|path|input|const, "step", "path", "value"}}]
    args         jsonb NOT NULL,
    after        text[] NOT NULL,
    terminal     boolean NOT NULL,
    compensation docket.job_kind,
    trusted      boolean NOT NULL,
    repeatable   boolean NOT NULL,
    PRIMARY KEY (plan_id, step_id)
);

-- plan_deps: step_id runs after after_id; the successors of a step are one
-- range scan of plan_deps_after_idx.
CREATE TABLE docket.plan_deps (
    plan_id  bigint NOT NULL,
    step_id  text NOT NULL,
    after_id text NOT NULL,
    PRIMARY KEY (plan_id, step_id, after_id),
    FOREIGN KEY (plan_id, step_id) REFERENCES docket.plan_steps (plan_id, step_id),
    FOREIGN KEY (plan_id, after_id) REFERENCES docket.plan_steps (plan_id, step_id)
);

CREATE INDEX plan_deps_after_idx ON docket.plan_deps (plan_id, after_id, step_id);

-- Runs -------------------------------------------------------------------------------------

CREATE TABLE docket.runs (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project        text NOT NULL REFERENCES docket.projects (name),
    -- The plan it runs now, and which version of its plan that is.
    plan_id        bigint NOT NULL REFERENCES docket.plans (id),
    version        integer NOT NULL DEFAULT 1 CONSTRAINT runs_version_positive CHECK (version >= 1),
    case_id        bigint,
    input          jsonb NOT NULL CONSTRAINT runs_input_bounded CHECK (docket.json_size(input) <= 65536),
    input_trusted  boolean NOT NULL,
    status         text NOT NULL DEFAULT 'running',
    replan_limit   integer NOT NULL CONSTRAINT runs_replan_limit_range CHECK (replan_limit BETWEEN 0 AND 100),
    -- The first untrusted value a step was admitted with: after it, no replan.
    untrusted_read text,
    -- Steps admitted so far (the last ready_seq), and applied in ready order.
    admitted       integer NOT NULL DEFAULT 0,
    applied        integer NOT NULL DEFAULT 0,
    output         jsonb,
    -- Why it unwound.
    failure        text CONSTRAINT runs_failure_bounded CHECK (length(failure) <= 2000),
    created_by     docket.principal NOT NULL,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    finished_at    timestamptz,
    CONSTRAINT runs_case_fkey FOREIGN KEY (case_id, project) REFERENCES docket.cases (id, project),
    CONSTRAINT runs_applied_admitted CHECK (applied BETWEEN 0 AND admitted),
    CONSTRAINT runs_finished_iff_terminal CHECK ((status IN ('succeeded', 'compensated', 'failed')) = (finished_at IS NOT NULL)),
    CONSTRAINT runs_output_only_succeeded CHECK (output IS NULL OR status = 'succeeded')
);

COMMENT ON TABLE docket.runs IS
    'Runs of plans: input and its trust, status along docket.run_transitions, the version of the plan it runs (all versions in docket.run_versions).';

CREATE INDEX runs_project_idx ON docket.runs (project, id);

CREATE INDEX runs_case_idx ON docket.runs (case_id, id) WHERE case_id IS NOT NULL;

CREATE TABLE docket.run_versions (
    run_id      bigint NOT NULL REFERENCES docket.runs (id),
    version     integer NOT NULL,
    plan_id     bigint NOT NULL REFERENCES docket.plans (id),
    -- The plan it replaced and why; NULL for the first.
    predecessor bigint REFERENCES docket.plans (id),
    reason      text CONSTRAINT run_versions_reason_bounded CHECK (length(reason) BETWEEN 1 AND 2000),
    actor       text NOT NULL,
    at          timestamptz NOT NULL,
    PRIMARY KEY (run_id, version),
    CONSTRAINT run_versions_successor_whole CHECK ((version = 1) = (predecessor IS NULL) AND (version = 1) = (reason IS NULL))
);

CREATE TABLE docket.run_steps (
    run_id            bigint NOT NULL REFERENCES docket.runs (id),
    step_id           text NOT NULL,
    -- The plan version it was admitted under, and its kind then.
    version           integer NOT NULL,
    kind              docket.job_kind NOT NULL,
    state             text NOT NULL,
    -- Its place in ready order: admission and result application follow it.
    ready_seq         integer NOT NULL,
    args              jsonb NOT NULL,
    trusted           boolean NOT NULL,
    job_id            bigint REFERENCES docket.jobs (id),
    result            jsonb,
    compensation      docket.job_kind,
    compensation_job_id bigint REFERENCES docket.jobs (id),
    reason            text CONSTRAINT run_steps_reason_bounded CHECK (length(reason) <= 2000),
    admitted_at       timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (run_id, step_id),
    CONSTRAINT run_steps_ready_seq_key UNIQUE (run_id, ready_seq),
    CONSTRAINT run_steps_job_key UNIQUE (job_id),
    CONSTRAINT run_steps_compensation_job_key UNIQUE (compensation_job_id),
    CONSTRAINT run_steps_job_iff_admitted CHECK ((job_id IS NULL) = (state = 'refused'))
);

COMMENT ON TABLE docket.run_steps IS
    'The steps a run admitted, in ready order: arguments and trust, job, outcome and compensation; state along docket.run_step_transitions.';

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.run_steps, docket.run_versions, docket.runs, docket.plan_deps, docket.plan_steps, docket.plans;
DELETE FROM docket.machine_transitions WHERE machine IN ('run', 'run_step');
DELETE FROM docket.machine_states WHERE machine IN ('run', 'run_step');
DELETE FROM docket.machines WHERE name IN ('run', 'run_step');
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name = 'plan.run'
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
DROP FUNCTION docket.valid_step_id(text);
