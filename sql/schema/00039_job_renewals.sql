-- Job renewals: a lease renewal is recorded on the job row (how many times
-- the current attempt's lease was renewed, and the last renewal's instant)
-- rather than as an event of its own, so a long handler's heartbeats write
-- no history rows; the event that ends the attempt records them (its
-- detail and its outcome digest). Their rules are sql/definitions/jobs.sql's.

-- +goose Up

SET LOCAL docket.migrating = 'on';

-- jobs is an argument type of functions: the columns are added with a
-- constant default (which fills the rows there are without rewriting the
-- table), then made NOT NULL.
ALTER TABLE docket.jobs ADD COLUMN renewals integer DEFAULT 0, ADD COLUMN renewed_at timestamptz;
ALTER TABLE docket.jobs ALTER COLUMN renewals SET NOT NULL;
COMMENT ON COLUMN docket.jobs.renewals IS
    'How many times the lease of the current (or last) attempt was renewed: 0 at each claim.';
COMMENT ON COLUMN docket.jobs.renewed_at IS
    'The instant of the last renewal of the current (or last) attempt''s lease: set exactly when renewals > 0.';
ALTER TABLE docket.jobs
    ADD CONSTRAINT jobs_renewals_counted CHECK (renewals >= 0 AND (renewals = 0) = (renewed_at IS NULL));

-- +goose Down
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.jobs DROP CONSTRAINT jobs_renewals_counted;
ALTER TABLE docket.jobs DROP COLUMN renewed_at, DROP COLUMN renewals;
