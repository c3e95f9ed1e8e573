package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/cells"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/replica"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
)

// openReplica opens the pool on --replica-url and says on stderr, before
// anything is read, where the reads go and how far behind the primary they
// may be, by the command's clock.
func (c *cli) openReplica(ctx context.Context, primary *pgxpool.Pool) (*pgxpool.Pool, error) {
	pool, err := db.Open(ctx, c.replicaURL)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flagReplica, err)
	}
	lag, err := replica.New(primary, pool).Lag(ctx, c.clock, "cli.replica")
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("--%s: %w", flagReplica, err)
	}
	fmt.Fprintf(c.stderr, "docket: reading from %s: %s%s; writes go to %s\n", where(pool), lag, replayedAt(lag), where(primary))
	return pool, nil
}

// replayedAt says when the primary committed what a replica shows, if
// known.
func replayedAt(lag db.Lag) string {
	if !lag.Replica || lag.Replayed.IsZero() {
		return ""
	}
	return " (replayed up to " + lag.Replayed.UTC().Format(time.RFC3339Nano) + ")"
}

// replicaPool is the pool the clients read from when they tolerate lag:
// --replica-url's, or none.
func (c *cli) replicaPool() db.Pool {
	if c.replica == nil {
		return nil
	}
	return c.replica
}

// projectArgs reads the projects a command that may read across cells is
// given: exactly one PROJECT, or with --cell any number, none meaning every
// project of every cell.
func (c *cli) projectArgs(fs *flag.FlagSet, rest []string) ([]string, error) {
	pos, err := c.parse(fs, rest, "[PROJECT...]")
	pos = slices.DeleteFunc(pos, func(p string) bool { return p == "" }) // the optional one, left out
	switch {
	case err != nil:
		return nil, err
	case len(c.cells) > 0:
		return pos, nil
	case len(pos) == 0:
		return nil, usageOf(fs, "missing PROJECT")
	case len(pos) > 1:
		return nil, usageOf(fs, "unexpected argument %q after PROJECT: more than one project needs --%s", pos[1], flagCell)
	}
	return pos, nil
}

// cellFlag is one --cell NAME=URL.
type cellFlag struct{ name, url string }

// cellFlags are the --cell flags in the order given.
type cellFlags []cellFlag

func (f *cellFlags) String() string {
	if f == nil {
		return ""
	}
	var names []string
	for _, c := range *f {
		names = append(names, c.name)
	}
	return strings.Join(names, ",")
}

func (f *cellFlags) Set(s string) error {
	name, url, ok := strings.Cut(s, "=")
	if !ok || name == "" || url == "" {
		return errors.New("want NAME=URL")
	}
	for _, c := range *f {
		if c.name == name {
			return fmt.Errorf("cell %s named twice", name)
		}
	}
	*f = append(*f, cellFlag{name: name, url: url})
	return nil
}

