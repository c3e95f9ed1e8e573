-- Schedules: durable cron. A schedule fires at local date-times of a cron
-- expression in an IANA zone; the schedule sweep materializes each due
-- occurrence as an ordinary job, in the transaction that moves the
-- schedule's cursor on.
--
--   schedule status   active <-> paused, active | paused -> finished,
--                     active -> broken -> active | paused | finished
--                     (docket.schedule_transitions; finished is terminal)
--
-- The invariants live here, for every writer, psql included:
--   * an occurrence's identity is (schedule, local date-time, fold): the
--     unique key of docket.schedule_occurrences, so however many sweepers
--     run, an occurrence is materialized once. The local time is a whole
--     minute, as cron matches and as the job key
--     (schedule:ID:YYYY-MM-DDTHH:MI:FOLD) names it, so identity and key
--     agree; fold 1, a second run of one local time, exists only where that
--     local time repeats in the schedule's zone, a fall-back overlap (DK010
--     otherwise);
--   * the cursor (the instant after which the next occurrence is sought)
--     and the run count only move forward; a finished schedule never
--     changes (schedules_guard);
--   * a schedule never runs more than max_occurrences (a CHECK on runs);
--   * a schedule declares how it ends: an end instant (ends_at) or an
--     occurrence count (max_occurrences), or, to run forever, a reason
--     (unbounded_reason, 1-500 characters) and neither bound
--     (schedules_bounded_or_reasoned, a CHECK);
--   * a schedule the sweep cannot plan is broken, with the reason
--     (broken_reason, broken_at, set exactly then): it is passed over, and
--     the schedules behind it still advance, until an update or a resume
--     mends it;
--   * every change appends a docket.schedule_events row, and a missed
--     window the catch-up policy does not run is recorded there as skipped.
--
-- Occurrence instants are computed in Go (package schedules, from the cron
-- expression, the zone and the cursor) and passed in; the database decides
-- who may do what, what is unique and what may change.
--
-- Who may do what (explicit grants on the schedule's project):
--   schedule.manage  create (with job.create), change, pause, resume and
--                    finish schedules; read them
--   schedule.view    read schedules, their occurrences and history
--   schedule.sweep   the schedule sweep materializes due occurrences (and
--                    needs job.create to enqueue them)
-- A schedule the actor may not manage is not there: its functions answer
-- P0002, as for an unknown schedule.
--
-- Bounds: name 1-63 characters; cron 200; zone 64; max_catch_up 1..1000;
-- grace 1 second .. 24 hours; max_occurrences 1 or more; unbounded_reason
-- and broken_reason 1-500 characters; sweep batch 1..10000; 1000
-- occurrences per schedule per sweep.

-- The schedule machine's states and moves (docket.schedule_states, docket.schedule_transitions),
-- as 00028_schedules.sql declares them.
SELECT docket.machine_views('schedule');

-- schedules_guard holds every INSERT and UPDATE of docket.schedules to the
-- rules: a schedule is born active with no runs and its cursor at its start
-- (DK001); id, project, name and creation never change, and the cursor and
-- the run count never move back (DK015); status moves only along
-- docket.schedule_transitions, and a finished schedule never changes (DK001).
CREATE OR REPLACE FUNCTION docket.schedules_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM docket.machine_birth('schedule', 'schedule ' || NEW.name, NEW.status);
        IF NEW.runs IS DISTINCT FROM 0 OR NEW.cursor_at IS DISTINCT FROM NEW.starts_at THEN
            RAISE EXCEPTION 'schedule %: a schedule is created with no runs, its cursor at its start', NEW.name
                USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('schedule', 'schedule ' || OLD.id, OLD.status, NEW.status);
    IF NEW.cursor_at < OLD.cursor_at OR NEW.runs < OLD.runs THEN
        RAISE EXCEPTION 'schedule %: its cursor and its run count only move forward', OLD.id
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER schedule_events_in_order
    BEFORE INSERT ON docket.schedule_events
    FOR EACH ROW EXECUTE FUNCTION docket.event_in_order();

CREATE OR REPLACE TRIGGER schedules_guard
    BEFORE INSERT OR UPDATE ON docket.schedules
    FOR EACH ROW EXECUTE FUNCTION docket.schedules_guard();

CREATE OR REPLACE TRIGGER schedules_columns_immutable
    BEFORE UPDATE OF id, project, name, created_by, created_at ON docket.schedules
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

CREATE OR REPLACE TRIGGER schedules_refuse_delete
    BEFORE DELETE ON docket.schedules
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('schedules are kept with their history: finish a schedule instead');

CREATE OR REPLACE TRIGGER project_takes_work
    BEFORE INSERT ON docket.schedules
    FOR EACH ROW EXECUTE FUNCTION docket.project_takes_work();

-- local_time_repeats reports whether local date-time p_local happens twice
-- in zone p_zone: some instant other than the one Postgres resolves it to
-- shows the same local time, an offset change of up to two hours away.
CREATE OR REPLACE FUNCTION docket.local_time_repeats(p_local timestamp, p_zone text) RETURNS boolean
LANGUAGE sql STABLE
RETURN EXISTS (
    SELECT 1 FROM unnest(ARRAY[interval '15 minutes', interval '30 minutes', interval '45 minutes',
                               interval '1 hour', interval '90 minutes', interval '2 hours']) d
    WHERE ((p_local AT TIME ZONE p_zone) + d) AT TIME ZONE p_zone = p_local
       OR ((p_local AT TIME ZONE p_zone) - d) AT TIME ZONE p_zone = p_local);

-- schedule_occurrences_fold refuses (DK010) an occurrence's second run (fold
-- 1) of a local time that happens once in its schedule's zone.
CREATE OR REPLACE FUNCTION docket.schedule_occurrences_fold() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_zone text;
BEGIN
    SELECT zone INTO v_zone FROM docket.schedules WHERE id = NEW.schedule_id;
    IF v_zone IS NOT NULL AND NOT docket.local_time_repeats(NEW.local_time, v_zone) THEN
        RAISE EXCEPTION 'schedule %: % happens once in %: it has no second run (fold 1)', NEW.schedule_id, NEW.local_time, v_zone
            USING ERRCODE = 'DK010';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER schedule_occurrences_fold
    BEFORE INSERT ON docket.schedule_occurrences
    FOR EACH ROW WHEN (NEW.fold = 1)
    EXECUTE FUNCTION docket.schedule_occurrences_fold();

