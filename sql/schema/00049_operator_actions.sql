-- Operator actions: pausing a project's queue, and retrying a finished job
-- as a new one. The queues table (one row per queue ever paused) and its
-- append-only history, the column that links a retry to the job it
-- retries, and their capabilities. Their rules are sql/definitions/queues.sql's
-- and sql/definitions/jobs.sql's.

-- +goose Up

SET LOCAL docket.migrating = 'on';

-- Kept by a down migration while granted: an up finds them there.
INSERT INTO docket.capabilities (name, description) VALUES
    ('queue.pause', 'pause and resume the project''s queues'),
    ('queue.view', 'read the project''s queues, whether they are paused, and their history'),
    ('job.retry', 'enqueue a finished job of the project again, as a new job')
ON CONFLICT (name) DO NOTHING;

-- The job a job retries: a finished job of the same project, checked when
-- the retry is inserted (jobs_record_insert), as lane_id and case_id are,
-- rather than by a foreign key: a prune removes finished jobs, and a
-- retry may outlive its original (its Get then names the prune).
ALTER TABLE docket.jobs ADD COLUMN retry_of bigint;
COMMENT ON COLUMN docket.jobs.retry_of IS
    'The finished job of the same project this job retries (docket.job_retry); NULL for a job enqueued afresh.';

-- A job's retries, for its view and for the bulk retry, which skips a job
-- retried already.
CREATE INDEX jobs_retry_of_idx ON docket.jobs (retry_of) WHERE retry_of IS NOT NULL;

-- A project's queue that was ever paused. A queue no row names is running:
-- queues are names jobs carry, not things created. paused_by, paused_at
-- and reason describe the pause in force (NULL while running); revision
-- counts the pauses and resumes, one each.
CREATE TABLE docket.queues (
    project    text NOT NULL REFERENCES docket.projects (name),
    queue      docket.job_queue NOT NULL,
    paused     boolean NOT NULL,
    revision   bigint NOT NULL CONSTRAINT queues_revision_positive CHECK (revision >= 1),
    paused_by  docket.principal,
    paused_at  timestamptz,
    reason     text CONSTRAINT queues_reason_bounded CHECK (length(reason) <= 1000),
    updated_by docket.principal NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (project, queue),
    CONSTRAINT queues_pause_described CHECK (paused = (paused_by IS NOT NULL AND paused_at IS NOT NULL)
                                             AND (paused OR reason IS NULL))
);

COMMENT ON TABLE docket.queues IS
    'The queues of a project that were ever paused, and whether they are now. A paused queue''s jobs stay queued and no claim takes them. Changed only by docket.queue_pause and docket.queue_resume.';

-- Who paused or resumed a queue, when (the caller's instant) and why.
-- Append-only.
CREATE TABLE docket.queue_events (
    id       bigint GENERATED ALWAYS AS IDENTITY,
    project  text NOT NULL,
    queue    docket.job_queue NOT NULL,
    revision bigint NOT NULL,
    what     text NOT NULL CONSTRAINT queue_events_what_known CHECK (what IN ('paused', 'resumed')),
    actor    docket.principal NOT NULL,
    at       timestamptz NOT NULL,
    reason   text CONSTRAINT queue_events_reason_bounded CHECK (length(reason) <= 1000),
    PRIMARY KEY (project, id),
    FOREIGN KEY (project, queue) REFERENCES docket.queues (project, queue),
    UNIQUE (project, queue, revision)
);

COMMENT ON TABLE docket.queue_events IS
    'Append-only history of every pause and resume of a project''s queue: who, when, why.';

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.queue_events, docket.queues;
DROP INDEX docket.jobs_retry_of_idx;
ALTER TABLE docket.jobs DROP COLUMN retry_of;
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name IN ('queue.pause', 'queue.view', 'job.retry')
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
