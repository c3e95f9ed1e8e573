package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/db"
)

func (c *cli) migrate(args []string) (dbAction, error) {
	if len(args) > 0 && args[0] == "down" {
		return c.migrateDown(args[1:])
	}
	if len(args) > 0 {
		return nil, usagef("migrate takes no arguments, or \"down --to N\"")
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
	fmt.Fprintf(c.stdout, "docket schema at version %d, River schema at version %d\n", s.Version, s.RiverVersion)
	return nil
}

func (c *cli) migrateDown(args []string) (dbAction, error) {
	fs := flag.NewFlagSet("migrate down", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	to := fs.Int64("to", -1, "target version")
	if err := fs.Parse(args); err != nil {
		return nil, usageErr{err}
	}
	if *to < 0 || fs.NArg() > 0 {
		return nil, usagef("migrate down needs --to N (0 removes every docket table)")
	}
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		if err := db.MigrateDownTo(ctx, pool, *to); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "docket schema at version %d\n", *to)
		return nil
	}, nil
}
