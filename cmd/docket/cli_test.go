package main

import (
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	schema "github.com/docket-dev/docket/sql/schema"
)

// Every command and subcommand prints its usage on -h, --help and "docket
// help NAME", to stdout, exiting 0, without a database.
func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	for _, h := range helps {
		name := strings.Fields(h.name)
		for _, args := range [][]string{
			append(slices.Clone(name), "--help"),
			append(slices.Clone(name), "-h"),
			append([]string{"help"}, name...),
		} {
			r := docket(t, unreachable, args...)
			require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
			require.Empty(t, r.stderr, "%v", args)
			require.True(t, strings.HasPrefix(r.stdout, "usage: docket "+h.name), "%v: %s", args, r.stdout)
			require.Contains(t, r.stdout, "global flags", "%v", args)
		}
	}
	// Flags are listed with their defaults.
	r := docket(t, unreachable, "job", "list", "acme", "--help")
	require.Regexp(t, `--limit N\s+at most N jobs, newest first \(default 50\)`, r.stdout)
	require.Contains(t, r.stdout, "-o, --output FORMAT")
	r = docket(t, unreachable, "job", "list", "-h", "--limit", "x")
	require.Equal(t, exitOK, r.code, "help before a bad flag wins")

	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := docket(t, nil, args...)
		require.Equal(t, exitOK, r.code, "%v", args)
		require.True(t, strings.HasPrefix(r.stdout, "usage: docket COMMAND"), "%v: %s", args, r.stdout)
		for _, h := range helps {
			require.Contains(t, r.stdout, "  "+h.synopsis(), "%v", args)
		}
	}
	// A group lists its subcommands.
	for _, args := range [][]string{{"job", "--help"}, {"job", "help"}, {"help", "job"}, {"job", "-h"}} {
		r := docket(t, nil, args...)
		require.Equal(t, exitOK, r.code, "%v", args)
		require.True(t, strings.HasPrefix(r.stdout, "usage: docket job SUBCOMMAND"), "%v: %s", args, r.stdout)
		require.Contains(t, r.stdout, "job reconcile ID succeeded|failed|queued", "%v", args)
	}
	r = docket(t, nil, "job", "help", "show")
	require.True(t, strings.HasPrefix(r.stdout, "usage: docket job show ID"), r.stdout)
}