CREATE OR REPLACE TRIGGER schedule_events_append_only
    BEFORE UPDATE OR DELETE ON docket.schedule_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- schedules_record appends the created, status and updated events of a
-- schedule, attributed to the change context: a creation with its bounds or
-- its unbounded reason, a move to broken with the reason. The sweep's cursor moves
-- record nothing here: their record is the occurrences.
CREATE OR REPLACE FUNCTION docket.schedules_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO docket.schedule_events (schedule_id, what, to_state, actor, at, detail)
        VALUES (NEW.id, 'created', NEW.status, docket.context_actor(), docket.context_now(),
                jsonb_strip_nulls(jsonb_build_object('cron', NEW.cron, 'zone', NEW.zone, 'job_kind', NEW.job_kind,
                    'ends_at', NEW.ends_at, 'max_occurrences', NEW.max_occurrences,
                    'unbounded_reason', NEW.unbounded_reason)));
        RETURN NULL;
    END IF;
    IF NEW.status <> OLD.status THEN
        INSERT INTO docket.schedule_events (schedule_id, what, from_state, to_state, actor, at, detail)
        VALUES (NEW.id, 'status', OLD.status, NEW.status, docket.context_actor(), docket.context_now(),
                CASE WHEN NEW.status = 'broken' THEN jsonb_build_object('reason', NEW.broken_reason) END);
    END IF;
    IF (NEW.cron, NEW.zone, NEW.job_kind, NEW.job_queue, NEW.job_payload, NEW.job_payload_schema, NEW.job_max_attempts,
        NEW.catch_up, NEW.max_catch_up, NEW.grace, NEW.ends_at, NEW.max_occurrences, NEW.unbounded_reason)
       IS DISTINCT FROM
       (OLD.cron, OLD.zone, OLD.job_kind, OLD.job_queue, OLD.job_payload, OLD.job_payload_schema, OLD.job_max_attempts,
        OLD.catch_up, OLD.max_catch_up, OLD.grace, OLD.ends_at, OLD.max_occurrences, OLD.unbounded_reason) THEN
        INSERT INTO docket.schedule_events (schedule_id, what, actor, at, detail)
        VALUES (NEW.id, 'updated', docket.context_actor(), docket.context_now(),
                jsonb_strip_nulls(jsonb_build_object('cron', NEW.cron, 'zone', NEW.zone, 'job_kind', NEW.job_kind,
                    'catch_up', NEW.catch_up, 'ends_at', NEW.ends_at, 'max_occurrences', NEW.max_occurrences,
                    'unbounded_reason', NEW.unbounded_reason)));
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER schedules_record
    AFTER INSERT OR UPDATE ON docket.schedules
    FOR EACH ROW EXECUTE FUNCTION docket.schedules_record();

