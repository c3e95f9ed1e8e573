package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/show"
)

func (c *cli) status(args []string) (dbAction, error) {
	c.needsSchema = false
	fs := c.flags("status")
	check := fs.Bool("check", false, "print only the versions and definitions; exit 3 when a migration is pending or the definitions differ")
	format := outputFlag(fs)
	if _, err := c.parse(fs, args); err != nil {
		return nil, err
	}
	return func(ctx context.Context, pool *pgxpool.Pool) error { return c.printStatus(ctx, pool, *check, *format) }, nil
}

func (c *cli) printStatus(ctx context.Context, pool *pgxpool.Pool, check bool, format string) error {
	s, err := db.MigrationStatus(ctx, pool)
	if err != nil {
		return err
	}
	todo := pending(s)
	doc := statusDoc{Docket: versionPair{s.Version, s.Latest}, River: versionPair{int64(s.RiverVersion), int64(s.RiverLatest)},
		State: "current", Pending: make([]migrationJSON, len(todo)),
		Definitions: definitionsJSON{Applied: s.Definitions, Latest: s.DefinitionsLatest, Changes: []definitionChangeJSON{}}}
	for i, m := range todo {
		doc.Pending[i] = migrationJSON{Line: strings.ToLower(m.line), Version: m.version, Name: m.name}
	}
	for _, ch := range s.DefinitionChanges {
		doc.Definitions.Changes = append(doc.Definitions.Changes, definitionChangeJSON{File: ch.File, Change: ch.Change})
	}
	state := "current"
	switch {
	case s.Ahead():
		doc.State, state = "ahead", "newer than this build: upgrade docket"
	case len(todo) > 0 || s.Baseline || s.Version < s.Latest || s.RiverVersion < s.RiverLatest:
		doc.State, state = "behind", "behind: run docket migrate"
	case !s.Current():
		doc.State, state = "differs", "the definitions differ from this build's: docket migrate applies this build's"
	}
	var behind error
	if check && (len(todo) > 0 || s.Baseline || len(s.DefinitionChanges) > 0) {
		var reasons []string
		if len(todo) > 0 {
			// The list is on stdout: the error says how many.
			reasons = append(reasons, count(len(todo), "migration")+" pending")
		}
		if s.Baseline {
			reasons = append(reasons, fmt.Sprintf("docket migrations %d-%d to record as applied", s.Version+1, s.Latest))
		}
		switch {
		case s.Definitions == "":
			reasons = append(reasons, "definitions not applied")
		case len(s.DefinitionChanges) > 0:
			reasons = append(reasons, "definitions differ ("+count(len(s.DefinitionChanges), "change")+")")
		}
		behind = codeErr{exitBehind, fmt.Errorf("%s; run \"docket migrate\"", strings.Join(reasons, "; "))}
	}
	if !check {
		missing, err := missingRoles(ctx, pool)
		if err != nil {
			return err
		}
		counts, err := tableCounts(ctx, pool)
		if err != nil {
			return err
		}
		doc.Roles = &rolesJSON{Present: []string{}, Missing: strings0(missing)}
		for _, r := range groupRoles {
			if !slices.Contains(missing, r) {
				doc.Roles.Present = append(doc.Roles.Present, r)
			}
		}
		doc.Tables = make([]tableJSON, len(counts))
		for i, tc := range counts {
			doc.Tables[i] = tableJSON{Table: db.Schema + "." + tc.table, Rows: tc.rows}
		}
		if doc.BrokenSchedules, err = brokenSchedules(ctx, pool); err != nil {
			return err
		}
		if doc.PausedQueues, err = pausedQueues(ctx, pool); err != nil {
			return err
		}
	}
	if format == formatJSON {
		if err := writeSafeJSON(c.stdout, doc); err != nil {
			return err
		}
		return behind
	}
	fmt.Fprintf(c.stdout, "docket schema: version %d of %d\n", s.Version, s.Latest)
	fmt.Fprintf(c.stdout, "River schema:  version %d of %d\n", s.RiverVersion, s.RiverLatest)
	switch {
	case len(s.DefinitionChanges) == 0:
		fmt.Fprintf(c.stdout, "definitions:   %s, this build's\n", s.Definitions)
	case s.Definitions == "":
		fmt.Fprintf(c.stdout, "definitions:   none; this build's are %s\n", s.DefinitionsLatest)
	default:
		fmt.Fprintf(c.stdout, "definitions:   %s; this build's are %s\n", s.Definitions, s.DefinitionsLatest)
	}
	fmt.Fprintf(c.stdout, "state:         %s\n", state)
	if check {
		for _, m := range todo {
			fmt.Fprintf(c.stdout, "pending:       %s\n", m)
		}
		if s.Definitions != "" {
			for _, ch := range s.DefinitionChanges {
				fmt.Fprintf(c.stdout, "differs:       %s\n", ch)
			}
		}
		return behind
	}
	c.printRoles(doc.Roles.Missing)
	if err := c.printBroken(doc.BrokenSchedules); err != nil {
		return err
	}
	if err := c.printPaused(doc.PausedQueues); err != nil {
		return err
	}
	if len(doc.Tables) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TABLE\tROWS")
	for _, tc := range doc.Tables {
		fmt.Fprintf(w, "%s\t%d\n", tc.Table, tc.Rows)
	}
	return w.Flush()
}

