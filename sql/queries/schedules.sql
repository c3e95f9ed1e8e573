-- name: ScheduleCreate :one
SELECT * FROM docket.schedule_create(@project::text, @name::text, @cron::text, @zone::text, @fixed_time::boolean,
    @job_kind::text, @job_queue::text, @job_payload::jsonb, @job_payload_schema::integer, @job_max_attempts::integer,
    @catch_up::text, @max_catch_up::integer, @grace::interval,
    @starts_at::timestamptz, sqlc.narg('ends_at')::timestamptz, sqlc.narg('max_occurrences')::bigint,
    sqlc.narg('unbounded_reason')::text, @next_due_at::timestamptz, @actor::text, @now::timestamptz);

-- name: ScheduleLock :one
SELECT * FROM docket.schedule_lock(@id::bigint, @actor::text);

-- name: ScheduleUpdate :one
SELECT * FROM docket.schedule_update(@id::bigint, @cron::text, @zone::text, @fixed_time::boolean,
    @job_kind::text, @job_queue::text, @job_payload::jsonb, @job_payload_schema::integer, @job_max_attempts::integer,
    @catch_up::text, @max_catch_up::integer, @grace::interval,
    sqlc.narg('ends_at')::timestamptz, sqlc.narg('max_occurrences')::bigint, sqlc.narg('unbounded_reason')::text,
    sqlc.narg('next_due_at')::timestamptz, @actor::text, @now::timestamptz);

-- name: ScheduleSetStatus :one
SELECT * FROM docket.schedule_set_status(@id::bigint, @status::text, @actor::text, @now::timestamptz);

-- name: ScheduleDue :many
SELECT * FROM docket.schedule_due(@max_rows::integer, @actor::text, @now::timestamptz);

-- name: ScheduleAdvance :many
SELECT * FROM docket.schedule_advance(@id::bigint, @expected_cursor::timestamptz, @locals::timestamp[],
    @folds::integer[], @dues::timestamptz[], @skipped::jsonb[], @cursor_at::timestamptz,
    sqlc.narg('next_due_at')::timestamptz, @actor::text, @now::timestamptz);

-- name: ScheduleBreak :one
SELECT * FROM docket.schedule_break(@id::bigint, @expected_cursor::timestamptz, @reason::text, @actor::text,
    @now::timestamptz);

-- name: ScheduleGet :one
-- No row when the actor may not read the schedule.
SELECT * FROM docket.schedules s
WHERE s.id = @id::bigint AND docket.schedule_visible(@actor::text, s.project);

-- name: ScheduleList :many
-- By name, keyset-paginated by name; none when the actor may not read the
-- project's schedules.
SELECT * FROM docket.schedules s
WHERE s.project = @project::text
  AND s.name > @after_name::text
  AND docket.schedule_visible(@actor::text, @project::text)
ORDER BY s.name
LIMIT @max_rows::integer;

-- name: ScheduleOccurrences :many
-- The schedule's materialized occurrences, oldest first; none when the actor
-- may not read the schedule.
SELECT o.* FROM docket.schedule_occurrences o
WHERE o.schedule_id = @id::bigint
  AND EXISTS (SELECT 1 FROM docket.schedules s WHERE s.id = @id::bigint AND docket.schedule_visible(@actor::text, s.project))
ORDER BY o.due_at, o.id;

-- name: ScheduleEvents :many
-- The schedule's history; none when the actor may not read the schedule.
SELECT e.* FROM docket.schedule_events e
WHERE e.schedule_id = @id::bigint
  AND EXISTS (SELECT 1 FROM docket.schedules s WHERE s.id = @id::bigint AND docket.schedule_visible(@actor::text, s.project))
ORDER BY e.id;
