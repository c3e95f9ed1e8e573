-- Batches: one frozen plan over many items. A batch records the plan
-- digest it was opened with; each item is a run of that plan, reserved
-- (its run started, its run id recorded) in the transaction that admits
-- it, so a crash leaves it reserved with a known run and resuming never
-- starts another. Items arrive in strictly increasing byte order of their
-- keys; the cursor is the contiguous terminal prefix. Counts are
-- maintained on the batch row as items settle, never counted.

-- The batch machine's states and moves (docket.batch_states, docket.batch_transitions),
-- as 00032_batches.sql declares them.
SELECT docket.machine_views('batch');

-- The batch_item machine's states and moves (docket.batch_item_states, docket.batch_item_transitions),
-- as 00032_batches.sql declares them.
SELECT docket.machine_views('batch_item');

CREATE OR REPLACE FUNCTION docket.batches_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM docket.machine_birth('batch', 'batch ' || NEW.name, NEW.status);
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('batch', 'batch ' || OLD.id, OLD.status, NEW.status);
    IF NEW.last_key < OLD.last_key OR NEW.cursor < OLD.cursor OR NEW.cursor > NEW.last_key THEN
        RAISE EXCEPTION 'batch %: keys and the cursor only move forward, the cursor never past the last key', OLD.id
            USING ERRCODE = 'DK015';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER batches_columns_immutable
    BEFORE UPDATE OF id, project, name, plan_id, created_by, created_at ON docket.batches
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

CREATE OR REPLACE TRIGGER batches_guard BEFORE INSERT OR UPDATE ON docket.batches
    FOR EACH ROW EXECUTE FUNCTION docket.batches_guard();

CREATE OR REPLACE TRIGGER batches_refuse_delete BEFORE DELETE ON docket.batches
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('batches are kept with their items');

CREATE OR REPLACE FUNCTION docket.batch_items_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM docket.machine_birth('batch_item', 'item ' || NEW.key, NEW.status);
        RETURN NEW;
    END IF;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    PERFORM docket.machine_move('batch_item', 'batch ' || OLD.batch_id || ' item ' || OLD.key, OLD.status, NEW.status);
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER batch_items_columns_immutable
    BEFORE UPDATE OF batch_id, key, run_id, trusted, admitted_at ON docket.batch_items
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

CREATE OR REPLACE TRIGGER batch_items_guard BEFORE INSERT OR UPDATE ON docket.batch_items
    FOR EACH ROW EXECUTE FUNCTION docket.batch_items_guard();

-- An item's run, checked without locking it (plans.sql,
-- frozen_reference_check): runs are never deleted.
CREATE OR REPLACE TRIGGER batch_items_run_id_fkey AFTER INSERT OR UPDATE OF run_id ON docket.batch_items
    FOR EACH ROW WHEN (NEW.run_id IS NOT NULL)
    EXECUTE FUNCTION docket.frozen_reference_check('batch_items_run_id_fkey', 'run_id', 'runs');

CREATE OR REPLACE TRIGGER batch_items_refuse_delete BEFORE DELETE ON docket.batch_items
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('items are kept with their batch');

-- batch_advance moves batch p_batch's cursor over the items settled after
-- it, and completes the batch when its source was read to its end and no
-- item is in flight. The caller holds the batch row.
CREATE OR REPLACE FUNCTION docket.batch_advance(p_batch bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    b docket.batches;
    v_first text COLLATE "C";
    v_cursor text COLLATE "C";
    v_now timestamptz := docket.context_now();
BEGIN
    SELECT * INTO b FROM docket.batches WHERE id = p_batch;
    -- The first item after the cursor nobody has settled, and the last
    -- settled one before it.
    SELECT i.key INTO v_first FROM docket.batch_items i
    WHERE i.batch_id = b.id AND i.status = 'reserved' AND (b.cursor IS NULL OR i.key > b.cursor)
    ORDER BY i.key LIMIT 1;
    SELECT i.key INTO v_cursor FROM docket.batch_items i
    WHERE i.batch_id = b.id AND (v_first IS NULL OR i.key < v_first)
    ORDER BY i.key DESC LIMIT 1;
    UPDATE docket.batches
    SET cursor = coalesce(v_cursor, cursor), updated_at = greatest(updated_at, v_now),
        status = CASE WHEN source_done AND in_flight = 0 THEN 'completed' ELSE status END,
        finished_at = CASE WHEN source_done AND in_flight = 0 THEN greatest(updated_at, v_now) END
    WHERE id = b.id;
END
$$;

-- runs_settle_batch_items settles the item of a run that ended: succeeded,
-- or failed (compensated or failed), and moves its batch on.
CREATE OR REPLACE FUNCTION docket.runs_settle_batch_items() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    it docket.batch_items;
    v_now timestamptz := docket.context_now();
    v_ok boolean := NEW.status = 'succeeded';
BEGIN
    SELECT * INTO it FROM docket.batch_items WHERE run_id = NEW.id;
    IF NOT FOUND OR it.status <> 'reserved' THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM docket.batches WHERE id = it.batch_id FOR UPDATE;
    UPDATE docket.batch_items
    SET status = CASE WHEN v_ok THEN 'succeeded' ELSE 'failed' END, settled_at = greatest(admitted_at, v_now),
        reason = CASE WHEN v_ok THEN NULL ELSE left(format('run %s %s%s', NEW.id, NEW.status, coalesce(': ' || NEW.failure, '')), 2000) END
    WHERE batch_id = it.batch_id AND key = it.key;
    UPDATE docket.batches
    SET in_flight = in_flight - 1, succeeded = succeeded + v_ok::int, failed = failed + (NOT v_ok)::int
    WHERE id = it.batch_id;
    PERFORM docket.batch_advance(it.batch_id);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER runs_settle_batch_items
    AFTER UPDATE OF status ON docket.runs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN ('succeeded', 'compensated', 'failed'))
    EXECUTE FUNCTION docket.runs_settle_batch_items();

