-- Cases: the durable record of a business matter that outlives any one job:
-- which matter an inbound message belongs to (correlation keys), the matter's
-- state (versioned, never interpreted), and what is still owed by when
-- (obligations).
--
--   case status   open -> closed -> open (docket.case_transitions)
--   obligation    pending -> met | breached | withdrawn
--                 (docket.obligation_transitions; met, breached and withdrawn
--                 are terminal: re-applying the state held is a no-op, any
--                 other change is refused)
--
-- The invariants live here, for every writer, psql included:
--   * one open case per correlation key: a partial unique index over held keys
--     (case_keys_held), so concurrent admissions for one new matter make one
--     case; the index decides, never a read followed by a write;
--   * a state write names the version it read: a predicate on the UPDATE;
--     any change of state moves the version on (cases_guard);
--   * a closed case owes nothing: the UPDATE that closes it refuses while an
--     obligation is pending (DK006), an obligation, wait, timer or key is
--     made only on an open case, having written its row (case_hold, DK005:
--     a lock alone would let a REPEATABLE READ close miss it), and
--     closing releases the case's keys in the same statement; a key is
--     released only by its case's closing (DK001);
--   * obligations end once: terminal states never change (obligations_guard);
--   * every change appends a docket.case_events row carrying case_id.
--
-- Who may do what (explicit grants on the case's project):
--   case.admit  admit, correlate, write state, register, meet, withdraw and
--               breach obligations, close and reopen; read
--   case.view   read cases, keys, obligations and history
--   case.sweep  the breach sweep moves the project's due obligations
--               (and needs job.create to enqueue their escalations)
-- A case the actor may not read is not there: its functions answer P0002, as
-- for an unknown case.
--
-- Bounds: kind 1-128 characters; key namespace 1-63, value 1-255, 1-32 keys
-- per admission; state 1 MiB of JSON; obligation name 1-63; rule 500
-- characters; breach sweep batch 1..10000.
--
-- The messages, waits and timers of cases are waits.sql's; a case's rules
-- over all its tables are triggers, so they bind every writer, the owner's
-- hand-written SQL included.

-- The case machine's states and moves (docket.case_states, docket.case_transitions),
-- as 00026_cases.sql declares them.
SELECT docket.machine_views('case');

-- The obligation machine's states and moves (docket.obligation_states, docket.obligation_transitions),
-- as 00026_cases.sql declares them.
SELECT docket.machine_views('obligation');

-- cases_guard holds every INSERT and UPDATE of docket.cases to the case
-- machine: a case is born in an initial state (open) at version 1 (DK001)
-- and its status moves only along docket.case_transitions (DK001). What is
-- particular to cases: a closed case's state and version never change
-- (DK005); a change of state moves the version on by one, whatever the
-- writer set, and the version never moves otherwise by more than one
-- (DK015).
CREATE OR REPLACE FUNCTION docket.cases_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM docket.machine_birth('case', 'case', NEW.status);
        IF NEW.version IS DISTINCT FROM 1 OR NEW.closed_at IS NOT NULL THEN
            RAISE EXCEPTION 'case: a case is created at version 1, not closed, not at version %', NEW.version
                USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('case', 'case ' || OLD.id, OLD.status, NEW.status);
    IF (NEW.state IS DISTINCT FROM OLD.state OR NEW.version <> OLD.version)
       AND (OLD.status = 'closed' OR NEW.status = 'closed') THEN
        RAISE EXCEPTION 'case % is closed: its state cannot be written', OLD.id
            USING ERRCODE = 'DK005';
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        NEW.version := OLD.version + 1;
    ELSIF NEW.version NOT IN (OLD.version, OLD.version + 1) THEN
        RAISE EXCEPTION 'case %: version % cannot become %: it moves on by one with each state write', OLD.id, OLD.version, NEW.version
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NEW;
END
$$;

-- A case's events are not held to the order of their instants, as a task's
-- and a schedule's are (event_in_order): a case is written by many callers
-- at once (producers of messages, sweeps, people, its own jobs), each with
-- its own clock within the bound set_context holds it to, so two honest
-- callers' instants may interleave by up to that bound. The events' order is
-- their id's; each instant is its caller's, within the bound.

CREATE OR REPLACE TRIGGER cases_guard
    BEFORE INSERT OR UPDATE ON docket.cases
    FOR EACH ROW EXECUTE FUNCTION docket.cases_guard();

CREATE OR REPLACE TRIGGER cases_columns_immutable
    BEFORE UPDATE OF id, project, kind, created_by, created_at ON docket.cases
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

CREATE OR REPLACE TRIGGER project_takes_work
    BEFORE INSERT ON docket.cases
    FOR EACH ROW EXECUTE FUNCTION docket.project_takes_work();

-- case_hold writes case p_case_id (moves its guard_seq on) and returns it as
-- it is now; a row of NULLs when there is no such case. Every rule that
-- gives a case a duty (an obligation, wait, timer, task, key, run) holds the
-- case this way, not with a lock alone: a close that took its snapshot
-- before this write commits then fails (40001 under REPEATABLE READ and
-- SERIALIZABLE) or, under READ COMMITTED, waits and sees the duty. The case
-- machine and its events ignore the write. A case this transaction wrote
-- already (age(xmin) = 0) is not written again: its row is held, and one
-- statement registering 100,000 waits on a case writes it once, not a
-- chain of 100,000 versions.
CREATE OR REPLACE FUNCTION docket.case_hold(p_case_id bigint) RETURNS docket.cases
LANGUAGE plpgsql AS $$
DECLARE
    c docket.cases;
BEGIN
    UPDATE docket.cases SET guard_seq = guard_seq + 1 WHERE id = p_case_id AND age(xmin) <> 0 RETURNING * INTO c;
    IF NOT FOUND THEN
        SELECT * INTO c FROM docket.cases WHERE id = p_case_id;
    END IF;
    RETURN c;
END
$$;

-- case_keys_guard: a key is claimed, unreleased, by an open case (DK005
-- otherwise), held (case_hold) so a concurrent close sees it, with the
-- case's project; afterwards only released_at may be set
-- (case_keys_columns_immutable), once (DK015).
CREATE OR REPLACE FUNCTION docket.case_keys_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c docket.cases;
BEGIN
    IF TG_OP = 'INSERT' THEN
        c := docket.case_hold(NEW.case_id);
        IF c.id IS NULL THEN
            RAISE EXCEPTION 'case key: case % does not exist', coalesce(NEW.case_id::text, 'NULL')
                USING ERRCODE = '23503', CONSTRAINT = 'case_keys_case_fkey', TABLE = 'case_keys', SCHEMA = 'docket';
        END IF;
        IF c.status <> 'open' THEN
            RAISE EXCEPTION 'case % is closed: it cannot claim key (%, %)', c.id, NEW.namespace, NEW.value
                USING ERRCODE = 'DK005';
        END IF;
        IF NEW.project IS DISTINCT FROM c.project AND NEW.project IS NOT NULL THEN
            RAISE EXCEPTION 'case key: its project is its case''s, %, not %', c.project, NEW.project
                USING ERRCODE = 'DK015';
        END IF;
        IF NEW.released_at IS NOT NULL THEN
            RAISE EXCEPTION 'case %: a key is claimed unreleased', c.id USING ERRCODE = 'DK001';
        END IF;
        NEW.project := c.project;
        RETURN NEW;
    END IF;
    IF OLD.released_at IS NOT NULL AND NEW.released_at IS DISTINCT FROM OLD.released_at THEN
        RAISE EXCEPTION 'case key %: released_at is set once', OLD.id
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER case_keys_guard
    BEFORE INSERT OR UPDATE ON docket.case_keys
    FOR EACH ROW EXECUTE FUNCTION docket.case_keys_guard();

CREATE OR REPLACE TRIGGER case_keys_columns_immutable
    BEFORE UPDATE OF id, case_id, project, namespace, value, claimed_at ON docket.case_keys
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

-- obligations_guard: an obligation is born pending, unresolved, of an existing
-- case, with its project (DK001, 23503, DK015); nothing but its state, its
-- resolution and the job its breach enqueued ever changes (DK015); its state
-- moves only along docket.obligation_transitions, and a terminal obligation
-- never changes at all (DK001). An UPDATE that changes nothing passes: a
-- retry is not an edit.
CREATE OR REPLACE FUNCTION docket.obligations_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_project text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT project INTO v_project FROM docket.cases WHERE id = NEW.case_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'obligation %: case % does not exist', NEW.name, coalesce(NEW.case_id::text, 'NULL')
                USING ERRCODE = '23503', CONSTRAINT = 'obligations_case_fkey', TABLE = 'obligations', SCHEMA = 'docket';
        END IF;
        IF NEW.project IS DISTINCT FROM v_project AND NEW.project IS NOT NULL THEN
            RAISE EXCEPTION 'obligation %: its project is its case''s, %, not %', NEW.name, v_project, NEW.project
                USING ERRCODE = 'DK015';
        END IF;
        NEW.project := v_project;
        PERFORM docket.machine_birth('obligation', 'obligation ' || NEW.name, NEW.state);
        IF NEW.resolved_at IS NOT NULL OR NEW.escalation_job_id IS NOT NULL THEN
            RAISE EXCEPTION 'obligation %: an obligation is created unresolved, with no escalation', NEW.name
                USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('obligation', 'obligation ' || OLD.id, OLD.state, NEW.state);
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER obligations_guard
    BEFORE INSERT OR UPDATE ON docket.obligations
    FOR EACH ROW EXECUTE FUNCTION docket.obligations_guard();

CREATE OR REPLACE TRIGGER obligations_columns_immutable
    BEFORE UPDATE OF id, case_id, project, name, due_at, rule, calendar_digest, escalation_kind,
                     escalation_queue, escalation_payload, escalation_payload_schema,
                     escalation_max_attempts, created_by, created_at
    ON docket.obligations
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

-- Closing a case ----------------------------------------------------------------

-- cases_close_owes_nothing refuses (DK006) closing a case with a pending
-- obligation, by any writer. The UPDATE writes the case row, and
-- obligations_on_open_case writes it too before registering (case_hold): of
-- a close and a registration, the later one waits for the earlier and sees
-- it (READ COMMITTED) or fails with 40001 (REPEATABLE READ, SERIALIZABLE),
-- so no obligation is registered unseen by this check.
CREATE OR REPLACE FUNCTION docket.cases_close_owes_nothing() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_pending text;
BEGIN
    SELECT string_agg(format('%s (%s)', o.name, o.id), ', ' ORDER BY o.due_at, o.id) INTO v_pending
    FROM docket.obligations o WHERE o.case_id = NEW.id AND o.state = 'pending';
    IF v_pending IS NOT NULL THEN
        RAISE EXCEPTION 'case % cannot close: obligation(s) pending: %', NEW.id, v_pending
            USING ERRCODE = 'DK006';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER cases_close_owes_nothing
    BEFORE UPDATE ON docket.cases
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM 'closed' AND NEW.status = 'closed')
    EXECUTE FUNCTION docket.cases_close_owes_nothing();

