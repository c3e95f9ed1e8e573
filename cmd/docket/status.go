package main

import (
	"context"
	"fmt"
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
