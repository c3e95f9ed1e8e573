-- Retention: how long a project's finished work stays, the one path by which
-- anything docket writes is deleted (the prune), and the evidence each prune
-- leaves of what it removed.
--
--   * docket.retention_policies holds a project's horizons; a project without
--     a row keeps docket.retention_defaults(). A NULL horizon keeps forever.
--     Every change is in docket.retention_events.
--   * docket.prune_run(limit, actor, now) removes, in one transaction, up to
--     limit items past their horizons in the projects where the actor holds
--     retention.prune: finished jobs that belong to no case, with their
--     events (and the schedule occurrences that enqueued them); closed cases
--     with everything bound to them (keys, obligations, timers, waits,
--     messages, jobs and all their events); dead-lettered messages no case
--     ever took. It never removes an uncertain or unfinished job, a job of a
--     lane that is not finished, or a case that still has one.
--   * Before it deletes anything, a prune verifies each job's chain and
--     records, append-only in docket.prunes, what it is about to remove: the
--     ids (as ranges), counts by state, and a digest over the removed jobs'
--     chain heads. The delete-refusing triggers admit a delete only in a
--     transaction that recorded a prune, which only prune_run does.
--   * The hot tables get storage settings for their churn (00029_retention.sql).

CREATE OR REPLACE TRIGGER retention_events_append_only
    BEFORE UPDATE OR DELETE ON docket.retention_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

CREATE OR REPLACE TRIGGER retention_policies_refuse_delete
    BEFORE DELETE ON docket.retention_policies
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('a retention policy is replaced, never removed');

CREATE OR REPLACE TRIGGER retention_policies_columns_immutable
    BEFORE UPDATE OF project ON docket.retention_policies
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

-- horizon_micros is a horizon in microseconds, 0 for one kept forever.
CREATE OR REPLACE FUNCTION docket.horizon_micros(p_horizon interval) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce((extract(epoch FROM p_horizon) * 1000000)::bigint, 0);

-- retention_defaults are the horizons of a project that set none.
CREATE OR REPLACE FUNCTION docket.retention_defaults(
    OUT jobs_succeeded interval, OUT jobs_failed interval, OUT messages interval,
    OUT occurrences interval, OUT cases interval)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ROW(interval '168 hours', interval '720 hours', interval '720 hours', interval '720 hours', interval '2160 hours');

-- horizons_json is a policy's horizons as JSON, each in microseconds, or
-- null for one kept forever.
CREATE OR REPLACE FUNCTION docket.horizons_json(p_jobs_succeeded interval, p_jobs_failed interval, p_messages interval,
                                     p_occurrences interval, p_cases interval) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN jsonb_build_object('jobs_succeeded', nullif(docket.horizon_micros(p_jobs_succeeded), 0),
                          'jobs_failed', nullif(docket.horizon_micros(p_jobs_failed), 0),
                          'messages', nullif(docket.horizon_micros(p_messages), 0),
                          'occurrences', nullif(docket.horizon_micros(p_occurrences), 0),
                          'cases', nullif(docket.horizon_micros(p_cases), 0));

-- retention_policies_record appends the retention_events row of every change
-- of a policy, whoever writes it, attributed to the change context.
CREATE OR REPLACE FUNCTION docket.retention_policies_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO docket.retention_events (project, previous, horizons, actor, at)
    VALUES (NEW.project,
            CASE WHEN TG_OP = 'UPDATE'
                 THEN docket.horizons_json(OLD.jobs_succeeded, OLD.jobs_failed, OLD.messages, OLD.occurrences, OLD.cases) END,
            docket.horizons_json(NEW.jobs_succeeded, NEW.jobs_failed, NEW.messages, NEW.occurrences, NEW.cases),
            docket.context_actor(), docket.context_now());
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER retention_policies_record
    AFTER INSERT OR UPDATE ON docket.retention_policies
    FOR EACH ROW EXECUTE FUNCTION docket.retention_policies_record();

-- The horizons each project keeps now: its policy, or the defaults.
CREATE OR REPLACE VIEW docket.retention WITH (security_invoker = true) AS
SELECT p.name AS project, r.project IS NOT NULL AS explicit,
       CASE WHEN r.project IS NULL THEN d.jobs_succeeded ELSE r.jobs_succeeded END AS jobs_succeeded,
       CASE WHEN r.project IS NULL THEN d.jobs_failed ELSE r.jobs_failed END AS jobs_failed,
       CASE WHEN r.project IS NULL THEN d.messages ELSE r.messages END AS messages,
       CASE WHEN r.project IS NULL THEN d.occurrences ELSE r.occurrences END AS occurrences,
       CASE WHEN r.project IS NULL THEN d.cases ELSE r.cases END AS cases,
       r.updated_by, r.updated_at
FROM docket.projects p
CROSS JOIN docket.retention_defaults() d
LEFT JOIN docket.retention_policies r ON r.project = p.name;

COMMENT ON VIEW docket.retention IS
    'The retention horizons every project keeps now (NULL: forever); explicit false where the defaults apply.';

-- retention_set replaces the horizons of project p_project with those given
-- (NULL: keep forever), on behalf of p_actor at p_now, and returns them.
-- Refuses, writing nothing: a malformed project or actor, or a horizon
-- outside 1 second .. 36,500 days (DK010); an unknown project or an actor
-- without retention.manage on it (DK009).
CREATE OR REPLACE FUNCTION docket.retention_set(p_project text, p_jobs_succeeded interval, p_jobs_failed interval,
                                     p_messages interval, p_occurrences interval, p_cases interval,
                                     p_actor text, p_now timestamptz)
