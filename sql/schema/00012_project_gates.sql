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

-- jobs_project_takes_work refuses (DK009), set-based, an INSERT of jobs in a
-- project that is not active, unless each such job is bound to a case or a
-- lane of it: work of a matter already open.
-- +goose StatementBegin
CREATE FUNCTION docket.jobs_project_takes_work() RETURNS trigger
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    bad record;
BEGIN
    SELECT n.project, p.status INTO bad FROM new_jobs n JOIN docket.projects p ON p.name = n.project
    WHERE p.status <> 'active' AND n.case_id IS NULL AND n.lane_id IS NULL
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'project % is %: it takes no new jobs but those of its open cases and lanes', bad.project, bad.status
            USING ERRCODE = 'DK009';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER jobs_project_takes_work
    AFTER INSERT ON docket.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION docket.jobs_project_takes_work();

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
DROP TRIGGER jobs_project_takes_work ON docket.jobs;
DROP FUNCTION docket.jobs_project_takes_work();
DROP TRIGGER project_takes_work ON docket.lanes;
DROP TRIGGER project_takes_work ON docket.quorums;
DROP TRIGGER project_takes_work ON docket.schedules;
DROP TRIGGER project_takes_work ON docket.cases;
DROP FUNCTION docket.project_takes_work();
