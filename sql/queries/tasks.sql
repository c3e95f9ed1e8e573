-- name: TaskOpen :one
SELECT * FROM docket.task_open(@case_id::bigint, @key::text, @title::text, @summary::text, @proposal::jsonb,
    @evidence::jsonb, @decisions::text[], @audience::text[], @audience_caps::text[], @proposer::text,
    @acting_for::text[], @deadline::timestamptz, @on_expiry::text, @escalate_to::text[], @escalate_caps::text[],
    sqlc.narg('escalate_for')::interval, sqlc.narg('auto_decision')::text,
    @kind::text, @queue::text, @payload::jsonb, @payload_schema::integer, @max_attempts::integer,
    @actor::text, @now::timestamptz);

-- name: TaskClaim :one
SELECT * FROM docket.task_claim(@id::bigint, @lease::interval, @actor::text, @now::timestamptz);

-- name: TaskRelease :one
SELECT * FROM docket.task_release(@id::bigint, @token::uuid, @actor::text, @now::timestamptz);

-- name: TaskDecide :one
SELECT * FROM docket.task_decide(@id::bigint, @decision::text, sqlc.narg('note')::text, @actor::text, @now::timestamptz);

-- name: TaskExpireDue :many
SELECT * FROM docket.task_expire_due(@max_rows::integer, @actor::text, @now::timestamptz);

-- name: TaskGet :one
SELECT * FROM docket.task_get(@id::bigint, @actor::text);

-- name: TaskWorklist :many
SELECT * FROM docket.task_worklist(@project::text, @actor::text, @now::timestamptz, @mine::boolean,
    sqlc.narg('after_deadline')::timestamptz, @after_id::bigint, @max_rows::integer);

-- name: TaskHistory :many
SELECT * FROM docket.task_history(@id::bigint, @actor::text);

-- name: TaskBacklog :one
SELECT project::text AS project, pending::bigint AS pending, unclaimed::bigint AS unclaimed, claimed::bigint AS claimed,
       escalated::bigint AS escalated, awaiting_expiry::bigint AS awaiting_expiry,
       (next_deadline IS NOT NULL)::boolean AS has_deadline,
       coalesce(next_deadline, '1970-01-01 00:00:00+00')::timestamptz AS next_deadline
FROM docket.task_backlog_of(@project::text, @actor::text);
