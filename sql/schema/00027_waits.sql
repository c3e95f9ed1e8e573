-- Messages, waits and timers: what a case waits for, the inbound messages
-- that satisfy it, and the instants it is woken at; the message and wait
-- machines. Their rules are sql/definitions/waits.sql's.

-- +goose Up


-- Names and bounds ------------------------------------------------------------

-- A producer: who sent a message, in its own words, e.g. supplier:4711 or
-- edi-gateway. 1-128 characters, no control characters, no leading or
-- trailing space.
CREATE FUNCTION docket.valid_message_producer(p_producer text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN length(p_producer) BETWEEN 1 AND 128 AND p_producer !~ '[[:cntrl:]]' AND p_producer = btrim(p_producer);

-- A key set as stored: 1-32 distinct 'namespace:value' strings in byte order
-- (the namespace holds no ':', so the first ':' splits them).
-- +goose StatementBegin
CREATE FUNCTION docket.valid_wait_keys(p_keys text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT cardinality(p_keys) BETWEEN 1 AND 32
       AND array_ndims(p_keys) = 1
       AND p_keys = ARRAY(SELECT d.k FROM (SELECT DISTINCT k FROM unnest(p_keys) k) d ORDER BY d.k COLLATE "C")
       AND NOT EXISTS (
           SELECT 1 FROM unnest(p_keys) k
           WHERE k IS NULL OR strpos(k, ':') = 0
              OR NOT docket.valid_case_key_namespace(split_part(k, ':', 1))
              OR NOT docket.valid_case_key_value(substr(k, strpos(k, ':') + 1)));
END;
-- +goose StatementEnd

-- The most JSON a message may carry: with its envelope it must fit the 64 KiB
-- of a job's params, where the continuation that consumes it finds it.
CREATE DOMAIN docket.message_payload AS jsonb
    CONSTRAINT message_payload_size CHECK (docket.json_size(VALUE) <= 61440);

-- States and transitions --------------------------------------------------------

-- The machines of this file change only here (docket.refuse_machine_change).
SET LOCAL docket.migrating = 'on';

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('message', 'docket.messages.status', 'an inbound message: buffered until consumed or dead-lettered');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'message', * FROM (VALUES
    ('buffered', true, false, 'stored; no wait has claimed it yet'),
    ('consumed', false, true, 'a wait claimed it and its continuation was enqueued'),
    ('dead_lettered', false, true, 'no wait will claim it: unclaimed past the horizon, or its addressee closed')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'message', from_state, to_state, NULL FROM (VALUES
    ('buffered', 'consumed'),
    ('buffered', 'dead_lettered')) v (from_state, to_state);

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('wait', 'docket.waits.status', 'a durable wait: waiting until satisfied, expired or withdrawn');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'wait', * FROM (VALUES
    ('waiting', true, false, 'registered; no message has satisfied it and its deadline has not been swept'),
    ('satisfied', false, true, 'a message satisfied it and its arrival continuation was enqueued'),
    ('expired', false, true, 'its deadline passed first; its timeout continuation (if any) was enqueued'),
    ('withdrawn', false, true, 'no longer waited for: withdrawn, or its case closed')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'wait', from_state, to_state, NULL FROM (VALUES
    ('waiting', 'satisfied'),
    ('waiting', 'expired'),
    ('waiting', 'withdrawn')) v (from_state, to_state);

-- Messages ---------------------------------------------------------------------

CREATE TABLE docket.messages (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project            text NOT NULL REFERENCES docket.projects (name),
    producer           text NOT NULL CONSTRAINT messages_producer_valid CHECK (docket.valid_message_producer(producer)),
    -- The producer's own id for the message.
    message_id         text NOT NULL CONSTRAINT messages_message_id_valid CHECK (docket.valid_case_key_value(message_id)),
    keys               text[] NOT NULL CONSTRAINT messages_keys_valid CHECK (docket.valid_wait_keys(keys)),
    payload            docket.message_payload NOT NULL,
    -- The one case it was sent to, by name; NULL: any wait on its keys.
    addressee          bigint,
    status             text NOT NULL DEFAULT 'buffered',
    arrived_at         timestamptz NOT NULL CONSTRAINT messages_arrived_at_finite CHECK (isfinite(arrived_at)),
    delivered_by       docket.principal NOT NULL,
    -- The wait that consumed it.
    consumed_by        bigint,
    -- When it was consumed or dead-lettered, and why it was dead-lettered.
    settled_at         timestamptz,
    dead_letter_reason text CONSTRAINT messages_dead_letter_reason_bounded CHECK (length(dead_letter_reason) BETWEEN 1 AND 500),
    CONSTRAINT messages_producer_message_key UNIQUE (project, producer, message_id),
    CONSTRAINT messages_addressee_fkey FOREIGN KEY (addressee, project) REFERENCES docket.cases (id, project),
    CONSTRAINT messages_consumed_iff_wait CHECK ((status = 'consumed') = (consumed_by IS NOT NULL)),
    CONSTRAINT messages_dead_iff_reason CHECK ((status = 'dead_lettered') = (dead_letter_reason IS NOT NULL)),
    CONSTRAINT messages_settled_iff_not_buffered CHECK ((status = 'buffered') = (settled_at IS NULL)),
    CONSTRAINT messages_settled_after_arrival CHECK (settled_at >= arrived_at)
);

COMMENT ON TABLE docket.messages IS
    'Inbound messages, stored before anything looks for their waiter; status moves along docket.message_transitions.';

-- The dead-letter sweep's range scan: buffered messages by arrival.
CREATE INDEX messages_buffered_idx ON docket.messages (arrived_at, id) WHERE status = 'buffered';

-- A wait looking in the buffer: buffered messages filed under all its keys.
-- fastupdate off: a lookup never walks a pending list of recent arrivals.
CREATE INDEX messages_buffered_keys_idx ON docket.messages USING gin (keys) WITH (fastupdate = off)
    WHERE status = 'buffered';

CREATE INDEX messages_addressee_idx ON docket.messages (addressee, id) WHERE addressee IS NOT NULL;

CREATE UNIQUE INDEX messages_consumed_by_key ON docket.messages (consumed_by) WHERE consumed_by IS NOT NULL;

CREATE INDEX messages_dead_idx ON docket.messages (project, id) WHERE status = 'dead_lettered';

-- Waits ------------------------------------------------------------------------

CREATE TABLE docket.waits (
    id                        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    case_id                   bigint NOT NULL,
    -- Copied from the case by waits_guard; never changes.
    project                   text NOT NULL,
    name                      text NOT NULL CONSTRAINT waits_name_valid CHECK (docket.valid_case_key_namespace(name)),
    keys                      text[] NOT NULL CONSTRAINT waits_keys_valid CHECK (docket.valid_wait_keys(keys)),
    deadline                  timestamptz NOT NULL CONSTRAINT waits_deadline_finite CHECK (isfinite(deadline)),
    -- The job a message's arrival enqueues: required.
    on_arrival_kind           docket.job_kind NOT NULL,
    on_arrival_queue          docket.job_queue NOT NULL,
    on_arrival_payload        docket.job_json NOT NULL,
    on_arrival_payload_schema integer NOT NULL CONSTRAINT waits_on_arrival_payload_schema_positive CHECK (on_arrival_payload_schema >= 1),
    on_arrival_max_attempts   integer NOT NULL CONSTRAINT waits_on_arrival_max_attempts_range CHECK (on_arrival_max_attempts BETWEEN 1 AND 100),
    -- The job the deadline enqueues: all of it or none.
    on_timeout_kind           docket.job_kind,
    on_timeout_queue          docket.job_queue,
    on_timeout_payload        docket.job_json,
    on_timeout_payload_schema integer CONSTRAINT waits_on_timeout_payload_schema_positive CHECK (on_timeout_payload_schema >= 1),
    on_timeout_max_attempts   integer CONSTRAINT waits_on_timeout_max_attempts_range CHECK (on_timeout_max_attempts BETWEEN 1 AND 100),
    status                    text NOT NULL DEFAULT 'waiting',
    -- The message that satisfied it, and the job its end enqueued.
    satisfied_by              bigint REFERENCES docket.messages (id),
    continuation_job_id       bigint REFERENCES docket.jobs (id),
    created_by                docket.principal NOT NULL,
    created_at                timestamptz NOT NULL,
    settled_at                timestamptz,
    settled_by                docket.principal,
    CONSTRAINT waits_case_fkey FOREIGN KEY (case_id, project) REFERENCES docket.cases (id, project),
    CONSTRAINT waits_deadline_after_creation CHECK (deadline > created_at),
    CONSTRAINT waits_deadline_bounded CHECK (deadline <= created_at + interval '3650 days'),
    CONSTRAINT waits_on_timeout_whole CHECK (
        (on_timeout_kind IS NULL) = (on_timeout_queue IS NULL)
        AND (on_timeout_kind IS NULL) = (on_timeout_payload IS NULL)
        AND (on_timeout_kind IS NULL) = (on_timeout_payload_schema IS NULL)
        AND (on_timeout_kind IS NULL) = (on_timeout_max_attempts IS NULL)),
    CONSTRAINT waits_satisfied_iff_message CHECK ((status = 'satisfied') = (satisfied_by IS NOT NULL)),
    CONSTRAINT waits_continuation_only_settled CHECK (continuation_job_id IS NULL OR status IN ('satisfied', 'expired')),
    CONSTRAINT waits_settled_iff_not_waiting CHECK (
        (status = 'waiting') = (settled_at IS NULL) AND (settled_at IS NULL) = (settled_by IS NULL))
);

COMMENT ON TABLE docket.waits IS
    'What a case waits for: a message on its keys before a deadline. Status moves along docket.wait_transitions.';

-- Messages and waits name each other; the reference from messages waits for
-- the waits table.
ALTER TABLE docket.messages
    ADD CONSTRAINT messages_consumed_by_fkey FOREIGN KEY (consumed_by) REFERENCES docket.waits (id);

-- The expiry sweep's range scan: waiting waits by deadline.
CREATE INDEX waits_deadline_idx ON docket.waits (deadline, id) WHERE status = 'waiting';

-- A delivery looking for its waiter: waiting waits whose keys its keys cover.
CREATE INDEX waits_waiting_keys_idx ON docket.waits USING gin (keys) WITH (fastupdate = off)
    WHERE status = 'waiting';

CREATE INDEX waits_case_idx ON docket.waits (case_id, id);

-- A case waits for one thing of a name at a time.
CREATE UNIQUE INDEX waits_waiting_name ON docket.waits (case_id, name) WHERE status = 'waiting';

CREATE UNIQUE INDEX waits_satisfied_by_key ON docket.waits (satisfied_by) WHERE satisfied_by IS NOT NULL;

-- Timers -----------------------------------------------------------------------

-- A timer is a job of the case, available at the wake instant. This row
-- records the instant it was set for, which is the wake it reports however
-- late it runs.
CREATE TABLE docket.timers (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    case_id    bigint NOT NULL,
    project    text NOT NULL,
    name       text NOT NULL CONSTRAINT timers_name_valid CHECK (docket.valid_case_key_namespace(name)),
    wake_at    timestamptz NOT NULL CONSTRAINT timers_wake_at_finite CHECK (isfinite(wake_at)),
    job_id     bigint NOT NULL REFERENCES docket.jobs (id),
    created_by docket.principal NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT timers_case_fkey FOREIGN KEY (case_id, project) REFERENCES docket.cases (id, project),
    CONSTRAINT timers_job_key UNIQUE (job_id),
    -- A timer is its case, name and instant: setting it again is a retry.
    CONSTRAINT timers_case_name_wake_key UNIQUE (case_id, name, wake_at),
    CONSTRAINT timers_wake_at_bounded CHECK (wake_at <= created_at + interval '3650 days')
);

COMMENT ON TABLE docket.timers IS
    'Durable timers: each is a job of its case available at wake_at; the job''s state says whether it fired.';

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.timers, docket.messages, docket.waits;
DELETE FROM docket.machine_transitions WHERE machine IN ('message', 'wait');
DELETE FROM docket.machine_states WHERE machine IN ('message', 'wait');
DELETE FROM docket.machines WHERE name IN ('message', 'wait');
DROP DOMAIN docket.message_payload;
DROP FUNCTION docket.valid_wait_keys(text[]);
DROP FUNCTION docket.valid_message_producer(text);
