package db

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/sql/definitions"
	"github.com/docket-dev/docket/sql/schema"
)

// docket's code (its functions, triggers and views) is kept as definitions:
// one file per aggregate under sql/definitions, each object written once in
// its current form. Migrate applies them after River's and goose's
// migrations, all of them in one transaction, whenever they differ from the
// ones the database last had, or a migration was applied. It records, in two
// tables of its own as goose and River record theirs, the digest of each file
// it applied (docket.definitions) and the functions, triggers and views each
// file made (docket.definition_objects): a name a file made once and makes no
// more is dropped by the next application.
//
// What a file made is read from the catalog: every statement of a definition
// file creates or replaces its object, which writes the object's catalog row
// anew, so the rows whose xmin changed while a file ran are the file's. The
// TRUNCATE-refusing triggers apply_privileges puts on every table, River's
// functions and the versioned migrations' own functions are never recorded,
// so never dropped.

// The tables where Migrate records the definitions it applied.
const (
	definitionsTable       = Schema + ".definitions"
	definitionObjectsTable = Schema + ".definition_objects"
)

// definitionsDDL makes those tables, as goose and River make theirs.
const definitionsDDL = `CREATE TABLE IF NOT EXISTS ` + definitionsTable + ` (
    file     text PRIMARY KEY,
    position integer NOT NULL,
    digest   text NOT NULL
);
CREATE TABLE IF NOT EXISTS ` + definitionObjectsTable + ` (
    kind text NOT NULL CHECK (kind IN ('function', 'trigger', 'view')),
    name text NOT NULL,
    file text NOT NULL,
    PRIMARY KEY (kind, name)
);
COMMENT ON TABLE ` + definitionsTable + ` IS
    'The definition files (sql/definitions) docket migrate last applied, with their sha256; it applies them again when a build''s differ.';
COMMENT ON TABLE ` + definitionObjectsTable + ` IS
    'The functions, triggers and views each definition file made; one a file no longer makes is dropped when the definitions are next applied.';`

// definitionsSnapshot lists docket's functions, triggers and views by the
// names definition_objects records and DROP takes, with the xmin of each one's
// catalog row (a view's rule: a GRANT writes its pg_class row, not its rule).
// It runs with search_path pg_catalog, so every name is qualified the same
// way whoever runs it.
const definitionsSnapshot = `SELECT 'function'::text AS kind, p.oid::regprocedure::text AS name, p.xmin::text AS row_xmin
FROM pg_proc p WHERE p.pronamespace = 'docket'::regnamespace AND p.proname NOT LIKE 'river\_%'
UNION ALL
SELECT 'trigger', quote_ident(t.tgname) || ' ON ' || t.tgrelid::regclass::text, t.xmin::text
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = 'docket'::regnamespace AND NOT t.tgisinternal AND t.tgparentid = 0 AND t.tgname <> 'refuse_truncate'
  AND c.relname NOT LIKE 'river\_%'
UNION ALL
SELECT 'view', c.oid::regclass::text, r.xmin::text
FROM pg_class c JOIN pg_rewrite r ON r.ev_class = c.oid AND r.rulename = '_RETURN'
WHERE c.relnamespace = 'docket'::regnamespace AND c.relkind = 'v'`

// dropDefinitions drops the recorded objects that where selects, and forgets
// them: triggers first, then views, then functions, each pass dropping what
// nothing else depends on any more. An object something else still depends on
// (a view of the caller's own, say) is refused, and nothing is dropped.
const dropDefinitions = `DO $drop$
DECLARE
    r       record;
    dropped boolean;
    refusal text;
BEGIN
    IF to_regclass('` + definitionObjectsTable + `') IS NULL THEN
        RETURN;
    END IF;
    LOOP
        dropped := false;
        refusal := NULL;
        FOR r IN SELECT o.kind, o.name FROM ` + definitionObjectsTable + ` o WHERE %s
                 ORDER BY CASE o.kind WHEN 'trigger' THEN 1 WHEN 'view' THEN 2 ELSE 3 END, o.name
        LOOP
            BEGIN
                EXECUTE format('DROP %%s IF EXISTS %%s', upper(r.kind), r.name);
                DELETE FROM ` + definitionObjectsTable + ` o WHERE o.kind = r.kind AND o.name = r.name;
                dropped := true;
            EXCEPTION WHEN dependent_objects_still_exist THEN
                refusal := SQLERRM;
            END;
        END LOOP;
        EXIT WHEN refusal IS NULL OR NOT dropped;
    END LOOP;
    IF refusal IS NOT NULL THEN
        RAISE EXCEPTION 'docket definitions: %%', refusal USING ERRCODE = 'dependent_objects_still_exist';
    END IF;
END
$drop$`

// definitionStep is one statement of applying the definitions, labelled for
// the error it may return.
type definitionStep struct {
	label string
	sql   string
}

// definitionFile is one file of this build's definitions.
type definitionFile struct {
	name   string
	text   string
	digest string
}

// builtDefinitions are this build's definition files, in the order they are
// applied (privileges.sql last), and their digest.
type builtDefinitions struct {
	files  []definitionFile
	digest string
}

