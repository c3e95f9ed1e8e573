-- name: RunResume :one
SELECT * FROM docket.run_resume(@id::bigint, sqlc.narg('max_steps')::integer, sqlc.narg('max_effects')::bigint,
    sqlc.narg('max_money')::bigint, sqlc.narg('max_parallel')::integer, @actor::text, @now::timestamptz,
    sqlc.narg('max_duration')::interval, sqlc.narg('max_refusals')::integer);

-- name: BudgetQuotaSet :one
SELECT * FROM docket.budget_quota_set(@project::text, @currency::text, @period::interval, @anchor::timestamptz, @amount::bigint,
    @actor::text, @now::timestamptz);

-- name: RunBudgetEvents :many
SELECT e.* FROM docket.run_budget_events e
WHERE e.run_id = @id::bigint AND EXISTS (SELECT 1 FROM docket.run_get(@id::bigint, @actor::text))
ORDER BY e.id;