-- runs_count_exhausted_items keeps the census's exhausted count: an item
-- whose run moves into exhausted is counted, out of it (resumed,
-- cancelled, or its last steps succeeding) no longer. An item reserved in
-- the transaction its run was exhausted in is counted by batch_admit.
CREATE OR REPLACE FUNCTION docket.runs_count_exhausted_items() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    it docket.batch_items;
BEGIN
    SELECT * INTO it FROM docket.batch_items WHERE run_id = NEW.id;
    IF NOT FOUND OR it.status <> 'reserved' THEN
        RETURN NULL;
    END IF;
    UPDATE docket.batches SET exhausted = exhausted + CASE WHEN NEW.status = 'exhausted' THEN 1 ELSE -1 END
    WHERE id = it.batch_id;
    RETURN NULL;
END
$$;

-- Before runs_settle_batch_items (triggers fire in name order): an item
-- leaves the exhausted count before it leaves in_flight.
CREATE OR REPLACE TRIGGER runs_count_exhausted_items
    AFTER UPDATE OF status ON docket.runs
    FOR EACH ROW WHEN ((OLD.status = 'exhausted') IS DISTINCT FROM (NEW.status = 'exhausted'))
    EXECUTE FUNCTION docket.runs_count_exhausted_items();

-- The API ---------------------------------------------------------------------------------

-- batch_open opens batch p_name of p_project over plan (p_digest,
-- p_canonical), each item's run to get the ceilings p_item_* (NULL: none;
-- as run_start takes them), or resumes it: opening again the batch of that
-- name with the same plan and ceilings returns it; with another plan it is
-- refused naming both digests, with other ceilings naming both (DK010).
-- Refuses ceilings run_start would refuse (DK010); an actor without
-- batch.run, plan.run and job.create on the project (DK009).
DROP FUNCTION IF EXISTS docket.batch_open(text, text, text, text, integer, bigint, bigint, text, bigint, integer, interval,
                                           integer, text, timestamptz);
CREATE OR REPLACE FUNCTION docket.batch_open(p_project text, p_name text, p_digest text, p_canonical text,
                                  p_actor text, p_now timestamptz,
                                  p_item_max_steps integer DEFAULT NULL, p_item_max_effects bigint DEFAULT NULL,
                                  p_item_max_money bigint DEFAULT NULL, p_item_currency text DEFAULT NULL,
                                  p_item_max_call bigint DEFAULT NULL, p_item_max_parallel integer DEFAULT NULL,
                                  p_item_max_duration interval DEFAULT NULL, p_item_max_refusals integer DEFAULT NULL)
