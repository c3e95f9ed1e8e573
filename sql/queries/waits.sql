-- name: MessageDeliver :one
SELECT * FROM docket.message_deliver(@project::text, @producer::text, @message_id::text, @namespaces::text[],
    @key_values::text[], @payload::jsonb, sqlc.narg('addressee')::bigint, @actor::text, @now::timestamptz);

-- name: WaitRegister :one
SELECT * FROM docket.wait_register(@case_id::bigint, @name::text, @namespaces::text[], @key_values::text[],
    @deadline::timestamptz, @arrival_kind::text, @arrival_queue::text, @arrival_payload::jsonb,
    @arrival_payload_schema::integer, @arrival_max_attempts::integer,
    sqlc.narg('timeout_kind')::text, sqlc.narg('timeout_queue')::text, sqlc.narg('timeout_payload')::jsonb,
    sqlc.narg('timeout_payload_schema')::integer, sqlc.narg('timeout_max_attempts')::integer,
    @actor::text, @now::timestamptz);

-- name: WaitWithdraw :one
SELECT * FROM docket.wait_withdraw(@id::bigint, @actor::text, @now::timestamptz);

-- name: WaitExpireDue :many
SELECT * FROM docket.wait_expire_due(@max_rows::integer, @actor::text, @now::timestamptz);

-- name: MessageDeadLetterDue :many
SELECT * FROM docket.message_dead_letter_due(@max_rows::integer, @horizon::interval, @actor::text, @now::timestamptz);

-- name: TimerSet :one
SELECT * FROM docket.timer_set(@case_id::bigint, @name::text, @wake_at::timestamptz, @kind::text, @queue::text,
    @payload::jsonb, @payload_schema::integer, @max_attempts::integer, @actor::text, @now::timestamptz);

-- name: TimerSetCaseless :one
SELECT * FROM docket.timer_set_caseless(@project::text, @name::text, @wake_at::timestamptz, @kind::text, @queue::text,
    @payload::jsonb, @payload_schema::integer, @max_attempts::integer, @actor::text, @now::timestamptz);

-- name: TimerFireDue :many
SELECT * FROM docket.timer_fire_due(@max_rows::integer, @actor::text, @now::timestamptz);

-- name: WaitGet :one
-- No row when the actor may not read the wait's case.
SELECT w.* FROM docket.waits w
WHERE w.id = @id::bigint AND docket.case_visible(@actor::text, w.project);

-- name: CaseWaits :many
-- The case's waits, oldest first; none when the actor may not read the case.
SELECT w.* FROM docket.waits w
WHERE w.case_id = @id::bigint AND docket.case_visible(@actor::text, w.project)
ORDER BY w.id;

-- name: WaitsWaiting :many
-- The project's waiting waits, soonest deadline first, keyset-paginated by
-- (deadline, id); none when the actor may not read the project's cases.
SELECT w.* FROM docket.waits w
WHERE w.project = @project::text AND w.status = 'waiting'
  AND (w.deadline, w.id) > (@after_deadline::timestamptz, @after_id::bigint)
  AND docket.case_visible(@actor::text, @project::text)
ORDER BY w.deadline, w.id
LIMIT @max_rows::integer;

-- name: MessageGet :one
-- No row when the actor may not read the project's messages.
SELECT m.* FROM docket.messages m
WHERE m.id = @id::bigint AND docket.message_visible(@actor::text, m.project);

-- name: MessagesDead :many
-- The project's dead letters, newest first, keyset-paginated by id; none when
-- the actor may not read the project's messages. No payloads.
SELECT m.id, m.project, m.producer, m.message_id, m.keys, m.addressee, m.dead_letter_reason,
       m.arrived_at, m.settled_at
FROM docket.messages m
WHERE m.project = @project::text AND m.status = 'dead_lettered'
  AND (@before_id::bigint = 0 OR m.id < @before_id::bigint)
  AND docket.message_visible(@actor::text, @project::text)
ORDER BY m.id DESC
LIMIT @max_rows::integer;

-- name: CaseTimers :many
-- The case's timers with their jobs' states, oldest first; none when the
-- actor may not read the case.
SELECT t.*, j.state AS job_state FROM docket.timers t
JOIN docket.jobs j ON j.id = t.job_id
WHERE t.case_id = @id::bigint AND docket.case_visible(@actor::text, t.project)
ORDER BY t.id;
