-- Rules that span tables, held by triggers so they bind every writer, the
-- owner's hand-written SQL included, not only the function that usually
-- makes the change:
--
--   * a case closes only when it owes nothing (DK006), checked by the UPDATE
--     that closes it, which holds the case row; closing releases the keys it
--     holds, in the same statement (cases_close_releases_keys), and a key is
--     released only by its case's closing (DK001);
--   * an obligation is registered only on an open case (DK005), under a share
--     lock of the case row, so it cannot slip in beside a close;
--   * a message is consumed by exactly the wait it satisfies, and a wait is
--     satisfied by exactly the message it consumed: docket.waits.satisfied_by
--     and docket.messages.consumed_by name each other, checked when the
--     transaction commits (a deferred constraint trigger), so a dead letter
--     or a message another wait took satisfies nothing;
--   * a job never finishes before it was created.

-- +goose Up

-- Cases ---------------------------------------------------------------------

-- cases_close_owes_nothing refuses (DK006) closing a case with a pending
-- obligation, by any writer. The UPDATE holds the case row, and
-- obligations_guard takes a share lock on it before registering, so no
-- obligation is registered between this check and the close.
-- +goose StatementBegin
CREATE FUNCTION docket.cases_close_owes_nothing() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_pending text;
BEGIN
    SELECT string_agg(format('%s (%s)', o.name, o.id), ', ' ORDER BY o.due_at, o.id) INTO v_pending
    FROM docket.obligations o WHERE o.case_id = NEW.id AND o.state = 'pending';
    IF v_pending IS NOT NULL THEN
        RAISE EXCEPTION 'case % cannot close: obligation(s) pending: %', NEW.id, v_pending
            USING ERRCODE = 'DK006';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER cases_close_owes_nothing
    BEFORE UPDATE ON docket.cases
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM 'closed' AND NEW.status = 'closed')
    EXECUTE FUNCTION docket.cases_close_owes_nothing();

-- cases_close_releases_keys releases the keys a closing case holds, at the
-- instant it closed, by any writer. Named to fire before cases_record, so a
-- case's history shows its keys released, then its close.
-- +goose StatementBegin
CREATE FUNCTION docket.cases_close_releases_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE docket.case_keys SET released_at = greatest(claimed_at, NEW.closed_at)
    WHERE case_id = NEW.id AND released_at IS NULL;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER cases_close_releases_keys
    AFTER UPDATE ON docket.cases
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM 'closed' AND NEW.status = 'closed')
    EXECUTE FUNCTION docket.cases_close_releases_keys();

-- case_keys_release_on_close refuses (DK001) releasing a key of a case that
-- is not closed: only its closing releases it.
-- +goose StatementBegin
CREATE FUNCTION docket.case_keys_release_on_close() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT status FROM docket.cases WHERE id = NEW.case_id) IS DISTINCT FROM 'closed' THEN
        RAISE EXCEPTION 'case key %: case % is open: a key is released only when its case closes', OLD.id, OLD.case_id
            USING ERRCODE = 'DK001';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER case_keys_release_on_close
    BEFORE UPDATE ON docket.case_keys
    FOR EACH ROW WHEN (OLD.released_at IS NULL AND NEW.released_at IS NOT NULL)
    EXECUTE FUNCTION docket.case_keys_release_on_close();

-- case_close closes case p_id on behalf of p_actor at p_now; its keys are
-- released and its waits, buffered addressed messages and unfired timers
-- settled by the closing UPDATE's triggers. Closing a closed case is a
-- no-op that returns it. The pending check is made under the case row's lock,
-- which obligation_register takes too: no obligation can be registered
-- between the count and the close.
-- Refuses, writing nothing: a malformed actor or instant (DK010); an unknown
-- case or one the actor may not write (P0002); pending obligations (DK006,
-- naming up to ten).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.case_close(p_id bigint, p_actor text, p_now timestamptz)
RETURNS docket.cases
LANGUAGE plpgsql AS $$
DECLARE
    v docket.cases;
    v_pending text;
    v_count bigint;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.case_authorize(p_id, p_actor);
    SELECT * INTO v FROM docket.cases WHERE id = p_id FOR NO KEY UPDATE;
    IF v.status = 'closed' THEN
        RETURN v;
    END IF;
    SELECT count(*), string_agg(format('%s (%s, due %s)', name, id, due_at), ', ' ORDER BY due_at, id)
           FILTER (WHERE rn <= 10)
    INTO v_count, v_pending
    FROM (SELECT o.*, row_number() OVER (ORDER BY o.due_at, o.id) AS rn
          FROM docket.obligations o WHERE o.case_id = p_id AND o.state = 'pending') p;
    IF v_count > 0 THEN
        RAISE EXCEPTION 'case % cannot close: % obligation(s) pending: %', p_id, v_count, v_pending
            USING ERRCODE = 'DK006';
    END IF;
    UPDATE docket.cases SET status = 'closed', closed_at = p_now, updated_at = greatest(updated_at, p_now)
    WHERE id = p_id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd

