package db_test

import (
	"context"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/sql/definitions"
	schema "github.com/docket-dev/docket/sql/schema"
)

// sqlFile is one file of sql/schema (its Up section) or sql/definitions.
type sqlFile struct {
	name string // e.g. schema/00024_jobs.sql, definitions/jobs.sql
	text string
}

func sqlFiles(t *testing.T) (versioned, defs []sqlFile) {
	t.Helper()
	for _, set := range []struct {
		fsys fs.FS
		dir  string
		out  *[]sqlFile
	}{{schema.FS, "schema", &versioned}, {definitions.FS, "definitions", &defs}} {
		names, err := fs.Glob(set.fsys, "*.sql")
		require.NoError(t, err)
		for _, name := range names {
			text, err := fs.ReadFile(set.fsys, name)
			require.NoError(t, err)
			if set.dir == "schema" {
				up, _, found := strings.Cut(string(text), "-- +goose Down")
				require.True(t, found, "%s has a Down section", name)
				text = []byte(up)
			}
			*set.out = append(*set.out, sqlFile{set.dir + "/" + name, string(text)})
		}
	}
	return versioned, defs
}

// upStatements splits a versioned migration's Up section as goose does: a
// statement ends with a line ending in a semicolon, or spans a
// StatementBegin/StatementEnd block. Comments are left out.
func upStatements(text string) []string {
	var out []string
	var cur strings.Builder
	block := false
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "-- +goose StatementBegin":
			block = true
			continue
		case trimmed == "-- +goose StatementEnd":
			block = false
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		case !block && (strings.HasPrefix(trimmed, "--") || trimmed == ""):
			continue
		}
		cur.WriteString(line)
		if !block && strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	return out
}

