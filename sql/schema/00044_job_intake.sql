-- Job intake: the table a bulk enqueue copies its jobs into (COPY FROM), and
-- the receipts it reads back. Postgres refuses COPY FROM into a table with
-- row-level security to everyone but its owner, and docket.jobs has it; the
-- intake has none, and its application role may only INSERT into it. Its
-- statement trigger (job_intake_apply, sql/definitions/jobs.sql) checks the
-- rows as docket.job_enqueue_many checks its arrays, as the caller, moves
-- them into docket.jobs and deletes them, so the intake is empty whenever a
-- statement on it has ended; the receipts it records (one row an intake:
-- its jobs' ids and whether each already existed, in order) are read back,
-- and deleted, by
-- job_intake_take in the same transaction.
--
-- Both are UNLOGGED: nothing in them outlives the transaction that wrote
-- it, so they need no WAL and a crash that empties them loses nothing.
-- The columns are plain types, not the jobs' domains, so a malformed value
-- reaches the trigger and is refused there with the array path's named
-- refusal (DK010) rather than by a domain's CHECK.

-- +goose Up

SET LOCAL docket.migrating = 'on';

CREATE TABLE docket.job_intake (
    intake            uuid NOT NULL,
    ord               integer NOT NULL,
    project           text,
    actor             text,
    at                timestamptz,
    kind              text,
    queue             text,
    priority          smallint,
    payload           jsonb,
    payload_schema    integer,
    idempotency_key   text,
    available_at      timestamptz,
    max_attempts      integer,
    repeatable        boolean,
    external          boolean,
    lease             interval,
    backoff_base      interval,
    backoff_cap       interval,
    backoff_jitter    double precision,
    params            jsonb,
    inputs            jsonb,
    output            text,
    lane_id           bigint,
    case_id           bigint,
    compensation_kind text,
    output_kind       text,
    root              text,
    budget            jsonb
);

COMMENT ON TABLE docket.job_intake IS
    'bulk enqueue by COPY FROM: rows are checked, moved into docket.jobs and deleted by the statement trigger job_intake_apply; empty whenever no statement on it is running';

CREATE TABLE docket.job_intake_receipts (
    intake     uuid PRIMARY KEY,
    actor      text NOT NULL,
    made_in    xid8 NOT NULL,
    ids        bigint[] NOT NULL,
    duplicates boolean[] NOT NULL,
    CHECK (cardinality(ids) = cardinality(duplicates))
);

ALTER TABLE docket.job_intake SET UNLOGGED;
ALTER TABLE docket.job_intake_receipts SET UNLOGGED;

COMMENT ON TABLE docket.job_intake_receipts IS
    'what a COPY into docket.job_intake made: one row an intake, its jobs'' ids and duplicate flags in ordinal order; read and deleted by job_intake_take in the same transaction';

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.job_intake_receipts;
DROP TABLE docket.job_intake;
