-- Human tasks: a durable wait with an operational surface. A case-bound
-- opening registers, in one transaction, a wait on the task's own key and a
-- task row carrying what a reviewer needs; a decision is delivered to that
-- wait as an inbound message (producer docket.task, id the task's), over the
-- single-consumer path of every message, and the continuation job runs with
-- it. Four-eyes is enforced in the reserving transaction; claims are leased;
-- settling is a compare-and-set from the pending states; what happens at the
-- deadline is declared at opening and applied by a sweep.

-- The task machine's states and moves (docket.task_states, docket.task_transitions),
-- as 00030_tasks.sql declares them.
SELECT docket.machine_views('task');

CREATE OR REPLACE TRIGGER tasks_refuse_delete
    BEFORE DELETE ON docket.tasks
    FOR EACH ROW WHEN (NOT docket.pruning())
    EXECUTE FUNCTION docket.refuse_change('tasks are kept with their case until a prune removes it');

CREATE OR REPLACE TRIGGER tasks_columns_immutable
    BEFORE UPDATE OF id, case_id, run_id, step_id, project, key, title, summary, proposal, evidence, decisions, proposer, acting_for,
                     excluded, on_expiry, auto_decision, wait_id, opened_by, opened_at ON docket.tasks
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

CREATE OR REPLACE TRIGGER task_events_append_only
    BEFORE UPDATE ON docket.task_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

CREATE OR REPLACE TRIGGER task_events_refuse_delete
    BEFORE DELETE ON docket.task_events
    FOR EACH ROW WHEN (NOT docket.pruning())
    EXECUTE FUNCTION docket.refuse_change('events are removed only with their case, by a prune');

-- tasks_guard holds every INSERT and UPDATE of docket.tasks to the task
-- machine and to its owner: born pending, unclaimed and unsettled in an open
-- case of its project (DK005 for a closed one), whose row it writes
-- (case_hold) as a close does, or on a running run's step (run_step_owner,
-- DK014 for a run that ended); its exclusions always hold
-- the proposer, the case's admitter (a run's: whoever started the run) and
-- those acting for someone; a claim
-- and a decision never name an excluded principal, nor one that is the
-- same person as an excluded one (DK008, see person_names); an automatic
-- decision is the one the opening signed, at the deadline, where the expiry
-- policy is to decide (DK015), by a principal holding case.sweep (DK009).
CREATE OR REPLACE FUNCTION docket.tasks_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c docket.cases;
BEGIN
    IF TG_OP = 'INSERT' AND NEW.run_id IS NOT NULL THEN
        NEW.project := docket.run_step_owner(NEW.run_id, NEW.step_id, NEW.project, 'task ' || NEW.key);
        PERFORM docket.machine_birth('task', 'task ' || NEW.key, NEW.status);
        IF NEW.claimed_by IS NOT NULL OR NEW.decision IS NOT NULL OR NEW.settled_at IS NOT NULL OR NEW.escalated_at IS NOT NULL THEN
            RAISE EXCEPTION 'task %: a task is opened unclaimed and undecided', NEW.key USING ERRCODE = 'DK001';
        END IF;
        NEW.excluded := ARRAY(SELECT DISTINCT x FROM unnest(NEW.excluded || NEW.proposer::text || NEW.acting_for
                                                            || (SELECT r.created_by::text FROM docket.runs r WHERE r.id = NEW.run_id)) x
                              ORDER BY x);
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' THEN
        c := docket.case_hold(NEW.case_id);
        IF c.id IS NULL THEN
            RAISE EXCEPTION 'task %: case % does not exist', NEW.key, coalesce(NEW.case_id::text, 'NULL')
                USING ERRCODE = '23503', CONSTRAINT = 'tasks_case_fkey', TABLE = 'tasks', SCHEMA = 'docket';
        END IF;
        IF NEW.project IS DISTINCT FROM c.project AND NEW.project IS NOT NULL THEN
            RAISE EXCEPTION 'task %: its project is its case''s, %, not %', NEW.key, c.project, NEW.project
                USING ERRCODE = 'DK015';
        END IF;
        NEW.project := c.project;
        IF c.status <> 'open' THEN
            RAISE EXCEPTION 'case % is closed: it cannot open task %', c.id, NEW.key USING ERRCODE = 'DK005';
        END IF;
        PERFORM docket.machine_birth('task', 'task ' || NEW.key, NEW.status);
        IF NEW.claimed_by IS NOT NULL OR NEW.decision IS NOT NULL OR NEW.settled_at IS NOT NULL OR NEW.escalated_at IS NOT NULL THEN
            RAISE EXCEPTION 'task %: a task is opened unclaimed and undecided', NEW.key USING ERRCODE = 'DK001';
        END IF;
        NEW.excluded := ARRAY(SELECT DISTINCT x FROM unnest(NEW.excluded || NEW.proposer::text || c.created_by::text || NEW.acting_for) x
                              ORDER BY x);
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('task', 'task ' || OLD.id, OLD.status, NEW.status);
    IF NEW.claimed_by IS NOT NULL AND docket.person_in(NEW.claimed_by::text, NEW.excluded) THEN
        RAISE EXCEPTION '% may not claim task %: four eyes (it is, or is the same person as, one who proposed the task, admitted its case, or is acting for someone in it)',
            NEW.claimed_by, OLD.id USING ERRCODE = 'DK008';
    END IF;
    IF NEW.decided_by IS NOT NULL AND OLD.decided_by IS NULL THEN
        IF docket.person_in(NEW.decided_by::text, NEW.excluded) THEN
            RAISE EXCEPTION '% may not answer task %: four eyes (it is, or is the same person as, one who proposed the task, admitted its case, or is acting for someone in it)',
                NEW.decided_by, OLD.id USING ERRCODE = 'DK008';
        END IF;
        -- An automatic decision is the one the opening signed, made at the
        -- deadline, by the sweep's principal, where the policy says so.
        IF NEW.automatic AND (OLD.on_expiry <> 'decide' OR NEW.decision IS DISTINCT FROM OLD.auto_decision
                              OR NEW.settled_at IS NULL OR NEW.settled_at < OLD.deadline) THEN
            RAISE EXCEPTION 'task %: an automatic decision is made only at its deadline, as its expiry policy (%) declares', OLD.id, OLD.on_expiry
                USING ERRCODE = 'DK015';
        END IF;
        IF NEW.automatic AND NOT docket.grant_check(NEW.decided_by::text, OLD.project, 'case.sweep') THEN
            RAISE EXCEPTION 'task %: an automatic decision is made by the expiry sweep''s principal, and % holds no case.sweep on %',
                OLD.id, NEW.decided_by, OLD.project USING ERRCODE = 'DK009';
        END IF;
    END IF;
    IF NOT (NEW.audience @> OLD.audience AND NEW.audience_caps @> OLD.audience_caps) THEN
        RAISE EXCEPTION 'task %: its audience only widens', OLD.id USING ERRCODE = 'DK015';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER task_events_in_order
    BEFORE INSERT ON docket.task_events
    FOR EACH ROW EXECUTE FUNCTION docket.event_in_order();

