-- name: BatchOpen :one
SELECT * FROM docket.batch_open(@project::text, @name::text, @digest::text, @canonical::text, @actor::text, @now::timestamptz);

-- name: BatchAdmit :many
SELECT * FROM docket.batch_admit(@id::bigint, @keys::text[], @inputs::jsonb[], @trusted::boolean[], @last::boolean,
    @actor::text, @now::timestamptz);

-- name: BatchGet :one
SELECT b.*, p.digest::text AS digest FROM docket.batch_get(@id::bigint, @actor::text) b JOIN docket.plans p ON p.id = b.plan_id;

-- name: BatchAttention :many
SELECT * FROM docket.batch_items_needing_attention(@id::bigint, sqlc.narg('after')::text, @max_rows::integer, @actor::text);
