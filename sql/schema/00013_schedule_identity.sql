-- A schedule occurrence is what its job's idempotency key says it is, and a
-- second run of one local time exists only where that local time happens
-- twice:
--   * local_time is a whole minute, as cron matches and as the job key
--     (schedule:ID:YYYY-MM-DDTHH:MI:FOLD) names it, so identity and key
--     agree (DK010 otherwise);
--   * fold 1 is refused (DK010) unless the local time repeats in the
--     schedule's zone: a fall-back overlap.

-- +goose Up

-- local_time_repeats reports whether local date-time p_local happens twice
-- in zone p_zone: some instant other than the one Postgres resolves it to
-- shows the same local time, an offset change of up to two hours away.
CREATE FUNCTION docket.local_time_repeats(p_local timestamp, p_zone text) RETURNS boolean
LANGUAGE sql STABLE
RETURN EXISTS (
    SELECT 1 FROM unnest(ARRAY[interval '15 minutes', interval '30 minutes', interval '45 minutes',
                               interval '1 hour', interval '90 minutes', interval '2 hours']) d
    WHERE ((p_local AT TIME ZONE p_zone) + d) AT TIME ZONE p_zone = p_local
       OR ((p_local AT TIME ZONE p_zone) - d) AT TIME ZONE p_zone = p_local);

ALTER TABLE docket.schedule_occurrences ADD CONSTRAINT schedule_occurrences_local_time_minute
    CHECK (local_time = date_trunc('minute', local_time));

-- schedule_occurrences_fold refuses (DK010) an occurrence's second run (fold
-- 1) of a local time that happens once in its schedule's zone.
-- +goose StatementBegin
CREATE FUNCTION docket.schedule_occurrences_fold() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_zone text;
BEGIN
    SELECT zone INTO v_zone FROM docket.schedules WHERE id = NEW.schedule_id;
    IF v_zone IS NOT NULL AND NOT docket.local_time_repeats(NEW.local_time, v_zone) THEN
        RAISE EXCEPTION 'schedule %: % happens once in %: it has no second run (fold 1)', NEW.schedule_id, NEW.local_time, v_zone
            USING ERRCODE = 'DK010';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER schedule_occurrences_fold
    BEFORE INSERT ON docket.schedule_occurrences
    FOR EACH ROW WHEN (NEW.fold = 1)
    EXECUTE FUNCTION docket.schedule_occurrences_fold();

-- +goose Down
DROP TRIGGER schedule_occurrences_fold ON docket.schedule_occurrences;
DROP FUNCTION docket.schedule_occurrences_fold();
ALTER TABLE docket.schedule_occurrences DROP CONSTRAINT schedule_occurrences_local_time_minute;
DROP FUNCTION docket.local_time_repeats(timestamp, text);
