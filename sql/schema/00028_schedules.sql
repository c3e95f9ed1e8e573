-- Schedules: durable cron. The schedules, the occurrences they
-- materialized and their events; the schedule machine. Their rules are
-- sql/definitions/schedules.sql's.

-- +goose Up

-- Kept by a down migration while granted: an up finds them there.
INSERT INTO docket.capabilities (name, description) VALUES
    ('schedule.manage', 'create (with job.create), change, pause, resume and finish the project''s schedules; read them'),
    ('schedule.view', 'read the project''s schedules, their occurrences and history'),
    ('schedule.sweep', 'materialize the project''s due schedule occurrences as jobs (with job.create)')
ON CONFLICT (name) DO NOTHING;

-- States and transitions ---------------------------------------------------------

-- The machines of this file change only here (docket.refuse_machine_change).
SET LOCAL docket.migrating = 'on';

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('schedule', 'docket.schedules.status', 'a schedule: active, paused or finished');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'schedule', * FROM (VALUES
    ('active', true, false, 'its due occurrences are materialized as jobs by the sweep'),
    ('paused', false, false, 'nothing is materialized; the cursor is kept, and resuming applies the catch-up policy'),
    ('finished', false, true, 'past its end or its last occurrence, or finished by hand; kept with its history')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'schedule', from_state, to_state, NULL FROM (VALUES
    ('active', 'paused'),
    ('paused', 'active'),
    ('active', 'finished'),
    ('paused', 'finished')) v (from_state, to_state);

-- Schedules -------------------------------------------------------------------------

-- A zone name as the IANA database spells them, e.g. Europe/Berlin or UTC.
-- Whether the zone is known is decided in Go, by the tz database that
-- computes the instants.
CREATE FUNCTION docket.valid_zone_name(p_zone text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_zone) BETWEEN 1 AND 64 AND p_zone ~ '^[A-Za-z][A-Za-z0-9._+/-]*$';

CREATE TABLE docket.schedules (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project            text NOT NULL REFERENCES docket.projects (name),
    name               text NOT NULL CONSTRAINT schedules_name_valid CHECK (docket.valid_project_name(name)),
    cron               text NOT NULL CONSTRAINT schedules_cron_bounded CHECK (length(cron) BETWEEN 1 AND 200),
    zone               text NOT NULL CONSTRAINT schedules_zone_valid CHECK (docket.valid_zone_name(zone)),
    -- Neither the minute nor the hour field is * or */n (see docs/schedules.md).
    fixed_time         boolean NOT NULL,
    -- The job each occurrence enqueues.
    job_kind           docket.job_kind NOT NULL,
    job_queue          docket.job_queue NOT NULL,
    job_payload        docket.job_json NOT NULL,
    job_payload_schema integer NOT NULL CONSTRAINT schedules_job_payload_schema_positive CHECK (job_payload_schema >= 1),
    job_max_attempts   integer NOT NULL CONSTRAINT schedules_job_max_attempts_range CHECK (job_max_attempts BETWEEN 1 AND 100),
    -- After downtime: skip, one or all (up to max_catch_up) of the missed
    -- occurrences; an occurrence later than grace when swept is missed.
    catch_up           text NOT NULL CONSTRAINT schedules_catch_up_known CHECK (catch_up IN ('skip', 'one', 'all')),
    max_catch_up       integer NOT NULL CONSTRAINT schedules_max_catch_up_range CHECK (max_catch_up BETWEEN 1 AND 1000),
    grace              interval NOT NULL
                       CONSTRAINT schedules_grace_range CHECK (grace BETWEEN interval '1 second' AND interval '24 hours'),
    -- Occurrences strictly after starts_at and not after ends_at, at most
    -- max_occurrences runs.
    starts_at          timestamptz NOT NULL CONSTRAINT schedules_starts_at_finite CHECK (isfinite(starts_at)),
    ends_at            timestamptz,
    max_occurrences    bigint CONSTRAINT schedules_max_occurrences_positive CHECK (max_occurrences >= 1),
    runs               bigint NOT NULL DEFAULT 0,
    status             text NOT NULL DEFAULT 'active',
    -- The next occurrence is the first strictly after cursor_at.
    cursor_at          timestamptz NOT NULL,
    -- The instant of that occurrence; NULL when finished.
    next_due_at        timestamptz,
    created_by         docket.principal NOT NULL,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    finished_at        timestamptz,
    CONSTRAINT schedules_project_name_key UNIQUE (project, name),
    CONSTRAINT schedules_ends_after_start CHECK (ends_at > starts_at),
    CONSTRAINT schedules_runs_bounded CHECK (runs >= 0 AND runs <= coalesce(max_occurrences, runs)),
    CONSTRAINT schedules_cursor_from_start CHECK (cursor_at >= starts_at),
    CONSTRAINT schedules_next_after_cursor CHECK (next_due_at > cursor_at),
    CONSTRAINT schedules_next_due_iff_unfinished CHECK ((status = 'finished') = (next_due_at IS NULL)),
    CONSTRAINT schedules_finished_at_iff_finished CHECK ((status = 'finished') = (finished_at IS NOT NULL))
);

COMMENT ON TABLE docket.schedules IS
    'Recurring jobs: a cron expression in a zone, the job each occurrence enqueues, catch-up policy, bounds and cursor.';

-- The sweep's range scan: active schedules by the instant they fall due.
CREATE INDEX schedules_due_idx ON docket.schedules (next_due_at, id) WHERE status = 'active';

-- Occurrences -------------------------------------------------------------------------

-- One row per occurrence materialized as a job. Append-only.
CREATE TABLE docket.schedule_occurrences (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id bigint NOT NULL REFERENCES docket.schedules (id),
    -- The local date-time the expression matched, in the schedule's zone
    -- (for a run moved out of a spring-forward gap, the missing local time),
    -- and 0 for its first occurrence, 1 for its second in a fall-back overlap.
    local_time  timestamp NOT NULL,
    fold        smallint NOT NULL CONSTRAINT schedule_occurrences_fold_known CHECK (fold IN (0, 1)),
    -- The instant it resolved to, and the job it enqueued (available then).
    due_at      timestamptz NOT NULL,
    job_id      bigint NOT NULL REFERENCES docket.jobs (id),
    recorded_at timestamptz NOT NULL,
    CONSTRAINT schedule_occurrences_identity UNIQUE (schedule_id, local_time, fold),
    -- A whole minute, as cron matches and as the job key names it.
    CONSTRAINT schedule_occurrences_local_time_minute CHECK (local_time = date_trunc('minute', local_time))
);

COMMENT ON TABLE docket.schedule_occurrences IS
    'Each occurrence of a schedule materialized as a job, once: unique by (schedule, local date-time, fold).';

CREATE INDEX schedule_occurrences_schedule_idx ON docket.schedule_occurrences (schedule_id, due_at);

-- Events ------------------------------------------------------------------------

-- One row per change of a schedule. what says which:
--   created   the schedule was created (to: active)
--   status    it was paused, resumed or finished (from, to)
--   updated   its expression, zone, job, catch-up or bounds changed
--   skipped   missed occurrences the catch-up policy did not run (detail:
--             policy, count, first and last: local time, fold, instant)
CREATE TABLE docket.schedule_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id bigint NOT NULL REFERENCES docket.schedules (id),
    what        text NOT NULL CONSTRAINT schedule_events_what_known CHECK (what IN ('created', 'status', 'updated', 'skipped')),
    from_state  text,
    to_state    text,
    actor       text NOT NULL,
    at          timestamptz NOT NULL,
    detail      jsonb CONSTRAINT schedule_events_detail_bounded CHECK (docket.json_size(detail) <= 4096)
);

COMMENT ON TABLE docket.schedule_events IS
    'Append-only history of every schedule change, and of every missed window the catch-up policy skipped.';

CREATE INDEX schedule_events_schedule_idx ON docket.schedule_events (schedule_id, id);

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.schedule_events, docket.schedule_occurrences, docket.schedules;
DELETE FROM docket.machine_transitions WHERE machine = 'schedule';
DELETE FROM docket.machine_states WHERE machine = 'schedule';
DELETE FROM docket.machines WHERE name = 'schedule';
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name IN ('schedule.manage', 'schedule.view', 'schedule.sweep')
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
DROP FUNCTION docket.valid_zone_name(text);
