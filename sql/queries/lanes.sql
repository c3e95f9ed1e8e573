-- name: QuorumCreate :one
SELECT * FROM docket.quorum_create(@project::text, @name::text, @conductor::text, @actor::text, @now::timestamptz);

-- name: LaneCreate :one
SELECT * FROM docket.lane_create(@quorum_id::bigint, @name::text, @branch::text, @assignee::text, @task_ref::text,
    @depends_on::bigint[], @actor::text, @now::timestamptz);

-- name: LaneSetState :one
SELECT * FROM docket.lane_set_state(@id::bigint, @state::text, sqlc.narg('note')::text, @actor::text, @now::timestamptz);

-- name: LaneReview :one
SELECT * FROM docket.lane_review(@id::bigint, @review::text, sqlc.narg('note')::text, @actor::text, @now::timestamptz);

-- name: LaneMerge :one
SELECT * FROM docket.lane_merge(@id::bigint, @commit::text, @actor::text, @now::timestamptz);

-- name: LaneGet :one
-- No row when the actor may not read the lane.
SELECT * FROM docket.lane_details v
WHERE v.id = @id::bigint AND docket.lane_visible(@actor::text, v.project, v.conductor, v.assignee);

-- name: LaneList :many
-- Oldest first, keyset-paginated by id; empty filters match everything. Only
-- the lanes the actor may read: it holds lane.view on the project, conducts
-- the lane's quorum or is its assignee.
SELECT * FROM docket.lane_details v
WHERE v.project = @project::text
  AND (@quorum::text = '' OR v.quorum = @quorum::text)
  AND (@state::text = '' OR v.state = @state::text)
  AND (@review::text = '' OR v.review = @review::text)
  AND v.id > @after_id::bigint
  AND docket.lane_visible(@actor::text, @project::text, v.conductor, v.assignee)
ORDER BY v.id
LIMIT @max_rows::integer;

-- name: LaneEvents :many
-- None when the actor may not read the lane.
SELECT e.* FROM docket.lane_events e
WHERE e.lane_id = @id::bigint
  AND EXISTS (SELECT 1 FROM docket.lane_details v
              WHERE v.id = @id::bigint AND docket.lane_visible(@actor::text, v.project, v.conductor, v.assignee))
ORDER BY e.id;

-- name: LaneJobs :many
-- A page of the lane's jobs, oldest first, keyset-paginated by id; none when
-- the actor may not read the lane. The lane's readers see which jobs it has
-- and where they stand, not their payloads.
SELECT j.id, j.kind, j.queue, j.state, j.attempts, j.max_attempts, j.created_at, j.updated_at
FROM docket.jobs j
WHERE j.lane_id = @id::bigint
  AND j.id > @after_id::bigint
  AND EXISTS (SELECT 1 FROM docket.lane_details v
              WHERE v.id = @id::bigint AND docket.lane_visible(@actor::text, v.project, v.conductor, v.assignee))
ORDER BY j.id
LIMIT @max_rows::integer;
