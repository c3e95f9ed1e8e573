-- A project takes new work only while it is active. An archived or retired
-- project takes no new cases, schedules, quorums, lanes or jobs (DK009), for
-- every writer; what it already holds goes on: a job bound to one of its
-- cases or lanes (a continuation, a timer, an escalation) is still made, so
-- an open matter can finish, and the schedule sweep passes its schedules by.

-- +goose Up

-- project_takes_work refuses (DK009) a new row of the table it guards in a
-- project that exists and is not active. An unknown project is left to the
-- table's own reference.
-- +goose StatementBegin
CREATE FUNCTION docket.project_takes_work() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    SELECT status INTO v_status FROM docket.projects WHERE name = NEW.project;
    IF v_status IS NOT NULL AND v_status <> 'active' THEN
        RAISE EXCEPTION 'project % is %: it takes no new %', NEW.project, v_status, TG_TABLE_NAME
            USING ERRCODE = 'DK009';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER project_takes_work BEFORE INSERT ON docket.cases
    FOR EACH ROW EXECUTE FUNCTION docket.project_takes_work();
CREATE TRIGGER project_takes_work BEFORE INSERT ON docket.schedules
    FOR EACH ROW EXECUTE FUNCTION docket.project_takes_work();
CREATE TRIGGER project_takes_work BEFORE INSERT ON docket.quorums
    FOR EACH ROW EXECUTE FUNCTION docket.project_takes_work();
CREATE TRIGGER project_takes_work BEFORE INSERT ON docket.lanes
    FOR EACH ROW EXECUTE FUNCTION docket.project_takes_work();

-- jobs_record_insert checks that every job an INSERT created names an
-- existing project (23503 otherwise) that is active, or is bound to a case
-- or lane of it (DK009 otherwise: work of a matter already open), and
-- appends each one's first event, set-based, in one pass over the new jobs.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.jobs_record_insert() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    bad record;
    v_actor text;
    v_at    timestamptz;
    v_zero  bytea := decode(repeat('00', 32), 'hex');
    -- Every job is born queued, with nothing held.
    v_born  bytea := docket.job_outcome('queued', NULL, NULL, NULL, NULL, 0, 0);
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_jobs) THEN
        RETURN NULL;
    END IF;
    SELECT n.id, n.project, p.status INTO bad FROM new_jobs n
    LEFT JOIN docket.projects p ON p.name = n.project
    WHERE p.name IS NULL OR (p.status <> 'active' AND n.case_id IS NULL AND n.lane_id IS NULL)
    LIMIT 1;
    IF FOUND AND bad.status IS NULL THEN
        RAISE EXCEPTION 'job %: project % does not exist', bad.id, quote_literal(bad.project)
            USING ERRCODE = '23503', CONSTRAINT = 'jobs_project_exists', TABLE = 'jobs', SCHEMA = 'docket';
    ELSIF FOUND THEN
        RAISE EXCEPTION 'project % is %: it takes no new jobs but those of its open cases and lanes', bad.project, bad.status
            USING ERRCODE = 'DK009';
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until, outcome,
                                   prev_hash, hash)
    SELECT n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, NULL, NULL, v_born, v_zero,
           docket.job_event_hash(v_zero, n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, NULL, NULL, v_born)
    FROM new_jobs n;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- schedule_due returns up to p_limit active schedules due at p_now, of active
-- projects where p_actor holds schedule.sweep and job.create, soonest first,
-- locked for the caller's transaction; schedules another sweeper holds are
-- skipped, never waited for.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.schedule_due(p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.schedules
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep batch', p_limit, 10000);
    RETURN QUERY
    SELECT * FROM docket.schedules s
    WHERE s.status = 'active' AND s.next_due_at <= p_now
      AND docket.grant_check(p_actor, s.project, 'schedule.sweep')
      AND docket.grant_check(p_actor, s.project, 'job.create')
      AND EXISTS (SELECT 1 FROM docket.projects p WHERE p.name = s.project AND p.status = 'active')
    ORDER BY s.next_due_at, s.id
    LIMIT p_limit
    FOR UPDATE OF s SKIP LOCKED;
END
$$;
-- +goose StatementEnd

SELECT docket.apply_privileges();

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.schedule_due(p_limit integer, p_actor text, p_now timestamptz)
RETURNS SETOF docket.schedules
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.job_require_batch('sweep batch', p_limit, 10000);
    RETURN QUERY
    SELECT * FROM docket.schedules
    WHERE status = 'active' AND next_due_at <= p_now
      AND docket.grant_check(p_actor, project, 'schedule.sweep')
      AND docket.grant_check(p_actor, project, 'job.create')
    ORDER BY next_due_at, id
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.jobs_record_insert() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    bad record;
    v_actor text;
    v_at    timestamptz;
    v_zero  bytea := decode(repeat('00', 32), 'hex');
    -- Every job is born queued, with nothing held.
    v_born  bytea := docket.job_outcome('queued', NULL, NULL, NULL, NULL, 0, 0);
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_jobs) THEN
        RETURN NULL;
    END IF;
    SELECT n.id, n.project INTO bad FROM new_jobs n
    WHERE NOT EXISTS (SELECT 1 FROM docket.projects p WHERE p.name = n.project)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job %: project % does not exist', bad.id, quote_literal(bad.project)
            USING ERRCODE = '23503', CONSTRAINT = 'jobs_project_exists', TABLE = 'jobs', SCHEMA = 'docket';
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    INSERT INTO docket.job_events (job_id, seq, from_state, to_state, actor, at, attempt, detail, lease_until, outcome,
                                   prev_hash, hash)
    SELECT n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, NULL, NULL, v_born, v_zero,
           docket.job_event_hash(v_zero, n.id, 1, NULL, n.state, v_actor, v_at, n.attempts, NULL, NULL, v_born)
    FROM new_jobs n;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TRIGGER project_takes_work ON docket.lanes;
DROP TRIGGER project_takes_work ON docket.quorums;
DROP TRIGGER project_takes_work ON docket.schedules;
DROP TRIGGER project_takes_work ON docket.cases;
DROP FUNCTION docket.project_takes_work();
