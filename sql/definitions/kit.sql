-- The kit: what every aggregate's definitions stand on.
--
--   * the require_* checks: a malformed argument refused (DK010) naming the
--     field, the value and the rule;
--   * the change context: set_context(actor, now) records who changes docket
--     and at which instant for the rest of the transaction, and refuses an
--     actor the session's login role is not bound to (DK009), and an instant
--     outside the skew the database allows the caller's clock (DK016,
--     clock_bound: the one function that reads the database's clock, only to
--     bound the caller's; every decision is by the caller's instant);
--   * the machine kit: the checks every guard makes of a state machine's
--     rows (machine_birth, machine_move, machine_terminal, refuse_immutable),
--     and the trigger that keeps the machines' rows as migrated;
--   * the refusals: of an update or delete of an append-only record
--     (refuse_change), of TRUNCATE on every docket table (refuse_truncate);
--   * the trust boundary: four NOLOGIN group roles, granted to login roles
--     by the DBA --
--       docket_app       calls the API functions; reads the tables;
--       docket_operator  what docket_app may, and the operator functions:
--                        projects, actor bindings;
--       docket_reader    the tables and views, nothing else;
--       docket_worker    what River's client needs of River's tables;
--       docket_clock     may give any instant (tests, the demo,
--                        simulations): its members' clocks are not
--                        bounded by the database's --
--     none of which holds INSERT, UPDATE, DELETE, TRUNCATE, TRIGGER or
--     REFERENCES on a docket table (but INSERT on docket.job_intake, whose
--     statement trigger checks and moves every row as the API would):
--     every change goes through an API function, which runs SECURITY
--     DEFINER as the schema owner with search_path pinned. Each definition file lists its API functions in
--     docket.api_functions, and privileges.sql, applied last, calls
--     docket.apply_privileges(). Where the migrating role may not create
--     roles, the roles are left for a DBA (docs/security.md) and
--     apply_privileges grants what it can.
--
-- The files of this directory hold docket's code: every function, trigger
-- and view, each written once, in its current form, with its contract in a
-- comment above it. The tables, types, indexes, constraints and seed rows
-- they work on are the versioned migrations' (sql/schema), with the few
-- IMMUTABLE functions their CHECKs and domains call. docket migrate (and
-- db.Migrate) applies these files after the migrations, in the order of
-- definitions.Order, in one transaction, whenever they differ from the ones
-- the database last had; a function, trigger or view that no file creates
-- any more is dropped then. So every statement here may run again at any
-- time: CREATE OR REPLACE, or DROP ... IF EXISTS and CREATE where Postgres
-- has no OR REPLACE (a constraint trigger).

