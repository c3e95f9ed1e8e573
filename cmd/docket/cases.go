package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/internal/show"
)

func (c *cli) cases(args []string) (dbAction, error) {
	sub, rest, err := c.sub("case", args)
	if err != nil {
		return nil, err
	}
	fs := c.flags("case " + sub)
	switch sub {
	case "list":
		status := fs.String("status", "", "only cases with this `STATUS`: "+show.JoinStates(cases.Statuses))
		limit := fs.Int("limit", 50, "at most `N` cases, oldest first")
		after := fs.Int64("after", 0, "only cases with a larger `ID` (the last id of the previous page)")
		format := outputFlag(fs)
		project, err := c.listArgs(fs, rest, limit, after)
		if err == nil {
			err = checkOneOf(fs, "status", *status, cases.Statuses)
		}
		if err != nil {
			return nil, err
		}
		f := cases.Filter{Project: project, Status: cases.Status(*status), After: *after, Limit: *limit}
		return func(ctx context.Context, pool *pgxpool.Pool) error { return c.casesList(ctx, pool, f, *format) }, nil
	case "show":
		format := outputFlag(fs)
		id, err := c.idArg(fs, rest, "case")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error { return c.casesShow(ctx, pool, id, *format) }, nil
	}
	return nil, usageOf(fs, "no such subcommand")
}

func (c *cli) caseClient(pool *pgxpool.Pool) (*cases.Client, error) {
	return cases.NewClient(pool, cases.Config{Actor: c.actor, Clock: c.clock, Replica: c.replicaPool()})
}

func (c *cli) casesList(ctx context.Context, pool *pgxpool.Pool, f cases.Filter, format string) error {
	cl, err := c.caseClient(pool)
	if err != nil {
		return err
	}
	list, err := cl.List(ctx, f)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		c.viewHint(ctx, pool, f.Project, "case list")
	}
	if format == formatJSON {
		return writeSafeJSON(c.stdout, caseListDoc{Cases: mapSlice(list, caseOf)})
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tKIND\tSTATUS\tVERSION\tCREATED AT\tUPDATED AT")
	for _, k := range list {
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\n", k.ID, k.Kind, k.Status, k.Version,
			k.CreatedAt.Format(time.RFC3339), k.UpdatedAt.Format(time.RFC3339))
	}
	return w.Flush()
}

func (c *cli) casesShow(ctx context.Context, pool *pgxpool.Pool, id int64, format string) error {
	cl, err := c.caseClient(pool)
	if err != nil {
		return err
	}
	k, err := cl.Get(ctx, id)
	if err != nil {
		return err
	}
	keys, err := cl.Keys(ctx, id)
	if err != nil {
		return err
	}
	obs, err := cl.Obligations(ctx, id)
	if err != nil {
		return err
	}
	events, err := cl.History(ctx, id)
	if err != nil {
		return err
	}
	if format == formatJSON {
		return writeSafeJSON(c.stdout, caseShowDoc{Case: caseOf(k), Keys: mapSlice(keys, keyClaimOf),
			Obligations: mapSlice(obs, obligationOf), History: mapSlice(events, caseEventOf)})
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "case\t%d\n", k.ID)
	fmt.Fprintf(w, "project\t%s\n", k.Project)
	fmt.Fprintf(w, "kind\t%s\n", k.Kind)
	fmt.Fprintf(w, "status\t%s\n", k.Status)
	fmt.Fprintf(w, "version\t%d\n", k.Version)
	fmt.Fprintf(w, "state\t%d bytes of JSON (untrusted; read it with the API)\n", len(k.State))
	fmt.Fprintf(w, "created\t%s by %s\n", k.CreatedAt.Format(time.RFC3339Nano), k.CreatedBy)
	if !k.ClosedAt.IsZero() {
		fmt.Fprintf(w, "closed\t%s\n", k.ClosedAt.Format(time.RFC3339Nano))
	}
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(c.stdout)
	w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tVALUE\tCLAIMED AT\tRELEASED AT")
	for _, kc := range keys {
		released := "held"
		if !kc.Held() {
			released = kc.ReleasedAt.Format(time.RFC3339Nano)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", kc.Namespace, kc.Value, kc.ClaimedAt.Format(time.RFC3339Nano), released)
	}
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(c.stdout)
	if len(obs) == 0 {
		fmt.Fprintln(c.stdout, "no obligations")
	} else {
		w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "OBLIGATION\tNAME\tSTATE\tDUE AT\tRULE\tESCALATION")
		for _, o := range obs {
			esc := "-"
			if o.Escalation != nil {
				esc = o.Escalation.Kind
				if o.EscalationJobID != 0 {
					esc += fmt.Sprintf(" (job %d)", o.EscalationJobID)
				}
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", o.ID, o.Name, o.State, o.Due.Format(time.RFC3339Nano), show.Dash(oneLine(o.Rule)), esc)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(c.stdout)
	w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AT\tWHAT\tFROM\tTO\tACTOR\tDETAIL")
	for _, e := range events {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.At.Format(time.RFC3339Nano), e.Type, show.Dash(e.From), show.Dash(e.To), e.Actor,
			show.Dash(oneLine(string(e.Detail))))
	}
	return w.Flush()
}
