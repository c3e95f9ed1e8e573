-- Durable waits: messages, waits and timers.
--
-- Where an inbound message and the case waiting for it meet,
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
--     transaction-scoped advisory lock per key and write the key's slot in
--     docket.match_slots (message_lock_keys) before storing and looking, so
--     whichever commits second sees the first, or, under REPEATABLE READ or
--     SERIALIZABLE, fails (40001) rather than look in a stale snapshot --
--     the two meet in the store, not in time;
--   * every wait has a deadline, after the instant it was registered and at
--     most 3650 days (about ten years) ahead (waits_deadline_bounded);
--   * a closed case waits for nothing: closing withdraws its waits,
--     dead-letters the messages addressed to it that it never consumed and
--     cancels its timers that have not fired (cases_settle_waits), and a wait
--     or timer is registered only on an open case, having written the case
--     row (case_hold) as a close writes it;
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

-- wait_keys returns the keys (p_namespaces[i], p_values[i]) as stored:
-- 'namespace:value', distinct, in byte order. Refuses malformed keys as
-- case_require_keys does (DK010).
CREATE OR REPLACE FUNCTION docket.wait_keys(p_namespaces text[], p_values text[]) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.case_require_keys(p_namespaces, p_values);
    RETURN ARRAY(SELECT x.ns || ':' || x.val FROM unnest(p_namespaces, p_values) AS x(ns, val)
                 ORDER BY x.ns || ':' || x.val COLLATE "C");
END
$$;

-- The message machine's states and moves (docket.message_states, docket.message_transitions),
-- as 00027_waits.sql declares them.
SELECT docket.machine_views('message');

-- The wait machine's states and moves (docket.wait_states, docket.wait_transitions),
-- as 00027_waits.sql declares them.
SELECT docket.machine_views('wait');

-- Guards -------------------------------------------------------------------------

-- messages_guard: a message is born buffered and unsettled (DK001); nothing
-- but its status, consumer, settlement and reason ever changes (DK015); its
-- status moves only along docket.message_transitions, and a terminal message
-- never changes at all (DK001). An UPDATE that changes nothing passes.
CREATE OR REPLACE FUNCTION docket.messages_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM docket.machine_birth('message', format('message %s/%s', NEW.producer, NEW.message_id), NEW.status);
        IF NEW.consumed_by IS NOT NULL OR NEW.settled_at IS NOT NULL OR NEW.dead_letter_reason IS NOT NULL THEN
            RAISE EXCEPTION 'message %/%: a message is stored unconsumed and unsettled', NEW.producer, NEW.message_id
                USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('message', 'message ' || OLD.id, OLD.status, NEW.status);
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER messages_guard
    BEFORE INSERT OR UPDATE ON docket.messages
    FOR EACH ROW EXECUTE FUNCTION docket.messages_guard();

CREATE OR REPLACE TRIGGER messages_columns_immutable
    BEFORE UPDATE OF id, project, producer, message_id, keys, payload, addressee, arrived_at,
                     delivered_by
    ON docket.messages
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