-- cases_close_releases_keys releases the keys a closing case holds, at the
-- instant it closed, by any writer. Named to fire before cases_record, so a
-- case's history shows its keys released, then its close.
CREATE OR REPLACE FUNCTION docket.cases_close_releases_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE docket.case_keys SET released_at = greatest(claimed_at, NEW.closed_at)
    WHERE case_id = NEW.id AND released_at IS NULL;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER cases_close_releases_keys
    AFTER UPDATE ON docket.cases
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM 'closed' AND NEW.status = 'closed')
    EXECUTE FUNCTION docket.cases_close_releases_keys();

-- case_keys_release_on_close refuses (DK001) releasing a key of a case that
-- is not closed: only its closing releases it.
CREATE OR REPLACE FUNCTION docket.case_keys_release_on_close() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT status FROM docket.cases WHERE id = NEW.case_id) IS DISTINCT FROM 'closed' THEN
        RAISE EXCEPTION 'case key %: case % is open: a key is released only when its case closes', OLD.id, OLD.case_id
            USING ERRCODE = 'DK001';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER case_keys_release_on_close
    BEFORE UPDATE ON docket.case_keys
    FOR EACH ROW WHEN (OLD.released_at IS NULL AND NEW.released_at IS NOT NULL)
    EXECUTE FUNCTION docket.case_keys_release_on_close();

