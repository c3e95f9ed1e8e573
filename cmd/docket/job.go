package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/show"
	"github.com/docket-dev/docket/jobs"
)

func (c *cli) job(args []string) (dbAction, error) {
	sub, rest, err := c.sub("job", args)
	if err != nil {
		return nil, err
	}
	fs := c.flags("job " + sub)
	switch sub {
	case "list":
		state := fs.String("state", "", "only jobs in this `STATE`: "+show.JoinStates(jobs.States))
		kind := fs.String("kind", "", "only jobs of this `KIND`")
		queue := fs.String("queue", "", "only jobs of this `QUEUE`")
		limit := fs.Int("limit", 50, "at most `N` jobs, newest first")
		unrunnable := fs.Bool("unrunnable", false, "only jobs pinned to handler revisions no deployment runs")
		format := outputFlag(fs)
		names, err := c.projectArgs(fs, rest)
		if err == nil {
			err = badLimit(fs, "limit", *limit, db.MaxPage)
		}
		if err == nil {
			err = checkOneOf(fs, "state", *state, jobs.States)
		}
		if err != nil {
			return nil, err
		}
		filter := jobs.Filter{State: jobs.State(*state), Kind: *kind, Queue: *queue, Limit: *limit, Unrunnable: *unrunnable}
		if len(c.cells) > 0 {
			return func(ctx context.Context, _ *pgxpool.Pool) error { return c.jobListCells(ctx, filter, names, *format) }, nil
		}
		project := names[0]
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			cl, err := c.jobClient(pool, project)
			if err != nil {
				return err
			}
			list, err := cl.List(ctx, filter)
			if err != nil {
				return err
			}
			if len(list) == 0 {
				c.viewHint(ctx, pool, project, "job list")
			}
			if *format == formatJSON {
				return writeSafeJSON(c.stdout, jobListDoc{Project: project, Jobs: mapSlice(list, jobOf)})
			}
			w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tKIND\tQUEUE\tSTATE\tATTEMPTS\tAVAILABLE AT\tUPDATED AT")
			for _, j := range list {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, j.Kind, j.Queue, j.State, j.Attempts, j.MaxAttempts,
					j.AvailableAt.Format(time.RFC3339), j.UpdatedAt.Format(time.RFC3339))
			}
			return w.Flush()
		}, nil
	case "census":
		perState := fs.Int("per-state", jobs.DefaultCensusPerState, "count at most `N` jobs of each state")
		format := outputFlag(fs)
		pos, err := c.projectArgs(fs, rest)
		if err == nil {
			err = badLimit(fs, "per-state", *perState, jobs.MaxCensusPerState)
		}
		if err != nil {
			return nil, err
		}
		if len(c.cells) > 0 {
			return func(ctx context.Context, _ *pgxpool.Pool) error {
				return c.jobCensusCells(ctx, *perState, pos, *format)
			}, nil
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			cl, err := c.jobClient(pool, pos[0])
			if err != nil {
				return err
			}
			census, err := cl.Census(ctx, *perState)
			if err != nil {
				return err
			}
			if *format == formatJSON {
				return writeSafeJSON(c.stdout, jobCensusDocOf(census))
			}
			return writeCensusText(c.stdout, census)
		}, nil
	case "show":
		format := outputFlag(fs)
		id, err := c.idArg(fs, rest, "job")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error { return c.jobShow(ctx, pool, id, *format) }, nil
	case "cancel":
		reason := fs.String("reason", "", "why, kept as the job's diagnostic (`TEXT`)")
		return c.jobOneOrBulk(fs, rest, "cancel", []jobs.State{jobs.Queued},
			func(ctx context.Context, cl *jobs.Client, id int64) (jobs.Job, error) {
				return cl.Cancel(ctx, id, *reason)
			},
			func(ctx context.Context, cl *jobs.Client, f jobs.BulkFilter, count bool) (int64, error) {
				if count {
					return cl.CountToCancel(ctx, f)
				}
				list, err := cl.CancelMatching(ctx, f, *reason)
				return int64(len(list)), err
			})
	case "retry":
		return c.jobOneOrBulk(fs, rest, "retry", []jobs.State{jobs.Failed, jobs.Dead, jobs.Cancelled},
			func(ctx context.Context, cl *jobs.Client, id int64) (jobs.Job, error) { return cl.Retry(ctx, id) },
			func(ctx context.Context, cl *jobs.Client, f jobs.BulkFilter, count bool) (int64, error) {
				if count {
					return cl.CountToRetry(ctx, f)
				}
				list, err := cl.RetryMatching(ctx, f)
				return int64(len(list)), err
			})
	case "reconcile":
		note := fs.String("note", "", "what was found out, kept as the job's diagnostic (`TEXT`)")
		result := fs.String("result", "", "the job's result, a `JSON` document, with outcome succeeded")
		pos, err := c.parse(fs, rest, "ID", "OUTCOME")
		if err != nil {
			return nil, err
		}
		id, err := positiveID(fs, "ID", pos[0], "job")
		if err != nil {
			return nil, err
		}
		outcome := jobs.Outcome(pos[1])
		if outcome != jobs.DidSucceed && outcome != jobs.DidFail && outcome != jobs.RunAgain {
			return nil, usageOf(fs, "OUTCOME %q: want succeeded, failed or queued", pos[1])
		}
		var res json.RawMessage
		if *result != "" {
			if !json.Valid([]byte(*result)) {
				return nil, usageOf(fs, "--result %q: not a JSON document", *result)
			}
			res = json.RawMessage(*result)
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			return c.jobChange(ctx, pool, id, func(cl *jobs.Client) (jobs.Job, error) {
				return cl.Reconcile(ctx, id, outcome, res, *note)
			})
		}, nil
	case "resume":
		effects := fs.Int64("effects", 0, "raise the effects ceiling to `N` (0: keep it)")
		money := fs.Int64("money", 0, "raise the money ceiling to `N` minor units (0: keep it)")
		id, err := c.idArg(fs, rest, "job")
		if err != nil {
			return nil, err
		}
		if *effects < 0 || *money < 0 {
			return nil, usageOf(fs, "a ceiling is a whole number of zero (keep) or more")
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			return c.jobChange(ctx, pool, id, func(cl *jobs.Client) (jobs.Job, error) {
				return cl.Resume(ctx, id, jobs.Ceilings{Effects: *effects, Money: *money})
			})
		}, nil
	case "pin":
		unpin := fs.Bool("unpin", false, "unpin the jobs: any revision may run them again")
		pos, err := c.parse(fs, rest, "ID[,ID...]", "[REVISION...]")
		if err != nil {
			return nil, err
		}
		ids, revisions, err := pinArgs(fs, pos[0], pos[1:], *unpin)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			cl, err := c.jobClient(pool, "")
			if err != nil {
				return err
			}
			pinned, err := cl.Pin(ctx, ids, revisions)
			if err != nil {
				return err
			}
			for _, j := range pinned {
				if j.Revisions == nil {
					fmt.Fprintf(c.stdout, "job %d is unpinned: any revision may run it\n", j.ID)
					continue
				}
				fmt.Fprintf(c.stdout, "job %d is pinned to revisions %s\n", j.ID, strings.Join(j.Revisions, ", "))
			}
			return nil
		}, nil
	case "sweep":
		limit := fs.Int("limit", 1000, "at most `N` expired leases")
		if _, err := c.parse(fs, rest); err != nil {
			return nil, err
		}
		if err := badLimit(fs, "limit", *limit, jobs.MaxSweepBatch); err != nil {
			return nil, err
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
	return nil, usageOf(fs, "no such subcommand")
}

