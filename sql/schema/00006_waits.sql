-- Durable waits: where an inbound message and the case waiting for it meet,
-- whichever comes first, and what happens when neither comes.
--
--   message   buffered -> consumed | dead_lettered   (docket.message_transitions)
--   wait      waiting  -> satisfied | expired | withdrawn (docket.wait_transitions)
--   timer     a job of the case with available_at at its wake instant
--
-- The invariants live here, for every writer, psql included:
--   * a message is stored before anything looks for its waiter, and is
--     deduplicated on (project, producer, message_id): a producer's retry is
--     the same message, the same id from two producers is two messages;
--   * a message is consumed by at most one wait and a wait satisfied by at
--     most one message: the match locks both rows, and each names the other
--     (messages_consumed_iff_wait, waits_satisfied_iff_message, both unique);
--   * deliveries and waits on one key are decided one at a time: both take a
--     transaction-scoped advisory lock per key (message_lock_keys) before
--     storing and looking, so whichever commits second sees the first --
--     the two meet in the store, not in time;
--   * every wait has a deadline, after the instant it was registered and at
--     most 3650 days (about ten years) ahead (waits_deadline_bounded);
--   * a closed case waits for nothing: closing withdraws its waits,
--     dead-letters the messages addressed to it that it never consumed and
--     cancels its timers that have not fired (cases_settle_waits), and a wait
--     or timer is registered only on an open case, under the case row's lock;
--   * terminal states never change (messages_guard, waits_guard); nothing is
--     deleted;
--   * every change of a case's waits, timers and addressed messages appends a
--     docket.case_events row.
--
-- Matching: a wait names 1-32 keys; a message is filed under 1-32 keys; the
-- message satisfies the wait when it is filed under every key the wait names
-- (and, when addressed to a case, the wait is that case's). Oldest first on
-- both sides. A message that arrives after a wait's deadline does not satisfy
-- it, whether or not the expiry sweep has run.
--
-- Who may do what (explicit grants on the project):
--   message.deliver  deliver messages (with job.create: a delivery may enqueue
--                    the continuation of the wait it satisfies); read messages
--   case.admit       register and withdraw waits, set timers (with
--                    job.create); read waits and messages
--   case.view        read waits and messages
--   case.sweep       expire due waits (with job.create where a wait names a
--                    timeout continuation) and dead-letter unclaimed messages
--
-- Bounds: producer 1-128 characters; message id 1-255; 1-32 keys; payload
-- 60 KiB of JSON (it rides in the continuation job's params, 64 KiB); wait
-- and timer names 1-63; deadlines and wake instants at most 3650 days ahead;
-- dead-letter horizon 1 minute to 366 days; sweep batch 1..10000.

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

-- wait_keys returns the keys (p_namespaces[i], p_values[i]) as stored:
-- 'namespace:value', distinct, in byte order. Refuses malformed keys as
-- case_require_keys does (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.wait_keys(p_namespaces text[], p_values text[]) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM docket.case_require_keys(p_namespaces, p_values);
    RETURN ARRAY(SELECT x.ns || ':' || x.val FROM unnest(p_namespaces, p_values) AS x(ns, val)
                 ORDER BY x.ns || ':' || x.val COLLATE "C");
END
$$;
-- +goose StatementEnd

-- The most JSON a message may carry: with its envelope it must fit the 64 KiB
-- of a job's params, where the continuation that consumes it finds it.
CREATE DOMAIN docket.message_payload AS jsonb
    CONSTRAINT message_payload_size CHECK (docket.json_size(VALUE) <= 61440);

-- Capabilities ---------------------------------------------------------------

INSERT INTO docket.capabilities (name, description) VALUES
    ('message.deliver', 'deliver inbound messages to the project''s waits (with job.create) and read its messages');

UPDATE docket.capabilities
SET description = 'run the project''s deadline sweeps: breach due obligations, expire due waits, dead-letter unclaimed messages (enqueuing their jobs also needs job.create)'
WHERE name = 'case.sweep';

-- States and transitions --------------------------------------------------------

CREATE TABLE docket.message_states (
    state    text PRIMARY KEY,
    initial  boolean NOT NULL,
    terminal boolean NOT NULL,
    meaning  text NOT NULL,
    CONSTRAINT message_states_initial_not_terminal CHECK (NOT (initial AND terminal))
);

INSERT INTO docket.message_states (state, initial, terminal, meaning) VALUES
    ('buffered', true, false, 'stored; no wait has claimed it yet'),
    ('consumed', false, true, 'a wait claimed it and its continuation was enqueued'),
    ('dead_lettered', false, true, 'no wait will claim it: unclaimed past the horizon, or its addressee closed');

CREATE TABLE docket.message_transitions (
    from_state text NOT NULL REFERENCES docket.message_states (state),
    to_state   text NOT NULL REFERENCES docket.message_states (state),
    PRIMARY KEY (from_state, to_state)
);

INSERT INTO docket.message_transitions (from_state, to_state) VALUES
    ('buffered', 'consumed'),
    ('buffered', 'dead_lettered');

CREATE TABLE docket.wait_states (
    state    text PRIMARY KEY,
    initial  boolean NOT NULL,
    terminal boolean NOT NULL,
    meaning  text NOT NULL,
    CONSTRAINT wait_states_initial_not_terminal CHECK (NOT (initial AND terminal))
);

INSERT INTO docket.wait_states (state, initial, terminal, meaning) VALUES
    ('waiting', true, false, 'registered; no message has satisfied it and its deadline has not been swept'),
    ('satisfied', false, true, 'a message satisfied it and its arrival continuation was enqueued'),
    ('expired', false, true, 'its deadline passed first; its timeout continuation (if any) was enqueued'),
    ('withdrawn', false, true, 'no longer waited for: withdrawn, or its case closed');

CREATE TABLE docket.wait_transitions (
    from_state text NOT NULL REFERENCES docket.wait_states (state),
    to_state   text NOT NULL REFERENCES docket.wait_states (state),
    PRIMARY KEY (from_state, to_state)
);

INSERT INTO docket.wait_transitions (from_state, to_state) VALUES
    ('waiting', 'satisfied'),
    ('waiting', 'expired'),
    ('waiting', 'withdrawn');

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
    status             text NOT NULL DEFAULT 'buffered' REFERENCES docket.message_states (state),
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
    status                    text NOT NULL DEFAULT 'waiting' REFERENCES docket.wait_states (state),
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


-- Guards -------------------------------------------------------------------------

-- messages_guard: a message is born buffered and unsettled (DK001); nothing
-- but its status, consumer, settlement and reason ever changes (DK015); its
-- status moves only along docket.message_transitions, and a terminal message
-- never changes at all (DK001). An UPDATE that changes nothing passes.
-- +goose StatementBegin
CREATE FUNCTION docket.messages_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status IS DISTINCT FROM 'buffered' OR NEW.consumed_by IS NOT NULL OR NEW.settled_at IS NOT NULL
           OR NEW.dead_letter_reason IS NOT NULL THEN
            RAISE EXCEPTION 'message %/%: a message is stored buffered, not %', NEW.producer, NEW.message_id, NEW.status
                USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    IF (NEW.id, NEW.project, NEW.producer, NEW.message_id, NEW.keys, NEW.payload, NEW.addressee,
        NEW.arrived_at, NEW.delivered_by)
       IS DISTINCT FROM
       (OLD.id, OLD.project, OLD.producer, OLD.message_id, OLD.keys, OLD.payload, OLD.addressee,
        OLD.arrived_at, OLD.delivered_by) THEN
        RAISE EXCEPTION 'message %: only its status, consumer, settlement and dead-letter reason change', OLD.id
            USING ERRCODE = 'DK015';
    END IF;
    IF (SELECT terminal FROM docket.message_states WHERE state = OLD.status) THEN
        RAISE EXCEPTION 'message % is %, a terminal state: it never changes', OLD.id, OLD.status
            USING ERRCODE = 'DK001';
    END IF;
    IF NEW.status <> OLD.status AND NOT EXISTS (
        SELECT 1 FROM docket.message_transitions WHERE from_state = OLD.status AND to_state = NEW.status) THEN
        RAISE EXCEPTION 'message %: % -> % is not in docket.message_transitions', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'DK001';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER messages_guard
    BEFORE INSERT OR UPDATE ON docket.messages
    FOR EACH ROW EXECUTE FUNCTION docket.messages_guard();

CREATE TRIGGER messages_refuse_delete
    BEFORE DELETE ON docket.messages
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('messages are kept: a message no wait will claim is dead-lettered');

-- waits_guard: a wait is born waiting, unsettled, on an open case whose row
-- it locks (FOR SHARE, so a close waits for it or it sees the close: DK005),
-- with the case's project (DK015); nothing but its status, its message, its
-- continuation job and settlement ever changes (DK015); its status moves only
-- along docket.wait_transitions, and a terminal wait never changes (DK001);
-- a wait is satisfied only by a message that matches it (DK001).
-- +goose StatementBegin
CREATE FUNCTION docket.waits_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c docket.cases;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT * INTO c FROM docket.cases WHERE id = NEW.case_id FOR SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'wait %: case % does not exist', NEW.name, coalesce(NEW.case_id::text, 'NULL')
                USING ERRCODE = '23503', CONSTRAINT = 'waits_case_fkey', TABLE = 'waits', SCHEMA = 'docket';
        END IF;
        IF NEW.project IS DISTINCT FROM c.project AND NEW.project IS NOT NULL THEN
            RAISE EXCEPTION 'wait %: its project is its case''s, %, not %', NEW.name, c.project, NEW.project
                USING ERRCODE = 'DK015';
        END IF;
        NEW.project := c.project;
        IF c.status <> 'open' THEN
            RAISE EXCEPTION 'case % is closed: it cannot wait for %', c.id, NEW.name USING ERRCODE = 'DK005';
        END IF;
        IF NEW.status IS DISTINCT FROM 'waiting' OR NEW.satisfied_by IS NOT NULL OR NEW.continuation_job_id IS NOT NULL
           OR NEW.settled_at IS NOT NULL THEN
            RAISE EXCEPTION 'wait %: a wait is registered waiting, not %', NEW.name, NEW.status USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    IF (NEW.id, NEW.case_id, NEW.project, NEW.name, NEW.keys, NEW.deadline,
        NEW.on_arrival_kind, NEW.on_arrival_queue, NEW.on_arrival_payload, NEW.on_arrival_payload_schema,
        NEW.on_arrival_max_attempts, NEW.on_timeout_kind, NEW.on_timeout_queue, NEW.on_timeout_payload,
        NEW.on_timeout_payload_schema, NEW.on_timeout_max_attempts, NEW.created_by, NEW.created_at)
       IS DISTINCT FROM
       (OLD.id, OLD.case_id, OLD.project, OLD.name, OLD.keys, OLD.deadline,
        OLD.on_arrival_kind, OLD.on_arrival_queue, OLD.on_arrival_payload, OLD.on_arrival_payload_schema,
        OLD.on_arrival_max_attempts, OLD.on_timeout_kind, OLD.on_timeout_queue, OLD.on_timeout_payload,
        OLD.on_timeout_payload_schema, OLD.on_timeout_max_attempts, OLD.created_by, OLD.created_at) THEN
        RAISE EXCEPTION 'wait %: only its status, message, continuation job and settlement change', OLD.id
            USING ERRCODE = 'DK015';
    END IF;
    IF (SELECT terminal FROM docket.wait_states WHERE state = OLD.status) THEN
        RAISE EXCEPTION 'wait % is %, a terminal state: it never changes', OLD.id, OLD.status
            USING ERRCODE = 'DK001';
    END IF;
    IF NEW.status <> OLD.status AND NOT EXISTS (
        SELECT 1 FROM docket.wait_transitions WHERE from_state = OLD.status AND to_state = NEW.status) THEN
        RAISE EXCEPTION 'wait %: % -> % is not in docket.wait_transitions', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'DK001';
    END IF;
    -- The matching rule, for every writer: the message is the project's,
    -- filed under every key the wait names, arrived before its deadline, and
    -- addressed to no case or to this one.
    IF NEW.status = 'satisfied' AND NEW.satisfied_by IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM docket.messages m
        WHERE m.id = NEW.satisfied_by AND m.project = NEW.project AND m.keys @> NEW.keys
          AND m.arrived_at < NEW.deadline AND (m.addressee IS NULL OR m.addressee = NEW.case_id)) THEN
        RAISE EXCEPTION 'wait %: message % does not satisfy it (keys, project, deadline or addressee)', OLD.id, NEW.satisfied_by
            USING ERRCODE = 'DK001';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER waits_guard
    BEFORE INSERT OR UPDATE ON docket.waits
    FOR EACH ROW EXECUTE FUNCTION docket.waits_guard();

CREATE TRIGGER waits_refuse_delete
    BEFORE DELETE ON docket.waits
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('waits are kept: withdraw one instead');

-- timers_guard: a timer is set on an open case whose row it locks (FOR SHARE),
-- with the case's project, and never changes: its job's state says whether
-- it fired.
-- +goose StatementBegin
CREATE FUNCTION docket.timers_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c docket.cases;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'timer %: a timer never changes; its job''s state says whether it fired', OLD.id
            USING ERRCODE = 'DK015';
    END IF;
    SELECT * INTO c FROM docket.cases WHERE id = NEW.case_id FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'timer %: case % does not exist', NEW.name, coalesce(NEW.case_id::text, 'NULL')
            USING ERRCODE = '23503', CONSTRAINT = 'timers_case_fkey', TABLE = 'timers', SCHEMA = 'docket';
    END IF;
    IF c.status <> 'open' THEN
        RAISE EXCEPTION 'case % is closed: it cannot set timer %', c.id, NEW.name USING ERRCODE = 'DK005';
    END IF;
    NEW.project := c.project;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER timers_guard
    BEFORE INSERT OR UPDATE ON docket.timers
    FOR EACH ROW EXECUTE FUNCTION docket.timers_guard();

CREATE TRIGGER timers_refuse_delete
    BEFORE DELETE ON docket.timers
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('timers are kept: closing the case cancels the ones not fired');

-- Events ------------------------------------------------------------------------
-- New kinds of case event:
--   wait      a wait was registered (to: waiting) or ended (from, to), with
--             the message that satisfied it and the job its end enqueued
--   message   a message addressed to the case was dead-lettered (detail:
--             the message and the reason)
--   timer     a timer was set (detail: name, wake instant, job) or, the case
--             closing, cancelled (from: set, to: cancelled)

ALTER TABLE docket.case_events DROP CONSTRAINT case_events_what_known;
ALTER TABLE docket.case_events ADD CONSTRAINT case_events_what_known CHECK (
    what IN ('created', 'status', 'state', 'key_claimed', 'key_released', 'obligation', 'late_meet',
             'wait', 'message', 'timer'));

-- waits_record appends a wait event for a registration and for its end.
-- +goose StatementBegin
CREATE FUNCTION docket.waits_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.status = OLD.status THEN
        RETURN NULL;
    END IF;
    INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at, detail)
    VALUES (NEW.case_id, 'wait', CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status,
            docket.context_actor(), docket.context_now(),
            jsonb_strip_nulls(jsonb_build_object(
                'wait_id', NEW.id, 'name', NEW.name, 'deadline', NEW.deadline,
                'keys', CASE WHEN TG_OP = 'INSERT' THEN to_jsonb(NEW.keys) END,
                'message_id', NEW.satisfied_by, 'job_id', NEW.continuation_job_id)));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER waits_record
    AFTER INSERT OR UPDATE ON docket.waits
    FOR EACH ROW EXECUTE FUNCTION docket.waits_record();

-- messages_record appends a message event to the addressee's history when a
-- message addressed to it is dead-lettered.
-- +goose StatementBegin
CREATE FUNCTION docket.messages_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.addressee IS NULL OR NEW.status = OLD.status OR NEW.status <> 'dead_lettered' THEN
        RETURN NULL;
    END IF;
    INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at, detail)
    VALUES (NEW.addressee, 'message', OLD.status, NEW.status, docket.context_actor(), docket.context_now(),
            jsonb_build_object('message_id', NEW.id, 'producer', NEW.producer,
                               'producer_message_id', NEW.message_id, 'reason', NEW.dead_letter_reason));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER messages_record
    AFTER UPDATE ON docket.messages
    FOR EACH ROW EXECUTE FUNCTION docket.messages_record();

