package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/pgserver"
)

// Two suites with different prefixes on one server, as a role that may
// only CREATE DATABASE: each builds its own template with its own
// migrations, and neither's stale-template cleanup, nor the drop of its
// test databases, touches the other's.
func TestSuitesWithDifferentPrefixesShareAServer(t *testing.T) {
	t.Parallel()
	srv := createdbOnly(t)
	tag := pgserver.RandomName("")[:8]
	a := suiteFor(t, srv, Options{Prefix: "pgta_" + tag + "_", CleanStaleTemplates: true,
		Migrate: createTable("a_orders"), MigrateVersion: "a-v1"})
	b := suiteFor(t, srv, Options{Prefix: "pgtb_" + tag + "_", CleanStaleTemplates: true,
		Migrate: createTable("b_orders"), MigrateVersion: "b-v1"})
	staleA, staleB := a.prefix+"tmpl_00000000000000aa", b.prefix+"tmpl_00000000000000bb"
	staleTemplate(t, srv, staleA)
	staleTemplate(t, srv, staleB)

	var dbA, dbB string
	t.Run("a", func(t *testing.T) {
		pool := a.newDB(t, srv)
		dbA = currentDB(t, pool)
		require.True(t, strings.HasPrefix(dbA, a.prefix+"t_"), dbA)
		require.True(t, hasTable(t, pool, "a_orders"), "the suite's migration is in its databases")
		require.False(t, hasTable(t, pool, "b_orders"))
		require.True(t, hasTable(t, pool, "jobs"), "so is docket's schema")
		require.ElementsMatch(t, []string{dbA, a.TemplateName(), staleB}, databases(t, srv, a.prefix, b.prefix),
			"a's build dropped a's stale template, not b's")
	})
	t.Run("b", func(t *testing.T) {
		pool := b.newDB(t, srv)
		dbB = currentDB(t, pool)
		require.True(t, hasTable(t, pool, "b_orders"))
		require.False(t, hasTable(t, pool, "a_orders"))
		require.ElementsMatch(t, []string{a.TemplateName(), dbB, b.TemplateName()}, databases(t, srv, a.prefix, b.prefix))
	})
	require.NotEqual(t, dbA, dbB)
	require.Equal(t, []string{a.TemplateName(), b.TemplateName()}, databases(t, srv, a.prefix, b.prefix),
		"each test's database was dropped when it ended, and only it")
	require.NotEqual(t, a.TemplateName()[len(a.prefix):], b.TemplateName()[len(b.prefix):],
		"different migrations, different fingerprints")
}

// Without CleanStaleTemplates a build leaves its prefix's old templates.
func TestStaleTemplatesStayUnlessAsked(t *testing.T) {
	t.Parallel()
	srv := createdbOnly(t)
	s := suiteFor(t, srv, Options{Prefix: "pgtc_" + pgserver.RandomName("")[:8] + "_"})
	stale := s.prefix + "tmpl_00000000000000cc"
	staleTemplate(t, srv, stale)
	name := currentDB(t, s.newDB(t, srv))
	require.ElementsMatch(t, []string{name, stale, s.TemplateName()}, databases(t, srv, s.prefix))
}

func TestNewRefusesMalformedOptions(t *testing.T) {
	t.Parallel()
	migrate := createTable("x")
	for _, o := range []Options{
		{Prefix: "Docket_"},
		{Prefix: "1docket"},
		{Prefix: "docket-"},
		{Prefix: strings.Repeat("a", 31)},
		{Migrate: migrate},
		{MigrateVersion: "v1"},
		{Migrate: migrate, MigrateVersion: strings.Repeat("v", 201)},
	} {
		_, err := New(o)
		require.ErrorIs(t, err, db.ErrInvalidArgument, "%+v", o)
	}
	s, err := New(Options{})
	require.NoError(t, err)
	require.Equal(t, "docket_tmpl_"+db.SchemaFingerprint(), s.TemplateName(), "the package functions' template, as before")
	v1 := MustNew(Options{Migrate: migrate, MigrateVersion: "v1"})
	v2 := MustNew(Options{Migrate: migrate, MigrateVersion: "v2"})
	require.NotEqual(t, v1.TemplateName(), v2.TemplateName())
	require.NotEqual(t, s.TemplateName(), v1.TemplateName())
	require.Len(t, v1.TemplateName(), len("docket_tmpl_")+16)
}