CREATE OR REPLACE TRIGGER tasks_guard
    BEFORE INSERT OR UPDATE ON docket.tasks
    FOR EACH ROW EXECUTE FUNCTION docket.tasks_guard();

CREATE OR REPLACE TRIGGER project_takes_work
    BEFORE INSERT ON docket.tasks
    FOR EACH ROW EXECUTE FUNCTION docket.project_takes_work();

-- tasks_record appends the task_events row of every change of a task,
-- whoever writes it, attributed to the change context.
CREATE OR REPLACE FUNCTION docket.tasks_record() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_actor text := docket.context_actor();
    v_now timestamptz := docket.context_now();
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO docket.task_events (task_id, what, actor, at, detail)
        VALUES (NEW.id, 'opened', v_actor, v_now, jsonb_build_object('deadline', NEW.deadline, 'on_expiry', NEW.on_expiry,
                'auto_decision', NEW.auto_decision, 'excluded', to_jsonb(NEW.excluded)));
        RETURN NULL;
    END IF;
    IF NEW.status = 'decided' AND OLD.status <> 'decided' THEN
        INSERT INTO docket.task_events (task_id, what, actor, at, detail)
        VALUES (NEW.id, 'decided', v_actor, v_now, jsonb_build_object('decision', NEW.decision, 'automatic', NEW.automatic,
                'decided_by', NEW.decided_by, 'signed_by', CASE WHEN NEW.automatic THEN NEW.opened_by END, 'note', NEW.note));
    ELSIF NEW.status = 'escalated' AND OLD.status <> 'escalated' THEN
        INSERT INTO docket.task_events (task_id, what, actor, at, detail)
        VALUES (NEW.id, 'escalated', v_actor, v_now, jsonb_build_object('deadline', NEW.deadline,
                'audience', to_jsonb(NEW.audience), 'audience_caps', to_jsonb(NEW.audience_caps),
                'released', OLD.claimed_by));
    ELSIF NEW.status = 'withdrawn' AND OLD.status <> 'withdrawn' THEN
        INSERT INTO docket.task_events (task_id, what, actor, at, detail)
        VALUES (NEW.id, 'withdrawn', v_actor, v_now, NULL);
    ELSIF NEW.claim_token IS DISTINCT FROM OLD.claim_token AND NEW.claim_token IS NOT NULL THEN
        INSERT INTO docket.task_events (task_id, what, actor, at, detail)
        VALUES (NEW.id, 'claimed', v_actor, v_now, jsonb_build_object('until', NEW.claim_expires_at));
    ELSIF NEW.claim_token IS NULL AND OLD.claim_token IS NOT NULL THEN
        INSERT INTO docket.task_events (task_id, what, actor, at, detail)
        VALUES (NEW.id, 'released', v_actor, v_now, jsonb_build_object('held_by', OLD.claimed_by));
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER tasks_record
    AFTER INSERT OR UPDATE ON docket.tasks
    FOR EACH ROW EXECUTE FUNCTION docket.tasks_record();

-- cases_withdraw_tasks withdraws the undecided tasks of a case as it closes,
-- by any route, in the closing transaction (their waits are withdrawn by
-- cases_settle_waits).
CREATE OR REPLACE FUNCTION docket.cases_withdraw_tasks() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE docket.tasks
    SET status = 'withdrawn', claimed_by = NULL, claim_token = NULL, claimed_at = NULL, claim_expires_at = NULL,
        settled_at = greatest(updated_at, docket.context_now()), updated_at = greatest(updated_at, docket.context_now())
    WHERE case_id = NEW.id AND status IN ('pending', 'escalated');
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER cases_withdraw_tasks
    AFTER UPDATE OF status ON docket.cases
    FOR EACH ROW WHEN (OLD.status = 'open' AND NEW.status = 'closed')
    EXECUTE FUNCTION docket.cases_withdraw_tasks();

