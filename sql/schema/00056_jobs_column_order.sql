-- A job's columns in the order its updates change them. Postgres logs an
-- update of a row whose new version stays on its page (migration 53's
-- fillfactor) as the bytes between the longest unchanged prefix and the
-- longest unchanged suffix of the row. With the state sixth of 48 columns and
-- the claim's and completion's columns spread behind it, every claim and
-- completion logged the payload, the parameters, the inputs, the policy and
-- the creator with it: about 370 bytes a record for a small job. Here what
-- never changes comes first (identity, request, policy, creation), then
-- what changes seldom (ceilings, pins, availability, spend, renewals), then
-- the state and what a claim and a completion change, so that a record
-- holds those: about 160 bytes (docs/worker.md, "The columns in the order
-- updates change them").
--
-- Postgres cannot reorder a table's columns, so the table is rebuilt: the
-- old one renamed, a new one made and filled in id order (its identity
-- carried over), the old one dropped, then the keys, checks and indexes
-- made again under their names. It takes ACCESS EXCLUSIVE on docket.jobs
-- for the copy: measured in docs/operators.md (row 56). Triggers, policies
-- and privileges are definitions, dropped before a migration and made
-- again after it. Down rebuilds the table in the order it had.

-- +goose Up
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.jobs RENAME TO jobs_reordered;
ALTER SEQUENCE docket.jobs_id_seq RENAME TO jobs_reordered_id_seq;

CREATE TABLE docket.jobs (
    id                bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    project           text NOT NULL,
    kind              docket.job_kind NOT NULL,
    queue             docket.job_queue DEFAULT 'default' NOT NULL,
    priority          docket.job_priority DEFAULT 1 NOT NULL,
    payload           docket.job_json NOT NULL,
    payload_schema    docket.job_payload_schema DEFAULT 1 NOT NULL,
    params            docket.job_params,
    inputs            docket.job_inputs DEFAULT '{}' NOT NULL,
    requested_output  docket.job_output,
    requested_kind    docket.job_output_kind,
    target_root       docket.job_target_root,
    lane_id           bigint,
    case_id           bigint,
    retry_of          bigint,
    idempotency_key   docket.job_key,
    compensation_kind docket.job_kind,
    external          boolean DEFAULT false NOT NULL,
    repeatable        boolean DEFAULT false NOT NULL,
    max_attempts      docket.job_max_attempts DEFAULT 5 NOT NULL,
    lease             docket.job_lease DEFAULT '00:05:00' NOT NULL,
    backoff_base      docket.job_backoff_base DEFAULT '00:00:01' NOT NULL,
    backoff_cap       interval DEFAULT '00:10:00' NOT NULL,
    backoff_jitter    docket.job_backoff_jitter DEFAULT 0.2 NOT NULL,
    created_by        docket.principal NOT NULL,
    created_at        timestamptz NOT NULL,
    max_effects       bigint,
    max_money         bigint,
    currency          text,
    revisions         docket.job_pin,
    available_at      timestamptz NOT NULL,
    spent_effects     bigint DEFAULT 0 NOT NULL,
    spent_money       bigint DEFAULT 0 NOT NULL,
    renewals          integer DEFAULT 0 NOT NULL,
    renewed_at        timestamptz,
    state             docket.job_state DEFAULT 'queued' NOT NULL,
    attempts          integer DEFAULT 0 NOT NULL,
    lease_generation  bigint DEFAULT 0 NOT NULL,
    updated_at        timestamptz NOT NULL,
    claim_token       uuid,
    claimed_by        docket.principal,
    claimed_at        timestamptz,
    lease_expires_at  timestamptz,
    claimed_revision  docket.job_revision,
    finished_at       timestamptz,
    outcome_token     uuid,
    result            docket.job_json,
    diagnostic        docket.job_diagnostic
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02,
        autovacuum_vacuum_insert_scale_factor = 0.05);

INSERT INTO docket.jobs (
    id, project, kind, queue, priority, payload, payload_schema, params, inputs, requested_output, requested_kind,
    target_root, lane_id, case_id, retry_of, idempotency_key, compensation_kind, external, repeatable, max_attempts,
    lease, backoff_base, backoff_cap, backoff_jitter, created_by, created_at, max_effects, max_money, currency,
    revisions, available_at, spent_effects, spent_money, renewals, renewed_at, state, attempts, lease_generation,
    updated_at, claim_token, claimed_by, claimed_at, lease_expires_at, claimed_revision, finished_at, outcome_token,
    result, diagnostic)
OVERRIDING SYSTEM VALUE
SELECT
    id, project, kind, queue, priority, payload, payload_schema, params, inputs, requested_output, requested_kind,
    target_root, lane_id, case_id, retry_of, idempotency_key, compensation_kind, external, repeatable, max_attempts,
    lease, backoff_base, backoff_cap, backoff_jitter, created_by, created_at, max_effects, max_money, currency,
    revisions, available_at, spent_effects, spent_money, renewals, renewed_at, state, attempts, lease_generation,
    updated_at, claim_token, claimed_by, claimed_at, lease_expires_at, claimed_revision, finished_at, outcome_token,
    result, diagnostic
FROM docket.jobs_reordered ORDER BY id;

SELECT setval('docket.jobs_id_seq', s.last_value, s.is_called) FROM docket.jobs_reordered_id_seq s;

DROP TABLE docket.jobs_reordered;

ALTER TABLE docket.jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);
ALTER TABLE docket.jobs
    ADD CONSTRAINT jobs_finished_not_before_created CHECK (finished_at >= created_at),
    ADD CONSTRAINT jobs_updated_not_before_created CHECK (updated_at >= created_at),
    ADD CONSTRAINT jobs_renewals_counted CHECK (renewals >= 0 AND (renewals = 0) = (renewed_at IS NULL)),
    ADD CONSTRAINT jobs_budget_valid CHECK (
        coalesce(max_effects >= 1, true) AND coalesce(max_money >= 1, true)
        AND (max_money IS NULL) = (currency IS NULL) AND coalesce(currency ~ '^[A-Z]{3}$', true)
        AND spent_effects >= 0 AND spent_money >= 0);