// Every function, trigger and view of schema docket (River's aside) is
// defined in exactly one file: under sql/definitions, or, for the IMMUTABLE
// functions that CHECKs and domains call, in one versioned migration. The
// TRUNCATE-refusing trigger of every table is apply_privileges' (kit.sql), a
// machine's two views one call of machine_views (kit.sql) in its aggregate's
// file.
// And every CREATE in those files made something the catalog has.
func TestEachObjectDefinedOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewDB(t)
	versioned, defs := sqlFiles(t)
	files := append(slices.Clone(versioned), defs...)

	// Functions, by name: as many CREATEs as the catalog has overloads, all
	// in one file.
	rows, err := pool.Query(ctx, `
		SELECT p.proname, count(*), bool_and(p.provolatile = 'i'),
		       bool_or(EXISTS (SELECT 1 FROM pg_depend d WHERE d.refobjid = p.oid AND d.classid = 'pg_constraint'::regclass))
		FROM pg_proc p WHERE p.pronamespace = 'docket'::regnamespace AND p.proname NOT LIKE 'river\_%'
		GROUP BY p.proname`)
	require.NoError(t, err)
	type function struct {
		Name        string
		Overloads   int
		Immutable   bool
		Constrained bool
	}
	functions, err := pgx.CollectRows(rows, pgx.RowToStructByPos[function])
	require.NoError(t, err)
	require.NotEmpty(t, functions)
	defined := map[string]bool{}
	for _, fn := range functions {
		create := regexp.MustCompile(`(?m)^CREATE (OR REPLACE )?FUNCTION docket\.` + fn.Name + `\(`)
		var in []string
		n := 0
		for _, f := range files {
			if c := len(create.FindAllStringIndex(f.text, -1)); c > 0 {
				in = append(in, f.name)
				n += c
			}
		}
		require.Len(t, in, 1, "function %s: defined in %v", fn.Name, in)
		require.Equal(t, fn.Overloads, n, "function %s: %d overloads, %d definitions in %s", fn.Name, fn.Overloads, n, in[0])
		if strings.HasPrefix(in[0], "schema/") {
			require.True(t, fn.Immutable, "function %s of %s: a versioned migration holds IMMUTABLE functions only", fn.Name, in[0])
		}
		defined[fn.Name] = true
	}
	// A versioned migration's function is one a CHECK or domain calls,
	// directly or through another of theirs.
	calls := func(name string) bool {
		for _, f := range versioned {
			for _, stmt := range upStatements(f.text) {
				if strings.HasPrefix(stmt, "CREATE FUNCTION") && strings.Contains(stmt, "docket."+name+"(") &&
					!strings.HasPrefix(stmt, "CREATE FUNCTION docket."+name+"(") {
					return true
				}
			}
		}
		return false
	}
	for _, fn := range functions {
		for _, f := range versioned {
			if regexp.MustCompile(`(?m)^CREATE FUNCTION docket\.` + fn.Name + `\(`).MatchString(f.text) {
				require.True(t, fn.Constrained || calls(fn.Name),
					"function %s of %s: no CHECK or domain calls it, so it belongs in sql/definitions", fn.Name, f.name)
			}
		}
	}

	// Triggers, by table and name (a partition's clones of its table's are
	// not defined of their own).
	rows, err = pool.Query(ctx, `
		SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		WHERE c.relnamespace = 'docket'::regnamespace AND NOT t.tgisinternal AND t.tgparentid = 0`)
	require.NoError(t, err)
	type trigger struct{ Table, Name string }
	triggers, err := pgx.CollectRows(rows, pgx.RowToStructByPos[trigger])
	require.NoError(t, err)
	createTrigger := regexp.MustCompile(`(?m)^CREATE (OR REPLACE )?(CONSTRAINT )?TRIGGER (\w+)\s[^;]*?\sON docket\.(\w+)\s`)
	madeTriggers := map[trigger][]string{}
	for _, f := range files {
		for _, m := range createTrigger.FindAllStringSubmatch(f.text, -1) {
			k := trigger{m[4], m[3]}
			madeTriggers[k] = append(madeTriggers[k], f.name)
		}
	}
	require.Contains(t, definedIn(defs, "definitions/kit.sql"),
		"EXECUTE format('CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON %s", "apply_privileges guards every table")
	for _, tg := range triggers {
		if tg.Name == "refuse_truncate" {
			continue
		}
		in := madeTriggers[tg]
		require.Len(t, in, 1, "trigger %s on %s: defined in %v", tg.Name, tg.Table, in)
		require.True(t, strings.HasPrefix(in[0], "definitions/"), "trigger %s on %s: in %s", tg.Name, tg.Table, in[0])
		delete(madeTriggers, tg)
	}
	require.Empty(t, madeTriggers, "CREATE TRIGGER statements that made no trigger")

	// Views, by name.
	rows, err = pool.Query(ctx, `SELECT viewname FROM pg_views WHERE schemaname = 'docket'`)
	require.NoError(t, err)
	views, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	createView := regexp.MustCompile(`(?m)^CREATE (OR REPLACE )?VIEW docket\.(\w+)\s`)
	machineViews := regexp.MustCompile(`(?m)^SELECT docket\.machine_views\('(\w+)'\);$`)
	madeViews := map[string][]string{}
	for _, f := range files {
		for _, m := range createView.FindAllStringSubmatch(f.text, -1) {
			madeViews[m[2]] = append(madeViews[m[2]], f.name)
		}
		// A machine's two views are made by the kit's machine_views.
		for _, m := range machineViews.FindAllStringSubmatch(f.text, -1) {
			madeViews[m[1]+"_states"] = append(madeViews[m[1]+"_states"], f.name)
			madeViews[m[1]+"_transitions"] = append(madeViews[m[1]+"_transitions"], f.name)
		}
	}
	for _, v := range views {
		in := madeViews[v]
		require.Len(t, in, 1, "view %s: defined in %v", v, in)
		require.True(t, strings.HasPrefix(in[0], "definitions/"), "view %s: in %s", v, in[0])
		delete(madeViews, v)
	}
	require.Empty(t, madeViews, "CREATE VIEW statements that made no view")

	// Every function a file creates is in the catalog.
	anyFunction := regexp.MustCompile(`(?m)^CREATE (OR REPLACE )?FUNCTION docket\.(\w+)\(`)
	for _, f := range files {
		for _, m := range anyFunction.FindAllStringSubmatch(f.text, -1) {
			require.True(t, defined[m[2]], "%s creates docket.%s, which the catalog does not have", f.name, m[2])
		}
	}
}

func definedIn(files []sqlFile, name string) string {
	for _, f := range files {
		if f.name == name {
			return f.text
		}
	}
	return ""
}