-- The three questions ------------------------------------------------------------------

-- task_is_pending: the plane still waits on its decision (the backlog).
CREATE OR REPLACE FUNCTION docket.task_is_pending(p_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_status IN ('pending', 'escalated');

-- task_is_queued: somebody of its audience may take it at p_now: pending and
-- held by no live claim. A claimed task leaves the queue; an escalated one is
-- queued again.
CREATE OR REPLACE FUNCTION docket.task_is_queued(p_status text, p_claim_expires_at timestamptz, p_now timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN docket.task_is_pending(p_status) AND (p_claim_expires_at IS NULL OR p_claim_expires_at <= p_now);

-- task_awaits_expiry: the sweep still owes it its expiry policy. An
-- escalated task is owed nothing further.
CREATE OR REPLACE FUNCTION docket.task_awaits_expiry(p_status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_status = 'pending';

-- task_in_audience: p_actor may take task t: named in its audience or
-- holding one of its audience capabilities on its project.
CREATE OR REPLACE FUNCTION docket.task_in_audience(p_audience text[], p_caps text[], p_project text, p_actor text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN p_actor = ANY (p_audience) OR EXISTS (
        SELECT 1 FROM docket.grants g
        WHERE g.project = p_project AND g.principal = p_actor AND g.capability = ANY (p_caps));
END
$$;

-- task_visible: p_actor may read the task: in its audience (excluded or
-- not: the proposer sees its task and why it may not answer it), or holding
-- case.admit or case.view on its project.
CREATE OR REPLACE FUNCTION docket.task_visible(p_audience text[], p_caps text[], p_project text, p_actor text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN docket.task_in_audience(p_audience, p_caps, p_project, p_actor)
        OR docket.grant_check(p_actor, p_project, 'case.admit') OR docket.grant_check(p_actor, p_project, 'case.view');
END
$$;

-- Views -------------------------------------------------------------------------------

-- The backlog of each project: what the plane waits on, what is queued, held,
-- escalated, owed an expiry, and the nearest deadline. Storage never reads the
-- clock, so "queued" counts tasks no claim holds at all; a claim that
-- expired still counts as held until someone takes the task.
CREATE OR REPLACE VIEW docket.task_backlog WITH (security_invoker = true) AS
SELECT project,
       count(*) FILTER (WHERE docket.task_is_pending(status)) AS pending,
       count(*) FILTER (WHERE docket.task_is_pending(status) AND claimed_by IS NULL) AS unclaimed,
       count(*) FILTER (WHERE docket.task_is_pending(status) AND claimed_by IS NOT NULL) AS claimed,
       count(*) FILTER (WHERE status = 'escalated') AS escalated,
       count(*) FILTER (WHERE docket.task_awaits_expiry(status)) AS awaiting_expiry,
       min(deadline) FILTER (WHERE docket.task_awaits_expiry(status)) AS next_deadline
FROM docket.tasks
WHERE docket.task_is_pending(status)
GROUP BY project;

COMMENT ON VIEW docket.task_backlog IS
    'Per project: undecided tasks, unclaimed and claimed, escalated, those the expiry sweep still owes, and the next deadline.';

CREATE OR REPLACE VIEW docket.tasks_awaiting_expiry WITH (security_invoker = true) AS
SELECT id, project, case_id, key, title, deadline, on_expiry, claimed_by
FROM docket.tasks
WHERE docket.task_awaits_expiry(status)
ORDER BY deadline, id;

COMMENT ON VIEW docket.tasks_awaiting_expiry IS
    'Tasks whose expiry policy has not fired, soonest deadline first. Due at instant T: WHERE deadline <= T.';

-- The protocol ---------------------------------------------------------------------------

-- task_opened is the row task_open returns: whether this call opened it, and
-- the task.
CREATE OR REPLACE VIEW docket.task_opened WITH (security_invoker = true) AS
SELECT false AS created, t.* FROM docket.tasks t WHERE false;

-- task_open opens task p_key of case p_case_id, on behalf of p_actor at
-- p_now: a wait named task.ID on the key (task, ID) until 3650 days on, with
-- the continuation a decision enqueues (p_kind, p_queue, p_payload,
-- p_payload_schema, p_max_attempts), and the task row. Opening again what is
-- there under that key, on the same terms, is a no-op that returns it,
-- created false; on other terms, DK003.
-- Refuses, writing nothing: malformed or oversized input, a deadline not
-- after p_now or more than 3650 days ahead, an expiry policy that is not
-- whole (DK010); an unknown case or one the actor may not write (P0002); an
-- actor without job.create on the project (DK009); a closed case (DK005).
CREATE OR REPLACE FUNCTION docket.task_open(
    p_case_id bigint, p_key text, p_title text, p_summary text, p_proposal jsonb, p_evidence jsonb,
    p_decisions text[], p_audience text[], p_audience_caps text[], p_proposer text, p_acting_for text[],
    p_deadline timestamptz, p_on_expiry text, p_escalate_to text[], p_escalate_caps text[],
    p_escalate_for interval, p_auto_decision text,
    p_kind text, p_queue text, p_payload jsonb, p_payload_schema integer, p_max_attempts integer,
    p_actor text, p_now timestamptz)
RETURNS SETOF docket.task_opened
LANGUAGE plpgsql AS $$
DECLARE
    v_project text;
    v docket.tasks;
    w docket.wait_registered;
    v_id bigint;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(docket.valid_case_key_value(p_key), 'task key', p_key,
        '1-255 characters, no control characters, no leading or trailing space');
    PERFORM docket.require_valid(p_title IS NOT NULL AND length(p_title) BETWEEN 1 AND 200 AND p_title !~ '[[:cntrl:]]',
        'title', left(p_title, 64), '1-200 characters, no control characters');
    PERFORM docket.require_valid(p_summary IS NOT NULL AND length(p_summary) <= 4000, 'summary', left(p_summary, 64), 'at most 4000 characters');
    PERFORM docket.require_valid(p_proposal IS NOT NULL AND docket.json_size(p_proposal) <= 16384, 'proposal',
        left(p_proposal::text, 64), 'JSON of at most 16384 characters');
    PERFORM docket.require_valid(p_evidence IS NOT NULL AND docket.json_size(p_evidence) <= 16384, 'evidence',
        left(p_evidence::text, 64), 'JSON of at most 16384 characters');
    PERFORM docket.require_valid(docket.valid_decisions(p_decisions), 'decisions', array_to_string(p_decisions, ','),
        '1-16 distinct names of [a-z0-9._-], starting with a letter');
    PERFORM docket.require_valid(docket.valid_principals(p_audience) AND docket.valid_capabilities(p_audience_caps)
        AND cardinality(p_audience) + cardinality(p_audience_caps) > 0, 'audience',
        array_to_string(p_audience || p_audience_caps, ','), 'up to 64 distinct principals and 16 capabilities, not none');
    PERFORM docket.require_principal('proposer', p_proposer);
    PERFORM docket.require_valid(docket.valid_principals(p_acting_for), 'acting for', array_to_string(p_acting_for, ','),
        'up to 64 distinct principals');
    IF p_deadline IS NULL OR NOT isfinite(p_deadline) OR p_deadline <= p_now OR p_deadline > p_now + interval '3650 days' THEN
        RAISE EXCEPTION 'invalid deadline %: every task has one, after now (%) and at most 3650 days ahead',
            coalesce(p_deadline::text, 'NULL'), p_now
            USING ERRCODE = 'DK010';
    END IF;
    IF p_on_expiry = 'escalate' THEN
        PERFORM docket.require_valid(docket.valid_principals(p_escalate_to) AND docket.valid_capabilities(p_escalate_caps)
            AND cardinality(p_escalate_to) + cardinality(p_escalate_caps) > 0, 'escalation audience',
            array_to_string(p_escalate_to || p_escalate_caps, ','), 'up to 64 principals and 16 capabilities, not none');
        PERFORM docket.require_valid(p_escalate_for BETWEEN interval '1 minute' AND interval '366 days', 'escalation deadline',
            p_escalate_for::text, '1 minute to 366 days after the escalation');
        PERFORM docket.require_valid(p_auto_decision IS NULL, 'automatic decision', p_auto_decision,
            'none: an escalating task decides nothing by itself');
    ELSIF p_on_expiry = 'decide' THEN
        PERFORM docket.require_valid(p_auto_decision = ANY (p_decisions), 'automatic decision', p_auto_decision,
            'one of the task''s decisions, signed at opening');
        PERFORM docket.require_valid(p_escalate_for IS NULL AND cardinality(p_escalate_to) + cardinality(p_escalate_caps) = 0,
            'escalation', array_to_string(p_escalate_to || p_escalate_caps, ','), 'none: a task that decides at its deadline does not escalate');
    ELSE
        RAISE EXCEPTION 'invalid expiry policy %: want escalate or decide', coalesce(p_on_expiry, 'NULL') USING ERRCODE = 'DK010';
    END IF;
    v_project := docket.case_authorize(p_case_id, p_actor);

    -- A retried opening: the same key, the same terms.
    SELECT * INTO v FROM docket.tasks WHERE case_id = p_case_id AND key = p_key;
    IF FOUND THEN
        IF (v.title, v.summary, v.proposal, v.evidence, v.decisions, v.proposer::text, v.acting_for, v.on_expiry,
            v.auto_decision)
           IS NOT DISTINCT FROM
           (p_title, p_summary, p_proposal, p_evidence, p_decisions, p_proposer, p_acting_for, p_on_expiry, p_auto_decision) THEN
            RETURN QUERY SELECT false, (v).*;
            RETURN;
        END IF;
        RAISE EXCEPTION 'case % already has task % (task %) on other terms', p_case_id, p_key, v.id
            USING ERRCODE = 'DK003';
    END IF;

    v_id := nextval(pg_get_serial_sequence('docket.tasks', 'id'));
    SELECT * INTO STRICT w FROM docket.wait_register(p_case_id, 'task.' || v_id, ARRAY['task'], ARRAY[v_id::text],
        p_now + interval '3650 days', p_kind, coalesce(p_queue, 'default'), coalesce(p_payload, '{}'),
        coalesce(p_payload_schema, 1), coalesce(p_max_attempts, 5), NULL, NULL, NULL, NULL, NULL, p_actor, p_now);
    INSERT INTO docket.tasks (id, case_id, project, key, title, summary, proposal, evidence, decisions, audience,
                              audience_caps, proposer, acting_for, excluded, deadline, on_expiry, escalate_to,
                              escalate_caps, escalate_for, auto_decision, wait_id, opened_by, opened_at, updated_at)
    OVERRIDING SYSTEM VALUE
    VALUES (v_id, p_case_id, v_project, p_key, p_title, p_summary, p_proposal, p_evidence, p_decisions, p_audience,
            p_audience_caps, p_proposer, p_acting_for, '{}', p_deadline, p_on_expiry, coalesce(p_escalate_to, '{}'),
            coalesce(p_escalate_caps, '{}'), p_escalate_for, p_auto_decision, w.id, p_actor, p_now, p_now)
    RETURNING * INTO v;
    RETURN QUERY SELECT true, (v).*;
END
$$;

-- task_open_step opens the task of step p_step of run r (held by the
-- caller, running), as the change context's actor at its instant: a wait
-- of the step on the key (task, ID) until 3650 days on, and the task row,
-- keyed by (run, step) -- a retried admission finds it and opens no second
-- -- whose proposal is the step's arguments p_args. p_spec is the plan's
-- declaration: {"title", "summary", "decisions", "audience",
-- "audience_caps", "within" (seconds to its deadline), "on_expiry"
-- (decide|escalate), "auto_decision", "escalate_to", "escalate_caps",
-- "escalate_within" (seconds)}. The task excludes whoever started the run
-- (tasks_guard). Refuses a malformed declaration as task_open does (DK010).
CREATE OR REPLACE FUNCTION docket.task_open_step(r docket.runs, p_step text, p_spec jsonb, p_args jsonb) RETURNS docket.tasks
LANGUAGE plpgsql AS $$
DECLARE
    v docket.tasks;
    w docket.waits;
    v_id bigint;
    v_now timestamptz := docket.context_now();
    v_actor text := docket.context_actor();
    v_decisions text[] := ARRAY(SELECT jsonb_array_elements_text(coalesce(p_spec -> 'decisions', '[]')));
    v_audience text[] := ARRAY(SELECT jsonb_array_elements_text(coalesce(p_spec -> 'audience', '[]')));
    v_caps text[] := ARRAY(SELECT jsonb_array_elements_text(coalesce(p_spec -> 'audience_caps', '[]')));
    v_escalate_to text[] := ARRAY(SELECT jsonb_array_elements_text(coalesce(p_spec -> 'escalate_to', '[]')));
    v_escalate_caps text[] := ARRAY(SELECT jsonb_array_elements_text(coalesce(p_spec -> 'escalate_caps', '[]')));
    v_within interval := make_interval(secs => (p_spec ->> 'within')::double precision);
    v_escalate_for interval := make_interval(secs => (p_spec ->> 'escalate_within')::double precision);
BEGIN
    SELECT * INTO v FROM docket.tasks WHERE run_id = r.id AND step_id = p_step;
    IF FOUND THEN
        RETURN v;
    END IF;
    PERFORM docket.require_valid(docket.valid_decisions(v_decisions), 'decisions', array_to_string(v_decisions, ','),
        '1-16 distinct names of [a-z0-9._-], starting with a letter');
    PERFORM docket.require_valid(docket.valid_principals(v_audience) AND docket.valid_capabilities(v_caps)
        AND cardinality(v_audience) + cardinality(v_caps) > 0, 'audience',
        array_to_string(v_audience || v_caps, ','), 'up to 64 distinct principals and 16 capabilities, not none');
    PERFORM docket.require_valid(v_within > interval '0' AND v_within <= interval '3650 days', 'task deadline',
        p_spec ->> 'within', 'more than 0 and at most 3650 days after the step''s admission');
    v_id := nextval(pg_get_serial_sequence('docket.tasks', 'id'));
    w := docket.wait_place_step(r, p_step, 'task.' || v_id, ARRAY['task:' || v_id], v_now + interval '3650 days');
    INSERT INTO docket.tasks (id, run_id, step_id, project, key, title, summary, proposal, evidence, decisions, audience,
                              audience_caps, proposer, acting_for, excluded, deadline, on_expiry, escalate_to,
                              escalate_caps, escalate_for, auto_decision, wait_id, opened_by, opened_at, updated_at)
    OVERRIDING SYSTEM VALUE
    VALUES (v_id, r.id, p_step, r.project, format('run:%s:%s', r.id, p_step), left(coalesce(p_spec ->> 'title', p_step), 200),
            left(coalesce(p_spec ->> 'summary', ''), 4000), p_args, '{}', v_decisions, v_audience, v_caps, r.created_by, '{}', '{}',
            v_now + v_within, p_spec ->> 'on_expiry', v_escalate_to, v_escalate_caps,
            CASE WHEN p_spec ->> 'on_expiry' = 'escalate' THEN v_escalate_for END,
            CASE WHEN p_spec ->> 'on_expiry' = 'decide' THEN p_spec ->> 'auto_decision' END,
            w.id, v_actor, v_now, v_now)
    RETURNING * INTO v;
    RETURN v;
EXCEPTION WHEN check_violation OR not_null_violation OR invalid_text_representation THEN
    RAISE EXCEPTION 'invalid task of step %: %', p_step, SQLERRM USING ERRCODE = 'DK010';
END
$$;

-- task_lock reads task p_id for p_actor, locked: the task, when the actor may
-- read it; P0002 otherwise, in the same words for a task that does not exist.
CREATE OR REPLACE FUNCTION docket.task_lock(p_id bigint, p_actor text) RETURNS docket.tasks
LANGUAGE plpgsql AS $$
DECLARE
    v docket.tasks;
BEGIN
    SELECT * INTO v FROM docket.tasks WHERE id = p_id FOR NO KEY UPDATE;
    IF NOT FOUND OR NOT docket.task_visible(v.audience, v.audience_caps, v.project, p_actor) THEN
        RAISE EXCEPTION 'task % does not exist (or % may not see it)', coalesce(p_id::text, 'NULL'), p_actor
            USING ERRCODE = 'P0002';
    END IF;
    RETURN v;
END
$$;

-- task_require_taker refuses p_actor taking task v (claiming or answering
-- it): excluded (DK008), outside its audience (DK009), or settled (DK007).
CREATE OR REPLACE FUNCTION docket.task_require_taker(v docket.tasks, p_actor text, p_what text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT docket.task_is_pending(v.status) THEN
        RAISE EXCEPTION 'task % was % first: nobody may % it now', v.id, v.status, p_what
            USING ERRCODE = 'DK007', DETAIL = 'status ' || v.status || coalesce(', decision ' || v.decision, '');
    END IF;
    IF docket.person_in(p_actor, v.excluded) THEN
        RAISE EXCEPTION '% may not % task %: four eyes (it is, or is the same person as, one who proposed the task, admitted its case, or is acting for someone in it)',
            p_actor, p_what, v.id USING ERRCODE = 'DK008';
    END IF;
    IF NOT docket.task_in_audience(v.audience, v.audience_caps, v.project, p_actor) THEN
        RAISE EXCEPTION '% may not % task %: it is not in the task''s audience', p_actor, p_what, v.id
            USING ERRCODE = 'DK009';
    END IF;
END
$$;

-- task_claim claims task p_id for p_actor at p_now for p_lease (1 minute to
-- 24 hours) and returns it: a fresh token, the lease from p_now. The holder
-- claiming again renews its lease under a new token.
-- Refuses, writing nothing: malformed input (DK010); a task the actor may not
-- see (P0002); a settled task (DK007); an excluded actor (DK008); one outside
-- the audience (DK009); a live claim of another (DK002, naming the holder and
-- until when).
CREATE OR REPLACE FUNCTION docket.task_claim(p_id bigint, p_lease interval, p_actor text, p_now timestamptz)
RETURNS docket.tasks
LANGUAGE plpgsql AS $$
DECLARE
    v docket.tasks;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(p_lease BETWEEN interval '1 minute' AND interval '24 hours', 'claim lease', p_lease::text,
        '1 minute to 24 hours');
    v := docket.task_lock(p_id, p_actor);
    PERFORM docket.task_require_taker(v, p_actor, 'claim');
    IF v.claimed_by IS NOT NULL AND v.claimed_by <> p_actor AND v.claim_expires_at > p_now THEN
        RAISE EXCEPTION 'task % is claimed by % until %', v.id, v.claimed_by, v.claim_expires_at
            USING ERRCODE = 'DK002';
    END IF;
    UPDATE docket.tasks
    SET claimed_by = p_actor, claim_token = gen_random_uuid(), claimed_at = greatest(p_now, opened_at),
        claim_expires_at = greatest(p_now, opened_at) + p_lease, updated_at = greatest(updated_at, p_now)
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- task_release gives back p_actor's claim on task p_id (token p_token) at
-- p_now and returns the task, queued again. Releasing a claim that is no
-- longer there is DK002.
CREATE OR REPLACE FUNCTION docket.task_release(p_id bigint, p_token uuid, p_actor text, p_now timestamptz)
RETURNS docket.tasks
LANGUAGE plpgsql AS $$
DECLARE
    v docket.tasks;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    v := docket.task_lock(p_id, p_actor);
    IF v.claim_token IS DISTINCT FROM p_token OR v.claimed_by IS DISTINCT FROM p_actor THEN
        RAISE EXCEPTION 'task %: % holds no claim with that token (held by %)', v.id, p_actor, coalesce(v.claimed_by, 'nobody')
            USING ERRCODE = 'DK002';
    END IF;
    UPDATE docket.tasks
    SET claimed_by = NULL, claim_token = NULL, claimed_at = NULL, claim_expires_at = NULL, updated_at = greatest(updated_at, p_now)
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- task_settle records decision p_decision of task v (locked by the caller,
-- pending) by p_actor at p_now and delivers it to the task's wait: a
-- message of producer docket.task, id the task's, filed under (task, ID),
-- consumed by the wait at once, and the wait's continuation job enqueued
-- with the message as its wake, in the case's project. The opening that
-- registered the wait held job.create: a decision needs no grant of its own
-- to enqueue what the opening asked for. A run step's task enqueues
-- nothing: the decision is the step's result. Returns the decided task.
CREATE OR REPLACE FUNCTION docket.task_settle(v docket.tasks, p_decision text, p_note text, p_automatic boolean,
                                   p_actor text, p_now timestamptz)
RETURNS docket.tasks
LANGUAGE plpgsql AS $$
DECLARE
    w docket.waits;
    m docket.messages;
    v_job bigint;
    v_at timestamptz := greatest(p_now, v.updated_at);
BEGIN
    UPDATE docket.tasks
    SET status = 'decided', decision = p_decision, decided_by = p_actor, automatic = p_automatic, note = nullif(p_note, ''),
        claimed_by = NULL, claim_token = NULL, claimed_at = NULL, claim_expires_at = NULL,
        settled_at = v_at, updated_at = v_at
    WHERE id = v.id
    RETURNING * INTO v;
    SELECT * INTO w FROM docket.waits WHERE id = v.wait_id FOR UPDATE;
    INSERT INTO docket.messages (project, producer, message_id, keys, payload, addressee, arrived_at, delivered_by)
    VALUES (v.project, 'docket.task', v.id::text, w.keys,
            jsonb_build_object('task_id', v.id, 'key', v.key, 'decision', p_decision, 'note', nullif(p_note, ''),
                               'decided_by', p_actor, 'automatic', p_automatic,
                               'signed_by', CASE WHEN p_automatic THEN v.opened_by END),
            v.case_id, least(v_at, w.deadline - interval '1 microsecond'), p_actor)
    RETURNING * INTO m;
    -- A run step's task: the decision answers the step, over the wait's
    -- one path (wait_continue), and enqueues nothing.
    IF w.run_id IS NOT NULL THEN
        PERFORM docket.wait_continue(w, m, 'satisfied', p_actor, p_now);
        RETURN v;
    END IF;
    INSERT INTO docket.jobs AS j (project, kind, queue, priority, payload, payload_schema, params, case_id, idempotency_key,
                                  max_attempts, available_at, created_by, created_at, updated_at)
    VALUES (w.project, w.on_arrival_kind, w.on_arrival_queue, 1, w.on_arrival_payload, w.on_arrival_payload_schema,
            jsonb_build_object('wait_id', w.id, 'wait', w.name, 'outcome', 'satisfied',
                'message', jsonb_build_object('id', m.id, 'producer', m.producer, 'message_id', m.message_id,
                                              'keys', to_jsonb(m.keys), 'arrived_at', m.arrived_at,
                                              'payload', m.payload)),
            w.case_id, 'wait:' || w.id || ':satisfied', w.on_arrival_max_attempts, p_now, p_actor, p_now, p_now)
    RETURNING j.id INTO v_job;
    UPDATE docket.messages SET status = 'consumed', consumed_by = w.id, settled_at = greatest(arrived_at, p_now)
    WHERE id = m.id;
    UPDATE docket.waits
    SET status = 'satisfied', satisfied_by = m.id, continuation_job_id = v_job,
        settled_at = greatest(created_at, p_now), settled_by = p_actor
    WHERE id = w.id;
    RETURN v;
END
$$;

-- task_decide answers task p_id with p_decision (and a note of up to 2000
-- characters) as p_actor at p_now, and returns it decided; the decision is
-- delivered to the task's wait and its continuation enqueued, in this
-- transaction. Answering needs the claim: p_actor holds it live, or nobody
-- does. It is a compare-and-set from the pending states: of a decision and
-- the expiry sweep, whichever reaches the task first wins.
-- Refuses, writing nothing: malformed input or a decision the task does not
-- admit (DK010); a task the actor may not see (P0002); a task settled first
-- (DK007, naming how); an excluded actor (DK008); one outside the audience
-- (DK009); a live claim of another (DK002).
CREATE OR REPLACE FUNCTION docket.task_decide(p_id bigint, p_decision text, p_note text, p_actor text, p_now timestamptz)
RETURNS docket.tasks
LANGUAGE plpgsql AS $$
DECLARE
    v docket.tasks;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(p_note IS NULL OR length(p_note) <= 2000, 'note', left(p_note, 64), 'at most 2000 characters');
    v := docket.task_lock(p_id, p_actor);
    PERFORM docket.task_require_taker(v, p_actor, 'answer');
    PERFORM docket.require_valid(p_decision = ANY (v.decisions), 'decision', p_decision,
        'one of ' || array_to_string(v.decisions, ', '));
    IF v.claimed_by IS NOT NULL AND v.claimed_by <> p_actor AND v.claim_expires_at > p_now THEN
        RAISE EXCEPTION 'task % is claimed by % until %: only the holder may answer it', v.id, v.claimed_by, v.claim_expires_at
            USING ERRCODE = 'DK002';
    END IF;
    RETURN docket.task_settle(v, p_decision, p_note, false, p_actor, p_now);
END
$$;

-- task_expire_due applies the expiry policy of up to p_limit tasks whose
-- deadline is at or before p_now and whose policy has not fired, soonest
-- first, on behalf of p_actor, in the projects where it holds case.sweep and
-- job.create: an escalating task releases any claim, widens its audience and
-- gets its new deadline (and is owed nothing further); a deciding one is
-- decided as its opening signed, automatic. It is a range scan of
-- tasks_expiry_idx; tasks another transaction holds are skipped, so sweeps
-- may run at once and a task expires once, and a decision holding the task
-- wins over the sweep. A sweeper the task excludes (four eyes: the same
-- person as its proposer, ...) leaves its automatic decision to another.
-- Returns the tasks it moved.
CREATE OR REPLACE FUNCTION docket.task_expire_due(p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.tasks
LANGUAGE plpgsql AS $$
DECLARE
    v docket.tasks;
    v_ids bigint[];
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep batch', p_limit, 10000);
    SELECT coalesce(array_agg(t.id), '{}') INTO v_ids FROM (
        SELECT t.id FROM docket.tasks t
        WHERE t.status = 'pending' AND t.deadline <= p_now
          AND docket.grant_check(p_actor, t.project, 'case.sweep') AND docket.grant_check(p_actor, t.project, 'job.create')
        ORDER BY t.deadline, t.id
        LIMIT p_limit
        FOR NO KEY UPDATE SKIP LOCKED) t;
    -- Escalations in one statement.
    RETURN QUERY
    UPDATE docket.tasks
    SET status = 'escalated', claimed_by = NULL, claim_token = NULL, claimed_at = NULL, claim_expires_at = NULL,
        audience = ARRAY(SELECT DISTINCT x FROM unnest(audience || escalate_to) x ORDER BY x),
        audience_caps = ARRAY(SELECT DISTINCT x FROM unnest(audience_caps || escalate_caps) x ORDER BY x),
        deadline = greatest(p_now, deadline) + escalate_for,
        escalated_at = greatest(p_now, updated_at), updated_at = greatest(p_now, updated_at)
    WHERE id = ANY (v_ids) AND on_expiry = 'escalate'
    RETURNING *;
    -- Automatic decisions, each delivered to its wait; never by a sweeper
    -- that is the same person as one the task excludes: another decides it.
    FOR v IN SELECT * FROM docket.tasks t WHERE t.id = ANY (v_ids) AND t.on_expiry = 'decide'
             AND NOT docket.person_in(p_actor, t.excluded) ORDER BY t.deadline, t.id LOOP
        v := docket.task_settle(v, v.auto_decision, format('decided automatically at its deadline %s, as its opening by %s signed',
                                                           v.deadline, v.opened_by), true, p_actor, p_now);
        RETURN NEXT v;
    END LOOP;
END
$$;

-- Reads ----------------------------------------------------------------------------------

-- task_masked is task v as p_actor reads it: a claim's token is its
-- holder's alone.
CREATE OR REPLACE FUNCTION docket.task_masked(v docket.tasks, p_actor text) RETURNS docket.tasks
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF v.claimed_by IS DISTINCT FROM p_actor THEN
        v.claim_token := NULL;
    END IF;
    RETURN v;
END
$$;

-- task_get returns task p_id when p_actor may read it (a claim's token only
-- to its holder); no row otherwise.
CREATE OR REPLACE FUNCTION docket.task_get(p_id bigint, p_actor text) RETURNS SETOF docket.tasks
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v docket.tasks;
BEGIN
    PERFORM docket.require_actor(p_actor);
    SELECT * INTO v FROM docket.tasks t
    WHERE t.id = p_id AND docket.task_visible(t.audience, t.audience_caps, t.project, p_actor);
    IF FOUND THEN
        RETURN NEXT docket.task_masked(v, p_actor);
    END IF;
END
$$;

-- task_worklist returns, for p_actor at p_now, the undecided tasks of
-- p_project it may take now (queued, in its audience, not excluded) and
-- those it holds, soonest deadline first, after task p_after_deadline /
-- p_after_id (keyset), at most p_limit (1..1000).
CREATE OR REPLACE FUNCTION docket.task_worklist(p_project text, p_actor text, p_now timestamptz, p_mine boolean,
                                     p_after_deadline timestamptz, p_after_id bigint, p_limit integer)
RETURNS SETOF docket.tasks
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    PERFORM docket.job_require_batch('worklist limit', p_limit, 1000);
    RETURN QUERY SELECT (docket.task_masked(t, p_actor)).* FROM docket.tasks t
    WHERE t.project = p_project AND docket.task_is_pending(t.status)
      AND (t.deadline, t.id) > (coalesce(p_after_deadline, '-infinity'), coalesce(p_after_id, 0))
      AND (t.claimed_by = p_actor AND t.claim_expires_at > p_now
           OR NOT p_mine AND docket.task_is_queued(t.status, t.claim_expires_at, p_now)
              AND NOT docket.person_in(p_actor, t.excluded)
              AND docket.task_in_audience(t.audience, t.audience_caps, t.project, p_actor))
    ORDER BY t.deadline, t.id
    LIMIT p_limit;
END
$$;

-- task_history returns the events of task p_id when p_actor may read it.
CREATE OR REPLACE FUNCTION docket.task_history(p_id bigint, p_actor text) RETURNS SETOF docket.task_events
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    IF NOT EXISTS (SELECT 1 FROM docket.task_get(p_id, p_actor)) THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM docket.task_events e WHERE e.task_id = p_id ORDER BY e.id;
END
$$;

-- task_backlog_of returns the backlog of p_project when p_actor holds
-- task.review, case.admit or case.view there; no row otherwise.
CREATE OR REPLACE FUNCTION docket.task_backlog_of(p_project text, p_actor text) RETURNS SETOF docket.task_backlog
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    IF NOT (docket.grant_check(p_actor, p_project, 'task.review') OR docket.grant_check(p_actor, p_project, 'case.admit')
            OR docket.grant_check(p_actor, p_project, 'case.view')) THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM docket.task_backlog b WHERE b.project = p_project;
    IF NOT FOUND THEN
        RETURN QUERY SELECT p_project, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, NULL::timestamptz;
    END IF;
END
$$;

INSERT INTO docket.api_functions (name, role) VALUES
    ('task_open', 'app'), ('task_claim', 'app'), ('task_release', 'app'), ('task_decide', 'app'),
    ('task_expire_due', 'app'), ('task_get', 'app'), ('task_worklist', 'app'), ('task_history', 'app'),
    ('task_backlog_of', 'app');

-- Who may read what (row-level security; see kit.sql) --------------------------

-- A task is visible to its audience's logins (named, or by a capability on
-- its project) and where the login's principals hold case.view or
-- case.admit (as task_visible); its events with it.
CREATE POLICY tasks_visible_to_audience_and_case_readers ON docket.tasks FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('case.view', 'case.admit'))::text[])
           OR EXISTS (SELECT 1 FROM unnest(audience) a WHERE docket.principal_bound(a, (SELECT docket.login_principals())))
           OR EXISTS (SELECT 1 FROM unnest(audience_caps) c WHERE project = ANY ((SELECT docket.visible_projects(c))::text[])));

CREATE POLICY task_events_visible_with_their_task ON docket.task_events FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.tasks t WHERE t.id = task_id));
