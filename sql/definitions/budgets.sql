-- Budgets: ceilings per run (steps admitted, effects, money in integer
-- minor units of one currency, steps in flight), exhaustion that is not
-- failure, resuming after a raise, and a per-project spend quota per period
-- that reserves each run's worst case when it is admitted.

CREATE OR REPLACE TRIGGER run_budget_events_append_only BEFORE UPDATE OR DELETE ON docket.run_budget_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- The run a budget's event or reservation names, checked without locking
-- it (plans.sql, frozen_reference_check): runs are never deleted.
CREATE OR REPLACE TRIGGER run_budget_events_run_id_fkey AFTER INSERT OR UPDATE OF run_id ON docket.run_budget_events
    FOR EACH ROW EXECUTE FUNCTION docket.frozen_reference_check('run_budget_events_run_id_fkey', 'run_id', 'runs');
CREATE OR REPLACE TRIGGER budget_reservations_run_id_fkey AFTER INSERT OR UPDATE OF run_id ON docket.budget_reservations
    FOR EACH ROW WHEN (NEW.run_id IS NOT NULL)
    EXECUTE FUNCTION docket.frozen_reference_check('budget_reservations_run_id_fkey', 'run_id', 'runs');

-- run_worst_case is what run r may spend at most: its money ceiling, and
-- one call for every step that may be in flight when it is reached.
CREATE OR REPLACE FUNCTION docket.run_worst_case(r docket.runs) RETURNS bigint
LANGUAGE sql STABLE
RETURN r.max_money + coalesce(r.max_call, 0) * coalesce(r.max_parallel,
    (SELECT p.steps FROM docket.plans p WHERE p.id = r.plan_id));

-- The hooks plans left for budgets ----------------------------------------------------------

