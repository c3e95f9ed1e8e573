-- Schedule bounds: every schedule declares how it ends (an end instant or an
-- occurrence count), or says in unbounded_reason why it runs forever; and a
-- schedule the sweep cannot plan is broken, with the reason, instead of
-- holding up the sweep. Their rules are sql/definitions/schedules.sql's.

-- +goose Up

SET LOCAL docket.migrating = 'on';

-- Running forever is a decision signed in advance: the reason is kept on the
-- row (and in the created event). A schedule has a bound or a reason, never
-- both and never neither.
ALTER TABLE docket.schedules ADD COLUMN unbounded_reason text;
COMMENT ON COLUMN docket.schedules.unbounded_reason IS
    'Why the schedule has neither an end nor an occurrence count: set exactly when both are NULL.';

-- Schedules made before bounds were required run on as they were, their
-- reason saying so; an update gives them a bound or a reason of their own.
UPDATE docket.schedules SET unbounded_reason = 'before bounds were required'
WHERE ends_at IS NULL AND max_occurrences IS NULL;

ALTER TABLE docket.schedules
    ADD CONSTRAINT schedules_unbounded_reason_valid
        CHECK (length(unbounded_reason) BETWEEN 1 AND 500 AND btrim(unbounded_reason) <> ''
               AND unbounded_reason !~ '[[:cntrl:]]'),
    ADD CONSTRAINT schedules_bounded_or_reasoned
        CHECK ((unbounded_reason IS NULL) = (ends_at IS NOT NULL OR max_occurrences IS NOT NULL));

-- Broken: the sweep could not plan the schedule (or the database refused its
-- plan); it is passed over until an update or a resume mends it.
ALTER TABLE docket.schedules ADD COLUMN broken_reason text, ADD COLUMN broken_at timestamptz;
COMMENT ON COLUMN docket.schedules.broken_reason IS
    'Why the sweep could not plan the schedule: set exactly when it is broken.';
COMMENT ON COLUMN docket.schedules.broken_at IS
    'When the sweep found the schedule broken: set exactly when it is broken.';

ALTER TABLE docket.schedules
    ADD CONSTRAINT schedules_broken_reason_bounded CHECK (length(broken_reason) BETWEEN 1 AND 500),
    ADD CONSTRAINT schedules_broken_iff_reason
        CHECK ((status = 'broken') = (broken_reason IS NOT NULL) AND (status = 'broken') = (broken_at IS NOT NULL));

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning) VALUES
    ('schedule', 'broken', false, false,
     'the sweep could not plan it (broken_reason says why); nothing is materialized until an update or a resume mends it');

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning) VALUES
    ('schedule', 'active', 'broken', 'the sweep could not plan it'),
    ('schedule', 'broken', 'active', 'mended: updated or resumed'),
    ('schedule', 'broken', 'paused', NULL),
    ('schedule', 'broken', 'finished', NULL);

-- +goose Down
SET LOCAL docket.migrating = 'on';
UPDATE docket.schedules SET status = 'paused', broken_reason = NULL, broken_at = NULL WHERE status = 'broken';
DELETE FROM docket.machine_transitions WHERE machine = 'schedule' AND 'broken' IN (from_state, to_state);
DELETE FROM docket.machine_states WHERE machine = 'schedule' AND state = 'broken';
ALTER TABLE docket.schedules DROP COLUMN broken_at, DROP COLUMN broken_reason, DROP COLUMN unbounded_reason;
