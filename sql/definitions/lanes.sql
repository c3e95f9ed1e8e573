-- Lanes: named streams of work under a quorum, each with one branch, one
-- assignee and one task thread, generating many jobs over time and carrying a
-- review and a merge record.
--
-- A quorum belongs to one project and has one conductor. A lane belongs to one
-- quorum and takes its project from it, for good. A lane has three independent
-- axes, each held to the database for every writer, psql included:
--
--   execution  open -> in_progress -> done | failed; open, in_progress -> cancelled
--              (docket.lane_transitions; done, failed, cancelled are terminal)
--   review     none -> submitted -> approved | changes_requested;
--              changes_requested -> submitted
--              (docket.lane_review_transitions; approved is final)
--   merge      unmerged -> merged, once, only when done and approved and with a
--              commit (a CHECK); a recorded merge never changes
--
-- Moving one axis never moves another. The BEFORE triggers refuse illegal
-- moves (DK001), changes to immutable columns (DK015) and to a recorded merge
-- (DK014); the AFTER triggers append a docket.lane_events row for every
-- creation, dependency and move, attributed to the change context.
--
-- Who may do what (checked by the functions below, before any lane row is
-- locked, so a refused caller learns nothing and waits for nobody):
--   create a quorum              an explicit quorum.create grant on the project
--   create a lane                the quorum's conductor
--   move execution, approve,
--   request changes, merge       the quorum's conductor
--   submit for review            the conductor or the lane's assignee
--   read                         the conductor, the assignee, or a lane.view
--                                grant on the project
--
-- Bounds: quorum and lane names 1-63 characters; branch 1-255; task reference
-- 1-500; a note 1000; dependencies 64 per lane.

-- The lane machine's states and moves (docket.lane_states, docket.lane_transitions),
-- as 00025_lanes.sql declares them.
SELECT docket.machine_views('lane');

-- The lane_review machine's states and moves (docket.lane_review_states, docket.lane_review_transitions),
-- as 00025_lanes.sql declares them.
SELECT docket.machine_views('lane_review');

CREATE OR REPLACE TRIGGER quorums_refuse_change
    BEFORE UPDATE OR DELETE ON docket.quorums
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('quorums never change: create another quorum instead');

CREATE OR REPLACE TRIGGER project_takes_work
    BEFORE INSERT ON docket.quorums
    FOR EACH ROW EXECUTE FUNCTION docket.project_takes_work();

-- lanes_guard holds every INSERT and UPDATE of docket.lanes, by a docket
-- function or by hand, to the rules: a lane is born in an initial state of
-- both its machines (open, review none) and unmerged (DK001), in an existing
-- quorum (23503), with the quorum's project (DK015 when another is given);
-- execution moves only along docket.lane_transitions and never out of a
-- terminal state, review only along docket.lane_review_transitions and never
-- out of a final one (DK001), each axis apart: moving one never moves
-- another; a recorded merge never changes (DK014). The merge preconditions
-- are the table's CHECK; what a lane is, lanes_columns_immutable keeps.
CREATE OR REPLACE FUNCTION docket.lanes_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_project text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT q.project INTO v_project FROM docket.quorums q WHERE q.id = NEW.quorum_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'lane %: quorum % does not exist', NEW.name, coalesce(NEW.quorum_id::text, 'NULL')
                USING ERRCODE = '23503', CONSTRAINT = 'lanes_quorum_fkey', TABLE = 'lanes', SCHEMA = 'docket';
        END IF;
        IF NEW.project IS DISTINCT FROM v_project AND NEW.project IS NOT NULL THEN
            RAISE EXCEPTION 'lane %: its project is its quorum''s, %, not %', NEW.name, v_project, NEW.project
                USING ERRCODE = 'DK015';
        END IF;
        NEW.project := v_project;
        PERFORM docket.machine_birth('lane', 'lane ' || NEW.name, NEW.state);
        PERFORM docket.machine_birth('lane_review', 'lane ' || NEW.name || ' (review)', NEW.review);
        IF NEW.merge_commit IS NOT NULL OR NEW.merged_at IS NOT NULL OR NEW.merged_by IS NOT NULL THEN
            RAISE EXCEPTION 'lane %: a lane is created unmerged', NEW.name
                USING ERRCODE = 'DK001';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        PERFORM docket.machine_move('lane', 'lane ' || OLD.id, OLD.state, NEW.state);
    END IF;
    IF NEW.review IS DISTINCT FROM OLD.review THEN
        PERFORM docket.machine_move('lane_review', 'lane ' || OLD.id || ' (review)', OLD.review, NEW.review);
    END IF;
    IF OLD.merged_at IS NOT NULL
       AND (NEW.merge_commit, NEW.merged_at, NEW.merged_by) IS DISTINCT FROM (OLD.merge_commit, OLD.merged_at, OLD.merged_by) THEN
        RAISE EXCEPTION 'lane % was merged at commit %: its merge record never changes', OLD.id, OLD.merge_commit
            USING ERRCODE = 'DK014';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER lanes_guard
    BEFORE INSERT OR UPDATE ON docket.lanes
    FOR EACH ROW EXECUTE FUNCTION docket.lanes_guard();