RETURNS docket.batches
LANGUAGE plpgsql AS $$
DECLARE
    b docket.batches;
    v_digest text;
    v_plan bigint;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.require_valid(docket.valid_case_key_value(p_name), 'batch name', p_name, '1-255 characters, no control characters');
    IF NOT (docket.grant_check(p_actor, p_project, 'batch.run') AND docket.grant_check(p_actor, p_project, 'plan.run')
            AND docket.grant_check(p_actor, p_project, 'job.create')) THEN
        RAISE EXCEPTION '% may not run batches in project %: it needs explicit batch.run, plan.run and job.create grants', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    PERFORM docket.require_valid((p_item_max_money IS NULL) = (p_item_currency IS NULL)
        AND (p_item_currency IS NULL OR p_item_currency ~ '^[A-Z]{3}$'),
        'currency', p_item_currency, 'a money ceiling comes with its currency, three capital letters (ISO 4217)');
    PERFORM docket.require_valid(coalesce(p_item_max_steps BETWEEN 0 AND 1000000, true) AND coalesce(p_item_max_effects >= 0, true)
        AND coalesce(p_item_max_money >= 0, true) AND coalesce(p_item_max_call >= 0, true)
        AND coalesce(p_item_max_parallel BETWEEN 1 AND 10000, true) AND coalesce(p_item_max_duration > interval '0', true)
        AND coalesce(p_item_max_refusals BETWEEN 1 AND 1000000, true),
        'item ceilings', concat_ws(',', p_item_max_steps, p_item_max_effects, p_item_max_money, p_item_max_call, p_item_max_parallel,
                                   p_item_max_duration, p_item_max_refusals),
        'steps 0..1000000, effects, money and a call 0 or more, in flight 1..10000, a duration over 0, refusals 1..1000000');
    SELECT * INTO b FROM docket.batches WHERE project = p_project AND name = p_name;
    IF FOUND THEN
        SELECT digest INTO v_digest FROM docket.plans WHERE id = b.plan_id;
        IF v_digest IS DISTINCT FROM p_digest THEN
            RAISE EXCEPTION 'batch % was opened with plan %; it cannot resume with plan %', p_name, v_digest, p_digest
                USING ERRCODE = 'DK010';
        END IF;
        IF (b.item_max_steps, b.item_max_effects, b.item_max_money, b.item_currency, b.item_max_call, b.item_max_parallel,
            b.item_max_duration, b.item_max_refusals)
           IS DISTINCT FROM (p_item_max_steps, p_item_max_effects, p_item_max_money, p_item_currency, p_item_max_call,
                             p_item_max_parallel, p_item_max_duration, p_item_max_refusals) THEN
            RAISE EXCEPTION 'batch % was opened with item ceilings (%); it cannot resume with (%)', p_name,
                concat_ws(',', b.item_max_steps, b.item_max_effects, b.item_max_money, b.item_currency, b.item_max_call,
                          b.item_max_parallel, b.item_max_duration, b.item_max_refusals),
                concat_ws(',', p_item_max_steps, p_item_max_effects, p_item_max_money, p_item_currency, p_item_max_call,
                          p_item_max_parallel, p_item_max_duration, p_item_max_refusals)
                USING ERRCODE = 'DK010';
        END IF;
        RETURN b;
    END IF;
    v_plan := docket.plan_store(p_project, p_digest, p_canonical, p_actor, p_now);
    INSERT INTO docket.batches (project, name, plan_id, item_max_steps, item_max_effects, item_max_money, item_currency,
                                item_max_call, item_max_parallel, item_max_duration, item_max_refusals, created_by, created_at, updated_at)
    VALUES (p_project, p_name, v_plan, p_item_max_steps, p_item_max_effects, p_item_max_money, p_item_currency,
            p_item_max_call, p_item_max_parallel, p_item_max_duration, p_item_max_refusals, p_actor, p_now, p_now)
    ON CONFLICT (project, name) DO NOTHING
    RETURNING * INTO b;
    IF NOT FOUND THEN
        RETURN docket.batch_open(p_project, p_name, p_digest, p_canonical, p_item_max_steps, p_item_max_effects, p_item_max_money,
                                 p_item_currency, p_item_max_call, p_item_max_parallel, p_item_max_duration, p_item_max_refusals,
                                 p_actor, p_now);
    END IF;
    RETURN b;
END
$$;

-- batch_lock returns batch p_id for p_actor holding batch.run on its
-- project, holding the batch's admission lock (a transaction advisory
-- lock: admissions of one batch take turns, while the runs' ends, which
-- update the batch row's counts, do not wait for a page being admitted);
-- P0002 otherwise, in the same words for one that does not exist.
CREATE OR REPLACE FUNCTION docket.batch_lock(p_id bigint, p_actor text) RETURNS docket.batches
LANGUAGE plpgsql AS $$
DECLARE
    b docket.batches;
BEGIN
    SELECT * INTO b FROM docket.batches WHERE id = p_id;
    IF NOT FOUND OR NOT docket.grant_check(p_actor, b.project, 'batch.run') THEN
        RAISE EXCEPTION 'batch % does not exist (or % holds no batch.run on its project)', coalesce(p_id::text, 'NULL'), p_actor
            USING ERRCODE = 'P0002';
    END IF;
    PERFORM pg_advisory_xact_lock(1650553971, hashtext(p_id::text));
    SELECT * INTO b FROM docket.batches WHERE id = p_id;
    RETURN b;