-- Names -----------------------------------------------------------------------
-- (valid_project_name, valid_principal, valid_capability, json_size and the
-- domain docket.principal are 00021_kit.sql's: CHECKs call them.)

-- The require_* functions refuse what they are given or return nothing.
-- They are STABLE, not IMMUTABLE, though they read nothing: a call of an
-- IMMUTABLE function with constant arguments is evaluated while planning, so
-- a plpgsql statement calling it with its variables would get a custom plan
-- cheaper than the generic one, and be planned again at every call.

-- require_principal refuses (DK010) a null or malformed principal, naming
-- what the argument is for (actor, principal, …) in the message.
CREATE OR REPLACE FUNCTION docket.require_principal(p_what text, p_value text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_value IS NULL OR NOT docket.valid_principal(p_value) THEN
        RAISE EXCEPTION 'invalid % %: want kind:name, e.g. svc:billing', p_what, coalesce(quote_literal(p_value), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
END
$$;

-- require_project_name refuses (DK010) a null or malformed project name.
CREATE OR REPLACE FUNCTION docket.require_project_name(p_value text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_value IS NULL OR NOT docket.valid_project_name(p_value) THEN
        RAISE EXCEPTION 'invalid project name %: want 1-63 characters of [a-z0-9._-], starting with a letter or digit',
            coalesce(quote_literal(p_value), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
END
$$;

-- require_valid refuses (DK010) a value p_ok says is malformed, naming the
-- field, the value (cut to 80 characters) and the rule.
CREATE OR REPLACE FUNCTION docket.require_valid(p_ok boolean, p_field text, p_value text, p_rule text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_ok IS NOT TRUE THEN
        RAISE EXCEPTION 'invalid %: %: want %', p_field,
            coalesce(quote_literal(docket.bounded_text(p_value, 80)), 'NULL'), p_rule
            USING ERRCODE = 'DK010';
    END IF;
END
$$;

-- bounded_text cuts p_text to p_max characters, marking a cut with a final …,
-- so diagnostics never refuse a failure report for being long.
-- Not STRICT, so the planner can inline it (NULL text gives NULL all the same).
CREATE OR REPLACE FUNCTION docket.bounded_text(p_text text, p_max integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN length(p_text) <= p_max THEN p_text ELSE left(p_text, p_max - 1) || '…' END;

-- epoch_micros is an instant as whole microseconds since 1970, the form the
-- event hash covers (independent of time zone and output settings).
-- STABLE, as extract of a timestamptz is, and not STRICT, so the planner
-- inlines it into the hash of every event.
CREATE OR REPLACE FUNCTION docket.epoch_micros(p_at timestamptz) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
RETURN (extract(epoch FROM p_at) * 1000000)::bigint;

-- Roles ---------------------------------------------------------------------

DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['docket_app', 'docket_operator', 'docket_reader', 'docket_worker', 'docket_clock'] LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r);
        IF (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- another database's migration created it first
            END;
        ELSE
            RAISE NOTICE 'docket: role % does not exist and % may not create it: run CREATE ROLE % NOLOGIN as a DBA, then SELECT docket.apply_privileges()',
                r, current_user, r;
        END IF;
    END LOOP;
END
$$;

-- session_is_owner reports whether the session's login role is (or is a
-- member of) the owner of schema docket, or a superuser.
--
-- The checks every call makes (this, session_is_operator, may_act_as,
-- grant_check) are plpgsql rather than SQL functions: Postgres cannot inline
-- an SQL function whose body holds a subquery, and then parses and plans its
-- body again in every statement that calls it, while plpgsql keeps the plan
-- for the session.
CREATE OR REPLACE FUNCTION docket.session_is_owner() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT pg_has_role(session_user, n.nspowner, 'MEMBER') FROM pg_namespace n WHERE n.nspname = 'docket');
END
$$;

-- session_is_operator reports whether the session's login role is the owner
-- or a member of docket_operator.
CREATE OR REPLACE FUNCTION docket.session_is_operator() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN docket.session_is_owner()
        OR (EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'docket_operator')
            AND pg_has_role(session_user, 'docket_operator', 'MEMBER'));
END
$$;

-- require_operator refuses (DK009) op unless the session's login role is the
-- owner or a member of docket_operator.
CREATE OR REPLACE FUNCTION docket.require_operator(p_op text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT docket.session_is_operator() THEN
        RAISE EXCEPTION '%: login role % is not a docket operator (a member of docket_operator)', p_op, session_user
            USING ERRCODE = 'DK009';
    END IF;
END
$$;

-- clock_bound refuses (DK016) a caller's instant p_now further than the
-- setting clock_skew (docket.settings) from the start of the transaction,
-- either way, unless the session's login role is a member of docket_clock or
-- the owner. It is the one function of docket that reads the database's
-- clock, and it reads it only to bound the caller's: every decision is still
-- made by p_now. docket_clock is for a deterministic clock (tests, the demo,
-- simulations). The owner is not bounded: it can rewrite any row anyway, a
-- bound would stop none of that, and its repairs by hand may need to name
-- past instants. The membership is asked only of an instant outside the
-- bound, so a call within it reads the setting and nothing else. A missing
-- setting refuses every instant it would bound, and a malformed one every
-- call (fail closed).
CREATE OR REPLACE FUNCTION docket.clock_bound(p_now timestamptz) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_db   timestamptz := transaction_timestamp();
    v_text text;
    v_skew interval;
BEGIN
    SELECT s.value, s.value::interval INTO v_text, v_skew FROM docket.settings s WHERE s.name = 'clock_skew';
    IF p_now BETWEEN v_db - v_skew AND v_db + v_skew THEN
        RETURN;
    END IF;
    IF docket.session_is_owner()
       OR (EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'docket_clock')
           AND pg_has_role(session_user, 'docket_clock', 'MEMBER')) THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'instant % is outside the bound of the database''s clock: % ± % (setting clock_skew of docket.settings); login role % is not a member of docket_clock',
        p_now, v_db, coalesce(v_skew::text, 'nothing: the setting is ' || coalesce(quote_literal(v_text), 'missing')), session_user
        USING ERRCODE = 'DK016';
END
$$;

-- set_context records who is changing docket state and at which instant, for
-- the rest of the current transaction. Every docket function calls it; the
-- owner changing tables by hand calls it first:
--     SELECT docket.set_context('user:ana', '2026-11-29 10:00:00+00');
-- Refuses: a malformed actor, or a null, infinite or pre-1970 instant (DK010);
-- an instant outside the bound of the database's clock, for a login outside
-- docket_clock (DK016, clock_bound); an actor the session's login role is not
-- bound to (DK009).
CREATE OR REPLACE FUNCTION docket.set_context(p_actor text, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- Every API function calls this first, so the refusal is called only to
    -- refuse: a PERFORM is a statement of its own, a few µs in every call.
    IF p_actor IS NULL OR NOT docket.valid_principal(p_actor) THEN
        PERFORM docket.require_principal('actor', p_actor);
    END IF;
    IF p_now IS NULL OR NOT isfinite(p_now) OR p_now < '1970-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'invalid instant %: the caller''s now must be a finite timestamp after 1970 (a zero time is a bug)', coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    PERFORM docket.clock_bound(p_now);
    IF NOT docket.may_act_as(p_actor) THEN
        RAISE EXCEPTION 'login role % may not act as %: bind it first (docket actor bind)', session_user, p_actor
            USING ERRCODE = 'DK009';
    END IF;
    PERFORM set_config('docket.actor', p_actor, true), set_config('docket.now', p_now::text, true);
END
$$;

-- context_value returns setting p_name of the change context set_context
-- made in this transaction. Refuses with DK010 when none is set, so no change
-- goes unattributed and storage never reads the wall clock.
CREATE OR REPLACE FUNCTION docket.context_value(p_name text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v text := nullif(current_setting(p_name, true), '');
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION 'no change context: call docket.set_context(actor, now) in this transaction first'
            USING ERRCODE = 'DK010';
    END IF;
    RETURN v;
END
$$;

-- context_actor and context_now are the actor and the instant set by
-- set_context in this transaction (see context_value).
CREATE OR REPLACE FUNCTION docket.context_actor() RETURNS text
LANGUAGE sql STABLE
RETURN docket.context_value('docket.actor');

CREATE OR REPLACE FUNCTION docket.context_now() RETURNS timestamptz
LANGUAGE sql STABLE
RETURN docket.context_value('docket.now')::timestamptz;

-- refuse_change is the trigger body of every change docket never allows:
-- updating or deleting an append-only record, deleting a row that is retired
-- instead, editing a row that is replaced instead (DK015). The trigger's
-- argument, if any, says what to do instead.
CREATE OR REPLACE FUNCTION docket.refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%.%: % refused%', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP,
        CASE WHEN TG_NARGS > 0 THEN ': ' || TG_ARGV[0] ELSE ' (append-only)' END
        USING ERRCODE = 'DK015';
END
$$;

-- event_in_order is the trigger, BEFORE INSERT on an event table of a record
-- (task_events, schedule_events), that refuses (DK016) an event
-- dated before the record's last one: a record's instants never run
-- backwards, whoever writes them. One probe of the table's (record, id)
-- index per event. (A job's events are held by jobs_record_update.)
CREATE OR REPLACE FUNCTION docket.event_in_order() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_id   bigint;
    v_last timestamptz;
BEGIN
    IF TG_TABLE_NAME = 'task_events' THEN
        v_id := NEW.task_id;
        SELECT e.at INTO v_last FROM docket.task_events e WHERE e.task_id = v_id ORDER BY e.id DESC LIMIT 1;
    ELSE
        v_id := NEW.schedule_id;
        SELECT e.at INTO v_last FROM docket.schedule_events e WHERE e.schedule_id = v_id ORDER BY e.id DESC LIMIT 1;
    END IF;
    IF NEW.at < v_last THEN
        RAISE EXCEPTION '%: a change of % at % comes before its last event, at %: a record''s instants never run backwards',
            TG_TABLE_NAME, v_id, NEW.at, v_last
            USING ERRCODE = 'DK016';
    END IF;
    RETURN NEW;
END
$$;

-- TRUNCATE ------------------------------------------------------------------

-- refuse_truncate is the statement trigger that keeps every docket table from
-- being emptied at once (DK015), by the owner too.
CREATE OR REPLACE FUNCTION docket.refuse_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%.%: TRUNCATE refused: docket''s records are never wiped', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'DK015';
END
$$;

-- Row-level security ------------------------------------------------------------
-- Every docket table (River's aside) has row-level security enabled
-- (apply_privileges), so a table no policy opens is unreadable to every role
-- but the owner. Each aggregate's definitions give each of its tables one
-- SELECT policy, named for who may see what: a login's sessions see the rows
-- of the projects where a principal the login is bound to (actor_bindings)
-- holds a capability that reads them, and the rows of a table without a
-- project through its parent's. No policy admits a write: the group roles
-- hold none. The owner owns the tables and bypasses the policies (they are
-- not FORCEd), and so do the API functions, SECURITY DEFINER as the owner.
-- The views are security_invoker, so a reader meets the same policies
-- through them, evaluated before any function of the reader's own WHERE.
-- A check deferred to commit (a constraint trigger) runs as the committing
-- login, after the API function that wrote the row has returned: its
-- function is SECURITY DEFINER too, so no policy hides from it the rows it
-- checks (a gateway may decide a task whose case it may not read).
--
-- Policies have no CREATE OR REPLACE, and this file is applied first: every
-- policy on a docket table is dropped here, and the files after make again
-- those they still name, so a policy no file names any more is gone.
DO $$
DECLARE
    p record;
BEGIN
    FOR p IN
        SELECT pol.polname, pol.polrelid::regclass AS rel FROM pg_policy pol
        JOIN pg_class c ON c.oid = pol.polrelid
        WHERE c.relnamespace = 'docket'::regnamespace
    LOOP
        EXECUTE format('DROP POLICY %I ON %s', p.polname, p.rel);
    END LOOP;
END
$$;

-- login_principals returns what the session's login role is bound to
-- (actor_bindings.principal: principals and "kind:*"), for policies that
-- name a principal on the row (a conductor, an assignee, a grantee).
-- SECURITY DEFINER, so it reads the bindings whatever the caller may read;
-- call it as (SELECT docket.login_principals()), so it runs once a statement.
CREATE OR REPLACE FUNCTION docket.login_principals() RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, docket, pg_temp
RETURN ARRAY(SELECT b.principal FROM docket.actor_bindings b WHERE b.role = session_user);

-- principal_bound reports whether p_principal is one of p_bound (what
-- login_principals returned), itself or by its kind ("kind:*"). An SQL
-- function without a subquery: the planner inlines it into each policy.
CREATE OR REPLACE FUNCTION docket.principal_bound(p_principal text, p_bound text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_principal = ANY (p_bound) OR split_part(p_principal, ':', 1) || ':*' = ANY (p_bound);

-- visible_projects returns the names of the projects where a principal the
-- session's login role is bound to holds one of p_capabilities ('*': any
-- capability); every project for the owner. The policies scope by it:
--     project = ANY ((SELECT docket.visible_projects('job.view', 'job.create'))::text[])
-- the subquery makes it run once a statement, not once a row. SECURITY
-- DEFINER, so it reads the grants and bindings whatever the caller may read.
CREATE OR REPLACE FUNCTION docket.visible_projects(VARIADIC p_capabilities text[]) RETURNS text[]
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, docket, pg_temp AS $$
BEGIN
    IF docket.session_is_owner() THEN
        RETURN ARRAY(SELECT p.name FROM docket.projects p);
    END IF;
    RETURN ARRAY(
        SELECT DISTINCT g.project FROM docket.grants g
        JOIN docket.actor_bindings b
          ON b.role = session_user AND b.principal IN (g.principal, split_part(g.principal, ':', 1) || ':*')
        WHERE g.capability = ANY (p_capabilities) OR '*' = ANY (p_capabilities)
    );
END
$$;

-- The kit's own tables and the migrations' records hold no project's data:
-- the machines, capabilities, error codes, the API's list and which
-- migrations and definitions the database has (docket status reads them as
-- any login). Every login may read them.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['machines', 'machine_states', 'machine_transitions', 'capabilities', 'error_codes',
                             'api_functions', 'goose_db_version', 'definitions', 'definition_objects'] LOOP
        CONTINUE WHEN to_regclass('docket.' || t) IS NULL;
        EXECUTE format('CREATE POLICY %I ON docket.%I FOR SELECT USING (true)', 'everyone_reads_' || t, t);
    END LOOP;
END
$$;

-- The machine kit -------------------------------------------------------------

-- Every state machine of docket is declared as rows (docket.machines,
-- machine_states, machine_transitions: its states, which a row may be born
-- in, which it never leaves, and its moves), by its aggregate's versioned
-- migration, and each aggregate's definitions make views of them by the
-- machine's name (machine_views: docket.job_states, docket.job_transitions,
-- ...). A guard says only what is particular to its machine; what every
-- guard asks is answered by the kit:
--
--   machine_birth(machine, subject, state)      refuses a birth outside an initial state
--   machine_move(machine, subject, from, to)     refuses any change of a row in a terminal
--                                                state, and a move not in the machine
--   machine_terminal(machine, state)             is the state terminal?
--   refuse_immutable()                           a trigger BEFORE UPDATE OF the immutable
--                                                columns: they are listed once, in the
--                                                trigger, and the refusal names those changed
--
-- The machines' rows change only by a migration that says so (SET LOCAL
-- docket.migrating = 'on'); for everyone else, the owner included, they are
-- as migrated (refuse_machine_change).

-- refuse_machine_change keeps the machines as migrated (DK015): only a
-- migration that says so, with SET LOCAL docket.migrating = 'on', changes
-- them.
CREATE OR REPLACE FUNCTION docket.refuse_machine_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('docket.migrating', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION '%.%: % refused: a state machine changes only by migration', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'DK015';
END
$$;

CREATE OR REPLACE TRIGGER refuse_machine_change
    BEFORE INSERT OR UPDATE OR DELETE ON docket.machines
    FOR EACH STATEMENT EXECUTE FUNCTION docket.refuse_machine_change();

CREATE OR REPLACE TRIGGER refuse_machine_change
    BEFORE INSERT OR UPDATE OR DELETE ON docket.machine_states
    FOR EACH STATEMENT EXECUTE FUNCTION docket.refuse_machine_change();

CREATE OR REPLACE TRIGGER refuse_machine_change
    BEFORE INSERT OR UPDATE OR DELETE ON docket.machine_transitions
    FOR EACH STATEMENT EXECUTE FUNCTION docket.refuse_machine_change();

-- machine_views makes the views of machine p_machine's rows, by its name:
-- docket.<machine>_states and docket.<machine>_transitions, or makes them
-- again. Each aggregate's definitions call it for their machines.
CREATE OR REPLACE FUNCTION docket.machine_views(p_machine text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE OR REPLACE VIEW docket.%I WITH (security_invoker = true) AS SELECT state, initial, terminal, meaning FROM docket.machine_states WHERE machine = %L',
                   p_machine || '_states', p_machine);
    EXECUTE format('CREATE OR REPLACE VIEW docket.%I WITH (security_invoker = true) AS SELECT from_state, to_state, meaning FROM docket.machine_transitions WHERE machine = %L',
                   p_machine || '_transitions', p_machine);
END
$$;

-- machine_terminal reports whether p_state is a terminal state of machine
-- p_machine (false for a state the machine does not have). plpgsql, as
-- session_is_owner is, so its plan is kept for the session.
CREATE OR REPLACE FUNCTION docket.machine_terminal(p_machine text, p_state text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT s.terminal FROM docket.machine_states s WHERE s.machine = p_machine AND s.state = p_state), false);
END
$$;

-- machine_birth refuses (DK001) a row of machine p_machine, named p_subject
-- in the message, born in p_state: a state that is not one of the machine's
-- initial states.
CREATE OR REPLACE FUNCTION docket.machine_birth(p_machine text, p_subject text, p_state text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT coalesce((SELECT s.initial FROM docket.machine_states s WHERE s.machine = p_machine AND s.state = p_state), false) THEN
        RAISE EXCEPTION '%: cannot be created %, not an initial state of the % machine (docket.%_states)',
            p_subject, coalesce(p_state, 'NULL'), p_machine, p_machine
            USING ERRCODE = 'DK001';
    END IF;
END
$$;

-- machine_move is the check every guard makes of a row of machine p_machine,
-- named p_subject in messages, whose state is p_from and is to be p_to. It
-- refuses (DK001) any change at all of a row in a terminal state, and, when
-- p_moved (by default: p_to differs from p_from), a move that is not one of
-- the machine's transitions. A guard calls it for every UPDATE of a row whose
-- terminal states freeze it, and for each axis that changed of a row with
-- several.
CREATE OR REPLACE FUNCTION docket.machine_move(p_machine text, p_subject text, p_from text, p_to text,
                                    p_moved boolean DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_terminal boolean;
    v_legal    boolean;
BEGIN
    -- One probe of each table, in one statement: every guarded UPDATE asks.
    SELECT s.terminal, EXISTS (SELECT 1 FROM docket.machine_transitions t
                               WHERE t.machine = p_machine AND t.from_state = p_from AND t.to_state = p_to)
    INTO v_terminal, v_legal
    FROM docket.machine_states s WHERE s.machine = p_machine AND s.state = p_from;
    IF v_terminal THEN
        RAISE EXCEPTION '% is %, a terminal state: it never changes', p_subject, p_from
            USING ERRCODE = 'DK001';
    END IF;
    IF coalesce(p_moved, p_to IS DISTINCT FROM p_from) AND v_legal IS NOT TRUE THEN
        RAISE EXCEPTION '%: % -> % is not in docket.%_transitions', p_subject, p_from, coalesce(p_to, 'NULL'), p_machine
            USING ERRCODE = 'DK001';
    END IF;
END
$$;

-- reference_refuse refuses a row of docket.p_table whose column p_column
-- holds p_key, naming no row of docket.p_target, as the foreign key
-- p_constraint would have: 23503, that constraint's name, its message.
-- For the triggers that check a reference a foreign key once did
-- (job_reference_check, frozen_reference_check).
CREATE OR REPLACE FUNCTION docket.reference_refuse(p_table text, p_constraint text, p_column text, p_key text, p_target text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'insert or update on table "%" violates foreign key constraint "%"', p_table, p_constraint
        USING ERRCODE = '23503', CONSTRAINT = p_constraint, TABLE = p_table, SCHEMA = 'docket',
              DETAIL = format('Key (%s)=(%s) is not present in table "%s".', p_column, p_key, p_target);
END
$$;

-- refuse_immutable is the trigger that keeps a table's immutable columns as
-- they were born (DK015). It is created BEFORE UPDATE OF those columns (AFTER
-- on jobs and run_steps, whose guards are all AFTER triggers: jobs.sql,
-- "Guards"), which are listed there and only there:
--     CREATE TRIGGER projects_columns_immutable BEFORE UPDATE OF id, name, created_by, created_at ON docket.projects
--         FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();
-- so it runs only for an UPDATE that names one of them, reads its column list
-- from its own declaration, and refuses naming the columns that would change
-- (setting a column to the value it holds is not a change).
-- Name it <table>_columns_immutable and give it its guard's timing: triggers
-- of one timing fire in name order, so it fires before <table>_guard and a
-- change of what a row is is reported as that, whatever state the row is in.
CREATE OR REPLACE FUNCTION docket.refuse_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    o jsonb := to_jsonb(OLD);
    n jsonb := to_jsonb(NEW);
    changed text;
BEGIN
    SELECT string_agg(a.attname, ', ' ORDER BY a.attnum) INTO changed
    FROM pg_trigger t
    JOIN pg_attribute a ON a.attrelid = t.tgrelid AND a.attnum = ANY (t.tgattr)
    WHERE t.tgrelid = TG_RELID AND t.tgname = TG_NAME
      AND o -> a.attname::text IS DISTINCT FROM n -> a.attname::text;
    IF changed IS NOT NULL THEN
        RAISE EXCEPTION '%.% %: % never changes (immutable)', TG_TABLE_SCHEMA, TG_TABLE_NAME,
            coalesce(o ->> 'id', o ->> 'name', ''), changed
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NEW;
END
$$;

-- The API --------------------------------------------------------------------

-- docket.api_functions lists the functions the group roles may call. Each
-- definition file inserts its own; the list is made again whole each time the
-- definitions are applied, so a function no file lists any more leaves it.
DELETE FROM docket.api_functions;

-- apply_privileges makes the database match the trust model, for the objects
-- that exist now; it is idempotent, and privileges.sql calls it once every
-- definition file has been applied. It:
--   * puts the TRUNCATE-refusing trigger on every docket table (not River's)
--     and enables row-level security on it (not FORCEd: the owner, and the
--     API functions running as the owner, see every row);
--   * makes each function of docket.api_functions SECURITY DEFINER with a
--     pinned search_path, callable by its role and by nobody else;
--   * gives the group roles that exist USAGE on the schema; docket_app,
--     docket_operator and docket_reader SELECT on every docket table, under
--     its policies, and on every view (security_invoker: the same
--     policies); docket_worker what River's client needs of River's tables
--     (SELECT, INSERT, UPDATE, DELETE, and their sequences) but
--     river_migration, which only the owner writes and every group role may
--     read (docket status reads it); and takes every other table privilege
--     from them;
--   * but for docket.job_intake, the one table a group role writes: no
--     row-level security (COPY FROM refuses it), INSERT for docket_app and
--     docket_operator; its statement trigger (jobs.sql, job_intake_apply)
--     checks each row as the API does, moves it into docket.jobs and
--     deletes it.
CREATE OR REPLACE FUNCTION docket.apply_privileges() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t record;
    f record;
    app boolean := EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'docket_app');
    operator boolean := EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'docket_operator');
    reader boolean := EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'docket_reader');
    worker boolean := EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'docket_worker');
    readers text := concat_ws(', ', CASE WHEN app THEN 'docket_app' END, CASE WHEN operator THEN 'docket_operator' END,
                              CASE WHEN reader THEN 'docket_reader' END);
    roles text := concat_ws(', ', nullif(readers, ''), CASE WHEN worker THEN 'docket_worker' END);
BEGIN
    FOR t IN
        SELECT c.oid::regclass AS rel, c.relrowsecurity,
               EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname = 'refuse_truncate') AS guarded
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'docket' AND c.relkind IN ('r', 'p') AND c.relname NOT LIKE 'river\_%'
    LOOP
        IF NOT t.guarded THEN
            EXECUTE format('CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION docket.refuse_truncate()', t.rel);
        END IF;
        IF t.rel = 'docket.job_intake'::regclass THEN
            -- COPY FROM refuses a table with row-level security; the
            -- intake's statement trigger checks every row instead.
            IF t.relrowsecurity THEN
                EXECUTE format('ALTER TABLE %s DISABLE ROW LEVEL SECURITY', t.rel);
            END IF;
        ELSIF NOT t.relrowsecurity THEN
            EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', t.rel);
        END IF;
    END LOOP;

    FOR f IN
        SELECT p.oid::regprocedure AS fn, a.role FROM pg_proc p
        JOIN pg_namespace n ON n.oid = p.pronamespace
        JOIN docket.api_functions a ON a.name = p.proname
        WHERE n.nspname = 'docket'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, docket, pg_temp', f.fn);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.fn);
        IF f.role IN ('reader', 'app') AND app THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO docket_app', f.fn);
        END IF;
        IF f.role = 'reader' AND reader THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO docket_reader', f.fn);
        END IF;
        IF operator THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO docket_operator', f.fn);
        END IF;
    END LOOP;

    IF roles <> '' THEN
        EXECUTE format('GRANT USAGE ON SCHEMA docket TO %s', roles);
        EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA docket FROM %s', roles);
        EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA docket FROM %s', roles);
    END IF;
    FOR t IN
        SELECT c.oid::regclass AS rel, c.relkind, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'docket' AND c.relkind IN ('r', 'p', 'v', 'S')
    LOOP
        IF t.relname LIKE 'river\_%' THEN
            IF t.relname = 'river_migration' THEN
                IF roles <> '' THEN
                    EXECUTE format('GRANT SELECT ON %s TO %s', t.rel, roles);
                END IF;
            ELSIF worker AND t.relkind = 'S' THEN
                EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE %s TO docket_worker', t.rel);
            ELSIF worker AND t.relkind <> 'S' THEN
                EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO docket_worker', t.rel);
            END IF;
        ELSIF t.relkind <> 'S' AND readers <> '' THEN
            EXECUTE format('GRANT SELECT ON %s TO %s', t.rel, readers);
        END IF;
    END LOOP;
    IF app OR operator THEN
        EXECUTE format('GRANT INSERT ON docket.job_intake TO %s',
                       concat_ws(', ', CASE WHEN app THEN 'docket_app' END, CASE WHEN operator THEN 'docket_operator' END));
    END IF;
END
$$;
