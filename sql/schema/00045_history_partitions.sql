-- Job history partitioned by job id. docket.job_events becomes a table
-- partitioned by RANGE (job_id): a job's events all land in one partition,
-- so a chain is verified, and its head found, within one partition, and a
-- prune that has removed every job of a range drops that range's partition
-- whole instead of deleting its events row by row (docs/retention.md,
-- "History partitions"). docket makes the partitions itself, ahead of the
-- jobs id sequence (docket.history_partitions_ensure), every
-- docket.history_partitioning.width ids; a DEFAULT partition takes an event
-- no range covers, so an insert never fails for want of a partition.
--
-- The table as it was becomes the partition of every id below the first
-- range boundary above the sequence's current value: its rows stay where
-- they are (attached, not copied). Its triggers and policy are definitions
-- (sql/definitions), applied again on the partitioned table after this.

-- +goose Up
SET LOCAL docket.migrating = 'on';

CREATE TABLE docket.history_partitioning (
    singleton boolean PRIMARY KEY DEFAULT true CONSTRAINT history_partitioning_singleton CHECK (singleton),
    width     bigint NOT NULL DEFAULT 1000000
              CONSTRAINT history_partitioning_width_valid CHECK (width BETWEEN 1 AND 1000000000000),
    ahead     integer NOT NULL DEFAULT 2
              CONSTRAINT history_partitioning_ahead_valid CHECK (ahead BETWEEN 1 AND 100)
);

COMMENT ON TABLE docket.history_partitioning IS
    'How docket.job_events is partitioned: one partition every width job ids, made ahead of the jobs id sequence for the next ahead ranges. A change applies to partitions made after it.';

INSERT INTO docket.history_partitioning DEFAULT VALUES;

-- The table as it was, without the triggers and policy the definitions put
-- on it (they go on the partitioned table).
ALTER TABLE docket.job_events RENAME TO job_events_legacy;
ALTER INDEX docket.job_events_pkey RENAME TO job_events_legacy_pkey;
DROP POLICY IF EXISTS job_events_visible_with_their_job ON docket.job_events_legacy;
-- +goose StatementBegin
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT tgname FROM pg_trigger WHERE tgrelid = 'docket.job_events_legacy'::regclass AND NOT tgisinternal LOOP
        EXECUTE format('DROP TRIGGER %I ON docket.job_events_legacy', g.tgname);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- One row per transition, chained: hash = sha256(prev_hash || canonical event),
-- with prev_hash of the first event 32 zero bytes. See docket.job_event_hash.
CREATE TABLE docket.job_events (
    -- Checked set-based by job_events_check rather than by a foreign key.
    job_id     bigint NOT NULL,
    seq        docket.job_event_seq NOT NULL,
    from_state docket.job_state,
    to_state   docket.job_state NOT NULL,
    actor      text NOT NULL,
    at         timestamptz NOT NULL,
    attempt    integer NOT NULL,
    detail     docket.job_event_text,
    -- What the transition left the job holding: its lease's expiry, and the
    -- digest of its state, result, diagnostic, holder, token, generation and
    -- attempts (docket.job_outcome).
    lease_until timestamptz,
    outcome    docket.sha256 NOT NULL,
    prev_hash  docket.sha256 NOT NULL,
    hash       docket.sha256 NOT NULL,
    revision   docket.job_revision,
    PRIMARY KEY (job_id, seq)
) PARTITION BY RANGE (job_id);

COMMENT ON TABLE docket.job_events IS
    'Append-only, hash-chained history of every job transition. docket.job_verify(id) checks a job''s chain. Partitioned by job id (docket.history_partitioning).';

COMMENT ON COLUMN docket.job_events.revision IS
    'The handler revision of the claim the event made or ended; NULL for other events and claimants naming none.';

-- The old rows, attached as the partition below the first boundary above
-- every id handed out so far. The check lets the attach skip its scan.
-- +goose StatementBegin
DO $$
DECLARE
    w bigint := (SELECT width FROM docket.history_partitioning);
    last_id bigint := coalesce((SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM docket.jobs_id_seq), 0);
    boundary bigint;
BEGIN
    boundary := greatest((last_id / w + 1) * w, w);
    EXECUTE format('ALTER TABLE docket.job_events_legacy ADD CONSTRAINT job_events_legacy_range CHECK (job_id < %s)', boundary);
    EXECUTE format('ALTER TABLE docket.job_events ATTACH PARTITION docket.job_events_legacy FOR VALUES FROM (MINVALUE) TO (%s)', boundary);
    ALTER TABLE docket.job_events_legacy DROP CONSTRAINT job_events_legacy_range;
END
$$;
-- +goose StatementEnd

-- The safety net: an event of a job beyond every range made.
CREATE TABLE docket.job_events_default PARTITION OF docket.job_events DEFAULT;
ALTER TABLE docket.job_events_default SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_insert_scale_factor = 0.05);

-- +goose Down
SET LOCAL docket.migrating = 'on';
-- +goose StatementBegin
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT tgname FROM pg_trigger WHERE tgrelid = 'docket.job_events'::regclass AND NOT tgisinternal AND tgparentid = 0 LOOP
        EXECUTE format('DROP TRIGGER %I ON docket.job_events', g.tgname);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP POLICY IF EXISTS job_events_visible_with_their_job ON docket.job_events;
CREATE TABLE docket.job_events_plain (
    job_id     bigint NOT NULL,
    seq        docket.job_event_seq NOT NULL,
    from_state docket.job_state,
    to_state   docket.job_state NOT NULL,
    actor      text NOT NULL,
    at         timestamptz NOT NULL,
    attempt    integer NOT NULL,
    detail     docket.job_event_text,
    lease_until timestamptz,
    outcome    docket.sha256 NOT NULL,
    prev_hash  docket.sha256 NOT NULL,
    hash       docket.sha256 NOT NULL,
    revision   docket.job_revision
);
INSERT INTO docket.job_events_plain
SELECT job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until, outcome, prev_hash, hash, revision
FROM docket.job_events;
DROP TABLE docket.job_events;
ALTER TABLE docket.job_events_plain RENAME TO job_events;
ALTER TABLE docket.job_events ADD PRIMARY KEY (job_id, seq);
ALTER TABLE docket.job_events SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_insert_scale_factor = 0.05);
COMMENT ON TABLE docket.job_events IS
    'Append-only, hash-chained history of every job transition. docket.job_verify(id) checks a job''s chain.';
COMMENT ON COLUMN docket.job_events.revision IS
    'The handler revision of the claim the event made or ended; NULL for other events and claimants naming none.';
DROP TABLE docket.history_partitioning;