END
$$;

-- batch_item_admitted is a row batch_admit returns: an item, and whether
-- this call reserved it (false: it was reserved before, and this is a
-- resume offering it again).
CREATE OR REPLACE VIEW docket.batch_item_admitted WITH (security_invoker = true) AS
SELECT false AS reserved_now, i.* FROM docket.batch_items i WHERE false;

-- batch_admit admits a page of items to batch p_batch, on behalf of p_actor
-- at p_now: keys p_keys in strictly increasing byte order, inputs
-- p_inputs, trust labels p_trusted (an item is untrusted unless its source
-- vouches for it), and whether the page ends the source (p_last). A key at
-- or before the batch's last key must be one it has (a resume offering it
-- again returns the item and its run, reserving nothing); a new key must
-- come after the last. Each new item is reserved with a run of the batch's
-- plan, started in this transaction; an item whose input the run would
-- refuse (over 64 KiB) is quarantined with the reason, the others go on. Refuses,
-- writing nothing: parallel arrays of different lengths, more than 1000
-- items, a key out of order or a new key inside what was admitted (DK010,
-- naming the key); a batch the actor may not run (P0002); a completed batch
-- (DK014).
CREATE OR REPLACE FUNCTION docket.batch_admit(p_batch bigint, p_keys text[], p_inputs jsonb[], p_trusted boolean[], p_last boolean,
                                   p_actor text, p_now timestamptz)
RETURNS SETOF docket.batch_item_admitted
LANGUAGE plpgsql AS $$
DECLARE
    b docket.batches;
    p docket.plans;
    i integer;
    k text COLLATE "C";
    prev text COLLATE "C";
    v_last text COLLATE "C";
    it docket.batch_items;
    r docket.runs;
    n_items integer := 0;
    n_flight integer := 0;
    n_quarantined integer := 0;
    n_succeeded integer := 0;
    n_failed integer := 0;
    n_exhausted integer := 0;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    b := docket.batch_lock(p_batch, p_actor);
    PERFORM docket.require_valid(cardinality(p_keys) IS NOT DISTINCT FROM cardinality(p_inputs)
        AND cardinality(p_keys) IS NOT DISTINCT FROM cardinality(p_trusted), 'page', '', 'keys, inputs and trust labels of one length');
    PERFORM docket.job_require_batch('page', greatest(cardinality(p_keys), 1), 1000);
    IF b.status = 'completed' THEN
        RAISE EXCEPTION 'batch % is completed: it admits nothing more', b.id USING ERRCODE = 'DK014';
    END IF;
    SELECT * INTO p FROM docket.plans WHERE id = b.plan_id;
    v_last := b.last_key;
    FOR i IN 1 .. coalesce(cardinality(p_keys), 0) LOOP
        k := p_keys[i];
        IF k IS NULL OR NOT docket.valid_case_key_value(k) THEN
            RAISE EXCEPTION 'batch %: item key % is malformed: 1-255 characters, no control characters', b.id, coalesce(k, 'NULL')
                USING ERRCODE = 'DK010';
        END IF;
        IF prev IS NOT NULL AND k <= prev THEN
            RAISE EXCEPTION 'batch %: the page is out of order at key % (after %): keys come in strictly increasing byte order', b.id, k, prev
                USING ERRCODE = 'DK010';
        END IF;
        prev := k;
        IF v_last IS NOT NULL AND k <= v_last THEN
            SELECT * INTO it FROM docket.batch_items WHERE batch_id = b.id AND key = k;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'batch %: key % comes before the last key admitted (%) and was never admitted: the source is out of order',
                    b.id, k, v_last USING ERRCODE = 'DK010';
            END IF;
            RETURN QUERY SELECT false, (it).*;
            CONTINUE;
        END IF;
        v_last := k;
        n_items := n_items + 1;
        -- Reserve: the run first, its id recorded with the item. An input
        -- the run would refuse quarantines the item instead.
        IF p_inputs[i] IS NOT NULL AND docket.json_size(p_inputs[i]) > 65536 THEN
            INSERT INTO docket.batch_items (batch_id, key, status, trusted, reason, admitted_at, settled_at)
            VALUES (b.id, k, 'quarantined', coalesce(p_trusted[i], false),
                    format('refused at admission: its input is %s characters of JSON, over 65536', docket.json_size(p_inputs[i])), p_now, p_now)
            RETURNING * INTO it;
            n_quarantined := n_quarantined + 1;
            RETURN QUERY SELECT true, (it).*;
            CONTINUE;
        END IF;
        -- Each item's run its own budget: the batch's item ceilings.
        r := docket.run_start(b.project, p.digest, p.canonical, coalesce(p_inputs[i], '{}'), coalesce(p_trusted[i], false),
                              0, 0, b.item_max_steps, b.item_max_effects, b.item_max_money, b.item_currency, b.item_max_call,
                              b.item_max_parallel, b.item_max_duration, b.item_max_refusals, p_actor, p_now);
        INSERT INTO docket.batch_items (batch_id, key, status, run_id, trusted, admitted_at)
        VALUES (b.id, k, 'reserved', r.id, coalesce(p_trusted[i], false), p_now)
        RETURNING * INTO it;
        -- A run can end within its start (its first steps all refused):
        -- settle its item now, as the trigger would have.
        SELECT * INTO r FROM docket.runs WHERE id = r.id;
        IF r.status IN ('succeeded', 'compensated', 'failed') THEN
            UPDATE docket.batch_items
            SET status = CASE WHEN r.status = 'succeeded' THEN 'succeeded' ELSE 'failed' END, settled_at = p_now,
                reason = CASE WHEN r.status <> 'succeeded' THEN left(format('run %s %s%s', r.id, r.status, coalesce(': ' || r.failure, '')), 2000) END
            WHERE batch_id = b.id AND key = k
            RETURNING * INTO it;
            IF r.status = 'succeeded' THEN
                n_succeeded := n_succeeded + 1;
            ELSE
                n_failed := n_failed + 1;
            END IF;
        ELSE
            n_flight := n_flight + 1;
            n_exhausted := n_exhausted + (r.status = 'exhausted')::int;
        END IF;
        RETURN QUERY SELECT true, (it).*;
    END LOOP;
    -- The batch row once, at the end: the runs' ends update it too, and
    -- wait for it only this long.
    UPDATE docket.batches
    SET last_key = v_last, items = items + n_items, in_flight = in_flight + n_flight, quarantined = quarantined + n_quarantined,
        succeeded = succeeded + n_succeeded, failed = failed + n_failed, exhausted = exhausted + n_exhausted,
        source_done = source_done OR coalesce(p_last, false), updated_at = greatest(updated_at, p_now)
    WHERE id = b.id;
    PERFORM docket.batch_advance(b.id);