-- obligations_on_open_case refuses (DK005) an obligation registered on a
-- closed case, by any writer, having written the case row (case_hold) that a
-- close's UPDATE writes too.
CREATE OR REPLACE FUNCTION docket.obligations_on_open_case() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (docket.case_hold(NEW.case_id)).status = 'closed' THEN
        RAISE EXCEPTION 'case % is closed: it cannot owe %', NEW.case_id, NEW.name
            USING ERRCODE = 'DK005';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER obligations_on_open_case
    BEFORE INSERT ON docket.obligations
    FOR EACH ROW EXECUTE FUNCTION docket.obligations_on_open_case();

-- cases_record appends the case_events rows of a case's creation, status
-- change and state write, attributed to the change context.
CREATE OR REPLACE FUNCTION docket.cases_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at, detail)
        VALUES (NEW.id, 'created', NULL, NEW.status, docket.context_actor(), docket.context_now(),
                jsonb_build_object('kind', NEW.kind));
        RETURN NULL;
    END IF;
    IF NEW.status <> OLD.status THEN
        INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at)
        VALUES (NEW.id, 'status', OLD.status, NEW.status, docket.context_actor(), docket.context_now());
    END IF;
    IF NEW.version <> OLD.version THEN
        INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at)
        VALUES (NEW.id, 'state', OLD.version::text, NEW.version::text, docket.context_actor(), docket.context_now());
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER cases_record
    AFTER INSERT OR UPDATE ON docket.cases
    FOR EACH ROW EXECUTE FUNCTION docket.cases_record();

-- case_keys_record appends key_claimed and key_released events.
CREATE OR REPLACE FUNCTION docket.case_keys_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NOT (OLD.released_at IS NULL AND NEW.released_at IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    INSERT INTO docket.case_events (case_id, what, actor, at, detail)
    VALUES (NEW.case_id, CASE TG_OP WHEN 'INSERT' THEN 'key_claimed' ELSE 'key_released' END,
            docket.context_actor(), docket.context_now(),
            jsonb_build_object('namespace', NEW.namespace, 'value', NEW.value));
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER case_keys_record
    AFTER INSERT OR UPDATE ON docket.case_keys
    FOR EACH ROW EXECUTE FUNCTION docket.case_keys_record();

-- obligations_record appends an obligation event for a registration and for
-- each move of an obligation's state.
CREATE OR REPLACE FUNCTION docket.obligations_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        RETURN NULL;
    END IF;
    INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at, detail)
    VALUES (NEW.case_id, 'obligation', CASE WHEN TG_OP = 'UPDATE' THEN OLD.state END, NEW.state,
            docket.context_actor(), docket.context_now(),
            jsonb_strip_nulls(jsonb_build_object(
                'obligation_id', NEW.id, 'name', NEW.name, 'due_at', NEW.due_at,
                'rule', CASE WHEN TG_OP = 'INSERT' THEN NEW.rule END,
                'calendar_digest', CASE WHEN TG_OP = 'INSERT' THEN NEW.calendar_digest END,
                'escalation_job_id', NEW.escalation_job_id)));
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER obligations_record
    AFTER INSERT OR UPDATE ON docket.obligations
    FOR EACH ROW EXECUTE FUNCTION docket.obligations_record();

-- Reading -------------------------------------------------------------------------

-- case_visible reports whether p_principal may read the cases of p_project: it
-- holds case.admit or case.view there. The Go API filters every read by it;
-- an operator in psql reads everything.
CREATE OR REPLACE FUNCTION docket.case_visible(p_principal text, p_project text) RETURNS boolean
LANGUAGE sql STABLE
RETURN EXISTS (
    SELECT 1 FROM docket.grants
    WHERE project = p_project AND principal = p_principal AND capability IN ('case.admit', 'case.view')
);

-- Operator views ------------------------------------------------------------------
-- Storage never reads the clock: the views order by the instant that matters
-- and the reader filters with the instant they mean:
--     SELECT * FROM docket.obligations_due WHERE due_at <= '2026-11-29 10:00Z'

CREATE OR REPLACE VIEW docket.obligations_due WITH (security_invoker = true) AS
SELECT o.id, o.case_id, o.project, c.kind AS case_kind, o.name, o.due_at, o.rule, o.calendar_digest,
       o.escalation_kind, o.created_at
