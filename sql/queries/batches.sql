-- name: BatchOpen :one
SELECT * FROM docket.batch_open(@project::text, @name::text, @digest::text, @canonical::text, @actor::text, @now::timestamptz,
    sqlc.narg('max_steps')::integer, sqlc.narg('max_effects')::bigint, sqlc.narg('max_money')::bigint, sqlc.narg('currency')::text,
    sqlc.narg('max_call')::bigint, sqlc.narg('max_parallel')::integer, sqlc.narg('max_duration')::interval,
    sqlc.narg('max_refusals')::integer);

-- name: BatchAdmit :many
SELECT * FROM docket.batch_admit(@id::bigint, @keys::text[], @inputs::jsonb[], @trusted::boolean[], @last::boolean,
    @actor::text, @now::timestamptz);

-- name: BatchGet :one
SELECT b.*, p.digest::text AS digest FROM docket.batch_get(@id::bigint, @actor::text) b JOIN docket.plans p ON p.id = b.plan_id;

-- name: BatchList :many
-- A page of the project's batches by name, keyset-paginated by name: the
-- first @max_rows after @after_name ('' from the start), from
-- batches_project_name_key, each read through batch_get as BatchGet reads
-- one, with BatchGet's columns. batch_get decides by the batch's project,
-- so the page is whole, or empty when the actor may not read the project's
-- batches.
SELECT b.*, p.digest::text AS digest
FROM (
    SELECT x.id, x.name FROM docket.batches x
    WHERE x.project = @project::text AND x.name > @after_name::text
    ORDER BY x.name
    LIMIT @max_rows::integer
) page
CROSS JOIN LATERAL docket.batch_get(page.id, @actor::text) b
JOIN docket.plans p ON p.id = b.plan_id
ORDER BY page.name;

-- name: BatchAttention :many
SELECT * FROM docket.batch_items_needing_attention(@id::bigint, sqlc.narg('after')::text, @max_rows::integer, @actor::text);
