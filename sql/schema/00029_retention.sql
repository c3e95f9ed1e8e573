-- Retention: how long a project's finished work stays (docket.retention_policies),
-- and the evidence each prune leaves of what it removed (docket.prunes); the
-- indexes the prune's scans walk on the other aggregates' tables, and those
-- tables' storage settings. The prune itself is sql/definitions/retention.sql's.

-- +goose Up

-- Kept by a down migration while granted: an up finds them there.
INSERT INTO docket.capabilities (name, description) VALUES
    ('retention.manage', 'set how long the project''s finished work is kept, and read it'),
    ('retention.prune', 'remove the project''s finished work past its retention horizons (the prune sweep)')
ON CONFLICT (name) DO NOTHING;

-- Horizons ---------------------------------------------------------------------

-- valid_horizon: a horizon is NULL (keep forever) or 1 second to 36,500 days.
CREATE FUNCTION docket.valid_horizon(p_horizon interval) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_horizon IS NULL OR (p_horizon >= interval '1 second' AND p_horizon <= interval '36500 days');

CREATE TABLE docket.retention_policies (
    project        text PRIMARY KEY REFERENCES docket.projects (name),
    -- How long after it finished a succeeded or cancelled job stays.
    jobs_succeeded interval CONSTRAINT retention_policies_jobs_succeeded_valid CHECK (docket.valid_horizon(jobs_succeeded)),
    -- How long after it finished a failed or dead job stays.
    jobs_failed    interval CONSTRAINT retention_policies_jobs_failed_valid CHECK (docket.valid_horizon(jobs_failed)),
    -- How long after it was dead-lettered a message no case took stays.
    messages       interval CONSTRAINT retention_policies_messages_valid CHECK (docket.valid_horizon(messages)),
    -- How long after it was due a schedule occurrence stays (its job stays
    -- as long, whatever the job horizons say).
    occurrences    interval CONSTRAINT retention_policies_occurrences_valid CHECK (docket.valid_horizon(occurrences)),
    -- How long after it closed a case stays, with everything bound to it.
    cases          interval CONSTRAINT retention_policies_cases_valid CHECK (docket.valid_horizon(cases)),
    updated_by     docket.principal NOT NULL,
    updated_at     timestamptz NOT NULL
);

COMMENT ON TABLE docket.retention_policies IS
    'A project''s retention horizons (NULL: kept forever); a project without a row keeps docket.retention_defaults(). Changes are in docket.retention_events.';

CREATE TABLE docket.retention_events (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project  text NOT NULL REFERENCES docket.projects (name),
    -- The horizons before (NULL: the defaults applied) and after.
    previous jsonb,
    horizons jsonb NOT NULL,
    actor    text NOT NULL,
    at       timestamptz NOT NULL
);

CREATE INDEX retention_events_project_idx ON docket.retention_events (project, id);

-- Prunes -----------------------------------------------------------------------

-- One row per project a prune removed something from (or kept something of
-- that did not verify), written before anything is deleted. Append-only.
CREATE TABLE docket.prunes (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project          text NOT NULL REFERENCES docket.projects (name),
    -- The transaction that pruned: the delete-refusing triggers admit deletes
    -- in it, and in no other.
    xid              xid8 NOT NULL,
    actor            docket.principal NOT NULL,
    at               timestamptz NOT NULL,
    -- The horizons it applied (docket.horizons_json).
    horizons         jsonb NOT NULL,
    -- The jobs it removed (those of its cases too), as id ranges; how many,
    -- by state; their events; when the first and the last of them finished.
    jobs             integer NOT NULL CONSTRAINT prunes_jobs_nonnegative CHECK (jobs >= 0),
    job_ids          int8multirange NOT NULL,
    job_states       jsonb NOT NULL,
    job_events       integer NOT NULL CONSTRAINT prunes_job_events_nonnegative CHECK (job_events >= 0),
    finished_from    timestamptz,
    finished_to      timestamptz,
    -- docket.prune_digest over the removed jobs' chain heads; NULL when none.
    jobs_digest      docket.sha256,
    -- The closed cases it removed, with what was bound to them.
    cases            integer NOT NULL CONSTRAINT prunes_cases_nonnegative CHECK (cases >= 0),
    case_ids         int8multirange NOT NULL,
    case_events      integer NOT NULL,
    case_keys        integer NOT NULL,
    obligations      integer NOT NULL,
    timers           integer NOT NULL,
    waits            integer NOT NULL,
    -- Messages: those of its cases and dead-lettered ones no case took.
    messages         integer NOT NULL,
    message_ids      int8multirange NOT NULL,
    occurrences      integer NOT NULL,
    -- Jobs past their horizon kept because their history did not verify
    -- (docket.job_verify tells why); the first of them.
    kept_unverified  integer NOT NULL,
    first_unverified bigint,
    CONSTRAINT prunes_digest_iff_jobs CHECK ((jobs > 0) = (jobs_digest IS NOT NULL))
);

