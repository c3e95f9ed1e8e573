package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/show"
	"github.com/docket-dev/docket/jobs"
)

// jobOneOrBulk is job cancel and job retry: with ID, the one job (one);
// with --project and a filter instead, every job of the project matching
// it (bulk), counted first: without --yes only the count is printed and
// nothing changes. states are the states the bulk form takes.
func (c *cli) jobOneOrBulk(fs *flag.FlagSet, rest []string, verb string, states []jobs.State,
	one func(context.Context, *jobs.Client, int64) (jobs.Job, error),
	bulk func(ctx context.Context, cl *jobs.Client, f jobs.BulkFilter, count bool) (int64, error)) (dbAction, error) {
	project := fs.String("project", "", "act on every job of `PROJECT` matching the filter instead of one ID")
	state := fs.String("state", "", "with --project: only jobs in this `STATE`: "+show.JoinStates(states))
	kind := fs.String("kind", "", "with --project: only jobs of this `KIND`")
	queue := fs.String("queue", "", "with --project: only jobs of this `QUEUE`")
	since := fs.String("since", "", "with --project: only jobs created at or after `TIME` (RFC 3339)")
	until := fs.String("until", "", "with --project: only jobs created before `TIME` (RFC 3339)")
	yes := fs.Bool("yes", false, "with --project: act; without it the count is printed and nothing changes")
	pos, err := c.parse(fs, rest, "[ID]")
	if err != nil {
		return nil, err
	}
	if pos[0] != "" {
		if *project != "" || *state != "" || *kind != "" || *queue != "" || *since != "" || *until != "" || *yes {
			return nil, usageOf(fs, "give ID, or --project with a filter, not both")
		}
		id, err := positiveID(fs, "ID", pos[0], "job")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			return c.jobChange(ctx, pool, id, func(cl *jobs.Client) (jobs.Job, error) { return one(ctx, cl, id) })
		}, nil
	}
	if *project == "" {
		return nil, usageOf(fs, "missing ID, or --project PROJECT with a filter")
	}
	if err := checkOneOf(fs, "state", *state, states); err != nil {
		return nil, err
	}
	f := jobs.BulkFilter{State: jobs.State(*state), Kind: *kind, Queue: *queue}
	for _, t := range []struct {
		name, value string
		into        *time.Time
	}{{"since", *since, &f.Since}, {"until", *until, &f.Until}} {
		if t.value == "" {
			continue
		}
		if *t.into, err = time.Parse(time.RFC3339Nano, t.value); err != nil {
			return nil, usageOf(fs, "--%s %q: want an RFC 3339 instant, e.g. 2026-11-02T09:00:00Z", t.name, t.value)
		}
	}
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		cl, err := c.jobClient(pool, *project)
		if err != nil {
			return err
		}
		n, err := bulk(ctx, cl, f, true)
		if err != nil {
			return err
		}
		if !*yes {
			fmt.Fprintf(c.stdout, "%d jobs of project %s would be %s; run again with --yes to %s them\n", n, *project, pastOf(verb), verb)
			return nil
		}
		var total int64
		for {
			done, err := bulk(ctx, cl, f, false)
			total += done
			if err != nil {
				return err
			}
			if done < jobs.MaxBulk {
				break
			}
		}
		fmt.Fprintf(c.stdout, "%d jobs of project %s %s\n", total, *project, pastOf(verb))
		return nil
	}, nil
}

// pastOf is verb's past participle.
func pastOf(verb string) string {
	if verb == "retry" {
		return "retried"
	}
	return verb + "led"
}

// queueCmd is docket queue: pause, resume, list and show a project's queues.
func (c *cli) queueCmd(args []string) (dbAction, error) {
	sub, rest, err := c.sub("queue", args)
	if err != nil {
		return nil, err
	}
	fs := c.flags("queue " + sub)
	switch sub {
	case "pause", "resume":
		reason := fs.String("reason", "", "why, kept in the queue's history (`TEXT`)")
		pos, err := c.parse(fs, rest, "PROJECT", "QUEUE")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			cl, err := c.jobClient(pool, pos[0])
			if err != nil {
				return err
			}
			set := cl.ResumeQueue
			if sub == "pause" {
				set = cl.PauseQueue
			}
			q, err := set(ctx, pos[1], *reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "queue %s of project %s is %s\n", q.Name, q.Project, queueState(q))
			return nil
		}, nil
	case "list":
		format := outputFlag(fs)
		pos, err := c.parse(fs, rest, "PROJECT")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			cl, err := c.jobClient(pool, pos[0])
			if err != nil {
				return err
			}
			list, err := cl.Queues(ctx)
			if err != nil {
				return err
			}
			if len(list) == 0 {
				c.viewHint(ctx, pool, pos[0], "queue list")
			}
			if *format == formatJSON {
				return writeSafeJSON(c.stdout, queueListDoc{Project: pos[0], Queues: mapSlice(list, queueOf)})
			}
			w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "QUEUE\tSTATE\tSINCE\tBY\tREASON")
			for _, q := range list {
				since, by := "-", "-"
				if q.Paused {
					since, by = q.PausedAt.Format(time.RFC3339), string(q.PausedBy)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", q.Name, queueState(q), since, by, oneLine(q.Reason))
			}
			return w.Flush()
		}, nil
	case "show":
		format := outputFlag(fs)
		pos, err := c.parse(fs, rest, "PROJECT", "QUEUE")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			cl, err := c.jobClient(pool, pos[0])
			if err != nil {
				return err
			}
			list, err := cl.Queues(ctx)
			if err != nil {
				return err
			}
			q := jobs.Queue{Project: pos[0], Name: pos[1]}
			for _, x := range list {
				if x.Name == pos[1] {
					q = x
				}
			}
			h, err := cl.QueueHistory(ctx, pos[1])
			if err != nil {
				return err
			}
			if *format == formatJSON {
				return writeSafeJSON(c.stdout, queueShowDoc{Queue: queueOf(q), History: mapSlice(h, queueEventOf)})
			}
			w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "queue\t%s\n", q.Name)
			fmt.Fprintf(w, "project\t%s\n", q.Project)
			fmt.Fprintf(w, "state\t%s\n", queueState(q))
			if q.Paused {
				fmt.Fprintf(w, "paused by\t%s at %s\n", q.PausedBy, q.PausedAt.Format(time.RFC3339Nano))
				if q.Reason != "" {
					fmt.Fprintf(w, "reason\t%s\n", oneLine(q.Reason))
				}
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if len(h) == 0 {
				return nil
			}
			fmt.Fprintln(c.stdout)
			w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "REVISION\tAT\tWHAT\tACTOR\tREASON")
			for _, e := range h {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", e.Revision, e.At.Format(time.RFC3339Nano), e.What, e.Actor, oneLine(e.Reason))
			}
			return w.Flush()
		}, nil
	}
	return nil, usageOf(fs, "unknown subcommand %q", sub)
}

