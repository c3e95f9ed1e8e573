package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/internal/show"
)

// waits is the wait group: wait list.
func (c *cli) waits(args []string) (dbAction, error) {
	sub, rest, err := c.sub("wait", args)
	if err != nil {
		return nil, err
	}
	fs := c.flags("wait " + sub)
	if sub == "list" {
		return c.waitList(fs, rest)
	}
	return nil, usageOf(fs, "no such subcommand")
}

// waitList lists the waiting waits of a project, or every wait of one of
// its cases, soonest deadline first.
func (c *cli) waitList(fs *flag.FlagSet, args []string) (dbAction, error) {
	caseID := fs.Int64("case", 0, "every wait of this case (its `ID`), whatever its status")
	limit := fs.Int("limit", 50, "at most `N` waits, soonest deadline first")
	format := outputFlag(fs)
	project, err := c.listArgs(fs, args, limit, nil)
	if err != nil {
		return nil, err
	}
	byCase := false
	fs.Visit(func(f *flag.Flag) { byCase = byCase || f.Name == "case" })
	if byCase && *caseID < 1 {
		return nil, usageOf(fs, "--case %d: want a positive case id", *caseID)
	}
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		cl, err := c.caseClient(pool)
		if err != nil {
			return err
		}
		var list []cases.Wait
		if byCase {
			all, err := cl.Waits(ctx, *caseID)
			if err != nil {
				return err
			}
			for _, w := range all {
				if w.Project == project {
					list = append(list, w)
				}
			}
			slices.SortStableFunc(list, func(a, b cases.Wait) int {
				return cmp.Or(a.Deadline.Compare(b.Deadline), cmp.Compare(a.ID, b.ID))
			})
			list = list[:min(len(list), *limit)]
		} else {
			list, err = cl.Waiting(ctx, cases.WaitingFilter{Project: project, Limit: *limit})
			if err != nil {
				return err
			}
		}
		if len(list) == 0 {
			c.viewHint(ctx, pool, project, "wait list")
		}
		if *format == formatJSON {
			return writeSafeJSON(c.stdout, waitsDoc{Project: project, Waits: mapSlice(list, waitOf)})
		}
		return c.waitsTable(list)
	}, nil
}

func (c *cli) waitsTable(list []cases.Wait) error {
	now := c.clock.Now()
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tCASE\tNAME\tSTATUS\tKEYS\tDEADLINE\tLEFT\tON ARRIVAL\tON TIMEOUT")
	for _, x := range list {
		left := "-"
		if x.Status == cases.Waiting {
			left = show.TimeLeft(x.Deadline.Sub(now))
		}
		timeout := "-"
		if x.OnTimeout != nil {
			timeout = x.OnTimeout.Kind
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.ID, x.CaseID, x.Name, x.Status, show.Keys(x.Keys),
			x.Deadline.Format(time.RFC3339), left, x.OnArrival.Kind, timeout)
	}
	return w.Flush()
}

// deadLetters is the dead-letter group: dead-letter list.
func (c *cli) deadLetters(args []string) (dbAction, error) {
	sub, rest, err := c.sub("dead-letter", args)
	if err != nil {
		return nil, err
	}
	fs := c.flags("dead-letter " + sub)
	if sub == "list" {
		return c.deadLetterList(fs, rest)
	}
	return nil, usageOf(fs, "no such subcommand")
}

// deadLetterList lists the dead letters of a project, newest first: who
// sent each, the keys it was filed under and why no wait will claim it.
// Never the payload: it is the counterparty's.
func (c *cli) deadLetterList(fs *flag.FlagSet, args []string) (dbAction, error) {
	limit := fs.Int("limit", 50, "at most `N` dead letters, newest first")
	format := outputFlag(fs)
	project, err := c.listArgs(fs, args, limit, nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		cl, err := c.caseClient(pool)
		if err != nil {
			return err
		}
		list, err := cl.DeadLetters(ctx, cases.DeadLetterFilter{Project: project, Limit: *limit})
		if err != nil {
			return err
		}
		if len(list) == 0 {
			c.viewHint(ctx, pool, project, "dead-letter list")
		}
		if *format == formatJSON {
			return writeSafeJSON(c.stdout, deadLettersDoc{Project: project, DeadLetters: mapSlice(list, deadLetterOf)})
		}
		now := c.clock.Now()
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tPRODUCER\tMESSAGE ID\tKEYS\tADDRESSEE\tAGE\tREASON")
		for _, m := range list {
			addressee := "-"
			if m.Addressee != 0 {
				addressee = fmt.Sprint(m.Addressee)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Producer, m.MessageID, show.Keys(m.Keys), addressee,
				show.Span(now.Sub(m.ArrivedAt)), show.Dash(oneLine(m.Reason)))
		}
		return w.Flush()
	}, nil
}
