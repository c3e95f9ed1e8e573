-- Plans: frozen, content-addressed job graphs, and their runs.
--
--   * docket.plans holds a plan as its canonical text (the Go package plans
--     defines the form) under its sha256 digest, immutably; docket.plan_steps
--     and docket.plan_deps are that text taken apart, for the ready set.
--   * docket.runs is a run of a plan: its input and the input's trust label,
--     its status, the version of its plan it runs (docket.run_versions keeps
--     every version, each naming its predecessor and why it replaced it).
--   * docket.run_steps is a step a run admitted: its assembled arguments and
--     their trust, its job, its outcome, its compensation. Steps are admitted
--     and their outcomes applied in ready order (ready_seq), whatever order
--     their jobs finish in: that order is the run's recorded order, and an
--     unwind compensates in its reverse.
--   * A job of a run moving to an end (jobs_advance_runs) records its step's
--     outcome and applies what can be applied, in the job's transaction.

-- The run machine's states and moves (docket.run_states, docket.run_transitions),
-- as 00031_plans.sql and 00033_budgets.sql declare them.
SELECT docket.machine_views('run');

-- The run_step machine's states and moves (docket.run_step_states, docket.run_step_transitions),
-- as 00031_plans.sql declares them.
SELECT docket.machine_views('run_step');

CREATE OR REPLACE TRIGGER plans_frozen BEFORE UPDATE OR DELETE ON docket.plans
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('a plan is frozen: a replan stores a successor');

CREATE OR REPLACE TRIGGER plan_steps_frozen BEFORE UPDATE OR DELETE ON docket.plan_steps
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('a plan is frozen: a replan stores a successor');

CREATE OR REPLACE TRIGGER plan_deps_frozen BEFORE UPDATE OR DELETE ON docket.plan_deps
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('a plan is frozen: a replan stores a successor');

-- plan_steps_declared refuses (DK015) steps inserted into docket.plan_steps
-- that are not, column for column, steps the plan's canonical text declares:
-- a stored plan is frozen, inserts included, so no writer (the owner's SQL
-- included) adds a step its digest does not cover. A statement is checked
-- whole, the canonical text taken apart once per plan.
CREATE OR REPLACE FUNCTION docket.plan_steps_declared() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT x.plan_id, x.step_id INTO bad FROM (
        SELECT a.plan_id, a.step_id, a.kind::text AS kind, a.args, a.after, a.terminal, a.compensation::text AS compensation,
               a.trusted, a.repeatable, a.wait
        FROM added a
        EXCEPT
        SELECT p.id, s ->> 'id', s ->> 'kind', coalesce(s -> 'args', '[]'),
               ARRAY(SELECT jsonb_array_elements_text(coalesce(s -> 'after', '[]'))),
               coalesce((s ->> 'terminal')::boolean, false), nullif(s ->> 'compensation', ''),
               coalesce((s ->> 'trusted')::boolean, false), coalesce((s ->> 'repeatable')::boolean, false), s -> 'wait'
        FROM docket.plans p, jsonb_array_elements(p.canonical::jsonb -> 'steps') s
        WHERE p.id IN (SELECT DISTINCT plan_id FROM added)
    ) x LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'plan %: step % is not as the plan declares it: a stored plan is frozen, its steps are its canonical text''s',
            bad.plan_id, bad.step_id
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER plan_steps_declared AFTER INSERT ON docket.plan_steps
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION docket.plan_steps_declared();

-- plan_deps_declared refuses (DK015) an edge inserted into docket.plan_deps
-- that its step's predecessors (plan_steps.after) do not declare.
CREATE OR REPLACE FUNCTION docket.plan_deps_declared() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT x.plan_id, x.step_id, x.after_id INTO bad FROM (
        SELECT a.plan_id, a.step_id, a.after_id FROM added a
        EXCEPT
        SELECT s.plan_id, s.step_id, f FROM docket.plan_steps s, unnest(s.after) f
        WHERE s.plan_id IN (SELECT DISTINCT plan_id FROM added)
    ) x LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'plan %: step % does not run after % in the plan: a stored plan is frozen', bad.plan_id, bad.step_id, bad.after_id
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER plan_deps_declared AFTER INSERT ON docket.plan_deps
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION docket.plan_deps_declared();

-- plan_store stores plan text p_canonical under digest p_digest in project
-- p_project, once (content-addressed: storing it again returns the same id),
-- taking its steps apart, and checks what every writer must hold to: the
-- digest is the text's, steps are unique and well formed, every predecessor
-- and every argument's source step exists, sources are predecessors
-- (transitively), there is no cycle and there is a terminal step. The Go
-- package plans reports every problem at once before it gets here; this
-- refuses (DK010) with the first, naming the step.
CREATE OR REPLACE FUNCTION docket.plan_store(p_project text, p_digest text, p_canonical text, p_actor text, p_now timestamptz)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_doc jsonb;
    bad record;
    v_n integer;
    v_reached integer;
BEGIN
    SELECT id INTO v_id FROM docket.plans WHERE project = p_project AND digest = p_digest;
    IF FOUND THEN
        RETURN v_id;
    END IF;
    PERFORM docket.require_valid(p_digest ~ '^[0-9a-f]{64}$' AND encode(sha256(convert_to(p_canonical, 'UTF8')), 'hex') = p_digest,
        'plan digest', p_digest, 'the sha256 of the plan''s canonical text');
    BEGIN
        v_doc := p_canonical::jsonb;
    EXCEPTION WHEN invalid_text_representation THEN
        RAISE EXCEPTION 'invalid plan: its canonical text is not JSON' USING ERRCODE = 'DK010';
    END;
    v_n := jsonb_array_length(v_doc -> 'steps');
    PERFORM docket.require_valid(v_n BETWEEN 1 AND 10000, 'plan steps', v_n::text, '1 to 10000 steps');
    INSERT INTO docket.plans (project, digest, canonical, steps, created_by, created_at)
    VALUES (p_project, p_digest, p_canonical, v_n, p_actor, p_now)
    ON CONFLICT (project, digest) DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
        SELECT id INTO v_id FROM docket.plans WHERE project = p_project AND digest = p_digest;
        RETURN v_id;
    END IF;
    BEGIN
        INSERT INTO docket.plan_steps (plan_id, step_id, kind, args, after, terminal, compensation, trusted, repeatable, wait)
        SELECT v_id, s ->> 'id', s ->> 'kind', coalesce(s -> 'args', '[]'),
               ARRAY(SELECT jsonb_array_elements_text(coalesce(s -> 'after', '[]'))),
               coalesce((s ->> 'terminal')::boolean, false), nullif(s ->> 'compensation', ''),
               coalesce((s ->> 'trusted')::boolean, false), coalesce((s ->> 'repeatable')::boolean, false), s -> 'wait'
        FROM jsonb_array_elements(v_doc -> 'steps') s;
    EXCEPTION
        WHEN unique_violation THEN
            RAISE EXCEPTION 'invalid plan: a step id is used twice' USING ERRCODE = 'DK010';
        WHEN check_violation OR not_null_violation THEN
            RAISE EXCEPTION 'invalid plan: a step id or kind is malformed or missing (%)', SQLERRM USING ERRCODE = 'DK010';
    END;
    SELECT s.step_id, a INTO bad FROM docket.plan_steps s, unnest(s.after) a
    WHERE s.plan_id = v_id AND NOT EXISTS (SELECT 1 FROM docket.plan_steps x WHERE x.plan_id = v_id AND x.step_id = a)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid plan: step %: unknown predecessor %', bad.step_id, bad.a USING ERRCODE = 'DK010';
    END IF;
    INSERT INTO docket.plan_deps (plan_id, step_id, after_id)
    SELECT DISTINCT v_id, s.step_id, a FROM docket.plan_steps s, unnest(s.after) a WHERE s.plan_id = v_id;
    -- No cycle: Kahn's order reaches every step.
    v_reached := docket.plan_reachable(v_id);
    IF v_reached < v_n THEN
        RAISE EXCEPTION 'invalid plan: % of its % steps are on or behind a cycle', v_n - v_reached, v_n USING ERRCODE = 'DK010';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM docket.plan_steps WHERE plan_id = v_id AND terminal) THEN
        RAISE EXCEPTION 'invalid plan: no terminal step' USING ERRCODE = 'DK010';
    END IF;
    -- Every argument's source step is a predecessor, transitively.
    SELECT s.step_id, a -> 'source' ->> 'step' AS src INTO bad
    FROM docket.plan_steps s, jsonb_array_elements(s.args) a
    WHERE s.plan_id = v_id AND a -> 'source' ->> 'kind' IN ('step', 'path')
      AND NOT docket.plan_precedes(v_id, a -> 'source' ->> 'step', s.step_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid plan: step %: argument sourced from %, which is not a predecessor', bad.step_id, coalesce(bad.src, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    RETURN v_id;
END
$$;

-- plan_reachable counts the steps of plan p_plan that Kahn's algorithm
-- orders: all of them exactly when the plan has no cycle. Steps are
-- numbered by id and edges kept in arrays, which plpgsql updates in place:
-- linear in steps and edges.
CREATE OR REPLACE FUNCTION docket.plan_reachable(p_plan bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer;
    v_src integer[];
    v_dst integer[];
    v_start integer[];
    v_indeg integer[];
    v_queue integer[];
    v_head integer := 1;
    v_count integer := 0;
    u integer;
    e integer;
BEGIN
    SELECT count(*) INTO v_n FROM docket.plan_steps WHERE plan_id = p_plan;
    WITH o AS (SELECT step_id, row_number() OVER (ORDER BY step_id)::integer AS i FROM docket.plan_steps WHERE plan_id = p_plan)
    SELECT coalesce(array_agg(a.i ORDER BY a.i, b.i), '{}'), coalesce(array_agg(b.i ORDER BY a.i, b.i), '{}') INTO v_src, v_dst
    FROM docket.plan_deps d JOIN o a ON a.step_id = d.after_id JOIN o b ON b.step_id = d.step_id
    WHERE d.plan_id = p_plan;
    v_indeg := array_fill(0, ARRAY[v_n]);
    v_start := array_fill(0, ARRAY[v_n + 1]);
    FOR e IN 1 .. cardinality(v_src) LOOP
        v_indeg[v_dst[e]] := v_indeg[v_dst[e]] + 1;
    END LOOP;
    -- v_start[u] is the first edge out of u; edges are sorted by source.
    FOR u IN 1 .. v_n + 1 LOOP
        v_start[u] := cardinality(v_src) + 1;
    END LOOP;
    FOR e IN REVERSE cardinality(v_src) .. 1 LOOP
        v_start[v_src[e]] := e;
    END LOOP;
    FOR u IN REVERSE v_n .. 1 LOOP
        IF v_start[u] > v_start[u + 1] THEN
            v_start[u] := v_start[u + 1];
        END IF;
    END LOOP;
    v_queue := '{}';
    FOR u IN 1 .. v_n LOOP
        IF v_indeg[u] = 0 THEN
            v_queue := v_queue || u;
        END IF;
    END LOOP;
    WHILE v_head <= cardinality(v_queue) LOOP
        u := v_queue[v_head];
        v_head := v_head + 1;
        v_count := v_count + 1;
        FOR e IN v_start[u] .. v_start[u + 1] - 1 LOOP
            v_indeg[v_dst[e]] := v_indeg[v_dst[e]] - 1;
            IF v_indeg[v_dst[e]] = 0 THEN
                v_queue := v_queue || v_dst[e];
            END IF;
        END LOOP;
    END LOOP;
    RETURN v_count;
END
$$;

-- plan_precedes reports whether step p_from precedes step p_to in plan
-- p_plan: p_to runs after p_from, directly or through other steps.
CREATE OR REPLACE FUNCTION docket.plan_precedes(p_plan bigint, p_from text, p_to text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        WITH RECURSIVE up (step_id) AS (
            SELECT d.after_id FROM docket.plan_deps d WHERE d.plan_id = p_plan AND d.step_id = p_to
            UNION
            SELECT d.after_id FROM docket.plan_deps d JOIN up ON d.plan_id = p_plan AND d.step_id = up.step_id
        )
        SELECT 1 FROM up WHERE step_id = p_from);
END
$$;

CREATE OR REPLACE TRIGGER run_versions_append_only BEFORE UPDATE OR DELETE ON docket.run_versions
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- A job of a run carries its run in its params ({"run_id": ..}), which never
-- change: the trigger that advances runs fires only for such jobs.
-- jobs_run_check refuses (23503) a job naming a run that is not its project's.
CREATE OR REPLACE FUNCTION docket.jobs_run_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM docket.runs r WHERE r.id = (NEW.params ->> 'run_id')::bigint AND r.project = NEW.project) THEN
        RAISE EXCEPTION 'job of run %: no such run in project %', NEW.params ->> 'run_id', NEW.project
            USING ERRCODE = '23503', CONSTRAINT = 'jobs_run_fkey', TABLE = 'jobs', SCHEMA = 'docket';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER jobs_run_check
    BEFORE INSERT ON docket.jobs
    FOR EACH ROW WHEN (NEW.params IS NOT NULL AND NEW.params ? 'run_id')
    EXECUTE FUNCTION docket.jobs_run_check();

-- Guards ---------------------------------------------------------------------------------------

-- runs_guard holds every INSERT and UPDATE of docket.runs to the run
-- machine, and its plan to its recorded versions: plan_id and version move
-- together, one version on, to the plan a docket.run_versions row of that
-- version names (DK015). A write of guard_seq alone (run_job_ended's, which
-- orders the outcomes of one run) is no move, even of a run that ended.
CREATE OR REPLACE FUNCTION docket.runs_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    was docket.runs;
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM docket.machine_birth('run', 'run', NEW.status);
        RETURN NEW;
    END IF;
    was := OLD;
    was.guard_seq := NEW.guard_seq;
    IF NEW IS NOT DISTINCT FROM was THEN
        RETURN NEW;
    END IF;
    -- A write that leaves the status as it was moves nothing: only a run
    -- that ended (finished_at, set exactly in a terminal state) is asked,
    -- and refused.
    IF NEW.status IS DISTINCT FROM OLD.status OR OLD.finished_at IS NOT NULL THEN
        PERFORM docket.machine_move('run', 'run ' || OLD.id, OLD.status, NEW.status);
    END IF;
    -- The plan a run runs changes only by a replan, which records the
    -- version first: the next version, naming the plan it replaces.
    IF (NEW.plan_id, NEW.version) IS DISTINCT FROM (OLD.plan_id, OLD.version)
       AND NOT (NEW.version = OLD.version + 1
                AND EXISTS (SELECT 1 FROM docket.run_versions v
                            WHERE v.run_id = OLD.id AND v.version = NEW.version AND v.plan_id = NEW.plan_id
                              AND v.predecessor = OLD.plan_id)
                AND EXISTS (SELECT 1 FROM docket.plans p WHERE p.id = NEW.plan_id AND p.project = OLD.project)) THEN
        RAISE EXCEPTION 'run %: its plan changes only by a replan that records its version (docket.run_versions) first', OLD.id
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER runs_columns_immutable
    BEFORE UPDATE OF id, project, case_id, input, input_trusted, replan_limit, created_by, created_at ON docket.runs
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

-- Every birth is asked; an update only when it could move the run or its
-- plan, or touches a run that ended -- all runs_guard asks of an update --
-- so the advances' writes of a running run's counters call nothing.
CREATE OR REPLACE TRIGGER runs_guard BEFORE UPDATE ON docket.runs
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status OR OLD.finished_at IS NOT NULL
                       OR (NEW.plan_id, NEW.version) IS DISTINCT FROM (OLD.plan_id, OLD.version))
    EXECUTE FUNCTION docket.runs_guard();