ALTER TABLE docket.jobs ADD CONSTRAINT jobs_idempotency_key_nfc CHECK (idempotency_key IS NFC NORMALIZED) NOT VALID;

CREATE UNIQUE INDEX jobs_idempotency_key ON docket.jobs (project, kind, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_claim_idx ON docket.jobs (project, queue, priority, available_at, id) WHERE state = 'queued';
CREATE INDEX jobs_lease_expiry_idx ON docket.jobs (lease_expires_at, id) WHERE state = 'claimed';
CREATE INDEX jobs_takeover_idx ON docket.jobs (project, queue, lease_expires_at, id)
    WHERE state = 'claimed' AND repeatable AND attempts < max_attempts;
CREATE INDEX jobs_uncertain_idx ON docket.jobs (project, updated_at, id) WHERE state = 'uncertain';
CREATE INDEX jobs_dead_idx ON docket.jobs (project, finished_at, id) WHERE state = 'dead';
CREATE INDEX jobs_exhausted_idx ON docket.jobs (project, updated_at, id) WHERE state = 'exhausted';
CREATE INDEX jobs_pinned_idx ON docket.jobs (id) WHERE revisions IS NOT NULL AND state IN ('queued', 'uncertain');
CREATE INDEX jobs_lane_idx ON docket.jobs (lane_id, id) WHERE lane_id IS NOT NULL;
CREATE INDEX jobs_case_idx ON docket.jobs (case_id, id) WHERE case_id IS NOT NULL;
CREATE INDEX jobs_finished_idx ON docket.jobs (project, state, finished_at, id) WHERE finished_at IS NOT NULL AND case_id IS NULL;
CREATE INDEX jobs_money_ceiling_idx ON docket.jobs (id) WHERE max_money IS NOT NULL;
CREATE INDEX jobs_retry_of_idx ON docket.jobs (retry_of) WHERE retry_of IS NOT NULL;

COMMENT ON TABLE docket.jobs IS
    'A unit of work with a lease protocol. State moves only along docket.job_transitions; every move is in docket.job_events.';
COMMENT ON COLUMN docket.jobs.claim_token IS
    'The digest of the live claim''s token (docket.job_token_digest), never the token; NULL unless claimed.';
COMMENT ON COLUMN docket.jobs.outcome_token IS
    'The digest of the token of the claim whose holder finished the job; NULL when no holder did.';
COMMENT ON COLUMN docket.jobs.claimed_revision IS
    'The handler revision of the job''s latest claim; NULL when never claimed, or claimed by a claimant naming none.';
COMMENT ON COLUMN docket.jobs.revisions IS
    'The handler revisions the job may run under (docket.job_pin); NULL: any.';
COMMENT ON COLUMN docket.jobs.renewals IS
    'How many times the lease of the current (or last) attempt was renewed: 0 at each claim.';
COMMENT ON COLUMN docket.jobs.renewed_at IS
    'The instant of the last renewal of the current (or last) attempt''s lease: set exactly when renewals > 0.';
COMMENT ON COLUMN docket.jobs.max_effects IS
    'The most effects the job''s attempts may report together (NULL: no ceiling).';
COMMENT ON COLUMN docket.jobs.max_money IS
    'The most money, in minor units of currency, the job''s attempts may report together (NULL: no ceiling).';
COMMENT ON COLUMN docket.jobs.spent_effects IS
    'The effects its attempts reported, together.';
COMMENT ON COLUMN docket.jobs.spent_money IS
    'The money its attempts reported, together, in minor units (of currency, when it has a ceiling).';
COMMENT ON COLUMN docket.jobs.retry_of IS
    'The finished job of the same project this job retries (docket.job_retry); NULL for a job enqueued afresh.';


-- +goose Down
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.jobs RENAME TO jobs_reordered;
ALTER SEQUENCE docket.jobs_id_seq RENAME TO jobs_reordered_id_seq;

CREATE TABLE docket.jobs (
    id                bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    project           text NOT NULL,
    kind              docket.job_kind NOT NULL,
    queue             docket.job_queue DEFAULT 'default' NOT NULL,
    priority          docket.job_priority DEFAULT 1 NOT NULL,
    state             docket.job_state DEFAULT 'queued' NOT NULL,
    payload           docket.job_json NOT NULL,
    payload_schema    docket.job_payload_schema DEFAULT 1 NOT NULL,
    params            docket.job_params,
    inputs            docket.job_inputs DEFAULT '{}' NOT NULL,
    requested_output  docket.job_output,
    lane_id           bigint,
    case_id           bigint,
    idempotency_key   docket.job_key,
    compensation_kind docket.job_kind,
    external          boolean DEFAULT false NOT NULL,
    repeatable        boolean DEFAULT false NOT NULL,
    available_at      timestamptz NOT NULL,
    attempts          integer DEFAULT 0 NOT NULL,
    max_attempts      docket.job_max_attempts DEFAULT 5 NOT NULL,
    lease             docket.job_lease DEFAULT '00:05:00' NOT NULL,
    backoff_base      docket.job_backoff_base DEFAULT '00:00:01' NOT NULL,
    backoff_cap       interval DEFAULT '00:10:00' NOT NULL,
    backoff_jitter    docket.job_backoff_jitter DEFAULT 0.2 NOT NULL,
    lease_generation  bigint DEFAULT 0 NOT NULL,
    claim_token       uuid,
    claimed_by        docket.principal,
    claimed_at        timestamptz,
    lease_expires_at  timestamptz,
    result            docket.job_json,
    diagnostic        docket.job_diagnostic,
    created_by        docket.principal NOT NULL,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    finished_at       timestamptz,
    outcome_token     uuid,
    claimed_revision  docket.job_revision,
    revisions         docket.job_pin,
    requested_kind    docket.job_output_kind,
    target_root       docket.job_target_root,
    renewals          integer DEFAULT 0 NOT NULL,
    renewed_at        timestamptz,
    max_effects       bigint,
    max_money         bigint,
    currency          text,
    spent_effects     bigint DEFAULT 0 NOT NULL,
    spent_money       bigint DEFAULT 0 NOT NULL,
    retry_of          bigint
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02,
        autovacuum_vacuum_insert_scale_factor = 0.05);

INSERT INTO docket.jobs (
    id, project, kind, queue, priority, state, payload, payload_schema, params, inputs, requested_output, lane_id,
    case_id, idempotency_key, compensation_kind, external, repeatable, available_at, attempts, max_attempts, lease,
    backoff_base, backoff_cap, backoff_jitter, lease_generation, claim_token, claimed_by, claimed_at,
    lease_expires_at, result, diagnostic, created_by, created_at, updated_at, finished_at, outcome_token,
    claimed_revision, revisions, requested_kind, target_root, renewals, renewed_at, max_effects, max_money,
    currency, spent_effects, spent_money, retry_of)
OVERRIDING SYSTEM VALUE
SELECT
    id, project, kind, queue, priority, state, payload, payload_schema, params, inputs, requested_output, lane_id,
    case_id, idempotency_key, compensation_kind, external, repeatable, available_at, attempts, max_attempts, lease,
    backoff_base, backoff_cap, backoff_jitter, lease_generation, claim_token, claimed_by, claimed_at,
    lease_expires_at, result, diagnostic, created_by, created_at, updated_at, finished_at, outcome_token,
    claimed_revision, revisions, requested_kind, target_root, renewals, renewed_at, max_effects, max_money,
    currency, spent_effects, spent_money, retry_of
FROM docket.jobs_reordered ORDER BY id;

SELECT setval('docket.jobs_id_seq', s.last_value, s.is_called) FROM docket.jobs_reordered_id_seq s;

DROP TABLE docket.jobs_reordered;

ALTER TABLE docket.jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);
ALTER TABLE docket.jobs
    ADD CONSTRAINT jobs_finished_not_before_created CHECK (finished_at >= created_at),
    ADD CONSTRAINT jobs_updated_not_before_created CHECK (updated_at >= created_at),
    ADD CONSTRAINT jobs_renewals_counted CHECK (renewals >= 0 AND (renewals = 0) = (renewed_at IS NULL)),
    ADD CONSTRAINT jobs_budget_valid CHECK (
        coalesce(max_effects >= 1, true) AND coalesce(max_money >= 1, true)
        AND (max_money IS NULL) = (currency IS NULL) AND coalesce(currency ~ '^[A-Z]{3}$', true)
        AND spent_effects >= 0 AND spent_money >= 0);
