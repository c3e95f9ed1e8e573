-- Batches: one frozen plan over many items. The batches and their items;
-- the batch and batch_item machines. Their rules are
-- sql/definitions/batches.sql's.

-- +goose Up

SET LOCAL docket.migrating = 'on';

-- Kept by a down migration while granted: an up finds them there.
INSERT INTO docket.capabilities (name, description) VALUES
    ('batch.run', 'open and resume batches in the project and admit their items (with plan.run and job.create), and read them')
ON CONFLICT (name) DO NOTHING;

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('batch', 'docket.batches.status', 'a batch: running until its source was read to its end and every item settled'),
    ('batch_item', 'docket.batch_items.status', 'an item of a batch: reserved with its run until the run ends');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'batch', * FROM (VALUES
    ('running', true, false, 'items are admitted or in flight, or the source was not read to its end'),
    ('completed', false, true, 'the source was read to its end and every item settled: see the counts')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
VALUES ('batch', 'running', 'completed', NULL);

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'batch_item', * FROM (VALUES
    ('reserved', true, false, 'its run is started and has not ended'),
    ('quarantined', true, false, 'refused at admission (its input): no run was started'),
    ('succeeded', false, true, 'its run succeeded'),
    ('failed', false, true, 'its run unwound (compensated) or failed')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'batch_item', f, t, NULL FROM (VALUES ('reserved', 'succeeded'), ('reserved', 'failed')) v (f, t);

CREATE TABLE docket.batches (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project     text NOT NULL REFERENCES docket.projects (name),
    -- The caller's name for the batch, unique in the project.
    name        text NOT NULL CONSTRAINT batches_name_valid CHECK (docket.valid_case_key_value(name)),
    -- The plan every item runs: the only witness to what the batch was opened as.
    plan_id     bigint NOT NULL REFERENCES docket.plans (id),
    status      text NOT NULL DEFAULT 'running',
    -- The greatest key admitted, and the cursor: the greatest key such
    -- that it and every key before it is settled (NULL: none yet).
    last_key    text COLLATE "C",
    cursor      text COLLATE "C",
    -- Whether the source was read to its end.
    source_done boolean NOT NULL DEFAULT false,
    -- The census, maintained as items are admitted and settle.
    items       bigint NOT NULL DEFAULT 0,
    in_flight   bigint NOT NULL DEFAULT 0,
    succeeded   bigint NOT NULL DEFAULT 0,
    failed      bigint NOT NULL DEFAULT 0,
    quarantined bigint NOT NULL DEFAULT 0,
    created_by  docket.principal NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    finished_at timestamptz,
    CONSTRAINT batches_project_name_key UNIQUE (project, name),
    CONSTRAINT batches_census CHECK (items = in_flight + succeeded + failed + quarantined AND in_flight >= 0
        AND succeeded >= 0 AND failed >= 0 AND quarantined >= 0),
    CONSTRAINT batches_completed CHECK ((status = 'completed') = (finished_at IS NOT NULL)
        AND (status <> 'completed' OR (source_done AND in_flight = 0)))
);

COMMENT ON TABLE docket.batches IS
    'Batches: one frozen plan over many items, the cursor (contiguous settled prefix) and the census counts. No succeeded status: a completed batch has its counts.';

CREATE TABLE docket.batch_items (
    batch_id  bigint NOT NULL REFERENCES docket.batches (id),
    key       text COLLATE "C" NOT NULL CONSTRAINT batch_items_key_valid CHECK (docket.valid_case_key_value(key)),
    status    text NOT NULL,
    -- The item's run, reserved when the item was admitted.
    run_id    bigint UNIQUE REFERENCES docket.runs (id),
    trusted   boolean NOT NULL,
    reason    text CONSTRAINT batch_items_reason_bounded CHECK (length(reason) <= 2000),
    admitted_at timestamptz NOT NULL,
    settled_at  timestamptz,
    PRIMARY KEY (batch_id, key),
    CONSTRAINT batch_items_run_iff_not_quarantined CHECK ((run_id IS NULL) = (status = 'quarantined'))
);

COMMENT ON TABLE docket.batch_items IS
    'The items of batches in byte order of their keys, each with the run reserved for it when it was admitted.';

-- Items nobody is finished with: what needs a person, oldest key first.
CREATE INDEX batch_items_attention_idx ON docket.batch_items (batch_id, key) WHERE status <> 'succeeded';

-- The reserved partial index keeps the first unsettled item one probe away.
CREATE INDEX batch_items_reserved_idx ON docket.batch_items (batch_id, key) WHERE status = 'reserved';

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.batch_items, docket.batches;
DELETE FROM docket.machine_transitions WHERE machine IN ('batch', 'batch_item');
DELETE FROM docket.machine_states WHERE machine IN ('batch', 'batch_item');
DELETE FROM docket.machines WHERE name IN ('batch', 'batch_item');
-- A capability still granted somewhere stays, with its grants.
DELETE FROM docket.capabilities c WHERE c.name = 'batch.run'
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