var definitionsOfBuild = sync.OnceValue(func() builtDefinitions {
	names, err := fs.Glob(definitions.FS, "*.sql")
	if err != nil {
		panic(err) // the pattern is a constant
	}
	all := append(slices.Clone(definitions.Order), definitions.Privileges)
	ordered := slices.Clone(all)
	slices.Sort(ordered)
	if !slices.Equal(names, ordered) {
		panic(fmt.Sprintf("sql/definitions: files %v, Order %v and %s: each file is applied once", names, definitions.Order,
			definitions.Privileges))
	}
	var b builtDefinitions
	digests := make([]string, 0, len(all))
	for _, name := range all {
		text, err := fs.ReadFile(definitions.FS, name)
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(text)
		f := definitionFile{name: name, text: string(text), digest: hex.EncodeToString(sum[:])}
		b.files = append(b.files, f)
		digests = append(digests, f.name+" "+f.digest)
	}
	b.digest = definitionsDigest(digests)
	return b
})

// definitionsDigest is the digest of a set of definitions, given as "file
// digest" lines in the order they apply.
func definitionsDigest(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n") + "\n"))
	return hex.EncodeToString(sum[:])[:16]
}

// applySteps are the statements that apply this build's definitions, in
// order, in one transaction: the bookkeeping tables, a snapshot of the
// catalog, each file of definitions.Order followed by the record of what it
// made, the drop of what a file made before and makes no more, the
// privileges, and the record of the files.
func applySteps() []definitionStep {
	b := definitionsOfBuild()
	steps := []definitionStep{
		{"settings", "SET LOCAL search_path = pg_catalog;\nSET LOCAL client_min_messages = warning"},
		{"bookkeeping", definitionsDDL},
		{"snapshot", "CREATE TEMPORARY TABLE docket_definitions_before ON COMMIT DROP AS\n" + definitionsSnapshot + ";\n" +
			"CREATE TEMPORARY TABLE docket_definitions_made (kind text, name text, file text, PRIMARY KEY (kind, name)) ON COMMIT DROP"},
	}
	privileges := b.files[len(b.files)-1]
	for _, f := range b.files[:len(b.files)-1] {
		steps = append(steps,
			definitionStep{f.name, f.text},
			definitionStep{f.name + ": record", fmt.Sprintf(`INSERT INTO pg_temp.docket_definitions_made (kind, name, file)
SELECT c.kind, c.name, %s FROM (%s) c
LEFT JOIN pg_temp.docket_definitions_before b ON b.kind = c.kind AND b.name = c.name
WHERE b.row_xmin IS DISTINCT FROM c.row_xmin
ON CONFLICT DO NOTHING`, quoteLiteral(f.name), definitionsSnapshot)})
	}
	records := make([]string, len(b.files))
	for i, f := range b.files {
		records[i] = fmt.Sprintf("(%s, %d, %s)", quoteLiteral(f.name), i+1, quoteLiteral(f.digest))
	}
	steps = append(steps,
		definitionStep{"drop what no file makes", fmt.Sprintf(dropDefinitions, notVersioned()+
			" AND NOT EXISTS (SELECT 1 FROM pg_temp.docket_definitions_made m WHERE m.kind = o.kind AND m.name = o.name)")},
		definitionStep{privileges.name, privileges.text},
		definitionStep{"record", "DELETE FROM " + definitionObjectsTable + ";\n" +
			"INSERT INTO " + definitionObjectsTable + " (kind, name, file) SELECT kind, name, file FROM pg_temp.docket_definitions_made;\n" +
			"DELETE FROM " + definitionsTable + ";\n" +
			"INSERT INTO " + definitionsTable + " (file, position, digest) VALUES\n    " + strings.Join(records, ",\n    ")},
	)
	return steps
}

// dropSteps are the statements that drop every function, trigger and view the
// definitions made (the TRUNCATE-refusing triggers apply_privileges put on
// every table and the row-level security policies too), and forget them, in one transaction: what a rollback does
// before goose's down migrations, so that they find nothing standing on the
// tables and types they drop.
func dropSteps() []definitionStep {
	return []definitionStep{
		{"settings", "SET LOCAL search_path = pg_catalog;\nSET LOCAL client_min_messages = warning"},
		{"drop the TRUNCATE guards", `DO $guards$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT g.tgrelid::regclass FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
             WHERE c.relnamespace = 'docket'::regnamespace AND g.tgname = 'refuse_truncate'
    LOOP
        EXECUTE format('DROP TRIGGER refuse_truncate ON %s', t);
    END LOOP;
END
$guards$`},
		// The policies stand on the definitions' functions; the files make
		// them again whole each time they are applied (kit.sql).
		{"drop the row-level security policies", `DO $policies$
DECLARE
    p record;
BEGIN
    FOR p IN SELECT pol.polname, pol.polrelid::regclass AS rel FROM pg_policy pol JOIN pg_class c ON c.oid = pol.polrelid
             WHERE c.relnamespace = 'docket'::regnamespace
    LOOP
        EXECUTE format('DROP POLICY %I ON %s', p.polname, p.rel);
    END LOOP;
END
$policies$`},
		{"drop", fmt.Sprintf(dropDefinitions, notVersioned())},
		{"forget", "DO $forget$\nBEGIN\n    IF to_regclass('" + definitionsTable + "') IS NOT NULL THEN\n        DELETE FROM " +
			definitionsTable + ";\n    END IF;\nEND\n$forget$"},
	}
}

