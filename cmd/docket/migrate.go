package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/sql/schema"
)

func (c *cli) migrate(args []string) (dbAction, error) {
	c.needsSchema = false
	if len(args) > 0 {
		switch args[0] {
		case "down":
			return c.migrateDown(args[1:])
		case "sql":
			return nil, c.migrateSQL(args[1:])
		case "help":
			c.printGroupHelp("migrate")
			return nil, errHelp
		}
	}
	fs := c.flags("migrate")
	dry := fs.Bool("dry-run", false, "list the migrations and definitions it would apply, and change nothing")
	if _, err := c.parse(fs, args); err != nil {
		return nil, err
	}
	if *dry {
		return c.migrateUpDry, nil
	}
	return c.migrateUp, nil
}

func (c *cli) migrateUp(ctx context.Context, pool *pgxpool.Pool) error {
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := db.Migrate(ctx, pool, db.WithLogger(logger)); err != nil {
		return err
	}
	s, err := db.MigrationStatus(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "docket schema at version %d, River schema at version %d, definitions %s\n",
		s.Version, s.RiverVersion, s.Definitions)
	return nil
}

// migrateUpDry lists the migrations migrate would apply, in order, and the
// definitions it would apply after them.
func (c *cli) migrateUpDry(ctx context.Context, pool *pgxpool.Pool) error {
	s, err := db.MigrationStatus(ctx, pool)
	if err != nil {
		return err
	}
	if s.Ahead() {
		return fmt.Errorf("%w: docket schema version %d of %d, River's %d of %d; migrate would refuse it",
			db.ErrSchemaTooNew, s.Version, s.Latest, s.RiverVersion, s.RiverLatest)
	}
	todo := pending(s)
	if s.Baseline {
		fmt.Fprintf(c.stdout, "would record docket migrations %d-%d as applied: migrations 1-%d made their tables\n",
			s.Version+1, s.Latest, s.Version)
	}
	for _, m := range todo {
		fmt.Fprintf(c.stdout, "would apply %s\n", m)
		if err := c.describeRebuild(ctx, pool, m); err != nil {
			return err
		}
	}
	definitions := definitionsPending(s, len(todo))
	if definitions != "" {
		fmt.Fprintf(c.stdout, "would apply docket's definitions: %s\n", definitions)
	}
	if len(todo) == 0 && definitions == "" && !s.Baseline {
		fmt.Fprintf(c.stdout, "nothing to apply: docket schema at version %d, River schema at version %d, definitions %s\n",
			s.Version, s.RiverVersion, s.Definitions)
		return nil
	}
	fmt.Fprintf(c.stdout, "%s pending, and the definitions; nothing changed (--dry-run)\n", count(len(todo), "migration"))
	return nil
}

// rebuildCopy finds the copy of a migration that rebuilds a table (its
// columns in a new order): the rows of the old table inserted into the new
// one, which holds ACCESS EXCLUSIVE on the table until the migration commits.
var rebuildCopy = regexp.MustCompile(`(?m)^INSERT INTO (docket\.\w+) \([^)]*\)\s+OVERRIDING SYSTEM VALUE\s+SELECT\s`)

