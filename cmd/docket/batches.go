package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/internal/show"
)

// batchesShowLimit is how many items needing attention batch show lists
// unless told.
const batchesShowLimit = 20

func (c *cli) batchesCmd(args []string) (dbAction, error) {
	sub, rest, err := c.sub("batch", args)
	if err != nil {
		return nil, err
	}
	fs := c.flags("batch " + sub)
	switch sub {
	case "list":
		limit := fs.Int("limit", 50, "at most `N` batches, by name")
		after := fs.String("after", "", "only batches whose name sorts after this `NAME` (the last name of the previous page)")
		format := outputFlag(fs)
		project, err := c.listArgs(fs, rest, limit, nil)
		if err != nil {
			return nil, err
		}
		f := batches.Filter{Project: project, After: *after, Limit: *limit}
		return func(ctx context.Context, pool *pgxpool.Pool) error { return c.batchesList(ctx, pool, f, *format) }, nil
	case "show":
		limit := fs.Int("limit", batchesShowLimit, "at most `N` items needing attention, oldest key first")
		after := fs.String("after", "", "only items whose key sorts after this `KEY` (the last key of the previous page)")
		format := outputFlag(fs)
		id, err := c.idArg(fs, rest, "batch")
		if err != nil {
			return nil, err
		}
		if err := badLimit(fs, "limit", *limit, batches.MaxPage); err != nil {
			return nil, err
		}
		return func(ctx context.Context, pool *pgxpool.Pool) error {
			v, err := c.readBatch(ctx, pool, id, *after, *limit)
			if err != nil {
				return err
			}
			if *format == formatJSON {
				return writeBatchJSON(c.stdout, v)
			}
			return writeBatchText(c.stdout, v)
		}, nil
	}
	return nil, usageOf(fs, "no such subcommand")
}

// batchesList prints a page of a project's batches, by name, with their
// census.
func (c *cli) batchesList(ctx context.Context, pool *pgxpool.Pool, f batches.Filter, format string) error {
	cl, err := batches.NewClient(pool, batches.Config{Actor: c.actor, Clock: c.clock})
	if err != nil {
		return err
	}
	list, err := cl.List(ctx, f)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		c.viewHint(ctx, pool, f.Project, "batch list")
	}
	if format == formatJSON {
		return writeSafeJSON(c.stdout, batchListDoc{Project: f.Project, Batches: mapSlice(list, func(r batches.Report) batchListJSON {
			return batchListJSON{batchJSON: batchJSONOf(r), Census: censusJSONOf(r)}
		})})
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BATCH\tNAME\tSTATUS\tITEMS\tIN FLIGHT\tSUCCEEDED\tFAILED\tQUARANTINED\tCURSOR")
	for _, r := range list {
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.ID, show.Printable(r.Name), r.Status, r.Items, r.InFlight,
			r.Succeeded, r.Failed, r.Quarantined, show.Dash(show.Printable(r.Cursor)))
	}
	return w.Flush()
}

// batchView is what batch show reads of a batch, from one snapshot.
type batchView struct {
	report batches.Report
	items  []batches.Admitted
	// more says items needing attention follow the page; next is the
	// command that lists them.
	more bool
	next string
}

// readBatch reads batch id and a page of its items needing attention in
// one read-only repeatable-read transaction, so that the census and the
// items agree. When the page is full, one probe past it says whether more
// follow.
func (c *cli) readBatch(ctx context.Context, pool *pgxpool.Pool, id int64, after string, limit int) (batchView, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return batchView{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	cl, err := batches.NewClient(tx, batches.Config{Actor: c.actor, Clock: c.clock})
	if err != nil {
		return batchView{}, err
	}
	var v batchView
	if v.report, err = cl.Get(ctx, id); err != nil {
		return batchView{}, err
	}
	if v.items, err = cl.NeedingAttention(ctx, id, after, limit); err != nil {
		return batchView{}, err
	}
	if len(v.items) == limit {
		last := v.items[len(v.items)-1].Key
		rest, err := cl.NeedingAttention(ctx, id, last, 1)
		if err != nil {
			return batchView{}, err
		}
		if v.more = len(rest) > 0; v.more {
			v.next = fmt.Sprintf("docket batch show %d --after %s", id, shellWord(last))
			if limit != batchesShowLimit {
				v.next += fmt.Sprintf(" --limit %d", limit)
			}
		}
	}
	return v, nil
}

// writeBatchText prints the batch, its census and the items needing
// attention.
func writeBatchText(out io.Writer, v batchView) error {
	r := v.report
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "batch\t%d\n", r.ID)
	fmt.Fprintf(w, "project\t%s\n", r.Project)
	fmt.Fprintf(w, "name\t%s\n", show.Printable(r.Name))
	fmt.Fprintf(w, "status\t%s\n", r.Status)
	fmt.Fprintf(w, "plan\t%s\n", shortDigest(r.Digest))
	fmt.Fprintf(w, "digest\t%s\n", r.Digest)
	source := "not read to its end"
	if r.SourceDone {
		source = "read to its end"
	}
	fmt.Fprintf(w, "source\t%s\n", source)
	fmt.Fprintf(w, "last key\t%s\n", show.Dash(show.Printable(r.LastKey)))
	fmt.Fprintf(w, "cursor\t%s\n", show.Dash(show.Printable(r.Cursor)))
	fmt.Fprintf(w, "created\t%s by %s\n", r.CreatedAt.Format(time.RFC3339Nano), r.CreatedBy)
	finished := "-"
	if r.FinishedAt != nil {
		finished = r.FinishedAt.UTC().Format(time.RFC3339Nano)
	}
	fmt.Fprintf(w, "finished\t%s\n", finished)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "items\t%d\n", r.Items)
	fmt.Fprintf(w, "in flight\t%d\n", r.InFlight)
	fmt.Fprintf(w, "exhausted\t%d\n", r.Exhausted)
	fmt.Fprintf(w, "succeeded\t%d\n", r.Succeeded)
	fmt.Fprintf(w, "failed\t%d\n", r.Failed)
	fmt.Fprintf(w, "quarantined\t%d\n", r.Quarantined)
	if err := w.Flush(); err != nil {
		return err
	}
	attention := "no"
	if r.NeedsAttention() {
		attention = "yes"
	}
	fmt.Fprintf(out, "needs attention: %s\n\n", attention)

	if len(v.items) == 0 {
		_, err := fmt.Fprintln(out, "no item is failed, quarantined or in flight")
		return err
	}
	fmt.Fprintln(out, "items failed, quarantined or in flight, oldest key first:")
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tSTATUS\tRUN\tREASON")
	for _, it := range v.items {
		run := "-"
		if it.RunID != 0 {
			run = fmt.Sprint(it.RunID)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", show.Printable(it.Key), it.Status, run, show.Dash(show.Printable(it.Reason)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if v.more {
		_, err := fmt.Fprintf(out, "… and more: %s\n", v.next)
		return err
	}
	return nil
}

