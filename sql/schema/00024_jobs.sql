-- Jobs: durable knowledge that work is wanted, held, done, failed or in
-- doubt. The table of jobs, their hash-chained events, the decoders each
-- deployment registers, trace contexts and completion records, and the job
-- machine's states and moves. The lease protocol and every rule of these
-- tables are sql/definitions/jobs.sql's.

-- +goose Up

-- Names and bounds ------------------------------------------------------------

-- A job kind: dot-separated segments of [a-z0-9_-], each starting with a letter,
-- at most 128 characters, e.g. billing.invoice.
-- Not STRICT, so the planner can inline it into CHECKs and queries.
CREATE FUNCTION docket.valid_job_kind(p_kind text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_kind) <= 128
   AND p_kind ~ '^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$';

-- A queue: 1-63 characters of [a-z0-9_-], starting with a letter or digit. Every
-- such name is also a valid River queue name. (Lengths are checked apart from
-- the pattern: Postgres' regex engine is slow on bounded repeats such as
-- {0,62}, and these rules run in CHECKs on every write of a job.)
CREATE FUNCTION docket.valid_queue(p_queue text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_queue) <= 63 AND p_queue ~ '^[a-z0-9][a-z0-9_-]*$';

-- job_inputs_bounded: at most 100 input references, none NULL, none over
-- 1000 characters.
-- plpgsql, so most jobs, which name no inputs, pay for one comparison.
-- +goose StatementBegin
CREATE FUNCTION docket.job_inputs_bounded(p_inputs text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF cardinality(p_inputs) = 0 THEN
        RETURN true;
    END IF;
    RETURN cardinality(p_inputs) <= 100
       AND NOT EXISTS (SELECT 1 FROM unnest(p_inputs) x WHERE x IS NULL OR length(x) > 1000);
END
$$;
-- +goose StatementEnd

-- A handler revision: 1-100 characters, none a space or a control character,
-- e.g. v1.4.2, 9f3c2ab, 2026-11-30.1.
CREATE FUNCTION docket.valid_job_revision(p_revision text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_revision) BETWEEN 1 AND 100 AND p_revision !~ '[[:space:][:cntrl:]]';

-- A pin: 1-8 revisions, none NULL or malformed. plpgsql, as the domain check
-- of every job row calls it: an SQL function with a subquery is never
-- inlined, and would be planned again in every statement that writes a job.
-- +goose StatementBegin
CREATE FUNCTION docket.job_pin_bounded(p_revisions text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF p_revisions IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN cardinality(p_revisions) BETWEEN 1 AND 8
       AND array_position(p_revisions, NULL) IS NULL
       AND NOT EXISTS (SELECT 1 FROM unnest(p_revisions) r WHERE NOT docket.valid_job_revision(r));
END
$$;
-- +goose StatementEnd

-- An output kind (the representation a job's output is made in): 1-128
-- characters of [A-Za-z0-9._+/:-], starting with a letter or digit.
CREATE FUNCTION docket.valid_output_kind(p text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p) <= 128 AND p ~ '^[A-Za-z0-9][A-Za-z0-9._+/:-]*$';

-- A target root (the logical place a job's output goes): 1-200 characters
-- of [A-Za-z0-9._-], starting with a letter or digit.
CREATE FUNCTION docket.valid_target_root(p text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p) <= 200 AND p ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$';

-- Domains: the rules of values a job carries. A domain's check runs when a
-- value is written to the column, and not again when an UPDATE of other
-- columns copies it, so a claim or a completion does not re-check a job's
-- kind, queue, creator or payload; Postgres also prepares domain checks once
-- per connection rather than once per statement.
CREATE DOMAIN docket.job_kind AS text CONSTRAINT job_kind_valid CHECK (docket.valid_job_kind(VALUE));

CREATE DOMAIN docket.job_queue AS text CONSTRAINT job_queue_valid CHECK (docket.valid_queue(VALUE));

CREATE DOMAIN docket.job_json AS jsonb CONSTRAINT job_json_size CHECK (docket.json_size(VALUE) <= 1048576);

-- What a job is never changes (jobs_columns_immutable), so the rules of its
-- parameters, inputs, requested output and idempotency key are domains too:
-- checked when a job is created, not again by every transition, as a table
-- CHECK would be.
CREATE DOMAIN docket.job_params AS jsonb
    CONSTRAINT jobs_params_object CHECK (jsonb_typeof(VALUE) = 'object' AND docket.json_size(VALUE) <= 65536);

CREATE DOMAIN docket.job_inputs AS text[] CONSTRAINT jobs_inputs_bounded CHECK (docket.job_inputs_bounded(VALUE));

CREATE DOMAIN docket.job_output AS text
    CONSTRAINT jobs_requested_output_bounded CHECK (length(VALUE) BETWEEN 1 AND 1000);

CREATE DOMAIN docket.job_key AS text CONSTRAINT jobs_idempotency_key_valid CHECK (VALUE ~ '^[^[:cntrl:]]{1,255}$');

-- The rules of a single column are domains as well, which has a second
-- reason: Postgres reads a table's CHECK constraints from their stored text
-- again in every INSERT or UPDATE statement (in a one-job enqueue that was a
-- fifth of the server's time), while a domain's checks are read once per
-- connection. Only the rules that join columns stay table CHECKs.
CREATE DOMAIN docket.job_state AS text
    CONSTRAINT job_state_known CHECK (VALUE IN ('queued', 'claimed', 'succeeded', 'failed', 'dead', 'uncertain', 'cancelled'));

CREATE DOMAIN docket.job_priority AS smallint CONSTRAINT jobs_priority_range CHECK (VALUE BETWEEN 1 AND 4);

CREATE DOMAIN docket.job_payload_schema AS integer CONSTRAINT jobs_payload_schema_positive CHECK (VALUE >= 1);

CREATE DOMAIN docket.job_max_attempts AS integer CONSTRAINT jobs_max_attempts_range CHECK (VALUE BETWEEN 1 AND 100);

CREATE DOMAIN docket.job_lease AS interval CONSTRAINT jobs_lease_range CHECK (VALUE BETWEEN '1 second' AND '24 hours');

CREATE DOMAIN docket.job_backoff_base AS interval
    CONSTRAINT jobs_backoff_base_range CHECK (VALUE BETWEEN '1 millisecond' AND '24 hours');

CREATE DOMAIN docket.job_backoff_jitter AS double precision
    CONSTRAINT jobs_backoff_jitter_range CHECK (VALUE BETWEEN 0 AND 1);

CREATE DOMAIN docket.job_diagnostic AS text CONSTRAINT jobs_diagnostic_bounded CHECK (length(VALUE) <= 4096);

CREATE DOMAIN docket.job_event_seq AS integer CONSTRAINT job_events_seq_positive CHECK (VALUE >= 1);

CREATE DOMAIN docket.job_event_text AS text CONSTRAINT job_events_detail_bounded CHECK (length(VALUE) <= 1000);

CREATE DOMAIN docket.sha256 AS bytea CONSTRAINT sha256_length CHECK (octet_length(VALUE) = 32);

-- What a job's claim ran and what it may run: the handler revision of its
-- claim, and the revisions it is pinned to.
CREATE DOMAIN docket.job_revision AS text CONSTRAINT job_revision_valid CHECK (docket.valid_job_revision(VALUE));

CREATE DOMAIN docket.job_pin AS text[] CONSTRAINT jobs_revisions_bounded CHECK (docket.job_pin_bounded(VALUE));

-- What a job's requested output is made in, and where it goes.
CREATE DOMAIN docket.job_output_kind AS text CONSTRAINT job_output_kind_valid CHECK (docket.valid_output_kind(VALUE));

CREATE DOMAIN docket.job_target_root AS text CONSTRAINT job_target_root_valid CHECK (docket.valid_target_root(VALUE));


-- Capabilities ---------------------------------------------------------------

-- Kept by a down migration while granted: an up finds them there.
INSERT INTO docket.capabilities (name, description) VALUES
    ('job.create', 'enqueue jobs in the project'),
    ('job.claim', 'claim and run jobs of the project'),
    ('job.cancel', 'cancel jobs of the project'),
    ('job.reconcile', 'settle the project''s uncertain jobs'),
    ('job.view', 'read the project''s jobs and their history'),
    ('job.pin', 'pin the project''s queued jobs to the handler revisions they may run under')
ON CONFLICT (name) DO NOTHING;

-- States and transitions ------------------------------------------------------

-- The machines of this file change only here (docket.refuse_machine_change).
SET LOCAL docket.migrating = 'on';

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('job', 'docket.jobs.state', 'a job: queued, held under a lease, finished or in doubt');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'job', * FROM (VALUES
    ('queued', true, false, 'wanted: claimable from available_at'),
    ('claimed', false, false, 'held by one claimant until lease_expires_at'),
    ('succeeded', false, true, 'done; result holds the outcome'),
    ('failed', false, true, 'failed permanently; diagnostic says why'),
    ('dead', false, true, 'ran out of attempts'),
    ('uncertain', false, false, 'its worker may or may not have done the work: reconcile or cancel'),
    ('cancelled', false, true, 'withdrawn before it finished')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'job', * FROM (VALUES
    ('queued', 'claimed', 'claim'),
    ('queued', 'cancelled', 'cancel'),
    ('claimed', 'queued', 'release, retryable failure, or expired lease of a repeatable job'),
    ('claimed', 'claimed', 'an expired lease of a repeatable job taken over by another claimant'),
    ('claimed', 'succeeded', 'complete'),
    ('claimed', 'failed', 'permanent failure'),
    ('claimed', 'dead', 'retryable failure or expiry on the last attempt'),
    ('claimed', 'uncertain', 'uncertain failure, or expired lease, of a job that is not repeatable'),
    ('claimed', 'cancelled', 'cancel'),
    ('uncertain', 'succeeded', 'reconciled: the work was done'),
    ('uncertain', 'failed', 'reconciled: the work was not done and will not be'),
    ('uncertain', 'queued', 'reconciled: run it again'),
    ('uncertain', 'cancelled', 'cancel'),
    ('queued', 'queued', 'pin: the handler revisions it may run under changed')) v;

-- Jobs ----------------------------------------------------------------------

CREATE TABLE docket.jobs (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- project, lane_id and case_id are checked by jobs_record_insert, set-based,
    -- rather than by foreign keys.
    project           text NOT NULL,
    kind              docket.job_kind NOT NULL,
    queue             docket.job_queue NOT NULL DEFAULT 'default',
    priority          docket.job_priority NOT NULL DEFAULT 1,
    state             docket.job_state NOT NULL DEFAULT 'queued',
    payload           docket.job_json NOT NULL,
    payload_schema    docket.job_payload_schema NOT NULL DEFAULT 1,
    params            docket.job_params,
    inputs            docket.job_inputs NOT NULL DEFAULT '{}',
    requested_output  docket.job_output,
    lane_id           bigint,
    case_id           bigint,
    idempotency_key   docket.job_key,
    compensation_kind docket.job_kind,
    external          boolean NOT NULL DEFAULT false,
    repeatable        boolean NOT NULL DEFAULT false,
    available_at      timestamptz NOT NULL,
    attempts          integer NOT NULL DEFAULT 0,
    max_attempts      docket.job_max_attempts NOT NULL DEFAULT 5,
    lease             docket.job_lease NOT NULL DEFAULT '5 minutes',
    backoff_base      docket.job_backoff_base NOT NULL DEFAULT '1 second',
    backoff_cap       interval NOT NULL DEFAULT '10 minutes',
    backoff_jitter    docket.job_backoff_jitter NOT NULL DEFAULT 0.2,
    lease_generation  bigint NOT NULL DEFAULT 0,
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
    -- The token of the claim whose holder finished the job (complete or fail),
    -- so a finishing call repeated by that holder is a quiet no-op and
    -- anyone else's is a stale claim. NULL when no holder finished it.
    outcome_token     uuid,
    -- The handler revision of the job's latest claim, and the revisions it
    -- may run under (COMMENT ON COLUMN below).
    claimed_revision  docket.job_revision,
    revisions         docket.job_pin,
    -- What the requested output is made in and where it goes, beside
    -- requested_output (the asset); a kind or a root needs an asset.
    requested_kind    docket.job_output_kind,
    target_root       docket.job_target_root,
    -- Time never runs backwards in a job's record. These two stay CHECKs, so
    -- they hold even for a writer that disables the triggers. The rules that
    -- tie a job's state to its other columns (jobs_attempts_range,
    -- jobs_claimed_holds_lease, jobs_terminal_finished, ...) are checked by
    -- the statement triggers, set-based, in the pass they already make over
    -- the rows a statement wrote (docket.job_row_rule): Postgres reads a
    -- table's CHECKs from their stored text and plans them again in every
    -- INSERT and UPDATE statement, about 85 microseconds of server time for
    -- ten, an eighth of a one-job enqueue. A row that breaks one is refused
    -- with the same 23514 under the same constraint name.
    CONSTRAINT jobs_updated_not_before_created CHECK (updated_at >= created_at),
    CONSTRAINT jobs_finished_not_before_created CHECK (finished_at >= created_at)
);

COMMENT ON TABLE docket.jobs IS
    'A unit of work with a lease protocol. State moves only along docket.job_transitions; every move is in docket.job_events.';

COMMENT ON COLUMN docket.jobs.claimed_revision IS
    'The handler revision of the job''s latest claim; NULL when never claimed, or claimed by a claimant naming none.';

COMMENT ON COLUMN docket.jobs.revisions IS
    'The handler revisions the job may run under (docket.job_pin); NULL: any.';

-- Idempotency: one job per (project, kind, key), live or finished.
CREATE UNIQUE INDEX jobs_idempotency_key ON docket.jobs (project, kind, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The claim path: the next due job of a project's queue.
CREATE INDEX jobs_claim_idx ON docket.jobs (project, queue, priority, available_at, id)
    WHERE state = 'queued';

-- Leases by expiry: the expiry sweep.
CREATE INDEX jobs_lease_expiry_idx ON docket.jobs (lease_expires_at, id)
    WHERE state = 'claimed';

-- The takeover of expired claims by a claim of one project's queue: only
-- repeatable jobs with attempts left are ever taken over.
CREATE INDEX jobs_takeover_idx ON docket.jobs (project, queue, lease_expires_at, id)
    WHERE state = 'claimed' AND repeatable AND attempts < max_attempts;

-- The uncertain and dead jobs operators look at.
CREATE INDEX jobs_uncertain_idx ON docket.jobs (project, updated_at, id) WHERE state = 'uncertain';

CREATE INDEX jobs_dead_idx ON docket.jobs (project, finished_at, id) WHERE state = 'dead';

-- The pinned jobs operators look at (docket.jobs_unrunnable).
CREATE INDEX jobs_pinned_idx ON docket.jobs (id) WHERE revisions IS NOT NULL AND state IN ('queued', 'uncertain');

-- Listing by lane and by case. No index but the primary key covers every
-- job: a claim and a completion change indexed columns (the state is in the
-- predicates of the partial indexes), so neither update is HOT, and each
-- writes an entry in every index whose predicate the new row satisfies. An
-- index on (project, id) would be written by every transition of every job
-- (about 15 % of a burn-down's throughput and 170 bytes of WAL a job) for
-- one listing, of a project's jobs newest first, which walks the primary key
-- from the newest job back instead. A database where a project with few jobs
-- is listed among many others' can add it (docs/operators.md, "Listing a
-- small project"): nothing in docket names it.
CREATE INDEX jobs_lane_idx ON docket.jobs (lane_id, id) WHERE lane_id IS NOT NULL;

CREATE INDEX jobs_case_idx ON docket.jobs (case_id, id) WHERE case_id IS NOT NULL;

-- Events --------------------------------------------------------------------

-- One row per transition, chained: hash = sha256(prev_hash || canonical event),
-- with prev_hash of the first event 32 zero bytes. See docket.job_event_hash.
CREATE TABLE docket.job_events (
    -- Checked set-based by job_events_check rather than by a foreign key:
    -- jobs are never deleted.
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
);

COMMENT ON TABLE docket.job_events IS
    'Append-only, hash-chained history of every job transition. docket.job_verify(id) checks a job''s chain.';

COMMENT ON COLUMN docket.job_events.revision IS
    'The handler revision of the claim the event made or ended; NULL for other events and claimants naming none.';

-- Decoders ------------------------------------------------------------------

-- The payload schemas each deployment can decode, as its workers register
-- them. A queued job whose (kind, payload_schema) is here for no deployment is
-- listed by docket.jobs_undecodable.
CREATE TABLE docket.job_decoders (
    kind           text NOT NULL CONSTRAINT job_decoders_kind_valid CHECK (docket.valid_job_kind(kind)),
    payload_schema integer NOT NULL CONSTRAINT job_decoders_schema_positive CHECK (payload_schema >= 1),
    deployment     text NOT NULL CONSTRAINT job_decoders_deployment_valid CHECK (deployment ~ '^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$'),
    registered_by  text NOT NULL,
    registered_at  timestamptz NOT NULL,
    revision       docket.job_revision,
    PRIMARY KEY (kind, payload_schema, deployment)
);

COMMENT ON COLUMN docket.job_decoders.revision IS
    'The handler revision the deployment runs for the kind; NULL when it names none.';

-- Traces ----------------------------------------------------------------------

-- Per job, the W3C trace context of the span that enqueued it, so the span
-- that runs it, in another transaction and perhaps another process, days
-- later, can link to it. A side table, not a column of docket.jobs: a job
-- enqueued without tracing has no row and costs nothing. A row is written
-- once, by job_trace_put, in the transaction that created the job, and never
-- changed; it leaves with its job (a prune's delete cascades to it).
CREATE TABLE docket.job_traces (
    job_id      bigint PRIMARY KEY REFERENCES docket.jobs (id) ON DELETE CASCADE,
    -- version 00, a trace id and a span id neither all zeros, flags: see
    -- https://www.w3.org/TR/trace-context/#traceparent-header
    traceparent text NOT NULL CONSTRAINT job_traces_traceparent_valid CHECK (
        traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
        AND substr(traceparent, 4, 32) <> repeat('0', 32)
        AND substr(traceparent, 37, 16) <> repeat('0', 16)),
    -- At most 32 list members (W3C); 512 characters is what the
    -- specification asks every vendor to accept.
    tracestate  text CONSTRAINT job_traces_tracestate_bounded CHECK (
        length(tracestate) BETWEEN 1 AND 512 AND tracestate !~ '[[:cntrl:]]')
);

COMMENT ON TABLE docket.job_traces IS
    'The trace context of the span that enqueued each traced job (W3C traceparent, tracestate), for the span that runs it to link to. Written once, in the job''s own transaction, by docket.job_trace_put.';

-- Completion records -----------------------------------------------------------

-- Per succeeded job that requested an output, what its worker produced
-- (asset, kind, root) and the parameters and inputs it actually used, who
-- recorded it, when, and under which claim. Written by
-- job_completion_record in the completion's transaction, before the
-- completion itself, by the holder of the job's live claim, and never
-- changed; it leaves with its job (a prune's delete cascades to it). The
-- job's requested parameters are never copied onto it.
CREATE TABLE docket.job_completions (
    job_id       bigint PRIMARY KEY REFERENCES docket.jobs (id) ON DELETE CASCADE,
    output_asset docket.job_output NOT NULL,
    output_kind  docket.job_output_kind NOT NULL,
    -- The job's target root, when it has one: a record names no other.
    output_root  docket.job_target_root,
    -- What the worker used, as it says: NULL params when it names none.
    params_used  docket.job_params,
    inputs_used  docket.job_inputs NOT NULL DEFAULT '{}',
    recorded_by  docket.principal NOT NULL,
    recorded_at  timestamptz NOT NULL,
    -- The claim the record was made under, which completed the job.
    claim_token  uuid NOT NULL
);

COMMENT ON TABLE docket.job_completions IS
    'What the worker that completed each job actually produced and used: output asset, kind and root, its parameters and inputs. Written once, by the claim''s holder in the completion''s transaction (docket.job_completion_record).';

-- "Which job produced output X": one index entry per record.
CREATE INDEX job_completions_output_idx ON docket.job_completions (output_asset, output_kind);

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.job_completions, docket.job_traces, docket.job_decoders, docket.job_events, docket.jobs;
DELETE FROM docket.machine_transitions WHERE machine = 'job';
DELETE FROM docket.machine_states WHERE machine = 'job';
DELETE FROM docket.machines WHERE name = 'job';
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name IN ('job.create', 'job.claim', 'job.cancel', 'job.reconcile', 'job.view', 'job.pin')
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
DROP DOMAIN docket.job_target_root, docket.job_output_kind, docket.job_pin, docket.job_revision, docket.sha256,
    docket.job_event_text, docket.job_event_seq, docket.job_diagnostic, docket.job_backoff_jitter,
    docket.job_backoff_base, docket.job_lease, docket.job_max_attempts, docket.job_payload_schema,
    docket.job_priority, docket.job_state, docket.job_key, docket.job_output, docket.job_inputs,
    docket.job_params, docket.job_json, docket.job_queue, docket.job_kind;
DROP FUNCTION docket.valid_target_root(text);
DROP FUNCTION docket.valid_output_kind(text);
DROP FUNCTION docket.job_pin_bounded(text[]);
DROP FUNCTION docket.valid_job_revision(text);
DROP FUNCTION docket.job_inputs_bounded(text[]);
DROP FUNCTION docket.valid_queue(text);
DROP FUNCTION docket.valid_job_kind(text);
