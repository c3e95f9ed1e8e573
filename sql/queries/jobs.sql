-- name: JobEnqueueMany :many
-- The casts type the columns of a function returning TABLE (...) for sqlc.
SELECT e.ord::integer AS ord, e.duplicate::boolean AS duplicate, e.id::bigint AS id FROM docket.job_enqueue_many(
    @project::text, @actor::text, @now::timestamptz,
    @kinds::text[], @queues::text[], @priorities::smallint[], @payloads::jsonb[], @payload_schemas::integer[],
    @keys::text[], @available_at::timestamptz[], @max_attempts::integer[], @repeatable::boolean[],
    @external::boolean[], @leases::interval[], @backoff_base::interval[], @backoff_cap::interval[],
    @backoff_jitter::float8[], @params::jsonb[], @inputs::jsonb[], @outputs::text[],
    @lane_ids::bigint[], @case_ids::bigint[], @compensation_kinds::text[], @output_kinds::text[], @roots::text[],
    sqlc.narg('budgets')::jsonb[]) e;

-- name: JobIntakeTake :many
-- The receipts of a COPY into docket.job_intake, in order.
SELECT e.ord::integer AS ord, e.duplicate::boolean AS duplicate, e.id::bigint AS id
FROM docket.job_intake_take(@intake::uuid, @actor::text) e;

-- name: JobClaim :many
-- In the order the claim chose them.
SELECT * FROM docket.job_claim(@project::text, @queue::text, @max_jobs::integer, sqlc.narg('lease')::interval,
    sqlc.narg('kinds')::text[], sqlc.narg('schemas')::integer[], @actor::text, @now::timestamptz,
    sqlc.narg('revisions')::text[])
ORDER BY priority, available_at, id;

-- name: JobClaimID :many
SELECT * FROM docket.job_claim_id(@id::bigint, sqlc.narg('lease')::interval,
    sqlc.narg('kinds')::text[], sqlc.narg('schemas')::integer[], @actor::text, @now::timestamptz,
    sqlc.narg('revisions')::text[]);

-- name: JobRenew :one
SELECT * FROM docket.job_renew(@id::bigint, @token::uuid, sqlc.narg('lease')::interval, @actor::text, @now::timestamptz,
    sqlc.narg('revision')::text);

-- name: JobRelease :one
SELECT * FROM docket.job_release(@id::bigint, @token::uuid, sqlc.narg('available_at')::timestamptz,
    sqlc.narg('reason')::text, @actor::text, @now::timestamptz, sqlc.narg('revision')::text);

-- name: JobComplete :one
SELECT * FROM docket.job_complete(@id::bigint, @token::uuid, sqlc.narg('result')::jsonb, @actor::text, @now::timestamptz,
    sqlc.narg('revision')::text, @spent_effects::bigint, @spent_money::bigint);

-- name: JobCompleteMany :many
-- An unknown job has no state and an element that was not refused has no refusal: both come back empty,
-- as does the reason of a refusal other than the completion record's (DK010).
SELECT e.id::bigint AS id, coalesce(e.state, '')::text AS state, coalesce(e.refusal, '')::text AS refusal,
    coalesce(e.refusal_reason, '')::text AS refusal_reason
FROM docket.job_complete_many(@ids::bigint[], @tokens::uuid[], @results::jsonb[], @actor::text, @now::timestamptz,
    @revisions::text[], sqlc.narg('records')::jsonb[], sqlc.narg('spent_effects')::bigint[], sqlc.narg('spent_money')::bigint[]) e;

-- name: JobFail :one
SELECT * FROM docket.job_fail(@id::bigint, @token::uuid, @class::text, sqlc.narg('diagnostic')::text,
    sqlc.narg('retry_after')::interval, @actor::text, @now::timestamptz, sqlc.narg('revision')::text,
    @spent_effects::bigint, @spent_money::bigint);

-- name: JobResume :one
SELECT * FROM docket.job_resume(@id::bigint, sqlc.narg('max_effects')::bigint, sqlc.narg('max_money')::bigint,
    @actor::text, @now::timestamptz);

-- name: JobCancel :one
SELECT * FROM docket.job_cancel(@id::bigint, sqlc.narg('reason')::text, @actor::text, @now::timestamptz);

-- name: JobReconcile :one
SELECT * FROM docket.job_reconcile(@id::bigint, @outcome::text, sqlc.narg('result')::jsonb, sqlc.narg('note')::text,
    @actor::text, @now::timestamptz);

