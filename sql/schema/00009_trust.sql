-- The trust boundary. Database roles decide who may reach docket at all, and
-- the principals a login role may act as are recorded, not taken on the
-- caller's word:
--
--   * three NOLOGIN group roles, granted to login roles by the DBA:
--       docket_app       calls the API functions; reads the tables;
--       docket_operator  what docket_app may, and the operator functions:
--                        projects, actor bindings;
--       docket_reader    the views, nothing else;
--     none holds INSERT, UPDATE, DELETE, TRUNCATE, TRIGGER or REFERENCES on
--     a docket table: every change goes through an API function, which runs
--     SECURITY DEFINER as the schema owner with search_path pinned;
--   * docket.actor_bindings records which login role may act as which
--     principal ("svc:billing", or every principal of a kind, "worker:*");
--     set_context, which every API function calls first, refuses (DK009) an
--     actor the session's login role (session_user) is not bound to. The
--     schema owner may act as anyone: it owns every table anyway;
--   * grants are given and revoked only by the owner, a docket_operator
--     member, or a principal holding grant.manage on the project, and never
--     by a principal to itself; the login role is recorded with each;
--   * TRUNCATE is refused on every docket table, for the owner too, by a
--     statement trigger: history is never wiped.
--
-- docket.apply_privileges() (re)applies all of it to the objects that exist:
-- each later migration that adds a table or an API function lists the
-- function in docket.api_functions and calls it at its end. Where the
-- migrating role may not create roles, the roles are left for a DBA (see
-- docs/security.md) and apply_privileges grants what it can.

-- +goose Up

-- Roles ---------------------------------------------------------------------

-- +goose StatementBegin
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['docket_app', 'docket_operator', 'docket_reader'] LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r);
        IF (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- another database's migration created it first
            END;
        ELSE
            RAISE NOTICE 'docket: role % does not exist and % may not create it: run CREATE ROLE % NOLOGIN as a DBA, then SELECT docket.apply_privileges()',
                r, current_user, r;
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- session_is_owner reports whether the session's login role is (or is a
-- member of) the owner of schema docket, or a superuser.
CREATE FUNCTION docket.session_is_owner() RETURNS boolean
LANGUAGE sql STABLE
RETURN (SELECT pg_has_role(session_user, n.nspowner, 'MEMBER') FROM pg_namespace n WHERE n.nspname = 'docket');

-- session_is_operator reports whether the session's login role is the owner
-- or a member of docket_operator.
CREATE FUNCTION docket.session_is_operator() RETURNS boolean
LANGUAGE sql STABLE
RETURN docket.session_is_owner()
    OR (EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'docket_operator')
        AND pg_has_role(session_user, 'docket_operator', 'MEMBER'));

-- Actor bindings ------------------------------------------------------------

