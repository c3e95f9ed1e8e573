-- Human tasks: a durable wait with an operational surface. The tasks and
-- their events, the task machine and its refusal DK008. Their rules are
-- sql/definitions/tasks.sql's.

-- +goose Up

SET LOCAL docket.migrating = 'on';

INSERT INTO docket.error_codes (code, name, meaning) VALUES
    ('DK008', 'ErrExcludedActor', 'four-eyes: this actor may not claim or answer this task');

-- The machine ---------------------------------------------------------------------

INSERT INTO docket.machines (name, subject, meaning) VALUES
    ('task', 'docket.tasks.status', 'a human task: pending until decided or withdrawn; escalated once its deadline passed');

INSERT INTO docket.machine_states (machine, state, initial, terminal, meaning)
SELECT 'task', * FROM (VALUES
    ('pending', true, false, 'waiting for a decision; its expiry policy has not fired'),
    ('escalated', false, false, 'its deadline passed and it was escalated: queued again to a wider audience, owed nothing further by the sweep'),
    ('decided', false, true, 'answered, by a reviewer or by the automatic decision its opening signed'),
    ('withdrawn', false, true, 'its case closed before anybody answered')) v;

INSERT INTO docket.machine_transitions (machine, from_state, to_state, meaning)
SELECT 'task', from_state, to_state, NULL FROM (VALUES
    ('pending', 'escalated'),
    ('pending', 'decided'),
    ('pending', 'withdrawn'),
    ('escalated', 'decided'),
    ('escalated', 'withdrawn')) v (from_state, to_state);

-- Bounds ------------------------------------------------------------------------------

-- The bounds of a task's lists. plpgsql, not SQL: an SQL function with a
-- subquery is never inlined, and a CHECK calling one would plan its body
-- again in every statement that writes a task; a plpgsql body is planned
-- once per session.

