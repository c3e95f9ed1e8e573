-- Room on a job's page for its next version. Migration 29 left docket.jobs
-- without a fillfactor: no update of a job is HOT (a claim and a completion
-- change state, which the partial indexes name), so room on its page seemed
-- only to cost heap. It also decides where the new version goes. On a full
-- page it goes to another one, and Postgres then locks the old version
-- while it finds room (a Heap/LOCK record) and logs the new one whole; on
-- the same page it does neither, and logs only the part of the row that
-- changed. Rows are inserted packed into full pages, so most claims and
-- completions moved their row. With 70 % of each page filled at insert,
-- a burn-down of 100,000 jobs (worker BenchmarkBurnDown) writes 1,414 -
-- 1,426 bytes of WAL a job against 1,532 - 1,534 (85 %: 1,476 - 1,479;
-- 50 %: 1,344 - 1,349, for two-fifths more heap again). Pages written before this
-- migration keep their rows until the prune frees them.

-- +goose Up
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.jobs SET (fillfactor = 70);

-- +goose Down
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.jobs RESET (fillfactor);
