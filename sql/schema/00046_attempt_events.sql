-- One event per attempt. A claim is recorded on the job row (holder, lease
-- generation, token digest, claimed-at, revision) and written into the
-- history with the move that ends its attempt, as one event: a completion,
-- a failure, a release, the sweep of an expired lease, a takeover, a cancel
-- or reconcile of a held job. That event names the claim it ends in three
-- columns, which its hash covers (docket.job_event_hash). Events written
-- before, with a claim event of their own, keep these NULL, and a history of
-- either shape, or both, verifies (docket.job_history_verify).

-- +goose Up
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.job_events
    ADD COLUMN claimed_at timestamptz,
    ADD COLUMN claimed_by text,
    ADD COLUMN claim_token uuid;

COMMENT ON COLUMN docket.job_events.claimed_at IS
    'On the event that ends an attempt: when the attempt was claimed. NULL on other events, and on every event written while claims were events of their own.';
COMMENT ON COLUMN docket.job_events.claimed_by IS
    'On the event that ends an attempt: the holder of its claim (a principal, copied from the job row, which checked it).';
COMMENT ON COLUMN docket.job_events.claim_token IS
    'On the event that ends an attempt: the digest of its claim token (docket.job_token_digest), as the job row held it.';

-- +goose Down
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.job_events DROP COLUMN claimed_at, DROP COLUMN claimed_by, DROP COLUMN claim_token;
