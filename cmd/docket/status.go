package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/db"
)

func (c *cli) status(args []string) (dbAction, error) {
	if len(args) > 0 {
		return nil, usagef("status takes no arguments")
	}
	return c.printStatus, nil
}

func (c *cli) printStatus(ctx context.Context, pool *pgxpool.Pool) error {
	s, err := db.MigrationStatus(ctx, pool)
	if err != nil {
		return err
	}
	state := "current"
	switch {
	case s.Ahead():
		state = "newer than this build: upgrade docket"
	case !s.Current():
		state = "behind: run docket migrate"
	}
	fmt.Fprintf(c.stdout, "docket schema: version %d of %d\n", s.Version, s.Latest)
	fmt.Fprintf(c.stdout, "River schema:  version %d of %d\n", s.RiverVersion, s.RiverLatest)
	fmt.Fprintf(c.stdout, "state:         %s\n", state)
	if err := c.printRoles(ctx, pool); err != nil {
		return err
	}

	counts, err := tableCounts(ctx, pool)
	if err != nil {
		return err
	}
	if len(counts) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TABLE\tROWS")
	for _, tc := range counts {
		fmt.Fprintf(w, "%s.%s\t%d\n", db.Schema, tc.table, tc.rows)
	}
	return w.Flush()
}

type tableCount struct {
	table string
	rows  int64
}

// tableCounts counts the rows of every table in docket's schema, in one
// round trip.
func tableCounts(ctx context.Context, q *pgxpool.Pool) ([]tableCount, error) {
	rows, err := q.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename`, db.Schema)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	if len(tables) == 0 {
		return nil, nil
	}
	batch := &pgx.Batch{}
	for _, t := range tables {
		batch.Queue("SELECT count(*) FROM " + pgx.Identifier{db.Schema, t}.Sanitize())
	}
	results := q.SendBatch(ctx, batch)
	defer results.Close()
	out := make([]tableCount, len(tables))
	for i, t := range tables {
		out[i].table = t
		if err := results.QueryRow().Scan(&out[i].rows); err != nil {
			return nil, fmt.Errorf("count %s: %w", t, err)
		}
	}
	return out, nil
}

// groupRoles are the roles docket's trust model grants to login roles.
var groupRoles = []string{"docket_app", "docket_operator", "docket_reader"}

// printRoles says which of docket's group roles exist, and what a DBA runs
// for those that do not.
func (c *cli) printRoles(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, `SELECT r FROM unnest($1::text[]) r WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) ORDER BY r`, groupRoles)
	if err != nil {
		return fmt.Errorf("roles: %w", err)
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("roles: %w", err)
	}
	if len(missing) == 0 {
		fmt.Fprintf(c.stdout, "roles:         %s\n", strings.Join(groupRoles, ", "))
		return nil
	}
	fmt.Fprintf(c.stdout, "roles:         missing %s: a DBA runs", strings.Join(missing, ", "))
	for _, r := range missing {
		fmt.Fprintf(c.stdout, " CREATE ROLE %s NOLOGIN;", r)
	}
	fmt.Fprintln(c.stdout, " then, as the schema owner, SELECT docket.apply_privileges(); (docs/security.md)")
	return nil
}
