-- Projects: the tenants of docket. Grants, jobs, lanes, cases and schedules
-- belong to exactly one project.
--
--   project status   active <-> archived -> retired (docket.project_transitions;
--                    retired is terminal)
--
-- A project takes new work only while it is active: an archived or retired
-- project takes no new cases, schedules, quorums, lanes or jobs (DK009), for
-- every writer (project_takes_work, and jobs_record_insert for jobs); what it
-- already holds goes on: a job bound to one of its cases or lanes (a
-- continuation, a timer, an escalation) is still made, so an open matter can
-- finish, and the schedule sweep passes its schedules by. Every change
-- appends a docket.project_events row. Projects are created and moved by
-- operators only.

-- Projects ------------------------------------------------------------------

-- The project machine's states and moves (docket.project_states, docket.project_transitions),
-- as 00022_projects.sql declares them.
SELECT docket.machine_views('project');

CREATE OR REPLACE TRIGGER project_events_append_only
    BEFORE UPDATE OR DELETE ON docket.project_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- projects_guard holds every INSERT and UPDATE, whoever issues it, to the
-- project machine: a project is born in an initial state, moves only along
-- docket.project_transitions and never changes once retired.
CREATE OR REPLACE FUNCTION docket.projects_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM docket.machine_birth('project', 'project ' || NEW.name, NEW.status);
    ELSE
        PERFORM docket.machine_move('project', 'project ' || OLD.name, OLD.status, NEW.status);
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER projects_guard
    BEFORE INSERT OR UPDATE ON docket.projects
    FOR EACH ROW EXECUTE FUNCTION docket.projects_guard();

CREATE OR REPLACE TRIGGER projects_columns_immutable
    BEFORE UPDATE OF id, name, created_by, created_at ON docket.projects
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

CREATE OR REPLACE TRIGGER projects_refuse_delete
    BEFORE DELETE ON docket.projects
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('projects are never deleted: retire them instead');

-- projects_record appends the project_events row for a creation or a status
-- change, attributed to the transaction's change context.
CREATE OR REPLACE FUNCTION docket.projects_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status <> OLD.status THEN
        INSERT INTO docket.project_events (project, from_state, to_state, actor, at)
        VALUES (NEW.name, CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status,
                docket.context_actor(), docket.context_now());
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER projects_record
    AFTER INSERT OR UPDATE ON docket.projects
    FOR EACH ROW EXECUTE FUNCTION docket.projects_record();

-- project_create creates project p_name, active, on behalf of p_actor at p_now.
-- Refuses: a malformed name, actor or instant (DK010); a name already taken
-- (unique violation 23505 on projects_name_key).
CREATE OR REPLACE FUNCTION docket.project_create(p_name text, p_actor text, p_now timestamptz)
RETURNS docket.projects
LANGUAGE plpgsql AS $$
DECLARE
    v docket.projects;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_name);
    INSERT INTO docket.projects (name, created_by, created_at, updated_at)
    VALUES (p_name, p_actor, p_now, p_now)
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- project_set_status moves project p_name to p_status on behalf of p_actor at
-- p_now. Setting the status it already has is a no-op that records nothing.
-- Refuses: malformed input (DK010); an unknown project (P0002); a move not in
-- docket.project_transitions or out of a terminal state (DK001).
CREATE OR REPLACE FUNCTION docket.project_set_status(p_name text, p_status text, p_actor text, p_now timestamptz)
RETURNS docket.projects
LANGUAGE plpgsql AS $$
DECLARE
    v docket.projects;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF p_status IS NULL OR NOT EXISTS (SELECT 1 FROM docket.project_states s WHERE s.state = p_status) THEN
        RAISE EXCEPTION 'invalid project status %: want one of active, archived, retired',
            coalesce(quote_literal(p_status), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    SELECT * INTO v FROM docket.projects WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'project % does not exist', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'P0002';
    END IF;
    IF v.status = p_status THEN
        RETURN v;
    END IF;
    UPDATE docket.projects
    SET status = p_status, updated_at = greatest(updated_at, p_now)
    WHERE id = v.id
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- project_takes_work refuses (DK009) a new row of the table it guards in a
-- project that exists and is not active. An unknown project is left to the
-- table's own reference.
CREATE OR REPLACE FUNCTION docket.project_takes_work() RETURNS trigger
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

-- The API ---------------------------------------------------------------------

INSERT INTO docket.api_functions (name, role) VALUES
    ('project_create', 'operator'), ('project_set_status', 'operator');

-- Who may read what (row-level security; see kit.sql) --------------------------

-- A project, and its history, is visible to a login whose principals hold
-- any capability on it, and to operators, who create projects and manage
-- every project's grants.
CREATE POLICY projects_visible_to_grantees_and_operators ON docket.projects FOR SELECT
    USING (name = ANY ((SELECT docket.visible_projects('*'))::text[]) OR (SELECT docket.session_is_operator()));

CREATE POLICY project_events_visible_to_grantees_and_operators ON docket.project_events FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('*'))::text[]) OR (SELECT docket.session_is_operator()));
