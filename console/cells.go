package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"

	"github.com/docket-dev/docket/cells"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// cellJobs is how many of each project's newest jobs the page of every
// cell lists.
const cellJobs = 10

// Cells is the console of a docket in several cells (see package cells):
// the console of each cell, as [New] makes it on the cell's primary and
// replica for the projects the map puts in the cell, mounted under
// Prefix/cells/NAME, and at Prefix/ a page of every cell at once: which
// projects the visitor may see in each, each project's census naming its
// cell, and the newest jobs of every project, each row naming its cell and
// linking to the job's page in its cell's console (a job id names a job in
// one cell only). A cell that does not answer holds up its own rows only:
// the page shows the others and names it.
//
// Every action is a form of a cell's console, and writes to that cell's
// primary; nothing spans two cells.
type Cells struct {
	m      *cells.Map
	cfg    Config
	index  *Handler // renders the page of every cell and serves the static files at Prefix
	byCell map[string]*Handler
}

// NewCells returns the console of m's cells. cfg is as for [New], for
// every cell: its Projects, when set, narrow each cell's projects to those
// named, and it must not set Replica (each cell's replica is the map's).
// It refuses, with [db.ErrInvalidArgument], a nil map and a configuration
// it cannot run with, and returns the error of a cell whose login cannot
// be asked what it may do, naming the cell.
func NewCells(m *cells.Map, cfg Config) (*Cells, error) {
	if m == nil {
		return nil, db.Refuse(db.ErrInvalidArgument, "console", "no cells map")
	}
	if !db.IsNil(cfg.Replica) {
		return nil, db.Refuse(db.ErrInvalidArgument, "console", "the config sets a Replica: each cell's replica is the map's")
	}
	if err := cfg.check(); err != nil {
		return nil, db.Refuse(db.ErrInvalidArgument, "console", err.Error())
	}
	c := &Cells{m: m, cfg: cfg, byCell: map[string]*Handler{}}
	for _, name := range m.Cells() {
		cell, err := m.Member(name)
		if err != nil {
			return nil, err
		}
		own := m.Projects(name)
		if len(cfg.Projects) > 0 {
			own = slices.DeleteFunc(own, func(p string) bool { return !slices.Contains(cfg.Projects, p) })
		}
		if len(own) == 0 {
			continue // nothing of the console's in this cell
		}
		cc := cfg
		cc.Projects, cc.Prefix = own, cfg.Prefix+"/cells/"+name
		if cell.Replica != nil {
			cc.Replica = cell.Replica
		}
		h, err := newHandler(cell.Pool, cc, mount{home: cfg.Prefix, cell: name})
		if err != nil {
			return nil, fmt.Errorf("console: cell %s: %w", name, err)
		}
		c.byCell[name] = h
	}
	// The page of every cell reads through the map, not a pool of its own.
	c.index = &Handler{cfg: cfg, origins: http.NewCrossOriginProtection(), mux: http.NewServeMux(),
		pages: template.Must(pages.Clone())}
	c.index.funcs(mount{home: cfg.Prefix})
	c.index.mux.HandleFunc("GET /{$}", c.everyCell)
	c.index.mux.HandleFunc("GET /static/{file}", c.index.static)
	c.index.mux.HandleFunc("/", c.index.notFound)
	return c, nil
}

// ServeHTTP serves a cell's console under Prefix/cells/NAME, and the page
// of every cell at Prefix/.
func (c *Cells) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, c.cfg.Prefix+"/cells/")
	if ok {
		name, _, _ := strings.Cut(rest, "/")
		if h := c.byCell[name]; h != nil {
			h.ServeHTTP(w, r)
			return
		}
	}
	c.index.ServeHTTP(w, r)
}

// cellSummary is a cell on the page of every cell.
type cellSummary struct {
	Name string
	// Projects are the cell's projects the visitor may see.
	Projects []string
	// Reads says where the cell's rows were read and how far behind they
	// may be; Failed, why the cell's rows are missing.
	Reads  string
	Failed string
}

// cellCensus is a project's census on the page of every cell.
type cellCensus struct {
	Cell string
	projectCensus
}

// cellJob is a job on the page of every cell.
type cellJob struct {
	Cell, Project string
	jobRow
}

type cellsPage struct {
	frame
	Cells  []cellSummary
	Census []cellCensus
	Jobs   []cellJob
	// State filters Jobs; States are the choices.
	State    jobs.State
	States   []jobs.State
	PerCell  int
	Answered int
}

