package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/internal/show"
	"github.com/docket-dev/docket/tasks"
)

// taskList lists a project's worklist as the actor sees it: the tasks it
// may take now and those it holds, soonest deadline first.
func (c *cli) taskList(fs *flag.FlagSet, args []string) (dbAction, error) {
	mine := fs.Bool("mine", false, "only the tasks you hold")
	limit := fs.Int("limit", 100, "at most `N` tasks, soonest deadline first")
	format := outputFlag(fs)
	project, err := c.listArgs(fs, args, limit, nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		cl, err := c.taskClient(pool)
		if err != nil {
			return err
		}
		list, err := cl.Worklist(ctx, project, *mine, tasks.Page{Limit: *limit})
		if err != nil {
			return err
		}
		if len(list) == 0 {
			c.viewHint(ctx, pool, project, "task list")
		}
		now := c.clock.Now()
		if *format == formatJSON {
			return writeSafeJSON(c.stdout, taskListDoc{Project: project,
				Tasks: mapSlice(list, func(t tasks.Task) taskJSON { return taskOf(t, now) })})
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tTITLE\tSTATUS\tDEADLINE\tCLAIMED BY")
		for _, t := range list {
			holder := "-"
			if liveClaim(t, now) {
				holder = string(t.Claim.Holder)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", t.ID, show.Printable(t.Title), t.Status, t.Deadline.Format(time.RFC3339), holder)
		}
		return w.Flush()
	}, nil
}

// taskCmd is the task group: task list, task show.
func (c *cli) taskCmd(args []string) (dbAction, error) {
	sub, rest, err := c.sub("task", args)
	if err != nil {
		return nil, err
	}
	fs := c.flags("task " + sub)
	switch sub {
	case "list":
		return c.taskList(fs, rest)
	case "show":
		format := outputFlag(fs)
		id, err := c.idArg(fs, rest, "task")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error { return c.taskShow(ctx, pool, id, *format) }, nil
	}
	return nil, usageOf(fs, "no such subcommand")
}

func (c *cli) taskClient(pool *pgxpool.Pool) (*tasks.Client, error) {
	return tasks.NewClient(pool, tasks.Config{Actor: c.actor, Clock: c.clock})
}

// taskShow prints a task's fields, then its history.
func (c *cli) taskShow(ctx context.Context, pool *pgxpool.Pool, id int64, format string) error {
	cl, err := c.taskClient(pool)
	if err != nil {
		return err
	}
	t, err := cl.Get(ctx, id)
	if err != nil {
		return err
	}
	events, err := cl.History(ctx, id)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	if format == formatJSON {
		return writeSafeJSON(c.stdout, taskShowDoc{Task: taskDetailOf(t, now), History: mapSlice(events, taskEventOf)})
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "task\t%d\n", t.ID)
	fmt.Fprintf(w, "project\t%s\n", t.Project)
	fmt.Fprintf(w, "case\t%d (key %s)\n", t.CaseID, show.Printable(t.Key))
	fmt.Fprintf(w, "title\t%s\n", show.Printable(t.Title))
	fmt.Fprintf(w, "status\t%s\n", t.Status)
	deadline := t.Deadline.Format(time.RFC3339Nano)
	if t.Pending() {
		deadline += " (" + show.DueIn(t.Deadline.Sub(now)) + ")"
	}
	fmt.Fprintf(w, "deadline\t%s\n", deadline)
	fmt.Fprintf(w, "at the deadline\t%s\n", show.Expiry(t))
	fmt.Fprintf(w, "decisions\t%s\n", strings.Join(t.Decisions, ", "))
	fmt.Fprintf(w, "audience\t%s\n", show.Audience(t))
	fmt.Fprintf(w, "proposer\t%s\n", t.Proposer)
	fmt.Fprintf(w, "acting for\t%s\n", show.Dash(show.JoinStates(t.ActingFor)))
	fmt.Fprintf(w, "may not answer\t%s (four eyes)\n", show.Dash(show.JoinStates(t.Excluded)))
	claim := "-"
	if liveClaim(t, now) {
		claim = fmt.Sprintf("%s until %s", t.Claim.Holder, t.Claim.Until.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(w, "claimed by\t%s\n", claim)
	switch t.Status {
	case tasks.Decided:
		how := ""
		if t.Automatic {
			how = fmt.Sprintf(", automatically, as its opening by %s signed", t.OpenedBy)
		}
		fmt.Fprintf(w, "decided\t%s by %s at %s%s\n", t.Decision, t.DecidedBy, t.SettledAt.UTC().Format(time.RFC3339Nano), how)
		fmt.Fprintf(w, "note\t%s\n", show.Dash(show.Printable(t.Note)))
	case tasks.Withdrawn:
		fmt.Fprintf(w, "withdrawn\t%s (its case closed)\n", t.SettledAt.UTC().Format(time.RFC3339Nano))
	}
	fmt.Fprintf(w, "opened\t%s by %s\n", t.OpenedAt.Format(time.RFC3339Nano), t.OpenedBy)
	fmt.Fprintf(w, "summary\t%s\n", show.Dash(show.Printable(t.Summary)))
	fmt.Fprintf(w, "proposal\t%s\n", show.Printable(string(t.Proposal)))
	fmt.Fprintf(w, "evidence\t%s\n", show.Printable(string(t.Evidence)))
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(c.stdout)
	w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AT\tWHAT\tACTOR\tDETAIL")
	for _, e := range events {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.At.Format(time.RFC3339Nano), e.What, e.Actor, show.Dash(show.Printable(show.CompactJSON(e.Detail))))
	}
	return w.Flush()
}
