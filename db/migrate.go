package db

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/docket-dev/docket/sql/schema"
)

// Schema is the Postgres schema holding all of docket's tables, River's
// included.
const Schema = "docket"

// gooseTable is goose's version table, kept in docket's schema.
const gooseTable = Schema + ".goose_db_version"

// migrateLockKey is the session advisory lock every migrator takes, so
// concurrent migrators run one after the other. It spells "docket" in ASCII.
const migrateLockKey int64 = 0x646f636b6574

// ErrSchemaTooNew refuses to migrate a database whose docket or River schema
// is newer than this build knows. The database is left untouched.
var ErrSchemaTooNew = errors.New("database schema is newer than this build")

// ErrSchemaReplaced refuses to migrate a database that docket's migrations 1
// to 20 brought to a version below 20: this build's migrations replaced those
// and recognise only a database at 20. The database is left untouched.
var ErrSchemaReplaced = errors.New("database schema is at a version of migrations this build replaced")

// The migrations of sql/schema, numbered from 21, replaced migrations 1 to 20,
// which made the same tables change by change. A database those made is at
// version 20 of them: [Migrate] recognises it, and records this build's
// migrations as applied for it instead of running them (its tables are
// theirs), before it applies the definitions. Only the migrations that
// replaced them, 21 to 33, are recorded so: those after 33 change the schema
// further, and run on such a database as on any other.
const (
	replacedFirst int64 = 1
	replacedLast  int64 = 20
	replacingLast int64 = 33
)

// MigrateOption adjusts [Migrate].
type MigrateOption func(*migrateConfig)

type migrateConfig struct {
	logger *slog.Logger
}

// WithLogger makes [Migrate] report each migration it applies to logger.
// By default it is silent.
func WithLogger(logger *slog.Logger) MigrateOption {
	return func(c *migrateConfig) { c.logger = logger }
}

// Migrate brings the database behind pool to the schema this build knows:
// River's migration line into schema docket first, then docket's own goose
// migrations (version table docket.goose_db_version), then docket's
// definitions (sql/definitions: its functions, triggers, views and
// privileges), all of them in one transaction of their own, whenever they
// differ from those the database last had or a migration was applied; a
// function, trigger or view the definitions made before and make no more is
// dropped then. A second Migrate changes nothing. It is safe to call from
// several processes or goroutines at once: migrators queue on a Postgres
// advisory lock held on a connection of their own, outside pool.
//
// A database docket's migrations 1 to 20 made, at version 20, is recognised:
// Migrate records this build's migrations as applied for it, without running
// them, and applies the definitions.
//
// It refuses, without changing anything, a database whose docket or River
// schema is at a version this build does not know ([ErrSchemaTooNew]), and
// one that migrations 1 to 20 left below 20 ([ErrSchemaReplaced]).
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts ...MigrateOption) error {
	cfg := migrateConfig{logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&cfg)
	}
	return withMigrateLock(ctx, pool, func() error {
		if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+Schema); err != nil {
			return fmt.Errorf("migrate: create schema %s: %w", Schema, err)
		}
		status, err := MigrationStatus(ctx, pool)
		if err != nil {
			return err
		}
		if err := status.refusal(); err != nil {
			return err
		}
		river, err := riverMigrator(pool, cfg.logger)
		if err != nil {
			return err
		}
		riverResult, err := river.Migrate(ctx, rivermigrate.DirectionUp, nil)
		if err != nil {
			return fmt.Errorf("migrate: river: %w", err)
		}
		applied := len(riverResult.Versions)
		if status.Baseline {
			if err := baseline(ctx, pool); err != nil {
				return err
			}
			cfg.logger.InfoContext(ctx, "recorded docket migrations as applied: migrations 1-20 made their schema",
				"from", replacedLast+1, "to", replacingLast)
		}
		// PostgreSQL (from 15.20, 16.12, 17.8) refuses to alter a table whose
		// row type a function takes as an argument, as many of the
		// definitions' functions do: a versioned migration to run finds the
		// definitions dropped, and they are made again below.
		pending := status.Version > 0 && status.Version < status.Latest
		if status.Baseline {
			pending = replacingLast < status.Latest
		}
		if pending {
			if err := runSteps(ctx, pool, dropSteps()); err != nil {
				return fmt.Errorf("migrate: drop the definitions before migrations %d-%d: %w", status.Version+1, status.Latest, err)
			}
		}
		err = withGoose(pool, cfg.logger, func(p *goose.Provider) error {
			results, err := p.Up(ctx)
			if err != nil {
				return fmt.Errorf("migrate: docket: %w", err)
			}
			for _, r := range results {
				cfg.logger.InfoContext(ctx, "applied docket migration",
					"version", r.Source.Version, "duration", r.Duration)
			}
			applied += len(results)
			return nil
		})
		if err != nil {
			return err
		}
		if applied == 0 && !status.Baseline && len(status.DefinitionChanges) == 0 {
			return nil
		}
		start := time.Now()
		if err := runSteps(ctx, pool, applySteps()); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		cfg.logger.InfoContext(ctx, "applied docket definitions",
			"digest", status.DefinitionsLatest, "changed", status.DefinitionChanges, "duration", time.Since(start))
		return nil
	})
}