-- A binding pattern: a principal, or "kind:*" for every principal of a kind.
CREATE FUNCTION docket.valid_binding_principal(p_principal text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN docket.valid_principal(p_principal) OR p_principal ~ '^[a-z][a-z0-9_-]{0,31}:\*$';

-- Which login role may act as which principal. The owner needs no binding.
CREATE TABLE docket.actor_bindings (
    role      text NOT NULL
              CONSTRAINT actor_bindings_role_valid CHECK (length(role) BETWEEN 1 AND 63),
    principal text NOT NULL
              CONSTRAINT actor_bindings_principal_valid CHECK (docket.valid_binding_principal(principal)),
    bound_by  text NOT NULL
              CONSTRAINT actor_bindings_bound_by_valid CHECK (docket.valid_principal(bound_by)),
    bound_at  timestamptz NOT NULL,
    PRIMARY KEY (role, principal)
);

COMMENT ON TABLE docket.actor_bindings IS
    'Which login role (session_user) may act as which principal; "kind:*" binds every principal of a kind. Changed only by docket.actor_bind and docket.actor_unbind.';

CREATE TABLE docket.actor_binding_events (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    role         text NOT NULL,
    principal    text NOT NULL,
    action       text NOT NULL CONSTRAINT actor_binding_events_action_known CHECK (action IN ('bound', 'unbound')),
    actor        text NOT NULL,
    session_role text NOT NULL DEFAULT session_user,
    at           timestamptz NOT NULL
);

CREATE TRIGGER actor_binding_events_append_only
    BEFORE UPDATE OR DELETE ON docket.actor_binding_events
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change();

CREATE TRIGGER actor_bindings_refuse_update
    BEFORE UPDATE ON docket.actor_bindings
    FOR EACH ROW EXECUTE FUNCTION docket.refuse_change('bindings are never edited: unbind and bind instead');

-- actor_bindings_record appends the event of every binding made or removed,
-- by a docket function or by the owner's hand, attributed to the change
-- context and the session's login role.
-- +goose StatementBegin
CREATE FUNCTION docket.actor_bindings_record() RETURNS trigger
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
-- +goose StatementEnd

CREATE TRIGGER actor_bindings_record
    AFTER INSERT OR DELETE ON docket.actor_bindings
    FOR EACH ROW EXECUTE FUNCTION docket.actor_bindings_record();

-- may_act_as reports whether the session's login role may act as
-- p_principal: it is the owner, or a binding names the principal or its kind.
CREATE FUNCTION docket.may_act_as(p_principal text) RETURNS boolean
LANGUAGE sql STABLE
RETURN docket.session_is_owner()
    OR EXISTS (
        SELECT 1 FROM docket.actor_bindings b
        WHERE b.role = session_user
          AND b.principal IN (p_principal, split_part(p_principal, ':', 1) || ':*')
    );

-- set_context records who is changing docket state and at which instant, for
-- the rest of the current transaction. Every docket function calls it; the
-- owner changing tables by hand calls it first:
--     SELECT docket.set_context('user:ana', '2026-11-29 10:00:00+00');
-- Refuses: a malformed actor, or a null, infinite or pre-1970 instant (DK010);
-- an actor the session's login role is not bound to (DK009).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.set_context(p_actor text, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.require_principal('actor', p_actor);
    IF p_now IS NULL OR NOT isfinite(p_now) OR p_now < '1970-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'invalid instant %: the caller''s now must be a finite timestamp after 1970 (a zero time is a bug)', coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    IF NOT docket.may_act_as(p_actor) THEN
        RAISE EXCEPTION 'login role % may not act as %: bind it first (docket actor bind)', session_user, p_actor
            USING ERRCODE = 'DK009';
    END IF;
    PERFORM set_config('docket.actor', p_actor, true);
    PERFORM set_config('docket.now', p_now::text, true);
END
$$;
-- +goose StatementEnd

-- require_operator refuses (DK009) op unless the session's login role is the
-- owner or a member of docket_operator.
-- +goose StatementBegin
CREATE FUNCTION docket.require_operator(p_op text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT docket.session_is_operator() THEN
        RAISE EXCEPTION '%: login role % is not a docket operator (a member of docket_operator)', p_op, session_user
            USING ERRCODE = 'DK009';
    END IF;
END
$$;
-- +goose StatementEnd

-- actor_bind lets login role p_role act as p_principal (or, for "kind:*",
-- every principal of that kind), on behalf of p_actor at p_now. Returns true
-- when the binding is new, false when it existed. Refuses: a session that is
-- not an operator, or an actor it may not act as (DK009); a malformed or
-- unknown role or a malformed principal (DK010).
-- +goose StatementBegin
CREATE FUNCTION docket.actor_bind(p_role text, p_principal text, p_actor text, p_now timestamptz)
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
-- +goose StatementEnd

-- actor_unbind removes the binding of p_role to p_principal. Returns true
-- when there was one. Refuses as actor_bind.
-- +goose StatementBegin
CREATE FUNCTION docket.actor_unbind(p_role text, p_principal text, p_actor text, p_now timestamptz)
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
-- +goose StatementEnd

-- binding_validate refuses (DK010) a binding of an unknown or malformed role,
-- or of a malformed principal pattern.
-- +goose StatementBegin
CREATE FUNCTION docket.binding_validate(p_role text, p_principal text) RETURNS void
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
-- +goose StatementEnd

-- Grants: who may give them --------------------------------------------------

INSERT INTO docket.capabilities (name, description) VALUES
    ('grant.manage', 'give and revoke grants on the project, except to oneself');

ALTER TABLE docket.grant_events ADD COLUMN session_role text NOT NULL DEFAULT session_user;

-- require_grant_manager refuses (DK009) a grant or revoke on p_project by
-- p_actor unless the session is an operator's, or p_actor holds grant.manage
-- on the project and is not granting to (or revoking from) itself.
-- +goose StatementBegin
CREATE FUNCTION docket.require_grant_manager(p_op text, p_principal text, p_project text, p_actor text)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF docket.session_is_operator() THEN
        RETURN;
    END IF;
    IF p_principal = p_actor THEN
        RAISE EXCEPTION '%: % may not change its own grants', p_op, p_actor
            USING ERRCODE = 'DK009';
    END IF;
    IF NOT docket.grant_check(p_actor, p_project, 'grant.manage') THEN
        RAISE EXCEPTION '%: % does not hold grant.manage on project %', p_op, p_actor, coalesce(quote_literal(p_project), 'NULL')
            USING ERRCODE = 'DK009';
    END IF;
END
$$;
-- +goose StatementEnd

-- grant_add grants p_capability on p_project to p_principal, on behalf of
-- p_actor at p_now. Returns true when the grant is new, false when it was
-- already held (then nothing is written). Refuses as set_context and
-- require_grant_manager (DK009), then as grant_validate.
-- +goose StatementBegin
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
-- +goose StatementEnd

-- grant_revoke removes the grant of p_capability on p_project from
-- p_principal, on behalf of p_actor at p_now. Returns true when a grant was
-- removed, false when there was none. Refuses as grant_add.
-- +goose StatementBegin
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
-- +goose StatementEnd

-- TRUNCATE ------------------------------------------------------------------

-- refuse_truncate is the statement trigger that keeps every docket table from
-- being emptied at once (DK015), by the owner too.
-- +goose StatementBegin
CREATE FUNCTION docket.refuse_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%.%: TRUNCATE refused: docket''s records are never wiped', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'DK015';
END
$$;
-- +goose StatementEnd

-- The API --------------------------------------------------------------------

-- The functions the group roles may call, by name (every overload), and the
-- least role that may: 'reader' (every group role: the read-only predicates
-- the views call), 'app' (docket_app and docket_operator) or 'operator'
-- (docket_operator). They run SECURITY DEFINER; nothing else is granted.
CREATE TABLE docket.api_functions (
    name text PRIMARY KEY,
    role text NOT NULL CONSTRAINT api_functions_role_known CHECK (role IN ('reader', 'app', 'operator'))
);

COMMENT ON TABLE docket.api_functions IS
    'The functions of docket''s API and the least group role that may call them; docket.apply_privileges() makes them SECURITY DEFINER and grants them.';

INSERT INTO docket.api_functions (name, role) VALUES
    ('project_create', 'operator'), ('project_set_status', 'operator'),
    ('actor_bind', 'operator'), ('actor_unbind', 'operator'),
    ('grant_add', 'app'), ('grant_revoke', 'app'),
    ('job_enqueue_one', 'app'), ('job_enqueue_many', 'app'), ('job_claim', 'app'), ('job_claim_id', 'app'),
    ('job_claim_ids', 'app'), ('job_renew', 'app'), ('job_release', 'app'), ('job_complete', 'app'),
    ('job_complete_many', 'app'), ('job_fail', 'app'), ('job_cancel', 'app'), ('job_reconcile', 'app'),
    ('job_expire_leases', 'app'), ('job_decoders_register', 'app'), ('job_verify', 'app'),
    ('job_undispatched', 'app'), ('job_dispatch_abandon', 'app'), ('job_dispatch_live', 'reader'),
    ('quorum_create', 'app'), ('lane_create', 'app'), ('lane_set_state', 'app'), ('lane_review', 'app'),
    ('lane_merge', 'app'),
    ('case_admit', 'app'), ('case_correlate', 'app'), ('case_put_state', 'app'), ('case_close', 'app'),
    ('case_reopen', 'app'), ('obligation_register', 'app'), ('obligation_settle', 'app'),
    ('obligation_breach_due', 'app'),
    ('message_deliver', 'app'), ('message_store', 'app'), ('message_offer', 'app'),
    ('message_dead_letter_due', 'app'), ('wait_register', 'app'), ('wait_withdraw', 'app'),
    ('wait_expire_due', 'app'), ('timer_set', 'app'),
    ('schedule_create', 'app'), ('schedule_update', 'app'), ('schedule_set_status', 'app'),
    ('schedule_lock', 'app'), ('schedule_due', 'app'), ('schedule_advance', 'app');

-- apply_privileges makes the database match the trust model, for the objects
-- that exist now; it is idempotent, and every migration that adds a table or
-- an API function calls it. It:
--   * puts the TRUNCATE-refusing trigger on every docket table (not River's);
--   * makes each function of docket.api_functions SECURITY DEFINER with a
--     pinned search_path, callable by its role and by nobody else;
--   * gives the group roles that exist USAGE on the schema, docket_app and
--     docket_operator SELECT on every table and view and what River's client
--     needs on River's tables, docket_reader SELECT on the views; and takes
--     every other table privilege from them.
-- +goose StatementBegin
CREATE FUNCTION docket.apply_privileges() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t record;
    f record;
    app boolean := EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'docket_app');
    operator boolean := EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'docket_operator');
    reader boolean := EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'docket_reader');
    roles text := concat_ws(', ', CASE WHEN app THEN 'docket_app' END, CASE WHEN operator THEN 'docket_operator' END,
                            CASE WHEN reader THEN 'docket_reader' END);
    writers text := concat_ws(', ', CASE WHEN app THEN 'docket_app' END, CASE WHEN operator THEN 'docket_operator' END);
