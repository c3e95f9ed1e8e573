package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/internal/show"
	"github.com/docket-dev/docket/lanes"
)

// lanesShowJobs is how many of a lane's jobs lane show prints.
const lanesShowJobs = 50

func (c *cli) lanes(args []string) (dbAction, error) {
	sub, rest, err := c.sub("lane", args)
	if err != nil {
		return nil, err
	}
	fs := c.flags("lane " + sub)
	switch sub {
	case "list":
		quorum := fs.String("quorum", "", "only lanes of this quorum (its `NAME`)")
		state := fs.String("state", "", "only lanes in this execution `STATE`: "+show.JoinStates(lanes.States))
		review := fs.String("review", "", "only lanes with this `REVIEW` state: "+show.JoinStates(lanes.Reviews))
		limit := fs.Int("limit", 50, "at most `N` lanes, oldest first")
		after := fs.Int64("after", 0, "only lanes with a larger `ID` (the last id of the previous page)")
		format := outputFlag(fs)
		project, err := c.listArgs(fs, rest, limit, after)
		if err == nil {
			err = checkOneOf(fs, "state", *state, lanes.States)
		}
		if err == nil {
			err = checkOneOf(fs, "review", *review, lanes.Reviews)
		}
		if err != nil {
			return nil, err
		}
		f := lanes.Filter{Project: project, Quorum: *quorum, State: lanes.State(*state), Review: lanes.Review(*review),
			After: *after, Limit: *limit}
		return func(ctx context.Context, pool *pgxpool.Pool) error { return c.lanesList(ctx, pool, f, *format) }, nil
	case "show":
		format := outputFlag(fs)
		id, err := c.idArg(fs, rest, "lane")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error { return c.lanesShow(ctx, pool, id, *format) }, nil
	}
	return nil, usageOf(fs, "no such subcommand")
}

func (c *cli) laneClient(pool *pgxpool.Pool) (*lanes.Client, error) {
	return lanes.NewClient(pool, lanes.Config{Actor: c.actor, Clock: c.clock})
}

func (c *cli) lanesList(ctx context.Context, pool *pgxpool.Pool, f lanes.Filter, format string) error {
	cl, err := c.laneClient(pool)
	if err != nil {
		return err
	}
	list, err := cl.List(ctx, f)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		c.viewHint(ctx, pool, f.Project, "lane list")
	}
	if format == formatJSON {
		return writeSafeJSON(c.stdout, laneListDoc{Lanes: mapSlice(list, laneOf)})
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tQUORUM\tNAME\tBRANCH\tASSIGNEE\tSTATE\tREVIEW\tMERGED\tUPDATED AT")
	for _, l := range list {
		merged := "-"
		if l.Merged() {
			merged = shortCommit(l.MergeCommit)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.ID, l.Quorum, l.Name, l.Branch, l.Assignee, l.State,
			l.Review, merged, l.UpdatedAt.Format(time.RFC3339))
	}
	return w.Flush()
}

func (c *cli) lanesShow(ctx context.Context, pool *pgxpool.Pool, id int64, format string) error {
	cl, err := c.laneClient(pool)
	if err != nil {
		return err
	}
	l, err := cl.Get(ctx, id)
	if err != nil {
		return err
	}
	events, err := cl.History(ctx, id)
	if err != nil {
		return err
	}
	jobs, err := cl.Jobs(ctx, id, lanes.Page{Limit: lanesShowJobs + 1})
	if err != nil {
		return err
	}
	more := len(jobs) > lanesShowJobs
	if more {
		jobs = jobs[:lanesShowJobs]
	}
	if format == formatJSON {
		return writeSafeJSON(c.stdout, laneShowDoc{Lane: laneOf(l), History: mapSlice(events, laneEventOf),
			Jobs: mapSlice(jobs, laneJobOf), MoreJobs: more})
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "lane\t%d\n", l.ID)
	fmt.Fprintf(w, "name\t%s\n", l.Name)
	fmt.Fprintf(w, "project\t%s\n", l.Project)
	fmt.Fprintf(w, "quorum\t%s (%d), conductor %s\n", l.Quorum, l.QuorumID, l.Conductor)
	fmt.Fprintf(w, "branch\t%s\n", l.Branch)
	fmt.Fprintf(w, "assignee\t%s\n", l.Assignee)
	fmt.Fprintf(w, "task\t%s\n", l.Task)
	fmt.Fprintf(w, "state\t%s\n", l.State)
	fmt.Fprintf(w, "review\t%s\n", l.Review)
	if l.Merged() {
		fmt.Fprintf(w, "merged\tat commit %s, %s by %s\n", l.MergeCommit, l.MergedAt.Format(time.RFC3339Nano), l.MergedBy)
	} else {
		fmt.Fprintf(w, "merged\tno\n")
	}
	if len(l.DependsOn) > 0 {
		deps := make([]string, len(l.DependsOn))
		for i, d := range l.DependsOn {
			deps[i] = strconv.FormatInt(d, 10)
		}
		fmt.Fprintf(w, "depends on\t%s\n", strings.Join(deps, ", "))
	}
	fmt.Fprintf(w, "created\t%s by %s\n", l.CreatedAt.Format(time.RFC3339Nano), l.CreatedBy)
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(c.stdout)
	w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AT\tAXIS\tFROM\tTO\tACTOR\tDETAIL")
	for _, e := range events {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.At.Format(time.RFC3339Nano), e.Type, show.Dash(e.From), e.To, e.Actor, oneLine(e.Detail))
	}
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(c.stdout)
	if len(jobs) == 0 {
		fmt.Fprintln(c.stdout, "no jobs")
		return nil
	}
	w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tKIND\tQUEUE\tSTATE\tATTEMPTS\tUPDATED AT")
	for _, j := range jobs {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d/%d\t%s\n", j.ID, j.Kind, j.Queue, j.State, j.Attempts, j.MaxAttempts, j.UpdatedAt.Format(time.RFC3339))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(c.stdout, "first %d jobs shown; more with lanes.Client.Jobs or docket job list\n", lanesShowJobs)
	}
	return nil
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
