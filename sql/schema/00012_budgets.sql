-- +goose Up
-- Budgets: ceilings per run (steps admitted, effects, money in integer
-- minor units of one currency, steps in flight), exhaustion that is not
-- failure, resuming after a raise, and a per-project spend quota per period
-- that reserves each run's worst case when it is admitted.
SET LOCAL docket.migrating = 'on';

INSERT INTO docket.capabilities (name, description) VALUES
    ('budget.manage', 'set the project''s spend quotas, and raise the ceilings of its runs (with plan.run)');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning) VALUES
    ('run', 'exhausted', false, false, 'a ceiling was reached: it starts no step until raised and resumed; completed work stands');
INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'run', f, t, NULL FROM (VALUES ('running', 'exhausted'), ('exhausted', 'running'), ('exhausted', 'unwinding'),
                                      ('exhausted', 'succeeded')) v (f, t);

ALTER TABLE docket.runs
    ADD COLUMN max_steps     integer CONSTRAINT runs_max_steps_range CHECK (max_steps BETWEEN 0 AND 1000000),
    ADD COLUMN max_effects   bigint CONSTRAINT runs_max_effects_range CHECK (max_effects >= 0),
    ADD COLUMN max_money     bigint CONSTRAINT runs_max_money_range CHECK (max_money >= 0),
    ADD COLUMN currency      text CONSTRAINT runs_currency_valid CHECK (currency ~ '^[A-Z]{3}$'),
    -- The most one step's operation may cost: what a step in flight may
    -- still spend, for admission and for the quota's worst case.
    ADD COLUMN max_call      bigint CONSTRAINT runs_max_call_range CHECK (max_call >= 0),
    ADD COLUMN max_parallel  integer CONSTRAINT runs_max_parallel_range CHECK (max_parallel BETWEEN 1 AND 10000),
    ADD COLUMN spent_effects bigint NOT NULL DEFAULT 0 CONSTRAINT runs_spent_effects_nonnegative CHECK (spent_effects >= 0),
    ADD COLUMN spent_money   bigint NOT NULL DEFAULT 0 CONSTRAINT runs_spent_money_nonnegative CHECK (spent_money >= 0),
    -- Why it is exhausted (NULL while not).
    ADD COLUMN exhausted     text CONSTRAINT runs_exhausted_bounded CHECK (length(exhausted) <= 500),
    ADD CONSTRAINT runs_money_has_currency CHECK ((max_money IS NULL) = (currency IS NULL)),
    ADD CONSTRAINT runs_exhausted_iff CHECK ((status = 'exhausted') = (exhausted IS NOT NULL));

ALTER TABLE docket.run_steps
    ADD COLUMN spent_effects bigint CONSTRAINT run_steps_spent_effects_nonnegative CHECK (spent_effects >= 0),
    ADD COLUMN spent_money   bigint CONSTRAINT run_steps_spent_money_nonnegative CHECK (spent_money >= 0);

-- What happened to a run's budget: exhausted (which ceiling), raised (from,
-- to, by whom), resumed.
CREATE TABLE docket.run_budget_events (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id bigint NOT NULL REFERENCES docket.runs (id),
    what   text NOT NULL CONSTRAINT run_budget_events_what_known CHECK (what IN ('exhausted', 'raised')),
    detail jsonb NOT NULL CONSTRAINT run_budget_events_detail_bounded CHECK (docket.json_size(detail) <= 4096),
    actor  text NOT NULL,
    at     timestamptz NOT NULL
);
CREATE INDEX run_budget_events_run_idx ON docket.run_budget_events (run_id, id);
CREATE TRIGGER run_budget_events_append_only BEFORE UPDATE OR DELETE ON docket.run_budget_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- Quotas: at most amount minor units of currency per period of the
-- project, periods counted from anchor. Each run with a money ceiling
-- reserves its worst case in the period it is admitted in.
CREATE TABLE docket.budget_quotas (
    project    text NOT NULL REFERENCES docket.projects (name),
    currency   text NOT NULL CONSTRAINT budget_quotas_currency_valid CHECK (currency ~ '^[A-Z]{3}$'),
    period     interval NOT NULL CONSTRAINT budget_quotas_period_range CHECK (period BETWEEN interval '1 minute' AND interval '400 days'),
    anchor     timestamptz NOT NULL,
    amount     bigint NOT NULL CONSTRAINT budget_quotas_amount_nonnegative CHECK (amount >= 0),
    updated_by docket.principal NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (project, currency)
);