// describeRebuild says, under the line of a migration that rebuilds a table
// that exists, how much it would copy and that the table is locked
// meanwhile, so that an operator sees the pause before it happens.
func (c *cli) describeRebuild(ctx context.Context, pool *pgxpool.Pool, m migration) error {
	match := rebuildCopy.FindStringSubmatch(m.up)
	if match == nil {
		return nil
	}
	var rows, bytes int64
	err := pool.QueryRow(ctx, `
		SELECT c.reltuples::bigint, pg_total_relation_size(c.oid)
		FROM pg_class c WHERE c.oid = to_regclass($1)`, match[1]).Scan(&rows, &bytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // not made yet: an earlier migration of this run makes it
	}
	if err != nil {
		return fmt.Errorf("migrate: the size of %s: %w", match[1], err)
	}
	about := fmt.Sprintf("about %d rows", rows)
	if rows < 0 {
		about = "rows not yet counted by an ANALYZE"
	}
	fmt.Fprintf(c.stdout, "  rebuilds %s (%s, %d MB with its indexes): every read and write of it waits until this migration commits\n",
		match[1], about, (bytes+1<<20-1)>>20)
	// What the rebuild would not carry over, or could not drop: an index
	// the migration does not make again (one of the operator's own), and a
	// foreign key or a view outside docket's schema that names the table.
	made := []string{} // not nil: a NULL array would keep no index
	for _, name := range rebuildMakes.FindAllStringSubmatch(m.up, -1) {
		made = append(made, name[1])
	}
	found, err := pool.Query(ctx, `
		SELECT 'index', c.relname::text, pg_get_indexdef(i.indexrelid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = to_regclass($1) AND c.relname <> ALL ($3::text[])
		UNION ALL
		SELECT 'foreign key', format('%s on %s', k.conname, k.conrelid::regclass), pg_get_constraintdef(k.oid)
		FROM pg_constraint k WHERE k.confrelid = to_regclass($1) AND k.contype = 'f'
		UNION ALL
		SELECT DISTINCT 'view', v.oid::regclass::text, ''
		FROM pg_depend d JOIN pg_rewrite w ON w.oid = d.objid JOIN pg_class v ON v.oid = w.ev_class
		WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = to_regclass($1) AND v.oid <> d.refobjid
		  AND v.relnamespace <> to_regnamespace($2)
		ORDER BY 1, 2`, match[1], db.Schema, made)
	if err != nil {
		return fmt.Errorf("migrate: what depends on %s: %w", match[1], err)
	}
	type dependent struct{ Kind, Name, Def string }
	deps, err := pgx.CollectRows(found, pgx.RowToStructByPos[dependent])
	if err != nil {
		return fmt.Errorf("migrate: what depends on %s: %w", match[1], err)
	}
	for _, d := range deps {
		switch d.Kind {
		case "index":
			fmt.Fprintf(c.stdout, "  not carried over: index %s, not docket's: make it again after (%s)\n", d.Name, d.Def)
		case "foreign key":
			fmt.Fprintf(c.stdout, "  refused: foreign key %s (%s) names the table: drop it first, make it again after\n", d.Name, d.Def)
		case "view":
			fmt.Fprintf(c.stdout, "  refused: view %s reads the table: drop it first, make it again after\n", d.Name)
		}
	}
	return nil
}

// rebuildMakes finds what a rebuild makes again by name: its indexes and
// its constraints (a primary key's index takes the constraint's name).
var rebuildMakes = regexp.MustCompile(`(?m)(?:^CREATE (?:UNIQUE )?INDEX|ADD CONSTRAINT) (\w+)`)

// definitionsPending says why migrate would apply the definitions on a
// database at s with n migrations pending: the files that differ, or that a
// migration is pending, or "" when it would not.
func definitionsPending(s db.Status, n int) string {
	if s.Definitions == "" {
		return fmt.Sprintf("all %d files (none applied yet)", len(s.DefinitionChanges))
	}
	if len(s.DefinitionChanges) > 0 {
		return joinChanges(s.DefinitionChanges)
	}
	if n > 0 || s.Baseline {
		return "all of them again, after the migrations (none differs)"
	}
	return ""
}

