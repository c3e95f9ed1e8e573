-- Run ceilings: effects counted when a step is admitted (a slot each), a
-- wall-clock ceiling read from the run's own journal, a ceiling on policy
-- refusals, trust labels on step results, and per-item ceilings and an
-- exhausted count for batches. Their rules are sql/definitions/plans.sql's
-- and batches.sql's.

-- +goose Up

SET LOCAL docket.migrating = 'on';

-- runs is an argument type of functions: columns with a default are added
-- with a constant one (which fills the rows there are without rewriting the
-- table), then made NOT NULL.
ALTER TABLE docket.runs
    -- The longest the run may go on admitting steps, measured between the
    -- extremes of the instants it read at its step boundaries.
    ADD COLUMN max_duration interval CONSTRAINT runs_max_duration_range CHECK (max_duration > interval '0'),
    -- How many steps the policy may refuse before the run is exhausted.
    ADD COLUMN max_refusals integer CONSTRAINT runs_max_refusals_range CHECK (max_refusals BETWEEN 1 AND 1000000),
    ADD COLUMN refusals integer DEFAULT 0,
    -- The earliest and latest instants the run read (only while it has a
    -- wall-clock ceiling; each reading is a clock row of run_budget_events).
    ADD COLUMN clock_first timestamptz,
    ADD COLUMN clock_last timestamptz;
ALTER TABLE docket.runs ALTER COLUMN refusals SET NOT NULL;
ALTER TABLE docket.runs
    ADD CONSTRAINT runs_refusals_nonnegative CHECK (refusals >= 0),
    ADD CONSTRAINT runs_clock_read_whole CHECK ((clock_first IS NULL) = (clock_last IS NULL) AND clock_first <= clock_last);
COMMENT ON COLUMN docket.runs.refusals IS 'How many of its steps the policy refused (run_steps in state refused).';

ALTER TABLE docket.run_steps
    -- It took one of the run's effect slots when it was admitted.
    ADD COLUMN effect_slot boolean DEFAULT false,
    -- Its result's trust label, once it has a result: false when the step
    -- labelled it untrusted or its input was untrusted (NULL: as its input).
    ADD COLUMN result_trusted boolean;
ALTER TABLE docket.run_steps ALTER COLUMN effect_slot SET NOT NULL;

ALTER TABLE docket.run_budget_events DROP CONSTRAINT run_budget_events_what_known,
    ADD CONSTRAINT run_budget_events_what_known CHECK (what IN ('exhausted', 'raised', 'clock'));

ALTER TABLE docket.batches
    -- Items whose run is exhausted: in flight, and stopped at a ceiling.
    ADD COLUMN exhausted bigint DEFAULT 0,
    -- The ceilings each item's run gets (NULL: none), as run_start takes them.
    ADD COLUMN item_max_steps integer CONSTRAINT batches_item_max_steps_range CHECK (item_max_steps BETWEEN 0 AND 1000000),
    ADD COLUMN item_max_effects bigint CONSTRAINT batches_item_max_effects_range CHECK (item_max_effects >= 0),
    ADD COLUMN item_max_money bigint CONSTRAINT batches_item_max_money_range CHECK (item_max_money >= 0),
    ADD COLUMN item_currency text CONSTRAINT batches_item_currency_valid CHECK (item_currency ~ '^[A-Z]{3}$'),
    ADD COLUMN item_max_call bigint CONSTRAINT batches_item_max_call_range CHECK (item_max_call >= 0),
    ADD COLUMN item_max_parallel integer CONSTRAINT batches_item_max_parallel_range CHECK (item_max_parallel BETWEEN 1 AND 10000),
    ADD COLUMN item_max_duration interval CONSTRAINT batches_item_max_duration_range CHECK (item_max_duration > interval '0'),
    ADD COLUMN item_max_refusals integer CONSTRAINT batches_item_max_refusals_range CHECK (item_max_refusals BETWEEN 1 AND 1000000);
ALTER TABLE docket.batches ALTER COLUMN exhausted SET NOT NULL;
ALTER TABLE docket.batches
    ADD CONSTRAINT batches_exhausted_in_flight CHECK (exhausted BETWEEN 0 AND in_flight),
    ADD CONSTRAINT batches_item_money_has_currency CHECK ((item_max_money IS NULL) = (item_currency IS NULL));
-- The items stopped at a ceiling when this migration runs.
UPDATE docket.batches b SET exhausted = x.n
FROM (SELECT i.batch_id, count(*) AS n FROM docket.batch_items i JOIN docket.runs r ON r.id = i.run_id
      WHERE i.status = 'reserved' AND r.status = 'exhausted' GROUP BY i.batch_id) x
WHERE x.batch_id = b.id;

-- +goose Down
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.batches
    DROP CONSTRAINT batches_item_money_has_currency, DROP CONSTRAINT batches_exhausted_in_flight,
    DROP COLUMN item_max_refusals, DROP COLUMN item_max_duration, DROP COLUMN item_max_parallel, DROP COLUMN item_max_call,
    DROP COLUMN item_currency, DROP COLUMN item_max_money, DROP COLUMN item_max_effects, DROP COLUMN item_max_steps,
    DROP COLUMN exhausted;
-- The budget events are append-only: clock readings taken stay, and no new
-- one is taken.
ALTER TABLE docket.run_budget_events DROP CONSTRAINT run_budget_events_what_known,
    ADD CONSTRAINT run_budget_events_what_known CHECK (what IN ('exhausted', 'raised')) NOT VALID;
ALTER TABLE docket.run_steps DROP COLUMN result_trusted, DROP COLUMN effect_slot;
ALTER TABLE docket.runs
    DROP CONSTRAINT runs_clock_read_whole, DROP CONSTRAINT runs_refusals_nonnegative,
    DROP COLUMN clock_last, DROP COLUMN clock_first, DROP COLUMN refusals, DROP COLUMN max_refusals, DROP COLUMN max_duration;