func queueState(q jobs.Queue) string {
	if q.Paused {
		return "paused"
	}
	return "running"
}

type (
	queueJSON struct {
		Project   string     `json:"project"`
		Queue     string     `json:"queue"`
		Paused    bool       `json:"paused"`
		Revision  int64      `json:"revision"`
		PausedBy  string     `json:"paused_by"`
		PausedAt  *time.Time `json:"paused_at"`
		Reason    string     `json:"reason"`
		UpdatedBy string     `json:"updated_by"`
		UpdatedAt *time.Time `json:"updated_at"`
	}
	queueEventJSON struct {
		Revision int64     `json:"revision"`
		What     string    `json:"what"`
		Actor    string    `json:"actor"`
		At       time.Time `json:"at"`
		Reason   string    `json:"reason"`
	}
	queueListDoc struct {
		Project string      `json:"project"`
		Queues  []queueJSON `json:"queues"`
	}
	queueShowDoc struct {
		Queue   queueJSON        `json:"queue"`
		History []queueEventJSON `json:"history"`
	}
)

func queueOf(q jobs.Queue) queueJSON {
	return queueJSON{Project: q.Project, Queue: q.Name, Paused: q.Paused, Revision: q.Revision, PausedBy: string(q.PausedBy),
		PausedAt: instant(q.PausedAt), Reason: q.Reason, UpdatedBy: string(q.UpdatedBy), UpdatedAt: instant(q.UpdatedAt)}
}

func queueEventOf(e jobs.QueueEvent) queueEventJSON {
	return queueEventJSON{Revision: e.Revision, What: e.What, Actor: string(e.Actor), At: e.At.UTC(), Reason: e.Reason}
}

// listReaders are, for each list command of a project, the capabilities
// that read what it lists, as docket's row-level security has them; the
// first is the one its hint names.
var listReaders = map[string][]access.Capability{
	"job list": {access.JobView, access.JobCreate, access.JobClaim, access.JobCancel, access.JobReconcile, access.JobPin,
		access.JobRetry},
	"queue list": {access.QueueView, access.QueuePause, access.JobView, access.JobCreate, access.JobClaim, access.JobCancel,
		access.JobReconcile, access.JobPin, access.JobRetry},
	"lane list":        {access.LaneView},
	"case list":        {access.CaseView, access.CaseAdmit},
	"wait list":        {access.CaseView, access.CaseAdmit, access.PlanRun},
	"dead-letter list": {access.CaseView, access.CaseAdmit, access.MessageDeliver},
	"schedule list":    {access.ScheduleView, access.ScheduleManage},
	"task list":        {access.TaskReview, access.CaseAdmit, access.CaseView},
	"plan list":        {access.PlanRun, access.BatchRun, access.CaseAdmit, access.CaseView},
	"batch list":       {access.BatchRun, access.CaseView},
}

// viewHint tells, on stderr, a listing of project by list command list
// that came back empty when the actor holds none of the capabilities that
// read it there: the grant to add. It says nothing when it cannot tell.
func (c *cli) viewHint(ctx context.Context, pool *pgxpool.Pool, project, list string) {
	readers := listReaders[list]
	if len(readers) == 0 {
		return
	}
	var holds bool
	err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM docket.grants g
		WHERE g.project = $1 AND g.principal = $2 AND g.capability = ANY ($3))`,
		project, string(c.actor), mapSlice(readers, access.Capability.String)).Scan(&holds)
	if err != nil || holds {
		return
	}
	fmt.Fprintf(c.stderr, "no %s grant on project %s for principal %s: grant it with docket grant %s %s %s\n",
		readers[0], project, c.actor, c.actor, project, readers[0])
}