-- obligations_on_open_case refuses (DK005) an obligation registered on a
-- closed case, by any writer, under a share lock of the case row that a
-- close's UPDATE must wait for.
-- +goose StatementBegin
CREATE FUNCTION docket.obligations_on_open_case() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT status FROM docket.cases WHERE id = NEW.case_id FOR SHARE) = 'closed' THEN
        RAISE EXCEPTION 'case % is closed: it cannot owe %', NEW.case_id, NEW.name
            USING ERRCODE = 'DK005';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER obligations_on_open_case
    BEFORE INSERT ON docket.obligations
    FOR EACH ROW EXECUTE FUNCTION docket.obligations_on_open_case();

-- Waits and messages ----------------------------------------------------------

-- waits_messages_agree checks, when the transaction commits, that a wait and
-- the message it consumed name each other: a satisfied wait's satisfied_by is
-- a consumed message whose consumed_by is that wait, and a consumed message's
-- consumed_by is a satisfied wait whose satisfied_by is that message
-- (DK001). A dead letter, or a message another wait took, satisfies nothing.
-- +goose StatementBegin
CREATE FUNCTION docket.waits_messages_agree() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'waits' THEN
        IF (NEW.status = 'satisfied') <> (NEW.satisfied_by IS NOT NULL) OR (NEW.satisfied_by IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM docket.messages m
            WHERE m.id = NEW.satisfied_by AND m.status = 'consumed' AND m.consumed_by = NEW.id)) THEN
            RAISE EXCEPTION 'wait %: % by message %, which was not consumed by it', NEW.id, NEW.status,
                coalesce(NEW.satisfied_by::text, 'none')
                USING ERRCODE = 'DK001';
        END IF;
    ELSIF (NEW.status = 'consumed') <> (NEW.consumed_by IS NOT NULL) OR (NEW.consumed_by IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM docket.waits w
            WHERE w.id = NEW.consumed_by AND w.status = 'satisfied' AND w.satisfied_by = NEW.id)) THEN
        RAISE EXCEPTION 'message %: % by wait %, which it did not satisfy', NEW.id, NEW.status,
            coalesce(NEW.consumed_by::text, 'none')
            USING ERRCODE = 'DK001';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER waits_messages_agree
    AFTER INSERT OR UPDATE OF status, satisfied_by ON docket.waits
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION docket.waits_messages_agree();

CREATE CONSTRAINT TRIGGER messages_waits_agree
    AFTER INSERT OR UPDATE OF status, consumed_by ON docket.messages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION docket.waits_messages_agree();

-- Jobs ------------------------------------------------------------------------

ALTER TABLE docket.jobs ADD CONSTRAINT jobs_finished_not_before_created CHECK (finished_at >= created_at);

SELECT docket.apply_privileges();

-- +goose Down
ALTER TABLE docket.jobs DROP CONSTRAINT jobs_finished_not_before_created;
DROP TRIGGER messages_waits_agree ON docket.messages;
DROP TRIGGER waits_messages_agree ON docket.waits;
DROP FUNCTION docket.waits_messages_agree();
DROP TRIGGER obligations_on_open_case ON docket.obligations;
DROP FUNCTION docket.obligations_on_open_case();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.case_close(p_id bigint, p_actor text, p_now timestamptz)
RETURNS docket.cases
LANGUAGE plpgsql AS $$
DECLARE
    v docket.cases;
    v_pending text;
    v_count bigint;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.case_authorize(p_id, p_actor);
    SELECT * INTO v FROM docket.cases WHERE id = p_id FOR NO KEY UPDATE;
    IF v.status = 'closed' THEN
        RETURN v;
    END IF;
    SELECT count(*), string_agg(format('%s (%s, due %s)', name, id, due_at), ', ' ORDER BY due_at, id)
           FILTER (WHERE rn <= 10)
    INTO v_count, v_pending
    FROM (SELECT o.*, row_number() OVER (ORDER BY o.due_at, o.id) AS rn
          FROM docket.obligations o WHERE o.case_id = p_id AND o.state = 'pending') p;
    IF v_count > 0 THEN
        RAISE EXCEPTION 'case % cannot close: % obligation(s) pending: %', p_id, v_count, v_pending
            USING ERRCODE = 'DK006';
    END IF;
    UPDATE docket.case_keys SET released_at = greatest(claimed_at, p_now)
    WHERE case_id = p_id AND released_at IS NULL;
    UPDATE docket.cases SET status = 'closed', closed_at = p_now, updated_at = greatest(updated_at, p_now)
    WHERE id = p_id
    RETURNING * INTO v;
    RETURN v;
END
$$;
-- +goose StatementEnd
DROP TRIGGER case_keys_release_on_close ON docket.case_keys;
DROP FUNCTION docket.case_keys_release_on_close();
DROP TRIGGER cases_close_releases_keys ON docket.cases;
DROP FUNCTION docket.cases_close_releases_keys();
DROP TRIGGER cases_close_owes_nothing ON docket.cases;
DROP FUNCTION docket.cases_close_owes_nothing();