-- Reading ---------------------------------------------------------------------------

-- schedule_visible reports whether p_principal may read the schedules of
-- p_project: it holds schedule.manage or schedule.view there.
CREATE OR REPLACE FUNCTION docket.schedule_visible(p_principal text, p_project text) RETURNS boolean
LANGUAGE sql STABLE
RETURN EXISTS (
    SELECT 1 FROM docket.grants
    WHERE project = p_project AND principal = p_principal AND capability IN ('schedule.manage', 'schedule.view')
);

-- Operator views: what falls due when (filter with the instant you mean:
--     SELECT * FROM docket.schedules_due WHERE next_due_at <= '2026-11-29 10:00Z'),
-- and what was skipped.
CREATE OR REPLACE VIEW docket.schedules_due WITH (security_invoker = true) AS
SELECT s.id, s.project, s.name, s.cron, s.zone, s.catch_up, s.next_due_at, s.cursor_at, s.runs, s.max_occurrences, s.ends_at
FROM docket.schedules s
WHERE s.status = 'active'
ORDER BY s.next_due_at, s.id;

COMMENT ON VIEW docket.schedules_due IS
    'Active schedules, soonest due first. Due at instant T: WHERE next_due_at <= T; the schedule sweep runs them.';

CREATE OR REPLACE VIEW docket.schedule_skips WITH (security_invoker = true) AS
SELECT e.schedule_id, s.project, s.name, e.at AS swept_at, e.detail ->> 'policy' AS policy,
       (e.detail ->> 'count')::bigint AS skipped, e.detail -> 'first' AS first, e.detail -> 'last' AS last
FROM docket.schedule_events e
JOIN docket.schedules s ON s.id = e.schedule_id
WHERE e.what = 'skipped'
ORDER BY e.id;

COMMENT ON VIEW docket.schedule_skips IS
    'Missed windows the catch-up policy did not run: how many, the first and the last.';

-- Broken schedules: what the sweep could not plan, since when and why. Like
-- every view here it is security_invoker, so a reader sees through it the
-- rows docket.schedules' policy admits (the projects where a principal the
-- login is bound to holds schedule.view or schedule.manage), and the owner
-- sees every one. An update or a resume mends a schedule (docs/schedules.md).
CREATE OR REPLACE VIEW docket.schedules_broken WITH (security_invoker = true) AS
SELECT s.id, s.project, s.name, s.cron, s.zone, s.broken_at, s.broken_reason, s.cursor_at, s.next_due_at, s.runs
FROM docket.schedules s
WHERE s.status = 'broken'
ORDER BY s.broken_at, s.id;

COMMENT ON VIEW docket.schedules_broken IS
    'Schedules the sweep could not plan, with the reason: passed over until an update or a resume mends them.';

-- Protocol ----------------------------------------------------------------------------