COMMENT ON TABLE docket.prunes IS
    'Append-only evidence of every prune: what it removed (id ranges, counts by state, a digest over the removed jobs'' chain heads) and what it kept because it did not verify.';

CREATE INDEX prunes_xid_idx ON docket.prunes (xid);

CREATE INDEX prunes_project_idx ON docket.prunes (project, id);

CREATE INDEX prunes_job_ids_idx ON docket.prunes USING gist (job_ids);

CREATE INDEX prunes_case_ids_idx ON docket.prunes USING gist (case_ids);

-- The indexes a prune scans by: finished jobs of no case by state and end,
-- closed cases by closing, dead-lettered messages of no case by settling.
CREATE INDEX jobs_finished_idx ON docket.jobs (project, state, finished_at, id)
    WHERE finished_at IS NOT NULL AND case_id IS NULL;

CREATE INDEX cases_closed_idx ON docket.cases (project, closed_at, id) WHERE status = 'closed';

CREATE INDEX messages_unclaimed_dead_idx ON docket.messages (project, settled_at, id)
    WHERE status = 'dead_lettered' AND addressee IS NULL AND consumed_by IS NULL;

-- The references to jobs a delete of jobs checks (without them, each removed
-- job would scan these tables).
CREATE INDEX waits_continuation_job_idx ON docket.waits (continuation_job_id) WHERE continuation_job_id IS NOT NULL;

CREATE INDEX obligations_escalation_job_idx ON docket.obligations (escalation_job_id) WHERE escalation_job_id IS NOT NULL;

CREATE INDEX schedule_occurrences_job_idx ON docket.schedule_occurrences (job_id);

-- Storage ----------------------------------------------------------------------
-- docket.jobs is updated two or three times in its life and then deleted by
-- the prune: vacuum it after 2% of it changed rather than Postgres's 20%, so
-- the space a prune frees is reused before the table grows. No fillfactor:
-- every claim and completion changes an indexed column (state, in the
-- partial indexes), so no update of a job is HOT and room left on its page
-- would only cost heap. The event and evidence tables are insert-only until
-- pruned: vacuum them after 5% new rows (to keep their visibility maps
-- current for index-only scans) and after 2% deleted.
ALTER TABLE docket.jobs SET (
    autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05);

ALTER TABLE docket.job_events SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_insert_scale_factor = 0.05);

ALTER TABLE docket.messages SET (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.05);

ALTER TABLE docket.waits SET (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.05);

ALTER TABLE docket.cases SET (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.05);

ALTER TABLE docket.case_events SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);

-- +goose Down
DROP INDEX docket.schedule_occurrences_job_idx, docket.obligations_escalation_job_idx,
    docket.waits_continuation_job_idx, docket.messages_unclaimed_dead_idx, docket.cases_closed_idx,
    docket.jobs_finished_idx;
ALTER TABLE docket.jobs RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor,
    autovacuum_vacuum_insert_scale_factor);
ALTER TABLE docket.job_events RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor,
    autovacuum_vacuum_insert_scale_factor);
ALTER TABLE docket.messages RESET (fillfactor, autovacuum_vacuum_scale_factor);
ALTER TABLE docket.waits RESET (fillfactor, autovacuum_vacuum_scale_factor);
ALTER TABLE docket.cases RESET (fillfactor, autovacuum_vacuum_scale_factor);
ALTER TABLE docket.case_events RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_insert_scale_factor);
DROP TABLE docket.prunes, docket.retention_events, docket.retention_policies;
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name IN ('retention.manage', 'retention.prune')
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
DROP FUNCTION docket.valid_horizon(interval);
