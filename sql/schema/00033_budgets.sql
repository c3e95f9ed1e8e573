-- Budgets: ceilings per run, exhaustion that is not failure, and a
-- per-project spend quota per period. The budget columns of runs and their
-- steps, the budget events, quotas and reservations; the run machine's
-- exhausted state. Their rules are sql/definitions/budgets.sql's.

-- +goose Up

SET LOCAL docket.migrating = 'on';

-- Kept by a down migration while granted: an up finds them there.
INSERT INTO docket.capabilities (name, description) VALUES
    ('budget.manage', 'set the project''s spend quotas, and raise the ceilings of its runs (with plan.run)')
ON CONFLICT (name) DO NOTHING;

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

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.budget_reservations, docket.budget_quotas, docket.run_budget_events;
ALTER TABLE docket.run_steps DROP COLUMN spent_money, DROP COLUMN spent_effects;
ALTER TABLE docket.runs
    DROP CONSTRAINT runs_exhausted_iff, DROP CONSTRAINT runs_money_has_currency,
    DROP COLUMN exhausted, DROP COLUMN spent_money, DROP COLUMN spent_effects, DROP COLUMN max_parallel,
    DROP COLUMN max_call, DROP COLUMN currency, DROP COLUMN max_money, DROP COLUMN max_effects, DROP COLUMN max_steps;
DELETE FROM docket.machine_transitions WHERE machine = 'run' AND 'exhausted' IN (from_state, to_state);
DELETE FROM docket.machine_states WHERE machine = 'run' AND state = 'exhausted';
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name = 'budget.manage'
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