CREATE TABLE docket.budget_reservations (
    run_id       bigint PRIMARY KEY REFERENCES docket.runs (id),
    project      text NOT NULL,
    currency     text NOT NULL,
    period_start timestamptz NOT NULL,
    -- The run's worst case while it runs; what it spent once it ended.
    amount       bigint NOT NULL CONSTRAINT budget_reservations_amount_nonnegative CHECK (amount >= 0)
);
CREATE INDEX budget_reservations_period_idx ON docket.budget_reservations (project, currency, period_start);

-- run_worst_case is what run r may spend at most: its money ceiling, and
-- one call for every step that may be in flight when it is reached.
CREATE FUNCTION docket.run_worst_case(r docket.runs) RETURNS bigint
LANGUAGE sql STABLE
RETURN r.max_money + coalesce(r.max_call, 0) * coalesce(r.max_parallel,
    (SELECT p.steps FROM docket.plans p WHERE p.id = r.plan_id));

-- The hooks plans left for budgets ----------------------------------------------------------

-- run_gate: a run may admit a step while no ceiling is reached and fewer
-- than max_parallel steps are in flight. A ceiling reached exhausts the run
-- (recorded, with which); max_parallel only holds admission back.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.run_gate(r docket.runs) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_in_flight integer;
    v_why text;
    v_now timestamptz := docket.context_now();
BEGIN
    IF r.max_steps IS NULL AND r.max_effects IS NULL AND r.max_money IS NULL AND r.max_parallel IS NULL THEN
        RETURN true;
    END IF;
    SELECT count(*) INTO v_in_flight FROM docket.run_steps WHERE run_id = r.id AND state = 'admitted';
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
    END;
    IF v_why IS NULL THEN
        RETURN true;
    END IF;
    UPDATE docket.runs SET status = 'exhausted', exhausted = v_why, updated_at = greatest(updated_at, v_now) WHERE id = r.id;
    INSERT INTO docket.run_budget_events (run_id, what, detail, actor, at)
    VALUES (r.id, 'exhausted', jsonb_build_object('why', v_why, 'spent_money', r.spent_money, 'spent_effects', r.spent_effects,
                                                  'admitted', r.admitted), docket.context_actor(), v_now);
    RETURN false;
END
$$;
-- +goose StatementEnd

-- run_after_apply: a run that holds steps back for max_parallel admits
-- the ready ones as slots free.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.run_after_apply(p_run bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT max_parallel IS NOT NULL AND status = 'running' FROM docket.runs WHERE id = p_run) THEN
        PERFORM docket.run_admit_ready(p_run, NULL);
    END IF;
END
$$;
-- +goose StatementEnd

-- run_step_spent records what a step's job reported it spent -- the
-- members effects and money of the member spent of its result -- on the
-- step and in its run's tally: what was recorded, never asked again.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.run_step_spent(p_run bigint, p_step text, p_result jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_effects bigint;
    v_money bigint;
BEGIN
    IF jsonb_typeof(p_result) <> 'object' OR jsonb_typeof(p_result -> 'spent') <> 'object' THEN
        RETURN;
    END IF;
    v_effects := greatest(coalesce((p_result -> 'spent' ->> 'effects')::bigint, 0), 0);
    v_money := greatest(coalesce((p_result -> 'spent' ->> 'money')::bigint, 0), 0);
    UPDATE docket.run_steps SET spent_effects = v_effects, spent_money = v_money WHERE run_id = p_run AND step_id = p_step;
    UPDATE docket.runs SET spent_effects = spent_effects + v_effects, spent_money = spent_money + v_money WHERE id = p_run;
EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range THEN
    RETURN; -- a malformed report is no spending: the result is recorded as it is
