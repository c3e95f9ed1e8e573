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

-- A job held across the upgrade whose lease was renewed before it has an
-- expiry other than its claim's event recorded, and no count of it: it is
-- given one renewal, at its last update (a renewal's instant, or later), so
-- its history still verifies. How many renewals there were is not known.
UPDATE docket.jobs j
SET renewals = 1, renewed_at = j.updated_at
FROM (SELECT DISTINCT ON (e.job_id) e.job_id, e.lease_until
      FROM docket.job_events e JOIN docket.jobs h ON h.id = e.job_id AND h.state = 'claimed'
      ORDER BY e.job_id, e.seq DESC) last
WHERE j.id = last.job_id AND j.state = 'claimed' AND j.lease_expires_at IS DISTINCT FROM last.lease_until;

-- +goose Down
SET LOCAL docket.migrating = 'on';
ALTER TABLE docket.jobs DROP CONSTRAINT jobs_renewals_counted;
ALTER TABLE docket.jobs DROP COLUMN renewed_at, DROP COLUMN renewals;
