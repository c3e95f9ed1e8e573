-- Access: who may act as whom, and who may do what where.
--
--   * docket.actor_bindings records which login role may act as which
--     principal ("svc:billing", or every principal of a kind, "worker:*");
--     set_context refuses (DK009) an actor the session's login role
--     (session_user) is not bound to. The schema owner may act as anyone: it
--     owns every table anyway. Bindings are made by operators only, and every
--     binding made or removed is in docket.actor_binding_events;
--   * docket.capabilities lists what may be granted (each aggregate adds the
--     capabilities it checks), docket.grants who holds which on which
--     project: an explicit triple, never a wildcard;
--   * grants are given and revoked only by the owner, a docket_operator
--     member, or a principal holding grant.manage on the project, and never
--     by a principal to itself; each is in docket.grant_events with the login
--     role that made it.

-- Actor bindings ------------------------------------------------------------

CREATE OR REPLACE TRIGGER actor_binding_events_append_only
    BEFORE UPDATE OR DELETE ON docket.actor_binding_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

CREATE OR REPLACE TRIGGER actor_bindings_refuse_update
    BEFORE UPDATE ON docket.actor_bindings
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('bindings are never edited: unbind and bind instead');

-- actor_bindings_record appends the event of every binding made or removed,
-- by a docket function or by the owner's hand, attributed to the change
-- context and the session's login role.
CREATE OR REPLACE FUNCTION docket.actor_bindings_record() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    b docket.actor_bindings := CASE WHEN TG_OP = 'INSERT' THEN NEW ELSE OLD END;
BEGIN
    INSERT INTO docket.actor_binding_events (role, principal, action, actor, at)
    VALUES (b.role, b.principal, CASE WHEN TG_OP = 'INSERT' THEN 'bound' ELSE 'unbound' END,
            docket.context_actor(), docket.context_now());
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER actor_bindings_record
    AFTER INSERT OR DELETE ON docket.actor_bindings
    FOR EACH ROW EXECUTE FUNCTION docket.actor_bindings_record();

-- may_act_as reports whether the session's login role may act as
-- p_principal: a binding names the principal or its kind, or it is the
-- owner (asked second: a binding is one index probe, the owner's role
-- membership a catalog walk).
-- plpgsql, as session_is_owner is, so its plan is kept for the session.
CREATE OR REPLACE FUNCTION docket.may_act_as(p_principal text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
            SELECT 1 FROM docket.actor_bindings b
            WHERE b.role = session_user
              AND b.principal IN (p_principal, split_part(p_principal, ':', 1) || ':*')
        )
        OR docket.session_is_owner();
END
$$;