-- Reservations ------------------------------------------------------------------------------
--
-- A run or a job with a money ceiling reserves in its project's quota for
-- its currency, in the period its admission (a run's start or resume, a
-- job's claim) falls in, what it spent and the most it may still spend. It
-- holds one reservation per period it was admitted in: when it is admitted
-- again in a later period, its earlier reservations keep what it spent
-- while they were current, and the new one takes what it may still spend.
-- As it stops spending (a run that ended, a job's attempt that ended) its
-- current reservation shrinks to what it spent since the earlier ones.

-- budget_reserve_for reserves for the run p_run or the job p_job (one of
-- the two) of project p_project: in p_currency's quota, in the period p_now
-- falls in, p_outstanding more than what it spent, p_spent, in all. It
-- writes the quota row (its guard_seq) before it sums the reservations: of
-- two concurrent admissions the later sees the earlier's reservation (READ
-- COMMITTED) or fails with 40001 (REPEATABLE READ, SERIALIZABLE), so
-- together they cannot carry the period past the quota. A lock alone would
-- not do: under REPEATABLE READ it leaves the sum to a snapshot taken
-- before the other committed. No quota: nothing to reserve. Refuses
-- (DK009), naming p_what, a reservation the quota cannot take.
CREATE OR REPLACE FUNCTION docket.budget_reserve_for(p_project text, p_currency text, p_run bigint, p_job bigint,
                                                     p_now timestamptz, p_spent bigint, p_outstanding bigint, p_what text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    q docket.budget_quotas;
    v_start timestamptz;
    v_before bigint;   -- what its reservations of earlier periods hold
    v_latest docket.budget_reservations;
    v_here bigint;     -- what its reservation of this period is to hold
    v_held bigint;     -- what the others hold in this period
BEGIN
    UPDATE docket.budget_quotas SET guard_seq = guard_seq + 1 WHERE project = p_project AND currency = p_currency
    RETURNING * INTO q;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_start := q.anchor + q.period * floor(extract(epoch FROM p_now - q.anchor) / extract(epoch FROM q.period));
    -- Its latest reservation of an earlier period, left holding what it may
    -- still spend (a run exhausted then, resumed now), keeps what it spent.
    SELECT * INTO v_latest FROM docket.budget_reservations b
    WHERE (b.run_id = p_run OR b.job_id = p_job) AND b.period_start < v_start
    ORDER BY b.period_start DESC LIMIT 1;
    IF FOUND THEN
        SELECT coalesce(sum(b.amount), 0) INTO v_before FROM docket.budget_reservations b
        WHERE (b.run_id = p_run OR b.job_id = p_job) AND b.period_start < v_latest.period_start;
        UPDATE docket.budget_reservations SET amount = greatest(least(amount, p_spent - v_before), 0) WHERE id = v_latest.id;
    END IF;
    SELECT coalesce(sum(b.amount), 0) INTO v_before FROM docket.budget_reservations b
    WHERE (b.run_id = p_run OR b.job_id = p_job) AND b.period_start <> v_start;
    v_here := greatest(p_spent - v_before, 0) + p_outstanding;
    SELECT coalesce(sum(b.amount), 0) INTO v_held FROM docket.budget_reservations b
    WHERE b.project = p_project AND b.currency = p_currency AND b.period_start = v_start
      AND NOT coalesce(b.run_id = p_run OR b.job_id = p_job, false);
    IF v_held + v_here > q.amount THEN
        RAISE EXCEPTION '% of project %: % % more would carry the period from % past its quota: % of % reserved',
            p_what, p_project, p_outstanding, p_currency, v_start, v_held, q.amount
            USING ERRCODE = 'DK009';
    END IF;
    IF p_run IS NOT NULL THEN
        INSERT INTO docket.budget_reservations (run_id, project, currency, period_start, amount)
        VALUES (p_run, p_project, p_currency, v_start, v_here)
        ON CONFLICT (run_id, period_start) DO UPDATE SET amount = EXCLUDED.amount;
    ELSE
        INSERT INTO docket.budget_reservations (job_id, project, currency, period_start, amount)
        VALUES (p_job, p_project, p_currency, v_start, v_here)
        ON CONFLICT (job_id, period_start) DO UPDATE SET amount = EXCLUDED.amount;
    END IF;
END
$$;

-- budget_settle_for shrinks the latest reservation of run p_run or job
-- p_job (one of the two) to what it spent, p_spent in all, less what its
-- earlier reservations hold: it spends no more until admitted again.
CREATE OR REPLACE FUNCTION docket.budget_settle_for(p_run bigint, p_job bigint, p_spent bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_latest docket.budget_reservations;
    v_before bigint;
BEGIN
    SELECT * INTO v_latest FROM docket.budget_reservations b
    WHERE (b.run_id = p_run OR b.job_id = p_job) ORDER BY b.period_start DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT coalesce(sum(b.amount), 0) INTO v_before FROM docket.budget_reservations b
    WHERE (b.run_id = p_run OR b.job_id = p_job) AND b.id <> v_latest.id;
    UPDATE docket.budget_reservations SET amount = greatest(p_spent - v_before, 0) WHERE id = v_latest.id;
END
$$;

-- The hooks plans left for budgets ----------------------------------------------------------

-- runs_settle_reservations shrinks a run's reservation to what it spent
-- once it ended.
CREATE OR REPLACE FUNCTION docket.runs_settle_reservations() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.budget_settle_for(NEW.id, NULL, NEW.spent_money);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER runs_settle_reservations
    AFTER UPDATE OF status ON docket.runs
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'compensated', 'failed') AND NEW.max_money IS NOT NULL)
    EXECUTE FUNCTION docket.runs_settle_reservations();

-- budget_reserve reserves run r's worst case in its project's quota for
-- r.currency, in the period p_now falls in (budget_reserve_for: what it
-- spent, and its worst case less that, more). A run resumed in a later
-- period than it was admitted in reserves there; what it spent stays where
-- it was reserved. Refuses (DK009) a reservation the quota cannot take.
CREATE OR REPLACE FUNCTION docket.budget_reserve(r docket.runs, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_worst bigint := docket.run_worst_case(r);
BEGIN
    PERFORM docket.budget_reserve_for(r.project, r.currency, r.id, NULL, p_now, r.spent_money,
        greatest(v_worst - r.spent_money, 0),
        format('run %s: its worst case of %s %s (a ceiling of %s and %s a call in flight)',
               r.id, v_worst, r.currency, r.max_money, coalesce(r.max_call, 0)));
END
$$;

-- The API ----------------------------------------------------------------------------------

-- run_resume raises the ceilings of exhausted run p_run (NULL: keep) --
-- steps, effects, money, parallel, and the wall clock and refusal ceilings
-- (p_max_duration, p_max_refusals) -- and resumes it, on behalf of p_actor (plan.run and budget.manage) at p_now:
-- the raise is recorded (from, to, by whom), the recorded refusal is
-- evaluated again (a run still over a ceiling is exhausted again, and says
-- so), its worst case is reserved again in the quota. Refuses: a run that
-- is not exhausted (DK014: one that compensated cannot resume); a lowered
-- ceiling (DK010); a quota the raise would exceed (DK009); a run the actor
-- may not resume (P0002).
DROP FUNCTION IF EXISTS docket.run_resume(bigint, integer, bigint, bigint, integer, text, timestamptz);
CREATE OR REPLACE FUNCTION docket.run_resume(p_run bigint, p_max_steps integer, p_max_effects bigint, p_max_money bigint,
                                  p_max_parallel integer, p_actor text, p_now timestamptz,
                                  p_max_duration interval DEFAULT NULL, p_max_refusals integer DEFAULT NULL)
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
    IF p_max_steps < r.max_steps OR p_max_effects < r.max_effects OR p_max_money < r.max_money OR p_max_parallel < r.max_parallel
       OR p_max_duration < r.max_duration OR p_max_refusals < r.max_refusals THEN
        RAISE EXCEPTION 'run %: a resume raises ceilings, never lowers them', r.id USING ERRCODE = 'DK010';
    END IF;
    was := r;
    UPDATE docket.runs
    SET max_steps = coalesce(p_max_steps, max_steps), max_effects = coalesce(p_max_effects, max_effects),
        max_money = coalesce(p_max_money, max_money), max_parallel = coalesce(p_max_parallel, max_parallel),
        max_duration = coalesce(p_max_duration, max_duration), max_refusals = coalesce(p_max_refusals, max_refusals),
        status = 'running', updated_at = greatest(updated_at, p_now)
    WHERE id = r.id
    RETURNING * INTO r;
    INSERT INTO docket.run_budget_events (run_id, what, detail, actor, at)
    VALUES (r.id, 'raised', jsonb_build_object(
        'refusal', was.exhausted,
        'from', jsonb_build_object('steps', was.max_steps, 'effects', was.max_effects, 'money', was.max_money, 'parallel', was.max_parallel,
                                   'duration', was.max_duration, 'refusals', was.max_refusals),
        'to', jsonb_build_object('steps', r.max_steps, 'effects', r.max_effects, 'money', r.max_money, 'parallel', r.max_parallel,
                                 'duration', r.max_duration, 'refusals', r.max_refusals)),
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
-- budget.manage or plan.run; a reservation with its run or job, and a
-- run's budget events with its run.
CREATE POLICY budget_quotas_visible_to_budget_holders ON docket.budget_quotas FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('budget.manage', 'plan.run'))::text[]));

CREATE POLICY budget_reservations_visible_with_their_owner ON docket.budget_reservations FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.runs r WHERE r.id = run_id) OR EXISTS (SELECT 1 FROM docket.jobs j WHERE j.id = job_id));

CREATE POLICY run_budget_events_visible_with_their_run ON docket.run_budget_events FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.runs r WHERE r.id = run_id));