RETURNS SETOF docket.retention
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    IF NOT (docket.valid_horizon(p_jobs_succeeded) AND docket.valid_horizon(p_jobs_failed) AND docket.valid_horizon(p_messages)
            AND docket.valid_horizon(p_occurrences) AND docket.valid_horizon(p_cases)) THEN
        RAISE EXCEPTION 'invalid retention horizons %: each is 1 second to 36500 days, or NULL to keep forever',
            docket.horizons_json(p_jobs_succeeded, p_jobs_failed, p_messages, p_occurrences, p_cases)
            USING ERRCODE = 'DK010';
    END IF;
    IF NOT docket.grant_check(p_actor, p_project, 'retention.manage') THEN
        RAISE EXCEPTION '% may not set the retention of project %: it needs retention.manage there', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    INSERT INTO docket.retention_policies AS r (project, jobs_succeeded, jobs_failed, messages, occurrences, cases, updated_by, updated_at)
    VALUES (p_project, p_jobs_succeeded, p_jobs_failed, p_messages, p_occurrences, p_cases, p_actor, p_now)
    ON CONFLICT (project) DO UPDATE
    SET jobs_succeeded = EXCLUDED.jobs_succeeded, jobs_failed = EXCLUDED.jobs_failed, messages = EXCLUDED.messages,
        occurrences = EXCLUDED.occurrences, cases = EXCLUDED.cases,
        updated_by = EXCLUDED.updated_by, updated_at = greatest(r.updated_at, EXCLUDED.updated_at);
    RETURN QUERY SELECT * FROM docket.retention WHERE project = p_project;
END
$$;

-- retention_get returns the horizons project p_project keeps, when p_actor
-- holds retention.manage or retention.prune there; no row otherwise.
CREATE OR REPLACE FUNCTION docket.retention_get(p_project text, p_actor text)
RETURNS SETOF docket.retention
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    RETURN QUERY SELECT * FROM docket.retention r
    WHERE r.project = p_project
      AND (docket.grant_check(p_actor, p_project, 'retention.manage') OR docket.grant_check(p_actor, p_project, 'retention.prune'));
END
$$;

CREATE OR REPLACE TRIGGER prunes_append_only
    BEFORE UPDATE OR DELETE ON docket.prunes
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- pruning reports whether the current transaction recorded a prune: the
-- deletes of docket's records are admitted in it alone. No role but the
-- owner may write docket.prunes, and only prune_run does.
CREATE OR REPLACE FUNCTION docket.pruning() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM docket.prunes WHERE xid = pg_current_xact_id_if_assigned());
END
$$;

-- prune_digest is the digest a prune records over the chain heads of the jobs
-- it removed: sha256 of the text
--     ID:EVENTS:HEAD\n  for each job in ascending id
-- where EVENTS is the number of its events and HEAD the hex hash of its last
-- one, so an auditor holding a copy of the removed histories can recompute it
-- in any language. The arrays are parallel; their order does not matter.
CREATE OR REPLACE FUNCTION docket.prune_digest(p_ids bigint[], p_events integer[], p_heads bytea[]) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (SELECT sha256(convert_to(string_agg(h.id || ':' || h.events || ':' || encode(h.head, 'hex') || E'\n', '' ORDER BY h.id), 'UTF8'))
        FROM unnest(p_ids, p_events, p_heads) h (id, events, head));

-- ids_bounds is the least range that holds every id of p_ids (empty for
-- none). Bounding a read of docket.job_events by it (lower, upper) lets
-- Postgres leave out the partitions outside it as a statement starts, which
-- it cannot do from = ANY (p_ids) alone when the array is a parameter.
CREATE OR REPLACE FUNCTION docket.ids_bounds(p_ids bigint[]) RETURNS int8range
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (SELECT CASE WHEN min(i) IS NULL THEN 'empty' ELSE int8range(min(i), max(i), '[]') END FROM unnest(p_ids) i);