END
$$;
-- +goose StatementEnd

-- runs_settle_reservations shrinks a run's reservation to what it spent
-- once it ended.
-- +goose StatementBegin
CREATE FUNCTION docket.runs_settle_reservations() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE docket.budget_reservations SET amount = NEW.spent_money WHERE run_id = NEW.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER runs_settle_reservations
    AFTER UPDATE OF status ON docket.runs
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'compensated', 'failed') AND NEW.max_money IS NOT NULL)
    EXECUTE FUNCTION docket.runs_settle_reservations();

-- budget_reserve reserves run r's worst case in its project's quota for
-- r.currency, in the period p_now falls in, under the quota row's lock:
-- concurrent admissions cannot together carry the period past it. No quota:
-- nothing to reserve. Refuses (DK009) a reservation the quota cannot take.
-- +goose StatementBegin
CREATE FUNCTION docket.budget_reserve(r docket.runs, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    q docket.budget_quotas;
    v_start timestamptz;
    v_held bigint;
    v_worst bigint := docket.run_worst_case(r);
BEGIN
    SELECT * INTO q FROM docket.budget_quotas WHERE project = r.project AND currency = r.currency FOR UPDATE;
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
-- +goose StatementEnd

-- The API ----------------------------------------------------------------------------------

-- run_start with a budget: as run_start, with ceilings (NULL: none) set
-- before its first steps are admitted, and its worst case reserved in the
-- project's quota. Refuses, writing nothing, as run_start; ceilings out of
-- range, money without a currency (DK010); a quota it would exceed (DK009).
-- +goose StatementBegin
CREATE FUNCTION docket.run_start(p_project text, p_digest text, p_canonical text, p_input jsonb, p_input_trusted boolean,
                                 p_case_id bigint, p_replan_limit integer,
                                 p_max_steps integer, p_max_effects bigint, p_max_money bigint, p_currency text,
                                 p_max_call bigint, p_max_parallel integer,
                                 p_actor text, p_now timestamptz)
RETURNS docket.runs
LANGUAGE plpgsql AS $$
DECLARE
    v_plan bigint;
    r docket.runs;
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
        AND coalesce(p_max_money >= 0, true) AND coalesce(p_max_call >= 0, true) AND coalesce(p_max_parallel BETWEEN 1 AND 10000, true),
        'ceilings', concat_ws(',', p_max_steps, p_max_effects, p_max_money, p_max_call, p_max_parallel),
        'steps 0..1000000, effects, money and a call 0 or more, in flight 1..10000');
    IF nullif(p_case_id, 0) IS NOT NULL THEN
        IF NOT EXISTS (SELECT 1 FROM docket.cases WHERE id = p_case_id AND project = p_project) THEN
            RAISE EXCEPTION 'case % does not exist in project %', p_case_id, p_project USING ERRCODE = 'P0002';
        END IF;
        IF (SELECT status FROM docket.cases WHERE id = p_case_id FOR SHARE) <> 'open' THEN
            RAISE EXCEPTION 'case % is closed: it cannot start a run', p_case_id USING ERRCODE = 'DK005';
        END IF;
    END IF;
    v_plan := docket.plan_store(p_project, p_digest, p_canonical, p_actor, p_now);
    INSERT INTO docket.runs (project, plan_id, case_id, input, input_trusted, replan_limit, max_steps, max_effects, max_money,
                             currency, max_call, max_parallel, created_by, created_at, updated_at)
    VALUES (p_project, v_plan, nullif(p_case_id, 0), p_input, p_input_trusted, p_replan_limit, p_max_steps, p_max_effects,
            p_max_money, p_currency, p_max_call, p_max_parallel, p_actor, p_now, p_now)
    RETURNING * INTO r;
    IF r.max_money IS NOT NULL THEN
        PERFORM docket.budget_reserve(r, p_now);
    END IF;
    INSERT INTO docket.run_versions (run_id, version, plan_id, actor, at) VALUES (r.id, 1, v_plan, p_actor, p_now);
    PERFORM docket.run_admit_ready(r.id, NULL);
    PERFORM docket.run_apply(r.id);
    SELECT * INTO r FROM docket.runs WHERE id = r.id;
    RETURN r;