-- name: JobExpireLeases :many
SELECT * FROM docket.job_expire_leases(@max_jobs::integer, @actor::text, @now::timestamptz);

-- name: JobDecodersRegister :one
SELECT docket.job_decoders_register(@deployment::text, @kinds::text[], @schemas::integer[], @actor::text, @now::timestamptz,
    @revisions::text[]) AS registered;

-- name: JobVerify :one
-- No row when the actor may not read the job.
SELECT e.ok::boolean AS ok, e.events::integer AS events, e.bad_seq::integer AS bad_seq, coalesce(e.problem, '')::text AS problem
FROM docket.job_verify(@id::bigint, @actor::text) e;

-- name: JobGet :one
-- No row when the actor may not read the job.
SELECT j.* FROM docket.jobs j WHERE j.id = @id AND docket.job_visible(@actor::text, j.project);

-- name: JobSucceededUnder :one
-- Whether job @id succeeded under the claim whose token is @token: what a
-- worker asks after the reply to its completion was lost. False for a job
-- the actor may not read. The token is compared by its digest, and neither
-- is returned.
SELECT coalesce((SELECT j.state = 'succeeded' AND j.outcome_token = docket.job_token_digest(@token::uuid)
                 FROM docket.jobs j WHERE j.id = @id::bigint AND docket.job_visible(@actor::text, j.project)),
                false)::boolean AS succeeded;

-- name: JobGetMany :many
-- The jobs of ids the actor may read, by id; the others are left out.
SELECT j.* FROM docket.jobs j
WHERE j.id = ANY (@ids::bigint[]) AND docket.job_visible(@actor::text, j.project)
ORDER BY j.id;

-- name: JobList :many
-- Newest first, keyset-paginated by id; empty filters match everything.
SELECT * FROM docket.jobs
WHERE project = @project::text
  AND docket.job_visible(@actor::text, @project::text)
  AND (@state::text = '' OR state = @state::text)
  AND (@kind::text = '' OR kind = @kind::text)
  AND (@queue::text = '' OR queue = @queue::text)
  AND (@before_id::bigint = 0 OR id < @before_id::bigint)
  AND (NOT @unrunnable::boolean OR id IN (SELECT u.id FROM docket.jobs_unrunnable u WHERE u.project = @project::text))
ORDER BY id DESC
LIMIT @max_rows::integer;

-- name: JobProjectCensus :many
-- The project's jobs counted by queue and state, at most @per_state of each
-- state, by queue, then in the order of @states; none when the actor may
-- not read the project's jobs. No index holds every job by (project,
-- state), so a state with fewer than @per_state jobs is read to the end of
-- the project's jobs: the count is bounded, the read is not.
SELECT j.queue::text AS queue, s.state::text AS state, count(*)::bigint AS jobs
FROM unnest(@states::text[]) WITH ORDINALITY AS s(state, i)
CROSS JOIN LATERAL (
    SELECT queue FROM docket.jobs
    WHERE project = @project::text AND state = s.state AND docket.job_visible(@actor::text, @project::text)
    LIMIT @per_state::integer
) j
GROUP BY j.queue, s.state, s.i
ORDER BY j.queue, s.i;

-- name: JobEvents :many
-- None when the actor may not read the job.
SELECT e.* FROM docket.job_events e
WHERE e.job_id = @id
  AND docket.job_visible(@actor::text, (SELECT j.project FROM docket.jobs j WHERE j.id = @id))
ORDER BY e.seq;

-- name: JobEnqueueOne :many
SELECT * FROM docket.job_enqueue_one(
    @project::text, @actor::text, @now::timestamptz,
    @kind::text, @queue::text, @priority::smallint, @payload::jsonb, @payload_schema::integer,
    @key::text, @available_at::timestamptz, @max_attempts::integer, @repeatable::boolean,
    @external::boolean, @lease::interval, @backoff_base::interval, @backoff_cap::interval,
    @backoff_jitter::float8, @params::jsonb, @inputs::text[], @output::text,
    @lane_id::bigint, @case_id::bigint, @compensation_kind::text, @output_kind::text, @root::text,
    sqlc.narg('budget')::jsonb);

-- name: JobClaimQueue :many
SELECT * FROM docket.job_claim_queue(@queue::text, @max_jobs::integer,
    sqlc.narg('kinds')::text[], sqlc.narg('schemas')::integer[], sqlc.narg('leases')::interval[],
    @actor::text, @now::timestamptz, sqlc.narg('revisions')::text[],
    sqlc.narg('from_projects')::text[], sqlc.narg('from_priorities')::smallint[],
    sqlc.narg('from_at')::timestamptz[], sqlc.narg('from_ids')::bigint[]);