-- waits_guard: a wait is born waiting, unsettled, on a running run's step
-- (run_step_owner: the run's project, DK014 for a run that ended) or on an
-- open case whose row it writes (case_hold, so a close waits for it, sees the close (DK005), or
-- fails under REPEATABLE READ),
-- with the case's project (DK015); nothing but its status, its message, its
-- continuation job and settlement ever changes (DK015); its status moves only
-- along docket.wait_transitions, and a terminal wait never changes (DK001);
-- a wait is satisfied only by a message that matches it (DK001).
CREATE OR REPLACE FUNCTION docket.waits_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c docket.cases;
BEGIN
    IF TG_OP = 'INSERT' AND NEW.run_id IS NOT NULL THEN
        NEW.project := docket.run_step_owner(NEW.run_id, NEW.step_id, NEW.project, 'wait ' || NEW.name);
        PERFORM docket.machine_birth('wait', 'wait ' || NEW.name, NEW.status);
        IF NEW.satisfied_by IS NOT NULL OR NEW.continuation_job_id IS NOT NULL OR NEW.settled_at IS NOT NULL THEN
            RAISE EXCEPTION 'wait %: a wait is registered unsatisfied, with no continuation', NEW.name USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' THEN
        c := docket.case_hold(NEW.case_id);
        IF c.id IS NULL THEN
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
        PERFORM docket.machine_birth('wait', 'wait ' || NEW.name, NEW.status);
        IF NEW.satisfied_by IS NOT NULL OR NEW.continuation_job_id IS NOT NULL OR NEW.settled_at IS NOT NULL THEN
            RAISE EXCEPTION 'wait %: a wait is registered unsatisfied, with no continuation', NEW.name USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('wait', 'wait ' || OLD.id, OLD.status, NEW.status);
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

CREATE OR REPLACE TRIGGER waits_guard
    BEFORE INSERT OR UPDATE ON docket.waits
    FOR EACH ROW EXECUTE FUNCTION docket.waits_guard();

CREATE OR REPLACE TRIGGER waits_columns_immutable
    BEFORE UPDATE OF id, case_id, run_id, step_id, project, name, keys, deadline, on_arrival_kind, on_arrival_queue,
                     on_arrival_payload, on_arrival_payload_schema, on_arrival_max_attempts,
                     on_timeout_kind, on_timeout_queue, on_timeout_payload,
                     on_timeout_payload_schema, on_timeout_max_attempts, created_by, created_at
    ON docket.waits
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

-- timers_guard: a timer is set on an open case whose row it writes (case_hold),
-- with the case's project; on a running run's step (run_step_owner), with
-- the run's project; or on neither, in its project. A case's timer, or one
-- of no owner, never changes: its job's state says whether it fired. A
-- step's timer has no job: it changes once, fired (the timer sweep) or
-- disarmed (its run ended first), and nothing else of it changes (DK015).
CREATE OR REPLACE FUNCTION docket.timers_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c docket.cases;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF OLD.run_id IS NULL OR OLD.fired_at IS NOT NULL OR OLD.disarmed_at IS NOT NULL
           OR (NEW.fired_at IS NULL) = (NEW.disarmed_at IS NULL)
           OR (NEW.id, NEW.case_id, NEW.project, NEW.name, NEW.wake_at, NEW.job_id, NEW.run_id, NEW.step_id,
               NEW.created_by, NEW.created_at)
              IS DISTINCT FROM (OLD.id, OLD.case_id, OLD.project, OLD.name, OLD.wake_at, OLD.job_id, OLD.run_id,
                                OLD.step_id, OLD.created_by, OLD.created_at) THEN
            RAISE EXCEPTION 'timer %: a timer never changes but a step''s, which fires or is disarmed once', OLD.id
                USING ERRCODE = 'DK015';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.fired_at IS NOT NULL OR NEW.disarmed_at IS NOT NULL THEN
        RAISE EXCEPTION 'timer %: a timer is set armed', NEW.name USING ERRCODE = 'DK001';
    END IF;
    IF NEW.run_id IS NOT NULL THEN
        NEW.project := docket.run_step_owner(NEW.run_id, NEW.step_id, NEW.project, 'timer ' || NEW.name);
        RETURN NEW;
    END IF;
    IF NEW.case_id IS NULL THEN
        RETURN NEW;
    END IF;
    c := docket.case_hold(NEW.case_id);
    IF c.id IS NULL THEN
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

CREATE OR REPLACE TRIGGER timers_guard
    BEFORE INSERT OR UPDATE ON docket.timers
    FOR EACH ROW EXECUTE FUNCTION docket.timers_guard();

-- Waits and messages ----------------------------------------------------------

-- waits_messages_agree checks, when the transaction commits, that a wait and
-- the message it consumed name each other: a satisfied wait's satisfied_by is
-- a consumed message whose consumed_by is that wait, and a consumed message's
-- consumed_by is a satisfied wait whose satisfied_by is that message
-- (DK001). A dead letter, or a message another wait took, satisfies nothing.
CREATE OR REPLACE FUNCTION docket.waits_messages_agree() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, docket, pg_temp AS $$
BEGIN
    IF TG_TABLE_NAME = 'waits' THEN
        IF (NEW.status = 'satisfied') <> (NEW.satisfied_by IS NOT NULL) OR (NEW.satisfied_by IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM docket.messages m
            WHERE m.id = NEW.satisfied_by AND m.status = 'consumed' AND m.consumed_by = NEW.id)) THEN
            RAISE EXCEPTION 'wait %: % by message %, which was not consumed by it', NEW.id, NEW.status,
                coalesce(NEW.satisfied_by::text, 'none')
                USING ERRCODE = 'DK001';
        END IF;
    ELSIF (NEW.status = 'consumed') <> (NEW.consumed_by IS NOT NULL) OR (NEW.consumed_by IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM docket.waits w
            WHERE w.id = NEW.consumed_by AND w.status = 'satisfied' AND w.satisfied_by = NEW.id)) THEN
        RAISE EXCEPTION 'message %: % by wait %, which it did not satisfy', NEW.id, NEW.status,
            coalesce(NEW.consumed_by::text, 'none')
            USING ERRCODE = 'DK001';
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS waits_messages_agree ON docket.waits;
CREATE CONSTRAINT TRIGGER waits_messages_agree
    AFTER INSERT OR UPDATE OF status, satisfied_by ON docket.waits
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION docket.waits_messages_agree();

DROP TRIGGER IF EXISTS messages_waits_agree ON docket.messages;
CREATE CONSTRAINT TRIGGER messages_waits_agree
    AFTER INSERT OR UPDATE OF status, consumed_by ON docket.messages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION docket.waits_messages_agree();

-- Events ------------------------------------------------------------------------
-- New kinds of case event:
--   wait      a wait was registered (to: waiting) or ended (from, to), with
--             the message that satisfied it and the job its end enqueued
--   message   a message addressed to the case was dead-lettered (detail:
--             the message and the reason)
--   timer     a timer was set (detail: name, wake instant, job) or, the case
--             closing, cancelled (from: set, to: cancelled)

