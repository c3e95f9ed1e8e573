-- A run step's compensation job is unique among steps, as before, by an
-- index that holds only the steps that have one: every step has a row in
-- it otherwise, NULL, written at the step's birth and again at each of its
-- updates that is not HOT, for a constraint NULLs never break. Lookups by
-- a job (the foreign key's checks when a prune removes jobs) use it as
-- they did.

-- +goose Up

SET LOCAL docket.migrating = 'on';

ALTER TABLE docket.run_steps DROP CONSTRAINT run_steps_compensation_job_key;
CREATE UNIQUE INDEX run_steps_compensation_job_key ON docket.run_steps (compensation_job_id)
    WHERE compensation_job_id IS NOT NULL;

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP INDEX docket.run_steps_compensation_job_key;
ALTER TABLE docket.run_steps ADD CONSTRAINT run_steps_compensation_job_key UNIQUE (compensation_job_id);