func TestCleanTemplatesEnvAsksOnlyWhenTrue(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"": false, "0": false, "no": false, "1": true, "true": true} {
		require.Equal(t, want, cleanTemplatesAsked(v), "%s=%q", CleanTemplatesEnv, v)
	}
}

func TestHashFSFollowsTheFiles(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{"001_orders.sql": {Data: []byte("CREATE TABLE orders ()")}, "002_lines.sql": {Data: []byte("CREATE TABLE lines ()")}}
	h1, err := HashFS(fsys)
	require.NoError(t, err)
	require.Len(t, h1, 16)
	fsys["002_lines.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE lines (id int)")}
	h2, err := HashFS(fsys)
	require.NoError(t, err)
	require.NotEqual(t, h1, h2)
	again, err := HashFS(fsys)
	require.NoError(t, err)
	require.Equal(t, h2, again)
}

// createdbOnly returns a server reached as a login role of the test's own
// that may create databases and nothing more: no superuser, no CREATEROLE.
// The role is dropped when the test ends, after everything it made.
func createdbOnly(t *testing.T) *server {
	t.Helper()
	ctx := context.Background()
	shared := sharedFor(t)
	role := pgserver.RandomName("pgtest_r_")
	password := pgserver.RandomName("pw")
	admin, err := pgx.Connect(ctx, shared.AdminURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	_, err = admin.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN CREATEDB NOSUPERUSER NOCREATEROLE PASSWORD '%s'", role, password))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), "DROP ROLE "+role)
		require.NoError(t, err, "drop role %s: it still owns something", role)
	})
	u, err := url.Parse(shared.AdminURL())
	require.NoError(t, err)
	u.User = url.UserPassword(role, password)
	ps, err := pgserver.Open(ctx, u.String(), "a CREATEDB-only role", nil)
	require.NoError(t, err)
	srv := &server{Server: ps}
	t.Cleanup(func() { require.NoError(t, srv.Close(context.Background())) })
	var super, createRole bool
	require.NoError(t, admin.QueryRow(ctx, "SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = $1", role).Scan(&super, &createRole))
	require.False(t, super || createRole)
	return srv
}

// suiteFor returns a suite with opts whose templates on srv are dropped
// when the test ends.
func suiteFor(t *testing.T, srv *server, opts Options) *Suite {
	t.Helper()
	s, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, name := range databases(t, srv, s.prefix) {
			dropTemplate(t, srv, name)
		}
	})
	return s
}

// staleTemplate makes an empty template database name, with no build time
// recorded: stale to a cleanup.
func staleTemplate(t *testing.T, srv *server, name string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, srv.CreateDatabase(ctx, name, "template0"))
	_, err := srv.admin(t).Exec(ctx, "ALTER DATABASE "+name+" IS_TEMPLATE true")
	require.NoError(t, err)
}

func dropTemplate(t *testing.T, srv *server, name string) {
	t.Helper()
	ctx := context.Background()
	_, err := srv.admin(t).Exec(ctx, "ALTER DATABASE "+name+" IS_TEMPLATE false")
	require.NoError(t, err)
	require.NoError(t, srv.DropDatabase(ctx, name))
}

// admin returns a connection to srv as its admin role, closed when t ends.
func (s *server) admin(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), s.AdminURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// databases lists the databases on srv whose names start with one of
// prefixes, by name.
func databases(t *testing.T, srv *server, prefixes ...string) []string {
	t.Helper()
	rows, err := srv.admin(t).Query(context.Background(),
		`SELECT datname::text FROM pg_database
		 WHERE EXISTS (SELECT 1 FROM unnest($1::text[]) p WHERE starts_with(datname::text, p)) ORDER BY datname`, prefixes)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	if names == nil {
		names = []string{}
	}
	return names
}

func createTable(name string) func(context.Context, *pgxpool.Pool) error {
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		_, err := pool.Exec(ctx, "CREATE TABLE public."+name+" (id bigint PRIMARY KEY)")
		return err
	}
}

func hasTable(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_class WHERE relname = $1 AND relkind = 'r')", name).Scan(&ok))
	return ok
}

func currentDB(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var name string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&name))
	return name
}
