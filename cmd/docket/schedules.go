package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/schedules"
)

func (c *cli) schedules(args []string) (dbAction, error) {
	sub, rest, err := c.sub("schedule", args)
	if err != nil {
		return nil, err
	}
	fs := c.flags("schedule " + sub)
	switch sub {
	case "list":
		limit := fs.Int("limit", 100, "at most `N` schedules, by name")
		after := fs.String("after", "", "only schedules whose name sorts after this `NAME`")
		format := outputFlag(fs)
		project, err := c.listArgs(fs, rest, limit, nil)
		if err != nil {
			return nil, err
		}
		f := schedules.Filter{Project: project, After: *after, Limit: *limit}
		return func(ctx context.Context, pool *pgxpool.Pool) error { return c.schedulesList(ctx, pool, f, *format) }, nil
	case "preview":
		count := fs.Int("count", 10, "how many occurrences (`N`)")
		from := fs.String("from", "", "occurrences after this instant `T` (RFC 3339; default now), for CRON ZONE")
		format := outputFlag(fs)
		pos, err := c.parse(fs, rest, "ID|CRON", "[ZONE]")
		if err != nil {
			return nil, err
		}
		if err := badLimit(fs, "count", *count, schedules.MaxPreview); err != nil {
			return nil, err
		}
		if pos[1] == "" {
			id, err := positiveID(fs, "ID", pos[0], "schedule")
			if err != nil {
				return nil, err
			}
			n := *count
			return func(ctx context.Context, pool *pgxpool.Pool) error {
				return c.schedulesPreviewID(ctx, pool, id, n, *format)
			}, nil
		}
		after := c.clock.Now()
		if *from != "" {
			t, err := time.Parse(time.RFC3339, *from)
			if err != nil {
				return nil, usageOf(fs, "--from %q: want an RFC 3339 instant such as 2026-03-29T00:00:00Z", *from)
			}
			after = t
		}
		occ, err := schedules.Preview(pos[0], pos[1], after, *count)
		if err != nil {
			return nil, err
		}
		return nil, c.printOccurrences(occ, pos[1], *format)
	}
	return nil, usageOf(fs, "no such subcommand")
}

func (c *cli) scheduleClient(pool *pgxpool.Pool) (*schedules.Client, error) {
	return schedules.NewClient(pool, schedules.Config{Actor: c.actor, Clock: c.clock})
}

func (c *cli) schedulesList(ctx context.Context, pool *pgxpool.Pool, f schedules.Filter, format string) error {
	cl, err := c.scheduleClient(pool)
	if err != nil {
		return err
	}
	list, err := cl.List(ctx, f)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		c.viewHint(ctx, pool, f.Project, "schedule list")
	}
	if format == formatJSON {
		return writeSafeJSON(c.stdout, scheduleListDoc{Schedules: mapSlice(list, scheduleOf)})
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

func (c *cli) schedulesPreviewID(ctx context.Context, pool *pgxpool.Pool, id int64, n int, format string) error {
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
	return c.printOccurrences(occ, s.Zone, format)
}

func (c *cli) printOccurrences(occ []schedules.Occurrence, zone, format string) error {
	if format == formatJSON {
		return writeSafeJSON(c.stdout, previewDoc{Zone: zone, Occurrences: mapSlice(occ, occurrenceOf)})
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "LOCAL (%s)\tFOLD\tUTC\n", zone)
	for _, o := range occ {
		fmt.Fprintf(w, "%s\t%d\t%s\n", o.Local.Format("2006-01-02 15:04"), o.Fold, o.At.Format(time.RFC3339))
	}
	return w.Flush()
}
