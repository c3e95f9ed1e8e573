-- Step waits: a run's step may wait -- sleep until an instant, await a
-- message, or open a human task -- instead of running a job. The waits,
-- timers and tasks cases have serve it: each of their rows has exactly one
-- owner, a case or a run's step (run_id, step_id), and a timer may have
-- neither. A step's timer is no job: the timer sweep fires it. Their rules
-- are sql/definitions/waits.sql's, tasks.sql's and plans.sql's.

-- +goose Up

SET LOCAL docket.migrating = 'on';

-- The run_step machine: a waiting step.
INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning) VALUES
    ('run_step', 'waiting', true, false,
     'its sleep, await or task is registered; it holds no job, no worker and no lease until what it waits on answers');

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'run_step', from_state, to_state, NULL FROM (VALUES
    ('waiting', 'succeeded'),
    ('waiting', 'failed'),
    ('waiting', 'cancelled')) v (from_state, to_state);

-- Plans: a step's wait, as its canonical text declares it (NULL: a job).
ALTER TABLE docket.plan_steps ADD COLUMN wait jsonb;
ALTER TABLE docket.plan_steps
    ADD CONSTRAINT plan_steps_wait_type CHECK (wait IS NULL OR wait ->> 'type' IN ('sleep', 'message', 'task'));

-- Runs: what a waiting step waits on; such a step has no job.
ALTER TABLE docket.run_steps ADD COLUMN wait text;
ALTER TABLE docket.run_steps
    ADD CONSTRAINT run_steps_wait_type CHECK (wait IN ('sleep', 'message', 'task')),
    DROP CONSTRAINT run_steps_job_iff_admitted,
    ADD CONSTRAINT run_steps_job_iff_admitted CHECK ((job_id IS NULL) = (state = 'refused' OR wait IS NOT NULL)),
    ADD CONSTRAINT run_steps_waiting_iff_wait CHECK (state <> 'waiting' OR wait IS NOT NULL),
    ADD CONSTRAINT run_steps_wait_not_admitted CHECK (wait IS NULL OR state <> 'admitted');

-- Waits: a case's, or a run step's. A step's wait enqueues no
-- continuation: its end is the step's answer.
ALTER TABLE docket.waits
    ALTER COLUMN case_id DROP NOT NULL,
    ALTER COLUMN on_arrival_kind DROP NOT NULL,
    ALTER COLUMN on_arrival_queue DROP NOT NULL,
    ALTER COLUMN on_arrival_payload DROP NOT NULL,
    ALTER COLUMN on_arrival_payload_schema DROP NOT NULL,
    ALTER COLUMN on_arrival_max_attempts DROP NOT NULL,
    ADD COLUMN run_id bigint,
    ADD COLUMN step_id text;
ALTER TABLE docket.waits
    ADD CONSTRAINT waits_step_fkey FOREIGN KEY (run_id, step_id) REFERENCES docket.run_steps (run_id, step_id),
    ADD CONSTRAINT waits_one_owner CHECK ((case_id IS NULL) <> (run_id IS NULL) AND (run_id IS NULL) = (step_id IS NULL)),
    ADD CONSTRAINT waits_continuations_only_case CHECK (
        (on_arrival_kind IS NULL) = (run_id IS NOT NULL)
        AND (on_arrival_kind IS NULL) = (on_arrival_queue IS NULL)
        AND (on_arrival_kind IS NULL) = (on_arrival_payload IS NULL)
        AND (on_arrival_kind IS NULL) = (on_arrival_payload_schema IS NULL)
        AND (on_arrival_kind IS NULL) = (on_arrival_max_attempts IS NULL)
        AND (run_id IS NULL OR on_timeout_kind IS NULL));

-- A step waits once: a retried admission finds its wait by (run, step).
CREATE UNIQUE INDEX waits_step_key ON docket.waits (run_id, step_id) WHERE run_id IS NOT NULL;

-- Tasks: a case's, or a run step's (found by (run, step)).
ALTER TABLE docket.tasks
    ALTER COLUMN case_id DROP NOT NULL,
    ADD COLUMN run_id bigint,
    ADD COLUMN step_id text;
ALTER TABLE docket.tasks
    ADD CONSTRAINT tasks_step_fkey FOREIGN KEY (run_id, step_id) REFERENCES docket.run_steps (run_id, step_id),
    ADD CONSTRAINT tasks_one_owner CHECK ((case_id IS NULL) <> (run_id IS NULL) AND (run_id IS NULL) = (step_id IS NULL));

