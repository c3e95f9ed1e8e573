-- Budgets: ceilings per run (steps admitted, effects, money in integer
-- minor units of one currency, steps in flight), exhaustion that is not
-- failure, resuming after a raise, and a per-project spend quota per period
-- that reserves each run's worst case when it is admitted.

CREATE OR REPLACE TRIGGER run_budget_events_append_only BEFORE UPDATE OR DELETE ON docket.run_budget_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- run_worst_case is what run r may spend at most: its money ceiling, and
-- one call for every step that may be in flight when it is reached.
CREATE OR REPLACE FUNCTION docket.run_worst_case(r docket.runs) RETURNS bigint
LANGUAGE sql STABLE
RETURN r.max_money + coalesce(r.max_call, 0) * coalesce(r.max_parallel,
    (SELECT p.steps FROM docket.plans p WHERE p.id = r.plan_id));

-- The hooks plans left for budgets ----------------------------------------------------------

-- runs_settle_reservations shrinks a run's reservation to what it spent
-- once it ended.
CREATE OR REPLACE FUNCTION docket.runs_settle_reservations() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE docket.budget_reservations SET amount = NEW.spent_money WHERE run_id = NEW.id;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER runs_settle_reservations
    AFTER UPDATE OF status ON docket.runs
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'compensated', 'failed') AND NEW.max_money IS NOT NULL)
    EXECUTE FUNCTION docket.runs_settle_reservations();