// writeCensusText prints census as a table of queues by state, with the
// totals of each, and says which states reached the census's bound.
func writeCensusText(out io.Writer, census jobs.Census) error {
	var queues []string
	counts := map[string]map[jobs.State]int{"": {}} // by queue; "" the totals
	for _, cell := range census.Cells {
		if counts[cell.Queue] == nil {
			queues = append(queues, cell.Queue)
			counts[cell.Queue] = map[jobs.State]int{}
		}
		counts[cell.Queue][cell.State] += cell.Jobs
		counts[""][cell.State] += cell.Jobs
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprint(w, "QUEUE\t")
	for _, s := range jobs.States {
		fmt.Fprintf(w, "%s\t", strings.ToUpper(string(s)))
	}
	fmt.Fprintln(w, "TOTAL")
	row := func(name string, n map[jobs.State]int) {
		fmt.Fprintf(w, "%s\t", name)
		total := 0
		for _, s := range jobs.States {
			fmt.Fprintf(w, "%d\t", n[s])
			total += n[s]
		}
		fmt.Fprintf(w, "%d\n", total)
	}
	for _, q := range queues {
		row(show.Printable(q), counts[q])
	}
	row("all queues", counts[""])
	if err := w.Flush(); err != nil {
		return err
	}
	if len(census.Capped) > 0 {
		_, err := fmt.Fprintf(out, "The census counts at most %d jobs of each state: %s reached it, and may have more.\n",
			census.PerState, show.JoinStates(census.Capped))
		return err
	}
	return nil
}

// pinArgs checks the command line of job pin: the comma-separated job ids
// list, the revisions revs (none, or "" alone, with unpin).
func pinArgs(fs *flag.FlagSet, list string, revs []string, unpin bool) ([]int64, []string, error) {
	parts := strings.Split(list, ",")
	if len(parts) > jobs.MaxPinBatch {
		return nil, nil, usageOf(fs, "ID: %d jobs is over %d", len(parts), jobs.MaxPinBatch)
	}
	ids := make([]int64, 0, len(parts))
	for _, p := range parts {
		id, err := positiveID(fs, "ID", p, "job")
		if err != nil {
			return nil, nil, err
		}
		if slices.Contains(ids, id) {
			return nil, nil, usageOf(fs, "ID %d: named twice", id)
		}
		ids = append(ids, id)
	}
	if revs[0] == "" {
		revs = nil
	}
	switch {
	case unpin && len(revs) > 0:
		return nil, nil, usageOf(fs, "REVISION %q: --unpin takes none", revs[0])
	case unpin:
		return ids, nil, nil
	case len(revs) == 0:
		return nil, nil, usageOf(fs, "missing REVISION (or --unpin)")
	case len(revs) > jobs.MaxPinRevisions:
		return nil, nil, usageOf(fs, "REVISION: %d revisions is over %d", len(revs), jobs.MaxPinRevisions)
	}
	for _, r := range revs {
		if !jobs.ValidRevision(r) {
			return nil, nil, usageOf(fs, "REVISION %q: want 1-%d characters, none a space or a control character", r, jobs.MaxRevisionLen)
		}
	}
	return ids, revs, nil
}

func (c *cli) jobClient(pool *pgxpool.Pool, project string) (*jobs.Client, error) {
	return jobs.NewClient(pool, jobs.Config{Project: project, Actor: c.actor, Clock: c.clock, Replica: c.replicaPool()})
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

func (c *cli) jobShow(ctx context.Context, pool *pgxpool.Pool, id int64, format string) error {
	cl, err := c.jobClient(pool, "")
	if err != nil {
		return err
	}
	j, err := cl.Get(ctx, id)
	if err != nil {
		return err
	}
	events, err := cl.History(ctx, id)
	if err != nil {
		return err
	}
	v, err := cl.Verify(ctx, id)
	if err != nil {
		return err
	}
	retries, err := cl.Retries(ctx, id)
	if err != nil {
		return err
	}
	// A succeeded job's completion record, as its re-run plan reads it.
	var rec *jobs.RerunPlan
	if j.State == jobs.Succeeded {
		p, err := cl.RerunPlan(ctx, id)
		if err != nil {
			return err
		}
		rec = &p
	}
	if format == formatJSON {
		doc := jobShowDoc{Job: jobDetailOf(j), History: mapSlice(events, jobEventOf),
			Verification: verificationJSON{OK: v.OK, Events: v.Events, BadSeq: v.BadSeq, Problem: v.Problem},
			Completion:   completionOf(rec), Retries: nonNil(retries)}
		if err := writeSafeJSON(c.stdout, doc); err != nil {
			return err
		}
	} else if err := c.jobShowText(j, rec, events, v, retries); err != nil {
		return err
	}
	if v.OK {
		return nil
	}
	return fmt.Errorf("job %d: history does not verify at event %d: %s", id, v.BadSeq, v.Problem)
}

func (c *cli) jobShowText(j jobs.Job, rec *jobs.RerunPlan, events []jobs.Event, v jobs.Verification, retries []int64) error {
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
	if j.ClaimedRevision != "" {
		fmt.Fprintf(w, "claimed by revision\t%s\n", j.ClaimedRevision)
	}
	if j.Revisions != nil {
		fmt.Fprintf(w, "pinned to revisions\t%s\n", strings.Join(j.Revisions, ", "))
	}
	if j.IdempotencyKey != "" {
		fmt.Fprintf(w, "idempotency key\t%s\n", j.IdempotencyKey)
	}
	if j.RetryOf != 0 {
		fmt.Fprintf(w, "retry of\tjob %d\n", j.RetryOf)
	}
	if len(retries) > 0 {
		fmt.Fprintf(w, "retried by\t%s\n", strings.Trim(fmt.Sprint(retries), "[]"))
	}
	if j.Diagnostic != "" {
		fmt.Fprintf(w, "diagnostic\t%s\n", oneLine(j.Diagnostic))
	}
	fmt.Fprintf(w, "payload\t%s\n", j.Payload)
	if j.Output.Asset != "" {
		fmt.Fprintf(w, "requested output\t%s\n", show.JobOutput(j.Output))
	}
	switch {
	case rec == nil:
	case rec.Recorded:
		fmt.Fprintf(w, "produced\t%s, recorded by %s at %s\n", show.JobOutput(rec.Produced), rec.RecordedBy, rec.RecordedAt.Format(time.RFC3339Nano))
		if rec.Params != nil {
			fmt.Fprintf(w, "params used\t%s\n", rec.Params)
		}
		if len(rec.Inputs) > 0 {
			fmt.Fprintf(w, "inputs used\t%s\n", strings.Join(rec.Inputs, ", "))
		}
	default:
		fmt.Fprintf(w, "completion record\tnone: a re-run names the kind only\n")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout)
	w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SEQ\tAT\tFROM\tTO\tACTOR\tATTEMPT\tCLAIMED\tDETAIL")
	for _, e := range events {
		from := string(e.From)
		if from == "" {
			from = "-"
		}
		// One event per attempt: the event that ends one names its claim.
		claim := "-"
		if e.EndsAttempt() {
			claim = string(e.ClaimedBy) + " " + e.ClaimedAt.Format(time.RFC3339Nano)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", e.Seq, e.At.Format(time.RFC3339Nano), from, e.To, e.Actor, e.Attempt,
			claim, oneLine(e.Detail))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if v.OK {
		fmt.Fprintf(c.stdout, "\nhistory verified: %d events, hash chain intact\n", v.Events)
	}
	return nil
}

// idArg parses the one positional argument ID of the command fs is named
// for as the id of a noun (job, lane, case...).
func (c *cli) idArg(fs *flag.FlagSet, args []string, noun string) (int64, error) {
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return 0, err
	}
	return positiveID(fs, "ID", pos[0], noun)
}