// cellMap opens a pool on each --cell and maps every project its login may
// see there to it: the projects are found, not configured, so a project
// two cells both have is refused. A cell that cannot be reached is left
// out of the map and named in missed, for the command to report after
// what the others gave; with none reached, err says why. closeAll closes
// the pools.
func (c *cli) cellMap(ctx context.Context) (m *cells.Map, closeAll func(), missed, err error) {
	var pools []*pgxpool.Pool
	closePools := func() {
		for _, p := range pools {
			p.Close()
		}
	}
	defer func() {
		if err != nil {
			closePools()
		}
	}()
	cfg := cells.Config{Cells: map[string]cells.Cell{}, Projects: map[string]string{}}
	var misses []error
	for _, cf := range c.cells {
		pool, names, err := c.openCell(ctx, cf)
		if pool != nil {
			pools = append(pools, pool)
		}
		if err != nil {
			misses = append(misses, fmt.Errorf("cell %s: %w", cf.name, err))
			continue
		}
		cfg.Cells[cf.name] = cells.Cell{Pool: pool}
		for _, p := range names {
			if other, ok := cfg.Projects[p]; ok {
				return nil, nil, nil, fmt.Errorf("project %s is in cells %s and %s: a project lives in one cell", p, other, cf.name)
			}
			cfg.Projects[p] = cf.name
		}
	}
	if len(cfg.Cells) == 0 {
		return nil, nil, nil, errors.Join(misses...)
	}
	m, err = cells.New(ctx, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, closePools, errors.Join(misses...), nil
}

// openCell opens a pool on cell cf and lists the projects its login may
// see there.
func (c *cli) openCell(ctx context.Context, cf cellFlag) (*pgxpool.Pool, []string, error) {
	pool, err := db.Open(ctx, cf.url)
	if err != nil {
		return nil, nil, err
	}
	pc, err := projects.NewClient(pool, projects.Config{Actor: c.actor, Clock: c.clock})
	if err != nil {
		return pool, nil, err
	}
	var names []string
	for after := ""; ; {
		page, err := pc.List(ctx, projects.Filter{After: after, Limit: db.MaxPage})
		if err != nil {
			return pool, nil, schemaHint(pool, err)
		}
		for _, p := range page {
			names = append(names, p.Name)
		}
		if len(page) < db.MaxPage {
			return pool, names, nil
		}
		after = page[len(page)-1].Name
	}
}

// jobListCells lists the jobs matching f of projects (every project of
// every cell when none is named) across the --cell cells, each row naming
// its cell. A cell that cannot be reached or read is named on stderr after
// the others' rows, and the command fails.
func (c *cli) jobListCells(ctx context.Context, f jobs.Filter, projectNames []string, format string) error {
	m, closeAll, missed, err := c.cellMap(ctx)
	if err != nil {
		return err
	}
	defer closeAll()
	rows, err := m.List(ctx, jobs.Config{Actor: c.actor, Clock: c.clock}, f, projectNames...)
	err = errors.Join(missed, err)
	if format == formatJSON {
		doc := jobCellListDoc{Cells: m.Cells(), Jobs: make([]jobCellJSON, len(rows))}
		for i, r := range rows {
			doc.Jobs[i] = jobCellJSON{Cell: r.Cell, Lag: r.Lag.String(), jobJSON: jobOf(r.Job)}
		}
		if werr := writeSafeJSON(c.stdout, doc); werr != nil {
			return werr
		}
		return err
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CELL\tPROJECT\tID\tKIND\tQUEUE\tSTATE\tATTEMPTS\tAVAILABLE AT\tUPDATED AT")
	for _, j := range rows {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.Cell, j.Project, j.ID, j.Kind, j.Queue, j.State, j.Attempts,
			j.MaxAttempts, j.AvailableAt.Format(time.RFC3339), j.UpdatedAt.Format(time.RFC3339))
	}
	if ferr := w.Flush(); ferr != nil {
		return ferr
	}
	return err
}

// jobCensusCells counts the jobs of projects (every project of every cell
// when none is named) across the --cell cells, a table per project naming
// its cell.
func (c *cli) jobCensusCells(ctx context.Context, perState int, projectNames []string, format string) error {
	m, closeAll, missed, err := c.cellMap(ctx)
	if err != nil {
		return err
	}
	defer closeAll()
	counted, err := m.Census(ctx, jobs.Config{Actor: c.actor, Clock: c.clock}, perState, projectNames...)
	err = errors.Join(missed, err)
	if format == formatJSON {
		doc := jobCellCensusDoc{Cells: m.Cells(), Censuses: make([]jobCellCensusJSON, len(counted))}
		for i, k := range counted {
			doc.Censuses[i] = jobCellCensusJSON{Cell: k.Cell, Lag: k.Lag.String(), jobCensusDoc: jobCensusDocOf(k.Census)}
		}
		if werr := writeSafeJSON(c.stdout, doc); werr != nil {
			return werr
		}
		return err
	}
	for i, k := range counted {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		fmt.Fprintf(c.stdout, "cell %s, project %s (%s):\n", k.Cell, k.Project, k.Lag)
		if werr := writeCensusText(c.stdout, k.Census); werr != nil {
			return werr
		}
	}
	return err
}

type (
	// jobCellListDoc is job list -o json across cells.
	jobCellListDoc struct {
		Cells []string      `json:"cells"`
		Jobs  []jobCellJSON `json:"jobs"`
	}
	// jobCellJSON is a job naming the cell it was read from, and the lag
	// of that read ("primary", or the replica's).
	jobCellJSON struct {
		Cell string `json:"cell"`
		Lag  string `json:"read_from"`
		jobJSON
	}
	// jobCellCensusDoc is job census -o json across cells.
	jobCellCensusDoc struct {
		Cells    []string            `json:"cells"`
		Censuses []jobCellCensusJSON `json:"censuses"`
	}
	jobCellCensusJSON struct {
		Cell string `json:"cell"`
		Lag  string `json:"read_from"`
		jobCensusDoc
	}
)
