-- Claim tokens are capabilities, and the caller's clock is bounded. A job
-- stores a digest of its claim's token, never the token; the token a job was
-- claimed under before this migration is replaced by its digest, and a record
-- of each job held at the time keeps its history verifying. docket.settings
-- holds the skew the database allows a caller's clock (clock_skew), and the
-- catalogue the refusal of an instant outside it, or one that runs a record
-- backwards (DK016). The rules are sql/definitions/kit.sql's (set_context,
-- clock_bound) and jobs.sql's (job_token_digest, the lease protocol).

-- +goose Up

INSERT INTO docket.error_codes (code, name, meaning) VALUES
    ('DK016', 'ErrClockSkew', 'the caller''s instant is outside the bound the database allows its clock, or runs a record backwards');

-- Settings --------------------------------------------------------------------

-- docket's settings of a database, one row each, changed by the owner by hand
-- (UPDATE docket.settings SET value = ... WHERE name = ...): no API function
-- writes them.
CREATE TABLE docket.settings (
    name    text PRIMARY KEY CONSTRAINT settings_name_valid CHECK (name ~ '^[a-z][a-z0-9_]*$' AND length(name) <= 63),
    value   text NOT NULL CONSTRAINT settings_value_bounded CHECK (length(value) BETWEEN 1 AND 200),
    meaning text NOT NULL
);

COMMENT ON TABLE docket.settings IS
    'docket''s settings of this database, one row each; the owner changes them by hand.';

-- clock_skew: how far, either way, a caller's now may be from the start of
-- its transaction (the database's clock), for a login that is not a member
-- of docket_clock. A minute: clocks kept by NTP differ by milliseconds, and
-- a transaction may call docket some seconds after it began; a caller dated
-- further ahead could expire leases and deadlines early.
INSERT INTO docket.settings (name, value, meaning) VALUES
    ('clock_skew', '1 minute',
     'how far, either way, a caller''s instant may be from its transaction''s start, unless its login is a member of docket_clock (an interval)');

-- Claim tokens as digests -------------------------------------------------------

-- The claim of a job held when this migration ran was recorded (its last
-- event's outcome, docket.job_outcome) under its token, which the job now
-- holds only as a digest. The migration checks that each such job held what
-- its last event recorded, and keeps here that event's outcome and the
-- outcome of the same holding under the digest, so job_verify still finds
-- the job as its history says until its next transition. It leaves with its
-- job (a prune's delete cascades to it).
CREATE TABLE docket.job_token_rekeys (
    job_id         bigint PRIMARY KEY REFERENCES docket.jobs (id) ON DELETE CASCADE,
    seq            integer NOT NULL,
    outcome_before bytea NOT NULL,
    outcome_after  bytea NOT NULL
);

COMMENT ON TABLE docket.job_token_rekeys IS
    'Jobs held when their claim tokens were replaced by digests: the outcome their last event recorded under the token, and the same holding under its digest (docket.job_verify).';

INSERT INTO docket.job_token_rekeys (job_id, seq, outcome_before, outcome_after)
SELECT j.id, e.seq, e.outcome, sha256(textsend('[' || coalesce(to_json(j.state::text)::text, 'null')
    || ', ' || coalesce(j.result::text, 'null')
    || ', ' || coalesce(to_json(j.diagnostic::text)::text, 'null')
    || ', ' || coalesce(to_json(j.claimed_by::text)::text, 'null')
    || ', ' || coalesce('"' || x.digest::text || '"', 'null')
    || ', ' || coalesce(j.lease_generation::text, 'null')
    || ', ' || coalesce(j.attempts::text, 'null') || ']'))
FROM docket.jobs j
CROSS JOIN LATERAL (
    SELECT overlay(overlay(encode(substr(sha256(uuid_send(j.claim_token)), 1, 16), 'hex') PLACING '8' FROM 13 FOR 1)
                   PLACING '8' FROM 17 FOR 1)::uuid AS digest
) x
CROSS JOIN LATERAL (
    SELECT ev.seq, ev.outcome FROM docket.job_events ev WHERE ev.job_id = j.id ORDER BY ev.seq DESC LIMIT 1
) e
WHERE j.claim_token IS NOT NULL
  AND e.outcome = sha256(textsend('[' || coalesce(to_json(j.state::text)::text, 'null')
    || ', ' || coalesce(j.result::text, 'null')
    || ', ' || coalesce(to_json(j.diagnostic::text)::text, 'null')
    || ', ' || coalesce(to_json(j.claimed_by::text)::text, 'null')
    || ', ' || coalesce('"' || j.claim_token::text || '"', 'null')
    || ', ' || coalesce(j.lease_generation::text, 'null')
    || ', ' || coalesce(j.attempts::text, 'null') || ']'));

-- Every token held becomes its digest: the first 128 bits of its sha256, as a
-- UUID of version 8 (RFC 9562, a custom layout) with the variant of RFC 9562,
-- 120 bits of the digest (docket.job_token_digest). A random token is a
-- version 4 UUID, so a stored token and a stored digest never look alike. The
-- rows change by hand, their rules' triggers off: nothing about them moves
-- but the form of their tokens.
ALTER TABLE docket.jobs DISABLE TRIGGER USER;
UPDATE docket.jobs
SET claim_token = overlay(overlay(encode(substr(sha256(uuid_send(claim_token)), 1, 16), 'hex') PLACING '8' FROM 13 FOR 1)
                          PLACING '8' FROM 17 FOR 1)::uuid,
    outcome_token = overlay(overlay(encode(substr(sha256(uuid_send(outcome_token)), 1, 16), 'hex') PLACING '8' FROM 13 FOR 1)
                            PLACING '8' FROM 17 FOR 1)::uuid
WHERE claim_token IS NOT NULL OR outcome_token IS NOT NULL;
ALTER TABLE docket.jobs ENABLE TRIGGER USER;

ALTER TABLE docket.job_completions DISABLE TRIGGER USER;
UPDATE docket.job_completions
SET claim_token = overlay(overlay(encode(substr(sha256(uuid_send(claim_token)), 1, 16), 'hex') PLACING '8' FROM 13 FOR 1)
                          PLACING '8' FROM 17 FOR 1)::uuid;
ALTER TABLE docket.job_completions ENABLE TRIGGER USER;

COMMENT ON COLUMN docket.jobs.claim_token IS
    'The digest of the live claim''s token (docket.job_token_digest), never the token; NULL unless claimed.';

COMMENT ON COLUMN docket.jobs.outcome_token IS
    'The digest of the token of the claim whose holder finished the job; NULL when no holder did.';

COMMENT ON COLUMN docket.job_completions.claim_token IS
    'The digest of the token of the claim the record was made under (docket.job_token_digest).';

-- +goose Down
-- The digests stay: a token is never stored, so none can be put back. Jobs
-- held now keep their leases only under a build that compares digests.
DROP TABLE docket.job_token_rekeys, docket.settings;
DELETE FROM docket.error_codes WHERE code = 'DK016';