-- job_heads verifies the chains of jobs p_ids, set-based, as job_verify does
-- one, before a prune removes them (and records their heads as evidence):
-- consecutive seq from 1, each event hashing to its contents and chained to
-- the one before, the history starting in queued and each event's
-- from_state the previous event's to_state, every move one of the job
-- machine as migrated and the machine's tables as migrated
-- (docket.job_machine_drift), attempts counting claims only, time never
-- running backwards, and the job now holding what its last events recorded
-- (its claimed revision and pin included); an event that ends an attempt
-- and names its claim (since 00046) is held to the claim it implies, as
-- job_history_verify holds it. A prune takes finished jobs only, so no
-- attempt is open. A chain re-hashed by hand to fit a
-- rewritten history links; these are the checks that catch it. It returns
-- one row per job: whether it verified, its events and its chain head; a
-- prune keeps the jobs that fail, counted as kept_unverified.
CREATE OR REPLACE FUNCTION docket.job_heads(p_ids bigint[])
RETURNS TABLE (job_id bigint, ok boolean, events integer, head bytea)
LANGUAGE sql STABLE AS $$
    WITH e AS (
        SELECT e.job_id, e.seq, e.hash, e.from_state, e.to_state, e.attempt, e.outcome, e.revision, e.detail, e.claimed_at,
               e.seq = row_number() OVER w
               AND e.prev_hash = coalesce(lag(e.hash) OVER w, decode(repeat('00', 32), 'hex'))
               AND e.hash = docket.job_event_hash(e.prev_hash, e.job_id, e.seq, e.from_state, e.to_state, e.actor, e.at,
                                                  e.attempt, e.detail, e.lease_until, e.outcome, e.revision,
                                                  e.claimed_at, e.claimed_by, e.claim_token)
               -- An event naming a claim ends an attempt: from claimed,
               -- and, unless the event before was the claim (a history
               -- written before 00046, or a takeover), the claim it
               -- implies follows the event before as a move, an attempt
               -- and an instant.
               AND (e.claimed_at IS NULL OR e.from_state = 'claimed')
               AND CASE WHEN e.claimed_at IS NOT NULL AND lag(e.to_state) OVER w IS DISTINCT FROM 'claimed'
                        THEN lag(e.to_state) OVER w IS NOT NULL AND docket.job_machine_move(lag(e.to_state) OVER w, 'claimed')
                             AND e.claimed_at >= lag(e.at) OVER w
                             AND e.attempt = lag(e.attempt) OVER w + 1 + CASE WHEN e.to_state = 'claimed' THEN 1 ELSE 0 END
                        ELSE e.from_state IS NOT DISTINCT FROM lag(e.to_state) OVER w
                             AND e.attempt = coalesce(lag(e.attempt) OVER w, 0) + CASE WHEN e.to_state = 'claimed' THEN 1 ELSE 0 END
                   END
               AND (e.from_state IS NOT NULL OR e.to_state = 'queued')
               AND (e.from_state IS NULL OR docket.job_machine_move(e.from_state, e.to_state))
               AND e.at >= coalesce(lag(e.at) OVER w, e.at)
               AND e.at >= coalesce(e.claimed_at, e.at) AS linked,
               lead(e.seq) OVER w IS NULL AS last
        FROM docket.job_events e
        -- Bounded by the ids' lowest and highest too: Postgres leaves out
        -- the history's partitions outside them as the statement starts,
        -- where = ANY of an array it does not know yet searches every
        -- partition for every id.
        WHERE e.job_id = ANY (p_ids)
          AND e.job_id >= lower(docket.ids_bounds(p_ids)) AND e.job_id < upper(docket.ids_bounds(p_ids))
        WINDOW w AS (PARTITION BY e.job_id ORDER BY e.seq)
    ), chains AS (
        SELECT e.job_id, bool_and(e.linked) AS linked, count(*)::integer AS events,
               (array_agg(e.hash) FILTER (WHERE e.last))[1] AS head,
               (array_agg(e.to_state::text) FILTER (WHERE e.last))[1] AS to_state,
               (array_agg(e.attempt) FILTER (WHERE e.last))[1] AS attempt,
               (array_agg(e.outcome::bytea) FILTER (WHERE e.last))[1] AS outcome,
               -- What the last claim and the last pin recorded.
               (array_agg(e.revision::text ORDER BY e.seq DESC)
                    FILTER (WHERE e.to_state = 'claimed' OR e.claimed_at IS NOT NULL))[1] AS claim_revision,
               (array_agg(e.detail::text ORDER BY e.seq DESC)
                    FILTER (WHERE e.from_state = 'queued' AND e.to_state = 'queued'))[1] AS pin_detail
        FROM e GROUP BY e.job_id
    )
    SELECT j.id,
           coalesce(c.linked AND c.to_state = j.state AND c.attempt = j.attempts
                    AND c.outcome = docket.job_outcome(j.state, j.result, j.diagnostic, j.claimed_by, j.claim_token,
                                                       j.lease_generation, j.attempts,
                                                       CASE WHEN j.state = 'claimed' THEN 0 ELSE j.renewals END,
                                                       CASE WHEN j.state = 'claimed' THEN NULL ELSE j.renewed_at END,
                                                       j.spent_effects, j.spent_money)
                    AND c.claim_revision IS NOT DISTINCT FROM j.claimed_revision::text
                    AND coalesce(c.pin_detail, 'unpinned: any revision may run it')
                        = CASE WHEN j.revisions IS NULL THEN 'unpinned: any revision may run it'
                               ELSE 'pinned to revisions ' || array_to_string(j.revisions, ', ') END
                    -- Once a call (an InitPlan), not once a job.
                    AND (SELECT docket.job_machine_drift()) IS NULL, false),
           coalesce(c.events, 0), c.head
    FROM docket.jobs j
    LEFT JOIN chains c ON c.job_id = j.id
    WHERE j.id = ANY (p_ids);
$$;

