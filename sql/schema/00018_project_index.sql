-- +goose Up
-- No index of docket.jobs but its primary key covers every job.
--
-- A claim and a completion change indexed columns (the state is in the
-- predicates of the partial indexes), so neither update is HOT: each writes
-- a new row version and a new entry in every index whose predicate the new
-- version satisfies. jobs_project_idx (project, id) had no predicate, so
-- every transition of every job wrote it, and only one query read it: a
-- listing of one project's jobs, newest first. It cost about 15 % of a
-- burn-down's throughput and 170 bytes of WAL a job.
--
-- Without it that listing walks the primary key from the newest job back,
-- which reads only the rows it returns while the project's jobs are most of
-- the table. A database where a project with few jobs is listed among many
-- others' can add it back (docs/operators.md, "Listing a small project"):
-- nothing in docket names it.
DROP INDEX docket.jobs_project_idx;

-- +goose Down
CREATE INDEX IF NOT EXISTS jobs_project_idx ON docket.jobs (project, id);
