package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/jobs"
)

const jobUsage = "job needs a subcommand: list PROJECT, show ID, cancel ID, reconcile ID OUTCOME, sweep"

func (c *cli) job(args []string) (dbAction, error) {
	if len(args) == 0 {
		return nil, usagef(jobUsage)
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("job "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	switch sub {
	case "list":
		state := fs.String("state", "", "only jobs in this state")
		kind := fs.String("kind", "", "only jobs of this kind")
		queue := fs.String("queue", "", "only jobs of this queue")
		limit := fs.Int("limit", 50, "at most this many, newest first")
		project, err := listArgs(fs, rest, "job list", "job list needs PROJECT", limit, nil)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			cl, err := c.jobClient(pool, project)
			if err != nil {
				return err
			}
			list, err := cl.List(ctx, jobs.Filter{State: jobs.State(*state), Kind: *kind, Queue: *queue, Limit: *limit})
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tKIND\tQUEUE\tSTATE\tATTEMPTS\tAVAILABLE AT\tUPDATED AT")
			for _, j := range list {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, j.Kind, j.Queue, j.State, j.Attempts, j.MaxAttempts,
					j.AvailableAt.Format(time.RFC3339), j.UpdatedAt.Format(time.RFC3339))
			}
			return w.Flush()
		}, nil
	case "show":
		id, err := jobID(fs, rest, "job show needs ID")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error { return c.jobShow(ctx, pool, id) }, nil
	case "cancel":
		reason := fs.String("reason", "", "why, kept as the job's diagnostic")
		id, err := jobID(fs, rest, "job cancel needs ID")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			return c.jobChange(ctx, pool, id, func(cl *jobs.Client) (jobs.Job, error) {
				return cl.Cancel(ctx, id, *reason)
			})
		}, nil
	case "reconcile":
		note := fs.String("note", "", "what was found out, kept as the job's diagnostic")
		result := fs.String("result", "", "a JSON result, with outcome succeeded")
		if err := fs.Parse(rest); err != nil {
			return nil, usagef("job reconcile: %v", err)
		}
		if fs.NArg() != 2 {
			return nil, usagef("job reconcile needs ID and an outcome: succeeded, failed or queued")
		}
		id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
		if err != nil || id < 1 {
			return nil, usagef("job reconcile: %q is not a job id", fs.Arg(0))
		}
		outcome := jobs.Outcome(fs.Arg(1))
		if outcome != jobs.DidSucceed && outcome != jobs.DidFail && outcome != jobs.RunAgain {
			return nil, usagef("job reconcile: outcome %q: want succeeded, failed or queued", fs.Arg(1))
		}
		var res json.RawMessage
		if *result != "" {
			if !json.Valid([]byte(*result)) {
				return nil, usagef("job reconcile --result is not valid JSON")
			}
			res = json.RawMessage(*result)
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			return c.jobChange(ctx, pool, id, func(cl *jobs.Client) (jobs.Job, error) {
				return cl.Reconcile(ctx, id, outcome, res, *note)
			})
		}, nil
	case "sweep":
		limit := fs.Int("limit", 1000, "at most this many expired leases")
		if err := fs.Parse(rest); err != nil || fs.NArg() != 0 {
			return nil, usagef("job sweep takes only --limit N")
		}
		if *limit < 1 || *limit > jobs.MaxSweepBatch {
			return nil, usagef("job sweep --limit must be 1..%d", jobs.MaxSweepBatch)
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			cl, err := c.jobClient(pool, "")
			if err != nil {
				return err
			}
			moved, err := cl.ExpireLeases(ctx, *limit)
			if err != nil {
				return err
			}
			for _, j := range moved {
				fmt.Fprintf(c.stdout, "job %d is %s\n", j.ID, j.State)
			}
			fmt.Fprintf(c.stdout, "%d expired leases swept\n", len(moved))
			return nil
		}, nil
	}
	return nil, usagef("unknown job subcommand %q; %s", sub, jobUsage)
}