-- timers_record appends a timer event when a timer is set.
-- +goose StatementBegin
CREATE FUNCTION docket.timers_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO docket.case_events (case_id, what, to_state, actor, at, detail)
    VALUES (NEW.case_id, 'timer', 'set', docket.context_actor(), docket.context_now(),
            jsonb_build_object('timer_id', NEW.id, 'name', NEW.name, 'wake_at', NEW.wake_at, 'job_id', NEW.job_id));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER timers_record
    AFTER INSERT ON docket.timers
    FOR EACH ROW EXECUTE FUNCTION docket.timers_record();

-- Closing a case -------------------------------------------------------------------

-- cases_settle_waits runs when a case closes, by any route: it dead-letters
-- the buffered messages addressed to the case (they were its alone), then
-- withdraws its waiting waits, then cancels its timers that have not fired
-- (queued jobs). Locks in that order -- messages, then waits -- which is the
-- order a delivery takes them in, after the case row the close holds.
-- +goose StatementBegin
CREATE FUNCTION docket.cases_settle_waits() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := docket.context_now();
    v_actor text := docket.context_actor();
    t record;
BEGIN
    UPDATE docket.messages
    SET status = 'dead_lettered', settled_at = greatest(arrived_at, v_now),
        dead_letter_reason = format('addressed to case %s, which closed without consuming it', NEW.id)
    WHERE addressee = NEW.id AND status = 'buffered';
    UPDATE docket.waits
    SET status = 'withdrawn', settled_at = greatest(created_at, v_now), settled_by = v_actor
    WHERE case_id = NEW.id AND status = 'waiting';
    FOR t IN
        UPDATE docket.jobs j
        SET state = 'cancelled', diagnostic = format('cancelled: case %s closed before the timer fired', NEW.id),
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            finished_at = greatest(j.updated_at, v_now), updated_at = greatest(j.updated_at, v_now)
        FROM docket.timers tm
        WHERE tm.case_id = NEW.id AND j.id = tm.job_id AND j.state = 'queued'
        RETURNING tm.id, tm.name, tm.wake_at, tm.job_id
    LOOP
        INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at, detail)
        VALUES (NEW.id, 'timer', 'set', 'cancelled', v_actor, v_now,
                jsonb_build_object('timer_id', t.id, 'name', t.name, 'wake_at', t.wake_at, 'job_id', t.job_id));
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER cases_settle_waits
    AFTER UPDATE OF status ON docket.cases
    FOR EACH ROW WHEN (OLD.status = 'open' AND NEW.status = 'closed')
    EXECUTE FUNCTION docket.cases_settle_waits();

