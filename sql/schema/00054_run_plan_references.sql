-- A run named its project and its plan by foreign keys, and its versions
-- their plans. A foreign key's check locks the row it finds FOR KEY SHARE,
-- and every start of a plan locks the same two rows, the plan's and the
-- project's: concurrent starts each add themselves to those rows' lockers
-- (a multixact a start, 375 of 400 starts from eight clients), two WAL
-- records a start more. The lock guards a delete that cannot happen: plans
-- are frozen (plans_frozen refuses any change or delete) and projects are
-- never deleted (projects_refuse_delete), nor their keys changed. The
-- triggers of sql/definitions/plans.sql check the same references with the
-- same SQLSTATE (23503) and constraint names, after the row is written as
-- the foreign keys did, and lock nothing (frozen_reference_check), as a
-- job's project is checked (jobs_record_insert).

-- +goose Up
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.runs DROP CONSTRAINT runs_project_fkey, DROP CONSTRAINT runs_plan_id_fkey;
ALTER TABLE docket.run_versions DROP CONSTRAINT run_versions_plan_id_fkey, DROP CONSTRAINT run_versions_predecessor_fkey;

-- +goose Down
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.runs ADD CONSTRAINT runs_project_fkey FOREIGN KEY (project) REFERENCES docket.projects (name),
    ADD CONSTRAINT runs_plan_id_fkey FOREIGN KEY (plan_id) REFERENCES docket.plans (id);
ALTER TABLE docket.run_versions ADD CONSTRAINT run_versions_plan_id_fkey FOREIGN KEY (plan_id) REFERENCES docket.plans (id),
    ADD CONSTRAINT run_versions_predecessor_fkey FOREIGN KEY (predecessor) REFERENCES docket.plans (id);