// The versioned migrations hold what has data or state, and nothing else:
// tables, types and domains (and their constraints), indexes, constraints, comments on them, seed
// rows and the rows they backfill, and the IMMUTABLE functions
// TestEachObjectDefinedOnce admits. No view, trigger, grant or code that
// would run again lives there. A backfill that rewrites rows the rules'
// triggers would refuse (a token replaced by its digest) may switch a
// table's user triggers off, as one statement, and must switch them on
// again with the next ALTER of that table. A table rebuilt (its columns in
// a new order) is renamed with its identity's sequence to *_reordered, made
// again, filled from the old one, which is then dropped: no other table.
func TestVersionedMigrationsHoldOnlyData(t *testing.T) {
	t.Parallel()
	allowed := regexp.MustCompile(`^(CREATE TABLE|CREATE (UNIQUE )?INDEX|CREATE DOMAIN|CREATE TYPE|CREATE SEQUENCE|` +
		`CREATE SCHEMA|CREATE FUNCTION docket\.\w+\(|ALTER TABLE|ALTER DOMAIN|COMMENT ON (TABLE|COLUMN|DOMAIN|TYPE|INDEX)|` +
		`INSERT INTO docket\.(error_codes|machines|machine_states|machine_transitions|capabilities|settings|job_token_rekeys) |` +
		`UPDATE docket\.\w+\s|SET LOCAL docket\.migrating = 'on';$|` +
		`ALTER SEQUENCE docket\.\w+_id_seq RENAME TO \w+_reordered_id_seq;$|INSERT INTO docket\.\w+ \([^)]*\)\s+OVERRIDING SYSTEM VALUE\s+SELECT\s|` +
		`SELECT setval\('docket\.\w+_id_seq', s\.last_value, s\.is_called\) FROM docket\.\w+_reordered_id_seq s;$|DROP TABLE docket\.\w+_reordered;$)`)
	switched := regexp.MustCompile(`^ALTER TABLE (docket\.\w+) (ENABLE|DISABLE) TRIGGER USER;$`)
	versioned, _ := sqlFiles(t)
	for _, f := range versioned {
		stmts := upStatements(f.text)
		require.NotEmpty(t, stmts, f.name)
		off := map[string]bool{}
		for _, stmt := range stmts {
			require.Regexp(t, allowed, stmt, "%s holds a statement a versioned migration may not", f.name)
			if strings.HasPrefix(stmt, "CREATE FUNCTION") {
				require.Regexp(t, `(?m)^LANGUAGE (sql|plpgsql) IMMUTABLE`, stmt, f.name)
			}
			if m := switched.FindStringSubmatch(stmt); m != nil {
				require.Equal(t, m[2] == "ENABLE", off[m[1]], "%s: %s", f.name, stmt)
				off[m[1]] = m[2] == "DISABLE"
				continue
			}
			if strings.HasPrefix(stmt, "ALTER TABLE") {
				require.NotRegexp(t, `(?i)(ENABLE|DISABLE) TRIGGER|OWNER TO`, stmt, f.name)
			}
		}
		for table, isOff := range off {
			require.False(t, isOff, "%s leaves the triggers of %s off", f.name, table)
		}
	}
}

// recordDefinition records, as the definitions of file made it, an object
// the definitions of this build do not make, and marks file changed, as a
// database would be after another build's migrate.
func recordDefinition(t *testing.T, q db.DBTX, file, kind, name string) {
	t.Helper()
	ctx := context.Background()
	_, err := q.Exec(ctx, `INSERT INTO docket.definition_objects (kind, name, file) VALUES ($1, $2, $3)`, kind, name, file)
	require.NoError(t, err)
	_, err = q.Exec(ctx, `UPDATE docket.definitions SET digest = 'another build''s' WHERE file = $1`, file)
	require.NoError(t, err)
}