CREATE OR REPLACE TRIGGER runs_guard_birth BEFORE INSERT ON docket.runs
    FOR EACH ROW EXECUTE FUNCTION docket.runs_guard();

-- A run's project and plan, and a version's plans, were foreign keys until
-- migration 54: every start locked the plan's row and the project's FOR
-- KEY SHARE, rows every start of the plan shares (a multixact a start).
-- Plans are frozen and projects never deleted, their keys never changed,
-- so a reference that holds when written holds for good: these triggers
-- check it once the row is written, as the keys did, with their SQLSTATE
-- (23503) and constraint names, and lock nothing. A replan's new plan is
-- the run guard's to check (of the run's project). Runs are never deleted
-- either (runs_refuse_delete), nor their ids changed: the rows that name a
-- run -- its steps, its versions, its batch item, its budget's events and
-- reservation -- are checked the same way since migration 55, where a
-- foreign key's check locked the run's row again at each of them (four
-- times a three-step run, a WAL record each). frozen_reference_check
-- refuses a row of its table whose column TG_ARGV[1] names no row of
-- docket.TG_ARGV[2] (plans and runs by id, projects by name); constraint
-- TG_ARGV[0]. Each target is a statement of its own, a plain lookup by key
-- that Postgres plans once: one statement testing TG_ARGV for all three
-- was planned again at every call (a custom plan folds the test).
CREATE OR REPLACE FUNCTION docket.frozen_reference_check() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_key text;
BEGIN
    IF TG_ARGV[1] = 'plan_id' THEN
        v_key := NEW.plan_id;
    ELSIF TG_ARGV[1] = 'predecessor' THEN
        v_key := NEW.predecessor;
    ELSIF TG_ARGV[1] = 'run_id' THEN
        v_key := NEW.run_id;
    ELSE
        v_key := NEW.project;
    END IF;
    IF TG_ARGV[2] = 'plans' THEN
        PERFORM 1 FROM docket.plans p WHERE p.id = v_key::bigint;
    ELSIF TG_ARGV[2] = 'runs' THEN
        PERFORM 1 FROM docket.runs r WHERE r.id = v_key::bigint;
    ELSE
        PERFORM 1 FROM docket.projects p WHERE p.name = v_key;
    END IF;
    IF NOT FOUND THEN
        PERFORM docket.reference_refuse(TG_TABLE_NAME, TG_ARGV[0], TG_ARGV[1], v_key, TG_ARGV[2]);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER runs_project_fkey AFTER INSERT ON docket.runs
    FOR EACH ROW EXECUTE FUNCTION docket.frozen_reference_check('runs_project_fkey', 'project', 'projects');
CREATE OR REPLACE TRIGGER runs_plan_id_fkey AFTER INSERT ON docket.runs
    FOR EACH ROW EXECUTE FUNCTION docket.frozen_reference_check('runs_plan_id_fkey', 'plan_id', 'plans');
CREATE OR REPLACE TRIGGER run_versions_plan_id_fkey AFTER INSERT ON docket.run_versions
    FOR EACH ROW EXECUTE FUNCTION docket.frozen_reference_check('run_versions_plan_id_fkey', 'plan_id', 'plans');
CREATE OR REPLACE TRIGGER run_versions_predecessor_fkey AFTER INSERT ON docket.run_versions
    FOR EACH ROW WHEN (NEW.predecessor IS NOT NULL)
    EXECUTE FUNCTION docket.frozen_reference_check('run_versions_predecessor_fkey', 'predecessor', 'plans');
CREATE OR REPLACE TRIGGER run_versions_run_id_fkey AFTER INSERT OR UPDATE OF run_id ON docket.run_versions
    FOR EACH ROW EXECUTE FUNCTION docket.frozen_reference_check('run_versions_run_id_fkey', 'run_id', 'runs');
CREATE OR REPLACE TRIGGER run_steps_run_id_fkey AFTER INSERT OR UPDATE OF run_id ON docket.run_steps
    FOR EACH ROW EXECUTE FUNCTION docket.frozen_reference_check('run_steps_run_id_fkey', 'run_id', 'runs');

-- runs_terms holds a run's terms -- its input, replan limit and ceilings --
-- to their rules at the run's birth and at any write of one of them (a
-- budget's raise), refusing a row that breaks one with the check violation
-- (23514) a CHECK of that name would raise:
--     runs_input_bounded        input of at most 65536 bytes (json_size)
--     runs_replan_limit_range   replan_limit 0 .. 100
--     runs_money_has_currency   a money ceiling exactly with its currency
--     runs_currency_valid       currency of three capital letters
--     runs_max_steps_range      max_steps 0 .. 1000000
--     runs_max_effects_range    max_effects, max_money, max_call 0 or more
--     runs_max_money_range
--     runs_max_call_range
--     runs_max_parallel_range   max_parallel 1 .. 10000
--     runs_max_duration_range   max_duration over 0
--     runs_max_refusals_range   max_refusals 1 .. 1000000
-- These were table CHECKs, which Postgres reads from their stored text and
-- plans again in every statement that writes a run, whatever it writes: the
-- counters an advance moves paid for rules on columns it never touches
-- (00051_run_terms.sql). A writer that disables the triggers is held by
-- them as by the run machine: not at all.
CREATE OR REPLACE FUNCTION docket.runs_terms() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_rule text := CASE
        WHEN NOT coalesce(docket.json_size(NEW.input) <= 65536, true) THEN 'runs_input_bounded'
        WHEN NOT coalesce(NEW.replan_limit BETWEEN 0 AND 100, true) THEN 'runs_replan_limit_range'
        WHEN (NEW.max_money IS NULL) <> (NEW.currency IS NULL) THEN 'runs_money_has_currency'
        WHEN NOT coalesce(NEW.currency ~ '^[A-Z]{3}$', true) THEN 'runs_currency_valid'
        WHEN NOT coalesce(NEW.max_steps BETWEEN 0 AND 1000000, true) THEN 'runs_max_steps_range'
        WHEN NOT coalesce(NEW.max_effects >= 0, true) THEN 'runs_max_effects_range'
        WHEN NOT coalesce(NEW.max_money >= 0, true) THEN 'runs_max_money_range'
        WHEN NOT coalesce(NEW.max_call >= 0, true) THEN 'runs_max_call_range'
        WHEN NOT coalesce(NEW.max_parallel BETWEEN 1 AND 10000, true) THEN 'runs_max_parallel_range'
        WHEN NOT coalesce(NEW.max_duration > interval '0', true) THEN 'runs_max_duration_range'
        WHEN NOT coalesce(NEW.max_refusals BETWEEN 1 AND 1000000, true) THEN 'runs_max_refusals_range'
    END;
BEGIN
    IF v_rule IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "runs" violates check constraint "%" (run %)', v_rule, NEW.id
            USING ERRCODE = '23514', CONSTRAINT = v_rule, TABLE = 'runs', SCHEMA = 'docket';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER runs_terms
    BEFORE INSERT OR UPDATE OF input, replan_limit, max_steps, max_effects, max_money, currency, max_call, max_parallel,
                               max_duration, max_refusals
    ON docket.runs
    FOR EACH ROW EXECUTE FUNCTION docket.runs_terms();

CREATE OR REPLACE TRIGGER runs_refuse_delete BEFORE DELETE ON docket.runs
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('runs are kept with their history');

CREATE OR REPLACE FUNCTION docket.run_steps_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM docket.machine_birth('run_step', 'run step ' || NEW.step_id, NEW.state);
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('run_step', 'run ' || OLD.run_id || ' step ' || OLD.step_id, OLD.state, NEW.state);
    -- A result's trust label is written once, with the result: no writer
    -- (the owner's SQL included) launders an untrusted result afterwards.
    IF OLD.result_trusted IS NOT NULL AND NEW.result_trusted IS DISTINCT FROM OLD.result_trusted THEN
        RAISE EXCEPTION 'run % step %: its result''s trust label is written once, with its result', OLD.run_id, OLD.step_id
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NEW;
END
$$;

-- A step's guards on UPDATE are AFTER triggers, as a job's are (jobs.sql,
-- "Guards"): a BEFORE UPDATE row trigger would lock each step an advance
-- moves before moving it, a WAL record a step. A birth is checked before
-- the row is written (an INSERT locks nothing).
CREATE OR REPLACE TRIGGER run_steps_columns_immutable
    AFTER UPDATE OF run_id, step_id, version, kind, ready_seq, args, trusted, job_id, compensation, effect_slot, admitted_at
    ON docket.run_steps
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

CREATE OR REPLACE TRIGGER run_steps_guard AFTER UPDATE ON docket.run_steps
    FOR EACH ROW EXECUTE FUNCTION docket.run_steps_guard();

CREATE OR REPLACE TRIGGER run_steps_guard_birth BEFORE INSERT ON docket.run_steps
    FOR EACH ROW EXECUTE FUNCTION docket.run_steps_guard();

CREATE OR REPLACE TRIGGER run_steps_refuse_delete BEFORE DELETE ON docket.run_steps
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('run steps are kept with their run');

-- The engine ------------------------------------------------------------------------------------

-- run_enqueue enqueues a job of run r: kind p_kind with payload p_payload, as
-- the change context's actor (the run's starter held job.create; the plan
-- authorizes its steps), and returns its id. A step's job has no
-- idempotency key: its step row names it (run_steps.job_id, and
-- compensation_job_id, each unique and written once), and a step is
-- admitted once, under its run's lock; a key would be one more index entry
-- at each of the job's writes, and would let an enqueue under the same key
-- resolve to a run's job.
DROP FUNCTION IF EXISTS docket.run_enqueue(docket.runs, text, jsonb, jsonb, text, boolean);
CREATE OR REPLACE FUNCTION docket.run_enqueue(r docket.runs, p_kind text, p_payload jsonb, p_params jsonb,
                                   p_repeatable boolean DEFAULT false) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_now timestamptz := docket.context_now();
BEGIN
    INSERT INTO docket.jobs AS j (project, kind, payload, params, case_id, repeatable, available_at, created_by, created_at,
                                  updated_at)
    VALUES (r.project, p_kind, p_payload, p_params || jsonb_build_object('run_id', r.id), r.case_id, p_repeatable, v_now,
            docket.context_actor(), v_now, v_now)
    RETURNING j.id INTO v_id;
    RETURN v_id;
END
$$;

-- run_roots is what a start admits set-based (run_start): the first steps of
-- plan p_plan (those after no other), in ascending id, each with its
-- arguments assembled from p_input (trusted as p_input_trusted says) as
-- run_arg assembles them, its kind, whether it is repeatable and its
-- compensation -- when each of them is a job a run may run: it waits on
-- nothing and reads nothing untrusted (so none is refused and the run reads
-- nothing untrusted). Nothing otherwise, nor under docket.advance = 'row':
-- the start admits them one at a time (run_admit), which decides those
-- cases (run_admit_first).
CREATE OR REPLACE FUNCTION docket.run_roots(p_plan bigint, p_input jsonb, p_input_trusted boolean,
                                            OUT steps text[], OUT kinds text[], OUT payloads jsonb[], OUT repeatable boolean[],
                                            OUT compensations text[])
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF current_setting('docket.advance', true) = 'row' THEN
        RETURN;
    END IF;
    SELECT array_agg(ps.step_id ORDER BY ps.step_id), array_agg(ps.kind ORDER BY ps.step_id),
           array_agg(g.payload ORDER BY ps.step_id), array_agg(ps.repeatable ORDER BY ps.step_id),
           array_agg(ps.compensation ORDER BY ps.step_id)
    INTO steps, kinds, payloads, repeatable, compensations
    FROM docket.plan_steps ps
    CROSS JOIN LATERAL (
        SELECT coalesce(jsonb_object_agg(a.arg ->> 'name', coalesce(
                   CASE a.arg -> 'source' ->> 'kind'
                   WHEN 'const' THEN a.arg -> 'source' -> 'value'
                   WHEN 'input' THEN p_input #> ARRAY(SELECT jsonb_array_elements_text(coalesce(a.arg -> 'source' -> 'path', '[]')))
                   END, 'null') ORDER BY a.ord), '{}') AS payload,
               coalesce(bool_and(a.arg -> 'source' ->> 'kind' = 'const'
                                 OR a.arg -> 'source' ->> 'kind' = 'input' AND p_input_trusted), true) AS trusted
        FROM jsonb_array_elements(ps.args) WITH ORDINALITY AS a(arg, ord)
    ) g
    WHERE ps.plan_id = p_plan AND cardinality(ps.after) = 0
    HAVING bool_and(ps.wait IS NULL AND g.trusted);
