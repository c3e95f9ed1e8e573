-- name: ActorBind :one
SELECT docket.actor_bind(@role::text, @principal::text, @actor::text, @now::timestamptz) AS bound;

-- name: ActorUnbind :one
SELECT docket.actor_unbind(@role::text, @principal::text, @actor::text, @now::timestamptz) AS unbound;

-- name: ActorBindingList :many
-- Every binding, by role then principal; a role's alone when role is not empty.
SELECT * FROM docket.actor_bindings
WHERE @role::text = '' OR role = @role::text
ORDER BY role, principal;