-- budget_reserve reserves run r's worst case in its project's quota for
-- r.currency, in the period p_now falls in, having written the quota row
-- (its guard_seq) before it sums the reservations: of two concurrent
-- admissions the later sees the earlier's reservation (READ COMMITTED) or
-- fails with 40001 (REPEATABLE READ, SERIALIZABLE), so together they cannot
-- carry the period past the quota. A lock alone would not do: under
-- REPEATABLE READ it leaves the sum to a snapshot taken before the other
-- committed. No quota: nothing to reserve. Refuses (DK009) a reservation
-- the quota cannot take.
CREATE OR REPLACE FUNCTION docket.budget_reserve(r docket.runs, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    q docket.budget_quotas;
    v_start timestamptz;
    v_held bigint;
    v_worst bigint := docket.run_worst_case(r);
BEGIN
    UPDATE docket.budget_quotas SET guard_seq = guard_seq + 1 WHERE project = r.project AND currency = r.currency
    RETURNING * INTO q;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_start := q.anchor + q.period * floor(extract(epoch FROM p_now - q.anchor) / extract(epoch FROM q.period));
    SELECT coalesce(sum(amount), 0) INTO v_held FROM docket.budget_reservations
    WHERE project = r.project AND currency = r.currency AND period_start = v_start AND run_id <> r.id;
    IF v_held + v_worst > q.amount THEN
        RAISE EXCEPTION 'run of project %: its worst case of % % (a ceiling of % and % a call in flight) would carry the period from % past its quota: % of % reserved',
            r.project, v_worst, r.currency, r.max_money, coalesce(r.max_call, 0), v_start, v_held, q.amount
            USING ERRCODE = 'DK009';
    END IF;
    INSERT INTO docket.budget_reservations (run_id, project, currency, period_start, amount)
    VALUES (r.id, r.project, r.currency, v_start, v_worst)
    ON CONFLICT (run_id) DO UPDATE SET amount = EXCLUDED.amount;
END
$$;

-- The API ----------------------------------------------------------------------------------

-- run_resume raises the ceilings of exhausted run p_run (NULL: keep) and
-- resumes it, on behalf of p_actor (plan.run and budget.manage) at p_now:
-- the raise is recorded (from, to, by whom), the recorded refusal is
-- evaluated again (a run still over a ceiling is exhausted again, and says
-- so), its worst case is reserved again in the quota. Refuses: a run that
-- is not exhausted (DK014: one that compensated cannot resume); a lowered
-- ceiling (DK010); a quota the raise would exceed (DK009); a run the actor
-- may not resume (P0002).
CREATE OR REPLACE FUNCTION docket.run_resume(p_run bigint, p_max_steps integer, p_max_effects bigint, p_max_money bigint,
                                  p_max_parallel integer, p_actor text, p_now timestamptz)
RETURNS docket.runs
LANGUAGE plpgsql AS $$
DECLARE
    r docket.runs;
    was docket.runs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    r := docket.run_authorize(p_run, p_actor);
    IF NOT docket.grant_check(p_actor, r.project, 'budget.manage') THEN
        RAISE EXCEPTION '% may not raise the ceilings of run %: it needs budget.manage on project %', p_actor, r.id, r.project
            USING ERRCODE = 'DK009';
    END IF;
    IF r.status <> 'exhausted' THEN
        RAISE EXCEPTION 'run % is %: only an exhausted run resumes', r.id, r.status USING ERRCODE = 'DK014';
    END IF;
    IF p_max_steps < r.max_steps OR p_max_effects < r.max_effects OR p_max_money < r.max_money OR p_max_parallel < r.max_parallel THEN
        RAISE EXCEPTION 'run %: a resume raises ceilings, never lowers them', r.id USING ERRCODE = 'DK010';
    END IF;
    was := r;
    UPDATE docket.runs
    SET max_steps = coalesce(p_max_steps, max_steps), max_effects = coalesce(p_max_effects, max_effects),
        max_money = coalesce(p_max_money, max_money), max_parallel = coalesce(p_max_parallel, max_parallel),
        status = 'running', updated_at = greatest(updated_at, p_now)
    WHERE id = r.id
    RETURNING * INTO r;
    INSERT INTO docket.run_budget_events (run_id, what, detail, actor, at)
    VALUES (r.id, 'raised', jsonb_build_object(
        'refusal', was.exhausted,
        'from', jsonb_build_object('steps', was.max_steps, 'effects', was.max_effects, 'money', was.max_money, 'parallel', was.max_parallel),
        'to', jsonb_build_object('steps', r.max_steps, 'effects', r.max_effects, 'money', r.max_money, 'parallel', r.max_parallel)),
        p_actor, p_now);
    IF r.max_money IS NOT NULL THEN
        PERFORM docket.budget_reserve(r, p_now);
    END IF;
    PERFORM docket.run_admit_ready(r.id, NULL);
    PERFORM docket.run_apply(r.id);
    SELECT * INTO r FROM docket.runs WHERE id = r.id;
    RETURN r;
END
$$;

-- budget_quota_set sets project p_project's quota for p_currency: p_amount
-- minor units per p_period counted from p_anchor, on behalf of p_actor
-- (budget.manage) at p_now.
CREATE OR REPLACE FUNCTION docket.budget_quota_set(p_project text, p_currency text, p_period interval, p_anchor timestamptz, p_amount bigint,
                                        p_actor text, p_now timestamptz)
RETURNS docket.budget_quotas
LANGUAGE plpgsql AS $$
DECLARE
    q docket.budget_quotas;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.require_valid(p_currency ~ '^[A-Z]{3}$', 'currency', p_currency, 'three capital letters (ISO 4217)');
    PERFORM docket.require_valid(p_period BETWEEN interval '1 minute' AND interval '400 days', 'period', p_period::text, '1 minute to 400 days');
    PERFORM docket.require_valid(p_amount >= 0 AND p_anchor IS NOT NULL AND isfinite(p_anchor), 'quota',
        concat_ws(' from ', p_amount, p_anchor), 'an amount of 0 or more from a finite anchor');
    IF NOT docket.grant_check(p_actor, p_project, 'budget.manage') THEN
        RAISE EXCEPTION '% may not set the quotas of project %: it needs budget.manage there', p_actor, p_project USING ERRCODE = 'DK009';
    END IF;
    INSERT INTO docket.budget_quotas (project, currency, period, anchor, amount, updated_by, updated_at)
    VALUES (p_project, p_currency, p_period, p_anchor, p_amount, p_actor, p_now)
    ON CONFLICT (project, currency) DO UPDATE
    SET period = EXCLUDED.period, anchor = EXCLUDED.anchor, amount = EXCLUDED.amount, updated_by = EXCLUDED.updated_by,
        updated_at = EXCLUDED.updated_at
    RETURNING * INTO q;
    RETURN q;
END
$$;

-- runs_leave_exhausted clears why a run was exhausted as it leaves that
-- state, by any route (a resume, a cancel, its last steps succeeding).
CREATE OR REPLACE FUNCTION docket.runs_leave_exhausted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.exhausted := NULL;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER runs_leave_exhausted
    BEFORE UPDATE OF status ON docket.runs
    FOR EACH ROW WHEN (OLD.status = 'exhausted' AND NEW.status <> 'exhausted')
    EXECUTE FUNCTION docket.runs_leave_exhausted();

INSERT INTO docket.api_functions (name, role) VALUES ('run_resume', 'app'), ('budget_quota_set', 'app');

-- Who may read what (row-level security; see kit.sql) --------------------------

-- A project's quotas are visible where the login's principals hold
-- budget.manage or plan.run; a run's reservation and budget events with
-- its run.
CREATE POLICY budget_quotas_visible_to_budget_holders ON docket.budget_quotas FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('budget.manage', 'plan.run'))::text[]));

CREATE POLICY budget_reservations_visible_with_their_run ON docket.budget_reservations FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.runs r WHERE r.id = run_id));

CREATE POLICY run_budget_events_visible_with_their_run ON docket.run_budget_events FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.runs r WHERE r.id = run_id));
