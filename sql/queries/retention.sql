-- name: RetentionSet :one
SELECT project::text AS project, explicit::boolean AS explicit,
       -- Each horizon in microseconds; 0: kept forever.
       docket.horizon_micros(jobs_succeeded) AS jobs_succeeded, docket.horizon_micros(jobs_failed) AS jobs_failed,
       docket.horizon_micros(messages) AS messages, docket.horizon_micros(occurrences) AS occurrences,
       docket.horizon_micros(cases) AS cases
FROM docket.retention_set(@project::text, sqlc.narg('jobs_succeeded')::interval, sqlc.narg('jobs_failed')::interval,
    sqlc.narg('messages')::interval, sqlc.narg('occurrences')::interval, sqlc.narg('cases')::interval,
    @actor::text, @now::timestamptz);

-- name: RetentionGet :one
-- No row when the actor holds neither retention.manage nor retention.prune
-- on the project.
SELECT project::text AS project, explicit::boolean AS explicit,
       -- Each horizon in microseconds; 0: kept forever.
       docket.horizon_micros(jobs_succeeded) AS jobs_succeeded, docket.horizon_micros(jobs_failed) AS jobs_failed,
       docket.horizon_micros(messages) AS messages, docket.horizon_micros(occurrences) AS occurrences,
       docket.horizon_micros(cases) AS cases
FROM docket.retention_get(@project::text, @actor::text);

-- name: PruneRun :many
SELECT id, project, actor::text AS actor, at, horizons, jobs, job_ids::text AS job_ids, job_states, job_events,
       finished_from, finished_to, jobs_digest::bytea AS jobs_digest, cases, case_ids::text AS case_ids,
       case_events, case_keys, obligations, timers, waits, messages, message_ids::text AS message_ids,
       occurrences, kept_unverified, first_unverified
FROM docket.prune_run(@max_items::integer, @actor::text, @now::timestamptz);

-- name: PruneGet :one
-- No row when the actor may not read the prune's project's jobs, nor holds
-- retention.manage there.
SELECT id, project, actor::text AS actor, at, horizons, jobs, job_ids::text AS job_ids, job_states, job_events,
       finished_from, finished_to, jobs_digest::bytea AS jobs_digest, cases, case_ids::text AS case_ids,
       case_events, case_keys, obligations, timers, waits, messages, message_ids::text AS message_ids,
       occurrences, kept_unverified, first_unverified
FROM docket.prunes p
WHERE p.id = @id::bigint
  AND (docket.job_visible(@actor::text, p.project) OR docket.grant_check(@actor::text, p.project, 'retention.manage'));

-- name: PruneList :many
-- Newest first, keyset-paginated by id.
SELECT id, project, actor::text AS actor, at, horizons, jobs, job_ids::text AS job_ids, job_states, job_events,
       finished_from, finished_to, jobs_digest::bytea AS jobs_digest, cases, case_ids::text AS case_ids,
       case_events, case_keys, obligations, timers, waits, messages, message_ids::text AS message_ids,
       occurrences, kept_unverified, first_unverified
FROM docket.prunes p
WHERE p.project = @project::text
  AND (docket.job_visible(@actor::text, @project::text) OR docket.grant_check(@actor::text, @project::text, 'retention.manage'))
  AND (@before_id::bigint = 0 OR p.id < @before_id::bigint)
ORDER BY p.id DESC
LIMIT @max_rows::integer;

-- name: PruneVerify :one
SELECT project::text AS project, ok::boolean AS ok, coalesce(problem, '')::text AS problem
FROM docket.prune_verify(@id::bigint, @ids::bigint[], @events::integer[], @heads::bytea[], @actor::text);

-- name: JobHeads :many
-- The chain heads of the jobs of ids the actor may read, by id.
SELECT h.job_id::bigint AS job_id, h.ok::boolean AS ok, h.events::integer AS events, h.head::bytea AS head
FROM docket.job_heads(@ids::bigint[]) h
JOIN docket.jobs j ON j.id = h.job_id
WHERE docket.job_visible(@actor::text, j.project)
ORDER BY h.job_id;

-- name: HistoryMaintain :many
-- Drops the history partitions prunes emptied of jobs, then makes those
-- ahead of the jobs id sequence; each lock waits at most @wait.
SELECT u.dropped::integer AS dropped, u.made::integer AS made
FROM docket.history_upkeep(@actor::text, @wait::interval) u;