// DefinitionsSQL is the SQL that applies this build's definitions as
// [Migrate] does, in one transaction, for an operator who applies docket's
// schema with psql or a migration tool of their own (docket migrate sql). It
// must run after River's and docket's versioned migrations.
func DefinitionsSQL() string {
	return stepsSQL(applySteps())
}

// DefinitionsDropSQL is the SQL that drops every function, trigger and view
// the definitions made, in one transaction, as [MigrateDownTo] does before
// docket's down migrations (docket migrate sql --down).
func DefinitionsDropSQL() string {
	return stepsSQL(dropSteps())
}

func stepsSQL(steps []definitionStep) string {
	var b strings.Builder
	b.WriteString("BEGIN;\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "\n-- %s\n%s;\n", s.label, strings.TrimRight(strings.TrimSpace(s.sql), ";"))
	}
	b.WriteString("\nCOMMIT;\n")
	return b.String()
}

// runSteps runs steps in one transaction on pool. A step's error names the
// step, and for a definition file the line Postgres points at.
func runSteps(ctx context.Context, pool *pgxpool.Pool, steps []definitionStep) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, s := range steps {
			if _, err := tx.Exec(ctx, s.sql); err != nil {
				return fmt.Errorf("definitions: %s%s: %w", s.label, atLine(s.sql, err), err)
			}
		}
		return nil
	})
}

// atLine words where in sql Postgres placed err, as ", line N", or "".
func atLine(sql string, err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Position < 1 || int(pgErr.Position) > len(sql)+1 {
		return ""
	}
	// Position counts characters from 1.
	runes := []rune(sql)
	if int(pgErr.Position) > len(runes)+1 {
		return ""
	}
	return fmt.Sprintf(", line %d", strings.Count(string(runes[:pgErr.Position-1]), "\n")+1)
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// recordedDefinitions reads the files the database last had applied, as
// "file digest" lines in the order they applied, or nil when it has none.
func recordedDefinitions(ctx context.Context, q Pool) ([]string, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, definitionsTable).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		return nil, nil
	}
	rows, err := q.Query(ctx, `SELECT file || ' ' || digest FROM `+definitionsTable+` ORDER BY position`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// DefinitionChange is a definition file whose text differs between the
// database and this build.
type DefinitionChange struct {
	// File is the file's name in sql/definitions, e.g. jobs.sql.
	File string
	// Change is "changed" (both have it, with other text), "added" (this
	// build has it, the database never had it applied) or "removed" (the
	// database had it, this build has it no more).
	Change string
}

func (c DefinitionChange) String() string { return c.File + " (" + c.Change + ")" }

// definitionChanges compares the recorded "file digest" lines with this
// build's files, in this build's order, then the removed ones.
func definitionChanges(recorded []string) []DefinitionChange {
	had := make(map[string]string, len(recorded))
	for _, line := range recorded {
		file, digest, _ := strings.Cut(line, " ")
		had[file] = digest
	}
	var out []DefinitionChange
	for _, f := range definitionsOfBuild().files {
		switch digest, ok := had[f.name]; {
		case !ok:
			out = append(out, DefinitionChange{f.name, "added"})
		case digest != f.digest:
			out = append(out, DefinitionChange{f.name, "changed"})
		}
		delete(had, f.name)
	}
	for _, line := range recorded {
		file, _, _ := strings.Cut(line, " ")
		if _, ok := had[file]; ok {
			out = append(out, DefinitionChange{file, "removed"})
		}
	}
	return out
}

// notVersioned is the condition on a row o of definition_objects that it is
// not one of the versioned migrations' functions: a function a definition
// file made once and a migration makes now (as a CHECK came to call it) is
// the migration's, and the definitions never drop it.
func notVersioned() string {
	names := versionedFunctions()
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = quoteLiteral(n)
	}
	return fmt.Sprintf(`NOT (o.kind = 'function' AND substring(o.name FROM '^docket\.([a-z0-9_]+)\(') = ANY (ARRAY[%s]::text[]))`,
		strings.Join(quoted, ", "))
}

// versionedFunctions are the names of the functions the versioned migrations
// create: the IMMUTABLE helpers that CHECKs and domains call. They are the
// migrations', never the definitions'.
var versionedFunctions = sync.OnceValue(func() []string {
	names, err := fs.Glob(schema.FS, "*.sql")
	if err != nil {
		panic(err)
	}
	create := regexp.MustCompile(`(?m)^CREATE FUNCTION docket\.([a-z0-9_]+)\(`)
	var out []string
	for _, name := range names {
		text, err := fs.ReadFile(schema.FS, name)
		if err != nil {
			panic(err)
		}
		up, _, _ := strings.Cut(string(text), "-- +goose Down")
		for _, m := range create.FindAllStringSubmatch(up, -1) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
})
