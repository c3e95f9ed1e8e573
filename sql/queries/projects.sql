-- name: ProjectCreate :one
SELECT * FROM docket.project_create(@name::text, @actor::text, @now::timestamptz);

-- name: ProjectSetStatus :one
SELECT * FROM docket.project_set_status(@name::text, @status::text, @actor::text, @now::timestamptz);

-- name: ProjectGet :one
SELECT * FROM docket.projects WHERE name = @name;

-- name: ProjectList :many
-- Keyset-paginated by name.
SELECT * FROM docket.projects
WHERE name > @after::text
ORDER BY name
LIMIT @max_rows::int;

-- name: ProjectEvents :many
SELECT * FROM docket.project_events
WHERE project = @name
ORDER BY id;
