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
