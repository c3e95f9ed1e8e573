-- name: RunStart :one
-- The run started, with RunGet's columns: its plan's digest is the one it
-- was started with (plan_store refuses any other), and run_suspended reads
-- the steps the start just admitted.
SELECT r.*, @digest::text AS digest, docket.run_suspended(r.id, r.status)::boolean AS suspended
FROM docket.run_start(@project::text, @digest::text, @canonical::text, @input::jsonb, @input_trusted::boolean,
    @case_id::bigint, @replan_limit::integer, @actor::text, @now::timestamptz) r;

-- name: RunReplan :one
SELECT * FROM docket.run_replan(@id::bigint, @predecessor::text, @digest::text, @canonical::text, @reason::text,
    @actor::text, @now::timestamptz);

-- name: RunCancel :one
SELECT * FROM docket.run_cancel(@id::bigint, @reason::text, @actor::text, @now::timestamptz);

-- name: RunGet :one
-- suspended: the run is running with steps waiting and none running.
SELECT r.*, p.digest::text AS digest, docket.run_suspended(r.id, r.status)::boolean AS suspended
FROM docket.run_get(@id::bigint, @actor::text) r JOIN docket.plans p ON p.id = r.plan_id;

-- name: RunList :many
-- A page of the project's runs, newest first, keyset-paginated by id: the
-- @max_rows newest before @before_id (0: from the newest), from
-- runs_project_idx, each read through run_get as RunGet reads one, with
-- RunGet's columns. run_get decides by the run's project, so the page is
-- whole, or empty when the actor may not read the project's runs.
SELECT r.*, p.digest::text AS digest, docket.run_suspended(r.id, r.status)::boolean AS suspended
FROM (
    SELECT x.id FROM docket.runs x
    WHERE x.project = @project::text AND (@before_id::bigint = 0 OR x.id < @before_id::bigint)
    ORDER BY x.id DESC
    LIMIT @max_rows::integer
) page
CROSS JOIN LATERAL docket.run_get(page.id, @actor::text) r
JOIN docket.plans p ON p.id = r.plan_id
ORDER BY r.id DESC;

-- name: RunSteps :many
SELECT * FROM docket.run_steps_of(@id::bigint, @actor::text);

-- name: RunVersions :many
SELECT version::integer AS version, digest::text AS digest, canonical::text AS canonical,
       coalesce(predecessor, '')::text AS predecessor, coalesce(reason, '')::text AS reason, actor::text AS actor,
       at::timestamptz AS at
FROM docket.run_versions_of(@id::bigint, @actor::text);

-- name: RunStartBudgeted :one
-- As RunStart, with ceilings.
SELECT r.*, @digest::text AS digest, docket.run_suspended(r.id, r.status)::boolean AS suspended
FROM docket.run_start(@project::text, @digest::text, @canonical::text, @input::jsonb, @input_trusted::boolean,
    @case_id::bigint, @replan_limit::integer, sqlc.narg('max_steps')::integer, sqlc.narg('max_effects')::bigint,
    sqlc.narg('max_money')::bigint, sqlc.narg('currency')::text, sqlc.narg('max_call')::bigint, sqlc.narg('max_parallel')::integer,
    sqlc.narg('max_duration')::interval, sqlc.narg('max_refusals')::integer, @actor::text, @now::timestamptz) r;

-- name: RunWaits :many
SELECT * FROM docket.run_waits_of(@id::bigint, @actor::text);