END
$$;

-- run_admit_first admits run r's first steps as run_roots gave them (p_steps
-- and the rest, in ascending id), in the order and with the records
-- run_admit would write one at a time -- each step's job, enqueued as
-- run_enqueue does, and its step, admitted in ready order 1, 2, .. -- in
-- one INSERT of jobs (one pass of their birth rules, one notification per
-- queue) and one of steps; the run was born with them counted (admitted).
-- Given none (p_steps NULL), it admits the plan's first steps one at a
-- time and applies the run, as a replan's admission does. Returns the run.
CREATE OR REPLACE FUNCTION docket.run_admit_first(r docket.runs, p_steps text[], p_kinds text[], p_payloads jsonb[],
                                                  p_repeatable boolean[], p_compensations text[]) RETURNS docket.runs
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := docket.context_now();
    v_actor text := docket.context_actor();
BEGIN
    IF p_steps IS NULL THEN
        PERFORM docket.run_admit_ready(r.id, NULL);
        PERFORM docket.run_apply(r.id);
        SELECT * INTO r FROM docket.runs WHERE id = r.id;
        RETURN r;
    END IF;
    WITH roots AS (
        SELECT x.* FROM unnest(p_steps, p_kinds, p_payloads, p_repeatable, p_compensations) WITH ORDINALITY
            AS x(step_id, kind, payload, repeatable, compensation, seq)
    ), enqueued AS (
        INSERT INTO docket.jobs AS j (project, kind, payload, params, case_id, repeatable, available_at, created_by, created_at,
                                      updated_at)
        SELECT r.project, roots.kind, roots.payload,
               jsonb_build_object('run_id', r.id, 'step', roots.step_id, 'version', r.version, 'trusted', true),
               r.case_id, roots.repeatable, v_now, v_actor, v_now, v_now
        FROM roots ORDER BY roots.seq
        RETURNING j.id, j.params ->> 'step' AS step_id
    )
    INSERT INTO docket.run_steps (run_id, step_id, version, kind, state, ready_seq, args, trusted, job_id, compensation,
                                  effect_slot, admitted_at, updated_at)
    SELECT r.id, roots.step_id, r.version, roots.kind, 'admitted', roots.seq, roots.payload, true, e.id, roots.compensation,
           r.max_effects IS NOT NULL, v_now, v_now
    FROM roots JOIN enqueued e ON e.step_id = roots.step_id;
    RETURN r;
END
$$;

