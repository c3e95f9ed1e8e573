package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/schedules"
)

const schedulesUsage = "schedules needs a subcommand: list PROJECT, preview ID | preview CRON ZONE"

func (c *cli) schedules(args []string) (dbAction, error) {
	if len(args) == 0 {
		return nil, usagef(schedulesUsage)
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("schedules "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	switch sub {
	case "list":
		limit := fs.Int("limit", 100, "at most this many, by name")
		after := fs.String("after", "", "only schedules whose name sorts after this one")
		project, err := listArgs(fs, rest, "schedules list", "schedules list needs PROJECT", limit, nil)
		if err != nil {
			return nil, err
		}
		f := schedules.Filter{Project: project, After: *after, Limit: *limit}
		return func(ctx context.Context, pool *pgxpool.Pool) error { return c.schedulesList(ctx, pool, f) }, nil
	case "preview":
		count := fs.Int("count", 10, "how many occurrences")
		from := fs.String("from", "", "occurrences after this instant (RFC 3339; default now), for CRON ZONE")
		pos, err := positionals(fs, rest)
		if err != nil {
			return nil, usagef("schedules preview: %v", err)
		}
		if *count < 1 || *count > schedules.MaxPreview {
			return nil, usagef("schedules preview --count must be 1..%d", schedules.MaxPreview)
		}
		switch len(pos) {
		case 1:
			id, err := idArg(fs, pos, "schedules preview needs ID", "schedule")
			if err != nil {
				return nil, err
			}
			n := *count
			return func(ctx context.Context, pool *pgxpool.Pool) error { return c.schedulesPreviewID(ctx, pool, id, n) }, nil
		case 2:
			after := c.clock.Now()
			if *from != "" {
				t, err := time.Parse(time.RFC3339, *from)
				if err != nil {
					return nil, usagef("schedules preview --from %q: want an RFC 3339 instant", *from)
				}
				after = t
			}
			occ, err := schedules.Preview(pos[0], pos[1], after, *count)
			if err != nil {
				return nil, err
			}
			return nil, c.printOccurrences(occ, pos[1])
		}
		return nil, usagef("schedules preview needs ID, or CRON ZONE")
	}
	return nil, usagef("unknown schedules subcommand %q; %s", sub, schedulesUsage)
}

func (c *cli) scheduleClient(pool *pgxpool.Pool) (*schedules.Client, error) {
	return schedules.NewClient(pool, schedules.Config{Actor: c.actor, Clock: c.clock})
}

func (c *cli) schedulesList(ctx context.Context, pool *pgxpool.Pool, f schedules.Filter) error {
	cl, err := c.scheduleClient(pool)
	if err != nil {
		return err
	}
	list, err := cl.List(ctx, f)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tCRON\tZONE\tSTATUS\tCATCH-UP\tRUNS\tNEXT DUE")
	for _, s := range list {
		next := "-"
		if !s.NextDue.IsZero() {
			next = s.NextDue.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.ID, s.Name, s.Cron, s.Zone, s.Status, s.CatchUp, s.Runs, next)
	}
	return w.Flush()
}

func (c *cli) schedulesPreviewID(ctx context.Context, pool *pgxpool.Pool, id int64, n int) error {
	cl, err := c.scheduleClient(pool)
	if err != nil {
		return err
	}
	s, err := cl.Get(ctx, id)
	if err != nil {
		return err
	}
	occ, err := cl.Preview(ctx, id, n)
	if err != nil {
		return err
	}
	return c.printOccurrences(occ, s.Zone)
}

func (c *cli) printOccurrences(occ []schedules.Occurrence, zone string) error {
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "LOCAL (%s)\tFOLD\tUTC\n", zone)
	for _, o := range occ {
		fmt.Fprintf(w, "%s\t%d\t%s\n", o.Local.Format("2006-01-02 15:04"), o.Fold, o.At.Format(time.RFC3339))
	}
	return w.Flush()
}
