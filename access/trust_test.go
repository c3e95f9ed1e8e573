package access_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// insufficientPrivilege is the SQLSTATE Postgres refuses an unprivileged
// statement with.
const insufficientPrivilege = "42501"

// docketTables returns every docket table but River's, by name.
func docketTables(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `
		SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'docket' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname NOT LIKE 'river\_%'
		ORDER BY 1`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Greater(t, len(tables), 25, "the migration's tables are there")
	return tables
}

// everything renders every docket table, River's aside, to show a refused
// statement changed nothing.
func everything(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	return testkit.Snapshot(t, pool, docketTables(t, pool)...)
}

// sqlstate returns the SQLSTATE of err, or "" for none.
func sqlstate(err error) string {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code
	}
	return ""
}

// attempt runs sql on pool in a transaction it rolls back, and returns the
// SQLSTATE it failed with ("" when it did not).
func attempt(t *testing.T, pool *pgxpool.Pool, sql string) string {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }()
	_, err = tx.Exec(t.Context(), sql)
	return sqlstate(err)
}

// TestNoRoleWritesATable logs in as a member of each group role and shows
// INSERT, UPDATE, DELETE and TRUNCATE refused with 42501 on every docket
// table (but INSERT into docket.job_intake by docket_app and
// docket_operator), and the database unchanged.
func TestNoRoleWritesATable(t *testing.T) {
	t.Parallel()
	k := testkit.Setup(t, testkit.Ana, []string{testkit.Acme}, testkit.Grants(testkit.App, testkit.Acme, access.JobCreate)...)
	logins := map[string]testkit.Login{
		testkit.AppRole:      k.Login(t, testkit.AppRole, testkit.App),
		testkit.OperatorRole: k.Login(t, testkit.OperatorRole, testkit.Ops),
		testkit.ReaderRole:   k.Login(t, testkit.ReaderRole),
		testkit.WorkerRole:   k.Login(t, testkit.WorkerRole, testkit.App),
	}
	before := everything(t, k.Pool)
	for group, l := range logins {
		for _, table := range docketTables(t, k.Pool) {
			for _, sql := range []string{
				"INSERT INTO " + table + " DEFAULT VALUES",
				"UPDATE " + table + " SET " + firstColumn(t, k.Pool, table) + " = " + firstColumn(t, k.Pool, table),
				"DELETE FROM " + table,
				"TRUNCATE " + table,
			} {
				if table == "docket.job_intake" && strings.HasPrefix(sql, "INSERT") &&
					(group == testkit.AppRole || group == testkit.OperatorRole) {
					// The one table docket_app and docket_operator insert
					// into: the bulk enqueue's intake, whose statement
					// trigger checks each row as the API does (jobs' intake
					// tests). This row breaks its NOT NULLs.
					require.Equal(t, "23502", attempt(t, l.Pool, sql), "%s: %s", group, sql)
					continue
				}
				require.Equal(t, insufficientPrivilege, attempt(t, l.Pool, sql), "%s: %s", group, sql)
			}
		}
		// Nor may a role add a trigger that would fire after a guard and
		// edit what it checked.
		require.Equal(t, insufficientPrivilege, attempt(t, l.Pool, `
			CREATE FUNCTION pg_temp.edit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
			CREATE TRIGGER zz_edit BEFORE UPDATE ON docket.jobs FOR EACH ROW EXECUTE FUNCTION pg_temp.edit()`),
			"%s adds a trigger", group)
	}
	require.Equal(t, before, everything(t, k.Pool))
}

// firstColumn names table's first column that an UPDATE may set: not an
// identity or generated one.
func firstColumn(t *testing.T, pool *pgxpool.Pool, table string) string {
	t.Helper()
	var col string
	require.NoError(t, pool.QueryRow(t.Context(), `
		SELECT quote_ident(attname) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped AND attidentity = '' AND attgenerated = ''
		ORDER BY attnum LIMIT 1`, table).Scan(&col))
	return col
}

// apiFunction is one function of docket.api_functions, with its argument
// types, and the least group role that may call it.
type apiFunction struct {
	name, role string
	args       []string
}

// call is a call of f with every argument NULL, typed so the overload is
// the one meant.
func (f apiFunction) call() string {
	nulls := make([]string, len(f.args))
	for i, a := range f.args {
		nulls[i] = "NULL::" + a
	}
	return fmt.Sprintf("SELECT docket.%s(%s)", f.name, strings.Join(nulls, ", "))
}