END
$$;
-- +goose StatementEnd

-- run_resume raises the ceilings of exhausted run p_run (NULL: keep) and
-- resumes it, on behalf of p_actor (plan.run and budget.manage) at p_now:
-- the raise is recorded (from, to, by whom), the recorded refusal is
-- evaluated again (a run still over a ceiling is exhausted again, and says
-- so), its worst case is reserved again in the quota. Refuses: a run that
-- is not exhausted (DK014: one that compensated cannot resume); a lowered
-- ceiling (DK010); a quota the raise would exceed (DK009); a run the actor
-- may not resume (P0002).
-- +goose StatementBegin
CREATE FUNCTION docket.run_resume(p_run bigint, p_max_steps integer, p_max_effects bigint, p_max_money bigint,
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
-- +goose StatementEnd

-- budget_quota_set sets project p_project's quota for p_currency: p_amount
-- minor units per p_period counted from p_anchor, on behalf of p_actor
-- (budget.manage) at p_now.
-- +goose StatementBegin
CREATE FUNCTION docket.budget_quota_set(p_project text, p_currency text, p_period interval, p_anchor timestamptz, p_amount bigint,
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
-- +goose StatementEnd

-- runs_leave_exhausted clears why a run was exhausted as it leaves that
-- state, by any route (a resume, a cancel, its last steps succeeding).
-- +goose StatementBegin
CREATE FUNCTION docket.runs_leave_exhausted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.exhausted := NULL;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER runs_leave_exhausted
    BEFORE UPDATE OF status ON docket.runs
    FOR EACH ROW WHEN (OLD.status = 'exhausted' AND NEW.status <> 'exhausted')
    EXECUTE FUNCTION docket.runs_leave_exhausted();


INSERT INTO docket.api_functions (name, role) VALUES ('run_resume', 'app'), ('budget_quota_set', 'app');

SELECT docket.apply_privileges();

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TRIGGER runs_leave_exhausted ON docket.runs;
DROP FUNCTION docket.runs_leave_exhausted();
DELETE FROM docket.api_functions WHERE name IN ('run_resume', 'budget_quota_set');
DROP FUNCTION docket.budget_quota_set(text, text, interval, timestamptz, bigint, text, timestamptz);
DROP FUNCTION docket.run_resume(bigint, integer, bigint, bigint, integer, text, timestamptz);
DROP FUNCTION docket.run_start(text, text, text, jsonb, boolean, bigint, integer, integer, bigint, bigint, text, bigint, integer, text, timestamptz);
DROP FUNCTION docket.budget_reserve(docket.runs, timestamptz);
DROP TRIGGER runs_settle_reservations ON docket.runs;
DROP FUNCTION docket.runs_settle_reservations();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.run_gate(r docket.runs) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RETURN true;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.run_after_apply(p_run bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.run_step_spent(p_run bigint, p_step text, p_result jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
END
$$;
-- +goose StatementEnd
DROP FUNCTION docket.run_worst_case(docket.runs);
DROP TABLE docket.budget_reservations, docket.budget_quotas, docket.run_budget_events;
ALTER TABLE docket.run_steps DROP COLUMN spent_effects, DROP COLUMN spent_money;
ALTER TABLE docket.runs DROP CONSTRAINT runs_exhausted_iff, DROP CONSTRAINT runs_money_has_currency,
    DROP COLUMN max_steps, DROP COLUMN max_effects, DROP COLUMN max_money, DROP COLUMN currency, DROP COLUMN max_call,
    DROP COLUMN max_parallel, DROP COLUMN spent_effects, DROP COLUMN spent_money, DROP COLUMN exhausted;
DELETE FROM docket.machine_transitions WHERE machine = 'run' AND 'exhausted' IN (from_state, to_state);
DELETE FROM docket.machine_states WHERE machine = 'run' AND state = 'exhausted';
DELETE FROM docket.capabilities c WHERE c.name = 'budget.manage' AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
