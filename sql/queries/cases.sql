-- name: CaseAdmit :one
SELECT * FROM docket.case_admit(@project::text, @kind::text, @namespaces::text[], @key_values::text[],
    @actor::text, @now::timestamptz);

-- name: CaseCorrelate :many
-- No row when no open case holds any of the keys.
SELECT * FROM docket.case_correlate(@project::text, @namespaces::text[], @key_values::text[], @actor::text);

-- name: CasePutState :one
SELECT * FROM docket.case_put_state(@id::bigint, @expected_version::bigint, @state::jsonb, @actor::text, @now::timestamptz);

-- name: CaseClose :one
SELECT * FROM docket.case_close(@id::bigint, @actor::text, @now::timestamptz);

-- name: CaseReopen :many
SELECT * FROM docket.case_reopen(@id::bigint, @actor::text, @now::timestamptz);

-- name: CaseGet :one
-- No row when the actor may not read the case.
SELECT * FROM docket.cases c
WHERE c.id = @id::bigint AND docket.case_visible(@actor::text, c.project);

-- name: CaseList :many
-- Oldest first, keyset-paginated by id; an empty status matches both. None
-- when the actor may not read the project's cases.
SELECT * FROM docket.cases c
WHERE c.project = @project::text
  AND (@status::text = '' OR c.status = @status::text)
  AND c.id > @after_id::bigint
  AND docket.case_visible(@actor::text, @project::text)
ORDER BY c.id
LIMIT @max_rows::integer;

-- name: CaseKeys :many
-- Every claim of a key by the case, oldest first; none when the actor may not
-- read the case.
SELECT k.* FROM docket.case_keys k
WHERE k.case_id = @id::bigint
  AND docket.case_visible(@actor::text, k.project)
ORDER BY k.id;

-- name: CaseEvents :many
-- The case's history, one range scan of case_events_case_idx; none when the
-- actor may not read the case.
SELECT e.* FROM docket.case_events e
WHERE e.case_id = @id::bigint
  AND EXISTS (SELECT 1 FROM docket.cases c WHERE c.id = @id::bigint AND docket.case_visible(@actor::text, c.project))
ORDER BY e.id;

-- name: ObligationRegister :one
SELECT * FROM docket.obligation_register(@case_id::bigint, @name::text, @due_at::timestamptz,
    sqlc.narg('rule')::text, sqlc.narg('calendar_digest')::text, sqlc.narg('escalation_kind')::text,
    sqlc.narg('escalation_queue')::text, sqlc.narg('escalation_payload')::jsonb,
    sqlc.narg('escalation_payload_schema')::integer, sqlc.narg('escalation_max_attempts')::integer,
    @actor::text, @now::timestamptz);

-- name: ObligationSettle :one
SELECT * FROM docket.obligation_settle(@id::bigint, @state::text, @actor::text, @now::timestamptz);

-- name: ObligationBreachDue :many
SELECT * FROM docket.obligation_breach_due(@max_rows::integer, @actor::text, @now::timestamptz);

-- name: ObligationGet :one
-- No row when the actor may not read the obligation's case.
SELECT o.* FROM docket.obligations o
WHERE o.id = @id::bigint AND docket.case_visible(@actor::text, o.project);

-- name: CaseObligations :many
-- The case's obligations, oldest first; none when the actor may not read the case.
SELECT o.* FROM docket.obligations o
WHERE o.case_id = @id::bigint AND docket.case_visible(@actor::text, o.project)
ORDER BY o.id;