BEGIN
    FOR t IN
        SELECT c.oid::regclass AS rel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'docket' AND c.relkind IN ('r', 'p') AND c.relname NOT LIKE 'river\_%'
          AND NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname = 'refuse_truncate')
    LOOP
        EXECUTE format('CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION docket.refuse_truncate()', t.rel);
    END LOOP;

    FOR f IN
        SELECT p.oid::regprocedure AS fn, a.role FROM pg_proc p
        JOIN pg_namespace n ON n.oid = p.pronamespace
        JOIN docket.api_functions a ON a.name = p.proname
        WHERE n.nspname = 'docket'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, docket, pg_temp', f.fn);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.fn);
        IF f.role IN ('reader', 'app') AND app THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO docket_app', f.fn);
        END IF;
        IF f.role = 'reader' AND reader THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO docket_reader', f.fn);
        END IF;
        IF operator THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO docket_operator', f.fn);
        END IF;
    END LOOP;

    IF roles <> '' THEN
        EXECUTE format('GRANT USAGE ON SCHEMA docket TO %s', roles);
        EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA docket FROM %s', roles);
    END IF;
    IF writers <> '' THEN
        EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA docket TO %s', writers);
        FOR t IN
            SELECT c.oid::regclass AS rel, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'docket' AND c.relname LIKE 'river\_%' AND c.relkind IN ('r', 'p', 'S')
        LOOP
            IF t.relkind = 'S' THEN
                EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE %s TO %s', t.rel, writers);
            ELSE
                EXECUTE format('GRANT INSERT, UPDATE, DELETE ON %s TO %s', t.rel, writers);
            END IF;
        END LOOP;
    END IF;
    IF reader THEN
        FOR t IN
            SELECT c.oid::regclass AS rel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'docket' AND c.relkind = 'v'
        LOOP
            EXECUTE format('GRANT SELECT ON %s TO docket_reader', t.rel);
        END LOOP;
    END IF;