-- prune_verify reports whether chain heads given by an auditor (parallel
-- arrays: job id, number of events, hash of the last event) are those prune
-- p_prune removed: the same jobs, and the digest it recorded. It returns the
-- prune's project (NULL: no such prune, or one p_actor may not read: it needs
-- a job capability or retention.manage on the project) and the verdict.
CREATE OR REPLACE FUNCTION docket.prune_verify(p_prune bigint, p_ids bigint[], p_events integer[], p_heads bytea[], p_actor text)
RETURNS TABLE (project text, ok boolean, problem text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    p docket.prunes;
    given int8multirange;
BEGIN
    PERFORM docket.require_actor(p_actor);
    SELECT * INTO p FROM docket.prunes x WHERE x.id = p_prune
      AND (docket.job_visible(p_actor, x.project) OR docket.grant_check(p_actor, x.project, 'retention.manage'));
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF cardinality(p_ids) IS DISTINCT FROM cardinality(p_events) OR cardinality(p_ids) IS DISTINCT FROM cardinality(p_heads) THEN
        RETURN QUERY SELECT p.project, false, 'the ids, event counts and heads given differ in length';
        RETURN;
    END IF;
    SELECT coalesce(range_agg(int8range(i, i, '[]')), '{}') INTO given FROM unnest(p_ids) i;
    IF (SELECT count(DISTINCT i) FROM unnest(p_ids) i) <> cardinality(p_ids) THEN
        RETURN QUERY SELECT p.project, false, 'a job id is given twice';
    ELSIF cardinality(p_ids) <> p.jobs OR given <> p.job_ids THEN
        RETURN QUERY SELECT p.project, false, format('the prune removed %s jobs (%s); %s were given (%s)', p.jobs, p.job_ids, cardinality(p_ids), given);
    ELSIF p.jobs = 0 THEN
        RETURN QUERY SELECT p.project, true, NULL::text;
    ELSIF docket.prune_digest(p_ids, p_events, p_heads) <> p.jobs_digest THEN
        RETURN QUERY SELECT p.project, false, 'the chain heads given do not hash to the digest the prune recorded';
    ELSE
        RETURN QUERY SELECT p.project, true, NULL::text;
    END IF;
END
$$;

-- job_pruned returns the prune that removed job p_id, when p_actor may read
-- the jobs of its project; no row otherwise.
CREATE OR REPLACE FUNCTION docket.job_pruned(p_id bigint, p_actor text)
RETURNS SETOF docket.prunes
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    RETURN QUERY SELECT * FROM docket.prunes p
    WHERE p.job_ids @> p_id AND docket.job_visible(p_actor, p.project)
    ORDER BY p.id LIMIT 1;
END
$$;

-- ids_ranges is a set of ids as the fewest ranges that cover exactly them.
CREATE OR REPLACE FUNCTION docket.ids_ranges(p_ids bigint[]) RETURNS int8multirange
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (SELECT coalesce(range_agg(int8range(i, i, '[]')), '{}') FROM unnest(p_ids) i);

-- prune_timer_job reports whether job p_id is a timer's (see prune_keeps_job).
CREATE OR REPLACE FUNCTION docket.prune_timer_job(p_id bigint) RETURNS boolean
LANGUAGE sql STABLE
RETURN EXISTS (SELECT 1 FROM docket.timers t WHERE t.job_id = p_id);

-- prune_keeps_job reports whether a prune must keep finished job j whatever
-- its age, because something kept refers to it: a run (runs are kept with
-- their history), or a timer of no case (kept: it is its project's, and no
-- case's prune takes it). Each part of docket that refers to jobs from rows of its
-- own adds its rule here. No subquery of its own (the timer's lookup is
-- prune_timer_job's, asked only of a timer's job), so the planner inlines it
-- into the prune's choice: an SQL function with one is called row by row,
-- each call building the whole job row to pass, which was most of the
-- choice's time (docs/retention.md).
CREATE OR REPLACE FUNCTION docket.prune_keeps_job(j docket.jobs) RETURNS boolean
LANGUAGE sql STABLE
RETURN j.params IS NOT NULL AND (j.params ? 'run_id'
    OR j.case_id IS NULL AND j.params ? 'timer' AND docket.prune_timer_job(j.id));

-- prune_case_parts deletes, for a prune, what is bound to cases p_cases
-- but their jobs (the caller deletes those, and the cases, after): their
-- state history, keys, obligations, timers, tasks, waits, and messages p_msgs
-- (theirs, and the dead letters the prune takes). Each part of docket that
-- binds rows to a case adds its own here, ahead of what they refer to (the
-- tasks ahead of their waits).
CREATE OR REPLACE FUNCTION docket.prune_case_parts(p_cases bigint[], p_msgs bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM docket.task_events e USING docket.tasks t WHERE e.task_id = t.id AND t.case_id = ANY (p_cases);
    DELETE FROM docket.tasks WHERE case_id = ANY (p_cases);
    DELETE FROM docket.case_events WHERE case_id = ANY (p_cases);
    DELETE FROM docket.case_keys WHERE case_id = ANY (p_cases);
    DELETE FROM docket.obligations WHERE case_id = ANY (p_cases);
    DELETE FROM docket.timers WHERE case_id = ANY (p_cases);
    WITH w AS (DELETE FROM docket.waits WHERE case_id = ANY (p_cases) RETURNING id)
    DELETE FROM docket.messages WHERE id = ANY (p_msgs);
END
$$;

-- History partitions ----------------------------------------------------------
--
-- docket.job_events is partitioned by RANGE (job_id) (00048): one partition
-- every history_partition_width ids (docket.settings), made ahead of the jobs id
-- sequence by docket itself, and a DEFAULT partition for an event no range
-- covers. A range is closed once the sequence has handed out its last id.
-- A prune leaves the events of the jobs it removes in a closed partition
-- that no job of its range outlives, and docket.history_partitions_drop then
-- drops that partition whole, once every job id of its events is in a
-- prune's record (docs/retention.md, "History partitions").

-- history_partitions lists the ranged partitions of docket.job_events with
-- their bounds: lo NULL for MINVALUE. The DEFAULT partition is not listed.
CREATE OR REPLACE FUNCTION docket.history_partitions()
RETURNS TABLE (part regclass, lo bigint, hi bigint)
LANGUAGE sql STABLE AS $$
    SELECT c.oid::regclass,
           nullif(substring(b FROM 'FROM \(''?([-0-9A-Z]+)''?\)'), 'MINVALUE')::bigint,
           nullif(substring(b FROM 'TO \(''?([-0-9A-Z]+)''?\)'), 'MAXVALUE')::bigint
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    CROSS JOIN LATERAL pg_get_expr(c.relpartbound, c.oid) b
    WHERE i.inhparent = 'docket.job_events'::regclass AND b <> 'DEFAULT';
$$;

-- history_last_id is the last id the jobs id sequence handed out (0: none).
CREATE OR REPLACE FUNCTION docket.history_last_id() RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM docket.jobs_id_seq;
$$;

-- history_partitions_ensure makes the partitions of docket.job_events for
-- the ranges up to ahead widths beyond the last job id handed out, and
-- returns how many it made. Making one locks the history (ACCESS
-- EXCLUSIVE on docket.job_events) for an instant: it waits at most
-- lock_timeout p_wait for it and, not getting it, makes no more now (the
-- next call does; meanwhile the DEFAULT partition takes what no range
-- covers). A range whose ids already have events in the DEFAULT partition
-- is left to it. Called at migrate and by the prune sweep, in a
-- transaction of its own.
CREATE OR REPLACE FUNCTION docket.history_partitions_ensure(p_wait interval) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    w bigint;
    n integer;
    last_id bigint := docket.history_last_id();
    top bigint;
    lo bigint;
    hi bigint;
    made integer := 0;
    name text;
    was text := current_setting('lock_timeout');
BEGIN
    SELECT s.value::bigint INTO w FROM docket.settings s WHERE s.name = 'history_partition_width';
    SELECT s.value::integer INTO n FROM docket.settings s WHERE s.name = 'history_partitions_ahead';
    IF w IS NULL OR w < 1 OR n IS NULL OR n NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'settings history_partition_width % and history_partitions_ahead %: want a width of 1 or more and 1..100 ahead', w, n
            USING ERRCODE = 'DK010';
    END IF;
    -- The table as it was before 00048, the DEFAULT partition until now,
    -- becomes the partition of every id below the first boundary above
    -- those handed out (checked by a constraint first, so the attach does
    -- not scan it again), and a new DEFAULT partition takes its place.
    IF EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = to_regclass('docket.job_events_legacy')
               AND pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT') THEN
        hi := greatest((last_id / w + 1) * w, w);
        ALTER TABLE docket.job_events DETACH PARTITION docket.job_events_legacy;
        EXECUTE format('ALTER TABLE docket.job_events_legacy ADD CONSTRAINT job_events_legacy_range CHECK (job_id < %s)', hi);
        EXECUTE format('ALTER TABLE docket.job_events ATTACH PARTITION docket.job_events_legacy FOR VALUES FROM (MINVALUE) TO (%s)', hi);
        ALTER TABLE docket.job_events_legacy DROP CONSTRAINT job_events_legacy_range;
    END IF;
    IF to_regclass('docket.job_events_default') IS NULL THEN
        CREATE TABLE docket.job_events_default PARTITION OF docket.job_events DEFAULT;
        ALTER TABLE docket.job_events_default SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05,
            autovacuum_vacuum_insert_scale_factor = 0.05);
        ALTER TABLE docket.job_events_default ENABLE ROW LEVEL SECURITY;
    END IF;
    SELECT max(p.hi) INTO top FROM docket.history_partitions() p;
    top := coalesce(top, (last_id / w) * w);
    WHILE top <= last_id + n * w LOOP
        lo := top;
        hi := (lo / w + 1) * w;
        top := hi;
        CONTINUE WHEN EXISTS (SELECT 1 FROM docket.job_events_default d WHERE d.job_id >= lo AND d.job_id < hi);
        name := format('job_events_%s', lpad(lo::text, 12, '0'));
        PERFORM set_config('lock_timeout', (extract(epoch FROM p_wait) * 1000)::bigint::text || 'ms', true);
        BEGIN
            EXECUTE format('CREATE TABLE docket.%I PARTITION OF docket.job_events FOR VALUES FROM (%s) TO (%s)', name, lo, hi);
        EXCEPTION WHEN lock_not_available THEN
            PERFORM set_config('lock_timeout', was, true);
            EXIT;
        END;
        PERFORM set_config('lock_timeout', was, true);
        EXECUTE format('ALTER TABLE docket.%I SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05, '
                       'autovacuum_vacuum_insert_scale_factor = 0.05)', name);
        -- Read through docket.job_events alone, under its policy.
        EXECUTE format('ALTER TABLE docket.%I ENABLE ROW LEVEL SECURITY', name);
        made := made + 1;
    END LOOP;
    RETURN made;
END
$$;

-- history_partitions_drop drops the closed partitions of docket.job_events
-- that no job of their range outlives, each once every job id of its
-- events is in a prune's record (docket.prunes), and returns how many it
-- dropped. Dropping one locks the history (ACCESS EXCLUSIVE) for an
-- instant: it waits at most p_wait for it and, not getting it, leaves the
-- partition to the next call, so a drop never stalls enqueues. It removes
-- only events whose jobs prunes removed and recorded: the prune sweep
-- calls it after each prune, in a transaction of its own.
CREATE OR REPLACE FUNCTION docket.history_partitions_drop(p_wait interval) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    p record;
    dropped integer := 0;
    covered int8multirange;
    last_id bigint := docket.history_last_id();
    was text := current_setting('lock_timeout');
BEGIN
    FOR p IN SELECT x.part, coalesce(x.lo, -9223372036854775808) AS lo, x.hi FROM docket.history_partitions() x
             WHERE x.hi - 1 <= last_id ORDER BY x.hi
    LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM docket.jobs j WHERE j.id >= p.lo AND j.id < p.hi);
        -- Every job whose events are here was removed by a recorded prune.
        SELECT coalesce(range_agg(r.job_ids), '{}') INTO covered FROM docket.prunes r
        WHERE r.job_ids && int8range(p.lo, p.hi);
        CONTINUE WHEN EXISTS (
            SELECT 1 FROM docket.job_events e
            WHERE e.job_id >= p.lo AND e.job_id < p.hi AND NOT e.job_id <@ covered);
        -- Three tries, each waiting at most p_wait for the lock.
        PERFORM set_config('lock_timeout', (extract(epoch FROM p_wait) * 1000)::bigint::text || 'ms', true);
        FOR try IN 1..3 LOOP
            BEGIN
                EXECUTE format('DROP TABLE %s', p.part);
                dropped := dropped + 1;
                EXIT;
            EXCEPTION WHEN lock_not_available THEN
                NULL;
            END;
        END LOOP;
        PERFORM set_config('lock_timeout', was, true);
    END LOOP;
    RETURN dropped;
END
$$;

-- history_upkeep drops the partitions of the job history that prunes
-- emptied (history_partitions_drop), then makes those ahead of the jobs id
-- sequence (history_partitions_ensure), each lock waited for at most
-- p_wait (0 .. 10 seconds), on behalf of p_actor, who must hold
-- retention.prune in some project: the prune sweep's actor. It chooses
-- nothing: what it drops is events of jobs pruned and recorded.
-- It does nothing, and returns no row, for an actor holding retention.prune
-- nowhere; it does nothing, returning 0 and 0, while another transaction's
-- upkeep runs (one at a time). Refuses: a malformed actor or wait (DK010).
CREATE OR REPLACE FUNCTION docket.history_upkeep(p_actor text, p_wait interval)
RETURNS TABLE (dropped integer, made integer)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    IF p_wait IS NULL OR p_wait < interval '0' OR p_wait > interval '10 seconds' THEN
        RAISE EXCEPTION 'invalid lock wait %: want 0 .. 10 seconds', p_wait USING ERRCODE = 'DK010';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.principal = p_actor AND g.capability = 'retention.prune') THEN
        RETURN;
    END IF;
    -- One upkeep at a time, by the lock on the width's setting row, held to
    -- the end of the transaction: another one running, this one does
    -- nothing (0, 0) and leaves the work to the next prune. Two at once,
    -- each holding a dropped partition's lock while trying the next one's,
    -- waited on each other until the deadlock detector cancelled one.
    PERFORM 1 FROM docket.settings s WHERE s.name = 'history_partition_width' FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        dropped := 0;
        made := 0;
        RETURN NEXT;
        RETURN;
    END IF;
    dropped := docket.history_partitions_drop(p_wait);
    made := docket.history_partitions_ensure(p_wait);
    RETURN NEXT;