// Each wrong command line exits 2 before connecting, with one line naming
// the command and the flag or argument at fault.
func TestBadInputNamesTheFlagOrArgument(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `docket: unknown command "frobnicate" (run "docket help" for usage)`},
		{[]string{"stauts"}, `docket: unknown command "stauts" (did you mean "status"?) (run "docket help" for usage)`},
		{[]string{"job", "lsit", "acme"}, `docket job: unknown subcommand "lsit" (did you mean "list"?)`},
		{[]string{"job", "list", "acme", "--limt", "5"}, `docket job list: unknown flag --limt (did you mean --limit?)`},
		{[]string{"--nope", "status"}, `docket: unknown flag --nope before the command`},
		{[]string{"--database-url"}, `docket: --database-url needs a value`},
		{[]string{}, `docket: no command`},
		{[]string{"help", "frob"}, `docket help: unknown command "frob"`},
		{[]string{"status", "--nope"}, `docket status: unknown flag --nope (run "docket help status")`},
		{[]string{"status", "now"}, `docket status: unexpected argument "now": status takes none`},
		{[]string{"status", "-o", "yaml"}, `docket status: -o "yaml": want text or json`},
		{[]string{"status", "--output=yaml"}, `docket status: --output "yaml": want text or json`},
		{[]string{"status", "--check=maybe"}, `docket status: --check "maybe": want true or false`},
		{[]string{"version", "--output"}, `docket version: --output needs a value`},
		{[]string{"migrate", "now"}, `docket migrate: unexpected argument "now"`},
		{[]string{"migrate", "down"}, `docket migrate down: missing --to N`},
		{[]string{"migrate", "down", "--to", "x"}, `docket migrate down: --to "x": not a number`},
		{[]string{"migrate", "down", "--to", "99"}, `docket migrate down: --to 99: want 0 or a version 21..`},
		{[]string{"migrate", "down", "--to", "5"}, `docket migrate down: --to 5: want 0 or a version 21..`},
		{[]string{"migrate", "sql", "--up"}, `docket migrate sql: unknown flag --up`},
		{[]string{"project"}, `docket project: missing subcommand: create, list, archive, activate, retire`},
		{[]string{"project", "rename", "x"}, `docket project: unknown subcommand "rename"`},
		{[]string{"project", "create"}, `docket project create: missing NAME`},
		{[]string{"project", "create", "a", "b"}, `docket project create: unexpected argument "b" after NAME`},
		{[]string{"grant", "svc:x", "acme"}, `docket grant: missing CAPABILITY`},
		{[]string{"grants"}, `docket grant list: missing PROJECT`},
		{[]string{"actor", "bind", "role"}, `docket actor bind: missing PRINCIPAL`},
		{[]string{"actor", "list", "a", "b"}, `docket actor list: unexpected argument "b" after [ROLE]`},
		{[]string{"job", "list"}, `docket job list: missing PROJECT`},
		{[]string{"job", "list", "--limit", "x", "acme"}, `docket job list: --limit "x": not a number`},
		{[]string{"job", "list", "acme", "--limit", "0"}, `docket job list: --limit 0: want 1..`},
		{[]string{"job", "list", "acme", "--limit", "99999999999999999999"}, `docket job list: --limit "99999999999999999999": out of range`},
		{[]string{"job", "list", "acme", "--state", "done"}, `docket job list: --state "done": want one of queued, claimed`},
		{[]string{"job", "list", "acme", "--limit"}, `docket job list: --limit needs a value`},
		{[]string{"job", "show", "-1"}, `docket job show: ID "-1": want a positive job id`},
		{[]string{"job", "show", "x"}, `docket job show: ID "x": want a positive job id`},
		{[]string{"job", "show", "--nope", "1"}, `docket job show: unknown flag --nope (run "docket help job show")`},
		{[]string{"job", "reconcile", "1", "maybe"}, `docket job reconcile: OUTCOME "maybe": want succeeded, failed or queued`},
		{[]string{"job", "reconcile", "1", "succeeded", "--result", "{"}, `docket job reconcile: --result "{": not a JSON document`},
		{[]string{"job", "sweep", "--limit", "0"}, `docket job sweep: --limit 0: want 1..`},
		{[]string{"job", "frob"}, `docket job: unknown subcommand "frob": want list, census, show, cancel, retry, reconcile, resume, pin, sweep`},
		{[]string{"lanes", "list", "acme", "--review", "meh"}, `docket lane list: --review "meh": want one of`},
		{[]string{"lanes", "list", "acme", "--after", "-1"}, `docket lane list: --after -1: want an id, 0 or more`},
		{[]string{"lanes", "show", "0"}, `docket lane show: ID "0": want a positive lane id`},
		{[]string{"cases", "list", "acme", "--status", "ajar"}, `docket case list: --status "ajar": want one of open, closed`},
		{[]string{"cases", "show"}, `docket case show: missing ID`},
		{[]string{"waits", "acme", "--case", "0"}, `docket wait list: --case 0: want a positive case id`},
		{[]string{"dead-letters", "acme", "--limit", "-3"}, `docket dead-letter list: --limit -3: want 1..`},
		{[]string{"schedules", "list", "acme", "--limit", "1.5"}, `docket schedule list: --limit "1.5": not a number`},
		{[]string{"schedules", "preview", "x"}, `docket schedule preview: ID "x": want a positive schedule id`},
		{[]string{"schedules", "preview", "* * * * *", "UTC", "--from", "today"}, `docket schedule preview: --from "today": want an RFC 3339 instant`},
		{[]string{"schedules", "preview", "1", "--count", "0"}, `docket schedule preview: --count 0: want 1..`},
		{[]string{"tasks", "acme", "--mine=sure"}, `docket task list: --mine "sure": want true or false`},
		{[]string{"task", "show", "1", "2"}, `docket task show: unexpected argument "2" after ID`},
		{[]string{"plans", "show", "-5"}, `docket plan show: RUN "-5": want a positive run id`},
		{[]string{"batches", "show", "1", "--limit", "0"}, `docket batch show: --limit 0: want 1..`},
		{[]string{"serve", "--addr", "nowhere", "--project", "acme"}, `docket serve: --addr "nowhere": want HOST:PORT`},
		{[]string{"serve"}, `docket serve: no --project`},
		{[]string{"serve", "acme"}, `docket serve: unexpected argument "acme": serve takes none`},
	} {
		r := docket(t, unreachable, tc.args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.stderr)
		require.Empty(t, r.stdout, "%v", tc.args)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "%v: one line: %q", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
}