// baseline records this build's migrations as applied for a database that
// migrations 1 to 20 made, in place of theirs, and counts every function,
// trigger and view of theirs as made by the definitions (but River's and the
// versioned migrations' own), so that the definitions drop what they no
// longer make. One transaction: it is all done, or none of it.
func baseline(ctx context.Context, pool *pgxpool.Pool) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM `+gooseTable+` WHERE version_id BETWEEN $1 AND $2`,
			replacedFirst, replacedLast); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+gooseTable+` (version_id, is_applied) SELECT v, true FROM unnest($1::bigint[]) v WHERE v <= $2`,
			sources().versions, replacingLast); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SET LOCAL search_path = pg_catalog;\n"+definitionsDDL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+definitionObjectsTable+` (kind, name, file)
			SELECT s.kind, s.name, '00001-00020' FROM (`+definitionsSnapshot+`) s
			WHERE s.kind <> 'function' OR substring(s.name FROM '^docket\.([a-z0-9_]+)\(') <> ALL ($1)
			ON CONFLICT DO NOTHING`, versionedFunctions())
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: record migrations %d-%d in place of 1-%d: %w", replacedLast+1, replacingLast, replacedLast, err)
	}
	return nil
}

// MigrateDownTo rolls docket's own migrations back until the database is at
// version (0 removes every docket table; River's tables stay). Before goose's
// down migrations run, it drops every function, trigger and view docket's
// definitions made, in one transaction, so that the down migrations find
// nothing standing on the tables and types they drop: the database keeps its
// tables and data, and takes its definitions from the next [Migrate], of this
// build or of the older build being rolled back to. It takes the same lock as
// [Migrate]. It is for operators undoing a release; it refuses a version that
// is neither 0 nor one of this build's migrations with [ErrInvalidArgument],
// and a database migrations 1 to 20 made, which Migrate must see first, with
// [ErrSchemaReplaced].
func MigrateDownTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	if version != 0 && !slices.Contains(sources().versions, version) {
		return Refuse(ErrInvalidArgument, "migrate.down",
			fmt.Sprintf("target version %d is neither 0 nor one of this build's migrations, %d..%d",
				version, sources().versions[0], LatestVersion()))
	}
	return withMigrateLock(ctx, pool, func() error {
		status, err := MigrationStatus(ctx, pool)
		if err != nil {
			return err
		}
		if status.Baseline {
			return fmt.Errorf("%w: database is at version %d of migrations 1-%d: run migrate first", ErrSchemaReplaced,
				status.Version, replacedLast)
		}
		if version >= status.Version {
			return nil
		}
		if err := runSteps(ctx, pool, dropSteps()); err != nil {
			return fmt.Errorf("migrate down to %d: %w", version, err)
		}
		return withGoose(pool, slog.New(slog.DiscardHandler), func(p *goose.Provider) error {
			if _, err := p.DownTo(ctx, version); err != nil {
				return fmt.Errorf("migrate down to %d: %w", version, err)
			}
			return nil
		})
	})
}

// Status is where a database stands against this build's migrations and
// definitions.
type Status struct {
	// Version is the highest docket migration applied (0: none).
	Version int64
	// Latest is the highest docket migration this build knows.
	Latest int64
	// RiverVersion is the highest River migration applied (0: none).
	RiverVersion int
	// RiverLatest is the highest River migration this build knows.
	RiverLatest int
	// Baseline reports a database that docket's migrations 1 to 20 made,
	// which this build's replaced: at version 20, [Migrate] records this
	// build's as applied for it, without running them.
	Baseline bool
	// Definitions is the digest of the definitions the database last had
	// applied ("" when it never had any).
	Definitions string
	// DefinitionsLatest is the digest of this build's definitions.
	DefinitionsLatest string
	// DefinitionChanges lists the definition files whose text differs between
	// the database and this build, in the order they apply; [Migrate]
	// applies the definitions while there is one.
	DefinitionChanges []DefinitionChange

	// replaced counts the migrations 1 to 20 the database has applied.
	replaced int64
}

// Current reports whether the database is exactly at this build's schema:
// its migrations and its definitions.
func (s Status) Current() bool {
	return s.Version == s.Latest && s.RiverVersion == s.RiverLatest && !s.Baseline && len(s.DefinitionChanges) == 0
}

// Ahead reports whether the database has a docket or River migration this
// build does not know; [Migrate] refuses such a database.
func (s Status) Ahead() bool {
	return s.Version > s.Latest || s.RiverVersion > s.RiverLatest
}

// refusal is why [Migrate] refuses the database, or nil.
func (s Status) refusal() error {
	if s.Baseline && (s.Version != replacedLast || s.replaced != replacedLast-replacedFirst+1) {
		return fmt.Errorf("%w: database is at version %d of migrations 1-%d, which this build replaced by %d-%d "+
			"and recognises at %d only: migrate it to %d with a docket built before them first",
			ErrSchemaReplaced, s.Version, replacedLast, replacedLast+1, s.Latest, replacedLast, replacedLast)
	}
	return s.tooNew()
}

func (s Status) tooNew() error {
	if s.Version > s.Latest {
		return fmt.Errorf("%w: database is at version %d, this build knows up to %d",
			ErrSchemaTooNew, s.Version, s.Latest)
	}
	if s.RiverVersion > s.RiverLatest {
		return fmt.Errorf("%w: database has River schema version %d, this build knows up to %d",
			ErrSchemaTooNew, s.RiverVersion, s.RiverLatest)
	}
	return nil
}

// MigrationStatus reads which docket and River migrations and which
// definitions the database has, on pool, without changing anything. A
// database docket has never touched is at 0, 0, with every definition file
// added.
func MigrationStatus(ctx context.Context, pool Pool) (Status, error) {
	s := Status{Latest: LatestVersion(), RiverLatest: riverLatest(), DefinitionsLatest: definitionsOfBuild().digest}
	var gooseExists, riverExists bool
	err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL`,
		gooseTable, Schema+".river_migration").Scan(&gooseExists, &riverExists)
	if err != nil {
		return s, fmt.Errorf("migration status: %w", err)
	}
	if gooseExists {
		// goose records a rollback by deleting the version's row.
		err := pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0), count(DISTINCT version_id) FILTER (WHERE version_id BETWEEN $1 AND $2)
			FROM `+gooseTable+` WHERE is_applied`, replacedFirst, replacedLast).Scan(&s.Version, &s.replaced)
		if err != nil {
			return s, fmt.Errorf("migration status: docket version: %w", err)
		}
		s.Baseline = s.replaced > 0
	}
	recorded, err := recordedDefinitions(ctx, pool)
	if err != nil {
		return s, fmt.Errorf("migration status: definitions: %w", err)
	}
	s.Definitions = definitionsDigest(recorded)
	s.DefinitionChanges = definitionChanges(recorded)
	if riverExists {
		err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+Schema+`.river_migration WHERE line = 'main'`).Scan(&s.RiverVersion)
		if err != nil {
			return s, fmt.Errorf("migration status: river version: %w", err)
		}
	}
	return s, nil
}

// LatestVersion is the highest docket migration embedded in this build.
func LatestVersion() int64 {
	return sources().latest
}

// SchemaFingerprint is a short hex digest of the embedded docket migrations
// and definitions and River's migration line: two builds with the same
// fingerprint create the same schema. Test helpers use it to name template
// databases.
func SchemaFingerprint() string {
	return sources().fingerprint
}

type sourceInfo struct {
	latest      int64
	versions    []int64 // in order
	fingerprint string
}

var sources = sync.OnceValue(func() sourceInfo {
	names, err := fs.Glob(schema.FS, "*.sql")
	if err != nil {
		panic(err) // the pattern is a constant
	}
	slices.Sort(names)
	h := sha256.New()
	var latest int64
	var info sourceInfo
	for _, name := range names {
		v, err := goose.NumericComponent(name)
		if err != nil {
			panic(fmt.Sprintf("embedded migration %s: %v", name, err))
		}
		latest = max(latest, v)
		info.versions = append(info.versions, v)
		f, err := schema.FS.Open(name)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(h, "%s\n", name)
		_, _ = io.Copy(h, f)
		_ = f.Close()
	}
	fmt.Fprintf(h, "definitions:%s\n", definitionsOfBuild().digest)
	fmt.Fprintf(h, "river:%d\n", riverLatest())
	info.latest, info.fingerprint = latest, hex.EncodeToString(h.Sum(nil))[:16]
	return info
})

var riverLatest = sync.OnceValue(func() int {
	m, err := riverMigrator(nil, slog.New(slog.DiscardHandler))
	if err != nil {
		panic(err)
	}
	all := m.AllVersions()
	return all[len(all)-1].Version
})

func riverMigrator(pool *pgxpool.Pool, logger *slog.Logger) (*rivermigrate.Migrator[pgx.Tx], error) {
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: Schema, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("migrate: river migrator: %w", err)
	}
	return m, nil
}

func withGoose(pool *pgxpool.Pool, logger *slog.Logger, fn func(*goose.Provider) error) error {
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, schema.FS,
		goose.WithTableName(gooseTable),
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(logger),
	)
	if err != nil {
		return fmt.Errorf("migrate: goose provider: %w", err)
	}
	return fn(p)
}

// withMigrateLock runs fn while holding the migration advisory lock on a
// connection opened for the purpose, so that migrators waiting for the lock
// never hold connections of pool that the lock holder needs.
func withMigrateLock(ctx context.Context, pool *pgxpool.Pool, fn func() error) (err error) {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("migrate: lock connection: %w", connectError(pool.Config().ConnConfig.Config, err))
	}
	defer func() {
		// Closing the session releases the lock even if the unlock fails.
		err = errors.Join(err, conn.Close(context.WithoutCancel(ctx)))
	}()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLockKey); err != nil {
		return fmt.Errorf("migrate: take lock: %w", err)
	}
	defer func() {
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrateLockKey); uerr != nil {
			err = errors.Join(err, fmt.Errorf("migrate: release lock: %w", uerr))
		}
	}()
	return fn()
}

// RiverLatestVersion is the highest River migration this build knows.
func RiverLatestVersion() int { return riverLatest() }