-- schedule_authorize returns the project of schedule p_id when p_actor holds
-- schedule.manage there. It refuses with P0002, in the same words, an
-- unknown schedule and one the actor may not manage.
CREATE OR REPLACE FUNCTION docket.schedule_authorize(p_id bigint, p_actor text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_project text;
BEGIN
    SELECT project INTO v_project FROM docket.schedules WHERE id = p_id;
    IF NOT FOUND OR NOT docket.grant_check(p_actor, v_project, 'schedule.manage') THEN
        RAISE EXCEPTION 'schedule % does not exist (or % holds no schedule.manage on its project)', coalesce(p_id::text, 'NULL'), p_actor
            USING ERRCODE = 'P0002';
    END IF;
    RETURN v_project;
END
$$;

-- schedule_require_terms refuses (DK010, naming the field) malformed terms
-- of a schedule: what schedule_create and schedule_update both take. A
-- schedule needs a bound (p_ends_at or p_max_occurrences) or, to run
-- forever, p_unbounded_reason; a reason beside a bound contradicts it.
CREATE OR REPLACE FUNCTION docket.schedule_require_terms(
    p_cron text, p_zone text, p_job_kind text, p_job_queue text, p_job_payload jsonb, p_job_payload_schema integer,
    p_job_max_attempts integer, p_catch_up text, p_max_catch_up integer, p_grace interval,
    p_starts_at timestamptz, p_ends_at timestamptz, p_max_occurrences bigint, p_unbounded_reason text)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_valid(length(p_cron) BETWEEN 1 AND 200, 'cron', p_cron, 'a cron expression of 1-200 characters');
    PERFORM docket.require_valid(docket.valid_zone_name(p_zone), 'zone', p_zone, 'an IANA time zone name, e.g. Europe/Berlin');
    PERFORM docket.job_require_spec(1, p_job_kind, p_job_queue, p_job_payload, p_job_max_attempts);
    PERFORM docket.require_valid(p_job_payload_schema >= 1, 'job payload schema', p_job_payload_schema::text, '1 or more');
    PERFORM docket.require_valid(p_catch_up IN ('skip', 'one', 'all'), 'catch_up', p_catch_up, 'skip, one or all');
    PERFORM docket.require_valid(p_max_catch_up BETWEEN 1 AND 1000, 'max_catch_up', p_max_catch_up::text, '1..1000');
    PERFORM docket.require_valid(p_grace BETWEEN interval '1 second' AND interval '24 hours', 'grace', p_grace::text,
        '1 second .. 24 hours');
    PERFORM docket.require_valid(isfinite(p_starts_at) AND p_starts_at >= '1970-01-01 00:00:00+00', 'starts_at',
        p_starts_at::text, 'a finite instant after 1970');
    PERFORM docket.require_valid(p_ends_at IS NULL OR p_ends_at > p_starts_at, 'ends_at', p_ends_at::text,
        'after starts_at ' || p_starts_at);
    PERFORM docket.require_valid(p_max_occurrences IS NULL OR p_max_occurrences >= 1, 'max_occurrences',
        p_max_occurrences::text, '1 or more');
    PERFORM docket.require_valid(p_ends_at IS NOT NULL OR p_max_occurrences IS NOT NULL OR p_unbounded_reason IS NOT NULL,
        'ends_at, max_occurrences or unbounded_reason', NULL,
        'a bound: an end instant (ends_at) or an occurrence count (max_occurrences); to run forever, a reason (unbounded_reason)');
    PERFORM docket.require_valid(p_unbounded_reason IS NULL OR (p_ends_at IS NULL AND p_max_occurrences IS NULL),
        'unbounded_reason', p_unbounded_reason,
        'none beside ends_at or max_occurrences: a bounded schedule does not run forever');
    PERFORM docket.require_valid(p_unbounded_reason IS NULL OR (length(p_unbounded_reason) BETWEEN 1 AND 500
            AND btrim(p_unbounded_reason) <> '' AND p_unbounded_reason !~ '[[:cntrl:]]'),
        'unbounded_reason', p_unbounded_reason, '1-500 characters of text, not blank, no control characters');
END
$$;

-- schedule_create creates schedule p_name of p_project, active, its cursor at
-- p_starts_at and its first occurrence due at p_next_due_at (computed by the
-- caller from the expression, the zone and the start), on behalf of p_actor
-- at p_now, and returns it. Its created event records its bounds, or the
-- reason it has none (p_unbounded_reason).
-- Refuses, writing nothing: malformed terms, no bound and no reason, a
-- reason beside a bound, or no first occurrence (DK010, naming the fields); an actor without schedule.manage and job.create on
-- p_project, or an unknown project (DK009); a schedule of that name in the
-- project (23505 on schedules_project_name_key).
CREATE OR REPLACE FUNCTION docket.schedule_create(
    p_project text, p_name text, p_cron text, p_zone text, p_fixed_time boolean,
    p_job_kind text, p_job_queue text, p_job_payload jsonb, p_job_payload_schema integer, p_job_max_attempts integer,
    p_catch_up text, p_max_catch_up integer, p_grace interval,
    p_starts_at timestamptz, p_ends_at timestamptz, p_max_occurrences bigint, p_unbounded_reason text,
    p_next_due_at timestamptz, p_actor text, p_now timestamptz)
RETURNS docket.schedules
LANGUAGE plpgsql AS $$
DECLARE
    v docket.schedules;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.require_valid(docket.valid_project_name(p_name), 'schedule name', p_name,
        '1-63 characters of [a-z0-9._-], starting with a letter or digit');
    PERFORM docket.schedule_require_terms(p_cron, p_zone, p_job_kind, p_job_queue, p_job_payload, p_job_payload_schema,
        p_job_max_attempts, p_catch_up, p_max_catch_up, p_grace, p_starts_at, p_ends_at, p_max_occurrences,
        p_unbounded_reason);
    PERFORM docket.require_valid(p_next_due_at > p_starts_at AND (p_ends_at IS NULL OR p_next_due_at <= p_ends_at),
        'next_due_at', p_next_due_at::text, 'the first occurrence, after starts_at and not after ends_at');
    IF NOT docket.grant_check(p_actor, p_project, 'schedule.manage') OR NOT docket.grant_check(p_actor, p_project, 'job.create') THEN
        RAISE EXCEPTION '% may not create schedules in project %: it needs explicit schedule.manage and job.create grants', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    INSERT INTO docket.schedules (project, name, cron, zone, fixed_time, job_kind, job_queue, job_payload,
                                  job_payload_schema, job_max_attempts, catch_up, max_catch_up, grace,
                                  starts_at, ends_at, max_occurrences, unbounded_reason, cursor_at, next_due_at,
                                  created_by, created_at, updated_at)
    VALUES (p_project, p_name, p_cron, p_zone, p_fixed_time, p_job_kind, p_job_queue, p_job_payload,
            p_job_payload_schema, p_job_max_attempts, p_catch_up, p_max_catch_up, p_grace,
            p_starts_at, p_ends_at, p_max_occurrences, p_unbounded_reason, p_starts_at, p_next_due_at,
            p_actor, p_now, p_now)
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- schedule_lock returns schedule p_id locked (FOR NO KEY UPDATE) for p_actor,
-- who computes its next occurrence under the lock before schedule_update.
-- Refuses: a malformed actor (DK010) or one the session may not act as
-- (DK009); an unknown schedule or one the actor may not manage (P0002).
CREATE OR REPLACE FUNCTION docket.schedule_lock(p_id bigint, p_actor text) RETURNS docket.schedules
LANGUAGE plpgsql AS $$
DECLARE
    v docket.schedules;
BEGIN
    PERFORM docket.require_actor(p_actor);
    PERFORM docket.schedule_authorize(p_id, p_actor);
    SELECT * INTO v FROM docket.schedules WHERE id = p_id FOR NO KEY UPDATE;
    RETURN v;
END
$$;

-- schedule_update replaces the terms of schedule p_id (which the caller
-- holds locked by schedule_lock) on behalf of p_actor at p_now, keeping its
-- name, start, cursor and run count, with p_next_due_at the first occurrence
-- of the new terms after the cursor (NULL: there is none within the bounds,
-- and the schedule finishes). A broken schedule is mended: it is active
-- again (a status event, broken to active, records who mended it). Returns
-- it.
-- Refuses, writing nothing: malformed terms, no bound and no reason, or a
-- reason beside a bound (DK010, naming the fields); an
-- unknown schedule or one the actor may not manage (P0002); an actor without
-- job.create on the project (DK009); a finished schedule (DK001); a run
-- count already past the new max_occurrences (23514).
CREATE OR REPLACE FUNCTION docket.schedule_update(
    p_id bigint, p_cron text, p_zone text, p_fixed_time boolean,
    p_job_kind text, p_job_queue text, p_job_payload jsonb, p_job_payload_schema integer, p_job_max_attempts integer,
    p_catch_up text, p_max_catch_up integer, p_grace interval,
    p_ends_at timestamptz, p_max_occurrences bigint, p_unbounded_reason text, p_next_due_at timestamptz,
    p_actor text, p_now timestamptz)
RETURNS docket.schedules
LANGUAGE plpgsql AS $$
DECLARE
    v docket.schedules;
    v_project text;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    v_project := docket.schedule_authorize(p_id, p_actor);
    SELECT * INTO v FROM docket.schedules WHERE id = p_id FOR NO KEY UPDATE;
    PERFORM docket.schedule_require_terms(p_cron, p_zone, p_job_kind, p_job_queue, p_job_payload, p_job_payload_schema,
        p_job_max_attempts, p_catch_up, p_max_catch_up, p_grace, v.starts_at, p_ends_at, p_max_occurrences,
        p_unbounded_reason);
    PERFORM docket.require_valid(p_next_due_at IS NULL OR p_next_due_at > v.cursor_at, 'next_due_at',
        p_next_due_at::text, 'after the cursor ' || v.cursor_at);
    IF NOT docket.grant_check(p_actor, v_project, 'job.create') THEN
        RAISE EXCEPTION '% may not change schedule %: its jobs need an explicit job.create grant on %', p_actor, p_id, v_project
            USING ERRCODE = 'DK009';
    END IF;
    IF v.status = 'finished' THEN
        RAISE EXCEPTION 'schedule % is finished, a terminal state: it never changes', p_id USING ERRCODE = 'DK001';
    END IF;
    UPDATE docket.schedules
    SET cron = p_cron, zone = p_zone, fixed_time = p_fixed_time, job_kind = p_job_kind, job_queue = p_job_queue,
        job_payload = p_job_payload, job_payload_schema = p_job_payload_schema, job_max_attempts = p_job_max_attempts,
        catch_up = p_catch_up, max_catch_up = p_max_catch_up, grace = p_grace, ends_at = p_ends_at,
        max_occurrences = p_max_occurrences, unbounded_reason = p_unbounded_reason, next_due_at = p_next_due_at,
        status = CASE WHEN p_next_due_at IS NULL THEN 'finished' WHEN status = 'broken' THEN 'active' ELSE status END,
        broken_reason = NULL, broken_at = NULL,
        finished_at = CASE WHEN p_next_due_at IS NULL THEN greatest(created_at, p_now) END,
        updated_at = greatest(updated_at, p_now)
    WHERE id = p_id
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- schedule_set_status pauses (paused), resumes (active) or finishes
-- (finished) schedule p_id on behalf of p_actor at p_now, and returns it.
-- Pausing and resuming keep the cursor and the next due instant, so the
-- sweep applies the catch-up policy to what fell due while paused. Resuming
-- a broken schedule mends it: it is active again, its broken reason cleared,
-- and the sweep tries it again (pausing or finishing it clears the reason
-- too). Setting the status held is a no-op.
-- Refuses, writing nothing: a malformed status, actor or instant (DK010); an
-- unknown schedule or one the actor may not manage (P0002); a move out of
-- finished (DK001).
CREATE OR REPLACE FUNCTION docket.schedule_set_status(p_id bigint, p_status text, p_actor text, p_now timestamptz)
RETURNS docket.schedules
LANGUAGE plpgsql AS $$
DECLARE
    v docket.schedules;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(p_status IN ('active', 'paused', 'finished'), 'status', p_status, 'active, paused or finished');
    PERFORM docket.schedule_authorize(p_id, p_actor);
    SELECT * INTO v FROM docket.schedules WHERE id = p_id FOR NO KEY UPDATE;
    IF v.status = p_status THEN
        RETURN v;
    END IF;
    UPDATE docket.schedules
    SET status = p_status,
        next_due_at = CASE WHEN p_status = 'finished' THEN NULL ELSE next_due_at END,
        finished_at = CASE WHEN p_status = 'finished' THEN greatest(created_at, p_now) END,
        broken_reason = NULL, broken_at = NULL,
        updated_at = greatest(updated_at, p_now)
    WHERE id = p_id
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- schedule_due returns up to p_limit active schedules due at p_now, of active
-- projects where p_actor holds schedule.sweep and job.create, soonest first,
-- locked for the caller's transaction; schedules another sweeper holds are
-- skipped, never waited for.
CREATE OR REPLACE FUNCTION docket.schedule_due(p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.schedules
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep batch', p_limit, 10000);
    RETURN QUERY
    SELECT * FROM docket.schedules s
    WHERE s.status = 'active' AND s.next_due_at <= p_now
      AND docket.grant_check(p_actor, s.project, 'schedule.sweep')
      AND docket.grant_check(p_actor, s.project, 'job.create')
      AND EXISTS (SELECT 1 FROM docket.projects p WHERE p.name = s.project AND p.status = 'active')
    ORDER BY s.next_due_at, s.id
    LIMIT p_limit
    FOR UPDATE OF s SKIP LOCKED;
END
$$;

-- schedule_lock_for_sweep returns schedule p_id locked for a sweep by
-- p_actor: refused as unknown (P0002) when it does not exist or p_actor
-- lacks schedule.sweep or job.create on its project, and with 40001 when it
-- is no longer active at p_expected_cursor, the cursor the sweep read (the
-- sweep reads it again). schedule_advance and schedule_break start with it.
CREATE OR REPLACE FUNCTION docket.schedule_lock_for_sweep(p_id bigint, p_expected_cursor timestamptz, p_actor text)
RETURNS docket.schedules
LANGUAGE plpgsql AS $$
DECLARE
    s docket.schedules;
BEGIN
    SELECT * INTO s FROM docket.schedules WHERE id = p_id;
    IF NOT FOUND OR NOT (docket.grant_check(p_actor, s.project, 'schedule.sweep') AND docket.grant_check(p_actor, s.project, 'job.create')) THEN
        RAISE EXCEPTION 'schedule % does not exist (or % may not sweep it: it needs schedule.sweep and job.create on its project)',
            coalesce(p_id::text, 'NULL'), p_actor
            USING ERRCODE = 'P0002';
    END IF;
    SELECT * INTO s FROM docket.schedules WHERE id = p_id FOR NO KEY UPDATE;
    IF NOT FOUND OR s.status <> 'active' OR s.cursor_at IS DISTINCT FROM p_expected_cursor THEN
        RAISE EXCEPTION 'schedule %: not active at cursor % any more; sweep again', coalesce(p_id::text, 'NULL'), p_expected_cursor
            USING ERRCODE = '40001';
    END IF;
    RETURN s;
END
$$;

-- schedule_advance records one sweep of schedule p_id, which the caller
-- holds locked (schedule_due) with its cursor at p_expected_cursor: it
-- enqueues a job for each occurrence (p_locals[i], p_folds[i], due at
-- p_dues[i]), available at its instant, under idempotency key
-- schedule:ID:LOCAL:FOLD and with the occurrence in its params, and records
-- the occurrence; appends each of p_skipped (JSON objects) as a skipped
-- event; moves the cursor to p_cursor and the next due instant to
-- p_next_due_at (NULL: the schedule is past its bounds and finishes). All on
-- behalf of p_actor at p_now. Returns the jobs of the occurrences this call
-- recorded; one already recorded (the unique identity decides) is neither
-- enqueued again nor returned.
-- Refuses, writing nothing: an unknown schedule, or one of a project where
-- p_actor does not hold schedule.sweep and job.create (P0002, in the same
-- words, checked before the schedule is locked); a schedule not active or whose cursor moved
-- (40001, retry the sweep); arrays of different lengths or more than 1000
-- occurrences (DK010); an enqueue the actor may not make (DK009); more runs
-- than max_occurrences (23514).
CREATE OR REPLACE FUNCTION docket.schedule_advance(
    p_id bigint, p_expected_cursor timestamptz, p_locals timestamp[], p_folds integer[], p_dues timestamptz[],
    p_skipped jsonb[], p_cursor timestamptz, p_next_due_at timestamptz, p_actor text, p_now timestamptz)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    s docket.schedules;
    j docket.jobs;
    v_job bigint;
    v_recorded bigint := 0;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF cardinality(p_locals) IS DISTINCT FROM cardinality(p_folds) OR cardinality(p_locals) IS DISTINCT FROM cardinality(p_dues)
       OR cardinality(p_locals) > 1000 THEN
        RAISE EXCEPTION 'invalid occurrences: locals, folds and dues must be parallel arrays of at most 1000'
            USING ERRCODE = 'DK010';
    END IF;
    s := docket.schedule_lock_for_sweep(p_id, p_expected_cursor, p_actor);
    FOR i IN 1 .. coalesce(cardinality(p_locals), 0) LOOP
        SELECT e.id INTO v_job
        FROM docket.job_enqueue_one(
            s.project, p_actor, p_now, s.job_kind, s.job_queue, 1::smallint, s.job_payload, s.job_payload_schema,
            format('schedule:%s:%s:%s', s.id, to_char(p_locals[i], 'YYYY-MM-DD"T"HH24:MI'), p_folds[i]),
            p_dues[i], s.job_max_attempts, false, false, interval '5 minutes', interval '1 second', interval '10 minutes', 0.2,
            jsonb_build_object('schedule_id', s.id, 'schedule', s.name, 'local_time', p_locals[i], 'fold', p_folds[i],
                               'zone', s.zone, 'due_at', p_dues[i]),
            '{}', '', 0, 0, '') e;
        SELECT * INTO j FROM docket.jobs WHERE id = v_job;
        INSERT INTO docket.schedule_occurrences (schedule_id, local_time, fold, due_at, job_id, recorded_at)
        VALUES (s.id, p_locals[i], p_folds[i], p_dues[i], j.id, p_now)
        ON CONFLICT ON CONSTRAINT schedule_occurrences_identity DO NOTHING;
        IF FOUND THEN
            v_recorded := v_recorded + 1;
            RETURN NEXT j;
        END IF;
    END LOOP;
    INSERT INTO docket.schedule_events (schedule_id, what, actor, at, detail)
    SELECT s.id, 'skipped', p_actor, p_now, x FROM unnest(p_skipped) AS x;
    UPDATE docket.schedules
    SET cursor_at = greatest(cursor_at, p_cursor),
        next_due_at = p_next_due_at,
        runs = runs + v_recorded,
        status = CASE WHEN p_next_due_at IS NULL THEN 'finished' ELSE status END,
        finished_at = CASE WHEN p_next_due_at IS NULL THEN greatest(created_at, p_now) END,
        updated_at = greatest(updated_at, p_now)
    WHERE id = s.id;
END
$$;

-- schedule_break records that the sweep of p_actor could not plan schedule
-- p_id, which it holds locked (schedule_due) with its cursor at
-- p_expected_cursor, or that the database refused its plan: the schedule is
-- broken, since p_now, for p_reason (cut to 500 characters), and the sweep
-- passes it over until an update or a resume mends it. A status event,
-- active to broken, records the reason. Returns it.
-- Refuses, writing nothing: an unknown schedule, or one of a project where
-- p_actor does not hold schedule.sweep and job.create (P0002, in the same
-- words as schedule_advance); a schedule not active or whose cursor moved
-- (40001, sweep again); an empty reason (DK010).
CREATE OR REPLACE FUNCTION docket.schedule_break(
    p_id bigint, p_expected_cursor timestamptz, p_reason text, p_actor text, p_now timestamptz)
RETURNS docket.schedules
LANGUAGE plpgsql AS $$
DECLARE
    s docket.schedules;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(btrim(p_reason) <> '', 'broken reason', p_reason, 'why the schedule cannot be planned');
    s := docket.schedule_lock_for_sweep(p_id, p_expected_cursor, p_actor);
    UPDATE docket.schedules
    SET status = 'broken', broken_reason = docket.bounded_text(p_reason, 500), broken_at = p_now,
        updated_at = greatest(updated_at, p_now)
    WHERE id = p_id
    RETURNING * INTO s;
    RETURN s;
END
$$;

-- The API ---------------------------------------------------------------------

INSERT INTO docket.api_functions (name, role) VALUES
    ('schedule_create', 'app'), ('schedule_update', 'app'), ('schedule_set_status', 'app'),
    ('schedule_lock', 'app'), ('schedule_due', 'app'), ('schedule_advance', 'app'), ('schedule_break', 'app');

-- Who may read what (row-level security; see kit.sql) --------------------------

-- A schedule is visible where the login's principals hold schedule.view or
-- schedule.manage (as schedule_visible); its occurrences and events with it.
CREATE POLICY schedules_visible_to_schedule_readers ON docket.schedules FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('schedule.view', 'schedule.manage'))::text[]));

CREATE POLICY schedule_occurrences_visible_with_their_schedule ON docket.schedule_occurrences FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.schedules s WHERE s.id = schedule_id));

CREATE POLICY schedule_events_visible_with_their_schedule ON docket.schedule_events FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.schedules s WHERE s.id = schedule_id));
