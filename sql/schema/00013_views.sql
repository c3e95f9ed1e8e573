-- +goose Up
-- Grants that read: job.view lets an actor read a project's jobs and their
-- history, as case.view, lane.view and schedule.view do for theirs, and
-- nothing else: enqueueing, claiming, cancelling and reconciling still need
-- their own capability. An operator's tool or a dashboard reads jobs with it
-- without being able to change one.

-- A down migration keeps job.view while it is granted (see below), so the
-- next up finds it there.
INSERT INTO docket.capabilities (name, description) VALUES
    ('job.view', 'read the project''s jobs and their history')
ON CONFLICT (name) DO NOTHING;

-- job_visible reports whether p_principal may read the jobs of p_project: it
-- holds job.view or some other job capability there. Listing and reading by
-- id through the Go API are filtered by it; an operator in psql reads
-- everything.
-- plpgsql, as grant_check is, so its plan is kept for the session.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_visible(p_principal text, p_project text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM docket.grants g
        WHERE g.project = p_project AND g.principal = p_principal
          AND g.capability IN ('job.view', 'job.create', 'job.claim', 'job.cancel', 'job.reconcile')
    );
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.job_visible(p_principal text, p_project text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM docket.grants g
        WHERE g.project = p_project AND g.principal = p_principal
          AND g.capability IN ('job.create', 'job.claim', 'job.cancel', 'job.reconcile')
    );
END
$$;
-- +goose StatementEnd
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name = 'job.view' AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
