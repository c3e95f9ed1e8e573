-- Job history partitioned by job id. docket.job_events becomes a table
-- partitioned by RANGE (job_id): a job's events all land in one partition,
-- so a chain is verified, and its head found, within one partition, and a
-- prune that has removed every job of a range drops that range's partition
-- whole instead of deleting its events row by row (docs/retention.md,
-- "History partitions"). docket makes the partitions itself, ahead of the
-- jobs id sequence (docket.history_partitions_ensure), every
-- history_partition_width ids (docket.settings); a DEFAULT partition takes
-- an event no range covers, so an insert never fails for want of one.
--
-- The table as it was is attached, unscanned, as the DEFAULT partition
-- (job_events_legacy); the first docket.history_partitions_ensure, at the
-- end of applying the definitions, gives it the range of every id below the
-- first boundary above the ids handed out so far and makes a new DEFAULT
-- partition. Its triggers and policy are definitions, applied to the
-- partitioned table after this.

-- +goose Up
SET LOCAL docket.migrating = 'on';

INSERT INTO docket.settings (name, value, meaning) VALUES
    ('history_partition_width', '1000000',
     'job ids a partition of docket.job_events covers (a bigint); applies to the partitions made after a change'),
    ('history_partitions_ahead', '2',
     'how many ranges of history_partition_width ids docket makes ahead of the jobs id sequence (1..100)');

ALTER TABLE docket.job_events RENAME TO job_events_legacy;
ALTER TABLE docket.job_events_legacy RENAME CONSTRAINT job_events_pkey TO job_events_legacy_pkey;

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
    -- The claim of the attempt the event ends (00046).
    claimed_at  timestamptz,
    claimed_by  text,
    claim_token uuid,
    PRIMARY KEY (job_id, seq)
) PARTITION BY RANGE (job_id);

COMMENT ON TABLE docket.job_events IS
    'Append-only, hash-chained history of every job transition. docket.job_verify(id) checks a job''s chain. Partitioned by job id (setting history_partition_width).';

COMMENT ON COLUMN docket.job_events.revision IS
    'The handler revision of the claim the event made or ended; NULL for other events and claimants naming none.';
COMMENT ON COLUMN docket.job_events.claimed_at IS
    'On the event that ends an attempt: when the attempt was claimed. NULL on other events, and on every event written while claims were events of their own.';
COMMENT ON COLUMN docket.job_events.claimed_by IS
    'On the event that ends an attempt: the holder of its claim (a principal, copied from the job row, which checked it).';
COMMENT ON COLUMN docket.job_events.claim_token IS
    'On the event that ends an attempt: the digest of its claim token (docket.job_token_digest), as the job row held it.';

-- No other partition yet: nothing to scan.
ALTER TABLE docket.job_events ATTACH PARTITION docket.job_events_legacy DEFAULT;

-- +goose Down
SET LOCAL docket.migrating = 'on';
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
    revision   docket.job_revision,
    claimed_at  timestamptz,
    claimed_by  text,
    claim_token uuid
);
INSERT INTO docket.job_events_plain
SELECT job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until, outcome, prev_hash, hash, revision,
       claimed_at, claimed_by, claim_token
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
DELETE FROM docket.settings WHERE name IN ('history_partition_width', 'history_partitions_ahead');
