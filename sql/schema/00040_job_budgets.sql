-- Job budgets: a job may carry ceilings (effects, money in integer minor
-- units of one currency) that its attempts spend against, reported by its
-- handler with each outcome; the job machine's exhausted state (a ceiling
-- reached, or the project's quota unable to take a claim's reservation),
-- left only by a recorded raise; and quota reservations that belong to a
-- run or a job, one row per period they were reserved in. Their rules are
-- sql/definitions/jobs.sql's and budgets.sql's.

-- +goose Up

SET LOCAL docket.migrating = 'on';

-- Every value the domain allowed before is allowed still: NOT VALID skips
-- re-reading the rows.
ALTER DOMAIN docket.job_state DROP CONSTRAINT job_state_known;
ALTER DOMAIN docket.job_state ADD CONSTRAINT job_state_known
    CHECK (VALUE IN ('queued', 'claimed', 'succeeded', 'failed', 'dead', 'uncertain', 'cancelled', 'exhausted')) NOT VALID;

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning) VALUES
    ('job', 'exhausted', false, false,
     'a ceiling of its budget was reached, or its project''s quota could not take its reservation: nobody claims it until it is resumed');

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'job', * FROM (VALUES
    ('claimed', 'exhausted', 'an attempt that did not succeed ended with a ceiling of the job''s budget reached'),
    ('queued', 'exhausted', 'a claim found its project''s quota unable to take the job''s reservation'),
    ('uncertain', 'exhausted', 'reconciled to run again with a ceiling of its budget reached'),
    ('exhausted', 'queued', 'resumed: its ceilings raised, or its quota freed'),
    ('exhausted', 'cancelled', 'cancel')) v;

UPDATE docket.capabilities
SET description = 'set the project''s spend quotas, raise the ceilings of its runs (with plan.run), and resume its exhausted jobs'
WHERE name = 'budget.manage';

-- The ceilings and what was spent. jobs is an argument type of functions:
-- the spent columns are added with a constant default (which fills the rows
-- there are without rewriting the table), then made NOT NULL.
ALTER TABLE docket.jobs
    ADD COLUMN max_effects   bigint,
    ADD COLUMN max_money     bigint,
    ADD COLUMN currency      text,
    ADD COLUMN spent_effects bigint DEFAULT 0,
    ADD COLUMN spent_money   bigint DEFAULT 0;
ALTER TABLE docket.jobs ALTER COLUMN spent_effects SET NOT NULL, ALTER COLUMN spent_money SET NOT NULL;
ALTER TABLE docket.jobs
    ADD CONSTRAINT jobs_budget_valid CHECK (
        coalesce(max_effects >= 1, true) AND coalesce(max_money >= 1, true)
        AND (max_money IS NULL) = (currency IS NULL) AND coalesce(currency ~ '^[A-Z]{3}$', true)
        AND spent_effects >= 0 AND spent_money >= 0);
COMMENT ON COLUMN docket.jobs.max_effects IS 'The most effects the job''s attempts may report together (NULL: no ceiling).';
COMMENT ON COLUMN docket.jobs.max_money IS 'The most money, in minor units of currency, the job''s attempts may report together (NULL: no ceiling).';
COMMENT ON COLUMN docket.jobs.spent_effects IS 'The effects its attempts reported, together.';
COMMENT ON COLUMN docket.jobs.spent_money IS 'The money its attempts reported, together, in minor units (of currency, when it has a ceiling).';

-- A claim looks for the jobs of its batch that reserve in a quota: few or
-- none, found without reading the others.
CREATE INDEX jobs_money_ceiling_idx ON docket.jobs (id) WHERE max_money IS NOT NULL;
-- The exhausted, for the census and docket.jobs_exhausted.
CREATE INDEX jobs_exhausted_idx ON docket.jobs (project, updated_at, id) WHERE state = 'exhausted';

-- A reservation belongs to a run or to a job, and to the period it was
-- made in: an owner that carries on into a later period reserves there
-- anew, and what it spent stays in the period it was reserved in.
ALTER TABLE docket.budget_reservations DROP CONSTRAINT budget_reservations_pkey;
ALTER TABLE docket.budget_reservations
    ALTER COLUMN run_id DROP NOT NULL,
    ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ADD COLUMN job_id bigint,
    ADD CONSTRAINT budget_reservations_one_owner CHECK (num_nonnulls(run_id, job_id) = 1),
    ADD CONSTRAINT budget_reservations_run_period UNIQUE (run_id, period_start),
    ADD CONSTRAINT budget_reservations_job_period UNIQUE (job_id, period_start);
COMMENT ON COLUMN docket.budget_reservations.amount IS
    'While its owner may still spend in this period: what it spent here and the most it may still spend; after: what it spent here.';

-- +goose Down
SET LOCAL docket.migrating = 'on';
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM docket.jobs WHERE state = 'exhausted') THEN
        RAISE EXCEPTION 'jobs are exhausted: resume or cancel them before migrating down';
    END IF;
END
$$;
-- +goose StatementEnd
DELETE FROM docket.budget_reservations WHERE job_id IS NOT NULL;
-- A run's reservations in several periods become one, in its latest.
DELETE FROM docket.budget_reservations b USING docket.budget_reservations c
WHERE c.run_id = b.run_id AND c.period_start > b.period_start;
ALTER TABLE docket.budget_reservations
    DROP CONSTRAINT budget_reservations_job_period, DROP CONSTRAINT budget_reservations_run_period,
    DROP CONSTRAINT budget_reservations_one_owner, DROP COLUMN job_id, DROP COLUMN id;
ALTER TABLE docket.budget_reservations ALTER COLUMN run_id SET NOT NULL, ADD PRIMARY KEY (run_id);
DROP INDEX docket.jobs_exhausted_idx, docket.jobs_money_ceiling_idx;
ALTER TABLE docket.jobs DROP CONSTRAINT jobs_budget_valid,
    DROP COLUMN spent_money, DROP COLUMN spent_effects, DROP COLUMN currency, DROP COLUMN max_money, DROP COLUMN max_effects;
UPDATE docket.capabilities
SET description = 'set the project''s spend quotas, and raise the ceilings of its runs (with plan.run)'
WHERE name = 'budget.manage';
DELETE FROM docket.machine_transitions WHERE machine = 'job' AND 'exhausted' IN (from_state, to_state);
DELETE FROM docket.machine_states WHERE machine = 'job' AND state = 'exhausted';
ALTER DOMAIN docket.job_state DROP CONSTRAINT job_state_known;
ALTER DOMAIN docket.job_state ADD CONSTRAINT job_state_known
    CHECK (VALUE IN ('queued', 'claimed', 'succeeded', 'failed', 'dead', 'uncertain', 'cancelled'));
