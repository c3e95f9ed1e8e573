-- Five tables named a run by a foreign key: its steps, its versions, its
-- batch item, its budget's events and its reservation. A foreign key's
-- check locks the run's row FOR KEY SHARE at every row written, and the
-- advance writes the run before its steps, so each step admitted locked
-- the run again (four times a three-step run, a WAL record each). The
-- lock guards a delete that cannot happen: runs are never deleted
-- (runs_refuse_delete) nor their ids changed (runs_columns_immutable).
-- The triggers of sql/definitions check the same references with the same
-- SQLSTATE (23503) and constraint names once the row is written, as the
-- foreign keys did, and lock nothing (frozen_reference_check), as a run's
-- plan and project are checked since migration 54.

-- +goose Up
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.run_steps DROP CONSTRAINT run_steps_run_id_fkey;
ALTER TABLE docket.run_versions DROP CONSTRAINT run_versions_run_id_fkey;
ALTER TABLE docket.batch_items DROP CONSTRAINT batch_items_run_id_fkey;
ALTER TABLE docket.run_budget_events DROP CONSTRAINT run_budget_events_run_id_fkey;
ALTER TABLE docket.budget_reservations DROP CONSTRAINT budget_reservations_run_id_fkey;

-- +goose Down
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.run_steps ADD CONSTRAINT run_steps_run_id_fkey FOREIGN KEY (run_id) REFERENCES docket.runs (id);
ALTER TABLE docket.run_versions ADD CONSTRAINT run_versions_run_id_fkey FOREIGN KEY (run_id) REFERENCES docket.runs (id);
ALTER TABLE docket.batch_items ADD CONSTRAINT batch_items_run_id_fkey FOREIGN KEY (run_id) REFERENCES docket.runs (id);
ALTER TABLE docket.run_budget_events ADD CONSTRAINT run_budget_events_run_id_fkey FOREIGN KEY (run_id) REFERENCES docket.runs (id);
ALTER TABLE docket.budget_reservations ADD CONSTRAINT budget_reservations_run_id_fkey FOREIGN KEY (run_id) REFERENCES docket.runs (id);
