-- name: JobTracePut :one
SELECT docket.job_trace_put(@ids::bigint[], @traceparent::text, @tracestate::text, @actor::text, @now::timestamptz)::integer AS written;

-- name: JobTraces :many
-- The trace contexts of the jobs of ids the actor may read; the others, and
-- jobs enqueued without one, are left out.
SELECT t.job_id, t.traceparent, coalesce(t.tracestate, '')::text AS tracestate
FROM docket.job_traces t
JOIN docket.jobs j ON j.id = t.job_id
WHERE t.job_id = ANY (@ids::bigint[]) AND docket.job_visible(@actor::text, j.project);

-- name: JobCensus :many
SELECT c.project::text AS project, c.queue::text AS queue, c.state::text AS state, c.jobs::bigint AS jobs, c.due::bigint AS due
FROM docket.job_census(@actor::text, @now::timestamptz) c;

-- name: JobEnqueueOneTraced :many
-- job_enqueue_one, and the trace context stored with the job when it is a
-- new one (a duplicate keeps its own), in one statement: CASE decides the
-- order, so the context is written only after the job is.
SELECT e.* FROM docket.job_enqueue_one(
    @project::text, @actor::text, @now::timestamptz,
    @kind::text, @queue::text, @priority::smallint, @payload::jsonb, @payload_schema::integer,
    @key::text, @available_at::timestamptz, @max_attempts::integer, @repeatable::boolean,
    @external::boolean, @lease::interval, @backoff_base::interval, @backoff_cap::interval,
    @backoff_jitter::float8, @params::jsonb, @inputs::text[], @output::text,
    @lane_id::bigint, @case_id::bigint, @compensation_kind::text, @output_kind::text, @root::text,
    sqlc.narg('budget')::jsonb) e
WHERE CASE WHEN e.duplicate THEN true
           ELSE docket.job_trace_put(ARRAY[e.id], @traceparent::text, @tracestate::text, @actor::text, @now::timestamptz) = 1 END;