CREATE OR REPLACE TRIGGER lanes_columns_immutable
    BEFORE UPDATE OF id, quorum_id, project, name, branch, assignee, task_ref, created_by,
                     created_at ON docket.lanes
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_immutable();

CREATE OR REPLACE TRIGGER lanes_refuse_delete
    BEFORE DELETE ON docket.lanes
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('lanes are kept with their history: cancel a lane instead');

CREATE OR REPLACE TRIGGER project_takes_work
    BEFORE INSERT ON docket.lanes
    FOR EACH ROW EXECUTE FUNCTION docket.project_takes_work();

CREATE OR REPLACE TRIGGER lane_dependencies_append_only
    BEFORE UPDATE OR DELETE ON docket.lane_dependencies
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- lane_dependencies_guard refuses (DK013), naming the lanes, a dependency on a
-- lane that does not exist, is in another quorum, or is not older than the
-- dependent lane (itself included, so no cycle can form), before the
-- constraints would refuse it less plainly; and (DK010) a 65th dependency of
-- one lane, so the bound holds for a hand-written INSERT too. It fills in
-- quorum_id.
CREATE OR REPLACE FUNCTION docket.lane_dependencies_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_quorum bigint;
    v_dep_quorum bigint;
BEGIN
    SELECT l.quorum_id INTO v_quorum FROM docket.lanes l WHERE l.id = NEW.lane_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lane % does not exist: it cannot depend on anything', coalesce(NEW.lane_id::text, 'NULL')
            USING ERRCODE = 'DK013';
    END IF;
    SELECT l.quorum_id INTO v_dep_quorum FROM docket.lanes l WHERE l.id = NEW.depends_on;
    IF NOT FOUND OR v_dep_quorum <> v_quorum OR NEW.quorum_id <> v_quorum THEN
        RAISE EXCEPTION 'lane %: dependency lane % is not a lane of its quorum % (no such lane, or one of another quorum)',
            NEW.lane_id, coalesce(NEW.depends_on::text, 'NULL'), v_quorum
            USING ERRCODE = 'DK013';
    END IF;
    IF NEW.depends_on >= NEW.lane_id THEN
        RAISE EXCEPTION 'lane %: dependency lane % is not older than it: a lane depends only on lanes created before it, so no cycle can form',
            NEW.lane_id, NEW.depends_on
            USING ERRCODE = 'DK013';
    END IF;
    IF (SELECT count(*) FROM docket.lane_dependencies d WHERE d.lane_id = NEW.lane_id) >= 64 THEN
        RAISE EXCEPTION 'invalid dependencies: lane % has 64 already, at most 64', NEW.lane_id
            USING ERRCODE = 'DK010';
    END IF;
    NEW.quorum_id := v_quorum;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER lane_dependencies_guard
    BEFORE INSERT ON docket.lane_dependencies
    FOR EACH ROW EXECUTE FUNCTION docket.lane_dependencies_guard();

CREATE OR REPLACE TRIGGER lane_events_append_only
    BEFORE UPDATE OR DELETE ON docket.lane_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- lane_note is the note the current docket function gives the change it is