// TestAPIFunctionsAreCalledByTheirRoles shows every API function callable by
// the roles meant to call it (it may refuse its NULL arguments, never the
// caller) and refused with 42501 for the others, and every view readable by
// docket_reader, under the tables' policies.
func TestAPIFunctionsAreCalledByTheirRoles(t *testing.T) {
	t.Parallel()
	k := testkit.Setup(t, testkit.Ana, []string{testkit.Acme})
	app := k.Login(t, testkit.AppRole, testkit.App)
	operator := k.Login(t, testkit.OperatorRole, testkit.Ops)
	reader := k.Login(t, testkit.ReaderRole)

	rows, err := k.Pool.Query(t.Context(), `
		SELECT a.name, a.role, coalesce((SELECT array_agg(format_type(x, NULL) ORDER BY o)
		                                 FROM unnest(p.proargtypes) WITH ORDINALITY AS u(x, o)), '{}')
		FROM docket.api_functions a
		LEFT JOIN pg_proc p ON p.proname = a.name AND p.pronamespace = 'docket'::regnamespace
		ORDER BY a.name`)
	require.NoError(t, err)
	var fns []apiFunction
	for rows.Next() {
		var f apiFunction
		require.NoError(t, rows.Scan(&f.name, &f.role, &f.args))
		fns = append(fns, f)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, fns)

	before := everything(t, k.Pool)
	for _, f := range fns {
		var definer bool
		require.NoError(t, k.Pool.QueryRow(t.Context(), `SELECT prosecdef FROM pg_proc WHERE proname = $1 AND pronamespace = 'docket'::regnamespace`, f.name).Scan(&definer),
			"api function %s exists", f.name)
		require.True(t, definer, "%s runs as the owner", f.name)

		require.NotEqual(t, insufficientPrivilege, attempt(t, operator.Pool, f.call()), "docket_operator calls %s", f.name)
		switch f.role {
		case "reader":
			require.NotEqual(t, insufficientPrivilege, attempt(t, reader.Pool, f.call()), "docket_reader calls %s", f.name)
			require.NotEqual(t, insufficientPrivilege, attempt(t, app.Pool, f.call()), "docket_app calls %s", f.name)
		case "app":
			require.Equal(t, insufficientPrivilege, attempt(t, reader.Pool, f.call()), "docket_reader calls %s", f.name)
			require.NotEqual(t, insufficientPrivilege, attempt(t, app.Pool, f.call()), "docket_app calls %s", f.name)
		default:
			require.Equal(t, insufficientPrivilege, attempt(t, reader.Pool, f.call()), "docket_reader calls %s", f.name)
			require.Equal(t, insufficientPrivilege, attempt(t, app.Pool, f.call()), "docket_app calls operator function %s", f.name)
		}
	}
	require.Equal(t, before, everything(t, k.Pool))

	rows, err = k.Pool.Query(t.Context(), `
		SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.relnamespace = 'docket'::regnamespace AND c.relkind = 'v' ORDER BY 1`)
	require.NoError(t, err)
	views, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, views)
	for _, v := range views {
		require.Empty(t, attempt(t, reader.Pool, "SELECT * FROM "+v+" LIMIT 1"), "docket_reader reads %s", v)
	}
	// It reads the tables too, under their policies: a reader bound to no
	// principal sees no row.
	var n int
	require.NoError(t, reader.Pool.QueryRow(t.Context(), "SELECT count(*) FROM docket.projects").Scan(&n))
	require.Zero(t, n, "docket_reader bound to nobody sees no project")
}

// TestChecksAtCommitRunAsTheOwner: a constraint trigger deferred to commit
// runs as the committing login, outside the API function that wrote its
// row, so its function must be SECURITY DEFINER, or a policy would hide the
// rows it checks from a login that may write them but not read them.
func TestChecksAtCommitRunAsTheOwner(t *testing.T) {
	t.Parallel()
	k := testkit.Setup(t, testkit.Ana, []string{testkit.Acme})
	rows, err := k.Pool.Query(t.Context(), `
		SELECT t.tgname || ' on ' || t.tgrelid::regclass::text, p.prosecdef FROM pg_trigger t
		JOIN pg_proc p ON p.oid = t.tgfoid
		WHERE t.tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'docket'::regnamespace)
		  AND t.tgdeferrable AND NOT t.tgisinternal
		ORDER BY 1`)
	require.NoError(t, err)
	type check struct {
		Name    string
		Definer bool
	}
	checks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[check])
	require.NoError(t, err)
	require.NotEmpty(t, checks)
	for _, c := range checks {
		require.True(t, c.Definer, "%s runs at commit as the owner", c.Name)
	}
}