// A function, trigger or view a definition file made once and makes no
// more, as another build's definitions did, is dropped by the next migrate,
// but for a function a versioned migration makes now; this build's are
// applied again, and what they made is recorded.
func TestDefinitionNoLongerMadeIsDropped(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewDB(t)
	want := catalogSnapshot(t, pool)
	_, err := pool.Exec(ctx, `
		CREATE FUNCTION docket.job_gone(p bigint) RETURNS bigint LANGUAGE sql IMMUTABLE RETURN p;
		CREATE VIEW docket.jobs_gone AS SELECT docket.job_gone(id) AS id FROM docket.jobs;
		CREATE FUNCTION docket.jobs_gone_guard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
		CREATE TRIGGER jobs_gone_guard BEFORE UPDATE ON docket.jobs FOR EACH ROW EXECUTE FUNCTION docket.jobs_gone_guard();`)
	require.NoError(t, err)
	recordDefinition(t, pool, "jobs.sql", "function", "docket.job_gone(bigint)")
	recordDefinition(t, pool, "jobs.sql", "view", "docket.jobs_gone")
	recordDefinition(t, pool, "jobs.sql", "function", "docket.jobs_gone_guard()")
	recordDefinition(t, pool, "jobs.sql", "trigger", "jobs_gone_guard ON docket.jobs")
	// One a migration makes now, as it would once a CHECK came to call it.
	recordDefinition(t, pool, "jobs.sql", "function", "docket.valid_queue(text)")
	_, err = pool.Exec(ctx, `INSERT INTO docket.definitions (file, position, digest) VALUES ('gone.sql', 99, 'another build''s')`)
	require.NoError(t, err)
	status, err := db.MigrationStatus(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []db.DefinitionChange{{File: "jobs.sql", Change: "changed"}, {File: "gone.sql", Change: "removed"}},
		status.DefinitionChanges)
	require.False(t, status.Current())

	require.NoError(t, db.Migrate(ctx, pool))
	require.Equal(t, want, catalogSnapshot(t, pool), "the others' objects are gone, this build's are as they were")
	var kept bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regprocedure('docket.valid_queue(text)') IS NOT NULL`).Scan(&kept))
	require.True(t, kept, "the migration's function stays")
	status, err = db.MigrationStatus(ctx, pool)
	require.NoError(t, err)
	require.True(t, status.Current(), "%+v", status)
	var recorded, gone int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE name LIKE '%gone%') FROM docket.definition_objects`).Scan(&recorded, &gone))
	require.Zero(t, gone)
	require.Equal(t, len(catalogRows(t, pool))-definitionsUnrecorded(t, pool), recorded,
		"every function, trigger and view is recorded, but the versioned migrations' and the TRUNCATE guards")
}

// definitionsUnrecorded counts the objects of catalogRows the definitions
// never record: the versioned migrations' functions, the TRUNCATE guards,
// and a partition's clones of its table's triggers.
func definitionsUnrecorded(t *testing.T, q db.DBTX) int {
	t.Helper()
	var n int
	require.NoError(t, q.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		        WHERE c.relnamespace = 'docket'::regnamespace
		          AND (t.tgname = 'refuse_truncate' OR (t.tgparentid <> 0 AND NOT t.tgisinternal)))
		     + (SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'docket'::regnamespace
		        AND p.proname NOT LIKE 'river\_%' AND p.provolatile = 'i'
		        AND NOT EXISTS (SELECT 1 FROM docket.definition_objects o
		                        WHERE o.kind = 'function' AND o.name = p.oid::regprocedure::text))`).Scan(&n))
	return n
}

// A function the definitions no longer make that something of the caller's
// own still depends on is not dropped: migrate refuses, naming it, and the
// definitions stay as they were, all of them.
func TestDefinitionNoLongerMadeButDependedOnIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewDB(t)
	_, err := pool.Exec(ctx, `
		CREATE FUNCTION docket.job_gone(p bigint) RETURNS bigint LANGUAGE sql IMMUTABLE RETURN p;
		CREATE SCHEMA mine;
		CREATE VIEW mine.jobs AS SELECT docket.job_gone(id) AS id FROM docket.jobs;`)
	require.NoError(t, err)
	recordDefinition(t, pool, "jobs.sql", "function", "docket.job_gone(bigint)")
	before := catalogRows(t, pool)
	status, err := db.MigrationStatus(ctx, pool)
	require.NoError(t, err)

	err = db.Migrate(ctx, pool)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "2BP01", pgErr.Code)
	require.ErrorContains(t, err, "cannot drop function docket.job_gone(bigint) because other objects depend on it")
	require.Equal(t, before, catalogRows(t, pool), "no definition was written")
	after, err := db.MigrationStatus(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, status, after)
}

// The definitions hold no data: no table, type, index or sequence, no change
// to one, no row but the API functions' list, and no change of a state
// machine, which a versioned migration makes. (Statements of a function's
// body are indented; a definition file's own statements start a line.)
func TestDefinitionsHoldNoData(t *testing.T) {
	t.Parallel()
	data := regexp.MustCompile(`(?m)^(CREATE (TABLE|(UNIQUE )?INDEX|DOMAIN|TYPE|SEQUENCE)|ALTER (TABLE|DOMAIN|TYPE)|TRUNCATE|` +
		`UPDATE docket\.|INSERT INTO docket\.(\w+)|DELETE FROM docket\.(\w+)|SET LOCAL docket\.migrating)`)
	_, defs := sqlFiles(t)
	for _, f := range defs {
		for _, m := range data.FindAllStringSubmatch(f.text, -1) {
			if m[5] == "api_functions" || m[6] == "api_functions" {
				continue
			}
			t.Errorf("%s: %q belongs in a versioned migration", f.name, m[0])
		}
	}
}