// The global flags work before the command, between it and its
// subcommand, and after it, before or after the positional arguments.
func TestGlobalFlagsAnywhere(t *testing.T) {
	t.Parallel()
	h := setup(t)
	url := h.Pool.Config().ConnString()
	for _, args := range [][]string{
		{"migrate", "--database-url", url},
		{"migrate", "--database-url=" + url},
		{"--database-url", url, "status"},
		{"status", "-database-url", url},
		{"project", "list", "--database-url", url},
		{"project", "--database-url", url, "list"},
		{"grants", "--database-url", url, "acme", "--as", "user:ana"},
		{"job", "list", "--limit", "5", "acme", "--database-url", url},
		{"job", "list", "acme", "--limit", "5", "--database-url", url},
		{"job", "--as", "user:ana", "list", "--database-url", url, "acme"},
	} {
		r := docket(t, unreachable, args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
	}
	// --as after the command is the actor changes are recorded as made by.
	r := docket(t, unreachable, "project", "create", "orders", "--database-url", url, "--as", "user:ana")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = docket(t, unreachable, "project", "list", "-o", "json", "--database-url", url)
	require.Contains(t, r.stdout, `"created_by": "user:ana"`)
	// "--" ends the flags.
	r = docket(t, unreachable, "job", "show", "--database-url", url, "--", "-1")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `ID "-1"`)
}

