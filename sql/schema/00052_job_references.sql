-- Nine foreign keys named a job: six that a job's delete must not leave
-- dangling (obligations, waits, timers, schedule occurrences, run steps and
-- their compensations) and three whose rows go with the job (its traces,
-- completion records and token rekeys). Postgres checks a foreign key from
-- the referenced side one deleted row at a time: a prune, the only delete
-- of jobs, ran nine queries a pruned job, more than half of its delete.
-- The triggers of sql/definitions/jobs.sql hold the same rules, with the
-- same SQLSTATE (23503) and constraint names: a row naming a job is checked
-- as it is written, holding the job (FOR KEY SHARE) as the foreign key did,
-- and a statement deleting jobs checks and cascades once, set-based
-- (jobs_release_references).

-- +goose Up

SET LOCAL docket.migrating = 'on';

ALTER TABLE docket.obligations DROP CONSTRAINT obligations_escalation_job_id_fkey;
ALTER TABLE docket.waits DROP CONSTRAINT waits_continuation_job_id_fkey;
ALTER TABLE docket.timers DROP CONSTRAINT timers_job_id_fkey;
ALTER TABLE docket.schedule_occurrences DROP CONSTRAINT schedule_occurrences_job_id_fkey;
ALTER TABLE docket.run_steps DROP CONSTRAINT run_steps_job_id_fkey, DROP CONSTRAINT run_steps_compensation_job_id_fkey;
ALTER TABLE docket.job_traces DROP CONSTRAINT job_traces_job_id_fkey;
ALTER TABLE docket.job_completions DROP CONSTRAINT job_completions_job_id_fkey;
ALTER TABLE docket.job_token_rekeys DROP CONSTRAINT job_token_rekeys_job_id_fkey;

-- +goose Down
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.obligations ADD CONSTRAINT obligations_escalation_job_id_fkey
    FOREIGN KEY (escalation_job_id) REFERENCES docket.jobs(id);
ALTER TABLE docket.waits ADD CONSTRAINT waits_continuation_job_id_fkey
    FOREIGN KEY (continuation_job_id) REFERENCES docket.jobs(id);
ALTER TABLE docket.timers ADD CONSTRAINT timers_job_id_fkey FOREIGN KEY (job_id) REFERENCES docket.jobs(id);
ALTER TABLE docket.schedule_occurrences ADD CONSTRAINT schedule_occurrences_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES docket.jobs(id);
ALTER TABLE docket.run_steps ADD CONSTRAINT run_steps_job_id_fkey FOREIGN KEY (job_id) REFERENCES docket.jobs(id),
    ADD CONSTRAINT run_steps_compensation_job_id_fkey FOREIGN KEY (compensation_job_id) REFERENCES docket.jobs(id);
ALTER TABLE docket.job_traces ADD CONSTRAINT job_traces_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES docket.jobs(id) ON DELETE CASCADE;
ALTER TABLE docket.job_completions ADD CONSTRAINT job_completions_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES docket.jobs(id) ON DELETE CASCADE;
ALTER TABLE docket.job_token_rekeys ADD CONSTRAINT job_token_rekeys_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES docket.jobs(id) ON DELETE CASCADE;
