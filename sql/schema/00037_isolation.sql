-- Isolation: the rows a cross-table rule writes so that no isolation level
-- lets it be skipped. A rule that reads other rows (a close reads the
-- case's obligations, a quota sums its reservations, a delivery looks for
-- waits) holds under READ COMMITTED by a lock, but under REPEATABLE READ a
-- lock does not refresh the snapshot: only a write to the row both sides of
-- the race depend on makes the later one fail (40001) instead of deciding on
-- what it no longer sees. These counters are those writes; nothing reads
-- their values. Their rules are in sql/definitions (cases, waits, tasks,
-- plans, budgets).

-- +goose Up

SET LOCAL docket.migrating = 'on';

-- cases and runs are argument types of functions: a column is added
-- nullable with a constant default (which fills the rows there are, without
-- rewriting the table), then made NOT NULL.
ALTER TABLE docket.cases ADD COLUMN guard_seq bigint DEFAULT 0;
ALTER TABLE docket.cases ALTER COLUMN guard_seq SET NOT NULL;
COMMENT ON COLUMN docket.cases.guard_seq IS
    'Moved on by every write a rule of this case depends on (an obligation, wait, timer, task, key or run registered on it): a concurrent close fails instead of missing it.';

ALTER TABLE docket.runs ADD COLUMN guard_seq bigint DEFAULT 0;
ALTER TABLE docket.runs ALTER COLUMN guard_seq SET NOT NULL;
COMMENT ON COLUMN docket.runs.guard_seq IS
    'Moved on by every job outcome of the run: two outcomes of one run never admit steps from one stale snapshot.';

ALTER TABLE docket.budget_quotas ADD COLUMN guard_seq bigint DEFAULT 0;
ALTER TABLE docket.budget_quotas ALTER COLUMN guard_seq SET NOT NULL;
COMMENT ON COLUMN docket.budget_quotas.guard_seq IS
    'Moved on by every reservation in the quota: two admissions never both sum the reservations of one stale snapshot.';

-- Deliveries and waits on one key meet in one of 4096 slots, chosen by a
-- hash of the project and the key; each writes (or makes) the slots of its
-- keys before it stores and looks. A bounded table: it never grows past
-- 4096 rows, whatever the keys.
CREATE TABLE docket.match_slots (
    slot      integer PRIMARY KEY CONSTRAINT match_slots_slot_range CHECK (slot BETWEEN 0 AND 4095),
    guard_seq bigint NOT NULL DEFAULT 0
);

COMMENT ON TABLE docket.match_slots IS
    'One row per hash slot of (project, key): a delivery and a wait on a common key both write its slot, so under any isolation level the later one sees the earlier or fails (40001).';

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.match_slots;
ALTER TABLE docket.budget_quotas DROP COLUMN guard_seq;
ALTER TABLE docket.runs DROP COLUMN guard_seq;
ALTER TABLE docket.cases DROP COLUMN guard_seq;