// status --check: 0 when every migration is applied and the definitions are
// this build's, 3 when a migration is pending or the definitions differ
// (naming them), 1 when the database cannot be read.
func TestStatusCheck(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.run(t, "status", "--check")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "state:         current\n")
	status, err := db.MigrationStatus(t.Context(), h.Pool)
	require.NoError(t, err)
	require.Contains(t, r.stdout, "definitions:   "+status.DefinitionsLatest+", this build's\n")
	require.NotContains(t, r.stdout, "TABLE")

	_, empty := pgtest.NewEmptyDB(t)
	r = docket(t, dbEnv(empty), "status", "--check")
	require.Equal(t, exitBehind, r.code, r.stderr)
	require.Contains(t, r.stdout, "docket schema: version 0 of")
	require.Contains(t, r.stdout, "pending:       River migration 1 (")
	require.Contains(t, r.stdout, "pending:       docket migration 21 (00021_kit.sql)")
	require.Contains(t, r.stdout, "definitions:   none; this build's are ")
	require.Contains(t, r.stderr, "docket status: ")
	// The pending list is printed once, on stdout; stderr says how many.
	require.Contains(t, r.stderr, `migrations pending; definitions not applied; run "docket migrate"`)
	require.NotContains(t, r.stderr, "River migration 1")
	require.Equal(t, 1, strings.Count(r.stdout, "pending:       River migration 1 ("))
	require.Equal(t, 1, strings.Count(r.stderr, "\n"))

	r = docket(t, dbEnv(empty), "status", "--check", "-o", "json")
	require.Equal(t, exitBehind, r.code, r.stderr)
	require.Contains(t, r.stdout, `"state": "behind"`)
	require.Contains(t, r.stdout, `"line": "docket"`)

	// Behind by one: only docket's newest is pending.
	latest := db.LatestVersion()
	r = h.run(t, "migrate", "down", "--to", itoa(previousVersion(t, latest)))
	require.Equal(t, exitOK, r.code, r.stderr)
	r = h.run(t, "status", "--check")
	require.Equal(t, exitBehind, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, "pending:"), r.stdout)
	require.Contains(t, r.stdout, "pending:       docket migration "+itoa(latest))
	require.Contains(t, r.stderr, "1 migration pending;")
	require.Contains(t, r.stderr, "; definitions not applied;", "going down dropped them")
	require.Equal(t, exitOK, h.run(t, "migrate").code)

	// Definitions that differ from this build's, as another build's would:
	// the file named, exit 3, state differs.
	_, err = h.Pool.Exec(t.Context(), `UPDATE docket.definitions SET digest = 'another build''s' WHERE file = 'jobs.sql'`)
	require.NoError(t, err)
	r = h.run(t, "status", "--check")
	require.Equal(t, exitBehind, r.code, r.stderr)
	require.Contains(t, r.stdout, "differs:       jobs.sql (changed)\n")
	require.Contains(t, r.stdout, "state:         the definitions differ from this build's")
	require.Contains(t, r.stderr, `definitions differ (1 change); run "docket migrate"`)
	r = h.run(t, "status", "--check", "-o", "json")
	require.Equal(t, exitBehind, r.code, r.stderr)
	require.Contains(t, r.stdout, `"state": "differs"`)
	require.Contains(t, r.stdout, `"changes": [
      {
        "file": "jobs.sql",
        "change": "changed"
      }
    ]`)
	r = h.run(t, "migrate", "--dry-run")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "would apply docket's definitions: jobs.sql (changed)\n"+
		"0 migrations pending, and the definitions; nothing changed (--dry-run)\n", r.stdout)
	require.Equal(t, exitOK, h.run(t, "migrate").code)
	require.Equal(t, exitOK, h.run(t, "status", "--check").code)

	r = docket(t, unreachable, "status", "--check")
	require.Equal(t, exitError, r.code, r.stderr)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// schemaOf describes what a database holds: every relation and function in
// docket's schema with its kind, and the recorded migrations.
func schemaOf(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	ctx := t.Context()
	rows, err := pool.Query(ctx, `
		SELECT 'rel ' || c.relname || ' ' || c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1
		UNION ALL
		SELECT 'fn ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' FROM pg_proc p
		JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
		UNION ALL
		SELECT 'type ' || t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = $1
		ORDER BY 1`, db.Schema)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	s, err := db.MigrationStatus(ctx, pool)
	require.NoError(t, err)
	return strings.Join(lines, "\n") + "\n" + itoa(s.Version) + "/" + itoa(int64(s.RiverVersion))
}

// migrate --dry-run lists what it would apply, migrate down --dry-run what
// it would roll back; neither changes anything.
func TestMigrateDryRun(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewEmptyDB(t)
	env := dbEnv(url)
	before := schemaOf(t, pool)
	r := docket(t, env, "migrate", "--dry-run")
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Equal(t, "would apply River migration 1 (create river migration)", lines[0])
	require.Contains(t, r.stdout, "would apply docket migration 21 (00021_kit.sql)\n")
	require.Equal(t, "would apply docket's definitions: all 15 files (none applied yet)", lines[len(lines)-2])
	require.Equal(t, len(riverMigrations())+len(docketMigrations()), len(lines)-2)
	require.Contains(t, lines[len(lines)-1], "pending, and the definitions; nothing changed (--dry-run)")
	require.Equal(t, before, schemaOf(t, pool))

	require.Equal(t, exitOK, docket(t, env, "migrate").code)
	migrated := schemaOf(t, pool)
	r = docket(t, env, "migrate", "--dry-run")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "nothing to apply"), r.stdout)

	latest := db.LatestVersion()
	// The last two migrations, by position: a version number may be missing.
	down := docketMigrations()
	n := len(down)
	r = docket(t, env, "migrate", "down", "--to", itoa(down[n-3].version), "--dry-run")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "would drop docket's definitions (its functions, triggers and views) first\n"+
		"would roll back "+down[n-1].String()+"\nwould roll back "+down[n-2].String()+
		"\n2 migrations to roll back; nothing changed (--dry-run)\n", r.stdout)
	r = docket(t, env, "migrate", "down", "--dry-run", "--to", itoa(latest))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "nothing to roll back"), r.stdout)
	require.Equal(t, migrated, schemaOf(t, pool))
}