CREATE UNIQUE INDEX tasks_step_key ON docket.tasks (run_id, step_id) WHERE run_id IS NOT NULL;

-- Timers: a case's (a job of the case), a run step's (no job: the timer
-- sweep fires it, or the run's end disarms it), or neither (a job of the
-- project).
ALTER TABLE docket.timers
    ALTER COLUMN case_id DROP NOT NULL,
    ALTER COLUMN job_id DROP NOT NULL,
    ADD COLUMN run_id bigint,
    ADD COLUMN step_id text,
    ADD COLUMN fired_at timestamptz,
    ADD COLUMN disarmed_at timestamptz;
ALTER TABLE docket.timers
    ADD CONSTRAINT timers_project_fkey FOREIGN KEY (project) REFERENCES docket.projects (name),
    ADD CONSTRAINT timers_step_fkey FOREIGN KEY (run_id, step_id) REFERENCES docket.run_steps (run_id, step_id),
    ADD CONSTRAINT timers_one_owner CHECK ((case_id IS NULL OR run_id IS NULL) AND (run_id IS NULL) = (step_id IS NULL)),
    ADD CONSTRAINT timers_job_unless_step CHECK ((job_id IS NULL) = (run_id IS NOT NULL)),
    ADD CONSTRAINT timers_fired_or_disarmed_step CHECK (
        (fired_at IS NULL AND disarmed_at IS NULL OR run_id IS NOT NULL) AND (fired_at IS NULL OR disarmed_at IS NULL));

CREATE UNIQUE INDEX timers_step_key ON docket.timers (run_id, step_id) WHERE run_id IS NOT NULL;

-- A timer of no case is its project, name and instant: setting it again is a retry.
CREATE UNIQUE INDEX timers_project_name_wake_key ON docket.timers (project, name, wake_at)
    WHERE case_id IS NULL AND run_id IS NULL;

-- The timer sweep's range scan: armed step timers by wake instant.
CREATE INDEX timers_armed_idx ON docket.timers (wake_at, id)
    WHERE run_id IS NOT NULL AND fired_at IS NULL AND disarmed_at IS NULL;

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP INDEX docket.timers_armed_idx, docket.timers_project_name_wake_key, docket.timers_step_key,
    docket.tasks_step_key, docket.waits_step_key;
ALTER TABLE docket.timers
    DROP CONSTRAINT timers_fired_or_disarmed_step, DROP CONSTRAINT timers_job_unless_step,
    DROP CONSTRAINT timers_one_owner, DROP CONSTRAINT timers_step_fkey, DROP CONSTRAINT timers_project_fkey,
    DROP COLUMN disarmed_at, DROP COLUMN fired_at, DROP COLUMN step_id, DROP COLUMN run_id,
    ALTER COLUMN job_id SET NOT NULL, ALTER COLUMN case_id SET NOT NULL;
ALTER TABLE docket.tasks
    DROP CONSTRAINT tasks_one_owner, DROP CONSTRAINT tasks_step_fkey,
    DROP COLUMN step_id, DROP COLUMN run_id, ALTER COLUMN case_id SET NOT NULL;
ALTER TABLE docket.waits
    DROP CONSTRAINT waits_continuations_only_case, DROP CONSTRAINT waits_one_owner, DROP CONSTRAINT waits_step_fkey,
    DROP COLUMN step_id, DROP COLUMN run_id,
    ALTER COLUMN on_arrival_max_attempts SET NOT NULL, ALTER COLUMN on_arrival_payload_schema SET NOT NULL,
    ALTER COLUMN on_arrival_payload SET NOT NULL, ALTER COLUMN on_arrival_queue SET NOT NULL,
    ALTER COLUMN on_arrival_kind SET NOT NULL, ALTER COLUMN case_id SET NOT NULL;
ALTER TABLE docket.run_steps
    DROP CONSTRAINT run_steps_wait_not_admitted, DROP CONSTRAINT run_steps_waiting_iff_wait,
    DROP CONSTRAINT run_steps_job_iff_admitted, DROP CONSTRAINT run_steps_wait_type,
    ADD CONSTRAINT run_steps_job_iff_admitted CHECK ((job_id IS NULL) = (state = 'refused')),
    DROP COLUMN wait;
ALTER TABLE docket.plan_steps DROP CONSTRAINT plan_steps_wait_type, DROP COLUMN wait;
DELETE FROM docket.machine_transitions WHERE machine = 'run_step' AND from_state = 'waiting';
DELETE FROM docket.machine_states WHERE machine = 'run_step' AND state = 'waiting';
