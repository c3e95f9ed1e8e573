-- Storage of run steps, and how an outcome holds its run. A step's row is
-- written when it is admitted and again when its outcome arrives (state,
-- result, trust label), a change to no indexed column. Rows are inserted
-- in ready order and packed into full pages, so without room left on its
-- page two of three such updates moved the row and wrote an entry in each
-- of the table's four indexes (measured with bench/: 948 of 3,000 updates
-- HOT). A fillfactor of 70 leaves the room a step's result needs for the
-- update to stay on its page (HOT).

-- +goose Up
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.run_steps SET (fillfactor = 70);
-- Under READ COMMITTED an outcome now holds its run by a lock (run_hold),
-- writing the row no more than its effects do.
COMMENT ON COLUMN docket.runs.guard_seq IS
    'Moved on by every job outcome of the run under REPEATABLE READ or SERIALIZABLE (under READ COMMITTED a lock orders them): two outcomes of one run never admit steps from one stale snapshot.';

-- +goose Down
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.run_steps RESET (fillfactor);
COMMENT ON COLUMN docket.runs.guard_seq IS
    'Moved on by every job outcome of the run: two outcomes of one run never admit steps from one stale snapshot.';
