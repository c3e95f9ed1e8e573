package console

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/show"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/schedules"
)

func (h *Handler) schedules(v visitor) (*schedules.Client, error) {
	return schedules.NewClient(h.pool, schedules.Config{Actor: v.who, Clock: h.cfg.Clock})
}

type scheduleListPage struct {
	consoleFrame
	Schedules []schedules.Schedule
	Next      string
}

// scheduleList lists a project's schedules the visitor may see, by name, a
// page at a time.
func (h *Handler) scheduleList(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	after, err := queryText(r, "after", 200)
	var list []schedules.Schedule
	if err == nil {
		var cl *schedules.Client
		if cl, err = h.schedules(v); err == nil {
			list, err = cl.List(r.Context(), schedules.Filter{Project: project, After: after, Limit: consoleRows + 1})
		}
	}
	if err != nil {
		h.refuse(w, r, v, "schedule", err)
		return
	}
	p := scheduleListPage{consoleFrame: h.frame(v, "Schedules of "+project, project), Schedules: list[:min(len(list), consoleRows)]}
	if len(list) > consoleRows {
		p.Next = pageLink(r.URL.Path, url.Values{"after": {p.Schedules[len(p.Schedules)-1].Name}})
	}
	h.render(w, http.StatusOK, "console_schedules", p)
}

type schedulePage struct {
	consoleFrame
	Schedule schedules.Schedule
	Next     []schedules.Occurrence
	Runs     []schedules.Run
	MoreRuns int
}

// schedulePage shows a schedule, its next runs, in its zone and in UTC,
// and the runs it made last; a broken one, why the sweep passes it over.
func (h *Handler) schedulePage(w http.ResponseWriter, r *http.Request, v visitor, project string, id int64) {
	ctx := r.Context()
	cl, err := h.schedules(v)
	var s schedules.Schedule
	if err == nil {
		s, err = cl.Get(ctx, id)
	}
	if err == nil && s.Project != project {
		err = notFound("schedule", id)
	}
	p := schedulePage{consoleFrame: h.frame(v, "Schedule "+show.Printable(s.Name), project), Schedule: s}
	// A broken schedule runs nothing until it is mended, and its terms may
	// be what cannot be planned: it has no next runs to show.
	if err == nil && s.Status != schedules.Broken {
		p.Next, err = cl.Preview(ctx, id, consolePreview)
	}
	if err == nil {
		p.Runs, err = cl.Runs(ctx, id)
	}
	if err != nil {
		h.refuse(w, r, v, "schedule", err)
		return
	}
	if len(p.Runs) > consoleRows {
		p.MoreRuns = len(p.Runs) - consoleRows
		p.Runs = p.Runs[len(p.Runs)-consoleRows:]
	}
	h.render(w, http.StatusOK, "console_schedule", p)
}

// snapshot runs read in one read-only repeatable-read transaction, so that
// what it reads agrees with itself.
func (h *Handler) snapshot(ctx context.Context, read func(tx pgx.Tx) error) error {
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return db.Translate(err, "console.read")
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"); err != nil {
		return db.Translate(err, "console.read")
	}
	return read(tx)
}

type runListPage struct {
	consoleFrame
	Runs []plans.Run
	Next string
}

// runList lists a project's runs of plans the visitor may see, newest
// first, a page at a time.
func (h *Handler) runList(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	before, err := queryID(r, "before")
	var list []plans.Run
	if err == nil {
		var cl *plans.Client
		if cl, err = plans.NewClient(h.pool, plans.Config{Actor: v.who, Clock: h.cfg.Clock, Replica: h.cfg.Replica}); err == nil {
			list, err = cl.List(r.Context(), plans.Filter{Project: project, Before: before, Limit: consoleRows + 1})
		}
	}
	if err != nil {
		h.refuse(w, r, v, "run", err)
		return
	}
	p := runListPage{consoleFrame: h.frame(v, "Runs of "+project, project), Runs: list[:min(len(list), consoleRows)]}
	if len(list) > consoleRows {
		p.Next = pageLink(r.URL.Path, url.Values{"before": {strconv.FormatInt(p.Runs[len(p.Runs)-1].ID, 10)}})
	}
	h.render(w, http.StatusOK, "console_runs", p)
}

// stepCount is how many of a run's steps are in one state.
type stepCount struct {
	State plans.StepState
	N     int
}

type runPage struct {
	consoleFrame
	Run      plans.Run
	Budget   string
	Spent    string
	Output   string
	Steps    []plans.RunStep
	Census   []stepCount
	Versions []plans.Version
	// Unadmitted are the steps of the plan's current version the run has
	// not admitted, in the plan's order, and what that means now (waiting,
	// held, not run).
	Unadmitted []plans.Step
	NotYet     string
	// Graph is the run's plan drawn as its DAG, each step coloured by
	// its state.
	Graph runGraph
}

