-- name: JobCompletionRecord :many
-- The ids it recorded; elements whose token holds no live claim record nothing.
SELECT r::bigint AS id FROM docket.job_completion_record(@ids::bigint[], @tokens::uuid[], @assets::text[],
    @kinds::text[], @roots::text[], @params::jsonb[], @inputs::jsonb[], @actor::text, @now::timestamptz) r;

-- name: JobRerunPlan :one
-- No row when the job is unknown or the actor may not read it. A job with no
-- completion record has no recorded_* values.
SELECT j.id, j.state::text AS state, j.kind::text AS kind, j.queue::text AS queue, j.payload::jsonb AS payload,
       j.payload_schema::integer AS payload_schema,
       coalesce(j.requested_output, '')::text AS requested_output,
       coalesce(j.requested_kind, '')::text AS requested_kind,
       coalesce(j.target_root, '')::text AS target_root,
       (c.job_id IS NOT NULL)::boolean AS recorded,
       coalesce(c.output_asset, '')::text AS output_asset,
       coalesce(c.output_kind, '')::text AS output_kind,
       coalesce(c.output_root, '')::text AS output_root,
       c.params_used::jsonb AS params_used,
       coalesce(c.inputs_used, '{}')::text[] AS inputs_used,
       coalesce(c.recorded_by, '')::text AS recorded_by,
       coalesce(c.recorded_at, 'epoch'::timestamptz)::timestamptz AS recorded_at
FROM docket.jobs j
LEFT JOIN docket.job_completions c ON c.job_id = j.id
WHERE j.id = @id AND docket.job_visible(@actor::text, j.project);

-- name: JobProducedBy :many
-- The jobs, of projects the actor may read, whose completion record names
-- output (asset, kind): on job_completions_output_idx. Oldest first.
SELECT c.job_id FROM docket.job_completions c
JOIN docket.jobs j ON j.id = c.job_id
WHERE c.output_asset = @asset::text AND c.output_kind = @kind::text
  AND docket.job_visible(@actor::text, j.project)
ORDER BY c.job_id
LIMIT 1000;