-- waits_record appends a wait event for a registration and for its end, to
-- its case's history (a step's wait is on its run's step).
CREATE OR REPLACE FUNCTION docket.waits_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.status = OLD.status OR NEW.case_id IS NULL THEN
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

CREATE OR REPLACE TRIGGER waits_record
    AFTER INSERT OR UPDATE ON docket.waits
    FOR EACH ROW EXECUTE FUNCTION docket.waits_record();

-- messages_record appends a message event to the addressee's history when a
-- message addressed to it is dead-lettered.
CREATE OR REPLACE FUNCTION docket.messages_record() RETURNS trigger
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

CREATE OR REPLACE TRIGGER messages_record
    AFTER UPDATE ON docket.messages
    FOR EACH ROW EXECUTE FUNCTION docket.messages_record();

-- timers_record appends a timer event when a timer of a case is set.
CREATE OR REPLACE FUNCTION docket.timers_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.case_id IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO docket.case_events (case_id, what, to_state, actor, at, detail)
    VALUES (NEW.case_id, 'timer', 'set', docket.context_actor(), docket.context_now(),
            jsonb_build_object('timer_id', NEW.id, 'name', NEW.name, 'wake_at', NEW.wake_at, 'job_id', NEW.job_id));
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER timers_record
    AFTER INSERT ON docket.timers
    FOR EACH ROW EXECUTE FUNCTION docket.timers_record();

-- Closing a case: its waits, messages and timers ----------------------------------

-- cases_settle_waits runs when a case closes, by any route: it dead-letters
-- the buffered messages addressed to the case (they were its alone), then
-- withdraws its waiting waits, then cancels its timers that have not fired
-- (queued jobs). Locks in that order -- messages, then waits -- which is the
-- order a delivery takes them in, after the case row the close holds.
CREATE OR REPLACE FUNCTION docket.cases_settle_waits() RETURNS trigger
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

CREATE OR REPLACE TRIGGER cases_settle_waits
    AFTER UPDATE OF status ON docket.cases
    FOR EACH ROW WHEN (OLD.status = 'open' AND NEW.status = 'closed')
    EXECUTE FUNCTION docket.cases_settle_waits();

-- Reading -----------------------------------------------------------------------

-- message_visible reports whether p_principal may read the messages of
-- p_project: it holds message.deliver, case.admit or case.view there.
CREATE OR REPLACE FUNCTION docket.message_visible(p_principal text, p_project text) RETURNS boolean
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

CREATE OR REPLACE VIEW docket.messages_dead WITH (security_invoker = true) AS
SELECT m.id, m.project, m.producer, m.message_id, m.keys, m.addressee, m.dead_letter_reason AS reason,
       m.arrived_at, m.settled_at AS dead_lettered_at, m.settled_at - m.arrived_at AS buffered_for
FROM docket.messages m
WHERE m.status = 'dead_lettered'
ORDER BY m.settled_at DESC, m.id DESC;

COMMENT ON VIEW docket.messages_dead IS
    'Dead letters, newest first: who sent each and the keys it was filed under, never the payload (it is the counterparty''s). A non-empty list means a correlation key is wrong somewhere.';

CREATE OR REPLACE VIEW docket.messages_buffered WITH (security_invoker = true) AS
SELECT m.id, m.project, m.producer, m.message_id, m.keys, m.addressee, m.arrived_at
FROM docket.messages m
WHERE m.status = 'buffered'
ORDER BY m.arrived_at, m.id;

COMMENT ON VIEW docket.messages_buffered IS
    'Messages no wait has claimed yet, oldest first; the dead-letter sweep moves those older than its horizon.';

CREATE OR REPLACE VIEW docket.waits_waiting WITH (security_invoker = true) AS
SELECT w.id, w.case_id, w.project, c.kind AS case_kind, w.name, w.keys, w.deadline,
       w.on_arrival_kind, w.on_timeout_kind, w.created_by, w.created_at, w.run_id, w.step_id
FROM docket.waits w
LEFT JOIN docket.cases c ON c.id = w.case_id
WHERE w.status = 'waiting'
ORDER BY w.deadline, w.id;

COMMENT ON VIEW docket.waits_waiting IS
    'Waits no message has satisfied, soonest deadline first, each its case''s or a run step''s (run_id, step_id). Due at instant T: WHERE deadline <= T; the expiry sweep moves them.';

-- Protocol ------------------------------------------------------------------------