-- Reading -----------------------------------------------------------------------

-- message_visible reports whether p_principal may read the messages of
-- p_project: it holds message.deliver, case.admit or case.view there.
CREATE FUNCTION docket.message_visible(p_principal text, p_project text) RETURNS boolean
LANGUAGE sql STABLE
RETURN EXISTS (
    SELECT 1 FROM docket.grants
    WHERE project = p_project AND principal = p_principal
      AND capability IN ('message.deliver', 'case.admit', 'case.view')
);

-- Operator views ------------------------------------------------------------------
-- Storage never reads the clock: the views carry the instants and the reader
-- brings theirs, e.g. the age of each dead letter now:
--     SELECT producer, message_id, keys, reason, '2026-11-29 10:00Z' - arrived_at AS age
--     FROM docket.messages_dead;

CREATE VIEW docket.messages_dead AS
SELECT m.id, m.project, m.producer, m.message_id, m.keys, m.addressee, m.dead_letter_reason AS reason,
       m.arrived_at, m.settled_at AS dead_lettered_at, m.settled_at - m.arrived_at AS buffered_for
FROM docket.messages m
WHERE m.status = 'dead_lettered'
ORDER BY m.settled_at DESC, m.id DESC;

COMMENT ON VIEW docket.messages_dead IS
    'Dead letters, newest first: who sent each and the keys it was filed under, never the payload (it is the counterparty''s). A non-empty list means a correlation key is wrong somewhere.';