-- making (the detail of its event): the transaction-local setting
-- docket.lane_note, NULL when empty. An operator changing lanes by hand may
-- set it: SELECT set_config('docket.lane_note', 'why', true).
CREATE OR REPLACE FUNCTION docket.lane_note() RETURNS text
LANGUAGE sql STABLE
RETURN nullif(current_setting('docket.lane_note', true), '');

-- lanes_record appends the lane_events rows of a lane's creation or change,
-- attributed to the change context: one per axis that moved. A change that
-- moves no axis (updated_at alone) records nothing.
CREATE OR REPLACE FUNCTION docket.lanes_record() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_actor text;
    v_at    timestamptz;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state AND NEW.review = OLD.review
       AND (NEW.merged_at IS NULL OR OLD.merged_at IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    v_actor := docket.context_actor();
    v_at := docket.context_now();
    IF TG_OP = 'INSERT' THEN
        INSERT INTO docket.lane_events (lane_id, axis, from_state, to_state, actor, at, detail)
        VALUES (NEW.id, 'created', NULL, NEW.state, v_actor, v_at,
                docket.bounded_text(format('lane %s in quorum %s: branch %s, assignee %s, task %s',
                                           NEW.name, NEW.quorum_id, NEW.branch, NEW.assignee, NEW.task_ref), 2000));
        RETURN NULL;
    END IF;
    IF NEW.state <> OLD.state THEN
        INSERT INTO docket.lane_events (lane_id, axis, from_state, to_state, actor, at, detail)
        VALUES (NEW.id, 'execution', OLD.state, NEW.state, v_actor, v_at, docket.lane_note());
    END IF;
    IF NEW.review <> OLD.review THEN
        INSERT INTO docket.lane_events (lane_id, axis, from_state, to_state, actor, at, detail)
        VALUES (NEW.id, 'review', OLD.review, NEW.review, v_actor, v_at, docket.lane_note());
    END IF;
    IF NEW.merged_at IS NOT NULL AND OLD.merged_at IS NULL THEN
        INSERT INTO docket.lane_events (lane_id, axis, from_state, to_state, actor, at, detail)
        VALUES (NEW.id, 'merge', 'unmerged', 'merged', v_actor, v_at, 'commit ' || NEW.merge_commit);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER lanes_record
    AFTER INSERT OR UPDATE ON docket.lanes
    FOR EACH ROW EXECUTE FUNCTION docket.lanes_record();

-- lane_dependencies_record appends a 'dependency' event for each dependency
-- written, attributed to the change context.
CREATE OR REPLACE FUNCTION docket.lane_dependencies_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO docket.lane_events (lane_id, axis, from_state, to_state, actor, at, detail)
    VALUES (NEW.lane_id, 'dependency', NULL, NEW.depends_on::text, docket.context_actor(), docket.context_now(),
            'depends on lane ' || NEW.depends_on);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER lane_dependencies_record
    AFTER INSERT ON docket.lane_dependencies
    FOR EACH ROW EXECUTE FUNCTION docket.lane_dependencies_record();

-- Reading -------------------------------------------------------------------------

-- A lane as the API shows it: with its quorum's name and conductor and the
-- lanes it depends on. Every lane function returns this row.
CREATE OR REPLACE VIEW docket.lane_details WITH (security_invoker = true) AS
SELECT l.id, l.quorum_id, q.name AS quorum, l.project, q.conductor, l.name, l.branch, l.assignee, l.task_ref,
       ARRAY(SELECT d.depends_on FROM docket.lane_dependencies d WHERE d.lane_id = l.id ORDER BY d.depends_on)::bigint[]
           AS depends_on,
       l.state, l.review, l.merge_commit, l.merged_at, l.merged_by, l.created_by, l.created_at, l.updated_at
FROM docket.lanes l
JOIN docket.quorums q ON q.id = l.quorum_id;

COMMENT ON VIEW docket.lane_details IS
    'Every lane with its quorum name, conductor and dependencies.';

-- lane_visible reports whether p_principal may read a lane of p_project
-- conducted by p_conductor and assigned to p_assignee: it is one of them, or
-- holds lane.view on the project. The Go API filters every read by it; an
-- operator in psql reads everything.
CREATE OR REPLACE FUNCTION docket.lane_visible(p_principal text, p_project text, p_conductor text, p_assignee text)
RETURNS boolean
LANGUAGE sql STABLE
RETURN p_principal = p_conductor OR p_principal = p_assignee
    OR docket.grant_check(p_principal, p_project, 'lane.view');

-- Operator views ------------------------------------------------------------------

CREATE OR REPLACE VIEW docket.lanes_open WITH (security_invoker = true) AS
SELECT l.id, l.project, q.name AS quorum, q.conductor, l.name, l.branch, l.assignee, l.state, l.review,
       (SELECT count(*) FROM docket.lane_dependencies d JOIN docket.lanes dl ON dl.id = d.depends_on
        WHERE d.lane_id = l.id AND dl.state <> 'done') AS waiting_on,
       l.updated_at
FROM docket.lanes l
JOIN docket.quorums q ON q.id = l.quorum_id
WHERE l.state IN ('open', 'in_progress')
ORDER BY l.project, q.name, l.id;

COMMENT ON VIEW docket.lanes_open IS
    'Lanes not yet finished, by project and quorum; waiting_on counts dependencies that are not done.';

CREATE OR REPLACE VIEW docket.lanes_awaiting_review WITH (security_invoker = true) AS
SELECT l.id, l.project, q.name AS quorum, q.conductor, l.name, l.branch, l.assignee, l.state, l.updated_at
FROM docket.lanes l
JOIN docket.quorums q ON q.id = l.quorum_id
WHERE l.review = 'submitted'
ORDER BY l.updated_at, l.id;

COMMENT ON VIEW docket.lanes_awaiting_review IS
    'Lanes submitted for review, waiting for their conductor''s verdict, longest waiting first.';

CREATE OR REPLACE VIEW docket.lanes_ready_to_merge WITH (security_invoker = true) AS
SELECT l.id, l.project, q.name AS quorum, q.conductor, l.name, l.branch, l.assignee, l.updated_at
FROM docket.lanes l
JOIN docket.quorums q ON q.id = l.quorum_id
WHERE l.state = 'done' AND l.review = 'approved' AND l.merged_at IS NULL
ORDER BY l.updated_at, l.id;

COMMENT ON VIEW docket.lanes_ready_to_merge IS
    'Lanes done and approved whose merge is not recorded yet.';

-- Protocol --------------------------------------------------------------------------

-- quorum_create creates quorum p_name in project p_project with conductor
-- p_conductor, on behalf of p_actor at p_now.
-- Refuses, writing nothing: a malformed project, name, conductor, actor or
-- instant (DK010); an actor without an explicit quorum.create grant on the
-- project, or an unknown project (DK009); a name taken in the project
-- (23505 on quorums_name_key).
CREATE OR REPLACE FUNCTION docket.quorum_create(p_project text, p_name text, p_conductor text, p_actor text, p_now timestamptz)
RETURNS docket.quorums
LANGUAGE plpgsql AS $$
DECLARE
    v docket.quorums;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.require_valid(docket.valid_project_name(p_name), 'quorum name', p_name,
        '1-63 characters of [a-z0-9._-], starting with a letter or digit');
    PERFORM docket.require_principal('conductor', p_conductor);
    IF NOT docket.grant_check(p_actor, p_project, 'quorum.create') THEN
        RAISE EXCEPTION '% may not create quorums in project %: it needs an explicit quorum.create grant', p_actor, p_project
            USING ERRCODE = 'DK009';
    END IF;
    INSERT INTO docket.quorums (project, name, conductor, created_by, created_at)
    VALUES (p_project, p_name, p_conductor, p_actor, p_now)
    RETURNING * INTO v;
    RETURN v;
END
$$;

-- lane_authorize refuses (DK009) p_actor doing p_op on lane p_id unless it is
-- the conductor of the lane's quorum or, when p_assignee_may, the lane's
-- assignee. It reads the lane's quorum and assignee, which never change,
-- without locking anything, so a refused caller neither waits for a lane
-- another transaction holds nor learns anything about it: an unknown lane is
-- refused in the same words.
CREATE OR REPLACE FUNCTION docket.lane_authorize(p_op text, p_id bigint, p_actor text, p_assignee_may boolean)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_conductor text;
    v_assignee text;
BEGIN
    SELECT q.conductor, l.assignee INTO v_conductor, v_assignee
    FROM docket.lanes l JOIN docket.quorums q ON q.id = l.quorum_id
    WHERE l.id = p_id;
    IF p_actor = v_conductor OR (p_assignee_may AND p_actor = v_assignee) THEN
        RETURN;
    END IF;
    RAISE EXCEPTION '% may not % lane %: only the conductor of its quorum% may (or there is no such lane)',
        p_actor, p_op, coalesce(p_id::text, 'NULL'), CASE WHEN p_assignee_may THEN ' or its assignee' ELSE '' END
        USING ERRCODE = 'DK009';
END
$$;

-- lane_detail returns lane p_id as docket.lane_details shows it.
CREATE OR REPLACE FUNCTION docket.lane_detail(p_id bigint) RETURNS docket.lane_details
LANGUAGE sql STABLE
RETURN (SELECT v FROM docket.lane_details v WHERE v.id = p_id);

-- lane_create creates lane p_name in quorum p_quorum_id on branch p_branch,
-- assigned to p_assignee for task p_task_ref, depending on the lanes
-- p_depends_on (NULL or empty: none), on behalf of p_actor at p_now, and
-- returns it open, with review none. Its project is the quorum's.
-- Refuses, writing nothing: a malformed name, branch, assignee, task
-- reference, actor or instant, more than 64 dependencies or a NULL one
-- (DK010); an actor that is not the quorum's conductor, or an unknown quorum
-- (DK009); a dependency named twice, unknown, or in another quorum (DK013,
-- naming it); a name taken in the quorum (23505 on lanes_name_key).
CREATE OR REPLACE FUNCTION docket.lane_create(p_quorum_id bigint, p_name text, p_branch text, p_assignee text, p_task_ref text,
                                   p_depends_on bigint[], p_actor text, p_now timestamptz)
RETURNS docket.lane_details
LANGUAGE plpgsql AS $$
DECLARE
    v_conductor text;
    v_bad bigint;
    v docket.lanes;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(docket.valid_project_name(p_name), 'lane name', p_name,
        '1-63 characters of [a-z0-9._-], starting with a letter or digit');
    PERFORM docket.require_valid(docket.valid_branch(p_branch), 'branch', p_branch,
        'a git branch name of 1-255 characters of [A-Za-z0-9._/-]');
    PERFORM docket.require_principal('assignee', p_assignee);
    PERFORM docket.require_valid(docket.valid_task_ref(p_task_ref), 'task reference', p_task_ref,
        '1-500 characters, no control characters, no leading or trailing space');
    p_depends_on := coalesce(p_depends_on, '{}');
    IF cardinality(p_depends_on) > 64 THEN
        RAISE EXCEPTION 'invalid dependencies: % lanes, at most 64', cardinality(p_depends_on) USING ERRCODE = 'DK010';
    ELSIF array_position(p_depends_on, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'invalid dependencies: a lane id is NULL' USING ERRCODE = 'DK010';
    END IF;

    -- The privilege first, reading the quorum (which never changes) unlocked.
    SELECT q.conductor INTO v_conductor FROM docket.quorums q WHERE q.id = p_quorum_id;
    IF v_conductor IS DISTINCT FROM p_actor THEN
        RAISE EXCEPTION '% may not create lanes in quorum %: only its conductor may (or there is no such quorum)',
            p_actor, coalesce(p_quorum_id::text, 'NULL')
            USING ERRCODE = 'DK009';
    END IF;

    SELECT d INTO v_bad FROM unnest(p_depends_on) d GROUP BY d HAVING count(*) > 1 ORDER BY d LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'lane %: dependency lane % is named twice', p_name, v_bad USING ERRCODE = 'DK013';
    END IF;
    SELECT x.d INTO v_bad FROM unnest(p_depends_on) WITH ORDINALITY AS x(d, i)
    WHERE NOT EXISTS (SELECT 1 FROM docket.lanes l WHERE l.id = x.d AND l.quorum_id = p_quorum_id)
    ORDER BY x.i LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'lane %: dependency lane % is not a lane of quorum % (no such lane, or one of another quorum)',
            p_name, v_bad, p_quorum_id
            USING ERRCODE = 'DK013';
    END IF;

    -- The dependencies were read first, so the new lane's id is larger than
    -- each of theirs, as lane_dependencies_earlier requires.
    INSERT INTO docket.lanes (quorum_id, name, branch, assignee, task_ref, created_by, created_at, updated_at)
    VALUES (p_quorum_id, p_name, p_branch, p_assignee, p_task_ref, p_actor, p_now, p_now)
    RETURNING * INTO v;
    INSERT INTO docket.lane_dependencies (lane_id, depends_on, quorum_id)
    SELECT v.id, d, p_quorum_id FROM unnest(p_depends_on) d ORDER BY d;
    RETURN docket.lane_detail(v.id);
END
$$;

-- lane_require_note refuses (DK010) a note over 1000 characters.
CREATE OR REPLACE FUNCTION docket.lane_require_note(p_note text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF length(p_note) > 1000 THEN
        RAISE EXCEPTION 'invalid note: % characters, at most 1000', length(p_note) USING ERRCODE = 'DK010';
    END IF;
END
$$;

-- lane_set_state moves lane p_id's execution axis to p_state on behalf of
-- p_actor at p_now, with p_note (NULL: none) as the event's detail. Review
-- and merge are untouched.
-- Refuses, writing nothing: a malformed state, note, actor or instant
-- (DK010); an actor that is not the conductor of the lane's quorum, or an
-- unknown lane (DK009), before the lane is locked; a move not in
-- docket.lane_transitions, the state the lane is already in included, or out
-- of a terminal state (DK001).
CREATE OR REPLACE FUNCTION docket.lane_set_state(p_id bigint, p_state text, p_note text, p_actor text, p_now timestamptz)
RETURNS docket.lane_details
LANGUAGE plpgsql AS $$
DECLARE
    v docket.lanes;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF p_state IS NULL OR NOT EXISTS (SELECT 1 FROM docket.lane_states WHERE state = p_state) THEN
        RAISE EXCEPTION 'invalid lane state %: want open, in_progress, done, failed or cancelled',
            coalesce(quote_literal(docket.bounded_text(p_state, 80)), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    PERFORM docket.lane_require_note(p_note);
    PERFORM docket.lane_authorize('move', p_id, p_actor, false);
    SELECT * INTO v FROM docket.lanes WHERE id = p_id FOR NO KEY UPDATE;
    IF v.state = p_state THEN
        RAISE EXCEPTION 'lane %: it is already %: % -> % is not in docket.lane_transitions', v.id, v.state, v.state, p_state
            USING ERRCODE = 'DK001';
    END IF;
    PERFORM set_config('docket.lane_note', coalesce(p_note, ''), true);
    UPDATE docket.lanes SET state = p_state, updated_at = greatest(updated_at, p_now) WHERE id = v.id;
    PERFORM set_config('docket.lane_note', '', true);
    RETURN docket.lane_detail(v.id);
END
$$;

-- lane_review moves lane p_id's review axis to p_review on behalf of p_actor
-- at p_now, with p_note (NULL: none) as the event's detail: submitted (by
-- the conductor or the assignee), approved or changes_requested (by the
-- conductor). Execution and merge are untouched.
-- Refuses, writing nothing: a malformed verdict, note, actor or instant
-- (DK010); an actor without the role, or an unknown lane (DK009), before
-- the lane is locked; a move not in docket.lane_review_transitions, the
-- review the lane already has included (DK001).
CREATE OR REPLACE FUNCTION docket.lane_review(p_id bigint, p_review text, p_note text, p_actor text, p_now timestamptz)
RETURNS docket.lane_details
LANGUAGE plpgsql AS $$
DECLARE
    v docket.lanes;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    IF p_review IS NULL OR p_review NOT IN ('submitted', 'approved', 'changes_requested') THEN
        RAISE EXCEPTION 'invalid review %: want submitted, approved or changes_requested',
            coalesce(quote_literal(docket.bounded_text(p_review, 80)), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    PERFORM docket.lane_require_note(p_note);
    PERFORM docket.lane_authorize(CASE p_review WHEN 'submitted' THEN 'submit' WHEN 'approved' THEN 'approve'
                                                ELSE 'request changes on' END,
                                  p_id, p_actor, p_review = 'submitted');
    SELECT * INTO v FROM docket.lanes WHERE id = p_id FOR NO KEY UPDATE;
    IF v.review = p_review THEN
        RAISE EXCEPTION 'lane %: review is already %: % -> % is not in docket.lane_review_transitions',
            v.id, v.review, v.review, p_review
            USING ERRCODE = 'DK001';
    END IF;
    PERFORM set_config('docket.lane_note', coalesce(p_note, ''), true);
    UPDATE docket.lanes SET review = p_review, updated_at = greatest(updated_at, p_now) WHERE id = v.id;
    PERFORM set_config('docket.lane_note', '', true);
    RETURN docket.lane_detail(v.id);
END
$$;

-- lane_merge records that lane p_id was merged at commit p_commit, on behalf
-- of p_actor at p_now. It records; it executes nothing. Recording the same
-- commit again is a quiet no-op that returns the lane.
-- Refuses, writing nothing: a malformed commit, actor or instant (DK010); an
-- actor that is not the conductor of the lane's quorum, or an unknown lane
-- (DK009), before the lane is locked; a lane that is not done and approved
-- (DK001); a lane merged at another commit (DK014).
CREATE OR REPLACE FUNCTION docket.lane_merge(p_id bigint, p_commit text, p_actor text, p_now timestamptz)
RETURNS docket.lane_details
LANGUAGE plpgsql AS $$
DECLARE
    v docket.lanes;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_valid(docket.valid_commit(p_commit), 'merge commit', p_commit,
        'a git object id of 40 or 64 lowercase hex digits');
    PERFORM docket.lane_authorize('merge', p_id, p_actor, false);
    SELECT * INTO v FROM docket.lanes WHERE id = p_id FOR NO KEY UPDATE;
    IF v.merged_at IS NOT NULL THEN
        IF v.merge_commit = p_commit THEN
            RETURN docket.lane_detail(v.id);
        END IF;
        RAISE EXCEPTION 'lane % was already merged at commit %: it cannot be merged at %', v.id, v.merge_commit, p_commit
            USING ERRCODE = 'DK014';
    END IF;
    IF v.state <> 'done' OR v.review <> 'approved' THEN
        RAISE EXCEPTION 'lane % cannot be merged: it is % with review %; a merge needs done and approved', v.id, v.state, v.review
            USING ERRCODE = 'DK001';
    END IF;
    UPDATE docket.lanes
    SET merge_commit = p_commit, merged_at = p_now, merged_by = p_actor, updated_at = greatest(updated_at, p_now)
    WHERE id = v.id;
    RETURN docket.lane_detail(v.id);
END
$$;

-- The API ---------------------------------------------------------------------

INSERT INTO docket.api_functions (name, role) VALUES
    ('quorum_create', 'app'), ('lane_create', 'app'), ('lane_set_state', 'app'), ('lane_review', 'app'),
    ('lane_merge', 'app');

-- Who may read what (row-level security; see kit.sql) --------------------------

-- A quorum is visible to its conductor's login and where the login's
-- principals hold lane.view or quorum.create; a lane to its assignee's login,
-- its quorum's conductor's, and where they hold lane.view (as lane_visible).
-- Its dependencies and events are visible with it.
CREATE POLICY quorums_visible_to_conductors_and_lane_readers ON docket.quorums FOR SELECT
    USING (docket.principal_bound(conductor, (SELECT docket.login_principals()))
           OR project = ANY ((SELECT docket.visible_projects('lane.view', 'quorum.create'))::text[]));

CREATE POLICY lanes_visible_to_conductors_assignees_and_lane_readers ON docket.lanes FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('lane.view'))::text[])
           OR docket.principal_bound(assignee, (SELECT docket.login_principals()))
           OR EXISTS (SELECT 1 FROM docket.quorums q
                      WHERE q.id = quorum_id AND docket.principal_bound(q.conductor, (SELECT docket.login_principals()))));

CREATE POLICY lane_dependencies_visible_with_their_lane ON docket.lane_dependencies FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.lanes l WHERE l.id = lane_id));

CREATE POLICY lane_events_visible_with_their_lane ON docket.lane_events FOR SELECT
    USING (EXISTS (SELECT 1 FROM docket.lanes l WHERE l.id = lane_id));
