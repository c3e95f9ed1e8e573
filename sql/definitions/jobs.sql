-- Jobs: durable knowledge that work is wanted, held, done, failed or in doubt.
--
-- A job moves along docket.job_transitions only. Whoever changes docket.jobs
-- (a docket function or a hand-written UPDATE in psql) is held to that table by
-- the BEFORE triggers, and every move appends a hash-chained docket.job_events
-- row through the AFTER triggers, attributed to the change context
-- (docket.set_context). The lease protocol (claim, renew, release, complete,
-- fail) lives in the functions below; each states its contract above it.
--
-- Bounds (also in Go, package jobs):
--   payload and result     1 MiB of JSON text each; params 64 KiB
--   kind                   1-128 characters; queue 1-63
--   priority               1 (first) .. 4 (last), as River's
--   max_attempts           1..100 (default 5)
--   lease                  1 second .. 24 hours (default 5 minutes)
--   backoff                base 1 ms .. 24 hours, cap base .. 7 days, jitter 0..1
--   peer retry_after       clamped to 0 .. 24 hours
--   diagnostic             4096 characters (longer ones are cut, marked with …)
--   event detail           1000 characters
--   claim batch            1..1000; sweep batch 1..10000; enqueue batch 1..100000
--
-- Work arrives by notification: every statement that makes jobs due now
-- (created, or queued again) notifies channel docket_jobs with each queue
-- it touched, in the transaction that made them, so a worker (package
-- worker) learns of a job when it commits, whichever path made it: the Go
-- API, plain SQL, a case's continuation, a schedule. The worker claims a
-- batch of a queue's due jobs in one statement (job_claim_queue), runs their
-- handlers, and settles the successes in one statement (job_complete_many).
-- River's tables live in schema docket too, but no docket job needs a River
-- row.
--
-- History that resists rewriting:
--   * each job event records what the transition left the job holding: the
--     lease's expiry (lease_until) and a digest (outcome) of its state,
--     result, diagnostic, holder, claim token, lease generation and attempts,
--     and its hash covers both. job_verify checks that the job still holds
--     what its last event says, so a result, diagnostic or holder rewritten
--     since, by any means, is reported. (The lease's expiry is not compared
--     with the job: a renewal moves it and records no event.);
--   * job_verify judges every transition against the job machine as
--     migrated, written into job_machine_move, not against docket.job_states
--     and docket.job_transitions, which it also compares with the machine
--     and reports when they differ;
--   * time never runs backwards in a history: an event is recorded at the
--     later of the change context's instant and its predecessor's, and a job
--     never finishes before it was created;
--   * docket.job_chain_heads lists each job's last event hash: exported
--     somewhere the owner cannot write, it lets an auditor show later that a
--     history was not rebuilt (docs/security.md).

-- job_backoff is the delay before retry number p_attempt (1 = the delay after
-- the first failed attempt): p_base doubled per attempt, capped at p_cap, then
-- shortened by up to p_jitter of itself using p_draw in [0, 1). It is computed
-- in whole microseconds with IEEE doubles, exactly as jobs.RetryPolicy.Backoff.
CREATE OR REPLACE FUNCTION docket.job_backoff(p_attempt integer, p_base interval, p_cap interval,
                                   p_jitter double precision, p_draw double precision)
RETURNS interval
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN make_interval(secs => floor(
           (least(extract(epoch FROM p_cap) * 1000000,
                  extract(epoch FROM p_base) * 1000000 * power(2::numeric, least(greatest(p_attempt, 1), 64) - 1))
           )::double precision
           -- A product below 2^-54 leaves 1 - x at exactly 1 in IEEE arithmetic,
           -- as in Go; Postgres would refuse it as an underflow instead.
           * (1 - CASE WHEN p_jitter < 1e-20::double precision OR p_draw < 1e-20::double precision THEN 0
                       ELSE p_jitter * p_draw END)
       ) / 1000000);

-- job_retry_delay is how long a retryable failure waits before its job is
-- queued again: p_retry_after, a peer's hint, clamped to 0 .. 24 hours, when
-- given; else the job's backoff after its p_attempts-th attempt
-- (job_backoff, with a fresh draw). job_fail and job_late_outcome queue by it.
CREATE OR REPLACE FUNCTION docket.job_retry_delay(p_retry_after interval, p_attempts integer, p_base interval,
                                                  p_cap interval, p_jitter double precision)
RETURNS interval
LANGUAGE sql VOLATILE
RETURN CASE WHEN p_retry_after IS NOT NULL THEN least(greatest(p_retry_after, '0'::interval), '24 hours'::interval)
            ELSE docket.job_backoff(p_attempts, p_base, p_cap, p_jitter, random()) END;

-- The job machine's states and moves (docket.job_states, docket.job_transitions),
-- as 00024_jobs.sql declares them.
SELECT docket.machine_views('job');

-- job_events_check refuses (23503) an event of a job that does not exist.
CREATE OR REPLACE FUNCTION docket.job_events_check() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    bad bigint;
BEGIN
    SELECT n.job_id INTO bad FROM new_events n
    WHERE NOT EXISTS (SELECT 1 FROM docket.jobs j WHERE j.id = n.job_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job event of job %: the job does not exist', bad
            USING ERRCODE = '23503', CONSTRAINT = 'job_events_job_exists', TABLE = 'job_events', SCHEMA = 'docket';
    END IF;
    RETURN NULL;
END
$$;

-- Only the owner may insert events (no other role has the privilege), and
-- the events of the jobs triggers below are of the jobs they hold, so the
-- check runs for a statement issued by hand and not for those triggers'
-- inserts (trigger depth 1), which are every transition's.
CREATE OR REPLACE TRIGGER job_events_check
    AFTER INSERT ON docket.job_events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT WHEN (pg_trigger_depth() < 1) EXECUTE FUNCTION docket.job_events_check();

-- job_outcome is the digest of what a transition leaves a job holding:
-- sha256 of the canonical JSON text
--     [state, result, diagnostic, claimed_by, claim_token, lease_generation, attempts]
-- so a verifier in any language can recompute it from the job row. The
-- claim_token is what the row stores: the token's digest (job_token_digest);
-- events written before tokens were stored as digests (00034) name the token
-- itself, and a job held then verifies by docket.job_token_rekeys. The text
-- is built by concatenation, byte for byte what jsonb_build_array(...)::text
-- makes (strings through to_json, which escapes as jsonb does; numbers and
-- nulls as jsonb prints them; ", " between elements) and a microsecond
-- cheaper; TestOutcomeIsTheDocumentedFormula compares the two. When the
-- attempt's lease was renewed (p_renewals > 0) the array goes on with
--     ..., attempts, renewals, renewed_at (epoch microseconds)]
-- so what an attempt's renewals were is covered by the event that ends it;
-- and when the job's attempts reported spending (p_spent_effects or
-- p_spent_money > 0) it goes on with both, after the renewals' two elements
-- (0 and null when there were none):
--     ..., attempts, renewals, renewed_at, spent_effects, spent_money]
-- so what was spent is covered too. An outcome without renewals or spending
-- is the text it always was.
DROP FUNCTION IF EXISTS docket.job_outcome(text, jsonb, text, text, uuid, bigint, integer, integer, timestamptz);
CREATE OR REPLACE FUNCTION docket.job_outcome(p_state text, p_result jsonb, p_diagnostic text, p_claimed_by text,
                                              p_claim_token uuid, p_lease_generation bigint, p_attempts integer,
                                              p_renewals integer DEFAULT 0, p_renewed_at timestamptz DEFAULT NULL,
                                              p_spent_effects bigint DEFAULT 0, p_spent_money bigint DEFAULT 0)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN sha256(textsend('[' || coalesce(to_json(p_state)::text, 'null')
    || ', ' || coalesce(p_result::text, 'null')
    || ', ' || coalesce(to_json(p_diagnostic)::text, 'null')
    || ', ' || coalesce(to_json(p_claimed_by)::text, 'null')
    || ', ' || coalesce('"' || p_claim_token::text || '"', 'null')
    || ', ' || coalesce(p_lease_generation::text, 'null')
    || ', ' || coalesce(p_attempts::text, 'null')
    || CASE WHEN p_spent_effects > 0 OR p_spent_money > 0
            THEN ', ' || coalesce(p_renewals, 0)::text || ', ' || coalesce(docket.epoch_micros(p_renewed_at)::text, 'null')
                 || ', ' || p_spent_effects::text || ', ' || p_spent_money::text
            WHEN p_renewals > 0
            THEN ', ' || p_renewals::text || ', ' || coalesce(docket.epoch_micros(p_renewed_at)::text, 'null')
            ELSE '' END
    || ']'));

-- job_event_hash is the chain link of one event: sha256 of the previous hash
-- followed by the event as canonical JSON text
--     [job_id, seq, from_state, to_state, actor, at (epoch microseconds), attempt, detail,
--      lease_until (epoch microseconds or null), outcome (hex), revision]
-- so a verifier in any language can recompute it from the row. The revision
-- (of the claim the event made or ended) is left out when it is NULL, so
-- every event written before revisions were recorded hashes as it did. An
-- event that ends an attempt names the attempt's claim (claimed_at not NULL:
-- claims are not events of their own since 00046), and its array goes on
-- with the revision, null if none, then the claim:
--     ..., outcome, revision, claimed_at (epoch microseconds), claimed_by, claim_token]
-- fifteen elements, so no event of one form hashes the text of another. The
-- text is built by concatenation as job_outcome's is
-- (TestEventHashIsTheDocumentedFormula), each parameter named once, and the
-- function is STABLE: the planner inlines it, and a bulk enqueue hashes
-- 100,000 events in one statement.
CREATE OR REPLACE FUNCTION docket.job_event_hash(p_prev bytea, p_job_id bigint, p_seq integer, p_from text, p_to text,
                                                 p_actor text, p_at timestamptz, p_attempt integer, p_detail text,
                                                 p_lease_until timestamptz, p_outcome bytea, p_revision text,
                                                 p_claimed_at timestamptz, p_claimed_by text, p_claim_token uuid)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN sha256(p_prev || textsend('[' || coalesce(p_job_id::text, 'null')
    || ', ' || coalesce(p_seq::text, 'null')
    || ', ' || coalesce(to_json(p_from)::text, 'null')
    || ', ' || coalesce(to_json(p_to)::text, 'null')
    || ', ' || coalesce(to_json(p_actor)::text, 'null')
    || ', ' || coalesce(docket.epoch_micros(p_at)::text, 'null')
    || ', ' || coalesce(p_attempt::text, 'null')
    || ', ' || coalesce(to_json(p_detail)::text, 'null')
    || ', ' || coalesce(docket.epoch_micros(p_lease_until)::text, 'null')
    || ', ' || coalesce('"' || encode(p_outcome, 'hex') || '"', 'null')
    || CASE WHEN p_claimed_at IS NULL THEN coalesce(', ' || to_json(p_revision)::text, '')
            ELSE ', ' || coalesce(to_json(p_revision)::text, 'null')
                 || ', ' || docket.epoch_micros(p_claimed_at)::text
                 || ', ' || coalesce(to_json(p_claimed_by)::text, 'null')
                 || ', ' || coalesce('"' || p_claim_token::text || '"', 'null') END
    || ']'));

-- The form without a claim is the form with none.
CREATE OR REPLACE FUNCTION docket.job_event_hash(p_prev bytea, p_job_id bigint, p_seq integer, p_from text, p_to text,
                                                 p_actor text, p_at timestamptz, p_attempt integer, p_detail text,
                                                 p_lease_until timestamptz, p_outcome bytea, p_revision text)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN docket.job_event_hash(p_prev, p_job_id, p_seq, p_from, p_to, p_actor, p_at, p_attempt, p_detail,
                             p_lease_until, p_outcome, p_revision, NULL::timestamptz, NULL::text, NULL::uuid);

-- The form without a revision is the form with none.
CREATE OR REPLACE FUNCTION docket.job_event_hash(p_prev bytea, p_job_id bigint, p_seq integer, p_from text, p_to text,
                                                 p_actor text, p_at timestamptz, p_attempt integer, p_detail text,
                                                 p_lease_until timestamptz, p_outcome bytea)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
RETURN docket.job_event_hash(p_prev, p_job_id, p_seq, p_from, p_to, p_actor, p_at, p_attempt, p_detail,
                             p_lease_until, p_outcome, NULL::text);

