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
// migrations (version table docket.goose_db_version). It is idempotent, and
// safe to call from several processes or goroutines at once: migrators queue
// on a Postgres advisory lock held on a connection of their own, outside pool.
//
// It refuses, with [ErrSchemaTooNew] and without changing anything, a database
// whose docket or River schema is at a version this build does not know.
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
		if err := status.tooNew(); err != nil {
			return err
		}
		river, err := riverMigrator(pool, cfg.logger)
		if err != nil {
			return err
		}
		if _, err := river.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return fmt.Errorf("migrate: river: %w", err)
		}
		return withGoose(pool, cfg.logger, func(p *goose.Provider) error {
			results, err := p.Up(ctx)
			if err != nil {
				return fmt.Errorf("migrate: docket: %w", err)
			}
			for _, r := range results {
				cfg.logger.InfoContext(ctx, "applied docket migration",
					"version", r.Source.Version, "duration", r.Duration)
			}
			return nil
		})
	})
}

// MigrateDownTo rolls docket's own migrations back until the database is at
// version (0 removes every docket table; River's tables stay). It takes the
// same lock as [Migrate]. It is for operators undoing a release; it refuses a
// version beyond what this build knows with [ErrInvalidArgument].
func MigrateDownTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	latest := LatestVersion()
	if version < 0 || version > latest {
		return Refuse(ErrInvalidArgument, "migrate.down",
			fmt.Sprintf("target version %d is outside 0..%d", version, latest))
	}
	return withMigrateLock(ctx, pool, func() error {
		return withGoose(pool, slog.New(slog.DiscardHandler), func(p *goose.Provider) error {
			if _, err := p.DownTo(ctx, version); err != nil {
				return fmt.Errorf("migrate down to %d: %w", version, err)
			}
			return nil
		})
	})
}

// Status is where a database stands against this build's migrations.
type Status struct {
	// Version is the highest docket migration applied (0: none).
	Version int64
	// Latest is the highest docket migration this build knows.
	Latest int64
	// RiverVersion is the highest River migration applied (0: none).
	RiverVersion int
	// RiverLatest is the highest River migration this build knows.
	RiverLatest int
}

// Current reports whether the database is exactly at this build's schema.
func (s Status) Current() bool {
	return s.Version == s.Latest && s.RiverVersion == s.RiverLatest
}

// Ahead reports whether the database has a docket or River migration this
// build does not know; [Migrate] refuses such a database.
func (s Status) Ahead() bool {
	return s.Version > s.Latest || s.RiverVersion > s.RiverLatest
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

// MigrationStatus reads which docket and River migrations the database has,
// on pool, without changing anything. A database docket has never touched is
// at 0, 0.
func MigrationStatus(ctx context.Context, pool Pool) (Status, error) {
	s := Status{Latest: LatestVersion(), RiverLatest: riverLatest()}
	var gooseExists, riverExists bool
	err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL`,
		gooseTable, Schema+".river_migration").Scan(&gooseExists, &riverExists)
	if err != nil {
		return s, fmt.Errorf("migration status: %w", err)
	}
	if gooseExists {
		// goose records a rollback by deleting the version's row.
		err := pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM `+gooseTable+` WHERE is_applied`).Scan(&s.Version)
		if err != nil {
			return s, fmt.Errorf("migration status: docket version: %w", err)
		}
	}
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
// and River's migration line: two builds with the same fingerprint create the
// same schema. Test helpers use it to name template databases.
func SchemaFingerprint() string {
	return sources().fingerprint
}

type sourceInfo struct {
	latest      int64
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
	for _, name := range names {
		v, err := goose.NumericComponent(name)
		if err != nil {
			panic(fmt.Sprintf("embedded migration %s: %v", name, err))
		}
		latest = max(latest, v)
		f, err := schema.FS.Open(name)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(h, "%s\n", name)
		_, _ = io.Copy(h, f)
		_ = f.Close()
	}
	fmt.Fprintf(h, "river:%d\n", riverLatest())
	return sourceInfo{latest: latest, fingerprint: hex.EncodeToString(h.Sum(nil))[:16]}
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