// everyCell shows every cell: the projects the visitor may see in each,
// their censuses and their newest jobs, each naming its cell.
func (c *Cells) everyCell(w http.ResponseWriter, r *http.Request) {
	who, refusal := c.index.principal(r)
	if refusal != nil {
		c.index.render(w, refusal.Status, "refusal", refusal)
		return
	}
	v := visitor{who: who}
	p := cellsPage{frame: v.frame("Cells"), States: jobs.States, PerCell: cellJobs}
	if s := r.URL.Query().Get("state"); s != "" {
		if !slices.Contains(jobs.States, jobs.State(s)) {
			c.index.refuse(w, r, v, "state", db.Refuse(db.ErrInvalidArgument, "console",
				fmt.Sprintf("%q is not a job state", s)))
			return
		}
		p.State = jobs.State(s)
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	var visible []string
	for _, name := range c.m.Cells() {
		h := c.byCell[name]
		if h == nil {
			continue
		}
		s := cellSummary{Name: name}
		names, err := h.projects(ctx, v)
		if err != nil {
			if !unreachable(err) {
				c.index.refuse(w, r, v, "project", err)
				return
			}
			s.Failed = cellFailure(err)
		}
		s.Projects = names
		visible = append(visible, names...)
		p.Cells = append(p.Cells, s)
	}
	cfg := jobs.Config{Actor: who, Clock: c.cfg.Clock}
	if len(visible) > 0 {
		census, cerr := c.m.Census(ctx, cfg, 0, visible...)
		list, lerr := c.m.List(ctx, cfg, jobs.Filter{State: p.State, Limit: cellJobs}, visible...)
		for _, n := range census {
			p.Census = append(p.Census, cellCensus{Cell: n.Cell, projectCensus: censusOf(n.Census)})
			p.note(n.Cell, n.Lag.String(), "")
		}
		for _, j := range list {
			p.Jobs = append(p.Jobs, cellJob{Cell: j.Cell, Project: j.Project, jobRow: jobRowOf(j.Job)})
		}
		for _, err := range []error{cerr, lerr} {
			if err == nil {
				continue
			}
			var failed []*cells.CellError
			for _, e := range unjoin(err) {
				ce, ok := errors.AsType[*cells.CellError](e)
				if !ok {
					c.index.refuse(w, r, v, "project", err)
					return
				}
				failed = append(failed, ce)
			}
			for _, ce := range failed {
				p.note(ce.Cell, "", cellFailure(ce.Err))
			}
		}
	}
	for _, s := range p.Cells {
		if s.Failed == "" {
			p.Answered++
		}
	}
	c.index.render(w, http.StatusOK, "console_cells", p)
}

// note records on the page what was learnt of cell: where its rows were
// read, or why they are missing.
func (p *cellsPage) note(cell, reads, failed string) {
	for i := range p.Cells {
		s := &p.Cells[i]
		if s.Name != cell {
			continue
		}
		if failed != "" {
			s.Failed, s.Reads = failed, ""
		} else if s.Failed == "" {
			s.Reads = reads
		}
	}
}

// unjoin returns the errors err joins, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// unreachable reports whether err is a cell's failure to answer rather
// than a refusal of what the visitor asked.
func unreachable(err error) bool {
	var de *db.Error
	return !errors.As(err, &de)
}

// cellFailure says in a line why a cell's rows are missing.
func cellFailure(err error) string {
	return "did not answer: " + err.Error()
}

// mount is where a console is mounted among the cells: home is the path of
// the page of every cell, cell the console's cell; both empty for a
// console of one database.
type mount struct{ home, cell string }

// funcs gives h's pages its prefix, its refresh and its place among cells.
func (h *Handler) funcs(at mount) {
	prefix, refresh := h.cfg.Prefix, max(h.cfg.Refresh.Milliseconds(), 0)
	h.pages.Funcs(template.FuncMap{
		"base":      func() string { return prefix },
		"refresh":   func() int64 { return refresh },
		"cellsHome": func() string { return at.home },
		"inCells":   func() bool { return at.home != "" || at.cell != "" },
		"cell":      func() string { return at.cell },
	})
}

// notFound answers a path the console has no page at.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.render(w, http.StatusNotFound, "refusal", refusalPage{frame: frame{Title: "Not found"}, Status: http.StatusNotFound,
		Reason: "not-found", Heading: "Not found", Lines: []string{"There is no page here."}})
}