-- job_event_detail is what an event says beyond from and to: the claimant and
-- lease generation of a claim, else the job's diagnostic at that moment;
-- then, for a move that ends an attempt whose lease was renewed
-- (p_renewals > 0: the attempt's count and last instant), how many times
-- and when last, so the history shows every renewal an attempt made
-- without an event for each.
-- It takes the columns, not the row: a whole-row argument would build a copy
-- of every job row an UPDATE moves. STABLE, as text || bigint is, so the
-- planner inlines it.
CREATE OR REPLACE FUNCTION docket.job_event_detail(p_state text, p_claimed_by text, p_lease_generation bigint, p_diagnostic text,
                                                   p_renewals integer DEFAULT 0, p_renewed_at timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE
    WHEN p_renewals > 0 THEN
        concat_ws('; ',
            CASE WHEN p_state = 'claimed' THEN 'claimed by ' || p_claimed_by || ', lease generation ' || p_lease_generation
                 ELSE docket.bounded_text(p_diagnostic, 900) END,
            CASE WHEN p_state = 'claimed' THEN 'the lease before' ELSE 'the lease' END
            || ' was renewed ' || p_renewals || CASE WHEN p_renewals = 1 THEN ' time' ELSE ' times' END
            || ', last at ' || to_char(p_renewed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
    WHEN p_state = 'claimed' THEN 'claimed by ' || p_claimed_by || ', lease generation ' || p_lease_generation
    ELSE docket.bounded_text(p_diagnostic, 1000)
END;

-- Guards --------------------------------------------------------------------

-- A job row's guards are AFTER triggers, here and below: a BEFORE UPDATE
-- row trigger, whatever its columns or WHEN clause, makes Postgres lock
-- every row an UPDATE of the table changes before changing it (the old row
-- the trigger would see), one more WAL record and buffer write a row on
-- every claim and completion. A guard that only refuses is as good after
-- the row is written: its refusal undoes the statement. So a change that
-- also breaks one of the table's CHECKs is refused by the CHECK.

-- jobs_columns_immutable keeps what a job is as it was enqueued (DK015),
-- its id with it: the rows that name a job (below) name it by id.
CREATE OR REPLACE TRIGGER jobs_columns_immutable
    AFTER UPDATE OF id, project, kind, payload, payload_schema, params, inputs, requested_output,
                     lane_id, case_id, retry_of,
                     idempotency_key, compensation_kind, external, repeatable, max_attempts, created_by, created_at
    ON docket.jobs
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

-- References to a job. Nine columns of other tables name a job by its id:
-- six whose row must not outlive the job (an obligation's escalation job, a
-- wait's continuation, a timer's job, a schedule occurrence's job, a run
-- step's job and its compensation's) and three whose rows go with it (its
-- traces, completion records and token rekeys). They were foreign keys,
-- which Postgres checks from the job's side one deleted row at a time: nine
-- queries a pruned job, more than half of a prune's delete (migration 52).
-- Now:
--   * a row naming a job is checked once it is written, as the foreign key
--     checked it, by an AFTER trigger (job_reference_check; AFTER, so that
--     an UPDATE of the table locks no row first: see the guards above):
--     the job must exist, and is held FOR KEY SHARE to the end of the
--     transaction, as the foreign key held it, so a delete of the job waits
--     for the writer and then sees its row -- unless this transaction
--     wrote the job's row (created it, or changed it): no other transaction
--     can delete a row version this one wrote before it ends, so that write
--     holds the job as the lock would (the steps a run admits name the jobs
--     admitted with them);
--   * a statement deleting jobs (only a prune may: jobs_refuse_delete)
--     checks once, set-based, that no row of the six names a job it
--     deleted, and deletes the rows of the three (jobs_release_references).
-- A refusal is the foreign key's: 23503, naming the constraint that was.

-- job_reference_check refuses (23503, constraint TG_ARGV[0]) a row of its
-- table whose column TG_ARGV[1] names a job that does not exist, and holds
-- the job it names (FOR KEY SHARE) unless the job's row is a version this
-- transaction itself wrote (not a subtransaction: its write could still be
-- rolled back alone): a lock on it is one more WAL record and guards
-- nothing more. Runs for a row that names one (WHEN).
CREATE OR REPLACE FUNCTION docket.job_reference_check() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_job bigint;
BEGIN
    IF TG_ARGV[1] = 'job_id' THEN
        v_job := NEW.job_id;
    ELSIF TG_ARGV[1] = 'compensation_job_id' THEN
        v_job := NEW.compensation_job_id;
    ELSIF TG_ARGV[1] = 'escalation_job_id' THEN
        v_job := NEW.escalation_job_id;
    ELSE
        v_job := NEW.continuation_job_id;
    END IF;
    -- The top transaction's id, as the xid a row's xmin holds: the low 32
    -- bits of its full id.
    PERFORM 1 FROM docket.jobs j
    WHERE j.id = v_job AND j.xmin = (pg_current_xact_id()::text::bigint % 4294967296)::text::xid;
    IF NOT FOUND THEN
        PERFORM 1 FROM docket.jobs j WHERE j.id = v_job FOR KEY SHARE;
    END IF;
    IF NOT FOUND THEN
        PERFORM docket.reference_refuse(TG_TABLE_NAME, TG_ARGV[0], TG_ARGV[1], v_job::text, 'jobs');
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER obligations_escalation_job_id_fkey
    AFTER INSERT OR UPDATE OF escalation_job_id ON docket.obligations
    FOR EACH ROW WHEN (NEW.escalation_job_id IS NOT NULL)
    EXECUTE FUNCTION docket.job_reference_check('obligations_escalation_job_id_fkey', 'escalation_job_id');
CREATE OR REPLACE TRIGGER waits_continuation_job_id_fkey
    AFTER INSERT OR UPDATE OF continuation_job_id ON docket.waits
    FOR EACH ROW WHEN (NEW.continuation_job_id IS NOT NULL)
    EXECUTE FUNCTION docket.job_reference_check('waits_continuation_job_id_fkey', 'continuation_job_id');
CREATE OR REPLACE TRIGGER timers_job_id_fkey
    AFTER INSERT OR UPDATE OF job_id ON docket.timers
    FOR EACH ROW WHEN (NEW.job_id IS NOT NULL)
    EXECUTE FUNCTION docket.job_reference_check('timers_job_id_fkey', 'job_id');
CREATE OR REPLACE TRIGGER schedule_occurrences_job_id_fkey
    AFTER INSERT OR UPDATE OF job_id ON docket.schedule_occurrences
    FOR EACH ROW WHEN (NEW.job_id IS NOT NULL)
    EXECUTE FUNCTION docket.job_reference_check('schedule_occurrences_job_id_fkey', 'job_id');
CREATE OR REPLACE TRIGGER run_steps_job_id_fkey
    AFTER INSERT OR UPDATE OF job_id ON docket.run_steps
    FOR EACH ROW WHEN (NEW.job_id IS NOT NULL)
    EXECUTE FUNCTION docket.job_reference_check('run_steps_job_id_fkey', 'job_id');
CREATE OR REPLACE TRIGGER run_steps_compensation_job_id_fkey
    AFTER INSERT OR UPDATE OF compensation_job_id ON docket.run_steps
    FOR EACH ROW WHEN (NEW.compensation_job_id IS NOT NULL)
    EXECUTE FUNCTION docket.job_reference_check('run_steps_compensation_job_id_fkey', 'compensation_job_id');
CREATE OR REPLACE TRIGGER job_traces_job_id_fkey
    AFTER INSERT OR UPDATE OF job_id ON docket.job_traces
    FOR EACH ROW WHEN (NEW.job_id IS NOT NULL)
    EXECUTE FUNCTION docket.job_reference_check('job_traces_job_id_fkey', 'job_id');
CREATE OR REPLACE TRIGGER job_completions_job_id_fkey
    AFTER INSERT OR UPDATE OF job_id ON docket.job_completions
    FOR EACH ROW WHEN (NEW.job_id IS NOT NULL)
    EXECUTE FUNCTION docket.job_reference_check('job_completions_job_id_fkey', 'job_id');
CREATE OR REPLACE TRIGGER job_token_rekeys_job_id_fkey
    AFTER INSERT OR UPDATE OF job_id ON docket.job_token_rekeys
    FOR EACH ROW WHEN (NEW.job_id IS NOT NULL)
    EXECUTE FUNCTION docket.job_reference_check('job_token_rekeys_job_id_fkey', 'job_id');

-- jobs_release_references runs once after a statement that deleted jobs:
-- it refuses (23503, naming the constraint) when a row of the six still
-- names one, and deletes the rows of the three that name them. It checks
-- in a statement of its own, whose snapshot under READ COMMITTED is taken
-- after the delete waited for every writer holding a job it deleted; a
-- transaction snapshot (REPEATABLE READ, SERIALIZABLE) is older than those
-- writers, where the foreign key read with a second snapshot that a trigger
-- cannot take: there, a delete of jobs is refused (DK010), and a prune
-- runs under READ COMMITTED.
CREATE OR REPLACE FUNCTION docket.jobs_release_references() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM gone) THEN
        RETURN NULL;
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'jobs are deleted under READ COMMITTED only (this transaction is %): the check that no row still names them must see what committed while the delete waited',
            upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'DK010';
    END IF;
    SELECT x.* INTO bad FROM (
        SELECT 'obligations' AS tab, 'obligations_escalation_job_id_fkey' AS con, o.escalation_job_id AS job_id
        FROM docket.obligations o WHERE o.escalation_job_id IN (SELECT g.id FROM gone g)
        UNION ALL
        SELECT 'waits', 'waits_continuation_job_id_fkey', w.continuation_job_id
        FROM docket.waits w WHERE w.continuation_job_id IN (SELECT g.id FROM gone g)
        UNION ALL
        SELECT 'timers', 'timers_job_id_fkey', t.job_id FROM docket.timers t WHERE t.job_id IN (SELECT g.id FROM gone g)
        UNION ALL
        SELECT 'schedule_occurrences', 'schedule_occurrences_job_id_fkey', s.job_id
        FROM docket.schedule_occurrences s WHERE s.job_id IN (SELECT g.id FROM gone g)
        UNION ALL
        SELECT 'run_steps', 'run_steps_job_id_fkey', r.job_id FROM docket.run_steps r WHERE r.job_id IN (SELECT g.id FROM gone g)
        UNION ALL
        SELECT 'run_steps', 'run_steps_compensation_job_id_fkey', r.compensation_job_id
        FROM docket.run_steps r WHERE r.compensation_job_id IN (SELECT g.id FROM gone g)
    ) x
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'update or delete on table "jobs" violates foreign key constraint "%" on table "%"', bad.con, bad.tab
            USING ERRCODE = '23503', CONSTRAINT = bad.con, TABLE = bad.tab, SCHEMA = 'docket',
                  DETAIL = format('Key (id)=(%s) is still referenced from table "%s".', bad.job_id, bad.tab);
    END IF;
    DELETE FROM docket.job_traces t WHERE t.job_id IN (SELECT g.id FROM gone g);
    DELETE FROM docket.job_completions c WHERE c.job_id IN (SELECT g.id FROM gone g);
    DELETE FROM docket.job_token_rekeys k WHERE k.job_id IN (SELECT g.id FROM gone g);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER jobs_release_references
    AFTER DELETE ON docket.jobs
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION docket.jobs_release_references();

-- jobs_guard refuses any change at all to a finished job (DK001), by a
-- docket function or by hand, row by row. A finished job has its finished_at (jobs_terminal_finished), so the
-- WHEN clause names no state, and no transition of a live job calls it: the
-- moves of live jobs are checked set-based, once per statement, by
-- jobs_record_update.
CREATE OR REPLACE FUNCTION docket.jobs_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.machine_move('job', 'job ' || OLD.id, OLD.state, NEW.state, true);
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER jobs_guard
    AFTER UPDATE ON docket.jobs
    FOR EACH ROW
    WHEN (OLD.finished_at IS NOT NULL)
    EXECUTE FUNCTION docket.jobs_guard();

-- jobs_record_insert holds every job an INSERT created, set-based, in one
-- pass over the new jobs: each row keeps the rules of a job row
-- (job_row_rule's, and jobs_request_names_asset: a requested kind or target
-- root needs an asset), or is refused with the check violation (23514) a
-- CHECK of that name would raise; it is born in an initial state of the job
-- machine with no attempt and no lease counted (DK001); its project exists
-- (23503) and is active, unless the job belongs to one of the project's
-- cases or lanes (DK009); the case or lane it names exists and is of its
-- project (23503). These are checked here rather than by foreign keys, whose
-- per-row checks dominated a bulk enqueue: projects, cases and lanes are
-- never deleted, and what a job belongs to never changes
-- (jobs_columns_immutable), so a reference valid at insert stays valid. Then
-- it appends each job's first event, finding in the same statement the
-- queues that have a job due now, and notifies docket_jobs with each of
-- them by plain calls, or, in a transaction that holds its wake-ups, records
-- the jobs due (job_wake_hold).
CREATE OR REPLACE FUNCTION docket.jobs_record_insert() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    bad      record;
    v_actor  text;
    v_at     timestamptz;
    v_zero   bytea := decode(repeat('00', 32), 'hex');
    v_due    text[];
    v_queue  text;
    v_ids    bigint[];   -- the jobs due, when the transaction holds its wake-ups
    v_queues text[];
BEGIN
    -- Every rule in one pass: the first job that breaks one, and which.
    SELECT x.* INTO bad FROM (
        SELECT n.id, n.project, n.state, n.attempts, n.lease_generation, n.case_id, n.lane_id, n.retry_of, p.status,
               coalesce(
                   docket.job_row_rule(n.state, n.attempts, n.max_attempts, n.backoff_base, n.backoff_cap, n.claim_token,
                                       n.claimed_by, n.claimed_at, n.lease_expires_at, n.result, n.outcome_token,
                                       n.finished_at),
                   CASE
                       WHEN n.requested_output IS NULL AND (n.requested_kind IS NOT NULL OR n.target_root IS NOT NULL)
                           THEN 'jobs_request_names_asset'
                       WHEN s.initial IS NOT TRUE OR n.attempts <> 0 OR n.lease_generation <> 0
                            OR n.spent_effects <> 0 OR n.spent_money <> 0 THEN 'birth'
                       WHEN p.name IS NULL THEN 'project'
                       WHEN p.status <> 'active' AND n.case_id IS NULL AND n.lane_id IS NULL THEN 'status'
                       WHEN n.case_id IS NOT NULL AND NOT EXISTS (
                           SELECT 1 FROM docket.cases c WHERE c.id = n.case_id AND c.project = n.project) THEN 'case'
                       WHEN n.lane_id IS NOT NULL AND NOT EXISTS (
                           SELECT 1 FROM docket.lanes l WHERE l.id = n.lane_id AND l.project = n.project) THEN 'lane'
                       WHEN n.retry_of IS NOT NULL AND NOT EXISTS (
                           SELECT 1 FROM docket.jobs o WHERE o.id = n.retry_of AND o.project = n.project
                                                         AND o.finished_at IS NOT NULL) THEN 'retry_of'
                   END) AS why
        FROM new_jobs n
        LEFT JOIN docket.machine_states s ON s.machine = 'job' AND s.state = n.state
        LEFT JOIN docket.projects p ON p.name = n.project
        -- A fence: without it the planner pulls this subquery up and copies
        -- the rules into the WHERE below as well, so every statement would
        -- prepare them, and their three lookups, twice (and keep a hashed
        -- form of the case and lane lookups, a scan of every case or lane).
        OFFSET 0
    ) x
    WHERE x.why IS NOT NULL
    LIMIT 1;
    IF FOUND THEN
        CASE bad.why
        WHEN 'birth' THEN
            RAISE EXCEPTION 'job %: a job is created in an initial state with no attempts, no lease and nothing spent, not % with % attempts and lease generation %',
                bad.id, bad.state, bad.attempts, bad.lease_generation
                USING ERRCODE = 'DK001';
        WHEN 'project' THEN
            RAISE EXCEPTION 'job %: project % does not exist', bad.id, quote_literal(bad.project)
                USING ERRCODE = '23503', CONSTRAINT = 'jobs_project_exists', TABLE = 'jobs', SCHEMA = 'docket';
        WHEN 'status' THEN
            RAISE EXCEPTION 'project % is %: it takes no new jobs but those of its open cases and lanes', bad.project, bad.status
                USING ERRCODE = 'DK009';
        WHEN 'case' THEN
            RAISE EXCEPTION 'job %: case % of project % does not exist', bad.id, bad.case_id, quote_literal(bad.project)
                USING ERRCODE = '23503', CONSTRAINT = 'jobs_case_fkey', TABLE = 'jobs', SCHEMA = 'docket';
        WHEN 'lane' THEN
            RAISE EXCEPTION 'job %: lane % of project % does not exist', bad.id, bad.lane_id, quote_literal(bad.project)
                USING ERRCODE = '23503', CONSTRAINT = 'jobs_lane_fkey', TABLE = 'jobs', SCHEMA = 'docket';
        WHEN 'retry_of' THEN
            RAISE EXCEPTION 'job %: it retries job %, which is no finished job of project %', bad.id, bad.retry_of,
                quote_literal(bad.project)
                USING ERRCODE = '23503', CONSTRAINT = 'jobs_retry_of_fkey', TABLE = 'jobs', SCHEMA = 'docket';
        ELSE
            PERFORM docket.job_row_refuse(bad.id, bad.why);
        END CASE;
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    -- Each job's first event, and, in the same statement, the queues that
    -- have a job due now.
    WITH recorded AS (
        INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until,
                                       outcome, prev_hash, hash)
        SELECT n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, n.detail, NULL, b.outcome, v_zero,
               docket.job_event_hash(v_zero, n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, n.detail, NULL, b.outcome)
        FROM (SELECT m.*, 'retry of job ' || m.retry_of AS detail FROM new_jobs m) n
        -- What a job is born holding: nothing. One digest per state born in.
        JOIN (SELECT DISTINCT ON (m.state) m.state, docket.job_outcome(m.state, NULL, NULL, NULL, NULL, 0, 0) AS outcome
              FROM new_jobs m) b ON b.state = n.state
    )
    SELECT array_agg(DISTINCT n.queue), array_agg(n.id ORDER BY n.id), array_agg(n.queue ORDER BY n.id)
    INTO v_due, v_ids, v_queues
    FROM new_jobs n WHERE NOT n.external AND n.available_at <= v_at;
    -- Wake their workers, or hold the wake-ups (job_wake_hold).
    IF v_due IS NULL OR docket.job_wake_held() AND docket.job_wake_hold(v_ids, v_queues) THEN
        RETURN NULL;
    END IF;
    FOREACH v_queue IN ARRAY v_due LOOP
        PERFORM pg_notify('docket_jobs', v_queue);
    END LOOP;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER jobs_record_insert
    AFTER INSERT ON docket.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION docket.jobs_record_insert();

-- job_refuse_backwards refuses (DK016) an event of job p_id at p_at, before
-- its last event's instant p_last: a record's instants never run backwards.
CREATE OR REPLACE FUNCTION docket.job_refuse_backwards(p_id bigint, p_at timestamptz, p_last timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'job %: a change at % comes before its last event, at %: a record''s instants never run backwards',
        p_id, p_at, p_last
        USING ERRCODE = 'DK016';
END
$$;

-- job_move_recorded says whether an update of a job from (p_from_state,
-- p_from_generation, p_from_revisions) to the p_to_ ones writes an event: a
-- move of state or a new lease generation out of a claim (an attempt's end,
-- a takeover), or a pin; not a claim, which is on the row until the event
-- that ends its attempt records it (one event per attempt). Inlined.
CREATE OR REPLACE FUNCTION docket.job_move_recorded(p_from_state text, p_to_state text, p_from_generation bigint,
                                                    p_to_generation bigint, p_from_revisions text[], p_to_revisions text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_to_state <> p_from_state AND (p_to_state <> 'claimed' OR p_from_state = 'claimed')
    OR p_to_generation <> p_from_generation AND p_from_state = 'claimed'
    OR p_to_revisions IS DISTINCT FROM p_from_revisions;

-- jobs_record_update holds every UPDATE of docket.jobs, whoever issues it,
-- set-based, in one pass over the statement's rows, to the rules of a job row
-- (job_row_rule's: the check violation, 23514, a CHECK of that name would
-- raise) and to the job machine (DK001): a state change, or a new lease
-- generation, must be a pair in docket.job_transitions; attempts and lease
-- generation move only by a claim, one each; a claim takes a fresh token,
-- and a held job's token changes only with a new lease generation; only a
-- queued job that stays queued is pinned; the revision of a claim changes
-- only with a new claim; a claim comes no earlier than the job's creation,
-- and a finish no earlier than its claim (DK016). Then it appends an event
-- for every job the UPDATE moved or pinned, but for a claim: one event per
-- attempt. A claim stays on the row (holder, lease generation, token digest,
-- claimed-at, revision) until the move that ends its attempt (a completion,
-- failure, release, expiry, takeover, cancel) writes one event naming it
-- (claimed_at, claimed_by, claim_token), from claimed, as Temporal writes an
-- activity's start with its completion. Each event is chained to that job's
-- previous one, with what the move left the job holding and the revision of
-- the claim it made or ended (each event's outcome, detail and revision
-- computed once: the OFFSET 0 keeps the planner from copying their
-- expressions into the chain hash's), and, when
-- it queued a job again, notifies docket_jobs with each queue of a job queued
-- again and due now. Lease renewals and other edits that move nothing record
-- nothing.
--
-- Its plans are kept for the session (plan_cache_mode): a plpgsql statement
-- with parameters is planned afresh for its first five calls in a session,
-- and afterwards whenever its generic plan looks dearer than the custom ones
-- did, which the batches a worker's session runs, of varying size, made it
-- do at most calls; the generic plan, a hash join of the transition tables,
-- then each job's last event by its key, is the plan wanted at every size.
-- And it is planned without nested loops (enable_nestloop), which it gets
-- only where nothing else can take a row (that lookup): a generic plan is
-- made for the statement that first calls it in a session, and one made for
-- a statement of one job compared every old row with every new one in each
-- later statement of the session (2,000 jobs claimed and completed 100 at a
-- time: 152 ms in a fresh session, 272 - 305 ms after one job's claim and
-- completion). A hash join costs a statement of one job about 4 % more.
-- The setting holds for what it calls too, which joins nothing (the
-- refusals, job_wake_held, job_wake_hold).
CREATE OR REPLACE FUNCTION docket.jobs_record_update() RETURNS trigger
LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_generic_plan SET enable_nestloop = off AS $$
DECLARE
    v_actor  text;
    v_at     timestamptz;
    v_moved  boolean;
    v_queued boolean;
    v_lo     bigint;     -- the lowest and highest ids the statement changed
    v_hi     bigint;
    v_ids    bigint[];
    v_queues text[];
    bad      record;
BEGIN
    SELECT x.* INTO bad FROM (
        SELECT o.id, o.state AS from_state, n.state AS to_state, o.attempts AS from_attempts, n.attempts AS to_attempts,
               o.lease_generation AS from_generation, n.lease_generation AS to_generation,
               n.claimed_at, n.created_at, n.finished_at, o.claimed_at AS from_claimed_at,
               coalesce(
                   docket.job_row_rule(n.state, n.attempts, n.max_attempts, n.backoff_base, n.backoff_cap, n.claim_token,
                                       n.claimed_by, n.claimed_at, n.lease_expires_at, n.result, n.outcome_token,
                                       n.finished_at),
                   CASE
                       WHEN n.claimed_at < n.created_at THEN 'claim_before_creation'
                       WHEN o.state = 'claimed' AND n.finished_at < o.claimed_at THEN 'finish_before_claim'
                       WHEN (n.state <> o.state OR n.lease_generation <> o.lease_generation) AND NOT EXISTS (
                           SELECT 1 FROM docket.machine_transitions t
                           WHERE t.machine = 'job' AND t.from_state = o.state AND t.to_state = n.state) THEN 'move'
                       WHEN n.revisions IS DISTINCT FROM o.revisions AND (o.state <> 'queued' OR n.state <> 'queued') THEN 'pin'
                       WHEN n.claimed_revision IS DISTINCT FROM o.claimed_revision AND n.lease_generation = o.lease_generation THEN 'revision'
                       -- Budgets: what was spent grows only as an attempt
                       -- ends; ceilings change only as an exhausted job is
                       -- resumed, and only upwards; a queued job has room
                       -- under its ceilings.
                       WHEN (n.spent_effects <> o.spent_effects OR n.spent_money <> o.spent_money)
                            AND (o.state NOT IN ('claimed', 'uncertain') OR n.state = o.state
                                 OR n.spent_effects < o.spent_effects OR n.spent_money < o.spent_money) THEN 'spent'
                       WHEN (n.max_effects, n.max_money, n.currency) IS DISTINCT FROM (o.max_effects, o.max_money, o.currency)
                            AND NOT (o.state = 'exhausted' AND n.state = 'queued' AND n.currency IS NOT DISTINCT FROM o.currency
                                     AND (n.max_money IS NOT DISTINCT FROM o.max_money OR n.max_money > o.max_money)
                                     AND (n.max_effects IS NOT DISTINCT FROM o.max_effects OR n.max_effects > o.max_effects)) THEN 'ceilings'
                       WHEN n.state = 'queued' AND (n.spent_effects >= n.max_effects OR n.spent_money >= n.max_money) THEN 'over_budget'
                       WHEN n.state = 'claimed' AND (o.state <> 'claimed' OR n.lease_generation <> o.lease_generation) THEN
                           CASE
                               WHEN n.lease_generation <> o.lease_generation + 1 OR n.attempts <> o.attempts + 1 THEN 'claim_counts'
                               WHEN n.claim_token IS NOT DISTINCT FROM o.claim_token THEN 'claim_token'
                               -- a claim counts its lease's renewals afresh
                               WHEN n.renewals <> 0 OR n.renewed_at IS NOT NULL THEN 'renewals'
                           END
                       WHEN n.attempts <> o.attempts OR n.lease_generation <> o.lease_generation THEN 'counts'
                       WHEN n.state = 'claimed' AND o.state = 'claimed' AND n.claim_token IS DISTINCT FROM o.claim_token THEN 'token'
                       -- Renewals: a renewal of a held lease counts one, at
                       -- the change context's instant; nothing else changes
                       -- them, or a held lease's expiry.
                       WHEN n.renewals <> o.renewals OR n.renewed_at IS DISTINCT FROM o.renewed_at THEN
                           CASE WHEN n.state <> 'claimed' OR o.state <> 'claimed' OR n.renewals <> o.renewals + 1
                                     OR n.renewed_at IS DISTINCT FROM docket.context_now() THEN 'renewals' END
                       WHEN n.state = 'claimed' AND n.lease_expires_at IS DISTINCT FROM o.lease_expires_at THEN 'lease'
                   END) AS why
        FROM old_jobs o JOIN new_jobs n ON n.id = o.id
        -- A fence, as in jobs_record_insert: the rules are computed once.
        OFFSET 0
    ) x
    WHERE x.why IS NOT NULL
    LIMIT 1;
    IF FOUND THEN
        CASE bad.why
        WHEN 'move' THEN
            PERFORM docket.machine_move('job', 'job ' || bad.id, bad.from_state, bad.to_state, true);
        WHEN 'claim_before_creation' THEN
            RAISE EXCEPTION 'job %: claimed at %, before it was created at %: a record''s instants never run backwards',
                bad.id, bad.claimed_at, bad.created_at
                USING ERRCODE = 'DK016';
        WHEN 'finish_before_claim' THEN
            RAISE EXCEPTION 'job %: finished at %, before its claim at %: a record''s instants never run backwards',
                bad.id, bad.finished_at, bad.from_claimed_at
                USING ERRCODE = 'DK016';
        WHEN 'claim_counts' THEN
            RAISE EXCEPTION 'job %: a claim counts one attempt and one lease generation (attempts % -> %, generation % -> %)',
                bad.id, bad.from_attempts, bad.to_attempts, bad.from_generation, bad.to_generation
                USING ERRCODE = 'DK001';
        WHEN 'claim_token' THEN
            RAISE EXCEPTION 'job %: a claim takes a fresh token: the previous holder''s must go stale', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'pin' THEN
            RAISE EXCEPTION 'job %: only a queued job that stays queued is pinned (it is % -> %)', bad.id, bad.from_state, bad.to_state
                USING ERRCODE = 'DK001';
        WHEN 'revision' THEN
            RAISE EXCEPTION 'job %: the revision of a claim changes only with a new claim', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'counts' THEN
            RAISE EXCEPTION 'job %: attempts and lease generation change only by a claim', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'token' THEN
            RAISE EXCEPTION 'job %: a new claim token needs a new lease generation', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'renewals' THEN
            RAISE EXCEPTION 'job %: renewals count one per renewal of a held lease, at its instant, and start again from none at a claim', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'lease' THEN
            RAISE EXCEPTION 'job %: a held lease''s expiry changes only by a renewal, which counts itself (docket.job_renew)', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'spent' THEN
            RAISE EXCEPTION 'job %: what its attempts spent grows only as an attempt ends (or its uncertain end is settled), by what the attempt reported', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'ceilings' THEN
            RAISE EXCEPTION 'job %: its budget''s ceilings change only as it is resumed from exhausted, and only upwards (docket.job_resume)', bad.id
                USING ERRCODE = 'DK001';
        WHEN 'over_budget' THEN
            RAISE EXCEPTION 'job %: a ceiling of its budget is reached: it is exhausted, not queued, until the ceiling is raised (docket.job_resume)', bad.id
                USING ERRCODE = 'DK001';
        ELSE
            PERFORM docket.job_row_refuse(bad.id, bad.why);
        END CASE;
    END IF;
    -- Whether the statement moved a job into an event (else it records
    -- nothing), and whether it queued one again (else it wakes no worker).
    -- A claim is not an event of its own: it is on the row until the move
    -- that ends its attempt writes it into the history.
    SELECT bool_or(docket.job_move_recorded(o.state, n.state, o.lease_generation, n.lease_generation, o.revisions, n.revisions)),
           bool_or(n.state = 'queued' AND (o.state <> 'queued' OR n.revisions IS DISTINCT FROM o.revisions) AND NOT n.external),
           min(n.id), max(n.id)
    INTO v_moved, v_queued, v_lo, v_hi
    FROM old_jobs o JOIN new_jobs n ON n.id = o.id;
    IF v_moved IS NOT TRUE THEN
        RETURN NULL;
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until, outcome,
                                   revision, claimed_at, claimed_by, claim_token, prev_hash, hash)
    SELECT m.id, m.seq, m.from_state, m.to_state, v_actor, m.at, m.attempt, m.detail, m.lease_until, m.outcome,
           m.revision, m.claimed_at, m.claimed_by, m.claim_token, m.prev_hash,
           docket.job_event_hash(m.prev_hash, m.id, m.seq, m.from_state, m.to_state, v_actor, m.at, m.attempt, m.detail,
                                 m.lease_until, m.outcome, m.revision, m.claimed_at, m.claimed_by, m.claim_token)
    FROM (
        -- Time never runs backwards in a history: an event is recorded at
        -- the change context's instant, and one before its predecessor's
        -- (or before the claim of the attempt it ends) is refused (DK016).
        SELECT n.id, last.seq + 1 AS seq,
               CASE WHEN v_at < last.at THEN docket.job_refuse_backwards(n.id, v_at, last.at)
                    WHEN o.state = 'claimed' AND v_at < o.claimed_at THEN docket.job_refuse_backwards(n.id, v_at, o.claimed_at)
                    ELSE v_at END AS at,
               o.state AS from_state, n.state AS to_state,
               n.attempts AS attempt,
               CASE
                   WHEN n.state = o.state AND n.lease_generation = o.lease_generation THEN
                       coalesce('pinned to revisions ' || array_to_string(n.revisions, ', '), 'unpinned: any revision may run it')
                   -- A move out of a claim says what the attempt's renewals were.
                   WHEN o.state = 'claimed' THEN
                       docket.job_event_detail(n.state, n.claimed_by, n.lease_generation, n.diagnostic, o.renewals, o.renewed_at)
                   ELSE docket.job_event_detail(n.state, n.claimed_by, n.lease_generation, n.diagnostic)
               END AS detail,
               CASE WHEN n.state = 'claimed' THEN n.claimed_revision WHEN o.state = 'claimed' THEN o.claimed_revision END AS revision,
               -- The lease the move left the job holding; for a move that
               -- ends an attempt and leaves none, the lease the attempt
               -- held as it ended.
               CASE WHEN o.state = 'claimed' THEN coalesce(n.lease_expires_at, o.lease_expires_at)
                    ELSE n.lease_expires_at END AS lease_until,
               docket.job_outcome(n.state, n.result, n.diagnostic, n.claimed_by, n.claim_token, n.lease_generation,
                                  n.attempts, n.renewals, n.renewed_at, n.spent_effects, n.spent_money) AS outcome,
               -- The claim of the attempt the move ends.
               CASE WHEN o.state = 'claimed' THEN o.claimed_at END AS claimed_at,
               CASE WHEN o.state = 'claimed' THEN o.claimed_by END AS claimed_by,
               CASE WHEN o.state = 'claimed' THEN o.claim_token END AS claim_token,
               last.hash AS prev_hash
        FROM old_jobs o
        JOIN new_jobs n ON n.id = o.id
        CROSS JOIN LATERAL (
            SELECT e.seq, e.at, e.hash FROM docket.job_events e
            WHERE e.job_id = n.id
              -- Redundant, and what keeps a statement from opening every
              -- partition of the history: bounds known as it starts
              -- (v_lo, v_hi) let Postgres drop the partitions outside them
              -- before it prepares a lookup in each (n.id is known only
              -- row by row, when every partition has been prepared).
              AND e.job_id BETWEEN v_lo AND v_hi
            ORDER BY e.seq DESC LIMIT 1
        ) last
        WHERE docket.job_move_recorded(o.state, n.state, o.lease_generation, n.lease_generation, o.revisions, n.revisions)
        -- A fence: each column above is computed once, not again inside the hash.
        OFFSET 0
    ) m;
    -- Wake the workers of each queue that has a job queued again and due,
    -- or hold the wake-ups (job_wake_hold).
    IF v_queued THEN
        SELECT array_agg(n.id ORDER BY n.id), array_agg(n.queue ORDER BY n.id) INTO v_ids, v_queues
        FROM old_jobs o JOIN new_jobs n ON n.id = o.id
        WHERE n.state = 'queued' AND (o.state <> 'queued' OR n.revisions IS DISTINCT FROM o.revisions)
          AND NOT n.external AND n.available_at <= v_at;
        IF v_ids IS NOT NULL AND NOT (docket.job_wake_held() AND docket.job_wake_hold(v_ids, v_queues)) THEN
            PERFORM pg_notify('docket_jobs', q) FROM (SELECT DISTINCT q FROM unnest(v_queues) q) d;
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER jobs_record_update
    AFTER UPDATE ON docket.jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION docket.jobs_record_update();

-- job_visible reports whether p_principal may read the jobs of p_project: it
-- holds job.view or another job capability there (job.create, job.claim,
-- job.cancel, job.reconcile, job.pin, job.retry). Listing and reading by id through the
-- Go API are filtered by it; an operator in psql reads everything.
-- plpgsql, as grant_check is, so its plan is kept for the session.
CREATE OR REPLACE FUNCTION docket.job_visible(p_principal text, p_project text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM docket.grants g
        WHERE g.project = p_project AND g.principal = p_principal
          AND g.capability IN ('job.view', 'job.create', 'job.claim', 'job.cancel', 'job.reconcile', 'job.pin', 'job.retry')
    );
END
$$;

-- Operator views --------------------------------------------------------------
-- Storage never reads the clock, so the views order by the instant that matters
-- and leave the present to the reader, who filters with the instant they mean:
--     SELECT * FROM docket.jobs_expired_leases WHERE lease_expires_at <= '2026-11-29 10:00Z'

CREATE OR REPLACE VIEW docket.jobs_due WITH (security_invoker = true) AS
SELECT id, project, queue, priority, kind, available_at, attempts, max_attempts, external, created_at
FROM docket.jobs
WHERE state = 'queued'
ORDER BY available_at, priority, id;

COMMENT ON VIEW docket.jobs_due IS
    'Queued jobs, soonest claimable first. Due at instant T: WHERE available_at <= T.';

CREATE OR REPLACE VIEW docket.jobs_retrying WITH (security_invoker = true) AS
SELECT id, project, queue, kind, attempts, max_attempts, diagnostic, available_at AS retry_at, updated_at AS last_attempt_ended
FROM docket.jobs
WHERE state = 'queued' AND attempts > 0
ORDER BY available_at, id;

COMMENT ON VIEW docket.jobs_retrying IS
    'Queued jobs that ran before (a retryable failure waiting out its backoff, a release, a repeatable job whose lease expired), next retry first, with the last diagnostic. Still backing off at instant T: WHERE retry_at > T.';

CREATE OR REPLACE VIEW docket.jobs_exhausted WITH (security_invoker = true) AS
SELECT id, project, queue, kind, attempts, max_attempts, max_effects, spent_effects, max_money, spent_money, currency,
       diagnostic, updated_at AS exhausted_at
FROM docket.jobs
WHERE state = 'exhausted'
ORDER BY updated_at, id;

COMMENT ON VIEW docket.jobs_exhausted IS
    'Jobs a ceiling of their budget, or their project''s quota, stopped: what they may spend and spent, and why (diagnostic). docket.job_resume raises a ceiling and queues one again.';

CREATE OR REPLACE VIEW docket.jobs_expired_leases WITH (security_invoker = true) AS
SELECT id, project, queue, kind, claimed_by, claimed_at, lease_expires_at, lease_generation, attempts,
       max_attempts, repeatable
FROM docket.jobs
WHERE state = 'claimed'
ORDER BY lease_expires_at, id;

COMMENT ON VIEW docket.jobs_expired_leases IS
    'Claimed jobs by lease expiry, earliest first. Expired at instant T: WHERE lease_expires_at <= T; docket.job_expire_leases sweeps them.';

CREATE OR REPLACE VIEW docket.jobs_dead WITH (security_invoker = true) AS
SELECT id, project, queue, kind, attempts, max_attempts, diagnostic, finished_at
FROM docket.jobs
WHERE state = 'dead'
ORDER BY finished_at DESC, id DESC;

COMMENT ON VIEW docket.jobs_dead IS 'Jobs that ran out of attempts, latest first.';

CREATE OR REPLACE VIEW docket.jobs_uncertain WITH (security_invoker = true) AS
SELECT id, project, queue, kind, attempts, max_attempts, diagnostic, updated_at AS uncertain_since
FROM docket.jobs
WHERE state = 'uncertain'
ORDER BY updated_at, id;

COMMENT ON VIEW docket.jobs_uncertain IS
    'Jobs whose worker may or may not have done the work, oldest first: settle each with docket.job_reconcile or cancel it.';

CREATE OR REPLACE VIEW docket.jobs_undecodable WITH (security_invoker = true) AS
SELECT j.id, j.project, j.queue, j.kind, j.payload_schema, j.state, j.available_at
FROM docket.jobs j
WHERE j.state IN ('queued', 'claimed', 'uncertain')
  AND NOT EXISTS (SELECT 1 FROM docket.job_decoders d WHERE d.kind = j.kind AND d.payload_schema = j.payload_schema)
ORDER BY j.id;

COMMENT ON VIEW docket.jobs_undecodable IS
    'Unfinished jobs whose payload schema no registered deployment can decode.';

-- Protocol ------------------------------------------------------------------

-- job_require_batch refuses (DK010) a batch size outside 1..p_max.
CREATE OR REPLACE FUNCTION docket.job_require_batch(p_what text, p_n integer, p_max integer) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_n IS NULL OR p_n < 1 OR p_n > p_max THEN
        RAISE EXCEPTION 'invalid %: % is outside 1..%', p_what, coalesce(p_n::text, 'NULL'), p_max
            USING ERRCODE = 'DK010';
    END IF;
END
$$;

-- job_require_lease refuses (DK010) a lease outside 1 second .. 24 hours.
-- NULL passes: the job's own lease applies.
CREATE OR REPLACE FUNCTION docket.job_require_lease(p_lease interval) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_lease IS NOT NULL AND (p_lease < '1 second' OR p_lease > '24 hours') THEN
        RAISE EXCEPTION 'invalid lease %: want 1 second .. 24 hours', p_lease
            USING ERRCODE = 'DK010';
    END IF;
END
$$;

-- job_require_queue refuses (DK010) a null or malformed queue name.
CREATE OR REPLACE FUNCTION docket.job_require_queue(p_queue text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_queue IS NULL OR NOT docket.valid_queue(p_queue) THEN
        RAISE EXCEPTION 'invalid queue %: want 1-63 characters of [a-z0-9_-], starting with a letter or digit',
            coalesce(quote_literal(p_queue), 'NULL') USING ERRCODE = 'DK010';
    END IF;
END
$$;

-- job_require_spec refuses (DK010), naming element p_i and what is wrong, a
-- job spec with a malformed kind or queue, no payload, or max_attempts
-- outside 1..100: the common mistakes, named before the table's constraints
-- (which remain the arbiter) would refuse them less plainly.
CREATE OR REPLACE FUNCTION docket.job_require_spec(p_i integer, p_kind text, p_queue text, p_payload jsonb, p_max_attempts integer)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_kind IS NULL OR NOT docket.valid_job_kind(p_kind) THEN
        RAISE EXCEPTION 'job %: invalid kind %: want dot-separated segments of [a-z0-9_-] starting with a letter, at most 128 characters',
            p_i, coalesce(quote_literal(p_kind), 'NULL') USING ERRCODE = 'DK010';
    ELSIF p_queue IS NULL OR NOT docket.valid_queue(p_queue) THEN
        RAISE EXCEPTION 'job %: invalid queue %: want 1-63 characters of [a-z0-9_-], starting with a letter or digit',
            p_i, coalesce(quote_literal(p_queue), 'NULL') USING ERRCODE = 'DK010';
    ELSIF p_payload IS NULL THEN
        RAISE EXCEPTION 'job %: payload is NULL: want a JSON value', p_i USING ERRCODE = 'DK010';
    ELSIF p_max_attempts IS NULL OR p_max_attempts NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'job %: max_attempts % is outside 1..100', p_i, coalesce(p_max_attempts::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
END
$$;

-- job_budget_refusal says what is wrong with budget p_budget of an enqueue,
-- or is NULL when it is none (SQL or JSON null) or well formed: an object
-- of "effects" and "money" (whole numbers of at least 1, each optional) and
-- "currency" (three capital letters, exactly when money is given), nothing
-- else.
CREATE OR REPLACE FUNCTION docket.job_budget_refusal(p_budget jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN p_budget IS NULL OR p_budget = 'null'::jsonb THEN NULL
    WHEN jsonb_typeof(p_budget) <> 'object' THEN 'want a JSON object of effects, money and currency'
    WHEN EXISTS (SELECT 1 FROM jsonb_object_keys(p_budget) k WHERE k NOT IN ('effects', 'money', 'currency'))
        THEN 'want only effects, money and currency'
    WHEN p_budget ? 'effects' AND NOT (jsonb_typeof(p_budget -> 'effects') = 'number'
                                       AND (p_budget ->> 'effects') ~ '^[0-9]{1,18}$' AND (p_budget ->> 'effects')::numeric >= 1)
        THEN 'effects: want a whole number of at least 1'
    WHEN p_budget ? 'money' AND NOT (jsonb_typeof(p_budget -> 'money') = 'number'
                                     AND (p_budget ->> 'money') ~ '^[0-9]{1,18}$' AND (p_budget ->> 'money')::numeric >= 1)
        THEN 'money: want a whole number of minor units, at least 1'
    WHEN (p_budget ? 'money') <> (p_budget ? 'currency')
        THEN 'a money ceiling and its currency come together'
    WHEN p_budget ? 'currency' AND NOT coalesce((p_budget ->> 'currency') ~ '^[A-Z]{3}$', false)
        THEN 'currency: want three capital letters (ISO 4217)'
END;

-- job_resolve_duplicate settles a job an enqueue did not insert because its
-- key was taken: the key must be held by a job in p_project of the same kind
-- that is the same request in every field that changes what the job does —
-- its payload and payload schema, params, inputs, requested output (asset,
-- kind, target root), whether it is repeatable, whether an external executor
-- runs it, its lane, its case, its compensation kind and its budget's
-- ceilings. It returns that job's id, or refuses with DK003 naming the key
-- and the fields that differ. Where and when the job runs (queue, priority, available_at) and
-- how persistently (max attempts, lease, backoff) are not compared: a retry
-- of an enqueue computes its instant afresh, and a deployment that raises a
-- ceiling must not turn its retries into conflicts. Arguments are as the
-- enqueue's ('' or 0: none; JSON null: no params). Call it in a statement
-- after the INSERT, so it sees the rows a concurrent enqueue committed. It
-- runs only for a key already held: the enqueue's own path pays nothing.
DROP FUNCTION IF EXISTS docket.job_resolve_duplicate(text, text, text, jsonb, integer, jsonb, text[], text, text, text, boolean,
                                                     boolean, bigint, bigint, text);
CREATE OR REPLACE FUNCTION docket.job_resolve_duplicate(p_project text, p_kind text, p_key text, p_payload jsonb, p_payload_schema integer,
                                             p_params jsonb, p_inputs text[], p_output text, p_output_kind text, p_root text,
                                             p_repeatable boolean, p_external boolean, p_lane_id bigint, p_case_id bigint,
                                             p_compensation_kind text, p_budget jsonb DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
    v_differ text[];
BEGIN
    SELECT * INTO v FROM docket.jobs
    WHERE project = p_project AND kind = p_kind AND idempotency_key = p_key;
    IF NOT FOUND THEN
        -- Defensive: under READ COMMITTED the INSERT skipped the element
        -- only because a committed or earlier row holds the key.
        RAISE EXCEPTION 'job of kind % with idempotency key % was not created, and no job holds the key: retry the enqueue',
            p_kind, quote_literal(p_key) USING ERRCODE = 'DK003';
    END IF;
    v_differ := ARRAY(
        SELECT d.field FROM (VALUES
            ('payload', v.payload IS DISTINCT FROM p_payload),
            ('payload schema', v.payload_schema IS DISTINCT FROM p_payload_schema),
            ('params', v.params IS DISTINCT FROM nullif(p_params, 'null'::jsonb)),
            ('inputs', v.inputs IS DISTINCT FROM coalesce(p_inputs, '{}')),
            ('requested output', v.requested_output IS DISTINCT FROM nullif(p_output, '')
                                 OR v.requested_kind IS DISTINCT FROM nullif(p_output_kind, '')
                                 OR v.target_root IS DISTINCT FROM nullif(p_root, '')),
            ('repeatable', v.repeatable IS DISTINCT FROM p_repeatable),
            ('external', v.external IS DISTINCT FROM p_external),
            ('lane', v.lane_id IS DISTINCT FROM nullif(p_lane_id, 0)),
            ('case', v.case_id IS DISTINCT FROM nullif(p_case_id, 0)),
            ('compensation kind', v.compensation_kind IS DISTINCT FROM nullif(p_compensation_kind, '')),
            ('budget', (v.max_effects, v.max_money, v.currency) IS DISTINCT FROM
                       ((p_budget ->> 'effects')::bigint, (p_budget ->> 'money')::bigint, p_budget ->> 'currency'))
        ) AS d(field, differs)
        WHERE d.differs);
    IF cardinality(v_differ) > 0 THEN
        RAISE EXCEPTION 'idempotency key % of kind % in project % is held by job % with a different %',
            quote_literal(p_key), p_kind, p_project, v.id, array_to_string(v_differ, ', ') USING ERRCODE = 'DK003';
    END IF;
    RETURN v.id;
END
$$;

-- job_enqueue_many enqueues a batch of jobs in p_project on behalf of p_actor
-- at p_now, in one statement, and returns (ord, duplicate, id) per element in
-- input order. The arrays are parallel, one element per job; '' for a key,
-- output, output kind, target root or compensation kind, 0 for a lane or
-- case, and the JSON null for params or inputs mean "none"; a null
-- available_at means p_now. The requested output's kinds and target roots
-- come last, and a caller that names neither may leave them out; then the
-- budgets (job_budget_refusal; NULL or JSON null: none), which a caller
-- that sets none may leave out.
--
-- A job whose (project, kind, idempotency key) already exists, or repeats an
-- earlier element of the batch, is not created again: the element returns the
-- id of the job holding the key, duplicate = true, when it is the same
-- request in every field that changes what the job does (see
-- job_resolve_duplicate for the list).
--
-- Refuses, writing nothing: a malformed actor or instant, an empty or
-- oversized batch, arrays of different lengths, a malformed kind, queue or
-- other field, an output kind or target root without an asset (DK010, or a
-- check violation naming the constraint); an actor without job.create on
-- p_project, or an unknown project (DK009); a key held by a job that is
-- another request (DK003, naming the fields that differ).
DROP FUNCTION IF EXISTS docket.job_enqueue_many(text, text, timestamptz, text[], text[], smallint[], jsonb[], integer[], text[],
                                                timestamptz[], integer[], boolean[], boolean[], interval[], interval[],
                                                interval[], double precision[], jsonb[], jsonb[], text[], bigint[], bigint[],
                                                text[], text[], text[]);
CREATE OR REPLACE FUNCTION docket.job_enqueue_many(
    p_project text, p_actor text, p_now timestamptz,
    p_kinds text[], p_queues text[], p_priorities smallint[], p_payloads jsonb[], p_payload_schemas integer[],
    p_keys text[], p_available_at timestamptz[], p_max_attempts integer[], p_repeatable boolean[],
    p_external boolean[], p_leases interval[], p_backoff_base interval[], p_backoff_cap interval[],
    p_backoff_jitter double precision[], p_params jsonb[], p_inputs jsonb[], p_outputs text[],
    p_lane_ids bigint[], p_case_ids bigint[], p_compensation_kinds text[],
    p_output_kinds text[] DEFAULT NULL, p_roots text[] DEFAULT NULL, p_budgets jsonb[] DEFAULT NULL)
RETURNS TABLE (ord integer, duplicate boolean, id bigint)
LANGUAGE plpgsql SET jit = off AS $$
#variable_conflict use_column
DECLARE
    n integer := cardinality(p_kinds);
    bad record;
    v_ids bigint[];
    v_inserted integer;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.job_require_batch('enqueue batch size', n, 100000);
    p_output_kinds := coalesce(p_output_kinds, array_fill(NULL::text, ARRAY[n]));
    p_roots := coalesce(p_roots, array_fill(NULL::text, ARRAY[n]));
    p_budgets := coalesce(p_budgets, array_fill(NULL::jsonb, ARRAY[n]));
    IF n = ALL (ARRAY[cardinality(p_queues), cardinality(p_priorities), cardinality(p_payloads),
                      cardinality(p_payload_schemas), cardinality(p_keys), cardinality(p_available_at),
                      cardinality(p_max_attempts), cardinality(p_repeatable), cardinality(p_external),
                      cardinality(p_leases), cardinality(p_backoff_base), cardinality(p_backoff_cap),
                      cardinality(p_backoff_jitter), cardinality(p_params), cardinality(p_inputs),
                      cardinality(p_outputs), cardinality(p_lane_ids), cardinality(p_case_ids),
                      cardinality(p_compensation_kinds), cardinality(p_output_kinds), cardinality(p_roots),
                      cardinality(p_budgets)]) IS NOT TRUE THEN
        RAISE EXCEPTION 'invalid enqueue batch: every field array must have % elements', n
            USING ERRCODE = 'DK010';
    END IF;
    IF NOT docket.grant_check(p_actor, p_project, 'job.create') THEN
        RAISE EXCEPTION '% may not create jobs in project %: it needs an explicit job.create grant', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;

    -- Early, named refusals for the common mistakes; the table's CHECKs
    -- remain the arbiter.
    SELECT x.i, x.kind, x.queue, x.payload, x.max_attempts INTO bad
    FROM unnest(p_kinds, p_queues, p_payloads, p_max_attempts) WITH ORDINALITY AS x(kind, queue, payload, max_attempts, i)
    WHERE x.kind IS NULL OR NOT docket.valid_job_kind(x.kind)
       OR x.queue IS NULL OR NOT docket.valid_queue(x.queue)
       OR x.payload IS NULL
       OR x.max_attempts IS NULL OR x.max_attempts NOT BETWEEN 1 AND 100
    LIMIT 1;
    IF FOUND THEN
        PERFORM docket.job_require_spec(bad.i::integer, bad.kind, bad.queue, bad.payload, bad.max_attempts);
    END IF;
    SELECT x.i, x.output, x.output_kind, x.root INTO bad
    FROM unnest(p_outputs, p_output_kinds, p_roots) WITH ORDINALITY AS x(output, output_kind, root, i)
    WHERE (nullif(x.output_kind, '') IS NOT NULL AND NOT docket.valid_output_kind(x.output_kind))
       OR (nullif(x.root, '') IS NOT NULL AND NOT docket.valid_target_root(x.root))
       OR (nullif(x.output, '') IS NULL AND (nullif(x.output_kind, '') IS NOT NULL OR nullif(x.root, '') IS NOT NULL))
    LIMIT 1;
    IF FOUND THEN
        PERFORM docket.job_require_request(bad.i::integer, bad.output, bad.output_kind, bad.root);
    END IF;
    SELECT x.i, docket.job_budget_refusal(x.budget) AS why INTO bad
    FROM unnest(p_budgets) WITH ORDINALITY AS x(budget, i)
    WHERE x.budget IS NOT NULL AND docket.job_budget_refusal(x.budget) IS NOT NULL
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job %: invalid budget: %', bad.i, bad.why USING ERRCODE = 'DK010';
    END IF;
    p_budgets := ARRAY(SELECT nullif(b, 'null'::jsonb) FROM unnest(p_budgets) AS b);

    v_ids := ARRAY(SELECT nextval('docket.jobs_id_seq') FROM generate_series(1, n));
    WITH inserted AS (
        INSERT INTO docket.jobs AS j (
            id, project, kind, queue, priority, payload, payload_schema, params, inputs, requested_output,
            requested_kind, target_root,
            lane_id, case_id, idempotency_key, compensation_kind, external, repeatable, available_at,
            max_attempts, lease, backoff_base, backoff_cap, backoff_jitter, max_effects, max_money, currency,
            created_by, created_at, updated_at)
        OVERRIDING SYSTEM VALUE
        SELECT x.new_id, p_project, x.kind, x.queue, x.priority, x.payload, x.payload_schema,
               nullif(x.params, 'null'::jsonb),
               CASE WHEN x.inputs IS NULL OR x.inputs = 'null'::jsonb THEN '{}'::text[]
                    ELSE ARRAY(SELECT jsonb_array_elements_text(x.inputs)) END,
               nullif(x.output, ''), nullif(x.output_kind, ''), nullif(x.root, ''),
               nullif(x.lane_id, 0), nullif(x.case_id, 0), nullif(x.key, ''),
               nullif(x.compensation_kind, ''), x.external, x.repeatable, coalesce(x.available_at, p_now),
               x.max_attempts, x.lease, x.backoff_base, x.backoff_cap, x.backoff_jitter,
               (x.budget ->> 'effects')::bigint, (x.budget ->> 'money')::bigint, x.budget ->> 'currency',
               p_actor, p_now, p_now
        FROM unnest(v_ids, p_kinds, p_queues, p_priorities, p_payloads, p_payload_schemas, p_keys, p_available_at,
                    p_max_attempts, p_repeatable, p_external, p_leases, p_backoff_base, p_backoff_cap,
                    p_backoff_jitter, p_params, p_inputs, p_outputs, p_lane_ids, p_case_ids, p_compensation_kinds,
                    p_output_kinds, p_roots, p_budgets)
             AS x(new_id, kind, queue, priority, payload, payload_schema, key, available_at, max_attempts,
                  repeatable, external, lease, backoff_base, backoff_cap, backoff_jitter, params,
                  inputs, output, lane_id, case_id, compensation_kind, output_kind, root, budget)
        ON CONFLICT (project, kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING j.id
    )
    SELECT count(*) INTO v_inserted FROM inserted;
    IF v_inserted = n THEN
        RETURN QUERY SELECT x.i::integer, false, x.id FROM unnest(v_ids) WITH ORDINALITY AS x(id, i);
    ELSE
        -- A statement of its own, so it sees the rows the INSERT made and
        -- those concurrent enqueues committed; each element not inserted
        -- names the job that holds its key.
        RETURN QUERY
        SELECT x.i::integer, j.id IS NULL,
               coalesce(j.id, docket.job_resolve_duplicate(
                   p_project, p_kinds[x.i], p_keys[x.i], p_payloads[x.i], p_payload_schemas[x.i], p_params[x.i],
                   CASE WHEN p_inputs[x.i] IS NULL OR p_inputs[x.i] = 'null'::jsonb THEN '{}'::text[]
                        ELSE ARRAY(SELECT jsonb_array_elements_text(p_inputs[x.i])) END,
                   p_outputs[x.i], p_output_kinds[x.i], p_roots[x.i], p_repeatable[x.i], p_external[x.i],
                   p_lane_ids[x.i], p_case_ids[x.i], p_compensation_kinds[x.i], p_budgets[x.i]))
        FROM unnest(v_ids) WITH ORDINALITY AS x(id, i)
        LEFT JOIN docket.jobs j ON j.id = x.id
        ORDER BY x.i;
    END IF;
END
$$;

-- job_enqueued is the row job_enqueue_one returns: whether the job was already
-- there under its idempotency key, and the job, with every column of
-- docket.jobs (a column added to the table is added here when the
-- definitions are next applied).
CREATE OR REPLACE VIEW docket.job_enqueued WITH (security_invoker = true) AS
SELECT false AS duplicate, j.* FROM docket.jobs j WHERE false;

-- job_enqueue_one enqueues one job as job_enqueue_many does a batch of one, with
-- scalar arguments and no arrays to unpack, and returns the job's row with
-- its duplicate flag: the path of a single enqueue. Refuses as
-- job_enqueue_many.
DROP FUNCTION IF EXISTS docket.job_enqueue_one(text, text, timestamptz, text, text, smallint, jsonb, integer, text, timestamptz,
                                               integer, boolean, boolean, interval, interval, interval, double precision,
                                               jsonb, text[], text, bigint, bigint, text, text, text);
CREATE OR REPLACE FUNCTION docket.job_enqueue_one(
    p_project text, p_actor text, p_now timestamptz,
    p_kind text, p_queue text, p_priority smallint, p_payload jsonb, p_payload_schema integer,
    p_key text, p_available_at timestamptz, p_max_attempts integer, p_repeatable boolean,
    p_external boolean, p_lease interval, p_backoff_base interval, p_backoff_cap interval,
    p_backoff_jitter double precision, p_params jsonb, p_inputs text[], p_output text,
    p_lane_id bigint, p_case_id bigint, p_compensation_kind text,
    p_output_kind text DEFAULT NULL, p_root text DEFAULT NULL, p_budget jsonb DEFAULT NULL)
RETURNS SETOF docket.job_enqueued
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
    v_id bigint;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    IF NOT docket.grant_check(p_actor, p_project, 'job.create') THEN
        RAISE EXCEPTION '% may not create jobs in project %: it needs an explicit job.create grant', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    PERFORM docket.job_require_spec(1, p_kind, p_queue, p_payload, p_max_attempts);
    IF nullif(p_output_kind, '') IS NOT NULL OR nullif(p_root, '') IS NOT NULL THEN
        PERFORM docket.job_require_request(1, p_output, p_output_kind, p_root);
    END IF;
    IF p_budget IS NOT NULL AND docket.job_budget_refusal(p_budget) IS NOT NULL THEN
        RAISE EXCEPTION 'job 1: invalid budget: %', docket.job_budget_refusal(p_budget) USING ERRCODE = 'DK010';
    END IF;
    p_budget := nullif(p_budget, 'null'::jsonb);
    INSERT INTO docket.jobs AS j (
        project, kind, queue, priority, payload, payload_schema, params, inputs, requested_output,
        requested_kind, target_root,
        lane_id, case_id, idempotency_key, compensation_kind, external, repeatable, available_at,
        max_attempts, lease, backoff_base, backoff_cap, backoff_jitter, max_effects, max_money, currency,
        created_by, created_at, updated_at)
    VALUES (p_project, p_kind, p_queue, p_priority, p_payload, p_payload_schema, nullif(p_params, 'null'::jsonb),
            coalesce(p_inputs, '{}'), nullif(p_output, ''), nullif(p_output_kind, ''), nullif(p_root, ''),
            nullif(p_lane_id, 0), nullif(p_case_id, 0),
            nullif(p_key, ''), nullif(p_compensation_kind, ''), p_external, p_repeatable,
            coalesce(p_available_at, p_now), p_max_attempts, p_lease, p_backoff_base, p_backoff_cap,
            p_backoff_jitter, (p_budget ->> 'effects')::bigint, (p_budget ->> 'money')::bigint, p_budget ->> 'currency',
            p_actor, p_now, p_now)
    ON CONFLICT (project, kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING * INTO v;
    IF FOUND THEN
        RETURN QUERY SELECT false, (v).*;
        RETURN;
    END IF;
    v_id := docket.job_resolve_duplicate(p_project, p_kind, p_key, p_payload, p_payload_schema, p_params, p_inputs,
                                         p_output, p_output_kind, p_root, p_repeatable, p_external, p_lane_id,
                                         p_case_id, p_compensation_kind, p_budget);
    SELECT * INTO v FROM docket.jobs WHERE id = v_id;
    RETURN QUERY SELECT true, (v).*;
END
$$;

-- Intake: bulk enqueue by COPY --------------------------------------------------
--
-- docket.job_intake (00044_job_intake.sql) is the table a bulk enqueue copies
-- its jobs into: Postgres refuses COPY FROM into docket.jobs, which has
-- row-level security, to all but its owner. The intake has none, and
-- docket_app and docket_operator may only INSERT into it (apply_privileges);
-- every row one statement inserts names the same intake (a uuid the caller
-- makes), project, actor and instant (at), and its ordinal in the batch
-- (ord, 1..n, the rows in that order). The statement trigger
-- job_intake_apply checks them as the caller and moves them into
-- docket.jobs through job_enqueue_many, so every rule of the array path
-- holds, and leaves the intake empty; the caller
-- reads the jobs' ids back, in order, with job_intake_take in the same
-- transaction.

-- job_intake_apply is the AFTER INSERT statement trigger of docket.job_intake:
-- it sets the change context for the rows' actor and instant (set_context:
-- the session's login must be bound to the actor, DK009; the instant
-- within the clock's bound, DK016); refuses (DK010) rows of one statement
-- naming more than one intake, project, actor or instant, rows that do
-- not come with the ordinals 1..n in that order, or an intake the
-- transaction copied already; enqueues the rows, in ordinal order, with
-- job_enqueue_many, which refuses as it refuses its arrays (malformed specs
-- DK010, an actor without job.create on the project or an unknown project
-- DK009, an idempotency key held by another request DK003, a batch over
-- 100,000); records each row's receipt (its job's id, whether it was a
-- duplicate), in order, in one row of job_intake_receipts for the
-- transaction; and deletes the rows. A refusal aborts the statement: no job, no receipt, no intake row.
-- SECURITY DEFINER, as the API functions are, to write the owner's tables;
-- every check is of the caller (session_user's bindings, the actor's grants).
-- It also deletes the receipts of other, finished transactions that never
-- read theirs, so the receipts hold only what running transactions wrote.
CREATE OR REPLACE FUNCTION docket.job_intake_apply() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, docket, pg_temp SET jit = off AS $$
DECLARE
    f record;
    a record;
    n integer;
BEGIN
    SELECT i.intake, i.project, i.actor, i.at INTO f FROM job_intake_new i LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM docket.set_context(f.actor, f.at);
    IF EXISTS (SELECT 1 FROM job_intake_new i
               WHERE (i.intake, i.project, i.actor, i.at) IS DISTINCT FROM (f.intake, f.project, f.actor, f.at)) THEN
        RAISE EXCEPTION 'invalid job intake: every row one statement inserts must name one intake, project, actor and instant'
            USING ERRCODE = 'DK010';
    END IF;
    -- The rows in the order they came (a transition table keeps it), which
    -- must be their ordinals' order; the ordinals, read in the same pass,
    -- prove it.
    SELECT array_agg(s.ord) AS ords, array_agg(s.kind) AS kinds, array_agg(s.queue) AS queues,
           array_agg(s.priority) AS priorities, array_agg(s.payload) AS payloads,
           array_agg(s.payload_schema) AS payload_schemas, array_agg(s.idempotency_key) AS keys,
           array_agg(s.available_at) AS available_at, array_agg(s.max_attempts) AS max_attempts,
           array_agg(s.repeatable) AS repeatable, array_agg(s.external) AS external, array_agg(s.lease) AS leases,
           array_agg(s.backoff_base) AS backoff_base, array_agg(s.backoff_cap) AS backoff_cap,
           array_agg(s.backoff_jitter) AS backoff_jitter, array_agg(s.params) AS params,
           array_agg(s.inputs) AS inputs, array_agg(s.output) AS outputs, array_agg(s.lane_id) AS lane_ids,
           array_agg(s.case_id) AS case_ids, array_agg(s.compensation_kind) AS compensation_kinds,
           array_agg(s.output_kind) AS output_kinds, array_agg(s.root) AS roots, array_agg(s.budget) AS budgets
    INTO a
    FROM job_intake_new s;
    n := cardinality(a.ords);
    IF a.ords IS DISTINCT FROM ARRAY(SELECT generate_series(1, n)) THEN
        RAISE EXCEPTION 'invalid job intake %: its % rows must come with the ordinals 1..%, in that order', f.intake, n, n
            USING ERRCODE = 'DK010';
    END IF;
    DELETE FROM docket.job_intake_receipts r WHERE r.made_in <> pg_current_xact_id();
    IF EXISTS (SELECT 1 FROM docket.job_intake_receipts r WHERE r.intake = f.intake) THEN
        RAISE EXCEPTION 'invalid job intake %: this transaction copied it already (each copy takes a fresh intake id)', f.intake
            USING ERRCODE = 'DK010';
    END IF;
    INSERT INTO docket.job_intake_receipts (intake, actor, made_in, ids, duplicates)
    SELECT f.intake, f.actor, pg_current_xact_id(), array_agg(e.id ORDER BY e.ord), array_agg(e.duplicate ORDER BY e.ord)
    FROM docket.job_enqueue_many(
        f.project, f.actor, f.at, a.kinds, a.queues, a.priorities, a.payloads, a.payload_schemas, a.keys,
        a.available_at, a.max_attempts, a.repeatable, a.external, a.leases, a.backoff_base, a.backoff_cap,
        a.backoff_jitter, a.params, a.inputs, a.outputs, a.lane_ids, a.case_ids, a.compensation_kinds,
        a.output_kinds, a.roots, a.budgets) e;
    DELETE FROM docket.job_intake i WHERE i.intake = f.intake;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER job_intake_apply
    AFTER INSERT ON docket.job_intake
    REFERENCING NEW TABLE AS job_intake_new
    FOR EACH STATEMENT EXECUTE FUNCTION docket.job_intake_apply();

-- job_intake_take returns the receipts of intake p_intake that this
-- transaction's COPY into docket.job_intake made for p_actor, in ordinal
-- order (ord, whether the job already existed under its idempotency key,
-- its id), and deletes them: each is read once. Receipts of another
-- transaction or another actor are not returned. Refuses as require_actor.
CREATE OR REPLACE FUNCTION docket.job_intake_take(p_intake uuid, p_actor text)
RETURNS TABLE (ord integer, duplicate boolean, id bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM docket.require_actor(p_actor);
    RETURN QUERY
    WITH taken AS (
        DELETE FROM docket.job_intake_receipts r
        WHERE r.intake = p_intake AND r.actor = p_actor AND r.made_in = pg_current_xact_id_if_assigned()
        RETURNING r.ids, r.duplicates
    )
    SELECT x.ord::integer, x.duplicate, x.id
    FROM taken t, unnest(t.ids, t.duplicates) WITH ORDINALITY AS x(id, duplicate, ord)
    ORDER BY x.ord;
END
$$;

-- job_token_digest is what a job stores of a claim token p_token: the first
-- 128 bits of its sha256, as a UUID of version 8 (RFC 9562's custom layout,
-- its version and variant digits set: 120 bits of the digest). The token is
-- handed to the claimant once, in the claim's answer, and stored nowhere; a
-- call on the lease presents it and is compared by its digest. A random
-- token is a version 4 UUID, so a digest is never taken for a token: one
-- read from storage and presented as a token is refused as stale.
CREATE OR REPLACE FUNCTION docket.job_token_digest(p_token uuid) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN overlay(overlay(encode(substr(sha256(uuid_send(p_token)), 1, 16), 'hex') PLACING '8' FROM 13 FOR 1)
               PLACING '8' FROM 17 FOR 1)::uuid;

-- job_take claims the jobs p_ids, which the caller chose and holds locked,
-- for p_actor at p_now: a fresh random token, a lease of p_lease (NULL: the
-- element of the parallel p_kinds/p_leases of the job's kind when it is
-- above zero, else the job's own), a new lease generation and one more
-- attempt, and the claimant's revision for the job's kind, the element of
-- p_revisions parallel to p_kinds (NULL: none). The one place a claim is
-- made, for job_claim, job_claim_id and job_claim_queue. The job stores the
-- token's digest (job_token_digest); the rows it returns carry the token
-- itself in claim_token, the only time anyone sees it. A job created after
-- p_now is not claimed (a claim never comes before its job). Its UPDATE
-- keeps its generic plan (plan_cache_mode), each job by primary key: with
-- few jobs a call, Postgres judged the custom plans cheaper and planned it
-- again at every call. A session keeps that plan, made with the table's
-- size at its first claim: made with a few jobs in the table, it read the
-- whole table at every later claim of the session (a worker's, for its
-- life, until an ANALYZE of jobs), as reading a few pages whole costs less
-- than ten probes of the key. Its statements plan without sequential scans
-- (enable_seqscan), so each job is found by its key whatever the table
-- held (TestAClaimReadsItsJobsByKeyWhateverTheTableWas).
CREATE OR REPLACE FUNCTION docket.job_take(p_ids bigint[], p_lease interval, p_actor text, p_now timestamptz,
                                p_kinds text[] DEFAULT NULL, p_leases interval[] DEFAULT NULL,
                                p_revisions text[] DEFAULT NULL)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
    -- A job with a money ceiling reserves what it may still spend in its
    -- project's quota first (job_budget_admit); one the quota cannot take
    -- is exhausted instead of claimed. The partial index of such jobs finds
    -- them, or finds none, without reading the others.
    IF EXISTS (SELECT 1 FROM docket.jobs b WHERE b.id = ANY (p_ids) AND b.max_money IS NOT NULL) THEN
        p_ids := docket.job_budget_admit(p_ids, p_now);
    END IF;
    RETURN QUERY
    WITH fresh AS (
        SELECT f.id, gen_random_uuid() AS token FROM unnest(p_ids) AS f(id)
    ),
    taken AS (
        UPDATE docket.jobs j
        SET state = 'claimed',
            claim_token = docket.job_token_digest(fresh.token),
            claimed_by = p_actor,
            claimed_at = p_now,
            lease_expires_at = p_now + coalesce(
                p_lease,
                (SELECT d.lease FROM unnest(p_kinds, p_leases) AS d(kind, lease) WHERE d.kind = j.kind AND d.lease > '0' LIMIT 1),
                j.lease),
            claimed_revision = (SELECT d.revision FROM unnest(p_kinds, p_revisions) AS d(kind, revision)
                                WHERE d.kind = j.kind AND d.revision IS NOT NULL LIMIT 1),
            lease_generation = j.lease_generation + 1,
            attempts = j.attempts + 1,
            renewals = 0,
            renewed_at = NULL,
            updated_at = greatest(j.updated_at, p_now)
        FROM fresh
        WHERE j.id = fresh.id AND j.created_at <= p_now
        RETURNING j.*, fresh.token AS fresh_token
    )
    SELECT t.id, t.project, t.kind, t.queue, t.priority, t.payload, t.payload_schema, t.params, t.inputs,
           t.requested_output, t.requested_kind, t.target_root, t.lane_id, t.case_id, t.retry_of, t.idempotency_key,
           t.compensation_kind, t.external, t.repeatable, t.max_attempts, t.lease, t.backoff_base, t.backoff_cap,
           t.backoff_jitter, t.created_by, t.created_at, t.max_effects, t.max_money, t.currency, t.revisions,
           t.available_at, t.spent_effects, t.spent_money, t.renewals, t.renewed_at, t.state, t.attempts,
           t.lease_generation, t.updated_at, t.fresh_token, t.claimed_by, t.claimed_at, t.lease_expires_at,
           t.claimed_revision, t.finished_at, t.outcome_token, t.result, t.diagnostic
    FROM taken t;
END
$$;

-- queue_paused says whether queue p_queue of project p_project is paused
-- (docket.queue_pause): no claim takes its jobs, which stay queued, nor
-- takes over its expired leases, until it is resumed. A queue no row of
-- docket.queues names is running. One primary key probe; every claim
-- asks it. In plpgsql, whose plan the session keeps: a SQL function with a
-- subquery is never inlined, and is planned again at every call.
CREATE OR REPLACE FUNCTION docket.queue_paused(p_project text, p_queue text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT q.paused FROM docket.queues q WHERE q.project = p_project AND q.queue = p_queue), false);
END
$$;

-- job_claim claims up to p_limit due jobs of queue p_queue in p_project for
-- p_actor at p_now, for p_lease (NULL: each job's own lease). Queued jobs come
-- first by priority, available_at and id; then, while the batch has room,
-- expired claims of repeatable jobs with attempts left, earliest expiry first,
-- are taken over atomically. Each claimed job gets a fresh
-- random claim token, a new lease generation and one more attempt. Jobs other
-- claimants hold locked are skipped, never waited for. A paused queue
-- (queue_paused) hands out nothing: the answer is empty, and its jobs stay
-- queued.
--
-- p_kinds and p_schemas, when not NULL, are parallel arrays naming the (kind,
-- payload_schema) pairs the claimant can decode; no other job is handed to it.
-- p_revisions, parallel to p_kinds, is the claimant's handler revision for
-- each decoder's kind ('' or NULL: none), recorded with each claim. A job
-- pinned to revisions (docket.job_pin) is handed only to a claimant whose
-- revision for its kind is among them: never to one naming none.
--
-- An actor without job.claim on p_project (or an unknown project) gets the
-- empty answer "nothing available" gives. Refuses: a malformed actor, instant,
-- project or queue, a limit outside 1..1000, a lease outside 1 s .. 24 h, decoder
-- arrays of different lengths, malformed revisions (DK010, see
-- job_claim_revisions). Its scan keeps its generic plan (plan_cache_mode):
-- the claim index under a LIMIT, the plan wanted at every batch size.
CREATE OR REPLACE FUNCTION docket.job_claim(p_project text, p_queue text, p_limit integer, p_lease interval,
                                 p_kinds text[], p_schemas integer[], p_actor text, p_now timestamptz,
                                 p_revisions text[] DEFAULT NULL)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.job_require_queue(p_queue);
    PERFORM docket.job_require_batch('claim limit', p_limit, 1000);
    PERFORM docket.job_require_lease(p_lease);
    IF cardinality(p_kinds) IS DISTINCT FROM cardinality(p_schemas) THEN
        RAISE EXCEPTION 'invalid decoders: kinds and schemas must be parallel arrays of one length'
            USING ERRCODE = 'DK010';
    END IF;
    p_revisions := docket.job_claim_revisions(p_kinds, p_revisions);
    IF NOT docket.grant_check(p_actor, p_project, 'job.claim') OR docket.queue_paused(p_project, p_queue) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH queued AS (
        SELECT j.id FROM docket.jobs j
        WHERE j.state = 'queued' AND j.project = p_project AND j.queue = p_queue AND j.available_at <= p_now
          AND (p_kinds IS NULL OR (j.kind, j.payload_schema) IN (SELECT * FROM unnest(p_kinds, p_schemas)))
          AND (j.revisions IS NULL OR EXISTS (SELECT 1 FROM unnest(p_kinds, p_revisions) AS d(kind, revision)
                                              WHERE d.kind = j.kind AND d.revision = ANY (j.revisions)))
        ORDER BY j.priority, j.available_at, j.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ),
    -- Only as many takeovers as the queued jobs leave room for, so a claim
    -- never locks an expired lease it does not take.
    expired AS (
        SELECT j.id, j.lease_expires_at FROM docket.jobs j
        WHERE j.state = 'claimed' AND j.repeatable AND j.attempts < j.max_attempts
          AND j.project = p_project AND j.queue = p_queue AND j.lease_expires_at <= p_now
          AND (p_kinds IS NULL OR (j.kind, j.payload_schema) IN (SELECT * FROM unnest(p_kinds, p_schemas)))
          AND (j.revisions IS NULL OR EXISTS (SELECT 1 FROM unnest(p_kinds, p_revisions) AS d(kind, revision)
                                              WHERE d.kind = j.kind AND d.revision = ANY (j.revisions)))
        ORDER BY j.lease_expires_at, j.id
        LIMIT greatest(p_limit - (SELECT count(*) FROM queued), 0)
        FOR UPDATE SKIP LOCKED
    )
    SELECT * FROM docket.job_take(ARRAY(SELECT id FROM queued UNION ALL SELECT id FROM expired),
                                  p_lease, p_actor, p_now, p_kinds, NULL, p_revisions);
END
$$;

-- job_claim_id claims job p_id for p_actor at p_now as job_claim would, when it
-- is queued and due, or claimed with an expired lease and repeatable with
-- attempts left, recording p_revisions as job_claim does. Otherwise
-- (unknown, held by a live lease, not yet due, finished, locked by another
-- claimant, of a paused queue) it returns no row; so does an actor without job.claim on the
-- job's project.
--
-- Refuses: malformed input (DK010, as job_claim); a claimable job whose (kind,
-- payload_schema) is not among the claimant's decoders, or that is pinned to
-- revisions that do not include the claimant's for its kind (DK012): it is
-- left queued for a deployment that knows it, or runs one.
CREATE OR REPLACE FUNCTION docket.job_claim_id(p_id bigint, p_lease interval, p_kinds text[], p_schemas integer[],
                                    p_actor text, p_now timestamptz, p_revisions text[] DEFAULT NULL)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_lease(p_lease);
    IF cardinality(p_kinds) IS DISTINCT FROM cardinality(p_schemas) THEN
        RAISE EXCEPTION 'invalid decoders: kinds and schemas must be parallel arrays of one length'
            USING ERRCODE = 'DK010';
    END IF;
    p_revisions := docket.job_claim_revisions(p_kinds, p_revisions);
    -- The grant first, so a caller without one never locks the row.
    IF NOT docket.grant_check(p_actor, (SELECT j.project FROM docket.jobs j WHERE j.id = p_id), 'job.claim') THEN
        RETURN;
    END IF;
    SELECT * INTO v FROM docket.jobs j
    WHERE j.id = p_id
      AND ((j.state = 'queued' AND j.available_at <= p_now)
        OR (j.state = 'claimed' AND j.lease_expires_at <= p_now AND j.repeatable AND j.attempts < j.max_attempts))
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND OR docket.queue_paused(v.project, v.queue) THEN
        RETURN;
    END IF;
    IF p_kinds IS NOT NULL AND (v.kind, v.payload_schema) NOT IN (SELECT * FROM unnest(p_kinds, p_schemas)) THEN
        RAISE EXCEPTION 'job %: kind % payload schema % is not one this claimant can decode', v.id, v.kind, v.payload_schema
            USING ERRCODE = 'DK012';
    END IF;
    IF v.revisions IS NOT NULL AND NOT EXISTS (SELECT 1 FROM unnest(p_kinds, p_revisions) AS d(kind, revision)
                                               WHERE d.kind = v.kind AND d.revision = ANY (v.revisions)) THEN
        RAISE EXCEPTION 'job %: it is pinned to revisions %, and this claimant runs %', v.id, array_to_string(v.revisions, ', '),
            coalesce((SELECT d.revision FROM unnest(p_kinds, p_revisions) AS d(kind, revision)
                      WHERE d.kind = v.kind AND d.revision IS NOT NULL LIMIT 1), 'no revision')
            USING ERRCODE = 'DK012';
    END IF;
    RETURN QUERY SELECT * FROM docket.job_take(ARRAY[v.id], p_lease, p_actor, p_now, p_kinds, NULL, p_revisions);
END
$$;

-- job_lock_held locks job p_id and returns it when p_token holds its live
-- lease at p_now and p_actor may use it. Otherwise it refuses, naming why:
-- an unknown job (P0002); a token that does not hold the current lease,
-- because the job is not claimed, was claimed again, or its lease expired
-- (DK002); p_actor is not the lease's holder, or no longer holds job.claim
-- on the job's project (DK009): a lease is bound to its holder, and a token
-- alone is not enough; p_now before the claim (DK016): a lease is not used
-- before it was taken. p_op names the operation for the message.
CREATE OR REPLACE FUNCTION docket.job_lock_held(p_op text, p_id bigint, p_token uuid, p_actor text, p_now timestamptz)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    SELECT * INTO v FROM docket.jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', coalesce(p_id::text, 'NULL') USING ERRCODE = 'P0002';
    END IF;
    IF v.state <> 'claimed' THEN
        RAISE EXCEPTION 'job %: cannot %: it is %, not claimed', v.id, p_op, v.state USING ERRCODE = 'DK002';
    ELSIF docket.job_token_digest(p_token) IS DISTINCT FROM v.claim_token THEN
        RAISE EXCEPTION 'job %: cannot %: the token does not hold its current lease (generation %)', v.id, p_op, v.lease_generation
            USING ERRCODE = 'DK002';
    ELSIF v.lease_expires_at <= p_now THEN
        RAISE EXCEPTION 'job %: cannot %: its lease expired at %', v.id, p_op, v.lease_expires_at USING ERRCODE = 'DK002';
    END IF;
    PERFORM docket.job_require_holder(p_op, v, p_actor, p_now);
    RETURN v;
END
$$;

-- job_require_holder refuses p_actor's call p_op on the lease job v holds
-- unless p_actor is its holder and still holds job.claim on v's project
-- (DK009), and a p_now before the claim (DK016).
CREATE OR REPLACE FUNCTION docket.job_require_holder(p_op text, v docket.jobs, p_actor text, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF v.claimed_by IS DISTINCT FROM p_actor THEN
        RAISE EXCEPTION 'job %: % may not %: the lease is held by another claimant, and a lease is bound to its holder', v.id, p_actor, p_op
            USING ERRCODE = 'DK009';
    ELSIF NOT docket.grant_check(p_actor, v.project, 'job.claim') THEN
        RAISE EXCEPTION 'job %: % may not %: it no longer holds job.claim on project %', v.id, p_actor, p_op, v.project
            USING ERRCODE = 'DK009';
    ELSIF p_now < v.claimed_at THEN
        RAISE EXCEPTION 'job %: cannot % at %: it was claimed at %, and a record''s instants never run backwards', v.id, p_op, p_now, v.claimed_at
            USING ERRCODE = 'DK016';
    END IF;
END
$$;

-- job_renew, job_release, job_complete and job_fail each take the caller's
-- handler revision (NULL or '': none) and refuse one other than the claim's
-- (DK002, job_require_revision), writing nothing.

-- job_renew extends the live lease p_token holds on job p_id to p_now + p_lease
-- (NULL: the job's own lease). Renewal is not a transition and records no
-- event. Refuses: malformed input (DK010); as job_lock_held (P0002, DK002).
CREATE OR REPLACE FUNCTION docket.job_renew(p_id bigint, p_token uuid, p_lease interval, p_actor text, p_now timestamptz,
                                 p_revision text DEFAULT NULL)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_lease(p_lease);
    v := docket.job_lock_held('renew', p_id, p_token, p_actor, p_now);
    PERFORM docket.job_require_revision('renew', v, p_token, p_revision);
    UPDATE docket.jobs
    SET lease_expires_at = greatest(lease_expires_at, p_now + coalesce(p_lease, lease)),
        renewals = renewals + 1, renewed_at = p_now,
        updated_at = greatest(updated_at, p_now)
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- job_release gives the lease p_token holds on job p_id back: the job is queued
-- again, claimable from p_available_at (NULL or earlier than p_now: p_now), with
-- its attempts kept and p_reason as its diagnostic. A job released on its last
-- attempt has none left to run and goes to dead instead.
-- Refuses: malformed input (DK010); as job_lock_held (P0002, DK002).
CREATE OR REPLACE FUNCTION docket.job_release(p_id bigint, p_token uuid, p_available_at timestamptz, p_reason text,
                                   p_actor text, p_now timestamptz, p_revision text DEFAULT NULL)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    v := docket.job_lock_held('release', p_id, p_token, p_actor, p_now);
    PERFORM docket.job_require_revision('release', v, p_token, p_revision);
    IF v.attempts >= v.max_attempts THEN
        UPDATE docket.jobs
        SET state = 'dead', outcome_token = claim_token,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            diagnostic = docket.bounded_text(format('released on its last attempt (%s of %s): %s',
                                                    attempts, max_attempts, coalesce(p_reason, 'no reason given')), 4096),
            finished_at = p_now, updated_at = greatest(updated_at, p_now)
        WHERE id = v.id
        RETURNING * INTO v;
        RETURN v;
    END IF;
    UPDATE docket.jobs
    SET state = 'queued', claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
        available_at = greatest(coalesce(p_available_at, p_now), p_now),
        diagnostic = docket.bounded_text('released: ' || coalesce(p_reason, 'no reason given'), 4096),
        updated_at = greatest(updated_at, p_now)
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- job_settled_code decides a holder's finishing call on a job that is no
-- longer held under its token. Only the holder whose claim finished the job
-- (p_token's digest is its outcome_token) is answered about the outcome: the same
-- outcome again (p_outcome, and for a success p_outcome_result, is what the
-- job holds) is a quiet no-op, NULL; another outcome is DK014. Anyone else's
-- token is a stale claim, DK002 (a job cancelled, settled or taken over
-- under its holder included). A code, not a refusal, so a batch can decide
-- every element in one statement.
CREATE OR REPLACE FUNCTION docket.job_settled_code(p_outcome_token uuid, p_state text, p_result jsonb, p_token uuid,
                                        p_outcome text, p_outcome_result jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN p_outcome_token IS NULL OR docket.job_token_digest(p_token) IS DISTINCT FROM p_outcome_token THEN 'DK002'
    WHEN p_state = p_outcome AND (p_outcome <> 'succeeded' OR p_result IS NOT DISTINCT FROM p_outcome_result) THEN NULL
    ELSE 'DK014'
END;

-- job_settled_outcome refuses, or answers with the job, a holder's
-- finishing call on job v, which is no longer held under p_token, as
-- job_settled_code decides.
CREATE OR REPLACE FUNCTION docket.job_settled_outcome(p_op text, v docket.jobs, p_token uuid, p_outcome text, p_result jsonb)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
BEGIN
    CASE docket.job_settled_code(v.outcome_token, v.state, v.result, p_token, p_outcome, p_result)
    WHEN 'DK002' THEN
        RAISE EXCEPTION 'job %: cannot %: it is %, and the token does not hold the claim that finished it', v.id, p_op, v.state
            USING ERRCODE = 'DK002';
    WHEN 'DK014' THEN
        RAISE EXCEPTION '%', format('job %s already finished %s%s: it cannot %s', v.id, v.state,
            CASE WHEN v.state = 'succeeded' AND p_outcome = 'succeeded' THEN ' with another result' ELSE '' END, p_op)
            USING ERRCODE = 'DK014';
    ELSE
        RETURN v;
    END CASE;
END
$$;

-- job_complete finishes job p_id as succeeded with p_result (NULL or JSON null:
-- none), using the live lease p_token holds; the attempt spent p_spent_effects
-- effects and p_spent_money minor units (added to the job's, whatever its
-- ceilings: a success stands). Completing a succeeded job again with an
-- equal result is a quiet no-op that returns it. Run in the caller's
-- transaction, the caller's own writes commit with the transition or not at all.
-- Refuses, writing nothing: malformed input, a result over 1 MiB, a negative
-- spend (DK010); an unknown job (P0002); a job finished otherwise, or
-- succeeded with another result (DK014); a token that does not hold a live lease, including on a
-- cancelled job (DK002).
DROP FUNCTION IF EXISTS docket.job_complete(bigint, uuid, jsonb, text, timestamptz, text);
CREATE OR REPLACE FUNCTION docket.job_complete(p_id bigint, p_token uuid, p_result jsonb, p_actor text, p_now timestamptz,
                                    p_revision text DEFAULT NULL, p_spent_effects bigint DEFAULT 0,
                                    p_spent_money bigint DEFAULT 0)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_budget_spent(p_id, p_spent_effects, p_spent_money);
    p_result := nullif(p_result, 'null'::jsonb); -- JSON null is no result, as in job_complete_many
    IF docket.json_size(p_result) > 1048576 THEN
        RAISE EXCEPTION 'job %: result is % bytes, over the bound of 1048576', p_id, docket.json_size(p_result)
            USING ERRCODE = 'DK010';
    END IF;
    SELECT * INTO v FROM docket.jobs WHERE id = p_id FOR UPDATE;
    IF FOUND THEN
        PERFORM docket.job_require_revision('complete', v, p_token, p_revision);
    END IF;
    IF FOUND AND docket.machine_terminal('job', v.state) THEN
        RETURN docket.job_settled_outcome('complete', v, p_token, 'succeeded', p_result);
    END IF;
    v := docket.job_lock_held('complete', p_id, p_token, p_actor, p_now);
    UPDATE docket.jobs
    SET state = 'succeeded', result = p_result, diagnostic = NULL, outcome_token = claim_token,
        claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
        spent_effects = spent_effects + coalesce(p_spent_effects, 0), spent_money = spent_money + coalesce(p_spent_money, 0),
        finished_at = p_now, updated_at = greatest(updated_at, p_now)
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- result_reports_spend says whether a job's result p_result carries a
-- spend report: an object with a member spent (read by
-- budget_spend_read). Inlined wherever it is asked.
CREATE OR REPLACE FUNCTION docket.result_reports_spend(p_result jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN jsonb_typeof(p_result) = 'object' AND p_result ? 'spent';

-- job_complete_many completes a batch in one statement: element i completes
-- job p_ids[i] with token p_tokens[i] and result p_results[i] (JSON null: none),
-- its attempt having spent p_spent_effects[i] effects and p_spent_money[i]
-- minor units (NULL, or the array NULL: nothing; as job_complete),
-- under the handler revision p_revisions[i] (NULL: no revision for any), and
-- records its completion record p_records[i] (NULL or JSON null: none; else
-- an object {"asset", "kind", "root", "params", "inputs"}, the arguments of
-- job_completion_record; p_records NULL: none for any).
-- It returns one row per element, in input order: the job's state after the
-- call and, when element i was refused, the SQLSTATE job_complete would have
-- raised (DK002 stale claim or another revision than its claim's, DK009 the
-- actor is not the lease's holder or no longer holds job.claim, DK016 an
-- instant before the claim, DK014 finished otherwise, P0002 unknown, or of a
-- project the actor may not see named with a token it never held: then no
-- state) with nothing written for it. The other elements still complete. An
-- element whose token holds the job's live claim is also refused, with DK010
-- and the reason in refusal_reason, for its completion record: a record the
-- rule refuses (job_record_refusal: malformed, or not the job's request), or
-- none for a job that requests an output and has no record under this
-- claim; and for the result of a run's step whose spend report
-- (budget_spend_read) is malformed. So a bad record or report fails its own
-- element, not the batch, and never the batch's commit.
-- Refuses the whole batch: malformed input, arrays of different lengths, a
-- job named twice, a negative spend, a batch outside 1..1000 (DK010).
-- It finds the jobs by id and claim token, not by state: a job holds a token
-- exactly while it is claimed, so the rows are the same, but a query naming
-- the state may be planned on the partial index of leases instead of the
-- primary key (whenever the table was analyzed while no job was claimed),
-- and then scans every claimed job for each completion. Its UPDATE keeps its
-- generic plan (plan_cache_mode), each job by primary key.
DROP FUNCTION IF EXISTS docket.job_complete_many(bigint[], uuid[], jsonb[], text, timestamptz, text[]);
DROP FUNCTION IF EXISTS docket.job_complete_many(bigint[], uuid[], jsonb[], text, timestamptz, text[], jsonb[]);
CREATE OR REPLACE FUNCTION docket.job_complete_many(p_ids bigint[], p_tokens uuid[], p_results jsonb[], p_actor text, p_now timestamptz,
                                         p_revisions text[] DEFAULT NULL, p_records jsonb[] DEFAULT NULL,
                                         p_spent_effects bigint[] DEFAULT NULL, p_spent_money bigint[] DEFAULT NULL)
RETURNS TABLE (id bigint, state text, refusal text, refusal_reason text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_done bigint[];
    v_refused bigint[] := '{}'; -- the elements refused for their record, by id
    v_reasons text[] := '{}';   -- and why, in the same order
    v_claimable text[];         -- the projects where the actor holds job.claim
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    -- The grant asked once a batch, by the actor's grants (an index on
    -- the principal), not once a job: a holder whose job.claim was revoked
    -- completes nothing of that project.
    v_claimable := ARRAY(SELECT g.project FROM docket.grants g WHERE g.principal = p_actor AND g.capability = 'job.claim');
    PERFORM docket.job_require_batch('completion batch size', cardinality(p_ids), 1000);
    IF cardinality(p_tokens) IS DISTINCT FROM cardinality(p_ids) OR cardinality(p_results) IS DISTINCT FROM cardinality(p_ids)
       OR (p_revisions IS NOT NULL AND cardinality(p_revisions) IS DISTINCT FROM cardinality(p_ids))
       OR (p_records IS NOT NULL AND cardinality(p_records) IS DISTINCT FROM cardinality(p_ids))
       OR (p_spent_effects IS NOT NULL AND cardinality(p_spent_effects) IS DISTINCT FROM cardinality(p_ids))
       OR (p_spent_money IS NOT NULL AND cardinality(p_spent_money) IS DISTINCT FROM cardinality(p_ids)) THEN
        RAISE EXCEPTION 'invalid completion batch: ids, tokens, results, revisions, records and spend reports must have one length'
            USING ERRCODE = 'DK010';
    END IF;
    IF p_spent_effects IS NOT NULL OR p_spent_money IS NOT NULL THEN
        PERFORM docket.job_budget_spent(x.id, x.e, x.m)
        FROM unnest(p_ids, p_spent_effects, p_spent_money) AS x(id, e, m) WHERE x.e < 0 OR x.m < 0;
    END IF;
    IF (SELECT count(DISTINCT i) FROM unnest(p_ids) i) <> cardinality(p_ids) OR array_position(p_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'invalid completion batch: a job appears twice, or an id is NULL: name each job once'
            USING ERRCODE = 'DK010';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_results) r WHERE docket.json_size(r) > 1048576) THEN
        RAISE EXCEPTION 'invalid completion batch: a result is over the bound of 1048576 bytes'
            USING ERRCODE = 'DK010';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_records) r WHERE r IS NOT NULL AND r <> 'null'::jsonb) THEN
        -- Each record against the rule, when the element's token holds its
        -- job's live claim for this actor, its job locked as the completion
        -- below locks it; then the records the rule takes. The record of
        -- any other element is not judged at all: the completion refuses
        -- that element as stale, unknown or not the actor's, and a verdict
        -- on its record would tell a caller without the claim something of
        -- the job (what it requests).
        SELECT coalesce(array_agg(c.id ORDER BY c.i), '{}'), coalesce(array_agg(c.why ORDER BY c.i), '{}')
        INTO v_refused, v_reasons
        FROM (
            SELECT x.i, x.id,
                   CASE WHEN jsonb_typeof(x.record) <> 'object'
                        THEN format('job %s: invalid completion record: want a JSON object', x.id)
                        ELSE docket.job_record_refusal(x.id, l.job, x.record ->> 'asset', x.record ->> 'kind', x.record ->> 'root',
                                                       x.record -> 'params', x.record -> 'inputs') END AS why
            FROM unnest(p_ids, p_tokens, p_revisions, p_records) WITH ORDINALITY AS x(id, token, revision, record, i)
            JOIN LATERAL (
                SELECT j AS job FROM docket.jobs j
                WHERE j.id = x.id AND j.claim_token = docket.job_token_digest(x.token) AND j.lease_expires_at > p_now
                  AND j.claimed_revision IS NOT DISTINCT FROM nullif(x.revision, '')
                  AND j.claimed_by = p_actor AND j.claimed_at <= p_now AND j.project = ANY (v_claimable)
                FOR UPDATE
            ) l ON true
            WHERE x.record IS NOT NULL AND x.record <> 'null'::jsonb
            OFFSET 0  -- each record judged once (see jobs_record_insert)
        ) c
        WHERE c.why IS NOT NULL;

        INSERT INTO docket.job_completions AS c (job_id, output_asset, output_kind, output_root, params_used, inputs_used,
                                                recorded_by, recorded_at, claim_token)
        SELECT x.id, x.record ->> 'asset', x.record ->> 'kind', j.target_root, nullif(x.record -> 'params', 'null'::jsonb),
               CASE WHEN x.record -> 'inputs' IS NULL OR x.record -> 'inputs' = 'null'::jsonb THEN '{}'::text[]
                    ELSE ARRAY(SELECT jsonb_array_elements_text(x.record -> 'inputs')) END,
               p_actor, p_now, j.claim_token
        FROM unnest(p_ids, p_tokens, p_revisions, p_records) AS x(id, token, revision, record)
        JOIN docket.jobs j ON j.id = x.id AND j.claim_token = docket.job_token_digest(x.token) AND j.lease_expires_at > p_now
                          AND j.claimed_revision IS NOT DISTINCT FROM nullif(x.revision, '')
                          AND j.claimed_by = p_actor AND j.claimed_at <= p_now AND j.project = ANY (v_claimable)
        WHERE x.record IS NOT NULL AND x.record <> 'null'::jsonb AND NOT (x.id = ANY (v_refused))
        ORDER BY x.id
        ON CONFLICT (job_id) DO NOTHING;
    END IF;
    -- The result of a run's step whose spend report the budget rule
    -- refuses fails its own element, as a refused record does (its job
    -- held by this claim, so a verdict tells nobody else anything).
    IF EXISTS (SELECT 1 FROM unnest(p_results) r WHERE docket.result_reports_spend(r)) THEN
        SELECT v_refused || coalesce(array_agg(c.id ORDER BY c.i), '{}'), v_reasons || coalesce(array_agg(c.why ORDER BY c.i), '{}')
        INTO v_refused, v_reasons
        FROM (
            SELECT x.i, x.id, docket.budget_spend_refusal(x.result -> 'spent', format('job %s', x.id)) AS why
            FROM unnest(p_ids, p_tokens, p_results) WITH ORDINALITY AS x(id, token, result, i)
            JOIN docket.jobs j ON j.id = x.id AND j.claim_token = docket.job_token_digest(x.token) AND j.claimed_by = p_actor
                              AND j.params ? 'run_id' AND NOT j.params ? 'compensates'
            WHERE docket.result_reports_spend(x.result) AND NOT (x.id = ANY (v_refused))
            OFFSET 0  -- each report judged once (see jobs_record_insert)
        ) c
        WHERE c.why IS NOT NULL;
    END IF;
    -- The successes in one statement, which locks only the rows it
    -- changes; then, in a statement of its own (so it sees what a concurrent
    -- transaction committed meanwhile), why each other element was refused.
    WITH input AS (
        SELECT x.id, docket.job_token_digest(x.token) AS digest, nullif(x.result, 'null'::jsonb) AS result,
               nullif(x.revision, '') AS revision, coalesce(x.spent_effects, 0) AS spent_effects,
               coalesce(x.spent_money, 0) AS spent_money
        FROM unnest(p_ids, p_tokens, p_results, p_revisions, p_spent_effects, p_spent_money)
             AS x(id, token, result, revision, spent_effects, spent_money)
        WHERE NOT (x.id = ANY (v_refused))
    ),
    done AS (
        UPDATE docket.jobs j
        SET state = 'succeeded', result = input.result, diagnostic = NULL, outcome_token = j.claim_token,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            spent_effects = j.spent_effects + input.spent_effects, spent_money = j.spent_money + input.spent_money,
            finished_at = p_now, updated_at = greatest(j.updated_at, p_now)
        FROM input
        -- The claim token, not the state, names the claimed jobs: a job holds a
        -- token exactly while it is claimed (jobs_claimed_holds_lease), and a
        -- state predicate would let the planner walk jobs_lease_expiry_idx,
        -- whose statistics say no job is claimed after a backlog's ANALYZE.
        WHERE j.id = input.id AND j.claim_token = input.digest AND j.lease_expires_at > p_now
          AND j.claimed_revision IS NOT DISTINCT FROM input.revision
          AND j.claimed_by = p_actor AND j.claimed_at <= p_now AND j.project = ANY (v_claimable)
          -- A job that requests an output completes with its record only
          -- (jobs_completion_recorded would refuse the commit). Its record
          -- is read by key: an EXISTS here was planned, while the records
          -- were few, as a hash of every record, and a session kept that
          -- plan, building the hash at each batch, until the table was next
          -- analyzed.
          AND (j.requested_output IS NULL
               OR (SELECT c.claim_token = j.claim_token FROM docket.job_completions c WHERE c.job_id = j.id))
        RETURNING j.id
    )
    SELECT array_agg(done.id) INTO v_done FROM done;
    IF cardinality(v_done) = cardinality(p_ids) THEN
        RETURN QUERY SELECT x.id, 'succeeded'::text, NULL::text, NULL::text FROM unnest(p_ids) AS x(id);
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.id,
           CASE WHEN x.id = ANY (v_done) THEN 'succeeded' ELSE j.state::text END,
           CASE
               WHEN x.id = ANY (v_done) THEN NULL
               WHEN x.id = ANY (v_refused) OR unrecorded THEN 'DK010'
               WHEN j.id IS NULL THEN 'P0002'
               WHEN docket.job_token_digest(x.token) IN (j.claim_token, j.outcome_token)
                    AND j.claimed_revision IS DISTINCT FROM nullif(x.revision, '') THEN 'DK002'
               WHEN docket.job_token_digest(x.token) = j.claim_token AND j.lease_expires_at > p_now THEN
                   CASE
                       WHEN j.claimed_by IS DISTINCT FROM p_actor OR NOT (j.project = ANY (v_claimable)) THEN 'DK009'
                       WHEN p_now < j.claimed_at THEN 'DK016'
                       ELSE 'DK002' -- changed by a concurrent call since the update
                   END
               ELSE docket.job_settled_code(j.outcome_token, j.state, j.result, x.token, 'succeeded',
                                            nullif(x.result, 'null'::jsonb))
           END,
           CASE
               WHEN x.id = ANY (v_done) THEN NULL
               WHEN x.id = ANY (v_refused) THEN v_reasons[array_position(v_refused, x.id)]
               WHEN unrecorded THEN
                   format('job %s requests output %s: its completion must record the output it produced (docket.job_completion_record)',
                          x.id, quote_literal(j.requested_output))
           END
    FROM unnest(p_ids, p_tokens, p_results, p_revisions) WITH ORDINALITY AS x(id, token, result, revision, i)
    -- A job of a project the actor may not see, named with a token it
    -- never held, is unknown to it, state and all.
    LEFT JOIN docket.jobs j ON j.id = x.id
        AND (docket.job_token_digest(x.token) IN (j.claim_token, j.outcome_token) OR docket.job_visible(p_actor, j.project))
    -- unrecorded: the element's token holds the job's live claim, the job
    -- requests an output, and there is no record under this claim.
    CROSS JOIN LATERAL (
        SELECT j.requested_output IS NOT NULL AND docket.job_token_digest(x.token) = j.claim_token AND j.lease_expires_at > p_now
               AND j.claimed_by = p_actor AND j.claimed_at <= p_now
               AND j.claimed_revision IS NOT DISTINCT FROM nullif(x.revision, '')
               AND NOT EXISTS (SELECT 1 FROM docket.job_completions c WHERE c.job_id = j.id AND c.claim_token = j.claim_token)
               AS unrecorded
    ) u
    ORDER BY x.i;
END
$$;

-- job_fail reports that the attempt p_token holds on job p_id failed, classed:
--   retryable  back to queued after a backoff from the job's policy, or after
--              p_retry_after (a peer's hint, clamped to 0 .. 24 hours) when
--              given; dead when this was its last attempt;
--   permanent  failed;
--   uncertain  uncertain (its effect may have happened), or as retryable when
--              the job is repeatable.
-- p_diagnostic is kept, cut to 4096 characters. The attempt spent
-- p_spent_effects effects and p_spent_money minor units, added to the job's;
-- a retryable failure that leaves a ceiling of the job's budget reached makes
-- the job exhausted instead of queued (dead still, on its last attempt).
-- Failing a job already finished with the outcome this call would give is a
-- quiet no-op.
-- Refuses, writing nothing: malformed input, an unknown class or a negative
-- spend (DK010); an unknown job (P0002); a job finished otherwise (DK014); a
-- token that does not hold a live lease (DK002).
DROP FUNCTION IF EXISTS docket.job_fail(bigint, uuid, text, text, interval, text, timestamptz, text);
CREATE OR REPLACE FUNCTION docket.job_fail(p_id bigint, p_token uuid, p_class text, p_diagnostic text, p_retry_after interval,
                                p_actor text, p_now timestamptz, p_revision text DEFAULT NULL,
                                p_spent_effects bigint DEFAULT 0, p_spent_money bigint DEFAULT 0)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
    v_class text := p_class;
    v_diag text := docket.bounded_text(coalesce(p_diagnostic, 'no diagnostic given'), 4096);
    v_delay interval;
    v_spent_effects bigint := coalesce(p_spent_effects, 0);
    v_spent_money bigint := coalesce(p_spent_money, 0);
    v_reached text;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_budget_spent(p_id, p_spent_effects, p_spent_money);
    IF p_class IS NULL OR p_class NOT IN ('retryable', 'permanent', 'uncertain') THEN
        RAISE EXCEPTION 'invalid failure class %: want retryable, permanent or uncertain', coalesce(quote_literal(p_class), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    SELECT * INTO v FROM docket.jobs WHERE id = p_id FOR UPDATE;
    IF FOUND THEN
        PERFORM docket.job_require_revision('fail', v, p_token, p_revision);
    END IF;
    IF FOUND AND v.repeatable AND v_class = 'uncertain' THEN
        v_class := 'retryable';
    END IF;
    IF FOUND AND docket.machine_terminal('job', v.state) THEN
        RETURN docket.job_settled_outcome('fail', v, p_token,
            CASE v_class WHEN 'permanent' THEN 'failed' WHEN 'uncertain' THEN 'uncertain' ELSE 'dead' END, NULL);
    END IF;
    v := docket.job_lock_held('fail', p_id, p_token, p_actor, p_now);
    IF v.max_effects IS NOT NULL OR v.max_money IS NOT NULL THEN
        v.spent_effects := v.spent_effects + v_spent_effects;
        v.spent_money := v.spent_money + v_spent_money;
        v_reached := docket.job_budget_reached(v);
    END IF;
    IF v_class = 'permanent' THEN
        UPDATE docket.jobs
        SET state = 'failed', diagnostic = v_diag, outcome_token = claim_token,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            spent_effects = spent_effects + v_spent_effects, spent_money = spent_money + v_spent_money,
            finished_at = p_now, updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    ELSIF v_class = 'uncertain' THEN
        UPDATE docket.jobs
        SET state = 'uncertain', diagnostic = v_diag,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            spent_effects = spent_effects + v_spent_effects, spent_money = spent_money + v_spent_money,
            updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    ELSIF v.attempts >= v.max_attempts THEN
        UPDATE docket.jobs
        SET state = 'dead', diagnostic = v_diag, outcome_token = claim_token,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            spent_effects = spent_effects + v_spent_effects, spent_money = spent_money + v_spent_money,
            finished_at = p_now, updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    ELSIF v_reached IS NOT NULL THEN
        -- Out of budget, not failed: it waits for a raise (job_resume).
        UPDATE docket.jobs
        SET state = 'exhausted', diagnostic = docket.bounded_text('exhausted: ' || v_reached || '; the attempt failed: ' || v_diag, 4096),
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            spent_effects = spent_effects + v_spent_effects, spent_money = spent_money + v_spent_money,
            updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    ELSE
        v_delay := docket.job_retry_delay(p_retry_after, v.attempts, v.backoff_base, v.backoff_cap, v.backoff_jitter);
        UPDATE docket.jobs
        SET state = 'queued', diagnostic = v_diag, available_at = p_now + v_delay,
            claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
            spent_effects = spent_effects + v_spent_effects, spent_money = spent_money + v_spent_money,
            updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    END IF;
    RETURN v;
END
$$;

-- job_late_outcome records, late, the outcome the holder of an expired lease
-- holds: when job p_id became uncertain only because the lease of generation
-- p_generation expired (its last event is the sweep's claimed -> uncertain
-- of that attempt: the claim it names is p_token's, held by p_actor, and its
-- lease had expired when it was made) and no claim came since, p_actor may
-- say what the attempt did, within the setting late_outcome_window of the
-- sweep (docket.settings; 0 to 24 hours). p_outcome 'succeeded' (with
-- p_result; p_class is not read) makes the job succeeded; 'failed' moves it by p_class as
-- job_fail would have: permanent to failed, retryable to queued after
-- p_retry_after or its backoff (dead on its last attempt, exhausted with a
-- ceiling of its budget reached), uncertain leaves it as it is (nothing is
-- learnt). What the attempt spent is added. The event, by p_actor, says the
-- outcome was recorded late, of which lease, and when that lease expired.
-- Recording the same outcome again is a quiet no-op, unless p_once: then
-- it is refused as another outcome is (DK014), for a caller whose
-- transaction carries writes of its own that must not commit twice (a
-- worker's completion writes, tried again after a reply was lost).
-- Refuses, writing nothing: malformed input (DK010); an unknown job or one
-- p_actor may not see (P0002); an actor without job.claim on its project
-- (DK009); a job not left uncertain by this lease's expiry, claimed since,
-- or past the window (DK002, as a stale lease is).
DROP FUNCTION IF EXISTS docket.job_late_outcome(bigint, uuid, bigint, text, jsonb, text, text, interval, text, timestamptz,
                                                bigint, bigint);
CREATE OR REPLACE FUNCTION docket.job_late_outcome(p_id bigint, p_token uuid, p_generation bigint, p_outcome text,
                                                   p_result jsonb, p_class text, p_diagnostic text, p_retry_after interval,
                                                   p_actor text, p_now timestamptz,
                                                   p_spent_effects bigint DEFAULT 0, p_spent_money bigint DEFAULT 0,
                                                   p_once boolean DEFAULT false)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
    e docket.job_events;
    v_window interval;
    v_digest uuid := docket.job_token_digest(p_token);
    v_note text;
    v_state text;
    v_reached text;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_budget_spent(p_id, p_spent_effects, p_spent_money);
    IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'failed')
       OR p_outcome = 'failed' AND (p_class IS NULL OR p_class NOT IN ('retryable', 'permanent', 'uncertain')) THEN
        RAISE EXCEPTION 'invalid late outcome %, class %: want succeeded, or failed with a class retryable, permanent or uncertain',
            coalesce(quote_literal(p_outcome), 'NULL'), coalesce(quote_literal(p_class), 'NULL')
            USING ERRCODE = 'DK010';
    ELSIF p_token IS NULL OR p_generation IS NULL THEN
        RAISE EXCEPTION 'invalid late outcome: it names the lease by its token and generation' USING ERRCODE = 'DK010';
    ELSIF p_result IS NOT NULL AND docket.json_size(p_result) > 1048576 THEN
        RAISE EXCEPTION 'invalid late outcome: the result is over the bound of 1048576 bytes' USING ERRCODE = 'DK010';
    END IF;
    SELECT * INTO v FROM docket.jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND OR NOT docket.job_visible(p_actor, v.project) THEN
        RAISE EXCEPTION 'job % does not exist', coalesce(p_id::text, 'NULL') USING ERRCODE = 'P0002';
    END IF;
    IF NOT docket.grant_check(p_actor, v.project, 'job.claim') THEN
        RAISE EXCEPTION '% may not record an outcome of job %: it needs job.claim on the job''s project', p_actor, v.id
            USING ERRCODE = 'DK009';
    END IF;
    SELECT * INTO e FROM docket.job_events x WHERE x.job_id = v.id ORDER BY x.seq DESC LIMIT 1;
    -- Recorded late already by this holder: the same outcome again is a
    -- quiet no-op, another is refused.
    IF v.state <> 'uncertain' AND v.lease_generation = p_generation AND e.from_state = 'uncertain'
       AND e.actor = p_actor AND e.detail LIKE 'recorded late, lease generation ' || p_generation || ' %' THEN
        IF NOT coalesce(p_once, false) AND (p_outcome = 'succeeded') = (v.state = 'succeeded')
           AND (v.state <> 'succeeded' OR v.result IS NOT DISTINCT FROM nullif(p_result, 'null'::jsonb)) THEN
            RETURN v;
        END IF;
        RAISE EXCEPTION 'job %: its outcome was recorded late already, as %', v.id, v.state USING ERRCODE = 'DK014';
    END IF;
    SELECT s.value::interval INTO v_window FROM docket.settings s WHERE s.name = 'late_outcome_window';
    v_window := least(greatest(coalesce(v_window, '0'::interval), '0'::interval), '24 hours'::interval);
    IF v.state <> 'uncertain' OR v.lease_generation <> p_generation
       OR e.from_state IS DISTINCT FROM 'claimed' OR e.to_state IS DISTINCT FROM 'uncertain'
       OR e.claim_token IS DISTINCT FROM v_digest OR e.claimed_by IS DISTINCT FROM p_actor
       OR NOT (e.lease_until <= e.at) THEN
        RAISE EXCEPTION 'job % is %: its lease of generation % did not expire into uncertain with no claim since, so there is nothing to record late (a stale claim)',
            v.id, v.state, p_generation
            USING ERRCODE = 'DK002';
    ELSIF p_now < e.at THEN
        RAISE EXCEPTION 'job %: a late outcome at % comes before the expiry it follows, at %: a record''s instants never run backwards',
            v.id, p_now, e.at
            USING ERRCODE = 'DK016';
    ELSIF p_now > e.at + v_window THEN
        RAISE EXCEPTION 'job %: its lease expired into uncertain at %, more than % (late_outcome_window) before %: reconcile it instead',
            v.id, e.at, v_window, p_now
            USING ERRCODE = 'DK002';
    END IF;
    IF p_outcome = 'failed' AND p_class = 'uncertain' THEN
        RETURN v; -- nothing is learnt: it stays uncertain
    END IF;
    v_note := 'recorded late, lease generation ' || p_generation || ' (expired at '
        || to_char(e.lease_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || '): '
        || CASE WHEN p_outcome = 'succeeded' THEN 'it succeeded'
                ELSE docket.bounded_text(coalesce(p_diagnostic, 'no diagnostic given'), 3900) END;
    v.spent_effects := v.spent_effects + coalesce(p_spent_effects, 0);
    v.spent_money := v.spent_money + coalesce(p_spent_money, 0);
    v_reached := docket.job_budget_reached(v);
    v_state := CASE
        WHEN p_outcome = 'succeeded' THEN 'succeeded'
        WHEN p_class = 'permanent' THEN 'failed'
        WHEN v.attempts >= v.max_attempts THEN 'dead'
        WHEN v_reached IS NOT NULL THEN 'exhausted'
        ELSE 'queued' END;
    UPDATE docket.jobs j
    SET state = v_state,
        result = CASE WHEN v_state = 'succeeded' THEN nullif(p_result, 'null'::jsonb) END,
        diagnostic = CASE WHEN v_state = 'exhausted' THEN docket.bounded_text('exhausted: ' || v_reached || '; ' || v_note, 4096)
                          ELSE v_note END,
        outcome_token = CASE WHEN v_state IN ('succeeded', 'failed', 'dead') THEN v_digest END,
        finished_at = CASE WHEN v_state IN ('succeeded', 'failed', 'dead') THEN p_now END,
        available_at = CASE WHEN v_state = 'queued'
            THEN p_now + docket.job_retry_delay(p_retry_after, j.attempts, j.backoff_base, j.backoff_cap, j.backoff_jitter)
            ELSE j.available_at END,
        spent_effects = v.spent_effects, spent_money = v.spent_money,
        updated_at = greatest(j.updated_at, p_now)
    WHERE j.id = v.id RETURNING * INTO v;
    IF v.max_money IS NOT NULL THEN
        PERFORM docket.budget_settle_for(NULL, v.id, v.spent_money);
    END IF;
    RETURN v;
END
$$;

-- job_cancel withdraws job p_id, queued, claimed or uncertain, on behalf of
-- p_actor at p_now, with p_reason as its diagnostic. A holder learns of it when
-- its next renew, complete or fail is refused as stale. When the job names a
-- compensation kind, a job of that kind is enqueued in the same transaction
-- (payload {"job_id", "kind", "payload"}: the cancelled job's id, kind and
-- payload -- the payload omitted when it would carry the compensation's past
-- the payload bound, for the handler to read by id; idempotency key
-- compensate:<id>). The creator of the cancelled job, who
-- held job.create, declared it: the canceller needs no job.create of its own.
-- Cancelling a cancelled job again is a quiet no-op.
-- Refuses, writing nothing: malformed input (DK010); an unknown job (P0002);
-- an actor without job.cancel on the job's project (DK009); a job finished
-- otherwise (DK014).
CREATE OR REPLACE FUNCTION docket.job_cancel(p_id bigint, p_reason text, p_actor text, p_now timestamptz)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    SELECT * INTO v FROM docket.jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', coalesce(p_id::text, 'NULL') USING ERRCODE = 'P0002';
    END IF;
    IF NOT docket.grant_check(p_actor, v.project, 'job.cancel') THEN
        RAISE EXCEPTION '% may not cancel job %: it needs job.cancel on the job''s project', p_actor, v.id
            USING ERRCODE = 'DK009';
    END IF;
    IF v.state = 'cancelled' THEN
        RETURN v;
    ELSIF docket.machine_terminal('job', v.state) THEN
        RAISE EXCEPTION 'job % already finished %: it cannot be cancelled', v.id, v.state USING ERRCODE = 'DK014';
    END IF;
    UPDATE docket.jobs
    SET state = 'cancelled', diagnostic = docket.bounded_text('cancelled: ' || coalesce(p_reason, 'no reason given'), 4096),
        claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
        finished_at = p_now, updated_at = greatest(updated_at, p_now)
    WHERE id = v.id RETURNING * INTO v;
    IF v.compensation_kind IS NOT NULL THEN
        INSERT INTO docket.jobs (project, kind, queue, priority, payload, idempotency_key, available_at,
                                 created_by, created_at, updated_at)
        VALUES (v.project, v.compensation_kind, v.queue, v.priority,
                jsonb_build_object('job_id', v.id, 'kind', v.kind)
                    || CASE WHEN docket.json_size(v.payload) <= 1048576 - 1024 THEN jsonb_build_object('payload', v.payload) ELSE '{}' END,
                'compensate:' || v.id, p_now, p_actor, p_now, p_now)
        ON CONFLICT (project, kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
    END IF;
    RETURN v;
END
$$;

-- Retries and bulk actions ------------------------------------------------------
--
-- A finished job stays as it finished: a retry is a new job, of the same
-- project, kind, queue, priority, payload and request (params, inputs,
-- requested output), with the same attempts, lease, backoff and budget
-- ceilings, that names the job it retries in retry_of; its first event is
-- the retrier's, with detail "retry of job N". It is queued at once, with
-- no idempotency key, no pin (docket.job_pin: a retry is often what follows
-- a fix) and no trace context. Only a standalone job is retried: a job of a
-- lane or a case (plans' steps and tasks' jobs are of cases) is its owner's
-- to run again.

-- job_retry_insert enqueues a retry of each job of p_ids, in id order, on
-- behalf of p_actor at p_now, and returns the new jobs. Its callers check
-- the jobs and the grant.
CREATE OR REPLACE FUNCTION docket.job_retry_insert(p_ids bigint[], p_actor text, p_now timestamptz)
RETURNS SETOF docket.jobs
LANGUAGE sql AS $$
    INSERT INTO docket.jobs (project, kind, queue, priority, payload, payload_schema, params, inputs, requested_output,
                             requested_kind, target_root, compensation_kind, external, repeatable, available_at,
                             max_attempts, lease, backoff_base, backoff_cap, backoff_jitter, max_effects, max_money,
                             currency, retry_of, created_by, created_at, updated_at)
    SELECT o.project, o.kind, o.queue, o.priority, o.payload, o.payload_schema, o.params, o.inputs, o.requested_output,
           o.requested_kind, o.target_root, o.compensation_kind, o.external, o.repeatable, p_now,
           o.max_attempts, o.lease, o.backoff_base, o.backoff_cap, o.backoff_jitter, o.max_effects, o.max_money,
           o.currency, o.id, p_actor, p_now, p_now
    FROM docket.jobs o WHERE o.id = ANY (p_ids)
    ORDER BY o.id
    RETURNING *;
$$;

-- job_retry enqueues a retry of job p_id, finished failed, dead or
-- cancelled, on behalf of p_actor at p_now, and returns the new job. A job
-- may be retried more than once: each call makes a new job.
-- Refuses, writing nothing: malformed input (DK010); an unknown job
-- (P0002); an actor without job.retry on the job's project (DK009); a job
-- not finished (DK001: cancel it first, or let it finish); a job that
-- succeeded (DK014); a job of a lane or a case (DK010); a project that is
-- not active (DK009).
CREATE OR REPLACE FUNCTION docket.job_retry(p_id bigint, p_actor text, p_now timestamptz)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    SELECT * INTO v FROM docket.jobs WHERE id = p_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', coalesce(p_id::text, 'NULL') USING ERRCODE = 'P0002';
    END IF;
    IF NOT docket.grant_check(p_actor, v.project, 'job.retry') THEN
        RAISE EXCEPTION '% may not retry job %: it needs job.retry on the job''s project', p_actor, v.id
            USING ERRCODE = 'DK009';
    END IF;
    IF v.state = 'succeeded' THEN
        RAISE EXCEPTION 'job % succeeded: there is nothing to retry', v.id USING ERRCODE = 'DK014';
    ELSIF v.state NOT IN ('failed', 'dead', 'cancelled') THEN
        RAISE EXCEPTION 'job % is %: only a failed, dead or cancelled job is retried', v.id, v.state USING ERRCODE = 'DK001';
    END IF;
    IF v.lane_id IS NOT NULL OR v.case_id IS NOT NULL THEN
        RAISE EXCEPTION 'job % belongs to %: its owner runs it again, not a retry', v.id,
            CASE WHEN v.lane_id IS NOT NULL THEN 'lane ' || v.lane_id ELSE 'case ' || v.case_id END
            USING ERRCODE = 'DK010';
    END IF;
    SELECT * INTO v FROM docket.job_retry_insert(ARRAY[v.id], p_actor, p_now);
    RETURN v;
END
$$;

-- job_require_filter refuses (DK010) a bulk action's filter: a project name
-- malformed, a state not among p_states ('' is any of them), a malformed
-- kind or queue ('' is any), a window that ends before it starts.
CREATE OR REPLACE FUNCTION docket.job_require_filter(p_project text, p_state text, p_states text[], p_kind text,
                                                     p_queue text, p_since timestamptz, p_until timestamptz)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.require_valid(p_state IS NOT NULL AND (p_state = '' OR p_state = ANY (p_states)), 'state', p_state,
        'one of ' || array_to_string(p_states, ', ') || ', or empty for any of them');
    PERFORM docket.require_valid(p_kind IS NOT NULL AND (p_kind = '' OR docket.valid_job_kind(p_kind)), 'kind', p_kind,
        'a job kind, or empty for any');
    PERFORM docket.require_valid(p_queue IS NOT NULL AND (p_queue = '' OR docket.valid_queue(p_queue)), 'queue', p_queue,
        'a queue name, or empty for any');
    PERFORM docket.require_valid(p_since IS NULL OR p_until IS NULL OR p_since <= p_until, 'window',
        concat_ws(' .. ', p_since, p_until), 'a start no later than its end');
END
$$;

-- job_bulk_require begins a bulk action on the jobs of p_project on behalf
-- of p_actor at p_now: it sets the change context, and refuses a malformed
-- filter (job_require_filter, DK010) and an actor without p_capability on
-- p_project, or an unknown project (DK009).
CREATE OR REPLACE FUNCTION docket.job_bulk_require(p_project text, p_state text, p_states text[], p_kind text,
                                                   p_queue text, p_since timestamptz, p_until timestamptz,
                                                   p_capability text, p_actor text, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_filter(p_project, p_state, p_states, p_kind, p_queue, p_since, p_until);
    IF NOT docket.grant_check(p_actor, p_project, p_capability) THEN
        RAISE EXCEPTION '% may not % the jobs of project %: it needs % there', p_actor, split_part(p_capability, '.', 2),
            p_project, p_capability USING ERRCODE = 'DK009';
    END IF;
END
$$;

-- job_matching is the ids of the jobs of project p_project in p_states
-- (p_state: only that one, '' any), of kind p_kind and queue p_queue (''
-- any), created in [p_since, p_until) (NULL: unbounded), oldest first, at
-- most p_limit (NULL: all). With p_retry, only the standalone ones (no lane
-- or case) no job retries yet: what a bulk retry takes.
CREATE OR REPLACE FUNCTION docket.job_matching(p_project text, p_states text[], p_state text, p_kind text, p_queue text,
                                               p_since timestamptz, p_until timestamptz, p_retry boolean, p_limit integer)
RETURNS SETOF bigint
LANGUAGE sql STABLE AS $$
    SELECT o.id FROM docket.jobs o
    WHERE o.project = p_project AND o.state = ANY (CASE WHEN p_state = '' THEN p_states ELSE ARRAY[p_state] END)
      AND (p_kind = '' OR o.kind = p_kind) AND (p_queue = '' OR o.queue = p_queue)
      AND (p_since IS NULL OR o.created_at >= p_since) AND (p_until IS NULL OR o.created_at < p_until)
      AND (NOT p_retry OR (o.lane_id IS NULL AND o.case_id IS NULL
                           AND NOT EXISTS (SELECT 1 FROM docket.jobs r WHERE r.retry_of = o.id)))
    ORDER BY o.id
    LIMIT p_limit;
$$;

-- job_retry_count is how many jobs job_retry_matching would retry now with
-- the same filter (its arguments but the limit), for a caller to show
-- before acting: the finished failed, dead or cancelled standalone jobs of
-- p_project not retried yet, of state p_state, kind p_kind and queue
-- p_queue ('' any), created in [p_since, p_until) (NULL: unbounded).
-- Refuses: a malformed filter (DK010); an actor without job.retry on
-- p_project, or an unknown project (DK009).
CREATE OR REPLACE FUNCTION docket.job_retry_count(p_project text, p_state text, p_kind text, p_queue text,
                                                  p_since timestamptz, p_until timestamptz, p_actor text, p_now timestamptz)
RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.job_bulk_require(p_project, p_state, '{failed,dead,cancelled}', p_kind, p_queue, p_since, p_until, 'job.retry', p_actor, p_now);
    RETURN (SELECT count(*) FROM docket.job_matching(p_project, '{failed,dead,cancelled}', p_state, p_kind, p_queue,
                                                      p_since, p_until, true, NULL));
END
$$;

-- job_retry_matching retries, as job_retry does, up to p_limit (1..10000)
-- of the jobs job_retry_count counts, oldest first, on behalf of p_actor at
-- p_now, and returns the new jobs. A job retried already is not retried
-- again, so a caller repeats the call until it returns nothing; two bulk
-- retries of one project run one after the other. Refuses as
-- job_retry_count, and a limit outside 1..10000 (DK010), writing nothing.
CREATE OR REPLACE FUNCTION docket.job_retry_matching(p_project text, p_state text, p_kind text, p_queue text,
                                                     p_since timestamptz, p_until timestamptz, p_limit integer,
                                                     p_actor text, p_now timestamptz)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.job_bulk_require(p_project, p_state, '{failed,dead,cancelled}', p_kind, p_queue, p_since, p_until, 'job.retry', p_actor, p_now);
    PERFORM docket.job_require_batch('retry limit', p_limit, 10000);
    -- One bulk retry of a project at a time, by its project's row (a lock
    -- no foreign key check waits on): the next sees what this one retried.
    PERFORM 1 FROM docket.projects p WHERE p.name = p_project FOR NO KEY UPDATE;
    RETURN QUERY SELECT * FROM docket.job_retry_insert(
        ARRAY(SELECT docket.job_matching(p_project, '{failed,dead,cancelled}', p_state, p_kind, p_queue,
                                         p_since, p_until, true, p_limit)), p_actor, p_now);
END
$$;

-- job_cancel_count is how many jobs job_cancel_matching would cancel now
-- with the same filter: the queued jobs of p_project (p_state 'queued' or
-- ''), of kind p_kind and queue p_queue ('' any), created in [p_since,
-- p_until) (NULL: unbounded). Refuses: a malformed filter (DK010); an actor
-- without job.cancel on p_project, or an unknown project (DK009).
CREATE OR REPLACE FUNCTION docket.job_cancel_count(p_project text, p_state text, p_kind text, p_queue text,
                                                   p_since timestamptz, p_until timestamptz, p_actor text, p_now timestamptz)
RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.job_bulk_require(p_project, p_state, '{queued}', p_kind, p_queue, p_since, p_until, 'job.cancel', p_actor, p_now);
    RETURN (SELECT count(*) FROM docket.job_matching(p_project, '{queued}', p_state, p_kind, p_queue,
                                                      p_since, p_until, false, NULL));
END
$$;

-- job_cancel_matching cancels, as job_cancel does (p_reason its diagnostic,
-- compensations enqueued), up to p_limit (1..10000) of the jobs
-- job_cancel_count counts, oldest first, on behalf of p_actor at p_now, and
-- returns them cancelled. Jobs another transaction holds locked (a claim
-- under way) are skipped. Refuses as job_cancel_count, and a limit outside
-- 1..10000 (DK010), writing nothing.
CREATE OR REPLACE FUNCTION docket.job_cancel_matching(p_project text, p_state text, p_kind text, p_queue text,
                                                      p_since timestamptz, p_until timestamptz, p_reason text,
                                                      p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    PERFORM docket.job_bulk_require(p_project, p_state, '{queued}', p_kind, p_queue, p_since, p_until, 'job.cancel', p_actor, p_now);
    PERFORM docket.job_require_batch('cancel limit', p_limit, 10000);
    FOR v_id IN
        SELECT j.id FROM docket.jobs j
        WHERE j.id IN (SELECT docket.job_matching(p_project, '{queued}', p_state, p_kind, p_queue, p_since, p_until, false, p_limit))
          AND j.state = 'queued'
        ORDER BY j.id
        FOR UPDATE SKIP LOCKED
    LOOP
        RETURN NEXT docket.job_cancel(v_id, p_reason, p_actor, p_now);
    END LOOP;
END
$$;

-- job_reconcile settles uncertain job p_id on behalf of p_actor at p_now, by
-- someone who found out what happened: p_outcome succeeded (with p_result),
-- failed, or queued (run it again now; only with attempts left). p_note is
-- kept as the diagnostic. Settling a job again with the outcome it has is a
-- quiet no-op.
-- Refuses, writing nothing: malformed input or outcome, queued with no
-- attempts left (DK010); an unknown job (P0002); an actor without
-- job.reconcile on the job's project (DK009); a job that is not uncertain
-- (DK001), or finished otherwise (DK014).
CREATE OR REPLACE FUNCTION docket.job_reconcile(p_id bigint, p_outcome text, p_result jsonb, p_note text, p_actor text, p_now timestamptz)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'failed', 'queued') THEN
        RAISE EXCEPTION 'invalid reconcile outcome %: want succeeded, failed or queued', coalesce(quote_literal(p_outcome), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    p_result := nullif(p_result, 'null'::jsonb);
    IF p_result IS NOT NULL AND p_outcome <> 'succeeded' THEN
        RAISE EXCEPTION 'invalid reconcile: only a succeeded outcome carries a result' USING ERRCODE = 'DK010';
    END IF;
    IF docket.json_size(p_result) > 1048576 THEN
        RAISE EXCEPTION 'job %: result is over the bound of 1048576 bytes', p_id USING ERRCODE = 'DK010';
    END IF;
    SELECT * INTO v FROM docket.jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', coalesce(p_id::text, 'NULL') USING ERRCODE = 'P0002';
    END IF;
    IF NOT docket.grant_check(p_actor, v.project, 'job.reconcile') THEN
        RAISE EXCEPTION '% may not reconcile job %: it needs job.reconcile on the job''s project', p_actor, v.id
            USING ERRCODE = 'DK009';
    END IF;
    IF v.state = 'cancelled' THEN
        RAISE EXCEPTION 'job % was cancelled: it cannot be reconciled', v.id USING ERRCODE = 'DK014';
    ELSIF docket.machine_terminal('job', v.state) THEN
        -- A reconciliation repeated after a lost reply is a quiet no-op; a job
        -- that finished any other way is not reconciled after the fact.
        IF v.state = p_outcome AND v.result IS NOT DISTINCT FROM p_result AND EXISTS (
            SELECT 1 FROM docket.job_events e
            WHERE e.job_id = v.id AND e.from_state = 'uncertain' AND e.to_state = v.state) THEN
            RETURN v;
        END IF;
        RAISE EXCEPTION 'job % already finished %: it cannot be reconciled to %', v.id, v.state, p_outcome
            USING ERRCODE = 'DK014';
    ELSIF v.state <> 'uncertain' THEN
        RAISE EXCEPTION 'job % is %: only an uncertain job is reconciled', v.id, v.state USING ERRCODE = 'DK001';
    END IF;
    IF p_outcome = 'queued' THEN
        IF v.attempts >= v.max_attempts THEN
            RAISE EXCEPTION 'job %: cannot queue it again: it has used all % attempts; settle it succeeded or failed, or enqueue a new job',
                v.id, v.max_attempts USING ERRCODE = 'DK010';
        END IF;
        -- A ceiling reached: it waits for a raise instead (job_resume).
        UPDATE docket.jobs
        SET state = CASE WHEN docket.job_budget_reached(v) IS NULL THEN 'queued' ELSE 'exhausted' END,
            available_at = p_now,
            diagnostic = docket.bounded_text(CASE WHEN docket.job_budget_reached(v) IS NULL THEN ''
                                                  ELSE 'exhausted: ' || docket.job_budget_reached(v) || '; ' END
                                             || 'reconciled: run again: ' || coalesce(p_note, 'no note given'), 4096),
            updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    ELSE
        UPDATE docket.jobs
        SET state = p_outcome, result = p_result,
            diagnostic = docket.bounded_text('reconciled: ' || coalesce(p_note, 'no note given'), 4096),
            finished_at = p_now, updated_at = greatest(updated_at, p_now)
        WHERE id = v.id RETURNING * INTO v;
    END IF;
    RETURN v;
END
$$;

-- job_expire_leases sweeps up to p_limit claimed jobs whose lease expired at or
-- before p_now, in the projects where p_actor holds job.claim (a sweeper is a
-- claimant's agent), earliest first, skipping any another sweeper holds: a
-- repeatable job goes back to queued after its backoff (dead on its last
-- attempt); any other goes to uncertain, because its worker may have done the
-- work. Returns the jobs it moved. Refuses a malformed actor or instant, or a
-- limit outside 1..10000 (DK010).
CREATE OR REPLACE FUNCTION docket.job_expire_leases(p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep limit', p_limit, 10000);
    RETURN QUERY
    WITH expired AS (
        SELECT j.id FROM docket.jobs j
        WHERE j.state = 'claimed' AND j.lease_expires_at <= p_now
          AND j.project IN (SELECT g.project FROM docket.grants g
                            WHERE g.principal = p_actor AND g.capability = 'job.claim')
        ORDER BY j.lease_expires_at, j.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE docket.jobs j
    SET state = CASE WHEN NOT j.repeatable THEN 'uncertain'
                     WHEN j.attempts >= j.max_attempts THEN 'dead'
                     ELSE 'queued' END,
        available_at = CASE WHEN j.repeatable AND j.attempts < j.max_attempts
                            THEN p_now + docket.job_backoff(j.attempts, j.backoff_base, j.backoff_cap, j.backoff_jitter, random())
                            ELSE j.available_at END,
        diagnostic = docket.bounded_text(format('lease expired at %s, held by %s (lease generation %s)',
                                                to_char(j.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                                j.claimed_by, j.lease_generation), 4096),
        finished_at = CASE WHEN j.repeatable AND j.attempts >= j.max_attempts THEN p_now END,
        claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
        updated_at = greatest(j.updated_at, p_now)
    FROM expired
    WHERE j.id = expired.id
    RETURNING j.*;
END
$$;

-- job_decoders_register records that deployment p_deployment can decode the
-- (kind, payload_schema) pairs in the parallel arrays p_kinds and p_schemas,
-- running for each kind the handler revision of p_revisions, parallel to
-- p_kinds (NULL or '': none), on behalf of p_actor at p_now. Registering a
-- pair again refreshes it and records its revision anew.
-- A deployment's registrations belong to the login role that first made
-- them (registered_role): only that login (or the owner) registers for the
-- deployment again, so one service cannot overwrite what another's workers
-- said they run. A registration made before roles were recorded (NULL) is
-- taken by the next login that registers it.
-- Refuses, writing nothing: an actor holding job.claim on no project, a
-- deployment another login role registered (DK009); malformed input (DK010,
-- or a check violation naming the constraint; malformed revisions, see
-- job_claim_revisions).
CREATE OR REPLACE FUNCTION docket.job_decoders_register(p_deployment text, p_kinds text[], p_schemas integer[], p_actor text, p_now timestamptz,
                                             p_revisions text[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
    v_role text;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.principal = p_actor AND g.capability = 'job.claim') THEN
        RAISE EXCEPTION '% may not register decoders: it holds job.claim on no project', p_actor
            USING ERRCODE = 'DK009';
    END IF;
    IF cardinality(p_kinds) IS DISTINCT FROM cardinality(p_schemas) THEN
        RAISE EXCEPTION 'invalid decoders: kinds and schemas must be parallel arrays of one length'
            USING ERRCODE = 'DK010';
    END IF;
    -- One registration of a deployment at a time: the first login to
    -- register it owns it, however many of its workers start at once.
    PERFORM pg_advisory_xact_lock(hashtextextended('docket.job_decoders:' || coalesce(p_deployment, ''), 0));
    SELECT d.registered_role INTO v_role FROM docket.job_decoders d
    WHERE d.deployment = p_deployment AND d.registered_role IS DISTINCT FROM session_user AND d.registered_role IS NOT NULL
    LIMIT 1;
    IF FOUND AND NOT docket.session_is_owner() THEN
        RAISE EXCEPTION 'deployment % is registered by login role %: % (login role %) may not register for it',
            p_deployment, v_role, p_actor, session_user
            USING ERRCODE = 'DK009';
    END IF;
    p_revisions := docket.job_claim_revisions(p_kinds, p_revisions);
    INSERT INTO docket.job_decoders (kind, payload_schema, deployment, registered_by, registered_at, revision, registered_role)
    SELECT k, s, p_deployment, p_actor, p_now, r, session_user FROM unnest(p_kinds, p_schemas, p_revisions) AS x(k, s, r)
    ON CONFLICT (kind, payload_schema, deployment)
    DO UPDATE SET registered_by = EXCLUDED.registered_by, registered_at = EXCLUDED.registered_at,
                  revision = EXCLUDED.revision, registered_role = EXCLUDED.registered_role;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- job_verify checks job p_id's history: consecutive seq from 1, each event
-- chained to the one before and hashing to its contents (its revision and
-- claim included), starting in the initial state, every move one of the job
-- machine as migrated, attempts counting claims, time never running
-- backwards, and the job now in the state, with the attempts, result,
-- diagnostic, holder, claim token, lease generation, claim revision and pin
-- its last events say. It knows both shapes of a history: events written
-- before 00046 record each claim as an event of its own; since, a claim is
-- written with the move that ends its attempt (an event from claimed that
-- names its claim, claimed_at not NULL), and the claim move it implies
-- (from the previous event's state) is checked as a move, an attempt and an
-- instant. An attempt still open is on the row alone: its claim must follow
-- the last event (a move of the machine, one attempt more, not before it),
-- and the event that ends it will cover it. It reports also when the
-- machine's tables differ from the machine. It checks no caller: the
-- owner's audit (and job_verify's body) calls it.
CREATE OR REPLACE FUNCTION docket.job_history_verify(p_id bigint)
RETURNS TABLE (ok boolean, events integer, bad_seq integer, problem text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    e docket.job_events;
    last docket.job_events;
    j docket.jobs;
    n integer := 0;
    prev_hash bytea := decode(repeat('00', 32), 'hex');
    prev_state text;
    prev_attempt integer := 0;
    implied boolean;       -- the event ends an attempt whose claim was no event
    drift text := docket.job_machine_drift();
    want bytea;
    claim_revision text;   -- the revision the last claim recorded
    pin_detail text;       -- what the last pin recorded
    open_claim boolean;    -- the job holds a claim its history does not have yet
BEGIN
    SELECT * INTO j FROM docket.jobs WHERE id = p_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, 0, 0, format('job %s does not exist', coalesce(p_id::text, 'NULL'));
        RETURN;
    END IF;
    FOR e IN SELECT * FROM docket.job_events WHERE job_id = p_id ORDER BY seq LOOP
        n := n + 1;
        want := docket.job_event_hash(e.prev_hash, e.job_id, e.seq, e.from_state, e.to_state, e.actor, e.at, e.attempt, e.detail,
                                      e.lease_until, e.outcome, e.revision, e.claimed_at, e.claimed_by, e.claim_token);
        implied := e.claimed_at IS NOT NULL AND prev_state IS DISTINCT FROM 'claimed';
        IF e.seq <> n THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('expected event %s, found %s: events are missing', n, e.seq);
            RETURN;
        ELSIF e.prev_hash <> prev_hash THEN
            RETURN QUERY SELECT false, n, e.seq::integer, 'prev_hash does not match the previous event''s hash';
            RETURN;
        ELSIF e.hash <> want THEN
            RETURN QUERY SELECT false, n, e.seq::integer, 'hash does not match the event''s contents: the row was altered';
            RETURN;
        ELSIF e.claimed_at IS NOT NULL AND e.from_state IS DISTINCT FROM 'claimed' THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('event names a claim but moves from %s, not claimed',
                                                         coalesce(e.from_state, 'NULL'));
            RETURN;
        ELSIF implied AND (prev_state IS NULL OR NOT docket.job_machine_move(prev_state, 'claimed')) THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('the claim it ends does not follow the previous to_state %s',
                                                         coalesce(prev_state, 'NULL'));
            RETURN;
        ELSIF NOT implied AND e.from_state IS DISTINCT FROM prev_state THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('from_state %s does not follow the previous to_state %s',
                                                         coalesce(e.from_state, 'NULL'), coalesce(prev_state, 'NULL'));
            RETURN;
        ELSIF e.from_state IS NULL AND e.to_state <> 'queued' THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('history starts in %s, not the initial state queued', e.to_state);
            RETURN;
        ELSIF e.from_state IS NOT NULL AND NOT docket.job_machine_move(e.from_state, e.to_state) THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('%s -> %s is not a move of the job machine as migrated', e.from_state, e.to_state);
            RETURN;
        ELSIF e.attempt <> prev_attempt + (CASE WHEN implied THEN 1 ELSE 0 END)
                                        + (CASE WHEN e.to_state = 'claimed' THEN 1 ELSE 0 END) THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('attempt %s after %s: attempts count claims only', e.attempt, prev_attempt);
            RETURN;
        ELSIF e.at < last.at OR implied AND e.claimed_at < last.at OR e.at < e.claimed_at THEN
            RETURN QUERY SELECT false, n, e.seq::integer, format('recorded at %s (its claim at %s), before the event before it (%s): time ran backwards',
                                                         e.at, coalesce(e.claimed_at::text, 'none'), last.at);
            RETURN;
        END IF;
        IF e.to_state = 'claimed' OR e.claimed_at IS NOT NULL THEN
            claim_revision := e.revision;
        ELSIF e.from_state = 'queued' AND e.to_state = 'queued' THEN
            pin_detail := e.detail;
        END IF;
        prev_hash := e.hash;
        prev_state := e.to_state;
        prev_attempt := e.attempt;
        last := e;
    END LOOP;
    open_claim := j.state = 'claimed' AND prev_state IS DISTINCT FROM 'claimed';
    IF n = 0 THEN
        RETURN QUERY SELECT false, 0, 0, format('job %s has no events', p_id);
    ELSIF open_claim AND (NOT docket.job_machine_move(prev_state, 'claimed') OR j.attempts <> prev_attempt + 1) THEN
        RETURN QUERY SELECT false, n, 0, format('events end %s after %s attempts: the job''s claim, its attempt %s, does not follow them',
                                                 prev_state, prev_attempt, j.attempts);
    ELSIF open_claim AND j.claimed_at < last.at THEN
        RETURN QUERY SELECT false, n, last.seq::integer, format('the job was claimed at %s, before its last event (%s): time ran backwards',
                                                        j.claimed_at, last.at);
    ELSIF NOT open_claim AND (prev_state <> j.state OR prev_attempt <> j.attempts) THEN
        RETURN QUERY SELECT false, n, 0, format('events end %s after %s attempts, the job is %s after %s',
                                                 prev_state, prev_attempt, j.state, j.attempts);
    ELSIF NOT open_claim AND last.outcome <> docket.job_outcome(j.state, j.result, j.diagnostic, j.claimed_by,
                                             j.claim_token, j.lease_generation, j.attempts,
                                             -- a held lease's renewals come after its claim's event
                                             CASE WHEN j.state = 'claimed' THEN 0 ELSE j.renewals END,
                                             CASE WHEN j.state = 'claimed' THEN NULL ELSE j.renewed_at END,
                                             j.spent_effects, j.spent_money)
          -- A job held when its token was replaced by a digest (00034): its
          -- last event recorded the holding under the token.
          AND NOT EXISTS (SELECT 1 FROM docket.job_token_rekeys r
                          WHERE r.job_id = j.id AND r.seq = last.seq AND r.outcome_before = last.outcome
                            AND r.outcome_after = docket.job_outcome(j.state, j.result, j.diagnostic, j.claimed_by,
                                                                     j.claim_token, j.lease_generation, j.attempts)) THEN
        RETURN QUERY SELECT false, n, last.seq::integer, format('the job no longer holds what event %s recorded: its result, diagnostic, holder or token was rewritten',
                                                        last.seq);
    ELSIF j.state = 'claimed' AND (CASE
              -- an open claim: renewed, if at all, at or after it, for at
              -- most the longest lease
              WHEN open_claim THEN j.renewed_at < j.claimed_at
                   OR j.lease_expires_at > greatest(j.claimed_at, j.renewed_at) + interval '24 hours'
              WHEN j.renewals = 0 THEN j.lease_expires_at IS DISTINCT FROM last.lease_until
              -- renewed: later than the claim made it, by a renewal at or
              -- after the claim, for at most the longest lease
              ELSE j.lease_expires_at < last.lease_until OR j.renewed_at < j.claimed_at
                   OR j.lease_expires_at > j.renewed_at + interval '24 hours'
          END) THEN
        RETURN QUERY SELECT false, n, last.seq::integer,
            format('the job''s lease expires at %s, which neither its claim (until %s) nor its %s renewals made',
                   j.lease_expires_at, CASE WHEN open_claim THEN 'at most a day' ELSE last.lease_until::text END, j.renewals);
    ELSIF NOT open_claim AND claim_revision IS DISTINCT FROM j.claimed_revision THEN
        RETURN QUERY SELECT false, n, 0, format('the job''s claimed revision %s is not %s, which its last claim recorded',
                                                 coalesce(j.claimed_revision, 'NULL'), coalesce(claim_revision, 'NULL'));
    ELSIF (CASE WHEN j.revisions IS NULL THEN 'unpinned: any revision may run it'
                ELSE 'pinned to revisions ' || array_to_string(j.revisions, ', ') END)
          IS DISTINCT FROM coalesce(pin_detail, 'unpinned: any revision may run it') THEN
        RETURN QUERY SELECT false, n, 0, format('the job''s pin %s is not what its last pin recorded (%s)',
                                                 coalesce(j.revisions::text, 'NULL'), coalesce(pin_detail, 'no pin'));
    ELSIF drift IS NOT NULL THEN
        RETURN QUERY SELECT false, n, 0, 'the job machine''s tables were changed: ' || drift;
    ELSE
        RETURN QUERY SELECT true, n, 0, NULL::text;
    END IF;
END
$$;

-- job_verify is job_history_verify of job p_id for p_actor: no row when the
-- job does not exist or p_actor may not read its project's jobs
-- (job_visible). Refuses a malformed actor (DK010) or one the session may
-- not act as (DK009).
CREATE OR REPLACE FUNCTION docket.job_verify(p_id bigint, p_actor text)
RETURNS TABLE (ok boolean, events integer, bad_seq integer, problem text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    IF NOT EXISTS (SELECT 1 FROM docket.jobs j WHERE j.id = p_id AND docket.job_visible(p_actor, j.project)) THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM docket.job_history_verify(p_id);
END
$$;

-- job_machine is the job machine as migrated: each legal (from, to) pair,
-- and the initial and terminal states. job_verify judges by it.
CREATE OR REPLACE FUNCTION docket.job_machine_move(p_from text, p_to text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (p_from, p_to) IN (
    ('queued', 'claimed'), ('queued', 'cancelled'), ('queued', 'queued'),
    ('claimed', 'queued'), ('claimed', 'claimed'), ('claimed', 'succeeded'), ('claimed', 'failed'),
    ('claimed', 'dead'), ('claimed', 'uncertain'), ('claimed', 'cancelled'),
    ('uncertain', 'succeeded'), ('uncertain', 'failed'), ('uncertain', 'queued'), ('uncertain', 'cancelled'),
    -- budgets (00040)
    ('claimed', 'exhausted'), ('queued', 'exhausted'), ('uncertain', 'exhausted'), ('exhausted', 'queued'),
    ('exhausted', 'cancelled'),
    -- late outcomes (00047)
    ('uncertain', 'dead'));

-- job_machine_drift names how docket.job_states and docket.job_transitions
-- differ from the machine as migrated, or is NULL when they do not.
CREATE OR REPLACE FUNCTION docket.job_machine_drift() RETURNS text
LANGUAGE sql STABLE
RETURN (
    SELECT string_agg(d, '; ' ORDER BY d) FROM (
        SELECT format('transition %s -> %s is not the machine''s', t.from_state, t.to_state) AS d
        FROM docket.job_transitions t WHERE NOT docket.job_machine_move(t.from_state, t.to_state)
        UNION ALL
        SELECT format('state %s is %s and %s, not as the machine has it', s.state,
                      CASE WHEN s.initial THEN 'initial' ELSE 'not initial' END,
                      CASE WHEN s.terminal THEN 'terminal' ELSE 'not terminal' END)
        FROM docket.job_states s
        WHERE (s.initial, s.terminal) IS DISTINCT FROM (s.state = 'queued', s.state IN ('succeeded', 'failed', 'dead', 'cancelled'))
        UNION ALL
        SELECT 'transitions of the machine are missing from docket.job_transitions'
        WHERE (SELECT count(*) FROM docket.job_transitions WHERE docket.job_machine_move(from_state, to_state)) <> 20
    ) x
);

-- The worker's claim ----------------------------------------------------------------

-- job_claim_positions refuses (DK010) malformed claim positions (see
-- job_claim_queue): arrays of different lengths or over 1000, a NULL
-- element, a malformed project, a priority outside 1..4, an id below 1, an
-- infinite instant, a project named twice.
CREATE OR REPLACE FUNCTION docket.job_claim_positions(p_projects text[], p_priorities smallint[], p_at timestamptz[],
                                                      p_ids bigint[]) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    bad record;
BEGIN
    IF cardinality(p_projects) > 1000 OR cardinality(p_priorities) <> cardinality(p_projects)
       OR cardinality(p_at) <> cardinality(p_projects) OR cardinality(p_ids) <> cardinality(p_projects) THEN
        RAISE EXCEPTION 'invalid claim positions: % projects, % priorities, % instants, % ids: want parallel arrays of at most 1000',
            cardinality(p_projects), cardinality(p_priorities), cardinality(p_at), cardinality(p_ids)
            USING ERRCODE = 'DK010';
    END IF;
    SELECT x.* INTO bad
    FROM unnest(p_projects, p_priorities, p_at, p_ids) WITH ORDINALITY AS x(project, priority, at, id, i)
    WHERE x.project IS NULL OR NOT docket.valid_project_name(x.project) OR x.priority IS NULL OR x.priority NOT BETWEEN 1 AND 4
       OR x.at IS NULL OR NOT isfinite(x.at) OR x.id IS NULL OR x.id < 1
       OR array_position(p_projects, x.project) <> x.i
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid claim position %: project %, priority %, instant %, id %: want a project named once, a priority 1..4, a finite instant and an id of at least 1',
            bad.i, coalesce(quote_literal(docket.bounded_text(bad.project, 80)), 'NULL'), coalesce(bad.priority::text, 'NULL'),
            coalesce(bad.at::text, 'NULL'), coalesce(bad.id::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
END
$$;

-- job_claim_queue is how a worker fills a batch: it claims, for p_actor at
-- p_now, up to p_limit due jobs of queue p_queue in every project where the
-- actor holds job.claim, in one statement: queued jobs not for external
-- executors, first by priority, available_at and id, of the (kind, payload
-- schema) pairs the parallel p_kinds/p_schemas name (NULL: any). Each claimed
-- job has a fresh token, a new lease generation and one more attempt, and
-- holds its lease for the element of the parallel p_leases of its kind (NULL
-- or zero there, or p_leases NULL: the job's own lease). Each claim records
-- the worker's revision for the job's kind, the element of p_revisions
-- parallel to p_kinds, and a pinned job is handed only to a worker whose
-- revision for its kind it names (docket.jobs_unrunnable lists those no
-- deployment runs). Jobs another claimant has locked are skipped,
-- never waited for, so concurrent batches get distinct jobs. A job whose
-- payload version the caller does not decode is left queued for one that
-- does (docket.jobs_undecodable shows it). The projects whose queue p_queue
-- is paused (queue_paused) are skipped: their jobs stay queued. Nothing due,
-- or no job.claim anywhere, is an empty answer.
--
-- A claim reads each project's queue from its head, through the index
-- entries of every job claimed since the table was last vacuumed: a claim
-- leaves its jobs' entries behind, dead, until VACUUM removes them, and each
-- later claim steps over them. Under a sustained backlog that walk grows
-- with the jobs run since the last vacuum (hundreds of index pages a claim
-- within a minute; docs/worker.md, "Where a claim begins"). So a claim may
-- begin further on: the parallel p_from_projects, p_from_priorities,
-- p_from_at and p_from_ids give, for a project, a position (priority,
-- available_at, id), and the claim takes that project's jobs at or after it
-- only, in the same order. A worker passes the first job its last claim of
-- the project took; a job behind that position -- one of a higher priority,
-- or queued again, or whose enqueue committed after later jobs were
-- claimed -- is the next head read's (the worker reads from the head at
-- least every Batching.Rescan, and, at once, for the rest of a claim that
-- found fewer jobs past its positions than it asked for). A project no
-- position names is read from its head; NULL
-- arrays read every project from its head, as a claim always did.
--
-- Refuses: a malformed queue, a limit outside 1..1000, decoder arrays of
-- different lengths, a lease outside 1 s .. 24 h, malformed revisions;
-- position arrays not all NULL or all of one length (at most 1000), with a
-- NULL element, a malformed project, a priority outside 1..4, an id below 1,
-- an infinite instant, or a project named twice (DK010).
-- Its scan keeps its generic plan (plan_cache_mode), as job_claim's does:
-- one plan for both, the head being the position (0, -infinity, 0).
DROP FUNCTION IF EXISTS docket.job_claim_queue(text, integer, text[], integer[], interval[], text, timestamptz, text[]);
CREATE OR REPLACE FUNCTION docket.job_claim_queue(p_queue text, p_limit integer, p_kinds text[], p_schemas integer[],
                                       p_leases interval[], p_actor text, p_now timestamptz,
                                       p_revisions text[] DEFAULT NULL, p_from_projects text[] DEFAULT NULL,
                                       p_from_priorities smallint[] DEFAULT NULL, p_from_at timestamptz[] DEFAULT NULL,
                                       p_from_ids bigint[] DEFAULT NULL)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_projects text[];
    v_ids bigint[] := '{}';
    v_project text;
    v_from integer;    -- the element of the position arrays naming v_project
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_queue(p_queue);
    PERFORM docket.job_require_batch('claim limit', p_limit, 1000);
    IF cardinality(p_kinds) IS DISTINCT FROM cardinality(p_schemas)
       OR (p_leases IS NOT NULL AND cardinality(p_leases) IS DISTINCT FROM cardinality(p_kinds)) THEN
        RAISE EXCEPTION 'invalid decoders: kinds, schemas and leases must be parallel arrays of one length'
            USING ERRCODE = 'DK010';
    END IF;
    PERFORM docket.job_require_lease(nullif(l, '0')) FROM unnest(p_leases) l;
    p_revisions := docket.job_claim_revisions(p_kinds, p_revisions);
    IF num_nulls(p_from_projects, p_from_priorities, p_from_at, p_from_ids) NOT IN (0, 4) THEN
        RAISE EXCEPTION 'invalid claim positions: projects, priorities, instants and ids must be all NULL or parallel arrays of one length'
            USING ERRCODE = 'DK010';
    ELSIF p_from_projects IS NOT NULL THEN
        PERFORM docket.job_claim_positions(p_from_projects, p_from_priorities, p_from_at, p_from_ids);
    END IF;
    SELECT array_agg(g.project ORDER BY random()) INTO v_projects
    FROM docket.grants g WHERE g.principal = p_actor AND g.capability = 'job.claim'
      AND NOT docket.queue_paused(g.project, p_queue);
    -- One index range per project, in an order that changes from claim to
    -- claim, so no project's backlog starves another's.
    FOREACH v_project IN ARRAY coalesce(v_projects, '{}') LOOP
        EXIT WHEN cardinality(v_ids) >= p_limit;
        v_from := array_position(p_from_projects, v_project);
        v_ids := v_ids || ARRAY(
            SELECT j.id FROM docket.jobs j
            WHERE j.state = 'queued' AND j.project = v_project AND j.queue = p_queue AND j.available_at <= p_now
              AND (j.priority, j.available_at, j.id) >= (coalesce(p_from_priorities[v_from], 0),
                                                        coalesce(p_from_at[v_from], '-infinity'),
                                                        coalesce(p_from_ids[v_from], 0))
              AND NOT j.external
              AND (p_kinds IS NULL OR (j.kind, j.payload_schema) IN (SELECT * FROM unnest(p_kinds, p_schemas)))
              AND (j.revisions IS NULL OR EXISTS (SELECT 1 FROM unnest(p_kinds, p_revisions) AS d(kind, revision)
                                                  WHERE d.kind = j.kind AND d.revision = ANY (j.revisions)))
            ORDER BY j.priority, j.available_at, j.id
            LIMIT p_limit - cardinality(v_ids)
            FOR UPDATE SKIP LOCKED);
    END LOOP;
    IF cardinality(v_ids) > 0 THEN
        RETURN QUERY SELECT * FROM docket.job_take(v_ids, NULL, p_actor, p_now, p_kinds, p_leases, p_revisions);
    END IF;
    -- The wake-ups the transaction held, for the jobs this claim did not take.
    PERFORM docket.job_wake_release(v_ids);
END
$$;

-- Wake-ups --------------------------------------------------------------------
--
-- A commit that leaves a job queued and due notifies channel docket_jobs
-- with the job's queue (jobs_record_insert, jobs_record_update), and the
-- workers listening on it claim. A worker records its handlers' successes
-- and claims its next jobs in one transaction, and the jobs those successes
-- make due (a plan's next steps) are most often taken by that same claim: a
-- notification of them would wake every worker of the queue for jobs
-- already taken, and Postgres serializes notifying commits, through the
-- commit's flush, on one lock. So a transaction may hold its wake-ups: the
-- worker's begins with docket.wake set to 'held' (SET LOCAL). The triggers
-- then record the jobs they made due (job_wake_hold) instead of notifying,
-- and job_claim_queue, as it ends, notifies the queues of those its claim
-- did not take (job_wake_release). Holding only delays a notification to the
-- claim of the same transaction, and a job held is notified unless that
-- transaction holds it claimed: a session that sets docket.wake and never
-- claims delays its own jobs to the workers' poll, no one else's.

-- job_wake_held reports whether this transaction holds its wake-ups.
CREATE OR REPLACE FUNCTION docket.job_wake_held() RETURNS boolean
LANGUAGE sql STABLE
RETURN coalesce(current_setting('docket.wake', true) = 'held', false);

-- job_wake_ids is the jobs this transaction made due while holding its
-- wake-ups (job_wake_hold), in the order it made them; NULL when none.
CREATE OR REPLACE FUNCTION docket.job_wake_ids() RETURNS bigint[]
LANGUAGE sql STABLE
RETURN nullif(current_setting('docket.wake_jobs', true), '')::bigint[];

-- job_wake_hold records, for job_wake_release, that this transaction made due
-- the jobs p_ids, of the queues p_queues (parallel arrays), and returns true;
-- it returns false, recording nothing, for its caller to notify at once,
-- when the transaction does not hold its wake-ups or would hold more than
-- 1,000 jobs.
CREATE OR REPLACE FUNCTION docket.job_wake_hold(p_ids bigint[], p_queues text[]) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_ids bigint[] := coalesce(docket.job_wake_ids(), '{}');
BEGIN
    IF NOT docket.job_wake_held() OR cardinality(v_ids) + cardinality(p_ids) > 1000 THEN
        RETURN false;
    END IF;
    PERFORM set_config('docket.wake_jobs', (v_ids || p_ids)::text, true),
            set_config('docket.wake_queues',
                       (coalesce(nullif(current_setting('docket.wake_queues', true), '')::text[], '{}') || p_queues)::text, true);
    RETURN true;
END
$$;

-- job_wake_release ends the holding of this transaction's wake-ups: it
-- notifies docket_jobs with the queue of each job held, but of one of
-- p_claimed (the jobs a claim of this transaction chose, and the only ones
-- it reads) that is out of queued: a job the claim took wakes no one. From
-- then on the transaction notifies as it writes. A transaction that holds
-- nothing is left as it is. Not for callers: job_claim_queue calls it with
-- its own choice, and job_wake_flush with none.
CREATE OR REPLACE FUNCTION docket.job_wake_release(p_claimed bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_ids    bigint[];
    v_queues text[];
    v_notify text[] := '{}';
BEGIN
    IF NOT docket.job_wake_held() THEN
        RETURN;
    END IF;
    v_ids := docket.job_wake_ids();
    v_queues := nullif(current_setting('docket.wake_queues', true), '')::text[];
    PERFORM set_config('docket.wake', '', true), set_config('docket.wake_jobs', '', true),
            set_config('docket.wake_queues', '', true);
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    -- Each job the claim chose, by its key: a join would let the planner
    -- read a small table whole.
    FOR i IN 1 .. cardinality(v_ids) LOOP
        IF v_ids[i] = ANY (p_claimed) AND EXISTS (SELECT 1 FROM docket.jobs j WHERE j.id = v_ids[i] AND j.state <> 'queued') THEN
            CONTINUE;
        END IF;
        v_notify := v_notify || v_queues[i];
    END LOOP;
    PERFORM pg_notify('docket_jobs', q) FROM (SELECT DISTINCT q FROM unnest(v_notify) q) d;
END
$$;

-- job_wake_flush ends the holding of this transaction's wake-ups and
-- notifies the queue of every job held: for a worker whose claim was undone
-- (rolled back to a savepoint, its notifications with it). Not an API
-- function: it reads no table and acts for no one, only on the session's
-- own settings, so it runs as its caller.
CREATE OR REPLACE FUNCTION docket.job_wake_flush() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.job_wake_release('{}');
END
$$;

-- job_wake_pending says whether this transaction holds the wake-ups of jobs
-- it made due (job_wake_hold), for its claim to take: for a worker whose
-- queue was drained, deciding whether a claim riding with the commit of
-- its successes can find anything. Not an API function: it reads only the
-- session's own settings, so it runs as its caller.
CREATE OR REPLACE FUNCTION docket.job_wake_pending() RETURNS boolean
LANGUAGE sql STABLE
RETURN coalesce(cardinality(docket.job_wake_ids()) > 0, false);

-- The chain heads, for an auditor to export.
CREATE OR REPLACE VIEW docket.job_chain_heads WITH (security_invoker = true) AS
SELECT DISTINCT ON (e.job_id) e.job_id, e.seq, e.at, encode(e.hash, 'hex') AS hash
FROM docket.job_events e
ORDER BY e.job_id, e.seq DESC;

COMMENT ON VIEW docket.job_chain_heads IS
    'Each job''s last event and its hash. Exported where the owner cannot write, it shows later that a history was not rebuilt.';

-- The API ---------------------------------------------------------------------

INSERT INTO docket.api_functions (name, role) VALUES
    ('job_enqueue_one', 'app'), ('job_enqueue_many', 'app'), ('job_intake_take', 'app'), ('job_claim', 'app'), ('job_claim_id', 'app'),
    ('job_claim_queue', 'app'), ('job_renew', 'app'), ('job_release', 'app'), ('job_complete', 'app'),
    ('job_complete_many', 'app'), ('job_fail', 'app'), ('job_cancel', 'app'), ('job_reconcile', 'app'),
    ('job_expire_leases', 'app'), ('job_decoders_register', 'app'), ('job_verify', 'app'), ('job_late_outcome', 'app'),
    ('job_retry', 'app'), ('job_retry_count', 'app'), ('job_retry_matching', 'app'), ('job_cancel_count', 'app'),
    ('job_cancel_matching', 'app');

-- Budgets ---------------------------------------------------------------------
--
-- A job may carry ceilings (max_effects; max_money in minor units of
-- currency) that its attempts spend against: each attempt's handler reports
-- what it spent with the attempt's outcome (job_complete, job_complete_many,
-- job_fail), added to spent_effects and spent_money as the attempt ends. An
-- attempt that succeeded stands, whatever it spent. One that did not, and
-- left a ceiling reached, makes the job exhausted instead of queued again:
-- not failed, and not claimed by anyone until job_resume raises the
-- ceiling. A job with a money ceiling reserves, at each claim, what it may
-- still spend in its project's quota for its currency (budget_reserve_for,
-- budgets.sql); one the quota cannot take is exhausted instead of claimed,
-- and resumes when the quota has room again. As each attempt ends its
-- reservation shrinks to what it spent. Histories: the moves into and out
-- of exhausted are events, their detail says why, and the outcome digest
-- covers what was spent (job_outcome).

-- job_budget_reached says which ceiling of job v is reached, or NULL.
CREATE OR REPLACE FUNCTION docket.job_budget_reached(v docket.jobs) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN v.spent_money >= v.max_money
        THEN format('money: %s of %s %s spent', v.spent_money, v.max_money, v.currency)
    WHEN v.spent_effects >= v.max_effects
        THEN format('effects: %s of %s spent', v.spent_effects, v.max_effects)
END;

-- job_budget_spent refuses (DK010) a spend report of job p_id that is not
-- two whole numbers of zero or more: effects, and money in minor units.
CREATE OR REPLACE FUNCTION docket.job_budget_spent(p_id bigint, p_effects bigint, p_money bigint) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_effects < 0 OR p_money < 0 THEN
        RAISE EXCEPTION 'job %: invalid spend report (effects %, money %): want whole numbers of zero or more, money in minor units',
            p_id, p_effects, p_money USING ERRCODE = 'DK010';
    END IF;
END
$$;

-- job_budget_admit is job_take's first step for the jobs of p_ids that have
-- a money ceiling (the caller holds them locked): each reserves what it may
-- still spend, its ceiling less what it spent, in its project's quota for
-- its currency in the period p_now falls in. A queued job the quota cannot
-- take is exhausted, with the quota's refusal as its diagnostic; an expired
-- claim it cannot take is left to the lease sweep. Returns p_ids without
-- the jobs it did not admit.
CREATE OR REPLACE FUNCTION docket.job_budget_admit(p_ids bigint[], p_now timestamptz) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
    v_out bigint[] := '{}';
BEGIN
    FOR v IN SELECT * FROM docket.jobs b WHERE b.id = ANY (p_ids) AND b.max_money IS NOT NULL ORDER BY b.id LOOP
        BEGIN
            PERFORM docket.budget_reserve_for(v.project, v.currency, NULL, v.id, p_now, v.spent_money,
                                              greatest(v.max_money - v.spent_money, 0),
                                              format('job %s (ceiling %s, %s spent)', v.id, v.max_money, v.spent_money));
        EXCEPTION WHEN SQLSTATE 'DK009' THEN
            v_out := v_out || v.id;
            IF v.state = 'queued' THEN
                UPDATE docket.jobs
                SET state = 'exhausted', diagnostic = docket.bounded_text('exhausted: ' || SQLERRM, 4096),
                    updated_at = greatest(updated_at, p_now)
                WHERE id = v.id;
            END IF;
        END;
    END LOOP;
    IF cardinality(v_out) = 0 THEN
        RETURN p_ids;
    END IF;
    RETURN ARRAY(SELECT i FROM unnest(p_ids) AS i WHERE NOT (i = ANY (v_out)));
END
$$;

-- jobs_budget_settle shrinks a job's reservation to what it spent as an
-- attempt ends, by any route (an outcome, a release, a cancel, the lease
-- sweep).
CREATE OR REPLACE FUNCTION docket.jobs_budget_settle() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.budget_settle_for(NULL, NEW.id, NEW.spent_money);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER jobs_budget_settle
    AFTER UPDATE OF state ON docket.jobs
    FOR EACH ROW WHEN (OLD.state = 'claimed' AND NEW.state <> 'claimed' AND NEW.max_money IS NOT NULL)
    EXECUTE FUNCTION docket.jobs_budget_settle();

-- job_resume puts exhausted job p_id back in the queue on behalf of p_actor
-- at p_now, raising its ceilings to p_max_effects and p_max_money (NULL:
-- keep), due at once. The move is an event whose detail records the raise
-- (from, to, by whom). A job the quota stopped resumes without a raise and
-- reserves again at its next claim. Resuming a job that is queued again
-- with the ceilings asked for is a quiet no-op.
-- Refuses, writing nothing: an unknown job, or one the actor may not see
-- (P0002); an actor without budget.manage on the job's project (DK009); a
-- finished job (DK014), or another that is not exhausted (DK001); a lowered ceiling, a ceiling where the
-- job has none, or one still at or under what was spent (DK010).
CREATE OR REPLACE FUNCTION docket.job_resume(p_id bigint, p_max_effects bigint, p_max_money bigint, p_actor text, p_now timestamptz)
RETURNS docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    v docket.jobs;
    v_effects bigint;
    v_money bigint;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    SELECT * INTO v FROM docket.jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND OR NOT docket.job_visible(p_actor, v.project) THEN
        RAISE EXCEPTION 'job % does not exist', coalesce(p_id::text, 'NULL') USING ERRCODE = 'P0002';
    END IF;
    IF NOT docket.grant_check(p_actor, v.project, 'budget.manage') THEN
        RAISE EXCEPTION '% may not raise the ceilings of job %: it needs budget.manage on project %', p_actor, v.id, v.project
            USING ERRCODE = 'DK009';
    END IF;
    v_effects := coalesce(p_max_effects, v.max_effects);
    v_money := coalesce(p_max_money, v.max_money);
    IF v.state = 'queued' AND (v.max_effects, v.max_money) IS NOT DISTINCT FROM (v_effects, v_money) THEN
        RETURN v;
    ELSIF docket.machine_terminal('job', v.state) THEN
        RAISE EXCEPTION 'job % already finished %: it cannot resume', v.id, v.state USING ERRCODE = 'DK014';
    ELSIF v.state <> 'exhausted' THEN
        RAISE EXCEPTION 'job % is %: only an exhausted job resumes', v.id, v.state USING ERRCODE = 'DK001';
    END IF;
    IF (p_max_effects IS NOT NULL AND v.max_effects IS NULL) OR (p_max_money IS NOT NULL AND v.max_money IS NULL) THEN
        RAISE EXCEPTION 'job %: a resume raises the ceilings the job has; it adds none', v.id USING ERRCODE = 'DK010';
    ELSIF v_effects < v.max_effects OR v_money < v.max_money THEN
        RAISE EXCEPTION 'job %: a resume raises ceilings, never lowers them (effects % -> %, money % -> %)',
            v.id, v.max_effects, v_effects, v.max_money, v_money USING ERRCODE = 'DK010';
    ELSIF v.spent_effects >= v_effects OR v.spent_money >= v_money THEN
        RAISE EXCEPTION 'job %: still exhausted: % effects and % minor units were spent; raise the ceiling above what was spent',
            v.id, v.spent_effects, v.spent_money USING ERRCODE = 'DK010';
    END IF;
    UPDATE docket.jobs
    SET state = 'queued', max_effects = v_effects, max_money = v_money, available_at = p_now,
        diagnostic = docket.bounded_text(format('resumed by %s: %s', p_actor, coalesce(nullif(concat_ws(', ',
                         CASE WHEN v_effects IS DISTINCT FROM v.max_effects THEN format('effects %s -> %s', v.max_effects, v_effects) END,
                         CASE WHEN v_money IS DISTINCT FROM v.max_money THEN format('money %s -> %s %s', v.max_money, v_money, v.currency) END),
                         ''), 'ceilings as they were')), 4096),
        updated_at = greatest(updated_at, p_now)
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;

INSERT INTO docket.api_functions (name, role) VALUES ('job_resume', 'app');

-- Traces and census ------------------------------------------------------------

-- What OpenTelemetry needs from storage: docket.job_traces holds, per job, the
-- W3C trace context of the span that enqueued it, so the span that runs it
-- can link to it (job_trace_put); job_census counts the unfinished jobs of
-- each project and queue by state, for gauges read at every scrape. Finished
-- jobs are not counted: their number only grows, and a worker counts
-- outcomes as they happen.

CREATE OR REPLACE TRIGGER job_traces_immutable
    BEFORE UPDATE ON docket.job_traces
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('a job''s trace context is written once, with the job');

-- job_trace_put stores the trace context p_traceparent (and p_tracestate,
-- NULL or '' for none) with each of jobs p_ids, which p_actor must have
-- created in the current transaction and nobody has claimed yet: a trace
-- context says who asked for the job, so nobody may give one to a job they
-- did not just create, nor change one. "Created in the current
-- transaction" is decided by the row's xmin: the visible version of a row
-- whose xmin is still in progress was written by this transaction (the rows
-- of other transactions in progress are not visible), by its top level or by
-- a savepoint within it. It returns how many rows it wrote.
--
-- Refuses, writing nothing: a malformed actor, or one the session may not
-- act as (DK010, DK009); no ids, or more than 100000 (DK010); an id that is
-- not a job p_actor created in this transaction and nobody has claimed
-- (DK009, naming it); a job that has a trace context already (DK015); a
-- malformed traceparent or tracestate (a check violation naming the
-- constraint).
CREATE OR REPLACE FUNCTION docket.job_trace_put(p_ids bigint[], p_traceparent text, p_tracestate text, p_actor text, p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    -- The current transaction's id, with its epoch, and its low 32 bits, as a
    -- row's xmin holds them.
    v_top bigint := pg_current_xact_id()::text::bigint;
    v_low bigint := v_top % 4294967296;
    v_bad bigint;
    v_n integer;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('trace batch size', cardinality(p_ids), 100000);
    -- d is how many xids after the transaction's own the row's xmin was
    -- assigned (the difference of their low 32 bits, signed): 0 for a row the
    -- transaction wrote at its top level, more for one a savepoint of it
    -- wrote, or a transaction begun since wrote (which is no longer in
    -- progress if its row is visible), less for one written before it began.
    SELECT i.id INTO v_bad
    FROM unnest(p_ids) AS i(id)
    LEFT JOIN LATERAL (
        SELECT j.created_by, j.lease_generation,
               (((j.xmin::text::bigint - v_low) % 4294967296 + 4294967296 + 2147483648) % 4294967296) - 2147483648 AS d
        FROM docket.jobs j WHERE j.id = i.id
    ) j ON true
    WHERE i.id IS NULL OR j.d IS NULL OR j.created_by <> p_actor OR j.lease_generation <> 0 OR j.d < 0
       OR (j.d > 0 AND pg_xact_status((v_top + j.d)::text::xid8) <> 'in progress')
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job % is not one % created in this transaction: only a job''s creator gives it a trace context, with the job',
            coalesce(v_bad::text, 'NULL'), p_actor USING ERRCODE = 'DK009';
    END IF;
    INSERT INTO docket.job_traces (job_id, traceparent, tracestate)
    SELECT DISTINCT i.id, p_traceparent, nullif(p_tracestate, '') FROM unnest(p_ids) AS i(id)
    ON CONFLICT (job_id) DO NOTHING;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n < (SELECT count(DISTINCT i) FROM unnest(p_ids) i) THEN
        RAISE EXCEPTION 'a job of % has a trace context already: it is written once, with the job', p_ids
            USING ERRCODE = 'DK015';
    END IF;
    RETURN v_n;
END
$$;

-- job_census counts, at p_now, the unfinished jobs of every project whose
-- jobs p_actor may see (docket.job_visible), by queue and state: queued
-- (and of those, due: available_at <= p_now), claimed, uncertain, exhausted.
-- Each state is read on its own partial index (jobs_claim_idx,
-- jobs_lease_expiry_idx, jobs_uncertain_idx, jobs_exhausted_idx), so the census costs what the unfinished jobs number,
-- however many finished ones the table keeps. No row for a (project, queue,
-- state) with no job.
-- Refuses a malformed actor or instant, or an actor the session may not act
-- as (DK010, DK009).
CREATE OR REPLACE FUNCTION docket.job_census(p_actor text, p_now timestamptz)
RETURNS TABLE (project text, queue text, state text, jobs bigint, due bigint)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    v_projects text[];
BEGIN
    PERFORM docket.require_actor(p_actor);
    IF p_now IS NULL OR NOT isfinite(p_now) THEN
        RAISE EXCEPTION 'invalid instant %: want a finite timestamp', coalesce(p_now::text, 'NULL') USING ERRCODE = 'DK010';
    END IF;
    SELECT array_agg(DISTINCT g.project) INTO v_projects FROM docket.grants g
    WHERE g.principal = p_actor AND docket.job_visible(p_actor, g.project);
    IF v_projects IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT j.project::text, j.queue::text, 'queued'::text, count(*), count(*) FILTER (WHERE j.available_at <= p_now)
    FROM docket.jobs j WHERE j.state = 'queued' AND j.project = ANY (v_projects)
    GROUP BY j.project, j.queue
    UNION ALL
    SELECT j.project::text, j.queue::text, 'claimed'::text, count(*), 0::bigint
    FROM docket.jobs j WHERE j.state = 'claimed' AND j.project = ANY (v_projects)
    GROUP BY j.project, j.queue
    UNION ALL
    SELECT j.project::text, j.queue::text, 'uncertain'::text, count(*), 0::bigint
    FROM docket.jobs j WHERE j.state = 'uncertain' AND j.project = ANY (v_projects)
    GROUP BY j.project, j.queue
    UNION ALL
    SELECT j.project::text, j.queue::text, 'exhausted'::text, count(*), 0::bigint
    FROM docket.jobs j WHERE j.state = 'exhausted' AND j.project = ANY (v_projects)
    GROUP BY j.project, j.queue;
END
$$;

INSERT INTO docket.api_functions (name, role) VALUES ('job_trace_put', 'app'), ('job_census', 'app');

-- Revisions: claims bound to handler revisions -------------------------------------

-- A claimant names the handler revision it runs for each kind it decodes;
-- each claim records it (claimed_revision), each event of a claim carries it
-- in its hash, and renew, release, complete and fail refuse a caller of
-- another revision than the claim's (DK002). A job may be pinned to the
-- revisions it may run under (job_pin, job.pin): it is handed only to a
-- claimant running one of them.

-- job_claim_revisions checks a claimant's revisions, the array parallel to
-- its decoders' p_kinds, and returns them with '' read as NULL (none).
-- Refuses (DK010): an array of another length than p_kinds, a malformed
-- revision, or a kind named with two revisions (a deployment runs one
-- revision of a kind).
CREATE OR REPLACE FUNCTION docket.job_claim_revisions(p_kinds text[], p_revisions text[]) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    bad record;
BEGIN
    IF p_revisions IS NULL THEN
        RETURN NULL;
    ELSIF cardinality(p_revisions) IS DISTINCT FROM cardinality(p_kinds) THEN
        RAISE EXCEPTION 'invalid decoders: revisions must be parallel to kinds, of one length' USING ERRCODE = 'DK010';
    END IF;
    p_revisions := ARRAY(SELECT nullif(r, '') FROM unnest(p_revisions) WITH ORDINALITY AS x(r, i) ORDER BY i);
    SELECT r INTO bad FROM unnest(p_revisions) r WHERE r IS NOT NULL AND NOT docket.valid_job_revision(r) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid revision %: want 1-100 characters, none a space or a control character', quote_literal(bad.r)
            USING ERRCODE = 'DK010';
    END IF;
    SELECT k INTO bad FROM unnest(p_kinds, p_revisions) AS x(k, r)
    GROUP BY k HAVING count(DISTINCT r) > 1 OR (count(r) > 0 AND count(r) < count(*)) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid decoders: kind % is named with two revisions: a deployment runs one revision of a kind', bad.k
            USING ERRCODE = 'DK010';
    END IF;
    RETURN p_revisions;
END
$$;

-- Outcomes --------------------------------------------------------------------

-- job_require_revision refuses (DK002) a call by the holder of job v's claim
-- (p_token is its claim or outcome token) from a revision other than the
-- claim's: a lease is held by its token and the revision that took it. Other
-- tokens are left for the caller's own checks to answer.
CREATE OR REPLACE FUNCTION docket.job_require_revision(p_op text, v docket.jobs, p_token uuid, p_revision text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF (docket.job_token_digest(p_token) IN (v.claim_token, v.outcome_token))
       AND v.claimed_revision IS DISTINCT FROM nullif(p_revision, '') THEN
        RAISE EXCEPTION 'job %: cannot %: it was claimed by revision %, not %', v.id, p_op,
            coalesce(quote_literal(v.claimed_revision), 'none'), coalesce(quote_literal(nullif(p_revision, '')), 'none')
            USING ERRCODE = 'DK002';
    END IF;
END
$$;

-- Pins ------------------------------------------------------------------------

-- job_pin pins the queued jobs p_ids to the handler revisions p_revisions
-- (NULL: unpins them, any revision may run them) on behalf of p_actor at
-- p_now, and returns them by id. A claim then hands a pinned job only to a
-- claimant whose revision for its kind is among its pin; the job stays
-- queued, and the pin stays with it when it is queued again after a claim.
-- Each job whose pin changes records a queued -> queued event naming the
-- pin; pinning a job as it is pinned records nothing.
-- Refuses, writing nothing: malformed input, no ids or over 1000, an id
-- NULL or named twice, a pin of no revision or over 8, a malformed revision
-- (DK010); an unknown job (P0002); an actor without job.pin on a job's
-- project (DK009); a job that is not queued (DK001).
CREATE OR REPLACE FUNCTION docket.job_pin(p_ids bigint[], p_revisions text[], p_actor text, p_now timestamptz)
RETURNS SETOF docket.jobs
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('pin batch size', cardinality(p_ids), 1000);
    IF (SELECT count(DISTINCT i) FROM unnest(p_ids) i) <> cardinality(p_ids) OR array_position(p_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'invalid pin: a job appears twice, or an id is NULL: name each job once' USING ERRCODE = 'DK010';
    END IF;
    IF p_revisions IS NOT NULL THEN
        IF cardinality(p_revisions) NOT BETWEEN 1 AND 8 THEN
            RAISE EXCEPTION 'invalid pin: % revisions: want 1..8 (no revisions at all unpins: pass NULL)', cardinality(p_revisions)
                USING ERRCODE = 'DK010';
        END IF;
        SELECT r INTO bad FROM unnest(p_revisions) r WHERE r IS NULL OR NOT docket.valid_job_revision(r) LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'invalid revision %: want 1-100 characters, none a space or a control character',
                coalesce(quote_literal(bad.r), 'NULL') USING ERRCODE = 'DK010';
        END IF;
    END IF;
    -- Lock in id order, so two pins of overlapping sets never deadlock.
    PERFORM 1 FROM docket.jobs j WHERE j.id = ANY (p_ids) ORDER BY j.id FOR UPDATE;
    SELECT x.id, j.id AS found, j.project, j.state INTO bad
    FROM unnest(p_ids) AS x(id)
    LEFT JOIN docket.jobs j ON j.id = x.id
    WHERE j.id IS NULL OR NOT docket.grant_check(p_actor, j.project, 'job.pin') OR j.state <> 'queued'
    ORDER BY (j.id IS NULL) DESC, x.id
    LIMIT 1;
    IF FOUND THEN
        IF bad.found IS NULL THEN
            RAISE EXCEPTION 'job % does not exist', bad.id USING ERRCODE = 'P0002';
        ELSIF NOT docket.grant_check(p_actor, bad.project, 'job.pin') THEN
            RAISE EXCEPTION '% may not pin job %: it needs job.pin on the job''s project', p_actor, bad.id
                USING ERRCODE = 'DK009';
        END IF;
        RAISE EXCEPTION 'job % is %: only a queued job is pinned', bad.id, bad.state USING ERRCODE = 'DK001';
    END IF;
    UPDATE docket.jobs j
    SET revisions = p_revisions, updated_at = greatest(j.updated_at, p_now)
    WHERE j.id = ANY (p_ids) AND j.revisions IS DISTINCT FROM p_revisions;
    RETURN QUERY SELECT * FROM docket.jobs j WHERE j.id = ANY (p_ids) ORDER BY j.id;
END
$$;

-- Operator view ---------------------------------------------------------------

CREATE OR REPLACE VIEW docket.jobs_unrunnable WITH (security_invoker = true) AS
SELECT j.id, j.project, j.queue, j.kind, j.payload_schema, j.state, j.revisions, j.available_at,
       ARRAY(SELECT DISTINCT d.revision FROM docket.job_decoders d
             WHERE d.kind = j.kind AND d.payload_schema = j.payload_schema AND d.revision IS NOT NULL
             ORDER BY d.revision) AS deployed
FROM docket.jobs j
WHERE j.revisions IS NOT NULL AND j.state IN ('queued', 'uncertain')
  AND NOT EXISTS (SELECT 1 FROM docket.job_decoders d
                  WHERE d.kind = j.kind AND d.payload_schema = j.payload_schema AND d.revision = ANY (j.revisions))
ORDER BY j.id;

COMMENT ON VIEW docket.jobs_unrunnable IS
    'Unfinished jobs pinned to handler revisions no registered deployment runs for their kind and payload schema: no worker will claim them. deployed lists the revisions that are.';

-- The API ---------------------------------------------------------------------

INSERT INTO docket.api_functions (name, role) VALUES ('job_pin', 'app');

-- Provenance ----------------------------------------------------------------------

-- A job's requested output names an asset (requested_output), a
-- representation kind (requested_kind) and a logical target root
-- (target_root); the completion of a job records what its worker actually
-- produced and used (docket.job_completions, job_completion_record); a re-run
-- is planned from that record. Two constraint triggers, checked at commit,
-- hold the two together whoever writes: a job with a requested output that
-- its holder completed has a record under the completing claim's token; a
-- record exists only for a job that succeeded under the record's token. So a
-- failure, a release or a cancellation leaves no record, and a completion
-- without its record rolls back whole, the handler's writes included. An
-- operator's reconcile to succeeded is exempt: nobody held a claim that
-- finished the job, so there is no record, and the job's re-run plan names
-- its kind and no target root.
--
-- Bounds (also in Go, package jobs):
--   output kind     1-128 characters of [A-Za-z0-9._+/:-], starting with a letter or digit
--   target root     1-200 characters of [A-Za-z0-9._-], starting with a letter or digit
--   record params   as a job's params (an object, 64 KiB); record inputs as a job's inputs
--   record batch    1..1000, as a completion batch

-- What a job is asked to produce is fixed at enqueue, as its other request
-- columns are (jobs_columns_immutable).
CREATE OR REPLACE TRIGGER jobs_request_immutable
    AFTER UPDATE OF requested_kind, target_root ON docket.jobs
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

-- job_require_request refuses (DK010), naming element p_i, a requested
-- output kind or target root that is malformed or names no asset.
CREATE OR REPLACE FUNCTION docket.job_require_request(p_i integer, p_output text, p_output_kind text, p_root text)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF nullif(p_output_kind, '') IS NOT NULL AND NOT docket.valid_output_kind(p_output_kind) THEN
        RAISE EXCEPTION 'job %: invalid requested output kind %: want 1-128 characters of [A-Za-z0-9._+/:-], starting with a letter or digit',
            p_i, quote_literal(p_output_kind) USING ERRCODE = 'DK010';
    ELSIF nullif(p_root, '') IS NOT NULL AND NOT docket.valid_target_root(p_root) THEN
        RAISE EXCEPTION 'job %: invalid target root %: want 1-200 characters of [A-Za-z0-9._-], starting with a letter or digit',
            p_i, quote_literal(p_root) USING ERRCODE = 'DK010';
    ELSIF nullif(p_output, '') IS NULL AND (nullif(p_output_kind, '') IS NOT NULL OR nullif(p_root, '') IS NOT NULL) THEN
        RAISE EXCEPTION 'job %: a requested output kind or target root names no asset: set the requested output too', p_i
            USING ERRCODE = 'DK010';
    END IF;
END
$$;

CREATE OR REPLACE TRIGGER job_completions_immutable
    BEFORE UPDATE ON docket.job_completions
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('a completion record is written once, with the completion');

-- job_inputs_subsequence reports whether p_used is a subsequence of
-- p_given: each element one of p_given's, in p_given's order, none used
-- twice. A worker may leave out an input it did not need; it never names
-- one it was not given, nor reorders them.
CREATE OR REPLACE FUNCTION docket.job_inputs_subsequence(p_used text[], p_given text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    i integer := 1;
    u text;
BEGIN
    IF cardinality(p_used) = 0 THEN
        RETURN true;
    END IF;
    FOREACH u IN ARRAY p_used LOOP
        WHILE i <= cardinality(p_given) AND p_given[i] IS DISTINCT FROM u LOOP
            i := i + 1;
        END LOOP;
        IF i > cardinality(p_given) THEN
            RETURN false;
        END IF;
        i := i + 1;
    END LOOP;
    RETURN true;
END
$$;

-- job_record_refusal is the completion-record rule, written once: why the
-- record of job p_id (output p_asset, p_kind, p_root: '' or NULL for the
-- job's own root; parameters p_params, JSON null or NULL: none; inputs
-- p_inputs, a JSON array of strings, JSON null or NULL: none) may not
-- complete it, or NULL when it may. With p_job NULL (no row, or all its
-- columns NULL) it judges the record's shape alone: an asset of 1-1000
-- characters, a well-formed kind, a well-formed root or none, params that
-- are an object of at most 64 KiB, inputs that are an array of at most 100
-- strings of at most 1000 characters. With p_job, the row of the job the
-- record completes, it also holds the record to the request: the asset is
-- the job's requested output, when it has one; the kind is the requested
-- kind, when it has one; the root is the job's target root (a record names
-- no other); the inputs are a subsequence of the job's
-- (docket.job_inputs_subsequence). job_completion_record raises what it
-- returns; job_complete_many refuses the element it returns it for.
CREATE OR REPLACE FUNCTION docket.job_record_refusal(p_id bigint, p_job docket.jobs, p_asset text, p_kind text, p_root text,
                                          p_params jsonb, p_inputs jsonb)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_want text;
    v_inputs text[];
BEGIN
    v_want := CASE
        WHEN p_asset IS NULL OR length(p_asset) NOT BETWEEN 1 AND 1000 THEN 'an output asset of 1-1000 characters'
        WHEN p_kind IS NULL OR NOT docket.valid_output_kind(p_kind) THEN
            'an output kind of 1-128 characters of [A-Za-z0-9._+/:-], starting with a letter or digit'
        WHEN nullif(p_root, '') IS NOT NULL AND NOT docket.valid_target_root(p_root) THEN
            'a target root of 1-200 characters of [A-Za-z0-9._-], starting with a letter or digit, or none'
        WHEN p_params IS NOT NULL AND p_params <> 'null'::jsonb
             AND (jsonb_typeof(p_params) <> 'object' OR docket.json_size(p_params) > 65536) THEN
            'params that are a JSON object of at most 65536 bytes, or none'
        WHEN p_inputs IS NOT NULL AND p_inputs <> 'null'::jsonb
             AND (jsonb_typeof(p_inputs) <> 'array' OR jsonb_array_length(p_inputs) > 100
                  OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_inputs) e
                             WHERE jsonb_typeof(e) <> 'string' OR length(e #>> '{}') > 1000)) THEN
            'inputs that are an array of at most 100 strings of at most 1000 characters, or none'
    END;
    IF v_want IS NOT NULL THEN
        RETURN format('job %s: invalid completion record: want %s', p_id, v_want);
    END IF;
    IF p_job.id IS NULL THEN
        RETURN NULL;
    END IF;
    IF p_job.requested_output IS NOT NULL AND p_asset <> p_job.requested_output THEN
        RETURN format('job %s: the completion record''s output asset %s is not the requested %s', p_id,
                      quote_literal(p_asset), quote_literal(p_job.requested_output));
    ELSIF p_job.requested_kind IS NOT NULL AND p_kind <> p_job.requested_kind THEN
        RETURN format('job %s: the completion record''s output kind %s is not the requested %s', p_id,
                      quote_literal(p_kind), quote_literal(p_job.requested_kind));
    ELSIF nullif(p_root, '') IS NOT NULL AND p_root IS DISTINCT FROM p_job.target_root THEN
        RETURN format('job %s: the completion record names target root %s, the job''s is %s', p_id,
                      quote_literal(p_root), coalesce(quote_literal(p_job.target_root), 'none'));
    END IF;
    v_inputs := CASE WHEN p_inputs IS NULL OR p_inputs = 'null'::jsonb THEN '{}'::text[]
                     ELSE ARRAY(SELECT jsonb_array_elements_text(p_inputs)) END;
    IF NOT docket.job_inputs_subsequence(v_inputs, p_job.inputs) THEN
        RETURN format('job %s: the completion record''s inputs are not the job''s: name them in the job''s order, leaving out only what was not used', p_id);
    END IF;
    RETURN NULL;
END
$$;

-- job_completion_record writes, for p_actor at p_now, the completion record
-- of each element i: job p_ids[i], whose live claim p_tokens[i] holds,
-- produced output (p_assets[i], p_kinds[i], p_roots[i]: '' or NULL for the
-- job's own root) using parameters p_params[i] (JSON null: none named) and
-- inputs p_inputs[i] (a JSON array of strings; JSON null: none). Call it in
-- the completion's transaction, before job_complete or job_complete_many: the
-- record is checked against the job at commit (see the constraint triggers
-- below), so a record without its completion rolls the transaction back.
--
-- The record must match the request: the asset is the job's requested
-- output, when it has one; the kind is the requested kind, when it has one;
-- the root is the job's target root (a record names no other); the inputs
-- are a subsequence of the job's (docket.job_inputs_subsequence). The
-- parameters are the worker's own, never the job's.
--
-- An element whose token does not hold the job's live claim at p_now (an
-- unknown job, a stale or spent token), or whose lease p_actor does not hold
-- (another holder's, or its own without job.claim any more, or dated before
-- the claim), records nothing and is left to the completion that follows,
-- which refuses it as it refuses any such call;
-- so does an element whose job already has a record (a completion retried
-- after a lost reply). It returns the ids it recorded.
--
-- Refuses the whole call, writing nothing: a malformed actor or instant, an
-- actor the session may not act as (DK010, DK009); arrays of different
-- lengths, an empty batch or one over 1000, a job named twice; a missing or
-- malformed asset or kind, a malformed root, params that are not an object
-- of at most 64 KiB, inputs that are not an array of at most 100 strings of
-- at most 1000 characters; a record whose output or inputs do not match the
-- request, naming the job and what differs (all DK010).
--
-- It finds the jobs by id and claim token, not by state, as
-- job_complete_many does.
CREATE OR REPLACE FUNCTION docket.job_completion_record(p_ids bigint[], p_tokens uuid[], p_assets text[], p_kinds text[],
                                             p_roots text[], p_params jsonb[], p_inputs jsonb[],
                                             p_actor text, p_now timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
    n integer := cardinality(p_ids);
    v_why text;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('completion record batch size', n, 1000);
    IF n = ALL (ARRAY[cardinality(p_tokens), cardinality(p_assets), cardinality(p_kinds), cardinality(p_roots),
                      cardinality(p_params), cardinality(p_inputs)]) IS NOT TRUE THEN
        RAISE EXCEPTION 'invalid completion records: every field array must have % elements', n USING ERRCODE = 'DK010';
    END IF;
    IF (SELECT count(DISTINCT i) FROM unnest(p_ids) i) <> n OR array_position(p_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'invalid completion records: a job appears twice, or an id is NULL: name each job once'
            USING ERRCODE = 'DK010';
    END IF;
    -- The shape of each record, before any job is read; then, for the jobs
    -- each element's token holds live, locked as the completion that
    -- follows locks them (only its holder's calls wait on the lock), the
    -- first record that does not match its job. The rule is
    -- job_record_refusal's.
    SELECT x.why INTO v_why
    FROM (SELECT x.i, docket.job_record_refusal(x.id, NULL, x.asset, x.kind, x.root, x.params, x.inputs) AS why
          FROM unnest(p_ids, p_assets, p_kinds, p_roots, p_params, p_inputs) WITH ORDINALITY
               AS x(id, asset, kind, root, params, inputs, i)
          OFFSET 0) x  -- each record judged once (see jobs_record_insert)
    WHERE x.why IS NOT NULL
    ORDER BY x.i
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%', v_why USING ERRCODE = 'DK010';
    END IF;
    SELECT r.why INTO v_why
    FROM unnest(p_ids, p_tokens, p_assets, p_kinds, p_roots, p_params, p_inputs) WITH ORDINALITY
         AS x(id, token, asset, kind, root, params, inputs, i)
    JOIN LATERAL (
        SELECT j AS job FROM docket.jobs j
        WHERE j.id = x.id AND j.claim_token = docket.job_token_digest(x.token) AND j.lease_expires_at > p_now
          AND j.claimed_by = p_actor AND j.claimed_at <= p_now
        FOR UPDATE
    ) l ON true
    CROSS JOIN LATERAL (SELECT docket.job_record_refusal(x.id, l.job, x.asset, x.kind, x.root, x.params, x.inputs) AS why) r
    WHERE r.why IS NOT NULL
    ORDER BY x.i
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%', v_why USING ERRCODE = 'DK010';
    END IF;

    RETURN QUERY
    INSERT INTO docket.job_completions AS c (job_id, output_asset, output_kind, output_root, params_used, inputs_used,
                                            recorded_by, recorded_at, claim_token)
    SELECT x.id, x.asset, x.kind, j.target_root, x.params, x.inputs, p_actor, p_now, j.claim_token
    FROM (
        SELECT x.i, x.id, x.token, x.asset, x.kind, nullif(x.root, '') AS root, nullif(x.params, 'null'::jsonb) AS params,
               CASE WHEN x.inputs IS NULL OR x.inputs = 'null'::jsonb THEN '{}'::text[]
                    ELSE ARRAY(SELECT jsonb_array_elements_text(x.inputs)) END AS inputs
        FROM unnest(p_ids, p_tokens, p_assets, p_kinds, p_roots, p_params, p_inputs) WITH ORDINALITY
             AS x(id, token, asset, kind, root, params, inputs, i)
    ) x
    JOIN docket.jobs j ON j.id = x.id AND j.claim_token = docket.job_token_digest(x.token) AND j.lease_expires_at > p_now
        AND j.claimed_by = p_actor AND j.claimed_at <= p_now AND docket.grant_check(p_actor, j.project, 'job.claim')
    ORDER BY x.id
    ON CONFLICT (job_id) DO NOTHING
    RETURNING c.job_id;
END
$$;

-- job_completion_required refuses (DK010), at commit, a job with a
-- requested output that its holder completed without a completion record
-- under the completing claim's token.
CREATE OR REPLACE FUNCTION docket.job_completion_required() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, docket, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM docket.job_completions c WHERE c.job_id = NEW.id AND c.claim_token = NEW.outcome_token) THEN
        RAISE EXCEPTION 'job % requests output %: its completion must record the output it produced (docket.job_completion_record)',
            NEW.id, quote_literal(NEW.requested_output) USING ERRCODE = 'DK010';
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS jobs_completion_recorded ON docket.jobs;
CREATE CONSTRAINT TRIGGER jobs_completion_recorded
    AFTER UPDATE ON docket.jobs
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NEW.state = 'succeeded' AND OLD.state = 'claimed' AND NEW.outcome_token IS NOT NULL
          AND NEW.requested_output IS NOT NULL)
    EXECUTE FUNCTION docket.job_completion_required();

-- job_completion_completed refuses (DK010), at commit, a completion record
-- of a job that did not succeed under the record's claim: a record made and
-- then followed by a failure, a release or nothing at all.
CREATE OR REPLACE FUNCTION docket.job_completion_completed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, docket, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM docket.jobs j
                   WHERE j.id = NEW.job_id AND j.state = 'succeeded' AND j.outcome_token = NEW.claim_token) THEN
        RAISE EXCEPTION 'job %: a completion record without its completion: complete the job under the claim that recorded it, in the same transaction',
            NEW.job_id USING ERRCODE = 'DK010';
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS job_completions_completed ON docket.job_completions;
CREATE CONSTRAINT TRIGGER job_completions_completed
    AFTER INSERT ON docket.job_completions
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION docket.job_completion_completed();

INSERT INTO docket.api_functions (name, role) VALUES ('job_completion_record', 'app');

-- Row rules -------------------------------------------------------------------

-- job_row_rule names the first rule of docket.jobs that one job row breaks,
-- NULL when it breaks none. The rules, by name (a rule whose expression is
-- NULL holds, as a CHECK's does):
--     jobs_attempts_range               0 <= attempts <= max_attempts
--     jobs_backoff_cap_range            backoff_base <= backoff_cap <= 7 days
--     jobs_claimed_holds_lease          a job is claimed exactly when it holds a
--                                       token, holder, claim instant and lease
--                                       expiry, all four
--     jobs_lease_after_claim            lease_expires_at > claimed_at
--     jobs_outcome_token_only_finished  only a finished job has an outcome token
--     jobs_queued_has_attempts_left     a queued job has an attempt left
--     jobs_result_only_succeeded        only a succeeded job has a result
--     jobs_terminal_finished            a job has finished_at exactly when it
--                                       is terminal
-- It takes the columns, not the row, so the planner inlines it and no copy
-- of the row is built. jobs_record_insert and jobs_record_update call it in
-- the pass they make over the rows a statement wrote, and refuse with
-- job_row_refuse: these rules are not table CHECKs, which Postgres would plan
-- again in every statement that writes a job (00024_jobs.sql). A writer that
-- disables the triggers (the owner, by ALTER TABLE ... DISABLE TRIGGER, or a
-- superuser's session_replication_role) is held by them as by the job
-- machine's moves: not at all, and what it writes is caught as
-- docs/security.md says.
CREATE OR REPLACE FUNCTION docket.job_row_rule(p_state text, p_attempts integer, p_max_attempts integer,
                                    p_backoff_base interval, p_backoff_cap interval,
                                    p_claim_token uuid, p_claimed_by text, p_claimed_at timestamptz,
                                    p_lease_expires_at timestamptz, p_result jsonb, p_outcome_token uuid,
                                    p_finished_at timestamptz)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN NOT (p_attempts BETWEEN 0 AND p_max_attempts) THEN 'jobs_attempts_range'
    WHEN NOT (p_backoff_cap >= p_backoff_base AND p_backoff_cap <= '7 days'::interval) THEN 'jobs_backoff_cap_range'
    WHEN NOT ((p_state = 'claimed') = (p_claim_token IS NOT NULL AND p_claimed_by IS NOT NULL
                                       AND p_claimed_at IS NOT NULL AND p_lease_expires_at IS NOT NULL))
        THEN 'jobs_claimed_holds_lease'
    WHEN NOT (p_lease_expires_at > p_claimed_at) THEN 'jobs_lease_after_claim'
    WHEN NOT (p_outcome_token IS NULL OR p_finished_at IS NOT NULL) THEN 'jobs_outcome_token_only_finished'
    WHEN NOT (p_state <> 'queued' OR p_attempts < p_max_attempts) THEN 'jobs_queued_has_attempts_left'
    WHEN NOT (p_result IS NULL OR p_state = 'succeeded') THEN 'jobs_result_only_succeeded'
    WHEN NOT ((p_state IN ('succeeded', 'failed', 'dead', 'cancelled')) = (p_finished_at IS NOT NULL))
        THEN 'jobs_terminal_finished'
END;

-- job_row_refuse raises the check violation (23514) of rule p_rule, a name
-- job_row_rule returns or jobs_request_names_asset, for job p_id, in the
-- words Postgres uses for a CHECK constraint's, and says what the rule asks.
CREATE OR REPLACE FUNCTION docket.job_row_refuse(p_id bigint, p_rule text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'new row for relation "jobs" violates check constraint "%" (job %: %)', p_rule, p_id, CASE p_rule
            WHEN 'jobs_attempts_range' THEN 'attempts must be between 0 and max_attempts'
            WHEN 'jobs_backoff_cap_range' THEN 'backoff_cap must be at least backoff_base and at most 7 days'
            WHEN 'jobs_claimed_holds_lease' THEN
                'a job is claimed exactly when it holds a claim token, holder, claim instant and lease expiry, all four'
            WHEN 'jobs_lease_after_claim' THEN 'a lease expires after its claim'
            WHEN 'jobs_outcome_token_only_finished' THEN 'only a finished job has an outcome token'
            WHEN 'jobs_queued_has_attempts_left' THEN 'a queued job has an attempt left'
            WHEN 'jobs_result_only_succeeded' THEN 'only a succeeded job has a result'
            WHEN 'jobs_terminal_finished' THEN 'a job has finished_at exactly when it is in a terminal state'
            WHEN 'jobs_request_names_asset' THEN 'a requested output kind or target root names no asset'
        END
        USING ERRCODE = '23514', CONSTRAINT = p_rule, TABLE = 'jobs', SCHEMA = 'docket';
END
$$;

-- Who may read what (row-level security; see kit.sql) --------------------------

-- A job is visible where the login's principals may read jobs (job.view or
-- another job capability, as job_visible), and a lane's job where they hold
-- lane.view. Its events, completion record and trace context are visible
-- with it.
CREATE POLICY jobs_visible_to_job_and_lane_readers ON docket.jobs FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('job.view', 'job.create', 'job.claim', 'job.cancel',
                                                           'job.reconcile', 'job.pin', 'job.retry'))::text[])
           OR (lane_id IS NOT NULL AND project = ANY ((SELECT docket.visible_projects('lane.view'))::text[])));

CREATE POLICY job_events_visible_with_their_job ON docket.job_events FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.jobs j WHERE j.id = job_id));

CREATE POLICY job_completions_visible_with_their_job ON docket.job_completions FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.jobs j WHERE j.id = job_id));

CREATE POLICY job_traces_visible_with_their_job ON docket.job_traces FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.jobs j WHERE j.id = job_id));

-- A deployment's decoders are visible to the login that registered them
-- (its principals) and, kind by kind, to readers of a job of that kind.
CREATE POLICY job_decoders_visible_to_registrars_and_job_readers ON docket.job_decoders FOR SELECT
    USING (docket.principal_bound(registered_by, (SELECT docket.login_principals()))
           OR EXISTS (SELECT 1 FROM docket.jobs j WHERE j.kind = job_decoders.kind));