func (c *cli) jobClient(pool *pgxpool.Pool, project string) (*jobs.Client, error) {
	return jobs.NewClient(pool, jobs.Config{Project: project, Actor: c.actor, Clock: c.clock})
}

// jobChange runs change with a client of no project, which works by job id,
// and reports the state it left the job in.
func (c *cli) jobChange(ctx context.Context, pool *pgxpool.Pool, id int64, change func(*jobs.Client) (jobs.Job, error)) error {
	cl, err := c.jobClient(pool, "")
	if err != nil {
		return err
	}
	j, err := change(cl)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "job %d is %s\n", j.ID, j.State)
	return nil
}

func (c *cli) jobShow(ctx context.Context, pool *pgxpool.Pool, id int64) error {
	cl, err := c.jobClient(pool, "")
	if err != nil {
		return err
	}
	j, err := cl.Get(ctx, id)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "job\t%d\n", j.ID)
	fmt.Fprintf(w, "project\t%s\n", j.Project)
	fmt.Fprintf(w, "kind\t%s (payload schema %d)\n", j.Kind, j.PayloadSchema)
	fmt.Fprintf(w, "queue\t%s (priority %d)\n", j.Queue, j.Priority)
	fmt.Fprintf(w, "state\t%s\n", j.State)
	fmt.Fprintf(w, "attempts\t%d of %d\n", j.Attempts, j.MaxAttempts)
	fmt.Fprintf(w, "available at\t%s\n", j.AvailableAt.Format(time.RFC3339Nano))
	if j.State == jobs.Claimed {
		fmt.Fprintf(w, "held by\t%s until %s (lease generation %d)\n", j.ClaimedBy, j.LeaseExpiresAt.Format(time.RFC3339Nano), j.LeaseGeneration)
	}
	if j.IdempotencyKey != "" {
		fmt.Fprintf(w, "idempotency key\t%s\n", j.IdempotencyKey)
	}
	if j.Diagnostic != "" {
		fmt.Fprintf(w, "diagnostic\t%s\n", oneLine(j.Diagnostic))
	}
	fmt.Fprintf(w, "payload\t%s\n", j.Payload)
	if err := w.Flush(); err != nil {
		return err
	}
	events, err := cl.History(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout)
	w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SEQ\tAT\tFROM\tTO\tACTOR\tATTEMPT\tDETAIL")
	for _, e := range events {
		from := string(e.From)
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%s\n", e.Seq, e.At.Format(time.RFC3339Nano), from, e.To, e.Actor, e.Attempt, oneLine(e.Detail))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	v, err := cl.Verify(ctx, id)
	if err != nil {
		return err
	}
	if v.OK {
		fmt.Fprintf(c.stdout, "\nhistory verified: %d events, hash chain intact\n", v.Events)
		return nil
	}
	return fmt.Errorf("job %d: history does not verify at event %d: %s", id, v.BadSeq, v.Problem)
}

func oneArg(fs *flag.FlagSet, args []string, msg string) (string, error) {
	pos, err := positionals(fs, args)
	if err != nil {
		return "", usagef("%s: %v", msg, err)
	}
	if len(pos) != 1 || pos[0] == "" {
		return "", usagef("%s", msg)
	}
	return pos[0], nil
}

// positionals parses args with fs, its flags before, between or after the
// positional arguments, and returns the positional ones in order.
func positionals(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func jobID(fs *flag.FlagSet, args []string, msg string) (int64, error) {
	return idArg(fs, args, msg, "job")
}

// idArg parses the one positional argument as the id of a noun (job, lane,
// case); msg is the usage error when it is missing.
func idArg(fs *flag.FlagSet, args []string, msg, noun string) (int64, error) {
	s, err := oneArg(fs, args, msg)
	if err != nil {
		return 0, err
	}
	id, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil || id < 1 {
		return 0, usagef("%s: %q is not a %s id", msg, s, noun)
	}
	return id, nil
}