// TestAnUnboundActorIsRefused shows a login role acting only as the
// principals it is bound to: another principal is refused with
// db.ErrNotPermitted and nothing is written, and a kind:* binding covers
// every principal of its kind.
func TestAnUnboundActorIsRefused(t *testing.T) {
	t.Parallel()
	const other access.Actor = "svc:other"
	k := testkit.Setup(t, testkit.Ana, []string{testkit.Acme},
		testkit.Join(testkit.Grants(testkit.App, testkit.Acme, access.JobCreate), testkit.Grants(other, testkit.Acme, access.JobCreate),
			testkit.Grants("worker:host-1", testkit.Acme, access.JobCreate))...)
	app := k.Login(t, testkit.AppRole, testkit.App, "worker:*")
	enqueue := func(actor access.Actor) error {
		jc, err := jobs.NewClient(app.Pool, jobs.Config{Project: testkit.Acme, Actor: actor, Clock: k.Clock})
		require.NoError(t, err)
		_, err = jc.Enqueue(t.Context(), jobs.Spec{Kind: "billing.invoice", Payload: []byte(`{}`)})
		return err
	}

	before := everything(t, k.Pool)
	err := enqueue(other)
	require.ErrorIs(t, err, db.ErrNotPermitted)
	require.ErrorContains(t, err, "may not act as svc:other")
	require.Equal(t, before, everything(t, k.Pool), "a refused actor writes nothing")

	require.NoError(t, enqueue(testkit.App), "a bound principal")
	require.NoError(t, enqueue("worker:host-1"), "a principal of a bound kind")
	require.ErrorIs(t, enqueue("user:host-1"), db.ErrNotPermitted, "a kind binding covers its kind alone")
}

// TestGrantsAreGivenByTheirManagers shows a principal without grant.manage
// refused a grant, a manager refused its own and those of every principal
// its login is bound to by name (one person), and a manager's grant of
// another recorded with the login role that gave it.
func TestGrantsAreGivenByTheirManagers(t *testing.T) {
	t.Parallel()
	const lead access.Actor = "svc:lead"
	k := testkit.Setup(t, testkit.Ana, []string{testkit.Acme}, testkit.Grants(lead, testkit.Acme, access.GrantManage)...)
	app := k.Login(t, testkit.AppRole, testkit.App)
	manager := k.Login(t, testkit.AppRole, lead)
	on := func(l testkit.Login, actor access.Actor) *access.Client {
		c, err := access.NewClient(l.Pool, access.Config{Actor: actor, Clock: k.Clock})
		require.NoError(t, err)
		return c
	}
	as := func(actor access.Actor) *access.Client {
		if actor == lead {
			return on(manager, actor)
		}
		return on(app, actor)
	}
	create := access.Grant{Principal: testkit.App, Project: testkit.Acme, Capability: access.JobCreate}

	before := everything(t, k.Pool)
	_, err := as(testkit.App).Allow(t.Context(), create)
	require.ErrorIs(t, err, db.ErrNotPermitted, "granting oneself")
	require.ErrorContains(t, err, "may not change its own grants")
	_, err = as(testkit.App).Allow(t.Context(), access.Grant{Principal: "svc:other", Project: testkit.Acme, Capability: access.JobCreate})
	require.ErrorIs(t, err, db.ErrNotPermitted, "granting another without grant.manage")
	require.ErrorContains(t, err, "does not hold grant.manage")
	_, err = as(lead).Allow(t.Context(), access.Grant{Principal: lead, Project: testkit.Acme, Capability: access.JobCreate})
	require.ErrorIs(t, err, db.ErrNotPermitted, "a manager granting itself")
	require.ErrorContains(t, err, "may not change its own grants")
	_, err = as(lead).Revoke(t.Context(), access.Grant{Principal: lead, Project: testkit.Acme, Capability: access.GrantManage})
	require.ErrorIs(t, err, db.ErrNotPermitted, "a manager revoking its own")
	require.Equal(t, before, everything(t, k.Pool), "refused grants write nothing")

	added, err := as(lead).Allow(t.Context(), create)
	require.NoError(t, err)
	require.True(t, added)
	var by, role string
	require.NoError(t, k.Pool.QueryRow(t.Context(), `
		SELECT actor, session_role FROM docket.grant_events WHERE principal = $1 AND capability = $2`,
		string(testkit.App), string(access.JobCreate)).Scan(&by, &role))
	require.Equal(t, string(lead), by)
	require.Equal(t, manager.Role, role, "the grant records the login role that gave it")

	// A login bound to both by name makes lead and app one person, through
	// whichever login either acts.
	both := k.Login(t, testkit.AppRole, testkit.App, lead)
	claim := access.Grant{Principal: testkit.App, Project: testkit.Acme, Capability: access.JobClaim}
	before = everything(t, k.Pool)
	_, err = on(both, lead).Allow(t.Context(), claim)
	require.ErrorIs(t, err, db.ErrNotPermitted, "a manager granting another name of its own login")
	require.ErrorContains(t, err, "svc:app is the same person")
	_, err = as(lead).Allow(t.Context(), claim)
	require.ErrorIs(t, err, db.ErrNotPermitted, "the same person through another login")
	require.Equal(t, before, everything(t, k.Pool), "refused grants write nothing")
}