// migrate --dry-run names, under a migration that rebuilds a table, the
// table, how much it would copy and the lock it holds meanwhile, and
// changes nothing; the migration then keeps every row.
func TestMigrateDryRunNamesARebuild(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, url := pgtest.NewEmptyDB(t)
	env := dbEnv(url)
	require.Equal(t, exitOK, docket(t, env, "migrate").code)
	var rebuild migration
	for _, m := range docketMigrations() {
		if rebuildCopy.MatchString(m.up) {
			rebuild = m
		}
	}
	require.NotZero(t, rebuild.version, "a migration that rebuilds a table")
	_, err := pool.Exec(ctx, `
		SELECT docket.set_context('svc:ops', now()), docket.project_create('acme', 'svc:ops', now());
		INSERT INTO docket.jobs (project, kind, payload, available_at, created_by, created_at, updated_at)
		SELECT 'acme', 'report.build', '{}', now(), 'svc:ops', now(), now() FROM generate_series(1, 500)`)
	require.NoError(t, err)
	before := docketMigrations()[slices.IndexFunc(docketMigrations(), func(m migration) bool { return m.version == rebuild.version })-1]
	require.NoError(t, db.MigrateDownTo(ctx, pool, before.version))
	// An operator's own index, view and foreign key on the table.
	_, err = pool.Exec(ctx, `
		ANALYZE docket.jobs;
		CREATE INDEX jobs_project_idx ON docket.jobs (project, id);
		CREATE SCHEMA app;
		CREATE VIEW app.recent_jobs AS SELECT id, state FROM docket.jobs;
		CREATE TABLE app.invoices (id bigint PRIMARY KEY, job_id bigint REFERENCES docket.jobs (id))`)
	require.NoError(t, err)
	was := schemaOf(t, pool)

	r := docket(t, env, "migrate", "--dry-run")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "would apply "+rebuild.String()+"\n  rebuilds docket.jobs (about 500 rows, ")
	require.Contains(t, r.stdout, " MB with its indexes): every read and write of it waits until this migration commits\n"+
		"  refused: foreign key invoices_job_id_fkey on app.invoices (FOREIGN KEY (job_id) REFERENCES docket.jobs(id)) names the table: drop it first, make it again after\n"+
		"  not carried over: index jobs_project_idx, not docket's: make it again after (CREATE INDEX jobs_project_idx ON docket.jobs USING btree (project, id))\n"+
		"  refused: view app.recent_jobs reads the table: drop it first, make it again after\n")
	require.Equal(t, was, schemaOf(t, pool))

	// As the dry run said: refused, and nothing changed.
	r = docket(t, env, "migrate")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "depend")
	status, err := db.MigrationStatus(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, before.version, status.Version)
	require.Equal(t, was, schemaOf(t, pool))

	_, err = pool.Exec(ctx, `DROP VIEW app.recent_jobs; ALTER TABLE app.invoices DROP CONSTRAINT invoices_job_id_fkey`)
	require.NoError(t, err)
	require.Equal(t, exitOK, docket(t, env, "migrate").code)
	var n int
	var own bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), to_regclass('docket.jobs_project_idx') IS NOT NULL FROM docket.jobs`).Scan(&n, &own))
	require.Equal(t, 500, n, "the rebuild keeps every row")
	require.False(t, own, "an index of the operator's own is not carried over")
}

// migrate sql prints SQL that, run as one script by the simple protocol as
// psql would, builds the schema migrate builds and records the same
// versions; migrate sql --down takes it away again.
func TestMigrateSQL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := docket(t, nil, "migrate", "sql")
	require.Equal(t, exitOK, r.code, r.stderr)
	up := r.stdout
	require.Less(t, strings.Index(up, "-- River migration 1 ("), strings.Index(up, "-- docket migration 21 (00021_kit.sql)"))
	require.Less(t, strings.Index(up, "-- docket migration 33 ("), strings.Index(up, "\n-- kit.sql\n"))
	require.Less(t, strings.Index(up, "\n-- budgets.sql\n"), strings.Index(up, "\n-- privileges.sql\n"))
	require.NotContains(t, up, "+goose")
	require.NotContains(t, up, "TEMPLATE")

	byMigrate := pgtest.NewDB(t)
	want := schemaOf(t, byMigrate)

	pool, url := pgtest.NewEmptyDB(t)
	_, err := pool.Exec(ctx, up)
	require.NoError(t, err)
	require.Equal(t, want, schemaOf(t, pool))
	env := dbEnv(url)
	r = docket(t, env, "status", "--check")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	r = docket(t, env, "migrate")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, want, schemaOf(t, pool), "migrate after migrate sql changes nothing")

	r = docket(t, nil, "migrate", "sql", "--down")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Less(t, strings.Index(r.stdout, "-- docket's definitions: every function"), strings.Index(r.stdout, "-- docket migration 33 ("))
	require.Less(t, strings.Index(r.stdout, "-- docket migration 21 (00021_kit.sql)"), strings.Index(r.stdout, "-- River migration 1 ("))
	_, err = pool.Exec(ctx, r.stdout)
	require.NoError(t, err)
	s, err := db.MigrationStatus(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, int64(0), s.Version)
	require.Equal(t, 0, s.RiverVersion)
	r = docket(t, env, "migrate")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, want, schemaOf(t, pool), "migrate after migrate sql --down builds it all again")
}

// A command that needs docket's schema, on a database without it or behind
// this build, says so in a sentence instead of a raw Postgres error.
func TestUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	_, url := pgtest.NewEmptyDB(t)
	for _, args := range [][]string{{"job", "list", "acme"}, {"project", "list"}, {"grant", "list", "acme"}, {"task", "list", "acme"}} {
		r := docket(t, dbEnv(url), args...)
		requireRefused(t, r, exitError, args)
		require.Regexp(t, `^docket `+strings.Join(args[:len(args)-1], " ")+`.*: the database at 127\.0\.0\.1:\d+/\S+ has no docket schema; run "docket migrate"\n$`, r.stderr)
	}
	h := setup(t)
	latest := db.LatestVersion()
	require.Equal(t, exitOK, h.run(t, "migrate", "down", "--to", "29").code)
	r := h.run(t, "job", "list", "acme")
	requireRefused(t, r, exitError, nil)
	require.Contains(t, r.stderr, "is behind: docket schema version 29 of "+itoa(latest))
	require.Contains(t, r.stderr, `run "docket migrate"`)
}

// The schema check lets through every login of docket's group roles, even
// one that may not read the version tables.
func TestSchemaCheckLetsEveryRoleThrough(t *testing.T) {
	t.Parallel()
	h := setup(t, testkit.Grants(vic, project, access.CaseView))
	for _, role := range []string{testkit.AppRole, testkit.OperatorRole, testkit.ReaderRole} {
		l := h.Login(t, role, vic)
		r := docket(t, dbEnv(l.URL), "--as", string(vic), "cases", "list", project)
		require.NotContains(t, r.stderr, "docket schema", role)
		require.NotContains(t, r.stderr, "is behind", role)
		if role != testkit.ReaderRole { // a reader reads the views, not the API
			require.Equal(t, exitOK, r.code, "%s: %s", role, r.stderr)
		}
	}
}

// previousVersion is the embedded docket migration before version v: goose
// applies by number, and a number may be missing.
func previousVersion(t testing.TB, v int64) int64 {
	t.Helper()
	entries, err := fs.Glob(schema.FS, "*.sql")
	require.NoError(t, err)
	var prev int64
	for _, e := range entries {
		n, err := strconv.ParseInt(strings.SplitN(e, "_", 2)[0], 10, 64)
		require.NoError(t, err, e)
		if n < v && n > prev {
			prev = n
		}
	}
	return prev
}