-- require_actor is set_context's check for the functions that only read
-- and take no instant: it refuses a malformed actor (DK010) and an actor
-- the session's login role may not act as (DK009), and sets nothing. Every
-- read of the API calls it first, so a read never answers for a principal
-- its caller is not.
CREATE OR REPLACE FUNCTION docket.require_actor(p_actor text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- The refusal called only to refuse, as in set_context.
    IF p_actor IS NULL OR NOT docket.valid_principal(p_actor) THEN
        PERFORM docket.require_principal('actor', p_actor);
    END IF;
    IF NOT docket.may_act_as(p_actor) THEN
        RAISE EXCEPTION 'login role % may not act as %: bind it first (docket actor bind)', session_user, p_actor
            USING ERRCODE = 'DK009';
    END IF;
END
$$;

-- Persons -------------------------------------------------------------------
--
-- The rules about "the same person" (four eyes, no granting to oneself, a
-- proposer never approving) compare persons, not principal strings. A login
-- role bound to principals BY NAME ("user:ana", "user:bob") is one person
-- however many names it has: all those principals are one person. A login
-- bound to a whole kind ("user:*") is a gateway that authenticates people
-- itself (docket serve behind its proxy): a kind binding joins nobody, and
-- through it each principal is its own person.

-- person_names returns every principal that is the same person as
-- p_principal: itself, and every principal bound by name to a login role
-- that is bound by name to it. Sorted, without duplicates.
CREATE OR REPLACE FUNCTION docket.person_names(p_principal text) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN ARRAY(
        SELECT p_principal WHERE p_principal IS NOT NULL
        UNION
        SELECT o.principal FROM docket.actor_bindings b
        JOIN docket.actor_bindings o ON o.role = b.role AND o.principal NOT LIKE '%:*'
        WHERE b.principal = p_principal
        ORDER BY 1);
END
$$;

-- same_person reports whether principals p_a and p_b are one person (see
-- person_names).
CREATE OR REPLACE FUNCTION docket.same_person(p_a text, p_b text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN p_a = p_b OR p_b = ANY (docket.person_names(p_a));
END
$$;

-- person_in reports whether principal p_principal is, as a person, one of
-- p_principals (an exclusion list: four eyes).
CREATE OR REPLACE FUNCTION docket.person_in(p_principal text, p_principals text[]) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN p_principal = ANY (p_principals) OR docket.person_names(p_principal) && p_principals;
END
$$;

-- actor_bind lets login role p_role act as p_principal (or, for "kind:*",
-- every principal of that kind), on behalf of p_actor at p_now. Returns true
-- when the binding is new, false when it existed. Refuses: a session that is
-- not an operator, or an actor it may not act as (DK009); a malformed or
-- unknown role or a malformed principal (DK010).
CREATE OR REPLACE FUNCTION docket.actor_bind(p_role text, p_principal text, p_actor text, p_now timestamptz)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_operator('actor.bind');
    PERFORM docket.binding_validate(p_role, p_principal);
    INSERT INTO docket.actor_bindings (role, principal, bound_by, bound_at)
    VALUES (p_role, p_principal, p_actor, p_now)
    ON CONFLICT DO NOTHING;
    RETURN FOUND;
END
$$;

-- actor_unbind removes the binding of p_role to p_principal. Returns true
-- when there was one. Refuses as actor_bind.
CREATE OR REPLACE FUNCTION docket.actor_unbind(p_role text, p_principal text, p_actor text, p_now timestamptz)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_operator('actor.unbind');
    PERFORM docket.binding_validate(p_role, p_principal);
    DELETE FROM docket.actor_bindings WHERE role = p_role AND principal = p_principal;
    RETURN FOUND;
END
$$;

-- binding_validate refuses (DK010) a binding of an unknown or malformed role,
-- or of a malformed principal pattern.
CREATE OR REPLACE FUNCTION docket.binding_validate(p_role text, p_principal text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role) THEN
        RAISE EXCEPTION 'unknown role %: bind a login role that exists', coalesce(quote_literal(p_role), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    IF p_principal IS NULL OR NOT docket.valid_binding_principal(p_principal) THEN
        RAISE EXCEPTION 'invalid principal %: want kind:name, or kind:* for every principal of a kind',
            coalesce(quote_literal(p_principal), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
END
$$;

-- Capabilities and grants ---------------------------------------------------

CREATE OR REPLACE TRIGGER grant_events_append_only
    BEFORE UPDATE OR DELETE ON docket.grant_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

-- grants_record appends a grant_events row for every grant inserted or deleted,
-- by a docket function or by hand, attributed to the change context. It runs
-- AFTER the change, so an INSERT that ON CONFLICT skips records nothing.
CREATE OR REPLACE FUNCTION docket.grants_record() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    g docket.grants := CASE WHEN TG_OP = 'INSERT' THEN NEW ELSE OLD END;
BEGIN
    INSERT INTO docket.grant_events (principal, project, capability, action, actor, at)
    VALUES (g.principal, g.project, g.capability,
            CASE WHEN TG_OP = 'INSERT' THEN 'granted' ELSE 'revoked' END,
            docket.context_actor(), docket.context_now());
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER grants_record
    AFTER INSERT OR DELETE ON docket.grants
    FOR EACH ROW EXECUTE FUNCTION docket.grants_record();

CREATE OR REPLACE TRIGGER grants_refuse_update
    BEFORE UPDATE ON docket.grants
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('grants are never edited: revoke and grant instead');

-- grant_validate checks the triple of a grant or revoke. Refuses: a malformed
-- principal or project name, an unknown capability (DK010); an unknown project
-- (P0002).
CREATE OR REPLACE FUNCTION docket.grant_validate(p_principal text, p_project text, p_capability text)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM docket.require_principal('principal', p_principal);
    PERFORM docket.require_project_name(p_project);
    IF p_capability IS NULL OR NOT docket.valid_capability(p_capability) THEN
        RAISE EXCEPTION 'invalid capability %: want dot-separated lowercase segments, e.g. job.create',
            coalesce(quote_literal(p_capability), 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM docket.capabilities WHERE name = p_capability) THEN
        RAISE EXCEPTION 'unknown capability %: see docket.capabilities', quote_literal(p_capability)
            USING ERRCODE = 'DK010';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM docket.projects WHERE name = p_project) THEN
        RAISE EXCEPTION 'project % does not exist', quote_literal(p_project)
            USING ERRCODE = 'P0002';
    END IF;
END
$$;

-- require_grant_manager refuses (DK009) a grant or revoke on p_project by
-- p_actor unless the session is an operator's, or p_actor holds grant.manage
-- on the project and is not granting to (or revoking from) itself: any
-- principal that is the same person as p_actor (see person_names).
CREATE OR REPLACE FUNCTION docket.require_grant_manager(p_op text, p_principal text, p_project text, p_actor text)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF docket.session_is_operator() THEN
        RETURN;
    END IF;
    IF docket.same_person(p_actor, p_principal) THEN
        RAISE EXCEPTION '%: % may not change its own grants (% is the same person)', p_op, p_actor, p_principal
            USING ERRCODE = 'DK009';
    END IF;
    IF NOT docket.grant_check(p_actor, p_project, 'grant.manage') THEN
        RAISE EXCEPTION '%: % does not hold grant.manage on project %', p_op, p_actor, coalesce(quote_literal(p_project), 'NULL')
            USING ERRCODE = 'DK009';
    END IF;
END
$$;

-- grant_add grants p_capability on p_project to p_principal, on behalf of
-- p_actor at p_now. Returns true when the grant is new, false when it was
-- already held (then nothing is written). Refuses as set_context and
-- require_grant_manager (DK009), then as grant_validate.
CREATE OR REPLACE FUNCTION docket.grant_add(p_principal text, p_project text, p_capability text, p_actor text, p_now timestamptz)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_grant_manager('grant.allow', p_principal, p_project, p_actor);
    PERFORM docket.grant_validate(p_principal, p_project, p_capability);
    INSERT INTO docket.grants (principal, project, capability, granted_by, granted_at)
    VALUES (p_principal, p_project, p_capability, p_actor, p_now)
    ON CONFLICT DO NOTHING;
    RETURN FOUND;
END
$$;

-- grant_revoke removes the grant of p_capability on p_project from
-- p_principal, on behalf of p_actor at p_now. Returns true when a grant was
-- removed, false when there was none. Refuses as grant_add.
CREATE OR REPLACE FUNCTION docket.grant_revoke(p_principal text, p_project text, p_capability text, p_actor text, p_now timestamptz)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.require_grant_manager('grant.revoke', p_principal, p_project, p_actor);
    PERFORM docket.grant_validate(p_principal, p_project, p_capability);
    DELETE FROM docket.grants
    WHERE project = p_project AND capability = p_capability AND principal = p_principal;
    RETURN FOUND;
END
$$;

-- grant_check reports whether p_principal holds p_capability on p_project by an
-- explicit grant. It never raises: malformed or unknown input holds nothing, so
-- a caller learns no more from a refusal than from an absent grant.
-- plpgsql, as session_is_owner is, so its plan is kept for the session.
CREATE OR REPLACE FUNCTION docket.grant_check(p_principal text, p_project text, p_capability text)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM docket.grants g
        WHERE g.project = p_project AND g.capability = p_capability AND g.principal = p_principal
    );
END
$$;

-- The API ---------------------------------------------------------------------

INSERT INTO docket.api_functions (name, role) VALUES
    ('actor_bind', 'operator'), ('actor_unbind', 'operator'),
    ('grant_add', 'app'), ('grant_revoke', 'app');

-- Who may read what (row-level security; see kit.sql) --------------------------

-- A login reads its own bindings and their history; an operator, who binds,
-- reads every one.
CREATE POLICY actor_bindings_visible_to_their_login_and_operators ON docket.actor_bindings FOR SELECT
    USING (role = session_user OR (SELECT docket.session_is_operator()));

CREATE POLICY actor_binding_events_visible_to_their_login_and_operators ON docket.actor_binding_events FOR SELECT
    USING (role = session_user OR (SELECT docket.session_is_operator()));

-- A grant, and its history, is visible to the principals it names (the
-- reads check an actor's grants as the login), to the holders of
-- grant.manage on its project, and to operators.
CREATE POLICY grants_visible_to_grantees_managers_and_operators ON docket.grants FOR SELECT
    USING (docket.principal_bound(principal, (SELECT docket.login_principals()))
           OR project = ANY ((SELECT docket.visible_projects('grant.manage'))::text[])
           OR (SELECT docket.session_is_operator()));

CREATE POLICY grant_events_visible_to_grantees_managers_and_operators ON docket.grant_events FOR SELECT
    USING (docket.principal_bound(principal, (SELECT docket.login_principals()))
           OR project = ANY ((SELECT docket.visible_projects('grant.manage'))::text[])
           OR (SELECT docket.session_is_operator()));