FROM docket.obligations o
JOIN docket.cases c ON c.id = o.case_id
WHERE o.state = 'pending'
ORDER BY o.due_at, o.id;

COMMENT ON VIEW docket.obligations_due IS
    'Pending obligations, soonest due first. Due at instant T: WHERE due_at <= T; the breach sweep moves them.';

CREATE OR REPLACE VIEW docket.cases_open_with_obligations WITH (security_invoker = true) AS
SELECT c.id, c.project, c.kind, c.version, count(*) AS pending, min(o.due_at) AS next_due, c.updated_at
FROM docket.cases c
JOIN docket.obligations o ON o.case_id = c.id AND o.state = 'pending'
WHERE c.status = 'open'
GROUP BY c.id
ORDER BY min(o.due_at), c.id;

COMMENT ON VIEW docket.cases_open_with_obligations IS
    'Open cases that still owe something: how many obligations are pending and when the next falls due.';

-- Protocol --------------------------------------------------------------------------

-- case_authorize returns the project of case p_id when p_actor holds case.admit
-- there, reading the case's project (which never changes) unlocked. It
-- refuses with P0002, in the same words, an unknown case and one the actor
-- may not write, so a refused caller learns nothing and waits for nobody.
CREATE OR REPLACE FUNCTION docket.case_authorize(p_id bigint, p_actor text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_project text;
BEGIN
    SELECT project INTO v_project FROM docket.cases WHERE id = p_id;
    IF NOT FOUND OR NOT docket.grant_check(p_actor, v_project, 'case.admit') THEN
        RAISE EXCEPTION 'case % does not exist (or % holds no case.admit on its project)', coalesce(p_id::text, 'NULL'), p_actor
            USING ERRCODE = 'P0002';
    END IF;
    RETURN v_project;
END
$$;

-- case_require_keys refuses (DK010) a key set that is not 1-32 well-formed,
-- distinct (namespace, value) pairs given as parallel arrays, each value in
-- Unicode NFC.
CREATE OR REPLACE FUNCTION docket.case_require_keys(p_namespaces text[], p_values text[]) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    bad record;
BEGIN
    IF cardinality(p_namespaces) IS DISTINCT FROM cardinality(p_values) THEN
        RAISE EXCEPTION 'invalid keys: namespaces and values must be parallel arrays of one length' USING ERRCODE = 'DK010';
    END IF;
    IF cardinality(p_namespaces) NOT BETWEEN 1 AND 32 THEN
        RAISE EXCEPTION 'invalid keys: % keys, want 1..32', cardinality(p_namespaces) USING ERRCODE = 'DK010';
    END IF;
    SELECT x.ns, x.val INTO bad FROM unnest(p_namespaces, p_values) AS x(ns, val)
    WHERE NOT coalesce(docket.valid_case_key_namespace(x.ns), false) LIMIT 1;
    IF FOUND THEN
        PERFORM docket.require_valid(false, 'key namespace', bad.ns, '1-63 characters of [a-z0-9._-], starting with a letter or digit');
    END IF;
    SELECT x.ns, x.val INTO bad FROM unnest(p_namespaces, p_values) AS x(ns, val)
    WHERE NOT coalesce(docket.valid_case_key_value(x.val), false) LIMIT 1;
    IF FOUND THEN
        PERFORM docket.require_valid(false, 'key value', bad.val, '1-255 characters, no control characters, no leading or trailing space');
    END IF;
    -- A key is an identity: docket never rewrites it, so one not in Unicode
    -- NFC is refused, not normalized (the tables hold the same rule).
    SELECT x.ns, x.val INTO bad FROM unnest(p_namespaces, p_values) AS x(ns, val)
    WHERE NOT x.val IS NFC NORMALIZED LIMIT 1;
    IF FOUND THEN
        PERFORM docket.require_valid(false, 'key value', bad.val, 'Unicode NFC (normalize keys to NFC before sending them)');
    END IF;
    SELECT x.ns, x.val INTO bad FROM unnest(p_namespaces, p_values) AS x(ns, val)
    GROUP BY x.ns, x.val HAVING count(*) > 1 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid keys: (%, %) is given twice', bad.ns, bad.val USING ERRCODE = 'DK010';
    END IF;
END
$$;

-- case_key_holders returns the ids of the cases of p_project that hold any of
-- the keys, ascending. VOLATILE, so each call sees what committed before it.
CREATE OR REPLACE FUNCTION docket.case_key_holders(p_project text, p_namespaces text[], p_values text[]) RETURNS bigint[]
LANGUAGE sql VOLATILE
RETURN ARRAY(
    SELECT DISTINCT k.case_id
    FROM unnest(p_namespaces, p_values) AS x(ns, val)
    JOIN docket.case_keys k ON k.project = p_project AND k.namespace = x.ns AND k.value = x.val AND k.released_at IS NULL
    ORDER BY k.case_id);

-- case_ambiguous refuses (DK011) keys held by the open cases p_holders,
-- naming the first two.
CREATE OR REPLACE FUNCTION docket.case_ambiguous(p_holders bigint[]) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RAISE EXCEPTION 'keys point at two different open cases: % and %', p_holders[1], p_holders[2]
        USING ERRCODE = 'DK011', DETAIL = 'cases ' || array_to_string(p_holders, ', ');
END
$$;

-- case_admitted is the row case_admit returns: whether the case was created by
-- this admission, and the case.
CREATE OR REPLACE VIEW docket.case_admitted WITH (security_invoker = true) AS
SELECT false AS created, c.* FROM docket.cases c WHERE false;

-- case_admit finds the open case of p_project holding any of the keys
-- (p_namespaces[i], p_values[i]), or creates one of kind p_kind holding them
-- all, on behalf of p_actor at p_now, and returns it with created = true when
-- it is new. The keys of a found case that no case holds are attached to it;
-- p_kind is used only to create.
--
-- Concurrent admissions for one new matter make exactly one case: each tries
-- to create the case and claim its keys, and the unique index case_keys_held
-- lets one claim win; the others roll their attempt back to a savepoint, find
-- the winner's case and return it. A case found is locked (FOR NO KEY UPDATE)
-- before keys are attached, so an admission racing a close either attaches
-- before the close (which then releases them) or sees the case closed and
-- looks again. Needs READ COMMITTED: under a stricter isolation level a lost
-- race is a serialization failure (40001), to be retried.
--
-- Refuses, writing nothing: a malformed project, kind, actor, instant or key
-- set (DK010); an actor without case.admit on p_project, or an unknown
-- project (DK009); keys held by two different open cases (DK011, naming
-- both).
CREATE OR REPLACE FUNCTION docket.case_admit(p_project text, p_kind text, p_namespaces text[], p_values text[],
                                  p_actor text, p_now timestamptz)
RETURNS SETOF docket.case_admitted
LANGUAGE plpgsql AS $$
DECLARE
    v docket.cases;
    v_holders bigint[];
    v_constraint text;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.require_valid(docket.valid_job_kind(p_kind), 'case kind', p_kind,
        'dot-separated segments of [a-z0-9_-], each starting with a letter, at most 128 characters');
    PERFORM docket.case_require_keys(p_namespaces, p_values);
    IF NOT docket.grant_check(p_actor, p_project, 'case.admit') THEN
        RAISE EXCEPTION '% may not admit cases in project %: it needs an explicit case.admit grant', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;

    FOR attempt IN 1..16 LOOP
        v_holders := docket.case_key_holders(p_project, p_namespaces, p_values);
        IF cardinality(v_holders) > 1 THEN
            PERFORM docket.case_ambiguous(v_holders);
        END IF;
        IF cardinality(v_holders) = 1 THEN
            SELECT * INTO v FROM docket.cases WHERE id = v_holders[1] FOR NO KEY UPDATE;
            IF v.status = 'open' THEN
                INSERT INTO docket.case_keys (case_id, project, namespace, value, claimed_at)
                SELECT v.id, p_project, x.ns, x.val, p_now
                FROM unnest(p_namespaces, p_values) AS x(ns, val)
                ORDER BY x.ns, x.val
                ON CONFLICT (project, namespace, value) WHERE released_at IS NULL DO NOTHING;
                v_holders := docket.case_key_holders(p_project, p_namespaces, p_values);
                IF cardinality(v_holders) > 1 THEN
                    PERFORM docket.case_ambiguous(v_holders);
                END IF;
                RETURN QUERY SELECT false, (v).*;
                RETURN;
            END IF;
            -- Closed since the keys were read: its keys are free now.
            CONTINUE;
        END IF;
        BEGIN
            INSERT INTO docket.cases (project, kind, created_by, created_at, updated_at)
            VALUES (p_project, p_kind, p_actor, p_now, p_now)
            RETURNING * INTO v;
            INSERT INTO docket.case_keys (case_id, project, namespace, value, claimed_at)
            SELECT v.id, p_project, x.ns, x.val, p_now
            FROM unnest(p_namespaces, p_values) AS x(ns, val)
            ORDER BY x.ns, x.val;
            RETURN QUERY SELECT true, (v).*;
            RETURN;
        EXCEPTION WHEN unique_violation THEN
            GET STACKED DIAGNOSTICS v_constraint = CONSTRAINT_NAME;
            IF v_constraint IS DISTINCT FROM 'case_keys_held' THEN
                RAISE;
            END IF;
            -- Another admission claimed a key first: look again.
        END;
    END LOOP;
    RAISE EXCEPTION 'case admission in project %: the keys kept changing hands; retry', p_project
        USING ERRCODE = '40001';
END
$$;

-- case_correlate returns the open case of p_project holding any of the keys,
-- or no row when none does; it creates and attaches nothing.
-- Refuses: malformed input (DK010); an actor without case.admit on p_project,
-- or an unknown project (DK009); keys held by two open cases (DK011).
CREATE OR REPLACE FUNCTION docket.case_correlate(p_project text, p_namespaces text[], p_values text[], p_actor text)
RETURNS SETOF docket.cases
LANGUAGE plpgsql AS $$
DECLARE
    v_holders bigint[];
BEGIN
    PERFORM docket.require_actor(p_actor);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.case_require_keys(p_namespaces, p_values);
    IF NOT docket.grant_check(p_actor, p_project, 'case.admit') THEN
        RAISE EXCEPTION '% may not correlate cases in project %: it needs an explicit case.admit grant', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    v_holders := docket.case_key_holders(p_project, p_namespaces, p_values);
    IF cardinality(v_holders) > 1 THEN
        PERFORM docket.case_ambiguous(v_holders);
    END IF;
    -- A case closed since its keys were read holds none now.
    RETURN QUERY SELECT * FROM docket.cases WHERE id = v_holders[1] AND status = 'open';
END
$$;

-- case_put_state writes p_state as case p_id's state if its version is still
-- p_expected_version, on behalf of p_actor at p_now, and returns the case at
-- its new version (p_expected_version + 1). The check is a predicate on the
-- one UPDATE, never a read followed by a write. The state is stored as given
-- and never interpreted.
-- Refuses, writing nothing: a malformed actor or instant, a NULL state or
-- expected version (DK010); a state over 1 MiB (23514 on case_state_size);
-- an unknown case or one the actor may not write (P0002); a closed case
-- (DK005); a version other than p_expected_version (DK004, naming the
-- current one).
CREATE OR REPLACE FUNCTION docket.case_put_state(p_id bigint, p_expected_version bigint, p_state jsonb,
                                      p_actor text, p_now timestamptz)
RETURNS docket.cases
LANGUAGE plpgsql AS $$
DECLARE
    v docket.cases;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF p_state IS NULL THEN
        RAISE EXCEPTION 'invalid state: NULL (write {} or null JSON instead)' USING ERRCODE = 'DK010';
    END IF;
    IF p_expected_version IS NULL OR p_expected_version < 1 THEN
        RAISE EXCEPTION 'invalid expected version %: a write names the version it read (1 or more)',
            coalesce(p_expected_version::text, 'NULL') USING ERRCODE = 'DK010';
    END IF;
    PERFORM docket.case_authorize(p_id, p_actor);
    UPDATE docket.cases
    SET state = p_state, version = version + 1, updated_at = greatest(updated_at, p_now)
    WHERE id = p_id AND version = p_expected_version AND status = 'open'
    RETURNING * INTO v;
    IF FOUND THEN
        RETURN v;
    END IF;
    SELECT * INTO v FROM docket.cases WHERE id = p_id;
    IF v.status = 'closed' THEN
        RAISE EXCEPTION 'case % is closed: its state cannot be written', p_id USING ERRCODE = 'DK005';
    END IF;
    RAISE EXCEPTION 'case %: version is %, not %: its state was written since it was read', p_id, v.version, p_expected_version
        USING ERRCODE = 'DK004', DETAIL = 'current version ' || v.version;
END
$$;

-- case_close closes case p_id on behalf of p_actor at p_now; its keys are
-- released and its waits, buffered addressed messages and unfired timers
-- settled by the closing UPDATE's triggers. Closing a closed case is a
-- no-op that returns it. The pending check is made under the case row's lock,
-- which obligation_register takes too: no obligation can be registered
-- between the count and the close.
-- Refuses, writing nothing: a malformed actor or instant (DK010); an unknown
-- case or one the actor may not write (P0002); pending obligations (DK006,
-- naming up to ten).
CREATE OR REPLACE FUNCTION docket.case_close(p_id bigint, p_actor text, p_now timestamptz)
RETURNS docket.cases
LANGUAGE plpgsql AS $$
DECLARE
    v docket.cases;
    v_pending text;
    v_count bigint;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.case_authorize(p_id, p_actor);
    SELECT * INTO v FROM docket.cases WHERE id = p_id FOR NO KEY UPDATE;
    IF v.status = 'closed' THEN
        RETURN v;
    END IF;
    SELECT count(*), string_agg(format('%s (%s, due %s)', name, id, due_at), ', ' ORDER BY due_at, id)
           FILTER (WHERE rn <= 10)
    INTO v_count, v_pending
    FROM (SELECT o.*, row_number() OVER (ORDER BY o.due_at, o.id) AS rn
          FROM docket.obligations o WHERE o.case_id = p_id AND o.state = 'pending') p;
    IF v_count > 0 THEN
        RAISE EXCEPTION 'case % cannot close: % obligation(s) pending: %', p_id, v_count, v_pending
            USING ERRCODE = 'DK006';
    END IF;
    UPDATE docket.cases SET status = 'closed', closed_at = p_now, updated_at = greatest(updated_at, p_now)
    WHERE id = p_id
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- case_reopened is a row of what case_reopen returns: a key the case held
-- when it closed, and whether the reopening took it back.
CREATE OR REPLACE VIEW docket.case_reopened WITH (security_invoker = true) AS
SELECT ''::text AS namespace, ''::text AS value, false AS taken WHERE false;

-- case_reopen reopens case p_id on behalf of p_actor at p_now and takes back
-- the keys it held when it closed that no open case has claimed since; a key
-- another case claimed stays with that case. It returns each of those keys
-- with taken true or false, by namespace and value. Reopening an open case is
-- a no-op that returns no rows.
-- Refuses, writing nothing: a malformed actor or instant (DK010); an unknown
-- case or one the actor may not write (P0002).
CREATE OR REPLACE FUNCTION docket.case_reopen(p_id bigint, p_actor text, p_now timestamptz)
RETURNS SETOF docket.case_reopened
LANGUAGE plpgsql AS $$
DECLARE
    v docket.cases;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.case_authorize(p_id, p_actor);
    SELECT * INTO v FROM docket.cases WHERE id = p_id FOR NO KEY UPDATE;
    IF v.status = 'open' THEN
        RETURN;
    END IF;
    UPDATE docket.cases SET status = 'open', closed_at = NULL, updated_at = greatest(updated_at, p_now)
    WHERE id = p_id;
    RETURN QUERY
    WITH wanted AS (
        SELECT DISTINCT k.namespace, k.value FROM docket.case_keys k
        WHERE k.case_id = p_id AND k.released_at = greatest(k.claimed_at, v.closed_at)
    ), taken AS (
        INSERT INTO docket.case_keys (case_id, project, namespace, value, claimed_at)
        SELECT p_id, v.project, w.namespace, w.value, greatest(p_now, v.closed_at)
        FROM wanted w ORDER BY w.namespace, w.value
        ON CONFLICT (project, namespace, value) WHERE released_at IS NULL DO NOTHING
        RETURNING case_keys.namespace, case_keys.value
    )
    SELECT w.namespace, w.value, t.namespace IS NOT NULL
    FROM wanted w LEFT JOIN taken t ON t.namespace = w.namespace AND t.value = w.value
    ORDER BY w.namespace, w.value;
END
$$;

-- obligation_register registers obligation p_name of case p_id, due at
-- p_due_at, on behalf of p_actor at p_now, and returns it pending. p_rule and
-- p_calendar_digest (both or neither) record the spec the instant was resolved
-- from and the calendar that resolved it; the instant is never recomputed.
-- p_escalation_kind (NULL: none) with its queue, payload, payload schema and
-- max attempts is the job a breach enqueues, in the case's project, naming
-- the case. Registering again what is already pending under that name, on the
-- same terms, is a no-op that returns it. Decided under the case row's lock,
-- which case_close takes too.
-- Refuses, writing nothing: malformed input (DK010); an unknown case or one
-- the actor may not write (P0002); a closed case (DK005); a pending
-- obligation of that name on other terms (23505 on obligations_pending_name).
CREATE OR REPLACE FUNCTION docket.obligation_register(
    p_case_id bigint, p_name text, p_due_at timestamptz, p_rule text, p_calendar_digest text,
    p_escalation_kind text, p_escalation_queue text, p_escalation_payload jsonb,
    p_escalation_payload_schema integer, p_escalation_max_attempts integer,
    p_actor text, p_now timestamptz)
RETURNS docket.obligations
LANGUAGE plpgsql AS $$
DECLARE
    c docket.cases;
    v docket.obligations;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(docket.valid_case_key_namespace(p_name), 'obligation name', p_name,
        '1-63 characters of [a-z0-9._-], starting with a letter or digit');
    IF p_due_at IS NULL OR NOT isfinite(p_due_at) OR p_due_at < '1970-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'invalid due instant %: want a finite instant after 1970', coalesce(p_due_at::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    IF (p_rule IS NULL) <> (p_calendar_digest IS NULL) THEN
        RAISE EXCEPTION 'invalid obligation %: a rule and a calendar digest come together, or neither', p_name
            USING ERRCODE = 'DK010';
    END IF;
    IF p_rule IS NOT NULL THEN
        PERFORM docket.require_valid(length(p_rule) BETWEEN 1 AND 500, 'rule', p_rule, '1-500 characters');
        PERFORM docket.require_valid(docket.valid_calendar_digest(p_calendar_digest), 'calendar digest', p_calendar_digest,
            'sha256: and 64 lowercase hex digits');
    END IF;
    IF p_escalation_kind IS NOT NULL THEN
        PERFORM docket.job_require_spec(1, p_escalation_kind, p_escalation_queue, p_escalation_payload,
                                        p_escalation_max_attempts);
        PERFORM docket.require_valid(p_escalation_payload_schema >= 1, 'escalation payload schema',
            p_escalation_payload_schema::text, '1 or more');
    ELSE
        -- No escalation: its other terms mean nothing, and are not stored.
        p_escalation_queue := NULL;
        p_escalation_payload := NULL;
        p_escalation_payload_schema := NULL;
        p_escalation_max_attempts := NULL;
    END IF;
    PERFORM docket.case_authorize(p_case_id, p_actor);

    SELECT * INTO c FROM docket.cases WHERE id = p_case_id FOR NO KEY UPDATE;
    IF c.status <> 'open' THEN
        RAISE EXCEPTION 'case % is closed: it cannot be given obligation %', p_case_id, p_name
            USING ERRCODE = 'DK005';
    END IF;
    SELECT * INTO v FROM docket.obligations WHERE case_id = p_case_id AND name = p_name AND state = 'pending';
    IF FOUND THEN
        IF (v.due_at, v.rule, v.calendar_digest, v.escalation_kind, v.escalation_queue, v.escalation_payload,
            v.escalation_payload_schema, v.escalation_max_attempts)
           IS NOT DISTINCT FROM
           (p_due_at, p_rule, p_calendar_digest, p_escalation_kind, p_escalation_queue, p_escalation_payload,
            p_escalation_payload_schema, p_escalation_max_attempts) THEN
            RETURN v;
        END IF;
        RAISE EXCEPTION 'case % already owes % (obligation %, due %) on other terms', p_case_id, p_name, v.id, v.due_at
            USING ERRCODE = '23505', CONSTRAINT = 'obligations_pending_name', TABLE = 'obligations', SCHEMA = 'docket';
    END IF;
    INSERT INTO docket.obligations (case_id, project, name, due_at, rule, calendar_digest, escalation_kind,
                                    escalation_queue, escalation_payload, escalation_payload_schema,
                                    escalation_max_attempts, created_by, created_at)
    VALUES (p_case_id, c.project, p_name, p_due_at, p_rule, p_calendar_digest, p_escalation_kind,
            p_escalation_queue, p_escalation_payload, p_escalation_payload_schema, p_escalation_max_attempts,
            p_actor, p_now)
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- obligation_breach moves the pending obligation p (which the caller holds
-- locked) to breached on behalf of p_actor at p_now, enqueuing its escalation
-- job (if it names one) in the same transaction, in the case's project, naming
-- the case, under idempotency key obligation:ID:breach so it is never enqueued
-- twice. Refuses as job_enqueue_one (DK009 without job.create).
CREATE OR REPLACE FUNCTION docket.obligation_breach(p docket.obligations, p_actor text, p_now timestamptz)
RETURNS docket.obligations
LANGUAGE plpgsql AS $$
DECLARE
    v_job bigint;
    v docket.obligations;
BEGIN
    IF p.escalation_kind IS NOT NULL THEN
        SELECT e.id INTO v_job
        FROM docket.job_enqueue_one(
            p.project, p_actor, p_now, p.escalation_kind, p.escalation_queue, 1::smallint, p.escalation_payload,
            p.escalation_payload_schema, 'obligation:' || p.id || ':breach', NULL, p.escalation_max_attempts,
            false, false, interval '5 minutes', interval '1 second', interval '10 minutes', 0.2,
            NULL, '{}', '', 0, p.case_id, '') e;
    END IF;
    UPDATE docket.obligations
    SET state = 'breached', resolved_at = greatest(created_at, p_now), resolved_by = p_actor, escalation_job_id = v_job
    WHERE id = p.id
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- obligation_settle moves obligation p_id to p_state (met, withdrawn or
-- breached) on behalf of p_actor at p_now and returns it. A breach enqueues
-- the escalation job the obligation names (see obligation_breach).
-- Re-applying the state it holds is a no-op that records nothing. Meeting a
-- breached obligation records a late_meet event beside the breach (once) and
-- changes nothing: the breach stands.
-- Refuses, writing nothing: a malformed state, actor or instant (DK010); an
-- unknown obligation or one whose case the actor may not write (P0002); any
-- other move out of a terminal state (DK001); a breach whose escalation the
-- actor may not enqueue (DK009).
CREATE OR REPLACE FUNCTION docket.obligation_settle(p_id bigint, p_state text, p_actor text, p_now timestamptz)
RETURNS docket.obligations
LANGUAGE plpgsql AS $$
DECLARE
    v docket.obligations;
    v_project text;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF p_state IS NULL OR p_state NOT IN ('met', 'withdrawn', 'breached') THEN
        RAISE EXCEPTION 'invalid obligation state %: want met, withdrawn or breached',
            coalesce(quote_literal(docket.bounded_text(p_state, 80)), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    -- The privilege first, reading the project (which never changes) unlocked.
    SELECT project INTO v_project FROM docket.obligations WHERE id = p_id;
    IF NOT FOUND OR NOT docket.grant_check(p_actor, v_project, 'case.admit') THEN
        RAISE EXCEPTION 'obligation % does not exist (or % holds no case.admit on its project)', coalesce(p_id::text, 'NULL'), p_actor
            USING ERRCODE = 'P0002';
    END IF;
    SELECT * INTO v FROM docket.obligations WHERE id = p_id FOR UPDATE;
    IF v.state = p_state THEN
        RETURN v;
    END IF;
    IF v.state = 'breached' AND p_state = 'met' THEN
        IF NOT EXISTS (SELECT 1 FROM docket.case_events e
                       WHERE e.case_id = v.case_id AND e.what = 'late_meet' AND (e.detail ->> 'obligation_id')::bigint = v.id) THEN
            INSERT INTO docket.case_events (case_id, what, from_state, to_state, actor, at, detail)
            VALUES (v.case_id, 'late_meet', 'breached', 'met', p_actor, p_now,
                    jsonb_build_object('obligation_id', v.id, 'name', v.name, 'due_at', v.due_at,
                                       'breached_at', v.resolved_at));
        END IF;
        RETURN v;
    END IF;
    IF v.state <> 'pending' THEN
        RAISE EXCEPTION 'obligation % is %, a terminal state: it cannot become %', v.id, v.state, p_state
            USING ERRCODE = 'DK001';
    END IF;
    IF p_state = 'breached' THEN
        RETURN docket.obligation_breach(v, p_actor, p_now);
    END IF;
    UPDATE docket.obligations SET state = p_state, resolved_at = greatest(created_at, p_now), resolved_by = p_actor
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- obligation_breach_due is the breach sweep: it moves up to p_limit pending
-- obligations due at p_now (due_at <= p_now), soonest first, to breached on
-- behalf of p_actor, each enqueuing its escalation job, and returns them. It
-- looks only at projects where p_actor holds case.sweep, and at obligations
-- with an escalation only where it also holds job.create. A range scan of
-- obligations_due_idx; obligations another sweeper holds locked are skipped,
-- never waited for, so several sweepers may run at once.
-- Refuses: a malformed actor or instant, a limit outside 1..10000 (DK010).
CREATE OR REPLACE FUNCTION docket.obligation_breach_due(p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.obligations
LANGUAGE plpgsql AS $$
DECLARE
    o docket.obligations;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep batch', p_limit, 10000);
    FOR o IN
        SELECT * FROM docket.obligations
        WHERE state = 'pending' AND due_at <= p_now
          AND docket.grant_check(p_actor, project, 'case.sweep')
          AND (escalation_kind IS NULL OR docket.grant_check(p_actor, project, 'job.create'))
        ORDER BY due_at, id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        RETURN NEXT docket.obligation_breach(o, p_actor, p_now);
    END LOOP;
END
$$;

-- Who may read what (row-level security; see kit.sql) --------------------------

-- A case, its keys and obligations are visible where the login's principals
-- hold case.view or case.admit (as case_visible); its events with it.
CREATE POLICY cases_visible_to_case_readers ON docket.cases FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('case.view', 'case.admit'))::text[]));

CREATE POLICY case_keys_visible_to_case_readers ON docket.case_keys FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('case.view', 'case.admit'))::text[]));

CREATE POLICY obligations_visible_to_case_readers ON docket.obligations FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('case.view', 'case.admit'))::text[]));

CREATE POLICY case_events_visible_with_their_case ON docket.case_events FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.cases c WHERE c.id = case_id));