END
$$;

-- batch_get returns batch p_id with its plan's digest, when p_actor holds
-- batch.run, case.admit or case.view on its project.
CREATE OR REPLACE FUNCTION docket.batch_get(p_id bigint, p_actor text) RETURNS SETOF docket.batches
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    RETURN QUERY SELECT * FROM docket.batches b
    WHERE b.id = p_id AND (docket.grant_check(p_actor, b.project, 'batch.run') OR docket.grant_check(p_actor, b.project, 'case.view'));
END
$$;

-- batch_items_needing_attention returns up to p_limit (1..1000) items of
-- batch p_id nobody is finished with -- failed, quarantined, and reserved
-- with no outcome yet (in flight, exhausted, or left by a crash) -- oldest
-- key first, after key p_after, from
-- batch_items_attention_idx; none when p_actor may not read the batch.
CREATE OR REPLACE FUNCTION docket.batch_items_needing_attention(p_id bigint, p_after text, p_limit integer, p_actor text)
RETURNS SETOF docket.batch_items
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    PERFORM docket.job_require_batch('limit', p_limit, 1000);
    IF NOT EXISTS (SELECT 1 FROM docket.batch_get(p_id, p_actor)) THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM docket.batch_items i
    WHERE i.batch_id = p_id AND i.status <> 'succeeded' AND (p_after IS NULL OR i.key > p_after COLLATE "C")
    ORDER BY i.key LIMIT p_limit;
END
$$;

-- A prune keeps the jobs of runs, and so of items; batches are kept whole.

INSERT INTO docket.api_functions (name, role) VALUES
    ('batch_open', 'app'), ('batch_admit', 'app'), ('batch_get', 'app'), ('batch_items_needing_attention', 'app');

-- Who may read what (row-level security; see kit.sql) --------------------------

-- A batch is visible where the login's principals hold batch.run or
-- case.view (as batch_get); its items with it.
CREATE POLICY batches_visible_to_batch_readers ON docket.batches FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('batch.run', 'case.view'))::text[]));

CREATE POLICY batch_items_visible_with_their_batch ON docket.batch_items FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.batches b WHERE b.id = batch_id));