// runPage shows a run of a plan: its status, its steps' census and each
// step with its job and compensation, and its plan's versions.
func (h *Handler) runPage(w http.ResponseWriter, r *http.Request, v visitor, project string, id int64) {
	p := runPage{consoleFrame: h.frame(v, "Run "+strconv.FormatInt(id, 10), project)}
	err := h.snapshot(r.Context(), func(tx pgx.Tx) error {
		cl, err := plans.NewClient(tx, plans.Config{Actor: v.who, Clock: h.cfg.Clock})
		if err != nil {
			return err
		}
		if p.Run, err = cl.Get(r.Context(), id); err != nil {
			return err
		}
		if p.Run.Project != project {
			return notFound("run", id)
		}
		if p.Steps, err = cl.Steps(r.Context(), id); err != nil {
			return err
		}
		p.Versions, err = cl.Versions(r.Context(), id)
		return err
	})
	if err != nil {
		h.refuse(w, r, v, "run", err)
		return
	}
	if !p.Run.Budget.Zero() {
		p.Budget, p.Spent = show.Budget(p.Run.Budget), show.Spent(p.Run.Budget, p.Run.Spent)
	}
	p.Output = show.Dash(show.Output(p.Run.Output, "the API reads it whole"))
	admitted := map[string]bool{}
	for _, s := range p.Steps {
		admitted[s.StepID] = true
	}
	p.NotYet = show.NotAdmitted(p.Run)
	for _, ver := range p.Versions {
		if ver.Version != p.Run.Version {
			continue
		}
		p.Graph = graphOf(ver.Plan, p.Steps, p.NotYet)
		for _, s := range ver.Plan.Steps {
			if !admitted[s.ID] {
				p.Unadmitted = append(p.Unadmitted, s)
			}
		}
	}
	for _, s := range p.Steps {
		i := 0
		for i < len(p.Census) && p.Census[i].State != s.State {
			i++
		}
		if i == len(p.Census) {
			p.Census = append(p.Census, stepCount{State: s.State})
		}
		p.Census[i].N++
	}
	h.render(w, http.StatusOK, "console_run", p)
}

type batchListPage struct {
	consoleFrame
	Batches []batches.Report
	Next    string
}

// batchList lists a project's batches the visitor may see, by name, with
// their census, a page at a time.
func (h *Handler) batchList(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	after, err := queryText(r, "after", 512)
	var list []batches.Report
	if err == nil {
		var cl *batches.Client
		if cl, err = batches.NewClient(h.pool, batches.Config{Actor: v.who, Clock: h.cfg.Clock}); err == nil {
			list, err = cl.List(r.Context(), batches.Filter{Project: project, After: after, Limit: consoleRows + 1})
		}
	}
	if err != nil {
		h.refuse(w, r, v, "batch", err)
		return
	}
	p := batchListPage{consoleFrame: h.frame(v, "Batches of "+project, project), Batches: list[:min(len(list), consoleRows)]}
	if len(list) > consoleRows {
		p.Next = pageLink(r.URL.Path, url.Values{"after": {p.Batches[len(p.Batches)-1].Name}})
	}
	h.render(w, http.StatusOK, "console_batches", p)
}

// itemRow is an item of a batch nobody is finished with, as shown.
type itemRow struct {
	Key        string
	Status     batches.ItemStatus
	RunID      int64
	Reason     string
	AdmittedAt time.Time
}

type batchPage struct {
	consoleFrame
	Batch batches.Report
	Items []itemRow
	Next  string
}

// batchPage shows a batch, its census and a page of the items nobody is
// finished with, oldest key first.
func (h *Handler) batchPage(w http.ResponseWriter, r *http.Request, v visitor, project string, id int64) {
	after, err := queryText(r, "after", 512)
	if err != nil {
		h.refuse(w, r, v, "batch", err)
		return
	}
	p := batchPage{consoleFrame: h.frame(v, "Batch "+strconv.FormatInt(id, 10), project)}
	var items []batches.Admitted
	err = h.snapshot(r.Context(), func(tx pgx.Tx) error {
		cl, err := batches.NewClient(tx, batches.Config{Actor: v.who, Clock: h.cfg.Clock})
		if err != nil {
			return err
		}
		if p.Batch, err = cl.Get(r.Context(), id); err != nil {
			return err
		}
		if p.Batch.Project != project {
			return notFound("batch", id)
		}
		items, err = cl.NeedingAttention(r.Context(), id, after, consoleRows+1)
		return err
	})
	if err != nil {
		h.refuse(w, r, v, "batch", err)
		return
	}
	for _, it := range items[:min(len(items), consoleRows)] {
		p.Items = append(p.Items, itemRow{Key: show.Printable(it.Key), Status: it.Status, RunID: it.RunID, Reason: show.Dash(show.Printable(it.Reason)),
			AdmittedAt: it.AdmittedAt})
	}
	if len(items) > consoleRows {
		p.Next = pageLink(r.URL.Path, url.Values{"after": {items[consoleRows-1].Key}})
	}
	h.render(w, http.StatusOK, "console_batch", p)
}