func (c *cli) migrateDown(args []string) (dbAction, error) {
	fs := c.flags("migrate down")
	to := fs.Int64("to", -1, "the docket schema version `N` to roll back to (0 removes every docket table)")
	dry := fs.Bool("dry-run", false, "list what it would drop and roll back, and change nothing")
	if _, err := c.parse(fs, args); err != nil {
		return nil, err
	}
	versions := docketMigrations()
	known := *to == 0
	for _, m := range versions {
		known = known || m.version == *to
	}
	switch {
	case *to == -1:
		return nil, usageOf(fs, "missing --to N (0 removes every docket table)")
	case !known:
		return nil, usageOf(fs, "--to %d: want 0 or a version %d..%d", *to, versions[0].version, versions[len(versions)-1].version)
	}
	if *dry {
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			s, err := db.MigrationStatus(ctx, pool)
			if err != nil {
				return err
			}
			var undo []migration
			for _, m := range slices.Backward(docketMigrations()) {
				if m.version > *to && m.version <= s.Version {
					undo = append(undo, m)
				}
			}
			if len(undo) > 0 && s.Definitions != "" {
				fmt.Fprintln(c.stdout, "would drop docket's definitions (its functions, triggers and views) first")
			}
			for _, m := range undo {
				fmt.Fprintf(c.stdout, "would roll back %s\n", m)
			}
			if len(undo) == 0 {
				fmt.Fprintf(c.stdout, "nothing to roll back: docket schema at version %d\n", s.Version)
				return nil
			}
			fmt.Fprintf(c.stdout, "%s to roll back; nothing changed (--dry-run)\n", count(len(undo), "migration"))
			return nil
		}, nil
	}
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		if err := db.MigrateDownTo(ctx, pool, *to); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "docket schema at version %d\n", *to)
		return nil
	}, nil
}

// migrateSQL prints the SQL of every migration and of the definitions, as
// migrate applies them, or, with --down, as rolling them all back would.
func (c *cli) migrateSQL(args []string) error {
	fs := c.flags("migrate sql")
	down := fs.Bool("down", false, "print the rollbacks, newest first, instead")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	river, docket := riverMigrations(), docketMigrations()
	w := bufio.NewWriter(c.stdout)
	fmt.Fprintf(w, "-- docket migrate sql%s: the schema changes of docket schema version %d (fingerprint %s)\n",
		map[bool]string{true: " --down"}[*down], db.LatestVersion(), db.SchemaFingerprint())
	if *down {
		fmt.Fprint(w, "-- docket's definitions dropped, then docket's migrations rolled back, newest first, then River's.\n"+
			"-- Each runs in a transaction of its own; a migration deletes the row that recorded it.\n")
		fmt.Fprintf(w, "\n-- docket's definitions: every function, trigger and view they made (%s)\n%s", db.Schema+".definition_objects",
			db.DefinitionsDropSQL())
		for _, m := range slices.Backward(docket) {
			writeMigration(w, m, fmt.Sprintf("DELETE FROM %s WHERE version_id = %d;", gooseVersionTable, m.version), true)
		}
		for _, m := range slices.Backward(river) {
			writeMigration(w, m, fmt.Sprintf("DELETE FROM %s.river_migration WHERE version = %d;", db.Schema, m.version), true)
		}
		return w.Flush()
	}
	fmt.Fprintf(w, "-- River's migrations first, then docket's, then docket's definitions, in the order docket migrate\n"+
		"-- applies them. Each runs in a transaction of its own and records itself where docket migrate would\n"+
		"-- (%s.river_migration, %s, %s.definitions), so that docket status and docket\n"+
		"-- migrate agree with what ran.\n\n", db.Schema, gooseVersionTable, db.Schema)
	fmt.Fprintf(w, "CREATE SCHEMA IF NOT EXISTS %s;\n", db.Schema)
	for _, m := range river {
		record := fmt.Sprintf("INSERT INTO %s.river_migration (line, version) VALUES ('main', %d);", db.Schema, m.version)
		if m.version < riverLineColumnAdded {
			record = fmt.Sprintf("INSERT INTO %s.river_migration (version) VALUES (%d);", db.Schema, m.version)
		}
		writeMigration(w, m, record, false)
	}
	fmt.Fprintf(w, "\n-- goose's version table, where docket records its own migrations\nBEGIN;\n%s;\n"+
		"INSERT INTO %s (version_id, is_applied) SELECT 0, true WHERE NOT EXISTS (SELECT 1 FROM %[2]s);\nCOMMIT;\n",
		gooseVersionTableDDL, gooseVersionTable)
	for _, m := range docket {
		writeMigration(w, m, fmt.Sprintf("INSERT INTO %s (version_id, is_applied) VALUES (%d, true);", gooseVersionTable, m.version), false)
	}
	fmt.Fprintf(w, "\n-- docket's definitions (sql/definitions): its functions, triggers, views and privileges, in one\n"+
		"-- transaction, recorded in %[1]s.definitions and %[1]s.definition_objects as docket migrate records them\n%s",
		db.Schema, db.DefinitionsSQL())
	return w.Flush()
}

