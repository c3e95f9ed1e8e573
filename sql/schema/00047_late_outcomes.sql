-- Late outcomes: when a job became uncertain only because its lease expired
-- (the sweep's move, no claim since), the holder of that lease may still
-- record the outcome it holds, within a window after the sweep
-- (docket.job_late_outcome). A late failure on the job's last attempt makes
-- it dead, a move the machine did not have. The window is a setting.

-- +goose Up
SET LOCAL docket.migrating = 'on';
INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning) VALUES
    ('job', 'uncertain', 'dead', 'a retryable failure on its last attempt, recorded late by the holder of the lease that expired');
INSERT INTO docket.settings (name, value, meaning) VALUES
    ('late_outcome_window', '1 hour',
     'how long after the sweep moved a job to uncertain, its lease expired, the lease''s holder may still record the outcome it holds (docket.job_late_outcome); 0 to 24 hours');

-- +goose Down
SET LOCAL docket.migrating = 'on';
DELETE FROM docket.settings WHERE name = 'late_outcome_window';
DELETE FROM docket.machine_transitions WHERE machine = 'job' AND from_state = 'uncertain' AND to_state = 'dead';