END
$$;
-- +goose StatementEnd

SELECT docket.apply_privileges();

-- +goose Down
-- The group roles stay: other databases of the cluster may use them.
-- +goose StatementBegin
DO $$
DECLARE
    t record;
    f record;
BEGIN
    FOR t IN
        SELECT g.tgrelid::regclass AS rel FROM pg_trigger g
        JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'docket' AND g.tgname = 'refuse_truncate'
    LOOP
        EXECUTE format('DROP TRIGGER refuse_truncate ON %s', t.rel);
    END LOOP;
    FOR f IN
        SELECT p.oid::regprocedure AS fn FROM pg_proc p
        JOIN pg_namespace n ON n.oid = p.pronamespace
        JOIN docket.api_functions a ON a.name = p.proname
        WHERE n.nspname = 'docket'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY INVOKER RESET search_path', f.fn);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', f.fn);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP FUNCTION docket.apply_privileges();
DROP TABLE docket.api_functions;
DROP FUNCTION docket.refuse_truncate();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.grant_revoke(p_principal text, p_project text, p_capability text, p_actor text, p_now timestamptz)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.grant_validate(p_principal, p_project, p_capability);
    DELETE FROM docket.grants
    WHERE project = p_project AND capability = p_capability AND principal = p_principal;
    RETURN FOUND;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.grant_add(p_principal text, p_project text, p_capability text, p_actor text, p_now timestamptz)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.set_context(p_actor, p_now);
    PERFORM docket.grant_validate(p_principal, p_project, p_capability);
    INSERT INTO docket.grants (principal, project, capability, granted_by, granted_at)
    VALUES (p_principal, p_project, p_capability, p_actor, p_now)
    ON CONFLICT DO NOTHING;
    RETURN FOUND;
END
$$;
-- +goose StatementEnd
DROP FUNCTION docket.require_grant_manager(text, text, text, text);
ALTER TABLE docket.grant_events DROP COLUMN session_role;
DELETE FROM docket.capabilities c WHERE c.name = 'grant.manage'
    AND NOT EXISTS (SELECT 1 FROM docket.grants g WHERE g.capability = c.name);
DROP FUNCTION docket.binding_validate(text, text);
DROP FUNCTION docket.actor_unbind(text, text, text, timestamptz);
DROP FUNCTION docket.actor_bind(text, text, text, timestamptz);
DROP FUNCTION docket.require_operator(text);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION docket.set_context(p_actor text, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM docket.require_principal('actor', p_actor);
    IF p_now IS NULL OR NOT isfinite(p_now) OR p_now < '1970-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'invalid instant %: the caller''s now must be a finite timestamp after 1970 (a zero time is a bug)', coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'DK010';
    END IF;
    PERFORM set_config('docket.actor', p_actor, true);
    PERFORM set_config('docket.now', p_now::text, true);
END
$$;
-- +goose StatementEnd
DROP FUNCTION docket.may_act_as(text);
DROP TABLE docket.actor_binding_events;
DROP TABLE docket.actor_bindings;
DROP FUNCTION docket.actor_bindings_record();
DROP FUNCTION docket.valid_binding_principal(text);
DROP FUNCTION docket.session_is_operator();
DROP FUNCTION docket.session_is_owner();