CREATE VIEW docket.messages_buffered AS
SELECT m.id, m.project, m.producer, m.message_id, m.keys, m.addressee, m.arrived_at
FROM docket.messages m
WHERE m.status = 'buffered'
ORDER BY m.arrived_at, m.id;

COMMENT ON VIEW docket.messages_buffered IS
    'Messages no wait has claimed yet, oldest first; the dead-letter sweep moves those older than its horizon.';

CREATE VIEW docket.waits_waiting AS
SELECT w.id, w.case_id, w.project, c.kind AS case_kind, w.name, w.keys, w.deadline,
       w.on_arrival_kind, w.on_timeout_kind, w.created_by, w.created_at
FROM docket.waits w
JOIN docket.cases c ON c.id = w.case_id
WHERE w.status = 'waiting'
ORDER BY w.deadline, w.id;

COMMENT ON VIEW docket.waits_waiting IS
    'Waits no message has satisfied, soonest deadline first. Due at instant T: WHERE deadline <= T; the expiry sweep moves them.';

-- Protocol ------------------------------------------------------------------------

-- message_lock_keys takes, for each key of p_keys in p_project, a
-- transaction-scoped advisory lock (class 1684764529, 'dkwq'), in the order
-- of the locks' numbers, so two callers with overlapping keys never
-- deadlock. Deliveries and waits take them before they store and look: of
-- two on a common key, the second sees what the first committed.
-- +goose StatementBegin
CREATE FUNCTION docket.message_lock_keys(p_project text, p_keys text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    h integer;
BEGIN
    FOR h IN SELECT DISTINCT hashtext(p_project || '/' || k) FROM unnest(p_keys) k ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(1684764529, h);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- wait_continue ends wait w (locked by the caller, waiting) as p_status --
-- satisfied by message m (locked, buffered), or expired -- on behalf of
-- p_actor at p_now, and enqueues the continuation it names in the case's
-- project, naming the case, under idempotency key wait:ID:STATUS. The
-- continuation's params say why it runs:
--   {"wait_id", "wait": name, "outcome": "satisfied", "message": {"id",
--    "producer", "message_id", "keys", "arrived_at", "payload"}}
--   {"wait_id", "wait": name, "outcome": "expired", "deadline"}
-- A satisfying message is marked consumed by the wait. Returns the wait.
-- Refuses as job_enqueue_one (DK009 without job.create).
-- +goose StatementBegin
CREATE FUNCTION docket.wait_continue(w docket.waits, m docket.messages, p_status text, p_actor text, p_now timestamptz)
RETURNS docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    v_job bigint;
    v docket.waits;
BEGIN
    IF p_status = 'satisfied' THEN
        SELECT e.id INTO v_job
        FROM docket.job_enqueue_one(
            w.project, p_actor, p_now, w.on_arrival_kind, w.on_arrival_queue, 1::smallint, w.on_arrival_payload,
            w.on_arrival_payload_schema, 'wait:' || w.id || ':satisfied', NULL, w.on_arrival_max_attempts,
            false, false, interval '5 minutes', interval '1 second', interval '10 minutes', 0.2,
            jsonb_build_object('wait_id', w.id, 'wait', w.name, 'outcome', 'satisfied',
                'message', jsonb_build_object('id', m.id, 'producer', m.producer, 'message_id', m.message_id,
                                              'keys', to_jsonb(m.keys), 'arrived_at', m.arrived_at,
                                              'payload', m.payload)),
            '{}', '', 0, w.case_id, '') e;
        UPDATE docket.messages
        SET status = 'consumed', consumed_by = w.id, settled_at = greatest(arrived_at, p_now)
        WHERE id = m.id;
    ELSIF w.on_timeout_kind IS NOT NULL THEN
        SELECT e.id INTO v_job
        FROM docket.job_enqueue_one(
            w.project, p_actor, p_now, w.on_timeout_kind, w.on_timeout_queue, 1::smallint, w.on_timeout_payload,
            w.on_timeout_payload_schema, 'wait:' || w.id || ':expired', NULL, w.on_timeout_max_attempts,
            false, false, interval '5 minutes', interval '1 second', interval '10 minutes', 0.2,
            jsonb_build_object('wait_id', w.id, 'wait', w.name, 'outcome', 'expired', 'deadline', w.deadline),
            '{}', '', 0, w.case_id, '') e;
    END IF;
    UPDATE docket.waits
    SET status = p_status, satisfied_by = m.id, continuation_job_id = v_job,
        settled_at = greatest(created_at, p_now), settled_by = p_actor
    WHERE id = w.id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- message_offer offers buffered message p_id (which the caller holds locked,
-- and whose keys it holds the locks of) to the oldest waiting wait its keys
-- cover whose deadline is after p_now -- of its addressee only, when it has
-- one -- and, finding one, consumes it and enqueues the wait's continuation
-- (wait_continue). Returns the wait it satisfied, or NULL. The wait's row is
-- locked, not skipped: one held by a sweep or a withdrawal is waited for and
-- looked at again.
-- +goose StatementBegin
CREATE FUNCTION docket.message_offer(p_id bigint, p_actor text, p_now timestamptz)
RETURNS docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    m docket.messages;
    w docket.waits;
BEGIN
    SELECT * INTO m FROM docket.messages WHERE id = p_id;
    IF m.status IS DISTINCT FROM 'buffered' THEN
        RETURN NULL;
    END IF;
    -- The candidates come from the keys' index, fenced off: ordered by id,
    -- the planner would rather walk the primary key past every other wait.
    WITH candidates AS MATERIALIZED (
        SELECT id FROM docket.waits WHERE status = 'waiting' AND keys <@ m.keys
    )
    SELECT x.* INTO w FROM docket.waits x
    WHERE x.id IN (SELECT id FROM candidates)
      AND x.status = 'waiting' AND x.keys <@ m.keys AND x.project = m.project AND x.deadline > p_now
      AND (m.addressee IS NULL OR x.case_id = m.addressee)
    ORDER BY x.id
    LIMIT 1
    FOR UPDATE OF x;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN docket.wait_continue(w, m, 'satisfied', p_actor, p_now);
END
$$;
-- +goose StatementEnd

-- message_stored is the row message_store returns: whether the message was
-- stored before (a producer's retry), and the message.
CREATE VIEW docket.message_stored AS
SELECT false AS duplicate, m.* FROM docket.messages m WHERE false;

-- message_store is the first step of message_deliver: it checks the
-- delivery, takes the keys' locks (message_lock_keys) and stores the
-- message, buffered, on behalf of p_actor at p_now. A message stored before
-- under the same producer and id is the same message (a retry): it is
-- returned, locked, with duplicate = true, whatever became of it.
-- Refuses, writing nothing, as message_deliver does.
-- +goose StatementBegin
CREATE FUNCTION docket.message_store(p_project text, p_producer text, p_message_id text,
                                     p_namespaces text[], p_values text[], p_payload jsonb, p_addressee bigint,
                                     p_actor text, p_now timestamptz)
RETURNS SETOF docket.message_stored
LANGUAGE plpgsql AS $$
DECLARE
    v_keys text[];
    v docket.messages;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.require_valid(docket.valid_message_producer(p_producer), 'producer', p_producer,
        '1-128 characters, no control characters, no leading or trailing space');
    PERFORM docket.require_valid(docket.valid_case_key_value(p_message_id), 'message id', p_message_id,
        '1-255 characters, no control characters, no leading or trailing space');
    v_keys := docket.wait_keys(p_namespaces, p_values);
    IF p_payload IS NULL OR docket.json_size(p_payload) > 61440 THEN
        RAISE EXCEPTION 'invalid message payload: % characters of JSON, want 1..61440 (put large documents elsewhere and send a reference)',
            coalesce(docket.json_size(p_payload)::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    IF NOT (docket.grant_check(p_actor, p_project, 'message.deliver') AND docket.grant_check(p_actor, p_project, 'job.create')) THEN
        RAISE EXCEPTION '% may not deliver messages in project %: it needs explicit message.deliver and job.create grants', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    IF p_addressee IS NOT NULL AND NOT EXISTS (SELECT 1 FROM docket.cases WHERE id = p_addressee AND project = p_project) THEN
        RAISE EXCEPTION 'case % does not exist in project %', p_addressee, p_project USING ERRCODE = 'P0002';
    END IF;

    PERFORM docket.message_lock_keys(p_project, v_keys);
    INSERT INTO docket.messages (project, producer, message_id, keys, payload, addressee, arrived_at, delivered_by)
    VALUES (p_project, p_producer, p_message_id, v_keys, p_payload, p_addressee, p_now, p_actor)
    ON CONFLICT (project, producer, message_id) DO NOTHING
    RETURNING * INTO v;
    IF FOUND THEN
        RETURN QUERY SELECT false, (v).*;
        RETURN;
    END IF;
    SELECT * INTO v FROM docket.messages
    WHERE project = p_project AND producer = p_producer AND message_id = p_message_id
    FOR UPDATE;
    IF (v.keys, v.payload, v.addressee) IS DISTINCT FROM (v_keys, p_payload, p_addressee) THEN
        RAISE EXCEPTION 'message %/% was delivered before with other keys, payload or addressee (message %)',
            p_producer, p_message_id, v.id
            USING ERRCODE = 'DK003';
    END IF;
    RETURN QUERY SELECT true, (v).*;
END
$$;
-- +goose StatementEnd

-- message_delivered is the row message_deliver returns: whether the message
-- was stored before (a producer's retry), the message, and the continuation
-- job the wait it satisfied enqueued (NULL while buffered).
CREATE VIEW docket.message_delivered AS
SELECT false AS duplicate, NULL::bigint AS continuation_job_id, m.* FROM docket.messages m WHERE false;

-- message_deliver delivers a message from p_producer, its id p_message_id,
-- filed under keys (p_namespaces[i], p_values[i]), with p_payload, to the
-- waits of p_project -- or, when p_addressee is not NULL, to those of that
-- case alone -- on behalf of p_actor at p_now:
--   1. it takes the keys' locks and stores the message, buffered
--      (message_store); a message stored before under the same producer and
--      id is the same message (a retry) and is returned with duplicate =
--      true -- still buffered, it is offered again, so a delivery that
--      stored it and died before looking is completed by the retry;
--   2. it offers the message to the oldest wait it satisfies
--      (message_offer), consuming it and enqueuing that wait's continuation.
-- A message no wait claims stays buffered: it is dead-lettered by a sweep
-- after a horizon, never on arrival.
-- Refuses, writing nothing: malformed input, a payload over 60 KiB (DK010);
-- an actor without message.deliver and job.create on p_project, or an
-- unknown project (DK009); an addressee that is not a case of p_project
-- (P0002); the same producer and id with other keys, payload or addressee
-- (DK003).
-- +goose StatementBegin
CREATE FUNCTION docket.message_deliver(p_project text, p_producer text, p_message_id text,
                                       p_namespaces text[], p_values text[], p_payload jsonb, p_addressee bigint,
                                       p_actor text, p_now timestamptz)
RETURNS SETOF docket.message_delivered
LANGUAGE plpgsql AS $$
DECLARE
    st docket.message_stored;
    v docket.messages;
    w docket.waits;
BEGIN
    SELECT * INTO STRICT st FROM docket.message_store(p_project, p_producer, p_message_id, p_namespaces, p_values,
                                                      p_payload, p_addressee, p_actor, p_now);
    w := docket.message_offer(st.id, p_actor, p_now);
    SELECT * INTO v FROM docket.messages WHERE id = st.id;
    IF w.id IS NULL AND v.status = 'consumed' THEN
        SELECT * INTO w FROM docket.waits WHERE id = v.consumed_by;
    END IF;
    RETURN QUERY SELECT st.duplicate, w.continuation_job_id, (v).*;
END
$$;
-- +goose StatementEnd

-- wait_registered is the row wait_register returns: whether the wait was
-- created by this call, the continuation job enqueued when a buffered message
-- satisfied it at once, and the wait.
CREATE VIEW docket.wait_registered AS
SELECT false AS created, w.* FROM docket.waits w WHERE false;

-- wait_register registers wait p_name of case p_case_id on the keys
-- (p_namespaces[i], p_values[i]) until p_deadline, with the continuation a
-- message's arrival enqueues (p_arrival_*) and the one the deadline enqueues
-- (p_timeout_kind NULL: none), on behalf of p_actor at p_now:
--   1. it takes the keys' locks (message_lock_keys);
--   2. it stores the wait, waiting (waits_guard locks the case row FOR SHARE
--      and refuses a closed case);
--   3. it looks in the buffer for the oldest message filed under all its
--      keys -- unaddressed, or addressed to this case -- and, finding one,
--      consumes it and enqueues the arrival continuation at once.
-- Registering again what is waiting under that name, on the same terms, is a
-- no-op that returns it with created = false.
-- Refuses, writing nothing: malformed input, a deadline not after p_now or
-- more than 3650 days ahead (DK010); an unknown case or one the actor may not
-- write (P0002); an actor without job.create on its project (DK009); a
-- closed case (DK005); a waiting wait of that name on other terms (23505 on
-- waits_waiting_name).
-- +goose StatementBegin
CREATE FUNCTION docket.wait_register(
    p_case_id bigint, p_name text, p_namespaces text[], p_values text[], p_deadline timestamptz,
    p_arrival_kind text, p_arrival_queue text, p_arrival_payload jsonb, p_arrival_payload_schema integer,
    p_arrival_max_attempts integer,
    p_timeout_kind text, p_timeout_queue text, p_timeout_payload jsonb, p_timeout_payload_schema integer,
    p_timeout_max_attempts integer,
    p_actor text, p_now timestamptz)
RETURNS SETOF docket.wait_registered
LANGUAGE plpgsql AS $$
DECLARE
    v_project text;
    v_keys text[];
    v docket.waits;
    m docket.messages;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(docket.valid_case_key_namespace(p_name), 'wait name', p_name,
        '1-63 characters of [a-z0-9._-], starting with a letter or digit');
    v_keys := docket.wait_keys(p_namespaces, p_values);
    IF p_deadline IS NULL OR NOT isfinite(p_deadline) OR p_deadline <= p_now OR p_deadline > p_now + interval '3650 days' THEN
        RAISE EXCEPTION 'invalid deadline %: every wait has one, after now (%) and at most 3650 days ahead',
            coalesce(p_deadline::text, 'NULL'), p_now
            USING ERRCODE = 'DK010';
    END IF;
    PERFORM docket.job_require_spec(1, p_arrival_kind, p_arrival_queue, p_arrival_payload, p_arrival_max_attempts);
    PERFORM docket.require_valid(p_arrival_payload_schema >= 1, 'arrival payload schema',
        p_arrival_payload_schema::text, '1 or more');
    IF p_timeout_kind IS NOT NULL THEN
        PERFORM docket.job_require_spec(1, p_timeout_kind, p_timeout_queue, p_timeout_payload, p_timeout_max_attempts);
        PERFORM docket.require_valid(p_timeout_payload_schema >= 1, 'timeout payload schema',
            p_timeout_payload_schema::text, '1 or more');
    ELSE
        p_timeout_queue := NULL;
        p_timeout_payload := NULL;
        p_timeout_payload_schema := NULL;
        p_timeout_max_attempts := NULL;
    END IF;
    v_project := docket.case_authorize(p_case_id, p_actor);
    IF NOT docket.grant_check(p_actor, v_project, 'job.create') THEN
        RAISE EXCEPTION '% may not register waits in project %: a wait enqueues its continuation, which needs an explicit job.create grant',
            p_actor, v_project
            USING ERRCODE = 'DK009';
    END IF;

    PERFORM docket.message_lock_keys(v_project, v_keys);
    SELECT * INTO v FROM docket.waits WHERE case_id = p_case_id AND name = p_name AND status = 'waiting';
    IF FOUND THEN
        IF (v.keys, v.deadline, v.on_arrival_kind, v.on_arrival_queue, v.on_arrival_payload,
            v.on_arrival_payload_schema, v.on_arrival_max_attempts, v.on_timeout_kind, v.on_timeout_queue,
            v.on_timeout_payload, v.on_timeout_payload_schema, v.on_timeout_max_attempts)
           IS NOT DISTINCT FROM
           (v_keys, p_deadline, p_arrival_kind, p_arrival_queue, p_arrival_payload,
            p_arrival_payload_schema, p_arrival_max_attempts, p_timeout_kind, p_timeout_queue,
            p_timeout_payload, p_timeout_payload_schema, p_timeout_max_attempts) THEN
            RETURN QUERY SELECT false, (v).*;
            RETURN;
        END IF;
        RAISE EXCEPTION 'case % already waits for % (wait %, until %) on other terms', p_case_id, p_name, v.id, v.deadline
            USING ERRCODE = '23505', CONSTRAINT = 'waits_waiting_name', TABLE = 'waits', SCHEMA = 'docket';
    END IF;
    INSERT INTO docket.waits (case_id, project, name, keys, deadline,
                              on_arrival_kind, on_arrival_queue, on_arrival_payload, on_arrival_payload_schema,
                              on_arrival_max_attempts, on_timeout_kind, on_timeout_queue, on_timeout_payload,
                              on_timeout_payload_schema, on_timeout_max_attempts, created_by, created_at)
    VALUES (p_case_id, v_project, p_name, v_keys, p_deadline,
            p_arrival_kind, p_arrival_queue, p_arrival_payload, p_arrival_payload_schema, p_arrival_max_attempts,
            p_timeout_kind, p_timeout_queue, p_timeout_payload, p_timeout_payload_schema, p_timeout_max_attempts,
            p_actor, p_now)
    RETURNING * INTO v;

    -- Candidates from the keys' index, fenced off as in message_offer.
    WITH candidates AS MATERIALIZED (
        SELECT id FROM docket.messages WHERE status = 'buffered' AND keys @> v_keys
    )
    SELECT x.* INTO m FROM docket.messages x
    WHERE x.id IN (SELECT id FROM candidates)
      AND x.status = 'buffered' AND x.keys @> v_keys AND x.project = v_project
      AND x.arrived_at < p_deadline
      AND (x.addressee IS NULL OR x.addressee = p_case_id)
    ORDER BY x.id
    LIMIT 1
    FOR UPDATE OF x;
    IF FOUND THEN
        v := docket.wait_continue(v, m, 'satisfied', p_actor, p_now);
    END IF;
    RETURN QUERY SELECT true, (v).*;
END
$$;
-- +goose StatementEnd

-- wait_withdraw withdraws wait p_id on behalf of p_actor at p_now and
-- returns it. Withdrawing a withdrawn wait is a no-op that returns it.
-- Refuses, writing nothing: a malformed actor or instant (DK010); an unknown
-- wait or one whose case the actor may not write (P0002); a wait a message
-- satisfied or its deadline expired first (DK007).
-- +goose StatementBegin
CREATE FUNCTION docket.wait_withdraw(p_id bigint, p_actor text, p_now timestamptz)
RETURNS docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    v docket.waits;
    v_project text;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    SELECT project INTO v_project FROM docket.waits WHERE id = p_id;
    IF NOT FOUND OR NOT docket.grant_check(p_actor, v_project, 'case.admit') THEN
        RAISE EXCEPTION 'wait % does not exist (or % holds no case.admit on its project)', coalesce(p_id::text, 'NULL'), p_actor
            USING ERRCODE = 'P0002';
    END IF;
    SELECT * INTO v FROM docket.waits WHERE id = p_id FOR UPDATE;
    IF v.status = 'withdrawn' THEN
        RETURN v;
    END IF;
    IF v.status <> 'waiting' THEN
        RAISE EXCEPTION 'wait % was % first: it cannot be withdrawn', v.id, v.status
            USING ERRCODE = 'DK007', DETAIL = 'status ' || v.status;
    END IF;
    UPDATE docket.waits SET status = 'withdrawn', settled_at = greatest(created_at, p_now), settled_by = p_actor
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- wait_expire_due is the expiry sweep: it moves up to p_limit waiting waits
-- whose deadline has come at p_now (deadline <= p_now), soonest first, to
-- expired on behalf of p_actor, each enqueuing its timeout continuation if it
-- names one, and returns them. It looks only at projects where p_actor holds
-- case.sweep, and at waits with a timeout continuation only where it also
-- holds job.create. A range scan of waits_deadline_idx; waits another
-- transaction holds locked are skipped, never waited for, so several
-- sweepers may run at once.
-- Refuses: a malformed actor or instant, a limit outside 1..10000 (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.wait_expire_due(p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    w docket.waits;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep batch', p_limit, 10000);
    FOR w IN
        SELECT * FROM docket.waits
        WHERE status = 'waiting' AND deadline <= p_now
          AND docket.grant_check(p_actor, project, 'case.sweep')
          AND (on_timeout_kind IS NULL OR docket.grant_check(p_actor, project, 'job.create'))
        ORDER BY deadline, id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        RETURN NEXT docket.wait_continue(w, NULL, 'expired', p_actor, p_now);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- message_dead_letter_due is the dead-letter sweep: it moves up to p_limit
-- messages buffered since p_horizon or longer before p_now (arrived_at <=
-- p_now - p_horizon), oldest first, to dead_lettered on behalf of p_actor,
-- with a reason saying why, and returns them. A message younger than the
-- horizon is never touched: "nobody waits for this yet" is not "nobody ever
-- will". It looks only at projects where p_actor holds case.sweep. A range
-- scan of messages_buffered_idx; messages another transaction holds locked
-- are skipped.
-- Refuses: a malformed actor or instant, a limit outside 1..10000, a horizon
-- outside 1 minute..366 days (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.message_dead_letter_due(p_limit integer, p_horizon interval, p_actor text, p_now timestamptz)
RETURNS SETOF docket.messages
LANGUAGE plpgsql AS $$
DECLARE
    m docket.messages;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep batch', p_limit, 10000);
    IF p_horizon IS NULL OR p_horizon < interval '1 minute' OR p_horizon > interval '366 days' THEN
        RAISE EXCEPTION 'invalid dead-letter horizon %: want 1 minute to 366 days', coalesce(p_horizon::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    FOR m IN
        SELECT * FROM docket.messages
        WHERE status = 'buffered' AND arrived_at <= p_now - p_horizon
          AND docket.grant_check(p_actor, project, 'case.sweep')
        ORDER BY arrived_at, id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        UPDATE docket.messages
        SET status = 'dead_lettered', settled_at = greatest(arrived_at, p_now),
            dead_letter_reason = CASE
                WHEN m.addressee IS NOT NULL AND EXISTS (
                    SELECT 1 FROM docket.cases c WHERE c.id = m.addressee AND c.status = 'closed')
                THEN format('addressed to case %s, which is closed and never consumed it', m.addressee)
                WHEN m.addressee IS NOT NULL
                THEN format('addressed to case %s, which had no wait on its keys within the horizon of %s', m.addressee, justify_interval(p_horizon))
                ELSE format('no wait claimed it within the horizon of %s', justify_interval(p_horizon))
            END
        WHERE id = m.id
        RETURNING * INTO m;
        RETURN NEXT m;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- timer_placed is the row timer_set returns: whether this call set the
-- timer (false: it was set before, and this was a retry), and the timer.
CREATE VIEW docket.timer_placed AS
SELECT false AS created, t.* FROM docket.timers t WHERE false;

-- timer_set sets timer p_name of case p_case_id to wake at p_wake_at: a job
-- of the case (p_kind, p_queue, p_payload, p_payload_schema,
-- p_max_attempts), available at p_wake_at, with params {"timer": name,
-- "wake_at", "case_id"} -- the instant it was due, however late it runs --
-- under idempotency key timer:CASE:NAME:MICROS, on behalf of p_actor at p_now. A
-- wake instant already past wakes at once. Setting again the same timer
-- (case, name and instant) is a no-op that returns it, created false.
-- Closing the case cancels the job if it has not been claimed.
-- Refuses, writing nothing: malformed input, a wake instant more than 3650
-- days ahead (DK010); an unknown case or one the actor may not write
-- (P0002); an actor without job.create on its project (DK009); a closed case
-- (DK005); the same timer with another job (DK003).
-- +goose StatementBegin
CREATE FUNCTION docket.timer_set(p_case_id bigint, p_name text, p_wake_at timestamptz,
                                 p_kind text, p_queue text, p_payload jsonb, p_payload_schema integer,
                                 p_max_attempts integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.timer_placed
LANGUAGE plpgsql AS $$
DECLARE
    v_project text;
    v docket.timers;
    j record;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(docket.valid_case_key_namespace(p_name), 'timer name', p_name,
        '1-63 characters of [a-z0-9._-], starting with a letter or digit');
    IF p_wake_at IS NULL OR NOT isfinite(p_wake_at) OR p_wake_at < '1970-01-01 00:00:00+00'
       OR p_wake_at > p_now + interval '3650 days' THEN
        RAISE EXCEPTION 'invalid wake instant %: want a finite instant at most 3650 days after now (%)',
            coalesce(p_wake_at::text, 'NULL'), p_now
            USING ERRCODE = 'DK010';
    END IF;
    PERFORM docket.job_require_spec(1, p_kind, p_queue, p_payload, p_max_attempts);
    PERFORM docket.require_valid(p_payload_schema >= 1, 'payload schema', p_payload_schema::text, '1 or more');
    v_project := docket.case_authorize(p_case_id, p_actor);
    -- The case row's lock first, as a close takes it, then the job.
    IF (SELECT status FROM docket.cases WHERE id = p_case_id FOR SHARE) <> 'open' THEN
        RAISE EXCEPTION 'case % is closed: it cannot set timer %', p_case_id, p_name USING ERRCODE = 'DK005';
    END IF;
    -- One timer per (case, name, instant), whatever its job: a retry finds
    -- it, under a lock of that name, and must name the same job.
    PERFORM pg_advisory_xact_lock(1684764530, hashtext(p_case_id || '/' || p_name));
    SELECT t.* INTO v FROM docket.timers t WHERE t.case_id = p_case_id AND t.name = p_name AND t.wake_at = p_wake_at;
    IF FOUND THEN
        SELECT jb.kind, jb.queue, jb.payload, jb.payload_schema, jb.max_attempts INTO j
        FROM docket.jobs jb WHERE jb.id = v.job_id;
        IF (j.kind, j.queue, j.payload, j.payload_schema, j.max_attempts)
           IS DISTINCT FROM (p_kind, p_queue, p_payload, p_payload_schema, p_max_attempts) THEN
            RAISE EXCEPTION 'timer % of case % at % was set before with another job (timer %)', p_name, p_case_id, p_wake_at, v.id
                USING ERRCODE = 'DK003';
        END IF;
        RETURN QUERY SELECT false, (v).*;
        RETURN;
    END IF;
    SELECT e.id INTO j
    FROM docket.job_enqueue_one(
        v_project, p_actor, p_now, p_kind, p_queue, 1::smallint, p_payload, p_payload_schema,
        format('timer:%s:%s:%s', p_case_id, p_name, (extract(epoch FROM p_wake_at) * 1000000)::bigint),
        p_wake_at, p_max_attempts, false, false, interval '5 minutes', interval '1 second', interval '10 minutes', 0.2,
        jsonb_build_object('timer', p_name, 'wake_at', p_wake_at, 'case_id', p_case_id),
        '{}', '', 0, p_case_id, '') e;
    INSERT INTO docket.timers (case_id, project, name, wake_at, job_id, created_by, created_at)
    VALUES (p_case_id, v_project, p_name, p_wake_at, j.id, p_actor, p_now)
    RETURNING * INTO v;
    RETURN QUERY SELECT true, (v).*;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION docket.timer_set(bigint, text, timestamptz, text, text, jsonb, integer, integer, text, timestamptz);
DROP VIEW docket.timer_placed;
DROP FUNCTION docket.message_dead_letter_due(integer, interval, text, timestamptz);
DROP FUNCTION docket.wait_expire_due(integer, text, timestamptz);
DROP FUNCTION docket.wait_withdraw(bigint, text, timestamptz);
DROP FUNCTION docket.wait_register(bigint, text, text[], text[], timestamptz, text, text, jsonb, integer, integer,
    text, text, jsonb, integer, integer, text, timestamptz);
DROP VIEW docket.wait_registered;
DROP FUNCTION docket.message_deliver(text, text, text, text[], text[], jsonb, bigint, text, timestamptz);
DROP VIEW docket.message_delivered;
DROP FUNCTION docket.message_store(text, text, text, text[], text[], jsonb, bigint, text, timestamptz);
DROP VIEW docket.message_stored;
DROP FUNCTION docket.message_offer(bigint, text, timestamptz);
DROP FUNCTION docket.wait_continue(docket.waits, docket.messages, text, text, timestamptz);
DROP FUNCTION docket.message_lock_keys(text, text[]);
DROP VIEW docket.waits_waiting;
DROP VIEW docket.messages_buffered;
DROP VIEW docket.messages_dead;
DROP FUNCTION docket.message_visible(text, text);
DROP TRIGGER cases_settle_waits ON docket.cases;
DROP FUNCTION docket.cases_settle_waits();
ALTER TABLE docket.case_events DROP CONSTRAINT case_events_what_known;
-- Events of waits, messages and timers stay in the history: the old rule
-- holds for new rows only.
ALTER TABLE docket.case_events ADD CONSTRAINT case_events_what_known CHECK (
    what IN ('created', 'status', 'state', 'key_claimed', 'key_released', 'obligation', 'late_meet')) NOT VALID;
DROP TABLE docket.timers;
DROP FUNCTION docket.timers_record();
DROP FUNCTION docket.timers_guard();
ALTER TABLE docket.messages DROP CONSTRAINT messages_consumed_by_fkey;
DROP TABLE docket.waits;
DROP FUNCTION docket.waits_record();
DROP FUNCTION docket.waits_guard();
DROP TABLE docket.messages;
DROP FUNCTION docket.messages_record();
DROP FUNCTION docket.messages_guard();
DROP TABLE docket.wait_transitions;
DROP TABLE docket.wait_states;
DROP TABLE docket.message_transitions;
DROP TABLE docket.message_states;
UPDATE docket.capabilities
SET description = 'breach the project''s due obligations and enqueue their escalations (with job.create)'
WHERE name = 'case.sweep';
-- A capability still granted stays: revoking grants is a recorded act.
DELETE FROM docket.capabilities c WHERE c.name = 'message.deliver'
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
DROP DOMAIN docket.message_payload;
DROP FUNCTION docket.wait_keys(text[], text[]);
DROP FUNCTION docket.valid_wait_keys(text[]);
DROP FUNCTION docket.valid_message_producer(text);