// TestBindingIsAnOperatorsAct shows a docket_app member refused a binding,
// even for itself, and a docket_operator member's binding recorded with its
// login role.
func TestBindingIsAnOperatorsAct(t *testing.T) {
	t.Parallel()
	k := testkit.Setup(t, testkit.Ana, nil)
	app := k.Login(t, testkit.AppRole, testkit.App)
	operator := k.Login(t, testkit.OperatorRole, testkit.Ops)
	client := func(l testkit.Login, actor access.Actor) *access.Client {
		c, err := access.NewClient(l.Pool, access.Config{Actor: actor, Clock: k.Clock})
		require.NoError(t, err)
		return c
	}

	before := everything(t, k.Pool)
	_, err := client(app, testkit.App).Bind(t.Context(), app.Role, "svc:root")
	require.ErrorIs(t, err, db.ErrNotPermitted, "docket_app may not call actor_bind at all")
	require.Equal(t, before, everything(t, k.Pool))

	ops := client(operator, testkit.Ops)
	for _, tc := range []struct {
		name            string
		role, principal string
	}{
		{"an unknown role", "docket_t_nobody", "svc:x"},
		{"an empty role", "", "svc:x"},
		{"a malformed principal", app.Role, "svc"},
		{"a wildcard name", app.Role, "svc:b*"},
	} {
		_, err := ops.Bind(t.Context(), tc.role, access.Actor(tc.principal))
		require.ErrorIs(t, err, db.ErrInvalidArgument, tc.name)
	}
	require.Equal(t, before, everything(t, k.Pool))

	bound, err := ops.Bind(t.Context(), app.Role, "svc:billing")
	require.NoError(t, err)
	require.True(t, bound)
	bound, err = ops.Bind(t.Context(), app.Role, "svc:billing")
	require.NoError(t, err)
	require.False(t, bound, "binding again changes nothing")
	bs, err := ops.Bindings(t.Context(), app.Role)
	require.NoError(t, err)
	require.Equal(t, []access.Binding{
		{Role: app.Role, Principal: testkit.App, BoundBy: testkit.Ana, BoundAt: testkit.T0},
		{Role: app.Role, Principal: "svc:billing", BoundBy: testkit.Ops, BoundAt: testkit.T0},
	}, bs)
	var role string
	require.NoError(t, k.Pool.QueryRow(t.Context(),
		`SELECT session_role FROM docket.actor_binding_events WHERE principal = 'svc:billing'`).Scan(&role))
	require.Equal(t, operator.Role, role)

	unbound, err := ops.Unbind(t.Context(), app.Role, "svc:billing")
	require.NoError(t, err)
	require.True(t, unbound)
	bs, err = ops.Bindings(t.Context(), app.Role)
	require.NoError(t, err)
	require.Len(t, bs, 1)
}

// TestNobodyTruncates shows TRUNCATE refused with DK015 on every docket
// table for the schema owner too, and nothing wiped.
func TestNobodyTruncates(t *testing.T) {
	t.Parallel()
	k := testkit.Setup(t, testkit.Ana, []string{testkit.Acme}, testkit.Grants(testkit.App, testkit.Acme, access.JobCreate)...)
	before := everything(t, k.Pool)
	for _, table := range docketTables(t, k.Pool) {
		require.Equal(t, "DK015", attempt(t, k.Pool, "TRUNCATE "+table+" CASCADE"), "the owner truncates %s", table)
	}
	require.Equal(t, before, everything(t, k.Pool))
}
