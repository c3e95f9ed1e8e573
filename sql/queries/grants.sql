-- name: GrantAdd :one
SELECT docket.grant_add(@principal::text, @project::text, @capability::text, @actor::text, @now::timestamptz) AS added;

-- name: GrantRevoke :one
SELECT docket.grant_revoke(@principal::text, @project::text, @capability::text, @actor::text, @now::timestamptz) AS revoked;

-- name: GrantCheck :one
SELECT docket.grant_check(@principal::text, @project::text, @capability::text) AS held;

-- name: GrantHeld :many
-- The capabilities principal holds by explicit grant on each of projects
-- (every project when none is named), as grant_check judges one: what the
-- session's login may read of docket.grants.
SELECT g.project, g.capability FROM docket.grants g
WHERE g.principal = @principal::text
  AND (cardinality(@projects::text[]) = 0 OR g.project = ANY (@projects::text[]))
ORDER BY g.project, g.capability;

-- name: GrantList :many
-- The grants on one project, ordered for display.
SELECT * FROM docket.grants
WHERE project = @project
ORDER BY principal, capability;

-- name: CapabilityList :many
SELECT * FROM docket.capabilities ORDER BY name;

-- name: ErrorCodeList :many
SELECT * FROM docket.error_codes ORDER BY code;