-- run_result_trusted says whether a step's result p_result keeps its
-- input's label: false when it is labelled untrusted -- an object with a
-- member trust whose value is anything but "trusted" (a label lowers trust,
-- never raises it: a misspelt one lowers it too).
CREATE OR REPLACE FUNCTION docket.run_result_trusted(p_result jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE
RETURN coalesce(NOT (jsonb_typeof(p_result) = 'object' AND p_result ? 'trust'
                     AND p_result -> 'trust' IS DISTINCT FROM '"trusted"'::jsonb), true);

-- run_arg is the value and trust of one argument a (from a plan step's args)
-- for run r: a predecessor's result or a path in it, a path in the input,
-- or a constant; and, when untrusted, the source to name. A predecessor's
-- result is untrusted when its input was, or when the step labelled it so
-- (run_result_trusted).
CREATE OR REPLACE FUNCTION docket.run_arg(r docket.runs, a jsonb, OUT value jsonb, OUT trusted boolean, OUT source text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    src jsonb := a -> 'source';
    v_path text[] := ARRAY(SELECT jsonb_array_elements_text(coalesce(src -> 'path', '[]')));
    st docket.run_steps;
BEGIN
    CASE src ->> 'kind'
    WHEN 'const' THEN
        value := src -> 'value';
        trusted := true;
    WHEN 'input' THEN
        value := r.input #> v_path;
        trusted := r.input_trusted;
        source := 'the run''s input' || CASE WHEN cardinality(v_path) > 0 THEN ' at ' || array_to_string(v_path, '.') ELSE '' END;
    ELSE
        SELECT * INTO st FROM docket.run_steps WHERE run_id = r.id AND step_id = src ->> 'step';
        value := CASE WHEN src ->> 'kind' = 'path' THEN st.result #> v_path ELSE st.result END;
        trusted := st.trusted AND coalesce(st.result_trusted, true);
        source := 'step ' || (src ->> 'step') || CASE WHEN src ->> 'kind' = 'path' THEN ' at ' || array_to_string(v_path, '.') ELSE '' END
                  || CASE WHEN st.trusted AND NOT coalesce(st.result_trusted, true) THEN ' (its result labelled untrusted)' ELSE '' END;
    END CASE;
    value := coalesce(value, 'null');
END
$$;

-- run_admit admits step p_step of run r (its predecessors all applied): it
-- assembles the arguments, joins their trust labels (a step downstream of
-- anything untrusted is untrusted), and enqueues its job -- or, if the step
-- requires trusted input and would not get it, records it refused, naming
-- the source. A waiting step enqueues no job: run_admit_wait registers
-- what it waits on. Returns the admitted step. A run r whose applied is
-- ahead of its row's (run_apply's, applying the step p_step follows) has
-- it written here, with the admission: one write of the run for both.
CREATE OR REPLACE FUNCTION docket.run_admit(r docket.runs, p_step text) RETURNS docket.run_steps
LANGUAGE plpgsql AS $$
DECLARE
    ps docket.plan_steps;
    a jsonb;
    av record;
    v_payload jsonb := '{}';
    v_trusted boolean := true;
    v_untrusted text;
    v_job bigint;
    v_seq integer;
    st docket.run_steps;
    v_now timestamptz := docket.context_now();
BEGIN
    SELECT * INTO STRICT ps FROM docket.plan_steps WHERE plan_id = r.plan_id AND step_id = p_step;
    FOR a IN SELECT * FROM jsonb_array_elements(ps.args) LOOP
        av := docket.run_arg(r, a);
        v_payload := v_payload || jsonb_build_object(a ->> 'name', av.value);
        IF NOT av.trusted THEN
            v_trusted := false;
            v_untrusted := coalesce(v_untrusted, format('argument %s from %s', a ->> 'name', av.source));
        END IF;
    END LOOP;
    -- Downstream of anything untrusted is untrusted, data or not.
    IF v_trusted AND EXISTS (SELECT 1 FROM docket.run_steps s WHERE s.run_id = r.id AND s.step_id = ANY (ps.after)
                             AND NOT (s.trusted AND coalesce(s.result_trusted, true))) THEN
        v_trusted := false;
        v_untrusted := (SELECT format('predecessor %s, which is untrusted', min(s.step_id)) FROM docket.run_steps s
                        WHERE s.run_id = r.id AND s.step_id = ANY (ps.after) AND NOT (s.trusted AND coalesce(s.result_trusted, true)));
    END IF;
    -- A step the policy refuses is counted on the run (refusals).
    UPDATE docket.runs SET admitted = admitted + 1, refusals = refusals + (ps.trusted AND NOT v_trusted)::int,
        untrusted_read = coalesce(untrusted_read, CASE WHEN NOT v_trusted THEN format('step %s: %s', p_step, v_untrusted) END),
        applied = greatest(applied, r.applied),
        updated_at = CASE WHEN r.applied > applied THEN greatest(updated_at, v_now) ELSE updated_at END
    WHERE id = r.id
    RETURNING admitted INTO v_seq;
    IF ps.trusted AND NOT v_trusted THEN
        INSERT INTO docket.run_steps (run_id, step_id, version, kind, state, ready_seq, args, trusted, compensation, reason,
                                      admitted_at, updated_at, wait)
        VALUES (r.id, p_step, r.version, ps.kind, 'refused', v_seq, v_payload, false, ps.compensation,
                format('step %s requires trusted input and would get untrusted %s', p_step, v_untrusted), v_now, v_now,
                ps.wait ->> 'type')
        RETURNING * INTO st;
        RETURN st;
    END IF;
    IF ps.wait IS NOT NULL THEN
        RETURN docket.run_admit_wait(r, ps, v_seq, v_payload, v_trusted);
    END IF;
    v_job := docket.run_enqueue(r, ps.kind, v_payload,
        jsonb_build_object('run_id', r.id, 'step', p_step, 'version', r.version, 'trusted', v_trusted), ps.repeatable);
    -- Under an effects ceiling the step takes its effect slot here, under
    -- the lock with which run_gate found one free.
    INSERT INTO docket.run_steps (run_id, step_id, version, kind, state, ready_seq, args, trusted, job_id, compensation,
                                  effect_slot, admitted_at, updated_at)
    VALUES (r.id, p_step, r.version, ps.kind, 'admitted', v_seq, v_payload, v_trusted, v_job, ps.compensation,
            r.max_effects IS NOT NULL, v_now, v_now)
    RETURNING * INTO st;
    RETURN st;
END
$$;

-- run_bounded says whether run r has a ceiling: a run without one is
-- never held back, and passes run_gate without a call (inlined).
CREATE OR REPLACE FUNCTION docket.run_bounded(r docket.runs) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN r.max_steps IS NOT NULL OR r.max_effects IS NOT NULL OR r.max_money IS NOT NULL OR r.max_parallel IS NOT NULL
    OR r.max_duration IS NOT NULL OR r.max_refusals IS NOT NULL;

-- The hooks by which budgets hold a run. run_gate says whether run r may
-- admit a step now: while no ceiling is reached, fewer than max_parallel
-- steps are in flight, and (with max_effects) an effect slot is free. A
-- ceiling reached exhausts the run (recorded, with which); max_parallel and
-- effect slots held by steps in flight only hold admission back.
-- Effects are counted in advance: each step admitted under max_effects
-- takes a slot (run_steps.effect_slot), under the run's lock that checked
-- it, so however wide the ready set, spent + slots held never passes the
-- ceiling. A slot is held while its step is in flight or uncertain (it may
-- have acted); it is given back when the step ends, succeeded (then what
-- it reported counts in spent_effects instead) or failed or cancelled
-- (nothing spent). A step is one slot: one that reports more than one
-- effect overshoots by its excess. A wall-clock ceiling is checked against
-- the run's own readings (run_clock_read): the time between the earliest
-- and the latest instant it read, never the database's clock.
CREATE OR REPLACE FUNCTION docket.run_gate(r docket.runs) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_in_flight integer;
    v_slots integer;
    v_why text;
    v_now timestamptz := docket.context_now();
BEGIN
    IF NOT docket.run_bounded(r) THEN
        RETURN true;
    END IF;
    SELECT count(*) FILTER (WHERE state = 'admitted'), count(*) FILTER (WHERE effect_slot AND state IN ('admitted', 'uncertain'))
    INTO v_in_flight, v_slots
    FROM docket.run_steps WHERE run_id = r.id AND state IN ('admitted', 'uncertain');
    IF r.max_parallel IS NOT NULL AND v_in_flight >= r.max_parallel THEN
        RETURN false;
    END IF;
    v_why := CASE
        WHEN r.max_steps IS NOT NULL AND r.admitted >= r.max_steps THEN format('steps: %s of %s admitted', r.admitted, r.max_steps)
        WHEN r.max_effects IS NOT NULL AND r.spent_effects >= r.max_effects THEN format('effects: %s of %s', r.spent_effects, r.max_effects)
        WHEN r.max_money IS NOT NULL AND r.spent_money + (v_in_flight + 1) * coalesce(r.max_call, 0) > r.max_money
             OR r.max_money IS NOT NULL AND r.spent_money >= r.max_money
            THEN format('money: %s of %s %s spent, %s steps in flight at up to %s each', r.spent_money, r.max_money, r.currency,
                        v_in_flight, coalesce(r.max_call, 0))
        WHEN r.max_refusals IS NOT NULL AND r.refusals >= r.max_refusals
            THEN format('refusals: %s of %s steps refused by policy', r.refusals, r.max_refusals)
        WHEN r.max_duration IS NOT NULL AND r.clock_last - r.clock_first >= r.max_duration
            THEN format('wall clock: %s elapsed of %s, read from %s to %s', r.clock_last - r.clock_first, r.max_duration,
                        r.clock_first, r.clock_last)
    END;
    IF v_why IS NULL THEN
        -- Every effect slot is held by a step in flight: wait for one back.
        RETURN r.max_effects IS NULL OR r.spent_effects + v_slots < r.max_effects;
    END IF;
    PERFORM docket.run_exhaust(r, v_why);
    RETURN false;
END
$$;

-- run_exhaust exhausts running run r, saying why (p_why: which ceiling,
-- and the figures), recorded as an exhausted row of run_budget_events, and
-- returns the run.
CREATE OR REPLACE FUNCTION docket.run_exhaust(r docket.runs, p_why text) RETURNS docket.runs
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := docket.context_now();
BEGIN
    UPDATE docket.runs SET status = 'exhausted', exhausted = p_why, updated_at = greatest(updated_at, v_now) WHERE id = r.id
    RETURNING * INTO r;
    INSERT INTO docket.run_budget_events (run_id, what, detail, actor, at)
    VALUES (r.id, 'exhausted', jsonb_build_object('why', p_why, 'spent_money', r.spent_money, 'spent_effects', r.spent_effects,
                                                  'admitted', r.admitted, 'refusals', r.refusals), docket.context_actor(), v_now);
    RETURN r;
END
$$;

-- run_clock_read takes run r's reading of the clock at a step boundary --
-- p_boundary 'admit' (before step p_step is admitted) or 'settle' (its
-- outcome recorded) -- when it has a wall-clock ceiling, and returns the
-- run: the instant is the caller's (the change context's, its p_now),
-- journaled as a clock row of run_budget_events, and widens the extremes
-- the run read (clock_first, clock_last), whose distance is its elapsed
-- time, whatever order its boundaries arrived in. A run without one reads
-- nothing.
CREATE OR REPLACE FUNCTION docket.run_clock_read(r docket.runs, p_boundary text, p_step text) RETURNS docket.runs
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := docket.context_now();
BEGIN
    IF r.max_duration IS NULL OR r.status NOT IN ('running', 'exhausted') THEN
        RETURN r;
    END IF;
    INSERT INTO docket.run_budget_events (run_id, what, detail, actor, at)
    VALUES (r.id, 'clock', jsonb_build_object('boundary', p_boundary, 'step', p_step), docket.context_actor(), v_now);
    UPDATE docket.runs SET clock_first = least(coalesce(clock_first, v_now), v_now), clock_last = greatest(coalesce(clock_last, v_now), v_now)
    WHERE id = r.id
    RETURNING * INTO r;
    RETURN r;
END
$$;

-- run_after_apply runs after outcomes were applied: a run that holds steps
-- back for max_parallel or effect slots admits the ready ones as slots free.
CREATE OR REPLACE FUNCTION docket.run_after_apply(p_run bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT (max_parallel IS NOT NULL OR max_effects IS NOT NULL) AND status = 'running' FROM docket.runs WHERE id = p_run) THEN
        PERFORM docket.run_admit_ready(p_run, NULL);
    END IF;
END
$$;

-- budget_spend_read reads a spend report -- what an operation says it
-- spent, {"effects": n, "money": n} -- and returns its effects and its
-- money (minor units), each 0 when absent. It is the one reading of a spend
-- report: a step's (the member spent of its result, run_step_spent) and any
-- other's. Refuses (DK010, naming p_what and the member) a report that is
-- not an object, a member it does not know, and a figure that is not a
-- whole number of 0 or more within bigint (999.5, -1, "12", null): money
-- is integer minor units, and a report misread as nothing spent would let
-- a run past its ceilings unseen.
CREATE OR REPLACE FUNCTION docket.budget_spend_read(p_report jsonb, p_what text, OUT effects bigint, OUT money bigint)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    m record;
BEGIN
    effects := 0;
    money := 0;
    IF jsonb_typeof(p_report) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION '%: invalid spend report %: want a JSON object {"effects": n, "money": n}', p_what, left(p_report::text, 64)
            USING ERRCODE = 'DK010';
    END IF;
    FOR m IN SELECT * FROM jsonb_each(p_report) LOOP
        IF m.key NOT IN ('effects', 'money') THEN
            RAISE EXCEPTION '%: invalid spend report: unknown member %: want effects and money', p_what, left(m.key, 64)
                USING ERRCODE = 'DK010';
        END IF;
        IF jsonb_typeof(m.value) <> 'number' OR m.value::text::numeric <> trunc(m.value::text::numeric)
           OR m.value::text::numeric NOT BETWEEN 0 AND 9223372036854775807 THEN
            RAISE EXCEPTION '%: invalid spend report: % is %: want a whole number of 0 or more (money in integer minor units)',
                p_what, m.key, left(m.value::text, 64)
                USING ERRCODE = 'DK010';
        END IF;
        IF m.key = 'effects' THEN
            effects := m.value::text::numeric::bigint;
        ELSE
            money := m.value::text::numeric::bigint;
        END IF;
    END LOOP;
END
$$;

-- budget_spend_refusal is why budget_spend_read refuses report p_report
-- (p_what naming it), or NULL when it reads it: for a caller that refuses
-- one element of many rather than raise.
CREATE OR REPLACE FUNCTION docket.budget_spend_refusal(p_report jsonb, p_what text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM docket.budget_spend_read(p_report, p_what);
    RETURN NULL;
EXCEPTION WHEN SQLSTATE 'DK010' THEN
    RETURN SQLERRM;
END
$$;

-- run_step_spent records what a step's job reported it spent -- the member
-- spent of its result, read by budget_spend_read -- on the step and in its
-- run's tally: what was recorded, never asked again. A result that is not
-- an object, or has no member spent, spent nothing. Refuses (DK010) a
-- report budget_spend_read refuses: the completion that carried it fails,
-- changing nothing.
CREATE OR REPLACE FUNCTION docket.run_step_spent(p_run bigint, p_step text, p_result jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v record;
BEGIN
    IF docket.result_reports_spend(p_result) IS NOT TRUE THEN
        RETURN;
    END IF;
    v := docket.budget_spend_read(p_result -> 'spent', format('run %s step %s', p_run, p_step));
    UPDATE docket.run_steps SET spent_effects = v.effects, spent_money = v.money WHERE run_id = p_run AND step_id = p_step;
    UPDATE docket.runs SET spent_effects = spent_effects + v.effects, spent_money = spent_money + v.money WHERE id = p_run;
END
$$;

-- run_deps_met reports whether every predecessor of step p_step in run r's
-- plan has succeeded and been applied.
CREATE OR REPLACE FUNCTION docket.run_deps_met(r docket.runs, p_step text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN NOT EXISTS (
        SELECT 1 FROM docket.plan_deps d
        LEFT JOIN docket.run_steps p ON p.run_id = r.id AND p.step_id = d.after_id
        WHERE d.plan_id = r.plan_id AND d.step_id = p_step
          AND (p.step_id IS NULL OR p.state <> 'succeeded' OR p.ready_seq > r.applied));
END
$$;

-- run_admit_ready admits, in ascending step id, the steps of run p_run's
-- plan not yet admitted whose predecessors are all applied and succeeded:
-- those of p_after (the successors of a step just applied), or, when
-- p_after is NULL, every step of the plan (a start or a replan).
CREATE OR REPLACE FUNCTION docket.run_admit_ready(p_run bigint, p_after text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r docket.runs;
BEGIN
    SELECT * INTO r FROM docket.runs WHERE id = p_run;
    PERFORM docket.run_admit_ready_in(r, p_after);
END
$$;

-- run_admit_ready_in is run_admit_ready of run r as the caller holds it:
-- run_apply's, with the step it applies counted in applied before the row
-- says so, for the first admission to write (run_admit).
CREATE OR REPLACE FUNCTION docket.run_admit_ready_in(r docket.runs, p_after text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_ready text[];
    s text;
BEGIN
    IF p_after IS NULL AND r.admitted = 0 THEN
        -- A run that admitted nothing yet has no steps (each is counted in
        -- admitted as it is admitted): its ready steps are the plan's roots.
        SELECT coalesce(array_agg(c.step_id ORDER BY c.step_id), '{}') INTO v_ready FROM docket.plan_steps c
        WHERE c.plan_id = r.plan_id AND cardinality(c.after) = 0;
    ELSIF p_after IS NULL THEN
        SELECT coalesce(array_agg(c.step_id ORDER BY c.step_id), '{}') INTO v_ready FROM docket.plan_steps c
        WHERE c.plan_id = r.plan_id
          AND NOT EXISTS (SELECT 1 FROM docket.run_steps x WHERE x.run_id = r.id AND x.step_id = c.step_id)
          AND docket.run_deps_met(r, c.step_id);
    ELSE
        -- The successors of p_after: one range scan of plan_deps_after_idx.
        SELECT coalesce(array_agg(d.step_id ORDER BY d.step_id), '{}') INTO v_ready FROM docket.plan_deps d
        WHERE d.plan_id = r.plan_id AND d.after_id = p_after
          AND NOT EXISTS (SELECT 1 FROM docket.run_steps x WHERE x.run_id = r.id AND x.step_id = d.step_id)
          AND docket.run_deps_met(r, d.step_id);
    END IF;
    FOREACH s IN ARRAY v_ready LOOP
        EXIT WHEN r.status <> 'running';
        -- A run without ceilings reads no clock and passes every gate.
        IF r.max_duration IS NOT NULL THEN
            r := docket.run_clock_read(r, 'admit', s);
        END IF;
        EXIT WHEN docket.run_bounded(r) AND NOT docket.run_gate(r);
        PERFORM docket.run_admit(r, s);
        SELECT * INTO r FROM docket.runs WHERE id = r.id;
    END LOOP;
END
$$;

-- run_apply applies, in ready order, the outcomes of run p_run's steps that
-- have one: a success admits its successors; anything else begins the
-- unwind -- except a step the policy refused in a run with a refusal
-- ceiling (max_refusals), which stops its own branch, and exhausts the run
-- when the refusals reach the ceiling (a running run that has nothing left
-- in flight then unwinds). It stops at the first step still running or waiting. A running run whose
-- terminal steps have all succeeded and been applied has succeeded. An
-- unwinding run with no step left running compensates.
CREATE OR REPLACE FUNCTION docket.run_apply(p_run bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r docket.runs;
    st docket.run_steps;
    v_now timestamptz := docket.context_now();
    v_applied integer;
BEGIN
    SELECT * INTO r FROM docket.runs WHERE id = p_run FOR NO KEY UPDATE;
    WHILE r.status IN ('running', 'exhausted') LOOP
        SELECT * INTO st FROM docket.run_steps WHERE run_id = r.id AND ready_seq = r.applied + 1;
        EXIT WHEN NOT FOUND OR st.state IN ('admitted', 'waiting');
        IF st.state = 'succeeded' THEN
            -- The success is applied with its successors' admission, in
            -- one write of the run (run_admit writes applied with admitted);
            -- only when none is admitted is applied written alone.
            r.applied := r.applied + 1;
            v_applied := r.applied;
            PERFORM docket.run_admit_ready_in(r, st.step_id);
            SELECT * INTO r FROM docket.runs WHERE id = p_run;
            IF r.applied < v_applied THEN
                UPDATE docket.runs SET applied = v_applied, updated_at = greatest(updated_at, v_now) WHERE id = r.id RETURNING * INTO r;
            END IF;
            CONTINUE;
        END IF;
        UPDATE docket.runs SET applied = applied + 1, updated_at = greatest(updated_at, v_now) WHERE id = r.id RETURNING * INTO r;
        IF st.state = 'refused' AND r.max_refusals IS NOT NULL THEN
            -- Under a refusal ceiling a refused step stops its own branch;
            -- reaching the ceiling exhausts the run.
            IF r.status = 'running' AND r.refusals >= r.max_refusals THEN
                r := docket.run_exhaust(r, format('refusals: %s of %s steps refused by policy', r.refusals, r.max_refusals));
            END IF;
        ELSE
            UPDATE docket.runs SET status = 'unwinding', updated_at = greatest(updated_at, v_now),
                failure = left(format('step %s %s%s', st.step_id, st.state, coalesce(': ' || st.reason, '')), 2000)
            WHERE id = r.id RETURNING * INTO r;
        END IF;
    END LOOP;
    -- r is the run as the loop left it: only a run holding steps back
    -- (max_parallel, max_effects) has anything for run_after_apply to do.
    IF (r.max_parallel IS NOT NULL OR r.max_effects IS NOT NULL) AND r.status = 'running' THEN
        PERFORM docket.run_after_apply(r.id);
        SELECT * INTO r FROM docket.runs WHERE id = p_run;
    END IF;
    IF r.status IN ('running', 'exhausted') AND NOT EXISTS (
        SELECT 1 FROM docket.plan_steps t WHERE t.plan_id = r.plan_id AND t.terminal
          AND NOT EXISTS (SELECT 1 FROM docket.run_steps s WHERE s.run_id = r.id AND s.step_id = t.step_id
                          AND s.state = 'succeeded' AND s.ready_seq <= r.applied)) THEN
        UPDATE docket.runs
        SET status = 'succeeded', finished_at = greatest(updated_at, v_now), updated_at = greatest(updated_at, v_now),
            output = (SELECT s.result FROM docket.run_steps s JOIN docket.plan_steps t ON t.plan_id = r.plan_id AND t.step_id = s.step_id
                      WHERE s.run_id = r.id AND t.terminal ORDER BY s.step_id LIMIT 1)
        WHERE id = r.id;
    ELSIF r.status = 'running' AND r.refusals > 0
          AND NOT EXISTS (SELECT 1 FROM docket.run_steps WHERE run_id = r.id AND state IN ('admitted', 'uncertain')) THEN
        -- Refused steps held back every branch left: nothing can run, and
        -- the run unwinds as a refusal without a ceiling would have.
        UPDATE docket.runs SET status = 'unwinding', updated_at = greatest(updated_at, v_now),
            failure = left((SELECT format('step %s refused%s; nothing else can run', s.step_id, coalesce(': ' || s.reason, ''))
                            FROM docket.run_steps s WHERE s.run_id = r.id AND s.state = 'refused' ORDER BY s.ready_seq LIMIT 1), 2000)
        WHERE id = r.id;
        PERFORM docket.run_unwind(r.id);
    ELSIF r.status = 'unwinding' THEN
        PERFORM docket.run_unwind(r.id);
    END IF;
END
$$;

-- run_unwind moves run p_run's unwind on: once no admitted step is still
-- running, it compensates the completed steps (succeeded, or uncertain:
-- they may have acted) that name a compensation, one at a time, in reverse
-- of ready order: the next is enqueued when the one before succeeded. When
-- none is left the run is compensated; a compensation that did not succeed
-- leaves it failed.
CREATE OR REPLACE FUNCTION docket.run_unwind(p_run bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r docket.runs;
    st docket.run_steps;
    v_now timestamptz := docket.context_now();
BEGIN
    SELECT * INTO r FROM docket.runs WHERE id = p_run FOR NO KEY UPDATE;
    IF r.status <> 'unwinding' THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM docket.run_steps WHERE run_id = r.id AND state IN ('admitted', 'compensating')) THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM docket.run_steps WHERE run_id = r.id AND state = 'compensation_failed') THEN
        UPDATE docket.runs SET status = 'failed', finished_at = greatest(updated_at, v_now), updated_at = greatest(updated_at, v_now)
        WHERE id = r.id;
        RETURN;
    END IF;
    SELECT * INTO st FROM docket.run_steps
    WHERE run_id = r.id AND state IN ('succeeded', 'uncertain') AND compensation IS NOT NULL
    ORDER BY ready_seq DESC LIMIT 1;
    IF NOT FOUND THEN
        UPDATE docket.runs SET status = 'compensated', finished_at = greatest(updated_at, v_now), updated_at = greatest(updated_at, v_now)
        WHERE id = r.id;
        RETURN;
    END IF;
    UPDATE docket.run_steps
    SET state = 'compensating', updated_at = greatest(updated_at, v_now),
        compensation_job_id = docket.run_enqueue(r, st.compensation,
            jsonb_build_object('args', st.args, 'result', st.result, 'step', st.step_id, 'outcome', st.state),
            jsonb_build_object('run_id', r.id, 'step', st.step_id, 'compensates', st.kind))
    WHERE run_id = r.id AND step_id = st.step_id;
END
$$;

-- run_hold orders the outcomes of run p_run: what this transaction reads
-- of the run after it, no other outcome of the run changes until it ends.
-- Under READ COMMITTED a lock does it (FOR NO KEY UPDATE, the lock an
-- UPDATE takes): the later outcome waits, and its next statement sees the
-- earlier one. Under REPEATABLE READ and SERIALIZABLE a lock does not
-- refresh the snapshot, so the row is written (guard_seq, once per
-- transaction: not again once this transaction wrote it, age(xmin) = 0)
-- and the later outcome fails with 40001. The lock writes no row version,
-- so the run's first real write of the transaction re-checks no foreign
-- key, as every later write of a row the transaction wrote does.
CREATE OR REPLACE FUNCTION docket.run_hold(p_run bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') = 'read committed' THEN
        PERFORM 1 FROM docket.runs WHERE id = p_run FOR NO KEY UPDATE;
    ELSE
        UPDATE docket.runs SET guard_seq = guard_seq + 1 WHERE id = p_run AND age(xmin) <> 0;
    END IF;
END
$$;

-- run_job_ended records, for job p_id of run p_run that moved to p_state
-- (with p_result or p_diagnostic), its step's outcome (or its
-- compensation's) and moves the run on: a success records the result, a
-- failure, death or cancellation fails the step, an uncertain job leaves
-- it uncertain. The run row is held first (run_hold): two completions of
-- one run are ordered, the later one seeing the earlier (READ COMMITTED)
-- or failing with 40001 (REPEATABLE READ, SERIALIZABLE), so no step is
-- admitted twice nor past a ceiling from a stale snapshot.
CREATE OR REPLACE FUNCTION docket.run_job_ended(p_id bigint, p_state text, p_result jsonb, p_diagnostic text, p_run bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    st docket.run_steps;
    v_now timestamptz := docket.context_now();
BEGIN
    PERFORM docket.run_hold(p_run);
    SELECT * INTO st FROM docket.run_steps WHERE job_id = p_id;
    IF FOUND THEN
        IF st.state = 'admitted' AND p_state = 'succeeded' OR st.state = 'uncertain' AND p_state = 'succeeded' THEN
            UPDATE docket.run_steps SET state = 'succeeded', result = p_result, updated_at = greatest(updated_at, v_now),
                result_trusted = st.trusted AND docket.run_result_trusted(p_result)
            WHERE run_id = st.run_id AND step_id = st.step_id;
            IF docket.result_reports_spend(p_result) THEN
                PERFORM docket.run_step_spent(st.run_id, st.step_id, p_result);
            END IF;
        ELSIF st.state = 'admitted' AND p_state IN ('failed', 'dead') THEN
            UPDATE docket.run_steps SET state = 'failed', reason = left(p_diagnostic, 2000), updated_at = greatest(updated_at, v_now)
            WHERE run_id = st.run_id AND step_id = st.step_id;
        ELSIF st.state = 'admitted' AND p_state = 'cancelled' THEN
            UPDATE docket.run_steps SET state = 'cancelled', reason = left(p_diagnostic, 2000), updated_at = greatest(updated_at, v_now)
            WHERE run_id = st.run_id AND step_id = st.step_id;
        ELSIF st.state = 'admitted' AND p_state = 'uncertain' THEN
            UPDATE docket.run_steps SET state = 'uncertain', reason = 'its job''s holder vanished', updated_at = greatest(updated_at, v_now)
            WHERE run_id = st.run_id AND step_id = st.step_id;
        ELSE
            RETURN;
        END IF;
        PERFORM docket.run_clock_read(r, 'settle', st.step_id) FROM docket.runs r WHERE r.id = st.run_id AND r.max_duration IS NOT NULL;
        -- run_apply moves an unwinding run's unwind on itself.
        PERFORM docket.run_apply(st.run_id);
        RETURN;
    END IF;
    SELECT * INTO st FROM docket.run_steps WHERE compensation_job_id = p_id;
    IF FOUND AND st.state = 'compensating' THEN
        IF p_state = 'succeeded' THEN
            UPDATE docket.run_steps SET state = 'compensated', updated_at = greatest(updated_at, v_now)
            WHERE run_id = st.run_id AND step_id = st.step_id;
        ELSIF p_state IN ('failed', 'dead', 'cancelled', 'uncertain') THEN
            UPDATE docket.run_steps SET state = 'compensation_failed', reason = left(coalesce(p_diagnostic, p_state), 2000),
                updated_at = greatest(updated_at, v_now)
            WHERE run_id = st.run_id AND step_id = st.step_id;
        ELSE
            RETURN;
        END IF;
        PERFORM docket.run_unwind(st.run_id);
    END IF;
    RETURN;
END
$$;

-- run_admit_wait admits waiting step ps of run r (held by the caller,
-- running) at ready_seq p_seq with arguments p_args of trust p_trusted: the
-- step is recorded waiting, with no job, and what it waits on is
-- registered, owned by (run, step), as the change context's actor at its
-- instant:
--   sleep    {"type": "sleep", "until": instant} or {"for": seconds}: a
--            timer of the step (timer_arm_step), fired by the timer sweep;
--   message  {"type": "message", "kind", "key", "value": source, "within":
--            seconds}: a wait on the keys kind:KIND and KEY:VALUE (the value
--            from its source, as an argument's) until the deadline, meeting
--            a buffered message at once (wait_place_step);
--   task     {"type": "task", ...}: a human task of the step (task_open_step).
-- A value that makes no valid key fails the step (its run unwinds) rather
-- than the transaction that admitted it. Returns the step.
CREATE OR REPLACE FUNCTION docket.run_admit_wait(r docket.runs, ps docket.plan_steps, p_seq integer, p_args jsonb,
                                                 p_trusted boolean) RETURNS docket.run_steps
LANGUAGE plpgsql AS $$
DECLARE
    st docket.run_steps;
    v_now timestamptz := docket.context_now();
    v_wait jsonb := ps.wait;
    v_value text;
    v_keys text[];
BEGIN
    INSERT INTO docket.run_steps (run_id, step_id, version, kind, state, ready_seq, args, trusted, compensation,
                                  admitted_at, updated_at, wait)
    VALUES (r.id, ps.step_id, r.version, ps.kind, 'waiting', p_seq, p_args, p_trusted, ps.compensation, v_now, v_now,
            v_wait ->> 'type')
    RETURNING * INTO st;
    CASE v_wait ->> 'type'
    WHEN 'sleep' THEN
        PERFORM docket.timer_arm_step(r, ps.step_id,
            coalesce((v_wait ->> 'until')::timestamptz, v_now + make_interval(secs => (v_wait ->> 'for')::double precision)));
    WHEN 'message' THEN
        v_value := (docket.run_arg(r, jsonb_build_object('source', v_wait -> 'value'))).value #>> '{}';
        v_keys := ARRAY(SELECT k FROM unnest(ARRAY['kind:' || (v_wait ->> 'kind'), (v_wait ->> 'key') || ':' || v_value]) k
                        ORDER BY k COLLATE "C");
        IF v_value IS NULL OR NOT docket.valid_wait_keys(v_keys) THEN
            UPDATE docket.run_steps SET state = 'failed', updated_at = v_now,
                reason = left(format('step %s: its correlation value %s makes no valid key', ps.step_id, coalesce(v_value, 'null')), 2000)
            WHERE run_id = r.id AND step_id = ps.step_id
            RETURNING * INTO st;
            RETURN st;
        END IF;
        PERFORM docket.wait_place_step(r, ps.step_id, left('step.' || ps.step_id, 63), v_keys,
            v_now + make_interval(secs => (v_wait ->> 'within')::double precision));
    WHEN 'task' THEN
        PERFORM docket.task_open_step(r, ps.step_id, v_wait, p_args);
    END CASE;
    SELECT * INTO st FROM docket.run_steps WHERE run_id = r.id AND step_id = ps.step_id;
    RETURN st;
END
$$;

-- run_step_answered records the answer to waiting step p_step of run p_run
-- -- p_state succeeded with p_result, or failed for p_reason -- and moves
-- the run on as a job's end does (run_apply, run_unwind), in the
-- transaction of whatever answered it: the timer sweep, a delivery, a
-- task's decision or expiry, a wait's expiry. The run row is held first
-- (run_hold), ordering answers as run_job_ended orders completions. A step
-- no longer waiting (its run stopped, or it was answered) is left alone.
CREATE OR REPLACE FUNCTION docket.run_step_answered(p_run bigint, p_step text, p_state text, p_result jsonb, p_reason text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    st docket.run_steps;
    v_now timestamptz := docket.context_now();
BEGIN
    PERFORM docket.run_hold(p_run);
    SELECT * INTO st FROM docket.run_steps WHERE run_id = p_run AND step_id = p_step FOR UPDATE;
    IF NOT FOUND OR st.state <> 'waiting' THEN
        RETURN;
    END IF;
    UPDATE docket.run_steps
    SET state = p_state, result = CASE WHEN p_state = 'succeeded' THEN p_result END,
        reason = left(p_reason, 2000), updated_at = greatest(updated_at, v_now)
    WHERE run_id = p_run AND step_id = p_step;
    -- run_apply moves an unwinding run's unwind on itself.
    PERFORM docket.run_apply(p_run);
END
$$;

-- run_steps_succeeded_set records, set-based, the successes of jobs p_ids
-- (with results p_results, in order) and moves their runs on as
-- run_job_ended and run_apply would one at a time: in one UPDATE of their
-- steps, one INSERT of every successor's job (one pass of the jobs' birth
-- rules for the batch), one INSERT of those steps and one UPDATE of the
-- runs -- where the one-at-a-time path writes each run several times. A run
-- is taken whole, with every success of it in p_ids, or not at all, and
-- only when that path would decide it the same way without asking anything
-- more: the run is running without ceilings or refusals; each step was
-- admitted and its result reports no spend; the apply, walking the steps in
-- ready order over the successes, old and new, stops at a step still
-- running or waiting (or at the end); the successors it makes ready wait on
-- nothing and are not refused, and an untrusted one joins a run that
-- already read something untrusted (the run's untrusted_read names the
-- first); and a run this finishes has one success in p_ids (with several,
-- the one-at-a-time path would finish it at one and leave the others
-- recorded but not applied). A successor is admitted when the last of its
-- predecessors in ready order is applied, in ascending step id, as the
-- walk admits it. Returns the ids it took; the caller advances the others
-- one at a time. The caller holds the runs (FOR NO KEY UPDATE, in id order) under
-- READ COMMITTED, so each statement here sees them as they are.
CREATE OR REPLACE FUNCTION docket.run_steps_succeeded_set(p_ids bigint[], p_results jsonb[]) RETURNS bigint[]
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_now   timestamptz := docket.context_now();
    v_actor text := docket.context_actor();
    v_took  bigint[];
BEGIN
    -- Each row of a CTE below comes from one row of the one before it, by
    -- a lookup by key (LATERAL ... OFFSET 0, never a scan of a table that
    -- grows) or by aggregating that row's own rows; a CTE is read by
    -- another whole, once (a membership as ANY (ARRAY(...)), the jobs
    -- inserted as one map), and joined to another only in done (c with ok,
    -- which Postgres hashes). The plan is generic, made for the few rows of
    -- a first batch: a join of two CTEs can be a nested loop that reads the
    -- inner one again for every row of the outer, and a batch's cost then
    -- grows with the square of its size.
    WITH c AS MATERIALIZED (
        -- The candidates: each with its step and the result's label.
        SELECT j.id AS job_id, j.result, st.run_id, st.state,
               st.trusted AND docket.run_result_trusted(j.result) AS result_trusted
        FROM unnest(p_ids, p_results) AS j(id, result)
        CROSS JOIN LATERAL (SELECT st.run_id, st.state, st.trusted FROM docket.run_steps st WHERE st.job_id = j.id OFFSET 0) st
    ), r AS MATERIALIZED (
        -- Their runs: running, without ceilings or refusals, each candidate
        -- admitted and reporting no spend; with the candidates' results by
        -- job id: [has a result, result, result trusted].
        SELECT r.id AS run_id, r.plan_id, r.version, r.project, r.case_id, r.applied, r.admitted, r.input, r.input_trusted,
               r.untrusted_read, cc.n_took, cc.took
        FROM (SELECT c.run_id, count(*) AS n_took,
                     coalesce(bool_or(c.state <> 'admitted' OR docket.result_reports_spend(c.result)), false) AS odd,
                     jsonb_object_agg(c.job_id::text, jsonb_build_array(c.result IS NOT NULL, c.result, c.result_trusted)) AS took
              FROM c GROUP BY c.run_id) cc
        CROSS JOIN LATERAL (SELECT r.* FROM docket.runs r
                            WHERE r.id = cc.run_id AND r.status = 'running' AND NOT docket.run_bounded(r) AND r.refusals = 0
                            OFFSET 0) r
        WHERE NOT cc.odd
    ), e AS MATERIALIZED (
        -- How far each run's apply now reaches: to the step before the
        -- first, in ready order, that has not succeeded, which must be
        -- running or waiting (else the one-at-a-time path decides more).
        -- m: the steps the walk reads, by step id, as the successes leave
        -- them: [ready order, state, result, trusted, result trusted, no
        -- result].
        SELECT r.run_id, r.plan_id, r.version, r.project, r.case_id, r.applied, r.admitted, r.input, r.input_trusted,
               r.untrusted_read, r.n_took, k.m, coalesce(k.stop_seq, r.admitted + 1) - 1 AS reach
        FROM r
        CROSS JOIN LATERAL (
            SELECT jsonb_object_agg(x.step_id, jsonb_build_array(x.ready_seq, o.state, o.result, x.trusted, o.result_trusted,
                       o.result IS NULL)) AS m,
                   min(x.ready_seq) FILTER (WHERE x.ready_seq > r.applied AND o.state <> 'succeeded') AS stop_seq,
                   (array_agg(x.state ORDER BY x.ready_seq) FILTER (WHERE x.ready_seq > r.applied AND o.state <> 'succeeded'))[1]
                       AS stop_state
            FROM (
                -- The steps the walk reads, not the whole run: those past
                -- the applied ones, the predecessors and argument sources
                -- of the steps after them, and the terminal steps.
                SELECT f.step_id FROM docket.run_steps f WHERE f.run_id = r.run_id AND f.ready_seq > r.applied
                UNION
                SELECT src.step_id FROM docket.run_steps f
                JOIN docket.plan_deps d ON d.plan_id = r.plan_id AND d.after_id = f.step_id
                JOIN docket.plan_steps ps ON ps.plan_id = r.plan_id AND ps.step_id = d.step_id
                CROSS JOIN LATERAL (SELECT unnest(ps.after)
                                    UNION ALL
                                    SELECT g.arg -> 'source' ->> 'step' FROM jsonb_array_elements(ps.args) AS g(arg)) AS src(step_id)
                WHERE f.run_id = r.run_id AND f.ready_seq > r.applied
                UNION
                SELECT t.step_id FROM docket.plan_steps t WHERE t.plan_id = r.plan_id AND t.terminal
            ) w
            CROSS JOIN LATERAL (SELECT x.* FROM docket.run_steps x WHERE x.run_id = r.run_id AND x.step_id = w.step_id OFFSET 0) x
            -- A step the statement ended holds the result it ended with
            -- (which may be NULL: no coalesce), any other the one it has.
            CROSS JOIN LATERAL (SELECT r.took -> x.job_id::text AS t) tk
            CROSS JOIN LATERAL (SELECT CASE WHEN tk.t IS NULL THEN x.state ELSE 'succeeded' END AS state,
                                       CASE WHEN tk.t IS NULL THEN x.result WHEN (tk.t ->> 0)::boolean THEN tk.t -> 1 END AS result,
                                       CASE WHEN tk.t IS NULL THEN x.result_trusted ELSE (tk.t ->> 2)::boolean END AS result_trusted) o
        ) k
        WHERE k.m IS NOT NULL AND (k.stop_state IS NULL OR k.stop_state IN ('admitted', 'waiting'))
    ), ok AS MATERIALIZED (
        -- A run is taken when each successor would be admitted as a job,
        -- neither waiting nor refused, nor the first untrusted read; and,
        -- when the apply finishes it (its terminal steps all succeeded
        -- within the reach), by its one success here. Its successors come
        -- with it, in the order the walk admits them (ready order).
        SELECT e.run_id, e.version, e.project, e.case_id, e.applied, e.admitted, e.reach, t.finished, t.output,
               n.next_ids, n.kinds, n.payloads, n.trusted, n.compensations, n.repeatable
        FROM e
        CROSS JOIN LATERAL (
            SELECT e.reach > e.applied
                   AND coalesce(bool_and(coalesce(e.m -> t.step_id ->> 1 = 'succeeded'
                                                  AND (e.m -> t.step_id ->> 0)::integer <= e.reach, false)), true) AS finished,
                   (array_agg(CASE WHEN NOT (e.m -> t.step_id ->> 5)::boolean THEN e.m -> t.step_id -> 2 END ORDER BY t.step_id)
                        FILTER (WHERE e.m ? t.step_id))[1] AS output
            FROM docket.plan_steps t WHERE t.plan_id = e.plan_id AND t.terminal
        ) t
        CROSS JOIN LATERAL (
            SELECT coalesce(bool_or(a.wait IS NOT NULL OR NOT a.trusted AND (a.needs_trusted OR e.untrusted_read IS NULL)), false)
                       AS blocked,
                   array_agg(a.next_id ORDER BY a.due, a.next_id) AS next_ids,
                   array_agg(a.kind ORDER BY a.due, a.next_id) AS kinds,
                   array_agg(a.payload ORDER BY a.due, a.next_id) AS payloads,
                   array_agg(a.trusted ORDER BY a.due, a.next_id) AS trusted,
                   array_agg(a.compensation ORDER BY a.due, a.next_id) AS compensations,
                   array_agg(a.repeatable ORDER BY a.due, a.next_id) AS repeatable
            FROM (
                -- Each successor its applied steps make ready: not
                -- admitted yet, every predecessor succeeded and within the
                -- reach; due when the last of them in ready order is
                -- applied. With its arguments (run_arg's, with the steps
                -- read as they now are) and trust (run_admit's).
                SELECT s.next_id, s.kind, s.wait, s.needs_trusted, s.compensation, s.repeatable, s.due,
                       coalesce(g.payload, '{}') AS payload,
                       coalesce(g.trusted, true) AND NOT EXISTS (
                           SELECT 1 FROM unnest(s.after) AS p
                           WHERE NOT ((e.m -> p ->> 3)::boolean AND coalesce((e.m -> p ->> 4)::boolean, true))) AS trusted
                FROM (
                    SELECT ps.step_id AS next_id, ps.kind, ps.args, ps.after, ps.trusted AS needs_trusted, ps.wait, ps.compensation,
                           ps.repeatable, w.due
                    FROM jsonb_each(e.m) AS ap(step_id, v)
                    JOIN docket.plan_deps d ON d.plan_id = e.plan_id AND d.after_id = ap.step_id
                    JOIN docket.plan_steps ps ON ps.plan_id = e.plan_id AND ps.step_id = d.step_id
                    CROSS JOIN LATERAL (
                        SELECT max((e.m -> p ->> 0)::integer) AS due,
                               bool_and(coalesce(e.m -> p ->> 1 = 'succeeded' AND (e.m -> p ->> 0)::integer <= e.reach, false)) AS met
                        FROM unnest(ps.after) AS p
                    ) w
                    WHERE (ap.v ->> 0)::integer > e.applied AND (ap.v ->> 0)::integer <= e.reach
                      AND (ap.v ->> 0)::integer = w.due AND w.met AND NOT (e.m ? ps.step_id)
                ) s
                CROSS JOIN LATERAL (
                    SELECT jsonb_object_agg(x.arg ->> 'name', coalesce(
                               CASE x.arg -> 'source' ->> 'kind'
                               WHEN 'const' THEN x.arg -> 'source' -> 'value'
                               WHEN 'input' THEN e.input #> x.path
                               WHEN 'path' THEN x.result #> x.path
                               ELSE x.result
                               END, 'null') ORDER BY x.ord) AS payload,
                           bool_and(CASE x.arg -> 'source' ->> 'kind'
                                    WHEN 'const' THEN true
                                    WHEN 'input' THEN e.input_trusted
                                    ELSE (e.m -> x.src ->> 3)::boolean AND coalesce((e.m -> x.src ->> 4)::boolean, true)
                                    END IS NOT FALSE) AS trusted
                    FROM (SELECT el.arg, el.ord, el.arg -> 'source' ->> 'step' AS src, e.m -> (el.arg -> 'source' ->> 'step') -> 2 AS result,
                                 ARRAY(SELECT jsonb_array_elements_text(coalesce(el.arg -> 'source' -> 'path', '[]'))) AS path
                          FROM jsonb_array_elements(s.args) WITH ORDINALITY AS el(arg, ord)) x
                ) g
            ) a
        ) n
        WHERE NOT (t.finished AND e.n_took > 1) AND NOT n.blocked
    ), ready AS MATERIALIZED (
        -- The successors admitted, numbered in ready order.
        SELECT ok.run_id, ok.project, ok.case_id, ok.version, u.next_id, u.kind, u.payload, u.trusted, u.compensation,
               u.repeatable, ok.admitted + u.i AS ready_seq
        FROM ok
        CROSS JOIN LATERAL unnest(ok.next_ids, ok.kinds, ok.payloads, ok.trusted, ok.compensations, ok.repeatable)
            WITH ORDINALITY AS u(next_id, kind, payload, trusted, compensation, repeatable, i)
    ), done AS (
        UPDATE docket.run_steps st
        SET state = 'succeeded', result = c.result, updated_at = greatest(st.updated_at, v_now), result_trusted = c.result_trusted
        FROM c JOIN ok ON ok.run_id = c.run_id
        WHERE st.job_id = c.job_id
    ), enqueued AS (
        -- run_enqueue's rows, in the order the one-at-a-time path takes them.
        INSERT INTO docket.jobs AS j (project, kind, payload, params, case_id, repeatable, available_at, created_by, created_at,
                                      updated_at)
        SELECT ready.project, ready.kind, ready.payload,
               jsonb_build_object('run_id', ready.run_id, 'step', ready.next_id, 'version', ready.version, 'trusted', ready.trusted),
               ready.case_id, ready.repeatable, v_now, v_actor, v_now, v_now
        FROM ready ORDER BY ready.run_id, ready.ready_seq
        RETURNING j.id, j.params ->> 'run_id' AS run_id, j.params ->> 'step' AS step_id
    ), admitted AS (
        -- Each step with its job, found in one map of the jobs inserted (a
        -- subquery of no row of ready: Postgres makes it once).
        INSERT INTO docket.run_steps (run_id, step_id, version, kind, state, ready_seq, args, trusted, job_id, compensation,
                                      effect_slot, admitted_at, updated_at)
        SELECT ready.run_id, ready.next_id, ready.version, ready.kind, 'admitted', ready.ready_seq, ready.payload, ready.trusted,
               ((SELECT jsonb_object_agg(e.run_id || ':' || e.step_id, e.id) FROM enqueued e) ->> (ready.run_id || ':' || ready.next_id))::bigint,
               ready.compensation, false, v_now, v_now
        FROM ready
    ), runs_moved AS (
        -- The runs the apply moved: applied and admitted counted, and a
        -- finished run succeeded, with the first terminal step's result as
        -- its output.
        UPDATE docket.runs r
        SET applied = ok.reach, admitted = r.admitted + coalesce(cardinality(ok.next_ids), 0),
            updated_at = greatest(r.updated_at, v_now),
            status = CASE WHEN ok.finished THEN 'succeeded' ELSE r.status END,
            finished_at = CASE WHEN ok.finished THEN greatest(r.updated_at, v_now) ELSE r.finished_at END,
            output = CASE WHEN ok.finished THEN ok.output ELSE r.output END
        FROM ok WHERE r.id = ok.run_id AND ok.reach > ok.applied
    )
    SELECT coalesce(array_agg(c.job_id), '{}') INTO v_took FROM c WHERE c.run_id = ANY (ARRAY(SELECT ok.run_id FROM ok));
    RETURN v_took;
END
$$;

-- jobs_advance_runs runs after every UPDATE of jobs, once per statement:
-- for the jobs of runs it moved to an end, it holds their runs in id order
-- and moves them on. Under READ COMMITTED, the successes of runs whose
-- every job it ended succeeded are first taken set-based, run by run, where
-- they can be (run_steps_succeeded_set); every other ended job, in order of
-- run and job, by run_job_ended. So a statement that ends jobs of several runs (a
-- batch's completion) takes their runs' locks in one order, and two such
-- statements never wait for each other in a circle. The set is taken for
-- two successes or more; the setting docket.advance (a session's, a role's
-- or a database's) = 'row' sends every job one at a time, and = 'set' takes
-- the set for one success too: the two ways reach the same records.
-- A worker's session keeps the generic plans of its first batch: made
-- when the tables held a few runs, the set statement reads runs and
-- run_steps whole at every later batch until an ANALYZE of them (the
-- planner judges a few pages cheaper whole than by key). Planning it
-- without sequential scans (enable_seqscan, as job_take does) planned the
-- statements it reaches so too, and made a fault scenario's worker lose
-- its leases under load (docs/plans.md): not done.
CREATE OR REPLACE FUNCTION docket.jobs_advance_runs() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    j record;
    v_ids bigint[];         -- the jobs of runs the statement ended, in order of run and job
    v_states text[];
    v_results jsonb[];
    v_diagnostics text[];
    v_runs bigint[];
    v_set bigint[];         -- the successes taken set-based, if they are
    v_set_results jsonb[];
    v_took bigint[] := '{}';
    v_nestloop text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_jobs n WHERE n.params ? 'run_id') THEN
        RETURN NULL;
    END IF;
    -- The statement's old and new rows joined by hash at every size: the
    -- join's plan is kept for the session, made for the rows of the
    -- statement that first runs it, and one made for a lone job (a nested
    -- loop) would compare every old row with every new one in each later
    -- batch. Planned without nested loops, and only it: what this function
    -- calls after it is planned as before.
    v_nestloop := current_setting('enable_nestloop');
    PERFORM set_config('enable_nestloop', 'off', true);
    SELECT array_agg(e.id ORDER BY e.run_id, e.id), array_agg(e.state ORDER BY e.run_id, e.id),
           array_agg(e.result ORDER BY e.run_id, e.id), array_agg(e.diagnostic ORDER BY e.run_id, e.id),
           array_agg(e.run_id ORDER BY e.run_id, e.id)
    INTO v_ids, v_states, v_results, v_diagnostics, v_runs
    FROM (SELECT n.id, n.state::text AS state, n.result::jsonb AS result, n.diagnostic::text AS diagnostic,
                 (n.params ->> 'run_id')::bigint AS run_id
          FROM new_jobs n JOIN old_jobs o ON o.id = n.id
          WHERE n.params ? 'run_id' AND o.state IS DISTINCT FROM n.state
            AND n.state IN ('succeeded', 'failed', 'dead', 'cancelled', 'uncertain')) e;
    PERFORM set_config('enable_nestloop', v_nestloop, true);
    IF v_ids IS NULL THEN
        RETURN NULL;
    END IF;
    IF current_setting('transaction_isolation') = 'read committed'
       AND current_setting('docket.advance', true) IS DISTINCT FROM 'row' THEN
        -- The successes of runs that only succeeded here, in id order.
        SELECT array_agg(e.id ORDER BY e.id) FILTER (WHERE e.all_succeeded),
               array_agg(e.result ORDER BY e.id) FILTER (WHERE e.all_succeeded)
        INTO v_set, v_set_results
        FROM (SELECT e.id, e.result, bool_and(e.state = 'succeeded') OVER (PARTITION BY e.run_id) AS all_succeeded
              FROM unnest(v_ids, v_states, v_results, v_runs) AS e(id, state, result, run_id)) e;
        -- One success alone costs the same either way (the set's one
        -- statement is a large plan to start): the set is for batches.
        IF cardinality(v_set) > 1 OR cardinality(v_set) = 1 AND current_setting('docket.advance', true) = 'set' THEN
            PERFORM 1 FROM docket.runs r WHERE r.id = ANY (v_runs) ORDER BY r.id FOR NO KEY UPDATE;
            v_took := docket.run_steps_succeeded_set(v_set, v_set_results);
        END IF;
    END IF;
    FOR j IN
        SELECT e.* FROM unnest(v_ids, v_states, v_results, v_diagnostics, v_runs) WITH ORDINALITY
            AS e(id, state, result, diagnostic, run_id, i)
        WHERE e.id <> ALL (v_took)
        ORDER BY e.i
    LOOP
        PERFORM docket.run_job_ended(j.id, j.state, j.result, j.diagnostic, j.run_id);
    END LOOP;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER jobs_advance_runs
    AFTER UPDATE ON docket.jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION docket.jobs_advance_runs();

-- The API ----------------------------------------------------------------------------------------

-- run_start stores plan p_canonical (digest p_digest) in p_project, once,
-- and starts a run of it with input p_input (trusted as p_input_trusted
-- says), of case p_case_id (0: none), allowing p_replan_limit replans, on
-- behalf of p_actor at p_now: its first steps (those after no other) are
-- admitted in ascending id. Returns the run.
-- Refuses, writing nothing: a plan that does not hold (DK010, naming the
-- step), malformed input (DK010); an actor without plan.run and job.create
-- on the project (DK009); a case not of the project (P0002), or closed
-- (DK005).
CREATE OR REPLACE FUNCTION docket.run_start(p_project text, p_digest text, p_canonical text, p_input jsonb, p_input_trusted boolean,
                                 p_case_id bigint, p_replan_limit integer, p_actor text, p_now timestamptz)
RETURNS docket.runs
LANGUAGE plpgsql AS $$
DECLARE
    v_plan bigint;
    r docket.runs;
    v_steps text[];         -- the first steps, when admitted set-based (run_roots)
    v_kinds text[];
    v_payloads jsonb[];
    v_repeatable boolean[];
    v_compensations text[];
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    IF NOT (docket.grant_check(p_actor, p_project, 'plan.run') AND docket.grant_check(p_actor, p_project, 'job.create')) THEN
        RAISE EXCEPTION '% may not run plans in project %: it needs explicit plan.run and job.create grants', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    PERFORM docket.require_valid(p_input IS NOT NULL AND docket.json_size(p_input) <= 65536, 'run input',
        left(p_input::text, 64), 'JSON of at most 65536 characters');
    PERFORM docket.require_valid(p_replan_limit BETWEEN 0 AND 100, 'replan limit', p_replan_limit::text, '0 to 100');
    IF nullif(p_case_id, 0) IS NOT NULL THEN
        IF NOT EXISTS (SELECT 1 FROM docket.cases WHERE id = p_case_id AND project = p_project) THEN
            RAISE EXCEPTION 'case % does not exist in project %', p_case_id, p_project USING ERRCODE = 'P0002';
        END IF;
        IF (docket.case_hold(p_case_id)).status <> 'open' THEN
            RAISE EXCEPTION 'case % is closed: it cannot start a run', p_case_id USING ERRCODE = 'DK005';
        END IF;
    END IF;
    v_plan := docket.plan_store(p_project, p_digest, p_canonical, p_actor, p_now);
    -- A run whose first steps are all jobs it may run is born with them
    -- counted and admits them set-based; any other, and every run under
    -- docket.advance = 'row', one at a time: the two reach the same records.
    SELECT x.steps, x.kinds, x.payloads, x.repeatable, x.compensations
    INTO v_steps, v_kinds, v_payloads, v_repeatable, v_compensations
    FROM docket.run_roots(v_plan, p_input, p_input_trusted) x;
    INSERT INTO docket.runs (project, plan_id, case_id, input, input_trusted, replan_limit, admitted, created_by, created_at,
                             updated_at)
    VALUES (p_project, v_plan, nullif(p_case_id, 0), p_input, p_input_trusted, p_replan_limit, coalesce(cardinality(v_steps), 0),
            p_actor, p_now, p_now)
    RETURNING * INTO r;
    INSERT INTO docket.run_versions (run_id, version, plan_id, actor, at) VALUES (r.id, 1, v_plan, p_actor, p_now);
    RETURN docket.run_admit_first(r, v_steps, v_kinds, v_payloads, v_repeatable, v_compensations);
END
$$;

-- run_start with a budget: as run_start, with ceilings (NULL: none) set
-- before its first steps are admitted -- steps, effects, money in
-- p_currency, one call, steps in flight, wall-clock time (p_max_duration)
-- and policy refusals (p_max_refusals) -- and its worst case reserved in
-- the project's quota. Refuses, writing nothing, as run_start; ceilings out
-- of range, money without a currency (DK010); a quota it would exceed
-- (DK009).
DROP FUNCTION IF EXISTS docket.run_start(text, text, text, jsonb, boolean, bigint, integer, integer, bigint, bigint, text, bigint, integer,
                                         text, timestamptz);
CREATE OR REPLACE FUNCTION docket.run_start(p_project text, p_digest text, p_canonical text, p_input jsonb, p_input_trusted boolean,
                                 p_case_id bigint, p_replan_limit integer,
                                 p_max_steps integer, p_max_effects bigint, p_max_money bigint, p_currency text,
                                 p_max_call bigint, p_max_parallel integer, p_max_duration interval, p_max_refusals integer,
                                 p_actor text, p_now timestamptz)
RETURNS docket.runs
LANGUAGE plpgsql AS $$
DECLARE
    v_plan bigint;
    r docket.runs;
    v_steps text[];         -- the first steps, when admitted set-based (run_roots)
    v_kinds text[];
    v_payloads jsonb[];
    v_repeatable boolean[];
    v_compensations text[];
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    IF NOT (docket.grant_check(p_actor, p_project, 'plan.run') AND docket.grant_check(p_actor, p_project, 'job.create')) THEN
        RAISE EXCEPTION '% may not run plans in project %: it needs explicit plan.run and job.create grants', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    PERFORM docket.require_valid(p_input IS NOT NULL AND docket.json_size(p_input) <= 65536, 'run input',
        left(p_input::text, 64), 'JSON of at most 65536 characters');
    PERFORM docket.require_valid(p_replan_limit BETWEEN 0 AND 100, 'replan limit', p_replan_limit::text, '0 to 100');
    PERFORM docket.require_valid((p_max_money IS NULL) = (p_currency IS NULL) AND (p_currency IS NULL OR p_currency ~ '^[A-Z]{3}$'),
        'currency', p_currency, 'a money ceiling comes with its currency, three capital letters (ISO 4217)');
    PERFORM docket.require_valid(coalesce(p_max_steps >= 0 AND p_max_steps <= 1000000, true) AND coalesce(p_max_effects >= 0, true)
        AND coalesce(p_max_money >= 0, true) AND coalesce(p_max_call >= 0, true) AND coalesce(p_max_parallel BETWEEN 1 AND 10000, true)
        AND coalesce(p_max_duration > interval '0', true) AND coalesce(p_max_refusals BETWEEN 1 AND 1000000, true),
        'ceilings', concat_ws(',', p_max_steps, p_max_effects, p_max_money, p_max_call, p_max_parallel, p_max_duration, p_max_refusals),
        'steps 0..1000000, effects, money and a call 0 or more, in flight 1..10000, a duration over 0, refusals 1..1000000');
    IF nullif(p_case_id, 0) IS NOT NULL THEN
        IF NOT EXISTS (SELECT 1 FROM docket.cases WHERE id = p_case_id AND project = p_project) THEN
            RAISE EXCEPTION 'case % does not exist in project %', p_case_id, p_project USING ERRCODE = 'P0002';
        END IF;
        IF (docket.case_hold(p_case_id)).status <> 'open' THEN
            RAISE EXCEPTION 'case % is closed: it cannot start a run', p_case_id USING ERRCODE = 'DK005';
        END IF;
    END IF;
    v_plan := docket.plan_store(p_project, p_digest, p_canonical, p_actor, p_now);
    -- As run_start's: and only a run without a ceiling (run_bounded), whose
    -- every admission passes run_gate unasked.
    IF num_nonnulls(p_max_steps, p_max_effects, p_max_money, p_max_parallel, p_max_duration, p_max_refusals) = 0 THEN
        SELECT x.steps, x.kinds, x.payloads, x.repeatable, x.compensations
        INTO v_steps, v_kinds, v_payloads, v_repeatable, v_compensations
        FROM docket.run_roots(v_plan, p_input, p_input_trusted) x;
    END IF;
    INSERT INTO docket.runs (project, plan_id, case_id, input, input_trusted, replan_limit, max_steps, max_effects, max_money,
                             currency, max_call, max_parallel, max_duration, max_refusals, admitted, created_by, created_at,
                             updated_at)
    VALUES (p_project, v_plan, nullif(p_case_id, 0), p_input, p_input_trusted, p_replan_limit, p_max_steps, p_max_effects,
            p_max_money, p_currency, p_max_call, p_max_parallel, p_max_duration, p_max_refusals, coalesce(cardinality(v_steps), 0),
            p_actor, p_now, p_now)
    RETURNING * INTO r;
    IF r.max_money IS NOT NULL THEN
        PERFORM docket.budget_reserve(r, p_now);
    END IF;
    INSERT INTO docket.run_versions (run_id, version, plan_id, actor, at) VALUES (r.id, 1, v_plan, p_actor, p_now);
    RETURN docket.run_admit_first(r, v_steps, v_kinds, v_payloads, v_repeatable, v_compensations);
END
$$;

-- run_authorize returns run p_id locked for p_actor holding plan.run on its
-- project; P0002 otherwise, in the same words for a run that does not exist.
CREATE OR REPLACE FUNCTION docket.run_authorize(p_id bigint, p_actor text) RETURNS docket.runs
LANGUAGE plpgsql AS $$
DECLARE
    r docket.runs;
BEGIN
    SELECT * INTO r FROM docket.runs WHERE id = p_id;
    IF NOT FOUND OR NOT docket.grant_check(p_actor, r.project, 'plan.run') THEN
        RAISE EXCEPTION 'run % does not exist (or % holds no plan.run on its project)', coalesce(p_id::text, 'NULL'), p_actor
            USING ERRCODE = 'P0002';
    END IF;
    SELECT * INTO r FROM docket.runs WHERE id = p_id FOR UPDATE;
    RETURN r;
END
$$;

-- run_replan replaces the plan run p_run runs with a successor (p_digest,
-- p_canonical) that names the plan it replaces (p_predecessor, its digest)
-- and why (p_reason), on behalf of p_actor at p_now, and returns the run.
-- Both versions stay on record. Refuses, writing nothing: no reason, a
-- predecessor that is not the plan the run runs now (DK010, naming both);
-- a run past its replan limit (DK010); a run that has admitted an
-- untrusted value (DK010, naming the source); a run that is not running
-- (DK014); a completed step the successor carries over changed, or a
-- started step whose kind it changed, measured against what the step was
-- admitted as under whichever version admitted it (DK010, naming the step
-- and both kinds); a plan that
-- does not hold (DK010); a successor bringing in a job kind no plan of the
-- run declared, by an actor without job.create on the project (DK009).
CREATE OR REPLACE FUNCTION docket.run_replan(p_run bigint, p_predecessor text, p_digest text, p_canonical text, p_reason text,
                                  p_actor text, p_now timestamptz)
RETURNS docket.runs
LANGUAGE plpgsql AS $$
DECLARE
    r docket.runs;
    v_current text;
    v_plan bigint;
    bad record;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    r := docket.run_authorize(p_run, p_actor);
    IF p_reason IS NULL OR length(btrim(p_reason)) = 0 OR length(p_reason) > 2000 THEN
        RAISE EXCEPTION 'run %: a replan needs a reason (1-2000 characters)', r.id USING ERRCODE = 'DK010';
    END IF;
    SELECT digest INTO v_current FROM docket.plans WHERE id = r.plan_id;
    IF p_predecessor IS DISTINCT FROM v_current THEN
        RAISE EXCEPTION 'run %: the successor names predecessor %, but the run runs plan %', r.id, coalesce(nullif(p_predecessor, ''), 'none'), v_current
            USING ERRCODE = 'DK010';
    END IF;
    IF r.status <> 'running' THEN
        RAISE EXCEPTION 'run % is %: it cannot be replanned', r.id, r.status USING ERRCODE = 'DK014';
    END IF;
    IF r.version - 1 >= r.replan_limit THEN
        RAISE EXCEPTION 'run %: its replan limit of % is reached', r.id, r.replan_limit USING ERRCODE = 'DK010';
    END IF;
    IF r.untrusted_read IS NOT NULL THEN
        RAISE EXCEPTION 'run %: no replan once an untrusted value has been read (%)', r.id, r.untrusted_read USING ERRCODE = 'DK010';
    END IF;
    v_plan := docket.plan_store(r.project, p_digest, p_canonical, p_actor, p_now);
    -- A completed step is carried over unchanged or not at all; a started
    -- step keeps its kind. Checked against what the step was admitted as
    -- (the plan of the version it was admitted under), not the plan in
    -- force: a version that dropped a completed step does not free its id
    -- for new work that the old result would satisfy.
    SELECT s.step_id, s.state, s.version, o.kind AS was, n.kind AS now INTO bad FROM docket.run_steps s
    JOIN docket.run_versions v ON v.run_id = s.run_id AND v.version = s.version
    JOIN docket.plan_steps o ON o.plan_id = v.plan_id AND o.step_id = s.step_id
    JOIN docket.plan_steps n ON n.plan_id = v_plan AND n.step_id = s.step_id
    WHERE s.run_id = r.id
      AND (s.state NOT IN ('admitted', 'waiting')
           AND (o.kind, o.args, o.after, o.terminal, o.compensation, o.trusted, o.repeatable, o.wait)
               IS DISTINCT FROM (n.kind, n.args, n.after, n.terminal, n.compensation, n.trusted, n.repeatable, n.wait)
           OR s.state IN ('admitted', 'waiting') AND (o.kind, o.wait) IS DISTINCT FROM (n.kind, n.wait))
    ORDER BY s.step_id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'run %: step % is %: % (admitted as % under version %; the successor declares %)', r.id, bad.step_id, bad.state,
            CASE WHEN bad.state IN ('admitted', 'waiting') THEN 'a started step keeps its kind and its wait'
                 ELSE 'a completed step is carried over unchanged or not at all' END,
            bad.was, bad.version, bad.now
            USING ERRCODE = 'DK010';
    END IF;
    -- A replan by a principal without job.create brings in no job kind the
    -- run's plans have not declared (as a step or a compensation): plan.run
    -- reshapes a run, it does not widen what the run may enqueue.
    IF NOT docket.grant_check(p_actor, r.project, 'job.create') THEN
        SELECT k.kind INTO bad FROM (
            SELECT n.kind::text AS kind FROM docket.plan_steps n WHERE n.plan_id = v_plan
            UNION
            SELECT n.compensation::text FROM docket.plan_steps n WHERE n.plan_id = v_plan AND n.compensation IS NOT NULL
        ) k
        WHERE NOT EXISTS (SELECT 1 FROM docket.run_versions v JOIN docket.plan_steps o ON o.plan_id = v.plan_id
                          WHERE v.run_id = r.id AND (o.kind = k.kind OR o.compensation = k.kind))
        ORDER BY k.kind LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'run %: the successor brings in job kind %, which no plan of the run declared; % holds no job.create on %',
                r.id, bad.kind, p_actor, r.project
                USING ERRCODE = 'DK009';
        END IF;
    END IF;
    INSERT INTO docket.run_versions (run_id, version, plan_id, predecessor, reason, actor, at)
    VALUES (r.id, r.version + 1, v_plan, r.plan_id, p_reason, p_actor, p_now);
    UPDATE docket.runs SET plan_id = v_plan, version = version + 1, updated_at = greatest(updated_at, p_now)
    WHERE id = r.id RETURNING * INTO r;
    PERFORM docket.run_admit_ready(r.id, NULL);
    PERFORM docket.run_apply(r.id);
    SELECT * INTO r FROM docket.runs WHERE id = r.id;
    RETURN r;
END
$$;

-- run_lock_waits locks, for a cancel of run p_run by p_actor (holding
-- plan.run on its project; otherwise nothing), what the run's waiting
-- steps wait on, in the order a decision, a delivery and a sweep take
-- them -- its open tasks, then its waiting waits, then its armed timers --
-- before the cancel takes the run row, so a cancel and an answer racing on
-- one run wait for each other instead of deadlocking.
CREATE OR REPLACE FUNCTION docket.run_lock_waits(p_run bigint, p_actor text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM docket.runs r WHERE r.id = p_run AND docket.grant_check(p_actor, r.project, 'plan.run')) THEN
        RETURN;
    END IF;
    PERFORM 1 FROM docket.tasks WHERE run_id = p_run AND status IN ('pending', 'escalated') ORDER BY id FOR NO KEY UPDATE;
    PERFORM 1 FROM docket.waits WHERE run_id = p_run AND status = 'waiting' ORDER BY id FOR UPDATE;
    PERFORM 1 FROM docket.timers WHERE run_id = p_run AND fired_at IS NULL AND disarmed_at IS NULL ORDER BY id FOR UPDATE;
END
$$;

-- run_cancel cancels run p_run on behalf of p_actor at p_now: the steps not
-- started (queued jobs) are cancelled, and the run unwinds once those
-- running have finished. Cancelling a run that is not running (or
-- exhausted) is a no-op.
CREATE OR REPLACE FUNCTION docket.run_cancel(p_run bigint, p_reason text, p_actor text, p_now timestamptz)
RETURNS docket.runs
LANGUAGE plpgsql AS $$
DECLARE
    r docket.runs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.run_lock_waits(p_run, p_actor);
    r := docket.run_authorize(p_run, p_actor);
    -- exhausted: the state budgets add, a run stopped at a ceiling.
    IF r.status NOT IN ('running', 'exhausted') THEN
        RETURN r;
    END IF;
    UPDATE docket.runs SET status = 'unwinding', updated_at = greatest(updated_at, p_now),
        failure = left(format('cancelled by %s%s', p_actor, coalesce(': ' || nullif(p_reason, ''), '')), 2000)
    WHERE id = r.id;
    UPDATE docket.jobs j
    SET state = 'cancelled', diagnostic = left(format('cancelled: run %s was cancelled', r.id), 2000),
        finished_at = greatest(j.updated_at, p_now), updated_at = greatest(j.updated_at, p_now)
    FROM docket.run_steps s
    WHERE s.run_id = r.id AND s.state = 'admitted' AND j.id = s.job_id AND j.state = 'queued';
    PERFORM docket.run_unwind(r.id);
    SELECT * INTO r FROM docket.runs WHERE id = r.id;
    RETURN r;
END
$$;

-- Reads ------------------------------------------------------------------------------------------

-- run_suspended says whether run p_run, of status p_status, is suspended:
-- running (or exhausted) with steps waiting and none admitted, so that
-- nothing moves it until a wait is answered. It reads the steps as the
-- caller may (row-level security), and sees what the statement calling it
-- wrote before (it is VOLATILE): a start reads what it just admitted.
CREATE OR REPLACE FUNCTION docket.run_suspended(p_run bigint, p_status text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN p_status IN ('running', 'exhausted')
           AND EXISTS (SELECT 1 FROM docket.run_steps s WHERE s.run_id = p_run AND s.state = 'waiting')
           AND NOT EXISTS (SELECT 1 FROM docket.run_steps s WHERE s.run_id = p_run AND s.state = 'admitted');
END
$$;

-- run_get returns run p_id when p_actor holds plan.run, case.admit or
-- case.view on its project.
CREATE OR REPLACE FUNCTION docket.run_get(p_id bigint, p_actor text) RETURNS SETOF docket.runs
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    RETURN QUERY SELECT * FROM docket.runs r
    WHERE r.id = p_id AND (docket.grant_check(p_actor, r.project, 'plan.run') OR docket.grant_check(p_actor, r.project, 'case.admit')
                           OR docket.grant_check(p_actor, r.project, 'case.view'));
END
$$;

-- run_steps_of returns the admitted steps of run p_id in ready order, when
-- p_actor may read the run.
CREATE OR REPLACE FUNCTION docket.run_steps_of(p_id bigint, p_actor text) RETURNS SETOF docket.run_steps
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    IF NOT EXISTS (SELECT 1 FROM docket.run_get(p_id, p_actor)) THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM docket.run_steps WHERE run_id = p_id ORDER BY ready_seq;
END
$$;

-- run_versions_of returns every version of run p_id's plan, oldest first,
-- with its digest and canonical text, when p_actor may read the run.
CREATE OR REPLACE FUNCTION docket.run_versions_of(p_id bigint, p_actor text)
RETURNS TABLE (version integer, digest text, canonical text, predecessor text, reason text, actor text, at timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    IF NOT EXISTS (SELECT 1 FROM docket.run_get(p_id, p_actor)) THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT v.version, p.digest, p.canonical, q.digest, v.reason, v.actor, v.at
    FROM docket.run_versions v JOIN docket.plans p ON p.id = v.plan_id LEFT JOIN docket.plans q ON q.id = v.predecessor
    WHERE v.run_id = p_id ORDER BY v.version;
END
$$;

-- run_waits: what each waiting step of a run waits on -- a timer (its wake
-- instant), a wait (its keys and deadline) or a task (its deadline) -- and
-- whether the run is suspended: running, with steps waiting and none
-- running (no job, no worker, no lease holds it).
CREATE OR REPLACE VIEW docket.run_waits WITH (security_invoker = true) AS
SELECT s.run_id, r.project, s.step_id, s.wait,
       NOT EXISTS (SELECT 1 FROM docket.run_steps x WHERE x.run_id = s.run_id AND x.state = 'admitted') AS suspended,
       tm.id AS timer_id, tm.wake_at, w.id AS wait_id, w.keys, w.deadline, tk.id AS task_id, tk.status AS task_status,
       tk.deadline AS task_deadline, s.admitted_at
FROM docket.run_steps s
JOIN docket.runs r ON r.id = s.run_id AND r.status IN ('running', 'exhausted')
LEFT JOIN docket.timers tm ON tm.run_id = s.run_id AND tm.step_id = s.step_id
LEFT JOIN docket.tasks tk ON tk.run_id = s.run_id AND tk.step_id = s.step_id
LEFT JOIN docket.waits w ON w.run_id = s.run_id AND w.step_id = s.step_id AND tk.id IS NULL
WHERE s.state = 'waiting';

COMMENT ON VIEW docket.run_waits IS
    'Waiting steps of running runs and what each waits on (timer, wait or task); suspended: the run has no step running.';

-- run_waits_of returns what the waiting steps of run p_id wait on, in step
-- order, when p_actor may read the run.
CREATE OR REPLACE FUNCTION docket.run_waits_of(p_id bigint, p_actor text) RETURNS SETOF docket.run_waits
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    IF NOT EXISTS (SELECT 1 FROM docket.run_get(p_id, p_actor)) THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM docket.run_waits w WHERE w.run_id = p_id ORDER BY w.step_id;
END
$$;

INSERT INTO docket.api_functions (name, role) VALUES
    ('run_start', 'app'), ('run_replan', 'app'), ('run_cancel', 'app'), ('run_get', 'app'), ('run_steps_of', 'app'),
    ('run_versions_of', 'app'), ('run_waits_of', 'app');

-- Who may read what (row-level security; see kit.sql) --------------------------

-- Plans and runs are visible where the login's principals hold plan.run,
-- batch.run, case.admit or case.view (as run_get and batch_get); a plan's
-- steps and a run's versions and steps with them.
CREATE POLICY plans_visible_to_run_readers ON docket.plans FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('plan.run', 'batch.run', 'case.admit', 'case.view'))::text[]));

CREATE POLICY plan_steps_visible_with_their_plan ON docket.plan_steps FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.plans p WHERE p.id = plan_id));

CREATE POLICY plan_deps_visible_with_their_plan ON docket.plan_deps FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.plans p WHERE p.id = plan_id));

CREATE POLICY runs_visible_to_run_readers ON docket.runs FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('plan.run', 'batch.run', 'case.admit', 'case.view'))::text[]));

CREATE POLICY run_versions_visible_with_their_run ON docket.run_versions FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.runs r WHERE r.id = run_id));

CREATE POLICY run_steps_visible_with_their_run ON docket.run_steps FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.runs r WHERE r.id = run_id));