-- message_lock_keys takes, for each key of p_keys in p_project, a
-- transaction-scoped advisory lock (class 1684764529, 'dkwq'), in the order
-- of the locks' numbers, so two callers with overlapping keys never
-- deadlock; then it writes the keys' slots of docket.match_slots (making
-- a slot's row the first time), in slot order. Deliveries and waits call it before they store and look: of two on
-- a common key, the second sees what the first committed (READ COMMITTED)
-- or fails with 40001 (REPEATABLE READ, SERIALIZABLE): a lock alone would
-- let it look in a snapshot taken before the first committed.
CREATE OR REPLACE FUNCTION docket.message_lock_keys(p_project text, p_keys text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    h integer;
BEGIN
    FOR h IN SELECT DISTINCT hashtext(p_project || '/' || k) FROM unnest(p_keys) k ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(1684764529, h);
    END LOOP;
    FOR h IN SELECT DISTINCT docket.match_slot(p_project, k) FROM unnest(p_keys) k ORDER BY 1 LOOP
        INSERT INTO docket.match_slots AS m (slot, guard_seq) VALUES (h, 1)
        ON CONFLICT (slot) DO UPDATE SET guard_seq = m.guard_seq + 1;
    END LOOP;
END
$$;

-- match_slot is the slot of docket.match_slots that key p_key of project
-- p_project is decided in.
CREATE OR REPLACE FUNCTION docket.match_slot(p_project text, p_key text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (hashtext(p_project || '/' || p_key) & 4095);

CREATE OR REPLACE TRIGGER match_slots_refuse_delete
    BEFORE DELETE ON docket.match_slots
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('a match slot is kept: only its counter moves');

-- wait_continue ends wait w (locked by the caller, waiting) as p_status --
-- satisfied by message m (locked, buffered), or expired -- on behalf of
-- p_actor at p_now, and enqueues the continuation it names in the case's
-- project, naming the case, under idempotency key wait:ID:STATUS. The
-- continuation's params say why it runs:
--   {"wait_id", "wait": name, "outcome": "satisfied", "message": {"id",
--    "producer", "message_id", "keys", "arrived_at", "payload"}}
--   {"wait_id", "wait": name, "outcome": "expired", "deadline"}
-- A satisfying message is marked consumed by the wait. A run step's wait
-- enqueues nothing: its end is the step's answer (wait_answer_step).
-- Returns the wait. Refuses as job_enqueue_one (DK009 without job.create).
CREATE OR REPLACE FUNCTION docket.wait_continue(w docket.waits, m docket.messages, p_status text, p_actor text, p_now timestamptz)
RETURNS docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    v_job bigint;
    v docket.waits;
BEGIN
    IF w.run_id IS NOT NULL THEN
        RETURN docket.wait_answer_step(w, m, p_status, p_actor, p_now);
    END IF;
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

-- wait_answer_step ends wait w of a run's step (locked by the caller,
-- waiting) as p_status -- satisfied by message m (locked, buffered), which
-- it consumes, or expired -- on behalf of p_actor at p_now, and answers the
-- step (run_step_answered): a message is the step's result (a task's
-- decision: the decision's payload; any other: the message as a
-- continuation's params carry it), an expiry fails the step. Returns the
-- wait.
CREATE OR REPLACE FUNCTION docket.wait_answer_step(w docket.waits, m docket.messages, p_status text, p_actor text,
                                                   p_now timestamptz)
RETURNS docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    v docket.waits;
BEGIN
    IF p_status = 'satisfied' THEN
        UPDATE docket.messages
        SET status = 'consumed', consumed_by = w.id, settled_at = greatest(arrived_at, p_now)
        WHERE id = m.id;
    END IF;
    UPDATE docket.waits
    SET status = p_status, satisfied_by = m.id, settled_at = greatest(created_at, p_now), settled_by = p_actor
    WHERE id = w.id
    RETURNING * INTO v;
    IF p_status = 'satisfied' THEN
        PERFORM docket.run_step_answered(w.run_id, w.step_id, 'succeeded',
            CASE WHEN m.producer = 'docket.task' THEN m.payload
                 ELSE jsonb_build_object('id', m.id, 'producer', m.producer, 'message_id', m.message_id,
                                         'keys', to_jsonb(m.keys), 'arrived_at', m.arrived_at, 'payload', m.payload) END,
            NULL);
    ELSE
        PERFORM docket.run_step_answered(w.run_id, w.step_id, 'failed', NULL,
            format('wait %s: no message on %s before its deadline %s', w.name, array_to_string(w.keys, ', '), w.deadline));
    END IF;
    RETURN v;
END
$$;

-- message_offer offers buffered message p_id (which the caller holds locked,
-- and whose keys it holds the locks of) to the oldest waiting wait its keys
-- cover whose deadline is after p_now -- of its addressee only, when it has
-- one -- and, finding one, consumes it and enqueues the wait's continuation
-- (wait_continue). Returns the wait it satisfied, or NULL. The wait's row is
-- locked, not skipped: one held by a sweep or a withdrawal is waited for and
-- looked at again. A message of a project where p_actor does not hold
-- message.deliver and job.create is not there: NULL. Refuses an actor the
-- session may not act as (DK009), malformed input (DK010).
CREATE OR REPLACE FUNCTION docket.message_offer(p_id bigint, p_actor text, p_now timestamptz)
RETURNS docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    m docket.messages;
    w docket.waits;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    SELECT * INTO m FROM docket.messages WHERE id = p_id;
    IF m.status IS DISTINCT FROM 'buffered'
       OR NOT (docket.grant_check(p_actor, m.project, 'message.deliver') AND docket.grant_check(p_actor, m.project, 'job.create')) THEN
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

-- message_stored is the row message_store returns: whether the message was
-- stored before (a producer's retry), and the message.
CREATE OR REPLACE VIEW docket.message_stored WITH (security_invoker = true) AS
SELECT false AS duplicate, m.* FROM docket.messages m WHERE false;

-- message_store is the first step of message_deliver: it checks the
-- delivery, takes the keys' locks (message_lock_keys) and stores the
-- message, buffered, on behalf of p_actor at p_now. A message stored before
-- under the same producer and id is the same message (a retry): it is
-- returned, locked, with duplicate = true, whatever became of it.
-- Refuses, writing nothing, as message_deliver does.
CREATE OR REPLACE FUNCTION docket.message_store(p_project text, p_producer text, p_message_id text,
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

-- message_delivered is the row message_deliver returns: whether the message
-- was stored before (a producer's retry), the message, and the continuation
-- job the wait it satisfied enqueued (NULL while buffered).
CREATE OR REPLACE VIEW docket.message_delivered WITH (security_invoker = true) AS
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
CREATE OR REPLACE FUNCTION docket.message_deliver(p_project text, p_producer text, p_message_id text,
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

-- wait_registered is the row wait_register returns: whether the wait was
-- created by this call, the continuation job enqueued when a buffered message
-- satisfied it at once, and the wait.
CREATE OR REPLACE VIEW docket.wait_registered WITH (security_invoker = true) AS
SELECT false AS created, w.* FROM docket.waits w WHERE false;

-- wait_register registers wait p_name of case p_case_id on the keys
-- (p_namespaces[i], p_values[i]) until p_deadline, with the continuation a
-- message's arrival enqueues (p_arrival_*) and the one the deadline enqueues
-- (p_timeout_kind NULL: none), on behalf of p_actor at p_now:
--   1. it takes the keys' locks and writes their slots (message_lock_keys);
--   2. it stores the wait, waiting (waits_guard writes the case row,
--      case_hold, and refuses a closed case);
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
CREATE OR REPLACE FUNCTION docket.wait_register(
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
    v.case_id := p_case_id;
    v.project := v_project;
    v.name := p_name;
    v.keys := v_keys;
    v.deadline := p_deadline;
    v.on_arrival_kind := p_arrival_kind;
    v.on_arrival_queue := p_arrival_queue;
    v.on_arrival_payload := p_arrival_payload;
    v.on_arrival_payload_schema := p_arrival_payload_schema;
    v.on_arrival_max_attempts := p_arrival_max_attempts;
    v.on_timeout_kind := p_timeout_kind;
    v.on_timeout_queue := p_timeout_queue;
    v.on_timeout_payload := p_timeout_payload;
    v.on_timeout_payload_schema := p_timeout_payload_schema;
    v.on_timeout_max_attempts := p_timeout_max_attempts;
    v := docket.wait_place(v, p_actor, p_now);
    RETURN QUERY SELECT true, (v).*;
END
$$;

-- wait_place stores wait w (its owner -- case, or run and step --, name,
-- keys, deadline and continuations), waiting, on behalf of p_actor at
-- p_now, and looks in the buffer for the oldest message filed under all its
-- keys -- unaddressed, or addressed to its case -- that arrived before its
-- deadline; finding one, it ends the wait satisfied by it (wait_continue).
-- The caller holds the keys' locks (message_lock_keys). The one path by
-- which a case's waits and a run step's meet what was buffered before them.
-- Returns the wait.
CREATE OR REPLACE FUNCTION docket.wait_place(w docket.waits, p_actor text, p_now timestamptz) RETURNS docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    v docket.waits;
    m docket.messages;
BEGIN
    INSERT INTO docket.waits (case_id, run_id, step_id, project, name, keys, deadline,
                              on_arrival_kind, on_arrival_queue, on_arrival_payload, on_arrival_payload_schema,
                              on_arrival_max_attempts, on_timeout_kind, on_timeout_queue, on_timeout_payload,
                              on_timeout_payload_schema, on_timeout_max_attempts, created_by, created_at)
    VALUES (w.case_id, w.run_id, w.step_id, w.project, w.name, w.keys, w.deadline,
            w.on_arrival_kind, w.on_arrival_queue, w.on_arrival_payload, w.on_arrival_payload_schema, w.on_arrival_max_attempts,
            w.on_timeout_kind, w.on_timeout_queue, w.on_timeout_payload, w.on_timeout_payload_schema, w.on_timeout_max_attempts,
            p_actor, p_now)
    RETURNING * INTO v;

    -- Candidates from the keys' index, fenced off as in message_offer.
    WITH candidates AS MATERIALIZED (
        SELECT id FROM docket.messages WHERE status = 'buffered' AND keys @> v.keys
    )
    SELECT x.* INTO m FROM docket.messages x
    WHERE x.id IN (SELECT id FROM candidates)
      AND x.status = 'buffered' AND x.keys @> v.keys AND x.project = v.project
      AND x.arrived_at < v.deadline
      AND (x.addressee IS NULL OR x.addressee = v.case_id)
    ORDER BY x.id
    LIMIT 1
    FOR UPDATE OF x;
    IF FOUND THEN
        v := docket.wait_continue(v, m, 'satisfied', p_actor, p_now);
    END IF;
    RETURN v;
END
$$;

-- wait_place_step registers the wait of step p_step of run r (which the
-- caller holds locked, running): wait p_name on keys p_keys (as stored,
-- valid) until p_deadline, as the change context's actor at its instant,
-- taking the keys' locks first (message_lock_keys) and meeting a buffered
-- message at once (wait_place). A step waits once: its wait, found by
-- (run, step), is returned if it is there.
CREATE OR REPLACE FUNCTION docket.wait_place_step(r docket.runs, p_step text, p_name text, p_keys text[],
                                                  p_deadline timestamptz) RETURNS docket.waits
LANGUAGE plpgsql AS $$
DECLARE
    v docket.waits;
BEGIN
    PERFORM docket.message_lock_keys(r.project, p_keys);
    SELECT * INTO v FROM docket.waits WHERE run_id = r.id AND step_id = p_step;
    IF FOUND THEN
        RETURN v;
    END IF;
    v.run_id := r.id;
    v.step_id := p_step;
    v.project := r.project;
    v.name := p_name;
    v.keys := p_keys;
    v.deadline := p_deadline;
    RETURN docket.wait_place(v, docket.context_actor(), docket.context_now());
END
$$;

-- wait_withdraw withdraws wait p_id on behalf of p_actor at p_now and
-- returns it. Withdrawing a withdrawn wait is a no-op that returns it.
-- Refuses, writing nothing: a malformed actor or instant (DK010); an unknown
-- wait or one whose case the actor may not write (P0002); a wait a message
-- satisfied or its deadline expired first (DK007).
CREATE OR REPLACE FUNCTION docket.wait_withdraw(p_id bigint, p_actor text, p_now timestamptz)
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

-- wait_expire_due is the expiry sweep: it moves up to p_limit waiting waits
-- whose deadline has come at p_now (deadline <= p_now), soonest first, to
-- expired on behalf of p_actor, each enqueuing its timeout continuation if it
-- names one, and returns them. It looks only at projects where p_actor holds
-- case.sweep, and at waits with a timeout continuation only where it also
-- holds job.create. A range scan of waits_deadline_idx; waits another
-- transaction holds locked are skipped, never waited for, so several
-- sweepers may run at once.
-- Refuses: a malformed actor or instant, a limit outside 1..10000 (DK010).
CREATE OR REPLACE FUNCTION docket.wait_expire_due(p_limit integer, p_actor text, p_now timestamptz)
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
CREATE OR REPLACE FUNCTION docket.message_dead_letter_due(p_limit integer, p_horizon interval, p_actor text, p_now timestamptz)
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

-- timer_placed is the row timer_set returns: whether this call set the
-- timer (false: it was set before, and this was a retry), and the timer.
CREATE OR REPLACE VIEW docket.timer_placed WITH (security_invoker = true) AS
SELECT false AS created, t.* FROM docket.timers t WHERE false;

-- timer_require_same_job refuses (DK003) setting again timer v, named
-- p_what, with another job than the one it was set with (p_kind, p_queue,
-- p_payload, p_payload_schema, p_max_attempts): a retry of a set names the
-- same job.
CREATE OR REPLACE FUNCTION docket.timer_require_same_job(v docket.timers, p_what text, p_kind text, p_queue text, p_payload jsonb,
                                                         p_payload_schema integer, p_max_attempts integer)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM docket.jobs jb
                   WHERE jb.id = v.job_id
                     AND (jb.kind, jb.queue, jb.payload, jb.payload_schema, jb.max_attempts)
                         IS NOT DISTINCT FROM (p_kind, p_queue, p_payload, p_payload_schema, p_max_attempts)) THEN
        RAISE EXCEPTION '% at % was set before with another job (timer %)', p_what, v.wake_at, v.id USING ERRCODE = 'DK003';
    END IF;
END
$$;

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
CREATE OR REPLACE FUNCTION docket.timer_set(p_case_id bigint, p_name text, p_wake_at timestamptz,
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
    -- One timer per (case, name, instant), whatever its job: a retry finds
    -- it, under a lock of that name, and must name the same job; it writes
    -- nothing, not even the case row.
    PERFORM pg_advisory_xact_lock(1684764530, hashtext(p_case_id || '/' || p_name));
    SELECT t.* INTO v FROM docket.timers t WHERE t.case_id = p_case_id AND t.name = p_name AND t.wake_at = p_wake_at;
    IF FOUND THEN
        PERFORM docket.timer_require_same_job(v, format('timer %s of case %s', p_name, p_case_id),
                                              p_kind, p_queue, p_payload, p_payload_schema, p_max_attempts);
        RETURN QUERY SELECT false, (v).*;
        RETURN;
    END IF;
    -- A new timer: the case row first, written as a close writes it, then
    -- the job.
    IF (docket.case_hold(p_case_id)).status <> 'open' THEN
        RAISE EXCEPTION 'case % is closed: it cannot set timer %', p_case_id, p_name USING ERRCODE = 'DK005';
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

-- timer_set_caseless sets timer p_name of project p_project -- of no case:
-- a timer needs none -- to wake at p_wake_at: a job of the project (p_kind,
-- p_queue, p_payload, p_payload_schema, p_max_attempts), available at
-- p_wake_at, with params {"timer": name, "wake_at"}, under idempotency key
-- timer:-:NAME:MICROS, on behalf of p_actor at p_now. Setting the same timer
-- again (project, name and instant) is a no-op that returns it, created
-- false. Refuses, writing nothing: malformed input, a wake instant more than
-- 3650 days ahead (DK010); an actor without case.admit and job.create on the
-- project, or an unknown project (DK009); the same timer with another job
-- (DK003).
CREATE OR REPLACE FUNCTION docket.timer_set_caseless(p_project text, p_name text, p_wake_at timestamptz,
                                 p_kind text, p_queue text, p_payload jsonb, p_payload_schema integer,
                                 p_max_attempts integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.timer_placed
LANGUAGE plpgsql AS $$
DECLARE
    v docket.timers;
    j record;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
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
    IF NOT (docket.grant_check(p_actor, p_project, 'case.admit') AND docket.grant_check(p_actor, p_project, 'job.create')) THEN
        RAISE EXCEPTION '% may not set timers in project %: it needs explicit case.admit and job.create grants', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    PERFORM pg_advisory_xact_lock(1684764530, hashtext(p_project || '//' || p_name));
    SELECT t.* INTO v FROM docket.timers t
    WHERE t.project = p_project AND t.name = p_name AND t.wake_at = p_wake_at AND t.case_id IS NULL AND t.run_id IS NULL;
    IF FOUND THEN
        PERFORM docket.timer_require_same_job(v, format('timer %s of project %s', p_name, p_project),
                                              p_kind, p_queue, p_payload, p_payload_schema, p_max_attempts);
        RETURN QUERY SELECT false, (v).*;
        RETURN;
    END IF;
    SELECT e.id INTO j
    FROM docket.job_enqueue_one(
        p_project, p_actor, p_now, p_kind, p_queue, 1::smallint, p_payload, p_payload_schema,
        format('timer:-:%s:%s', p_name, (extract(epoch FROM p_wake_at) * 1000000)::bigint),
        p_wake_at, p_max_attempts, false, false, interval '5 minutes', interval '1 second', interval '10 minutes', 0.2,
        jsonb_build_object('timer', p_name, 'wake_at', p_wake_at),
        '{}', '', 0, NULL, '') e;
    INSERT INTO docket.timers (project, name, wake_at, job_id, created_by, created_at)
    VALUES (p_project, p_name, p_wake_at, j.id, p_actor, p_now)
    RETURNING * INTO v;
    RETURN QUERY SELECT true, (v).*;
END
$$;

-- Run steps' waits and timers -------------------------------------------------

-- run_step_owner checks that a wait, timer or task (p_what) may be
-- registered on step p_step of run p_run: the run exists (23503), is of
-- p_project when one is given (DK015), and is running (DK014: a run that
-- ended waits for nothing). Returns the run's project. The caller holds
-- the run row (the admission that registers it locks it, as its end does).
CREATE OR REPLACE FUNCTION docket.run_step_owner(p_run bigint, p_step text, p_project text, p_what text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    SELECT project, status INTO r FROM docket.runs WHERE id = p_run;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: run % does not exist', p_what, coalesce(p_run::text, 'NULL')
            USING ERRCODE = '23503', CONSTRAINT = 'run_steps_run_id_fkey', TABLE = 'run_steps', SCHEMA = 'docket';
    END IF;
    IF p_project IS NOT NULL AND p_project <> r.project THEN
        RAISE EXCEPTION '%: its project is its run''s, %, not %', p_what, r.project, p_project USING ERRCODE = 'DK015';
    END IF;
    IF r.status NOT IN ('running', 'exhausted') THEN
        RAISE EXCEPTION 'run % is %: its step % cannot wait (%)', p_run, r.status, p_step, p_what USING ERRCODE = 'DK014';
    END IF;
    RETURN r.project;
END
$$;

-- timer_arm_step arms the timer of step p_step of run r (held by the
-- caller, running) to wake at p_wake_at, as the change context's actor at
-- its instant: a row, no job; the timer sweep (timer_fire_due) fires it. A
-- step sleeps once: its timer, found by (run, step), is returned if there.
CREATE OR REPLACE FUNCTION docket.timer_arm_step(r docket.runs, p_step text, p_wake_at timestamptz) RETURNS docket.timers
LANGUAGE plpgsql AS $$
DECLARE
    v docket.timers;
BEGIN
    SELECT * INTO v FROM docket.timers WHERE run_id = r.id AND step_id = p_step;
    IF FOUND THEN
        RETURN v;
    END IF;
    INSERT INTO docket.timers (project, run_id, step_id, name, wake_at, created_by, created_at)
    VALUES (r.project, r.id, p_step, left('step.' || p_step, 63), p_wake_at, docket.context_actor(), docket.context_now())
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- timer_fire_due is the timer sweep: it fires up to p_limit armed step
-- timers whose instant has come at p_now (wake_at <= p_now), soonest first,
-- on behalf of p_actor, and answers each one's step, succeeded with
-- {"timer", "wake_at", "fired_at"} -- the instant it was due, however late
-- the sweep -- so its run moves on; returns them. It looks only at projects
-- where p_actor holds case.sweep. A range scan of timers_armed_idx; timers
-- another transaction holds locked are skipped, never waited for, so
-- several sweepers may run at once and a timer fires once. A case's timer
-- is a job: its queue's workers fire it, not this sweep.
-- Refuses: a malformed actor or instant, a limit outside 1..10000 (DK010).
CREATE OR REPLACE FUNCTION docket.timer_fire_due(p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.timers
LANGUAGE plpgsql AS $$
DECLARE
    t docket.timers;
    c record;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep batch', p_limit, 10000);
    FOR c IN
        SELECT id, run_id FROM docket.timers
        WHERE run_id IS NOT NULL AND fired_at IS NULL AND disarmed_at IS NULL AND wake_at <= p_now
          AND docket.grant_check(p_actor, project, 'case.sweep')
        ORDER BY wake_at, id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        UPDATE docket.timers SET fired_at = greatest(created_at, p_now) WHERE id = c.id RETURNING * INTO t;
        PERFORM docket.run_step_answered(t.run_id, t.step_id, 'succeeded',
            jsonb_build_object('timer', t.name, 'wake_at', t.wake_at, 'fired_at', t.fired_at), NULL);
        RETURN NEXT t;
    END LOOP;
END
$$;

-- runs_settle_waits runs when a run stops running -- it unwinds (a failed
-- step, a cancel), is exhausted no more, or ends -- by any route: what its
-- steps wait on is closed with it. Its undecided tasks are withdrawn, its
-- waiting waits withdrawn (their subscriptions retired: a message arriving
-- later is buffered or dead-lettered as any unmatched one, and wakes
-- nothing), its armed timers disarmed, and its waiting steps cancelled, in
-- the transaction that moved it.
CREATE OR REPLACE FUNCTION docket.runs_settle_waits() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := docket.context_now();
    v_actor text := docket.context_actor();
BEGIN
    UPDATE docket.tasks
    SET status = 'withdrawn', claimed_by = NULL, claim_token = NULL, claimed_at = NULL, claim_expires_at = NULL,
        settled_at = greatest(updated_at, v_now), updated_at = greatest(updated_at, v_now)
    WHERE run_id = NEW.id AND status IN ('pending', 'escalated');
    UPDATE docket.waits
    SET status = 'withdrawn', settled_at = greatest(created_at, v_now), settled_by = v_actor
    WHERE run_id = NEW.id AND status = 'waiting';
    UPDATE docket.timers SET disarmed_at = greatest(created_at, v_now)
    WHERE run_id = NEW.id AND fired_at IS NULL AND disarmed_at IS NULL;
    UPDATE docket.run_steps
    SET state = 'cancelled', updated_at = greatest(updated_at, v_now),
        reason = left(format('run %s stopped running (%s) while the step waited', NEW.id, NEW.status), 2000)
    WHERE run_id = NEW.id AND state = 'waiting';
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER runs_settle_waits
    AFTER UPDATE OF status ON docket.runs
    FOR EACH ROW WHEN (OLD.status IN ('running', 'exhausted') AND NEW.status NOT IN ('running', 'exhausted'))
    EXECUTE FUNCTION docket.runs_settle_waits();

-- The API ---------------------------------------------------------------------

INSERT INTO docket.api_functions (name, role) VALUES
    ('case_admit', 'app'), ('case_correlate', 'app'), ('case_put_state', 'app'), ('case_close', 'app'),
    ('case_reopen', 'app'), ('obligation_register', 'app'), ('obligation_settle', 'app'),
    ('obligation_breach_due', 'app'),
    ('message_deliver', 'app'), ('message_store', 'app'), ('message_offer', 'app'),
    ('message_dead_letter_due', 'app'), ('wait_register', 'app'), ('wait_withdraw', 'app'),
    ('wait_expire_due', 'app'), ('timer_set', 'app'), ('timer_set_caseless', 'app'), ('timer_fire_due', 'app');

-- Who may read what (row-level security; see kit.sql) --------------------------

-- Messages are visible where the login's principals hold message.deliver,
-- case.admit or case.view (as message_visible); waits and timers where they
-- hold case.view or case.admit (as case_visible), or plan.run for a run's.
CREATE POLICY messages_visible_to_deliverers_and_case_readers ON docket.messages FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('message.deliver', 'case.view', 'case.admit'))::text[]));

CREATE POLICY waits_visible_to_case_and_run_readers ON docket.waits FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('case.view', 'case.admit', 'plan.run'))::text[]));

CREATE POLICY timers_visible_to_case_and_run_readers ON docket.timers FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('case.view', 'case.admit', 'plan.run'))::text[]));
