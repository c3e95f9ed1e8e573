-- A run's terms -- its input, replan limit and ceilings -- are written at
-- its start (the ceilings again by a budget's raise) and never by the
-- writes that move it. As table CHECKs, Postgres read their stored text
-- and planned them again in every statement that wrote a run, its counters
-- included: eleven of the table's 22, about a tenth of a start's time. The
-- trigger runs_terms (sql/definitions/plans.sql) holds the same rules, with
-- the same SQLSTATE and constraint names, at every INSERT and at every
-- UPDATE that writes one of those columns.

-- +goose Up

SET LOCAL docket.migrating = 'on';

ALTER TABLE docket.runs
    DROP CONSTRAINT runs_input_bounded, DROP CONSTRAINT runs_replan_limit_range, DROP CONSTRAINT runs_money_has_currency,
    DROP CONSTRAINT runs_max_steps_range, DROP CONSTRAINT runs_max_effects_range, DROP CONSTRAINT runs_max_money_range,
    DROP CONSTRAINT runs_currency_valid, DROP CONSTRAINT runs_max_call_range, DROP CONSTRAINT runs_max_parallel_range,
    DROP CONSTRAINT runs_max_duration_range, DROP CONSTRAINT runs_max_refusals_range;

-- +goose Down
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.runs
    ADD CONSTRAINT runs_input_bounded CHECK (docket.json_size(input) <= 65536),
    ADD CONSTRAINT runs_replan_limit_range CHECK (replan_limit BETWEEN 0 AND 100),
    ADD CONSTRAINT runs_money_has_currency CHECK ((max_money IS NULL) = (currency IS NULL)),
    ADD CONSTRAINT runs_max_steps_range CHECK (max_steps BETWEEN 0 AND 1000000),
    ADD CONSTRAINT runs_max_effects_range CHECK (max_effects >= 0),
    ADD CONSTRAINT runs_max_money_range CHECK (max_money >= 0),
    ADD CONSTRAINT runs_currency_valid CHECK (currency ~ '^[A-Z]{3}$'),
    ADD CONSTRAINT runs_max_call_range CHECK (max_call >= 0),
    ADD CONSTRAINT runs_max_parallel_range CHECK (max_parallel BETWEEN 1 AND 10000),
    ADD CONSTRAINT runs_max_duration_range CHECK (max_duration > interval '0'),
    ADD CONSTRAINT runs_max_refusals_range CHECK (max_refusals BETWEEN 1 AND 1000000);