-- valid_principals: 0..64 well-formed principals, distinct.
-- +goose StatementBegin
CREATE FUNCTION docket.valid_principals(p text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    x text;
BEGIN
    IF p IS NULL OR cardinality(p) > 64 OR array_position(p, NULL) IS NOT NULL THEN
        RETURN false;
    END IF;
    FOREACH x IN ARRAY p LOOP
        IF NOT docket.valid_principal(x) THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN cardinality(p) = 0 OR cardinality(ARRAY(SELECT DISTINCT unnest(p))) = cardinality(p);
END
$$;
-- +goose StatementEnd

-- valid_capabilities: 0..16 well-formed capability names, distinct.
-- +goose StatementBegin
CREATE FUNCTION docket.valid_capabilities(p text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    x text;
BEGIN
    IF p IS NULL OR cardinality(p) > 16 OR array_position(p, NULL) IS NOT NULL THEN
        RETURN false;
    END IF;
    FOREACH x IN ARRAY p LOOP
        IF NOT docket.valid_capability(x) THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN cardinality(p) = 0 OR cardinality(ARRAY(SELECT DISTINCT unnest(p))) = cardinality(p);
END
$$;
-- +goose StatementEnd

-- valid_decisions: 1..16 decisions, each 1-63 characters of [a-z0-9._-]
-- starting with a letter, distinct.
-- +goose StatementBegin
CREATE FUNCTION docket.valid_decisions(p text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    x text;
BEGIN
    IF p IS NULL OR cardinality(p) NOT BETWEEN 1 AND 16 OR array_position(p, NULL) IS NOT NULL THEN
        RETURN false;
    END IF;
    FOREACH x IN ARRAY p LOOP
        IF x !~ '^[a-z][a-z0-9._-]{0,62}$' THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN cardinality(ARRAY(SELECT DISTINCT unnest(p))) = cardinality(p);
END
$$;
-- +goose StatementEnd

-- Tasks -------------------------------------------------------------------------------

CREATE TABLE docket.tasks (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    case_id            bigint NOT NULL,
    -- Copied from the case by tasks_guard; never changes.
    project            text NOT NULL,
    -- The opening's key: a retried opening addresses the same task.
    key                text NOT NULL CONSTRAINT tasks_key_valid CHECK (docket.valid_case_key_value(key)),
    -- What a reviewer needs in order to disagree.
    title              text NOT NULL CONSTRAINT tasks_title_bounded CHECK (length(title) BETWEEN 1 AND 200 AND title !~ '[[:cntrl:]]'),
    summary            text NOT NULL CONSTRAINT tasks_summary_bounded CHECK (length(summary) <= 4000),
    proposal           jsonb NOT NULL CONSTRAINT tasks_proposal_bounded CHECK (docket.json_size(proposal) <= 16384),
    evidence           jsonb NOT NULL CONSTRAINT tasks_evidence_bounded CHECK (docket.json_size(evidence) <= 16384),
    -- The decisions it admits.
    decisions          text[] NOT NULL CONSTRAINT tasks_decisions_valid CHECK (docket.valid_decisions(decisions)),
    -- Who may take it: these principals, and holders of these capabilities
    -- on the project. Escalation widens both.
    audience           text[] NOT NULL CONSTRAINT tasks_audience_valid CHECK (docket.valid_principals(audience)),
    audience_caps      text[] NOT NULL CONSTRAINT tasks_audience_caps_valid CHECK (docket.valid_capabilities(audience_caps)),
    -- Who may not, whatever the audience: the proposer, the case's admitter,
    -- and every principal named as acting for someone (four eyes).
    proposer           docket.principal NOT NULL,
    acting_for         text[] NOT NULL CONSTRAINT tasks_acting_for_valid CHECK (docket.valid_principals(acting_for)),
    excluded           text[] NOT NULL,
    deadline           timestamptz NOT NULL CONSTRAINT tasks_deadline_finite CHECK (isfinite(deadline)),
    -- What the deadline does: escalate (to escalate_to / escalate_caps, with
    -- a new deadline escalate_for later), or decide auto_decision, signed
    -- by the opener.
    on_expiry          text NOT NULL CONSTRAINT tasks_on_expiry_known CHECK (on_expiry IN ('escalate', 'decide')),
    escalate_to        text[] NOT NULL CONSTRAINT tasks_escalate_to_valid CHECK (docket.valid_principals(escalate_to)),
    escalate_caps      text[] NOT NULL CONSTRAINT tasks_escalate_caps_valid CHECK (docket.valid_capabilities(escalate_caps)),
    escalate_for       interval,
    auto_decision      text,
    -- The wait a decision is delivered to.
    wait_id            bigint NOT NULL REFERENCES docket.waits (id),
    status             text NOT NULL DEFAULT 'pending',
    -- The current claim: its holder, token and lease.
    claimed_by         docket.principal,
    claim_token        uuid,
    claimed_at         timestamptz,
    claim_expires_at   timestamptz,
    -- The settlement.
    decision           text,
    decided_by         docket.principal,
    automatic          boolean NOT NULL DEFAULT false,
    note               text CONSTRAINT tasks_note_bounded CHECK (length(note) <= 2000),
    settled_at         timestamptz,
    opened_by          docket.principal NOT NULL,
    opened_at          timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    escalated_at       timestamptz,
    CONSTRAINT tasks_case_fkey FOREIGN KEY (case_id, project) REFERENCES docket.cases (id, project),
    CONSTRAINT tasks_case_key UNIQUE (case_id, key),
    CONSTRAINT tasks_wait_key UNIQUE (wait_id),
    CONSTRAINT tasks_audience_not_empty CHECK (cardinality(audience) + cardinality(audience_caps) > 0),
    CONSTRAINT tasks_deadline_after_opening CHECK (deadline > opened_at AND deadline <= opened_at + interval '3650 days'),
    CONSTRAINT tasks_policy_whole CHECK (
        (on_expiry = 'escalate') = (escalate_for IS NOT NULL)
        AND (on_expiry = 'escalate') = (auto_decision IS NULL)
        AND (on_expiry = 'decide' OR cardinality(escalate_to) + cardinality(escalate_caps) > 0)
        AND (escalate_for IS NULL OR escalate_for BETWEEN interval '1 minute' AND interval '366 days')
        AND (auto_decision IS NULL OR auto_decision = ANY (decisions))),
    CONSTRAINT tasks_claim_whole CHECK (
        (claimed_by IS NULL) = (claim_token IS NULL) AND (claimed_by IS NULL) = (claimed_at IS NULL)
        AND (claimed_by IS NULL) = (claim_expires_at IS NULL) AND claim_expires_at > claimed_at),
    CONSTRAINT tasks_claimed_only_pending CHECK (claimed_by IS NULL OR status IN ('pending', 'escalated')),
    CONSTRAINT tasks_decided_whole CHECK (
        (status = 'decided') = (decision IS NOT NULL) AND (status = 'decided') = (decided_by IS NOT NULL)
        AND (decision IS NULL OR decision = ANY (decisions)) AND (NOT automatic OR status = 'decided')),
    CONSTRAINT tasks_settled_iff_terminal CHECK ((status IN ('decided', 'withdrawn')) = (settled_at IS NOT NULL)),
    CONSTRAINT tasks_escalated_at CHECK ((status <> 'escalated' OR escalated_at IS NOT NULL) AND (escalated_at IS NULL OR status <> 'pending'))
);

COMMENT ON TABLE docket.tasks IS
    'Human tasks: what a reviewer needs, who may take it, who may not (four eyes), its deadline and declared expiry policy; status moves along docket.task_transitions.';

-- The expiry sweep's range scan: tasks whose policy has not fired, by deadline.
CREATE INDEX tasks_expiry_idx ON docket.tasks (deadline, id) WHERE status = 'pending';

-- Worklists and backlogs: the undecided tasks of a project.
CREATE INDEX tasks_open_idx ON docket.tasks (project, deadline, id) WHERE status IN ('pending', 'escalated');

CREATE INDEX tasks_case_idx ON docket.tasks (case_id, id);

CREATE TABLE docket.task_events (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id  bigint NOT NULL REFERENCES docket.tasks (id),
    -- opened, claimed, released, escalated, decided, withdrawn
    what     text NOT NULL CONSTRAINT task_events_what_known CHECK (
                 what IN ('opened', 'claimed', 'released', 'escalated', 'decided', 'withdrawn')),
    actor    text NOT NULL,
    at       timestamptz NOT NULL,
    -- Room for a note of 2000 characters written out as JSON, escapes and
    -- all, beside the rest.
    detail   jsonb CONSTRAINT task_events_detail_bounded CHECK (docket.json_size(detail) <= 32768)
);

COMMENT ON TABLE docket.task_events IS
    'Append-only history of every task: opening, claims and releases, escalation, the decision (and whether it was automatic, signed by whom), withdrawal.';

CREATE INDEX task_events_task_idx ON docket.task_events (task_id, id);

-- +goose Down
SET LOCAL docket.migrating = 'on';
DROP TABLE docket.task_events, docket.tasks;
DELETE FROM docket.machine_transitions WHERE machine = 'task';
DELETE FROM docket.machine_states WHERE machine = 'task';
DELETE FROM docket.machines WHERE name = 'task';
DELETE FROM docket.error_codes WHERE code = 'DK008';
DROP FUNCTION docket.valid_decisions(text[]);
DROP FUNCTION docket.valid_capabilities(text[]);
DROP FUNCTION docket.valid_principals(text[]);