-- name: JobQueueDue :one
-- Whether queue has a due job, not for external executors, in a project
-- where actor holds job.claim: the worker's poll.
SELECT EXISTS (
    SELECT 1 FROM docket.grants g
    JOIN LATERAL (
        SELECT 1 FROM docket.jobs j
        WHERE j.state = 'queued' AND j.project = g.project AND j.queue = @queue::text
          AND j.available_at <= @now::timestamptz AND NOT j.external
        LIMIT 1
    ) d ON true
    WHERE g.principal = @actor::text AND g.capability = 'job.claim'
)::boolean AS due;

-- name: JobClaimProjects :many
-- The projects where the actor holds job.claim: where a worker acting as it
-- may claim, renew and sweep jobs.
SELECT g.project FROM docket.grants g
WHERE g.principal = @actor::text AND g.capability = 'job.claim'
ORDER BY g.project;

-- name: JobPin :many
-- By id.
SELECT * FROM docket.job_pin(@ids::bigint[], sqlc.narg('revisions')::text[], @actor::text, @now::timestamptz);

-- name: JobPruned :one
-- No row when the job was not pruned, or the actor may not read its
-- project's jobs.
SELECT id, project, at, actor::text AS actor FROM docket.job_pruned(@id::bigint, @actor::text);

-- name: JobLateOutcome :one
SELECT * FROM docket.job_late_outcome(@id::bigint, @token::uuid, @generation::bigint, @outcome::text,
    sqlc.narg('result')::jsonb, sqlc.narg('class')::text, sqlc.narg('diagnostic')::text, sqlc.narg('retry_after')::interval,
    @actor::text, @now::timestamptz, @spent_effects::bigint, @spent_money::bigint, @once::boolean);

-- name: JobRetry :one
SELECT * FROM docket.job_retry(@id::bigint, @actor::text, @now::timestamptz);

-- name: JobRetries :many
-- The jobs that retry job @id, oldest first; none the actor may not read.
SELECT j.id FROM docket.jobs j
WHERE j.retry_of = @id::bigint AND docket.job_visible(@actor::text, j.project)
ORDER BY j.id;

-- name: JobRetryCount :one
SELECT docket.job_retry_count(@project::text, @state::text, @kind::text, @queue::text,
    sqlc.narg('since')::timestamptz, sqlc.narg('until')::timestamptz, @actor::text, @now::timestamptz)::bigint AS jobs;

-- name: JobRetryMatching :many
SELECT * FROM docket.job_retry_matching(@project::text, @state::text, @kind::text, @queue::text,
    sqlc.narg('since')::timestamptz, sqlc.narg('until')::timestamptz, @max_jobs::integer, @actor::text, @now::timestamptz)
ORDER BY id;

-- name: JobCancelCount :one
SELECT docket.job_cancel_count(@project::text, @state::text, @kind::text, @queue::text,
    sqlc.narg('since')::timestamptz, sqlc.narg('until')::timestamptz, @actor::text, @now::timestamptz)::bigint AS jobs;

-- name: JobCancelMatching :many
SELECT * FROM docket.job_cancel_matching(@project::text, @state::text, @kind::text, @queue::text,
    sqlc.narg('since')::timestamptz, sqlc.narg('until')::timestamptz, sqlc.narg('reason')::text, @max_jobs::integer,
    @actor::text, @now::timestamptz)
ORDER BY id;

-- name: QueuePause :one
SELECT * FROM docket.queue_pause(@project::text, @queue::text, sqlc.narg('reason')::text, @actor::text, @now::timestamptz);

-- name: QueueResume :one
SELECT * FROM docket.queue_resume(@project::text, @queue::text, sqlc.narg('reason')::text, @actor::text, @now::timestamptz);

-- name: QueueList :many
-- A queue never paused has no updated_by and updated_at: the empty string and NULL.
SELECT q.project, q.queue, q.paused, q.revision, q.paused_by, q.paused_at, q.reason,
    coalesce(q.updated_by, '')::text AS updated_by, CASE WHEN q.revision > 0 THEN q.updated_at END AS updated_at
FROM docket.queue_list(@project::text, @actor::text) q;

-- name: QueueHistory :many
-- Oldest first; none when the actor may not read the project's queues.
SELECT e.* FROM docket.queue_events e
WHERE e.project = @project::text AND e.queue = @queue::text AND docket.queue_visible(@actor::text, @project::text)
ORDER BY e.revision;