type tableCount struct {
	table string
	rows  int64
}

// tableCounts counts the rows of every table in docket's schema the login
// may read (those its row-level security lets it see), in one round trip.
func tableCounts(ctx context.Context, q *pgxpool.Pool) ([]tableCount, error) {
	rows, err := q.Query(ctx, `SELECT tablename FROM pg_tables
		WHERE schemaname = $1 AND has_table_privilege(format('%I.%I', schemaname, tablename), 'SELECT')
		ORDER BY tablename`, db.Schema)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	if len(tables) == 0 {
		return nil, nil
	}
	batch := &pgx.Batch{}
	for _, t := range tables {
		batch.Queue("SELECT count(*) FROM " + pgx.Identifier{db.Schema, t}.Sanitize())
	}
	results := q.SendBatch(ctx, batch)
	defer results.Close()
	out := make([]tableCount, len(tables))
	for i, t := range tables {
		out[i].table = t
		if err := results.QueryRow().Scan(&out[i].rows); err != nil {
			return nil, fmt.Errorf("count %s: %w", t, err)
		}
	}
	return out, nil
}

// groupRoles are the roles docket's trust model grants to login roles.
var groupRoles = []string{"docket_app", "docket_operator", "docket_reader", "docket_worker", "docket_clock"}

// missingRoles lists which of docket's group roles do not exist.
func missingRoles(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT r FROM unnest($1::text[]) r WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) ORDER BY r`, groupRoles)
	if err != nil {
		return nil, fmt.Errorf("roles: %w", err)
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("roles: %w", err)
	}
	return missing, nil
}

// printRoles says which of docket's group roles exist, and what a DBA runs
// for those missing.
func (c *cli) printRoles(missing []string) {
	if len(missing) == 0 {
		fmt.Fprintf(c.stdout, "roles:         %s\n", strings.Join(groupRoles, ", "))
		return
	}
	fmt.Fprintf(c.stdout, "roles:         missing %s: a DBA runs", strings.Join(missing, ", "))
	for _, r := range missing {
		fmt.Fprintf(c.stdout, " CREATE ROLE %s NOLOGIN;", r)
	}
	fmt.Fprintln(c.stdout, " then, as the schema owner, SELECT docket.apply_privileges(); (docs/security.md)")
}

// joinChanges lists definition changes in one line: "jobs.sql (changed),
// waits.sql (added)".
func joinChanges(changes []db.DefinitionChange) string {
	out := make([]string, len(changes))
	for i, ch := range changes {
		out[i] = ch.String()
	}
	return strings.Join(out, ", ")
}

// statusMaxBroken is the most broken schedules docket status lists.
const statusMaxBroken = 100

// brokenSchedules reads the broken schedules the login may see from the
// operators' view, soonest broken first: none where the view is not there
// (a database behind this build) or the login may not read it.
func brokenSchedules(ctx context.Context, pool *pgxpool.Pool) ([]brokenScheduleJSON, error) {
	out := []brokenScheduleJSON{}
	var readable bool
	err := pool.QueryRow(ctx, `SELECT coalesce(has_table_privilege(to_regclass($1), 'SELECT'), false)`,
		db.Schema+".schedules_broken").Scan(&readable)
	if err != nil || !readable {
		return out, db.Translate(err, "status.schedules")
	}
	rows, err := pool.Query(ctx, `SELECT id, project, name, broken_at, broken_reason FROM docket.schedules_broken
		ORDER BY broken_at, id LIMIT $1`, statusMaxBroken)
	if err != nil {
		return nil, db.Translate(err, "status.schedules")
	}
	for rows.Next() {
		var b brokenScheduleJSON
		if err := rows.Scan(&b.ID, &b.Project, &b.Name, &b.BrokenAt, &b.Reason); err != nil {
			rows.Close()
			return nil, db.Translate(err, "status.schedules")
		}
		b.BrokenAt = b.BrokenAt.UTC()
		out = append(out, b)
	}
	return out, db.Translate(rows.Err(), "status.schedules")
}

// printBroken lists the broken schedules, or says there are none.
func (c *cli) printBroken(broken []brokenScheduleJSON) error {
	if len(broken) == 0 {
		fmt.Fprintln(c.stdout, "schedules:     none broken")
		return nil
	}
	more := ""
	if len(broken) == statusMaxBroken {
		more = fmt.Sprintf(" (the first %d; docket.schedules_broken has them all)", statusMaxBroken)
	}
	fmt.Fprintf(c.stdout, "schedules:     %s the sweep passes over until an update or a resume mends them%s\n",
		count(len(broken), "broken schedule"), more)
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  SCHEDULE\tPROJECT\tNAME\tBROKEN AT\tREASON")
	for _, b := range broken {
		fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%s\n", b.ID, b.Project, show.Printable(b.Name), b.BrokenAt.Format(time.RFC3339), show.Printable(b.Reason))
	}
	return w.Flush()
}

// pausedQueues reads the paused queues the login may see
// (docket.queues_paused), by project and name: none where the view is not
// there (a database behind this build) or the login may not read it.
func pausedQueues(ctx context.Context, pool *pgxpool.Pool) ([]pausedQueueJSON, error) {
	out := []pausedQueueJSON{}
	var readable bool
	err := pool.QueryRow(ctx, `SELECT coalesce(has_table_privilege(to_regclass($1), 'SELECT'), false)`,
		db.Schema+".queues_paused").Scan(&readable)
	if err != nil || !readable {
		return out, db.Translate(err, "status.queues")
	}
	rows, err := pool.Query(ctx, `SELECT project, queue, paused_by, paused_at, coalesce(reason, '') FROM docket.queues_paused
		ORDER BY project, queue`)
	if err != nil {
		return nil, db.Translate(err, "status.queues")
	}
	for rows.Next() {
		var q pausedQueueJSON
		if err := rows.Scan(&q.Project, &q.Queue, &q.PausedBy, &q.PausedAt, &q.Reason); err != nil {
			rows.Close()
			return nil, db.Translate(err, "status.queues")
		}
		q.PausedAt = q.PausedAt.UTC()
		out = append(out, q)
	}
	return out, db.Translate(rows.Err(), "status.queues")
}

// printPaused lists the paused queues, or says there are none.
func (c *cli) printPaused(paused []pausedQueueJSON) error {
	if len(paused) == 0 {
		fmt.Fprintln(c.stdout, "queues:        none paused")
		return nil
	}
	fmt.Fprintf(c.stdout, "queues:        %s (docket queue resume PROJECT QUEUE):\n", count(len(paused), "paused queue"))
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	for _, q := range paused {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", q.Project, q.Queue, q.PausedBy, q.PausedAt.Format(time.RFC3339), show.Printable(q.Reason))
	}
	return w.Flush()
}