// shellWord is s as one word of a POSIX shell command line: itself when
// plain, else single-quoted, else, when it holds characters a terminal
// would act on or that printable would replace, as a $'…' word with them
// escaped.
func shellWord(s string) string {
	plain := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.,:/@%+=", r)) {
			plain = false
			break
		}
	}
	switch {
	case plain:
		return s
	case show.Printable(s) == s:
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for _, r := range s {
		switch {
		case r == '\'' || r == '\\':
			b.WriteString(`\` + string(r))
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || unicode.IsSpace(r) && r != ' ':
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString("'")
	return b.String()
}

// The JSON documents of batch list and batch show.
type (
	batchListDoc struct {
		Project string          `json:"project"`
		Batches []batchListJSON `json:"batches"`
	}
	// batchListJSON is a batch of a list: batch show's batch, with its
	// census beside its fields.
	batchListJSON struct {
		batchJSON
		Census censusJSON `json:"census"`
	}
	batchDoc struct {
		Batch  batchJSON  `json:"batch"`
		Census censusJSON `json:"census"`
		// Items are the page of items failed, quarantined or in flight,
		// oldest key first; More says others follow, from after the last.
		Items []itemJSON `json:"items"`
		More  bool       `json:"more"`
	}
	batchJSON struct {
		ID         int64          `json:"id"`
		Project    string         `json:"project"`
		Name       string         `json:"name"`
		Digest     string         `json:"digest"`
		Status     batches.Status `json:"status"`
		SourceDone bool           `json:"source_done"`
		LastKey    string         `json:"last_key"`
		Cursor     string         `json:"cursor"`
		CreatedBy  access.Actor   `json:"created_by"`
		CreatedAt  time.Time      `json:"created_at"`
		FinishedAt *time.Time     `json:"finished_at"`
	}
	censusJSON struct {
		Items          int  `json:"items"`
		InFlight       int  `json:"in_flight"`
		Exhausted      int  `json:"exhausted"`
		Succeeded      int  `json:"succeeded"`
		Failed         int  `json:"failed"`
		Quarantined    int  `json:"quarantined"`
		NeedsAttention bool `json:"needs_attention"`
	}
	itemJSON struct {
		Key        string             `json:"key"`
		Status     batches.ItemStatus `json:"status"`
		RunID      int64              `json:"run_id"`
		Trusted    bool               `json:"trusted"`
		Reason     string             `json:"reason"`
		AdmittedAt time.Time          `json:"admitted_at"`
		SettledAt  *time.Time         `json:"settled_at"`
	}
)

// writeBatchJSON prints v as one indented JSON document (see
// writeSafeJSON).
func writeBatchJSON(out io.Writer, v batchView) error {
	doc := batchDoc{
		Batch:  batchJSONOf(v.report),
		Census: censusJSONOf(v.report),
		Items:  make([]itemJSON, len(v.items)),
		More:   v.more,
	}
	for i, it := range v.items {
		doc.Items[i] = itemJSON{Key: it.Key, Status: it.Status, RunID: it.RunID, Trusted: it.Trusted, Reason: it.Reason,
			AdmittedAt: it.AdmittedAt, SettledAt: utcPtr(it.SettledAt)}
	}
	return writeSafeJSON(out, doc)
}

// batchJSONOf is batch r as batch list and batch show print it.
func batchJSONOf(r batches.Report) batchJSON {
	return batchJSON{ID: r.ID, Project: r.Project, Name: r.Name, Digest: r.Digest, Status: r.Status, SourceDone: r.SourceDone,
		LastKey: r.LastKey, Cursor: r.Cursor, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, FinishedAt: utcPtr(r.FinishedAt)}
}

// censusJSONOf is batch r's census as batch list and batch show print
// it.
func censusJSONOf(r batches.Report) censusJSON {
	return censusJSON{Items: r.Items, InFlight: r.InFlight, Exhausted: r.Exhausted, Succeeded: r.Succeeded, Failed: r.Failed,
		Quarantined: r.Quarantined, NeedsAttention: r.NeedsAttention()}
}