END
$$;

-- prune_run removes, in the current transaction, up to p_limit items past
-- their projects' horizons at p_now, on behalf of p_actor, in the projects
-- where p_actor holds retention.prune, oldest first; an item is a job, a
-- closed case (counted with its jobs) or a message. It returns one
-- docket.prunes row per project it removed something from, or kept
-- something of that did not verify. What it removes:
--   * finished jobs that belong to no case: succeeded and cancelled ones
--     finished jobs_succeeded ago, failed and dead ones jobs_failed ago, of
--     no lane or of a finished lane, with their events; a job a schedule
--     occurrence enqueued only once the occurrence is occurrences old, and
--     the occurrence with it;
--   * closed cases closed cases ago whose jobs are all finished and of no
--     lane still open, with their events, keys, obligations, timers, waits,
--     messages, and their jobs with their events;
--   * dead-lettered messages of no case, messages ago.
-- A job whose history does not verify is kept, with its case; the prune
-- counts it. Items another transaction holds are skipped (SKIP LOCKED), so
-- prunes may run at once in several processes and remove each item once.
-- Refuses: a malformed actor, a limit outside 1..10000 (DK010).
-- Planned without JIT: the choice of a prune's jobs reads thousands of
-- rows, which Postgres costs above jit_above_cost, and it compiled the
-- statement's expressions at every prune (tens of milliseconds each time)
-- to save less than that.
CREATE OR REPLACE FUNCTION docket.prune_run(p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.prunes
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    pr record;
    st text;
    left_ integer := p_limit;
    v_jobs bigint[];
    v_more bigint[];
    v_cases bigint[];
    v_case bigint;
    v_case_jobs bigint[];
    v_msgs bigint[];
    v_bad bigint[];
    v_ids bigint[];
    v_events integer[];
    v_heads bytea[];
    v_states jsonb;
    v_from timestamptz;
    v_to timestamptz;
    n_events integer;
    n_case_events integer;
    n_keys integer;
    n_obligations integer;
    n_timers integer;
    n_waits integer;
    n_msgs integer;
    n_occ integer;
    rec docket.prunes;
    v_rows bigint[];
    v_drop_lo bigint[];
    v_drop_hi bigint[];
    v_last_id bigint := docket.history_last_id();
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('prune limit', p_limit, 10000);
    FOR pr IN
        SELECT r.* FROM docket.retention r
        WHERE docket.grant_check(p_actor, r.project, 'retention.prune')
        ORDER BY r.project
    LOOP
        EXIT WHEN left_ <= 0;
        v_jobs := '{}';
        v_bad := '{}';
        v_cases := '{}';
        v_msgs := '{}';

        -- Finished jobs of no case, by state, oldest first.
        FOREACH st IN ARRAY ARRAY['succeeded', 'cancelled', 'failed', 'dead'] LOOP
            CONTINUE WHEN (CASE WHEN st IN ('succeeded', 'cancelled') THEN pr.jobs_succeeded ELSE pr.jobs_failed END) IS NULL;
            EXIT WHEN left_ - cardinality(v_jobs) <= 0;
            SELECT coalesce(array_agg(x.id), '{}') INTO v_more FROM (
                SELECT j.id FROM docket.jobs j
                WHERE j.project = pr.project AND j.state = st AND j.finished_at IS NOT NULL AND j.case_id IS NULL
                  AND j.finished_at <= p_now - CASE WHEN st IN ('succeeded', 'cancelled') THEN pr.jobs_succeeded ELSE pr.jobs_failed END
                  AND (j.lane_id IS NULL OR EXISTS (
                          SELECT 1 FROM docket.lanes l WHERE l.id = j.lane_id AND docket.machine_terminal('lane', l.state)))
                  AND NOT docket.prune_keeps_job(j)
                  AND NOT EXISTS (
                          SELECT 1 FROM docket.schedule_occurrences o WHERE o.job_id = j.id
                          AND (pr.occurrences IS NULL OR o.due_at > p_now - pr.occurrences))
                ORDER BY j.finished_at, j.id
                LIMIT left_ - cardinality(v_jobs)
                FOR UPDATE OF j SKIP LOCKED) x;
            v_jobs := v_jobs || v_more;
        END LOOP;

        -- Closed cases, oldest closing first, whose jobs are all finished and
        -- of no open lane; each counts with its jobs against the limit.
        IF pr.cases IS NOT NULL AND left_ - cardinality(v_jobs) > 0 THEN
            FOR v_case IN
                SELECT c.id FROM docket.cases c
                WHERE c.project = pr.project AND c.status = 'closed' AND c.closed_at <= p_now - pr.cases
                  AND NOT EXISTS (SELECT 1 FROM docket.jobs j WHERE j.case_id = c.id
                                  AND (j.finished_at IS NULL
                                       OR (j.lane_id IS NOT NULL AND EXISTS (
                                               SELECT 1 FROM docket.lanes l WHERE l.id = j.lane_id
                                               AND NOT docket.machine_terminal('lane', l.state)))))
                  AND NOT EXISTS (SELECT 1 FROM docket.waits w WHERE w.case_id = c.id AND w.status = 'waiting')
                  AND NOT EXISTS (SELECT 1 FROM docket.obligations o WHERE o.case_id = c.id AND o.state = 'pending')
                  AND NOT EXISTS (SELECT 1 FROM docket.messages m WHERE m.addressee = c.id AND m.status = 'buffered')
                ORDER BY c.closed_at, c.id
                LIMIT left_ - cardinality(v_jobs)
                FOR UPDATE OF c SKIP LOCKED
            LOOP
                SELECT coalesce(array_agg(j.id ORDER BY j.id), '{}') INTO v_case_jobs FROM (
                    SELECT j.id FROM docket.jobs j WHERE j.case_id = v_case FOR UPDATE) j;
                EXIT WHEN cardinality(v_cases) > 0 AND cardinality(v_jobs) + cardinality(v_cases) + cardinality(v_case_jobs) >= left_;
                -- A case with a job whose history does not verify is kept whole.
                IF EXISTS (SELECT 1 FROM docket.job_heads(v_case_jobs) h WHERE NOT h.ok) THEN
                    v_bad := v_bad || (SELECT array_agg(h.job_id ORDER BY h.job_id) FROM docket.job_heads(v_case_jobs) h WHERE NOT h.ok);
                    CONTINUE;
                END IF;
                v_cases := v_cases || v_case;
                v_jobs := v_jobs || v_case_jobs;
            END LOOP;
        END IF;

        -- Dead-lettered messages no case took.
        IF pr.messages IS NOT NULL AND left_ - cardinality(v_jobs) - cardinality(v_cases) > 0 THEN
            SELECT coalesce(array_agg(x.id), '{}') INTO v_msgs FROM (
                SELECT m.id FROM docket.messages m
                WHERE m.project = pr.project AND m.status = 'dead_lettered' AND m.addressee IS NULL AND m.consumed_by IS NULL
                  AND m.settled_at <= p_now - pr.messages
                ORDER BY m.settled_at, m.id
                LIMIT left_ - cardinality(v_jobs) - cardinality(v_cases)
                FOR UPDATE OF m SKIP LOCKED) x;
        END IF;

        -- Verify every job's chain; keep those that do not verify (and, for a
        -- free job, only it; a case's were dealt with above).
        SELECT coalesce(array_agg(h.job_id ORDER BY h.job_id) FILTER (WHERE h.ok), '{}'),
               coalesce(array_agg(h.events ORDER BY h.job_id) FILTER (WHERE h.ok), '{}'),
               coalesce(array_agg(h.head ORDER BY h.job_id) FILTER (WHERE h.ok), '{}'),
               v_bad || coalesce(array_agg(h.job_id ORDER BY h.job_id) FILTER (WHERE NOT h.ok), '{}')
        INTO v_ids, v_events, v_heads, v_bad
        FROM docket.job_heads(v_jobs) h;
        v_jobs := v_ids;

        CONTINUE WHEN cardinality(v_jobs) = 0 AND cardinality(v_cases) = 0 AND cardinality(v_msgs) = 0 AND cardinality(v_bad) = 0;

        SELECT coalesce(jsonb_object_agg(s.state, s.n), '{}'), min(s.first), max(s.last)
        INTO v_states, v_from, v_to
        FROM (SELECT j.state::text AS state, count(*) AS n, min(j.finished_at) AS first, max(j.finished_at) AS last
              FROM docket.jobs j WHERE j.id = ANY (v_jobs) GROUP BY j.state) s;
        SELECT coalesce(sum(e), 0)::integer INTO n_events FROM unnest(v_events) e;
        SELECT count(*)::integer INTO n_case_events FROM docket.case_events WHERE case_id = ANY (v_cases);
        SELECT count(*)::integer INTO n_keys FROM docket.case_keys WHERE case_id = ANY (v_cases);
        SELECT count(*)::integer INTO n_obligations FROM docket.obligations WHERE case_id = ANY (v_cases);
        SELECT count(*)::integer INTO n_timers FROM docket.timers WHERE case_id = ANY (v_cases);
        SELECT count(*)::integer INTO n_waits FROM docket.waits WHERE case_id = ANY (v_cases);
        SELECT v_msgs || coalesce(array_agg(m.id), '{}') INTO v_msgs FROM docket.messages m
        WHERE m.addressee = ANY (v_cases)
           OR m.consumed_by IN (SELECT w.id FROM docket.waits w WHERE w.case_id = ANY (v_cases));
        SELECT count(*)::integer INTO n_occ FROM docket.schedule_occurrences WHERE job_id = ANY (v_jobs);

        -- The record first: it admits the deletes that follow.
        INSERT INTO docket.prunes (project, xid, actor, at, horizons, jobs, job_ids, job_states, job_events,
                                   finished_from, finished_to, jobs_digest, cases, case_ids, case_events, case_keys,
                                   obligations, timers, waits, messages, message_ids, occurrences,
                                   kept_unverified, first_unverified)
        VALUES (pr.project, pg_current_xact_id(), p_actor, p_now,
                docket.horizons_json(pr.jobs_succeeded, pr.jobs_failed, pr.messages, pr.occurrences, pr.cases),
                cardinality(v_jobs), docket.ids_ranges(v_jobs), v_states, n_events, v_from, v_to,
                CASE WHEN cardinality(v_jobs) > 0 THEN docket.prune_digest(v_ids, v_events, v_heads) END,
                cardinality(v_cases), docket.ids_ranges(v_cases), n_case_events, n_keys, n_obligations, n_timers,
                n_waits, cardinality(v_msgs), docket.ids_ranges(v_msgs), n_occ,
                cardinality(v_bad), (SELECT min(b) FROM unnest(v_bad) b))
        RETURNING * INTO rec;

        -- The events of jobs in a closed partition no job of its range
        -- outlives stay for docket.history_partitions_drop to drop whole;
        -- the others go row by row.
        SELECT coalesce(array_agg(coalesce(p.lo, -9223372036854775808)), '{}'), coalesce(array_agg(p.hi), '{}')
        INTO v_drop_lo, v_drop_hi
        FROM docket.history_partitions() p
        WHERE p.hi - 1 <= v_last_id
          AND EXISTS (SELECT 1 FROM unnest(v_jobs) j (id) WHERE j.id >= coalesce(p.lo, j.id) AND j.id < p.hi)
          AND NOT EXISTS (SELECT 1 FROM docket.jobs x
                          WHERE x.id >= coalesce(p.lo, -9223372036854775808) AND x.id < p.hi
                            AND x.id NOT IN (SELECT unnest(v_jobs)));
        SELECT coalesce(array_agg(j.id), '{}') INTO v_rows FROM unnest(v_jobs) j (id)
        WHERE NOT EXISTS (SELECT 1 FROM unnest(v_drop_lo, v_drop_hi) d (lo, hi) WHERE j.id >= d.lo AND j.id < d.hi);
        DELETE FROM docket.job_events
        WHERE job_id = ANY (v_rows) AND job_id >= lower(docket.ids_bounds(v_rows)) AND job_id < upper(docket.ids_bounds(v_rows));
        PERFORM docket.prune_case_parts(v_cases, v_msgs);
        DELETE FROM docket.schedule_occurrences WHERE job_id = ANY (v_jobs);
        DELETE FROM docket.jobs WHERE id = ANY (v_jobs);
        DELETE FROM docket.cases WHERE id = ANY (v_cases);

        left_ := left_ - cardinality(v_jobs) - cardinality(v_cases) - cardinality(v_msgs);
        RETURN NEXT rec;
    END LOOP;
END
$$;

-- The delete-refusing triggers of the tables a prune deletes from admit the
-- deletes of a prune, and nothing else. They are retention's, though they
-- stand on the other aggregates' tables: each names docket.pruning.
--
-- The jobs' and their events' are statement triggers, asking pruning() once
-- a DELETE rather than once a row: a prune deletes thousands of each. (The
-- events' stands on the partitioned table: a DELETE names docket.job_events,
-- as only the owner may name a partition.)
CREATE OR REPLACE FUNCTION docket.refuse_unless_pruning() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT docket.pruning() THEN
        RAISE EXCEPTION '%.%: % refused: %', TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP, TG_ARGV[0]
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER jobs_refuse_delete
    BEFORE DELETE ON docket.jobs
    FOR EACH STATEMENT
    EXECUTE FUNCTION docket.refuse_unless_pruning('jobs are kept with their history until a prune removes them past their retention: cancel a job instead');

CREATE OR REPLACE TRIGGER job_events_append_only
    BEFORE UPDATE ON docket.job_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

CREATE OR REPLACE TRIGGER job_events_refuse_delete
    BEFORE DELETE ON docket.job_events
    FOR EACH STATEMENT
    EXECUTE FUNCTION docket.refuse_unless_pruning('events are removed only with their job, by a prune');

CREATE OR REPLACE TRIGGER cases_refuse_delete
    BEFORE DELETE ON docket.cases
    FOR EACH ROW WHEN (NOT docket.pruning())
    EXECUTE FUNCTION docket.refuse_change('cases are kept with their history until a prune removes them past their retention: close a case instead');

CREATE OR REPLACE TRIGGER case_keys_refuse_delete
    BEFORE DELETE ON docket.case_keys
    FOR EACH ROW WHEN (NOT docket.pruning())
    EXECUTE FUNCTION docket.refuse_change('case keys are kept: closing the case releases them');

CREATE OR REPLACE TRIGGER obligations_refuse_delete
    BEFORE DELETE ON docket.obligations
    FOR EACH ROW WHEN (NOT docket.pruning())
    EXECUTE FUNCTION docket.refuse_change('obligations are kept: withdraw one instead');

CREATE OR REPLACE TRIGGER case_events_append_only
    BEFORE UPDATE ON docket.case_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

CREATE OR REPLACE TRIGGER case_events_refuse_delete
    BEFORE DELETE ON docket.case_events
    FOR EACH ROW WHEN (NOT docket.pruning())
    EXECUTE FUNCTION docket.refuse_change('events are removed only with their case, by a prune');

CREATE OR REPLACE TRIGGER messages_refuse_delete
    BEFORE DELETE ON docket.messages
    FOR EACH ROW WHEN (NOT docket.pruning())
    EXECUTE FUNCTION docket.refuse_change('messages are kept: a message no wait will claim is dead-lettered');

CREATE OR REPLACE TRIGGER waits_refuse_delete
    BEFORE DELETE ON docket.waits
    FOR EACH ROW WHEN (NOT docket.pruning())
    EXECUTE FUNCTION docket.refuse_change('waits are kept: withdraw one instead');

CREATE OR REPLACE TRIGGER timers_refuse_delete
    BEFORE DELETE ON docket.timers
    FOR EACH ROW WHEN (NOT docket.pruning())
    EXECUTE FUNCTION docket.refuse_change('timers are kept: closing the case cancels the ones not fired');

CREATE OR REPLACE TRIGGER schedule_occurrences_append_only
    BEFORE UPDATE ON docket.schedule_occurrences
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

CREATE OR REPLACE TRIGGER schedule_occurrences_refuse_delete
    BEFORE DELETE ON docket.schedule_occurrences
    FOR EACH ROW WHEN (NOT docket.pruning())
    EXECUTE FUNCTION docket.refuse_change('occurrences are removed only with their job, by a prune');

INSERT INTO docket.api_functions (name, role) VALUES
    ('retention_set', 'app'), ('retention_get', 'app'), ('prune_run', 'app'), ('prune_verify', 'app'),
    ('job_pruned', 'app'), ('history_upkeep', 'app');

-- The partitions ahead of the jobs id sequence, made at migrate.
SELECT docket.history_partitions_ensure('5 seconds');

-- Who may read what (row-level security; see kit.sql) --------------------------

-- A project's horizons and their history are visible where the login's
-- principals hold retention.manage or retention.prune; its prune records
-- also to its job readers (as PruneGet).
CREATE POLICY retention_policies_visible_to_retention_holders ON docket.retention_policies FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('retention.manage', 'retention.prune'))::text[]));

CREATE POLICY retention_events_visible_to_retention_holders ON docket.retention_events FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('retention.manage', 'retention.prune'))::text[]));

CREATE POLICY prunes_visible_to_retention_holders_and_job_readers ON docket.prunes FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('retention.manage', 'retention.prune', 'job.view', 'job.create',
                                                           'job.claim', 'job.cancel', 'job.reconcile', 'job.pin'))::text[]));