ALTER TABLE docket.jobs ADD CONSTRAINT jobs_idempotency_key_nfc CHECK (idempotency_key IS NFC NORMALIZED) NOT VALID;

CREATE UNIQUE INDEX jobs_idempotency_key ON docket.jobs (project, kind, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_claim_idx ON docket.jobs (project, queue, priority, available_at, id) WHERE state = 'queued';
CREATE INDEX jobs_lease_expiry_idx ON docket.jobs (lease_expires_at, id) WHERE state = 'claimed';
CREATE INDEX jobs_takeover_idx ON docket.jobs (project, queue, lease_expires_at, id)
    WHERE state = 'claimed' AND repeatable AND attempts < max_attempts;
CREATE INDEX jobs_uncertain_idx ON docket.jobs (project, updated_at, id) WHERE state = 'uncertain';
CREATE INDEX jobs_dead_idx ON docket.jobs (project, finished_at, id) WHERE state = 'dead';
CREATE INDEX jobs_exhausted_idx ON docket.jobs (project, updated_at, id) WHERE state = 'exhausted';
CREATE INDEX jobs_pinned_idx ON docket.jobs (id) WHERE revisions IS NOT NULL AND state IN ('queued', 'uncertain');
CREATE INDEX jobs_lane_idx ON docket.jobs (lane_id, id) WHERE lane_id IS NOT NULL;
CREATE INDEX jobs_case_idx ON docket.jobs (case_id, id) WHERE case_id IS NOT NULL;
CREATE INDEX jobs_finished_idx ON docket.jobs (project, state, finished_at, id) WHERE finished_at IS NOT NULL AND case_id IS NULL;
CREATE INDEX jobs_money_ceiling_idx ON docket.jobs (id) WHERE max_money IS NOT NULL;
CREATE INDEX jobs_retry_of_idx ON docket.jobs (retry_of) WHERE retry_of IS NOT NULL;

COMMENT ON TABLE docket.jobs IS
    'A unit of work with a lease protocol. State moves only along docket.job_transitions; every move is in docket.job_events.';
COMMENT ON COLUMN docket.jobs.claim_token IS
    'The digest of the live claim''s token (docket.job_token_digest), never the token; NULL unless claimed.';
COMMENT ON COLUMN docket.jobs.outcome_token IS
    'The digest of the token of the claim whose holder finished the job; NULL when no holder did.';
COMMENT ON COLUMN docket.jobs.claimed_revision IS
    'The handler revision of the job''s latest claim; NULL when never claimed, or claimed by a claimant naming none.';
COMMENT ON COLUMN docket.jobs.revisions IS
    'The handler revisions the job may run under (docket.job_pin); NULL: any.';
COMMENT ON COLUMN docket.jobs.renewals IS
    'How many times the lease of the current (or last) attempt was renewed: 0 at each claim.';
COMMENT ON COLUMN docket.jobs.renewed_at IS
    'The instant of the last renewal of the current (or last) attempt''s lease: set exactly when renewals > 0.';
COMMENT ON COLUMN docket.jobs.max_effects IS
    'The most effects the job''s attempts may report together (NULL: no ceiling).';
COMMENT ON COLUMN docket.jobs.max_money IS
    'The most money, in minor units of currency, the job''s attempts may report together (NULL: no ceiling).';
COMMENT ON COLUMN docket.jobs.spent_effects IS
    'The effects its attempts reported, together.';
COMMENT ON COLUMN docket.jobs.spent_money IS
    'The money its attempts reported, together, in minor units (of currency, when it has a ceiling).';
COMMENT ON COLUMN docket.jobs.retry_of IS
    'The finished job of the same project this job retries (docket.job_retry); NULL for a job enqueued afresh.';