// writeMigration prints migration m's SQL in a transaction with record,
// which records it applied or, down, rolled back.
func writeMigration(w *bufio.Writer, m migration, record string, down bool) {
	sql := m.up
	if down {
		sql = m.down
	}
	fmt.Fprintf(w, "\n-- %s\nBEGIN;\n", m)
	if down {
		fmt.Fprintln(w, record)
	}
	fmt.Fprintln(w, strings.TrimSpace(sql))
	if !down {
		fmt.Fprintln(w, record)
	}
	fmt.Fprintln(w, "COMMIT;")
}

// The bookkeeping of the migrators, as their own code does it: goose's
// version table (the Postgres dialect's), and the River version whose
// migration adds river_migration's line column.
const (
	gooseVersionTable    = db.Schema + ".goose_db_version"
	gooseVersionTableDDL = `CREATE TABLE IF NOT EXISTS ` + gooseVersionTable + ` (
	id integer PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
	version_id bigint NOT NULL,
	is_applied boolean NOT NULL,
	tstamp timestamp NOT NULL DEFAULT now()
)`
	riverLineColumnAdded = 5
)

// migration is one migration of River's or docket's line.
type migration struct {
	line     string // "River" or "docket"
	version  int64
	name     string
	up, down string
}

func (m migration) String() string {
	return fmt.Sprintf("%s migration %d (%s)", m.line, m.version, m.name)
}

// pending lists the migrations a database at s lacks, in the order migrate
// applies them. A database that migrations 1-20 made lacks none of docket's:
// migrate records them as applied.
func pending(s db.Status) []migration {
	var out []migration
	for _, m := range riverMigrations() {
		if m.version > int64(s.RiverVersion) {
			out = append(out, m)
		}
	}
	if s.Baseline {
		return out
	}
	for _, m := range docketMigrations() {
		if m.version > s.Version {
			out = append(out, m)
		}
	}
	return out
}

// riverMigrations are River's migrations, their SQL aimed at docket's
// schema as db.Migrate has River apply them.
func riverMigrations() []migration {
	m, err := rivermigrate.New(riverpgxv5.New(nil), &rivermigrate.Config{Schema: db.Schema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err) // the driver and the line are River's own
	}
	var out []migration
	schemaPrefix := db.Schema + "."
	for _, v := range m.AllVersions() {
		out = append(out, migration{line: "River", version: int64(v.Version), name: v.Name,
			up:   strings.ReplaceAll(v.SQLUp, "/* TEMPLATE: schema */", schemaPrefix),
			down: strings.ReplaceAll(v.SQLDown, "/* TEMPLATE: schema */", schemaPrefix)})
	}
	return out
}

// docketMigrations are docket's goose migrations, in order, each split into
// its up and down SQL without goose's annotations.
func docketMigrations() []migration {
	names, err := fs.Glob(schema.FS, "*.sql")
	if err != nil {
		panic(err) // the pattern is a constant
	}
	slices.Sort(names)
	var out []migration
	for _, name := range names {
		v, err := goose.NumericComponent(name)
		if err != nil {
			panic(fmt.Sprintf("embedded migration %s: %v", name, err))
		}
		text, err := fs.ReadFile(schema.FS, name)
		if err != nil {
			panic(err)
		}
		var up, down strings.Builder
		section := new(strings.Builder) // before -- +goose Up: the file's header comment, left out
		for line := range strings.Lines(string(text)) {
			switch annotation := strings.TrimSpace(line); {
			case annotation == "-- +goose Up":
				section = &up
				continue
			case annotation == "-- +goose Down":
				section = &down
				continue
			case strings.HasPrefix(annotation, "-- +goose"):
				continue
			}
			section.WriteString(line)
		}
		out = append(out, migration{line: "docket", version: v, name: name, up: up.String(), down: down.String()})
	}
	return out
}
