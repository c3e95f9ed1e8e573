-- Queues: a project's queue can be paused, so that no claim takes its jobs
-- (docket.queue_paused, asked by job_claim, job_claim_id and
-- job_claim_queue), and resumed. Its jobs stay queued while it is paused:
-- they are enqueued, listed, cancelled and pinned as ever, and claimed once
-- it resumes. docket.queues holds each queue ever paused (a queue no row
-- names is running), docket.queue_events who paused and resumed it, when
-- and why.
--
-- Pausing a paused queue, or resuming a running one, is a quiet no-op: it
-- returns the queue as it is and records nothing, so a repeated call (a
-- retry after a lost answer, two operators at once) does no harm. The
-- queue's revision counts its pauses and resumes.

CREATE OR REPLACE TRIGGER queue_events_append_only BEFORE UPDATE OR DELETE ON docket.queue_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- queue_visible reports whether p_principal may read the queues of
-- p_project: it holds queue.view or queue.pause there, or may read its jobs
-- (job_visible), whose claims a pause holds up.
CREATE OR REPLACE FUNCTION docket.queue_visible(p_principal text, p_project text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN docket.job_visible(p_principal, p_project) OR EXISTS (
        SELECT 1 FROM docket.grants g
        WHERE g.project = p_project AND g.principal = p_principal AND g.capability IN ('queue.view', 'queue.pause')
    );
END
$$;

-- queue_set pauses (p_paused) or resumes queue p_queue of p_project on
-- behalf of p_actor at p_now, with p_reason (NULL: none given), and
-- returns the queue. p_op names the operation for the messages. Refuses,
-- writing nothing: a malformed project, queue or reason over 1000
-- characters (DK010); an actor without queue.pause on p_project, or an
-- unknown project (DK009).
CREATE OR REPLACE FUNCTION docket.queue_set(p_op text, p_paused boolean, p_project text, p_queue text, p_reason text,
                                            p_actor text, p_now timestamptz)
RETURNS docket.queues
LANGUAGE plpgsql AS $$
DECLARE
    q docket.queues;
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_project_name(p_project);
    PERFORM docket.job_require_queue(p_queue);
    PERFORM docket.require_valid(p_reason IS NULL OR length(p_reason) <= 1000, 'reason', left(p_reason, 40) || '…',
        'at most 1000 characters');
    IF NOT docket.grant_check(p_actor, p_project, 'queue.pause') THEN
        RAISE EXCEPTION '% may not % queue % of project %: it needs queue.pause there', p_actor, p_op, p_queue, p_project
            USING ERRCODE = 'DK009';
    END IF;
    SELECT * INTO q FROM docket.queues WHERE project = p_project AND queue = p_queue FOR UPDATE;
    IF NOT FOUND THEN
        IF NOT p_paused THEN
            -- Never paused: running, as a resume leaves it.
            RETURN ROW(p_project, p_queue, false, 0, NULL, NULL, NULL, p_actor, p_now)::docket.queues;
        END IF;
        -- Two first pauses at once: the second finds the first's row.
        INSERT INTO docket.queues (project, queue, paused, revision, paused_by, paused_at, reason, updated_by, updated_at)
        VALUES (p_project, p_queue, true, 1, p_actor, p_now, p_reason, p_actor, p_now)
        ON CONFLICT (project, queue) DO NOTHING
        RETURNING * INTO q;
        IF NOT FOUND THEN
            SELECT * INTO q FROM docket.queues WHERE project = p_project AND queue = p_queue FOR UPDATE;
        ELSE
            INSERT INTO docket.queue_events (project, queue, revision, what, actor, at, reason)
            VALUES (p_project, p_queue, 1, 'paused', p_actor, p_now, p_reason);
            RETURN q;
        END IF;
    END IF;
    IF q.paused = p_paused THEN
        RETURN q;
    END IF;
    UPDATE docket.queues
    SET paused = p_paused, revision = revision + 1,
        paused_by = CASE WHEN p_paused THEN p_actor END, paused_at = CASE WHEN p_paused THEN p_now END,
        reason = CASE WHEN p_paused THEN p_reason END, updated_by = p_actor, updated_at = greatest(updated_at, p_now)
    WHERE project = p_project AND queue = p_queue
    RETURNING * INTO q;
    INSERT INTO docket.queue_events (project, queue, revision, what, actor, at, reason)
    VALUES (p_project, p_queue, q.revision, CASE WHEN p_paused THEN 'paused' ELSE 'resumed' END, p_actor, p_now, p_reason);
    IF NOT p_paused THEN
        -- Wake the workers of the queue: its due jobs were waiting.
        PERFORM pg_notify('docket_jobs', p_queue);
    END IF;
    RETURN q;
END
$$;

-- queue_pause pauses queue p_queue of p_project: from the commit on, no
-- claim takes its jobs, which stay queued; jobs claimed before run on. See
-- queue_set for its refusals; pausing a paused queue is a quiet no-op.
CREATE OR REPLACE FUNCTION docket.queue_pause(p_project text, p_queue text, p_reason text, p_actor text, p_now timestamptz)
RETURNS docket.queues
LANGUAGE sql AS $$
    SELECT * FROM docket.queue_set('pause', true, p_project, p_queue, p_reason, p_actor, p_now);
$$;

-- queue_resume resumes queue p_queue of p_project: its due jobs are
-- claimed again, and its workers are woken. See queue_set for its
-- refusals; resuming a running queue (or one never paused) is a quiet
-- no-op.
CREATE OR REPLACE FUNCTION docket.queue_resume(p_project text, p_queue text, p_reason text, p_actor text, p_now timestamptz)
RETURNS docket.queues
LANGUAGE sql AS $$
    SELECT * FROM docket.queue_set('resume', false, p_project, p_queue, p_reason, p_actor, p_now);
$$;

-- queue_list is the queues of p_project p_actor may read (queue_visible;
-- none otherwise), by name: each queue ever paused, as docket.queues holds
-- it, and each other queue with a job queued or claimed now, running
-- (revision 0): a queue whose workers hold all its jobs is still listed.
-- The queues with queued jobs are found by skipping through the claim
-- index, one probe per queue, not by reading every queued job; those with
-- claimed jobs from the claimed jobs (the lease index), which are what
-- workers hold now.
CREATE OR REPLACE FUNCTION docket.queue_list(p_project text, p_actor text)
RETURNS SETOF docket.queues
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_actor(p_actor);
    PERFORM docket.require_project_name(p_project);
    IF NOT docket.queue_visible(p_actor, p_project) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH RECURSIVE live (queue) AS (
        (SELECT j.queue::text FROM docket.jobs j WHERE j.project = p_project AND j.state = 'queued' ORDER BY j.queue LIMIT 1)
        UNION ALL
        SELECT (SELECT j.queue::text FROM docket.jobs j
                WHERE j.project = p_project AND j.state = 'queued' AND j.queue > l.queue ORDER BY j.queue LIMIT 1)
        FROM live l WHERE l.queue IS NOT NULL
    )
    SELECT q.* FROM docket.queues q WHERE q.project = p_project
    UNION ALL
    SELECT p_project, l.queue::docket.job_queue, false, 0::bigint, NULL::docket.principal, NULL::timestamptz, NULL::text,
           NULL::docket.principal, NULL::timestamptz
    FROM (SELECT l.queue FROM live l WHERE l.queue IS NOT NULL
          UNION
          SELECT j.queue::text FROM docket.jobs j WHERE j.project = p_project AND j.state = 'claimed') l
    WHERE NOT EXISTS (SELECT 1 FROM docket.queues q WHERE q.project = p_project AND q.queue = l.queue)
    ORDER BY 2;
END
$$;

-- A view of the paused queues, for an operator in psql.
CREATE OR REPLACE VIEW docket.queues_paused WITH (security_invoker = true) AS
SELECT q.project, q.queue, q.paused_by, q.paused_at, q.reason, q.revision
FROM docket.queues q WHERE q.paused;

COMMENT ON VIEW docket.queues_paused IS
    'The paused queues: no claim takes their jobs, which stay queued, until docket.queue_resume.';

INSERT INTO docket.api_functions (name, role) VALUES
    ('queue_pause', 'app'), ('queue_resume', 'app'), ('queue_list', 'app');

-- Who may read what (row-level security; see kit.sql) --------------------------

-- A project's queues and their history are visible where the login's
-- principals hold queue.view, queue.pause or a job capability (as
-- queue_visible).
CREATE POLICY queues_visible_to_queue_and_job_readers ON docket.queues FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('queue.view', 'queue.pause', 'job.view', 'job.create', 'job.claim',
                                                           'job.cancel', 'job.reconcile', 'job.pin', 'job.retry'))::text[]));

CREATE POLICY queue_events_visible_to_queue_and_job_readers ON docket.queue_events FOR SELECT
    USING (project = ANY ((SELECT docket.visible_projects('queue.view', 'queue.pause', 'job.view', 'job.create', 'job.claim',
                                                           'job.cancel', 'job.reconcile', 'job.pin', 'job.retry'))::text[]));
