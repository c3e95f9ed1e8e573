package console

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/show"
	"github.com/docket-dev/docket/jobs"
)

// censusRow is one queue of a project's census: its count in each state,
// in the order of jobs.States.
type censusRow struct {
	Queue  string
	Counts []censusCount
	Total  int64
}

type censusCount struct {
	State jobs.State
	N     int64
	Link  string
	// Capped: the state has more jobs than the census counts.
	Capped bool
}

// projectCensus is a project on the console's first page.
type projectCensus struct {
	Name   string
	States []jobs.State
	Rows   []censusRow
	Totals []censusCount
	Total  int64
	// Capped: some state has more jobs than the census counts; Cap is
	// how many it counts.
	Capped bool
	Cap    int
	// Charts are its jobs over the last hour.
	Charts jobCharts
}

type overviewPage struct {
	consoleFrame
	Projects []projectCensus
}

// overview shows, for each project served in which the visitor holds a
// grant, its jobs by queue and state, and
// links to the rest of the console.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request, v visitor) {
	p := overviewPage{consoleFrame: h.frame(v, "Console", "")}
	names, err := h.projects(r.Context(), v)
	if err != nil {
		h.refuse(w, r, v, "project", err)
		return
	}
	for _, name := range names {
		cl, err := h.jobsIn(v, name)
		var census jobs.Census
		if err == nil {
			census, err = cl.Census(r.Context(), 0)
		}
		if err != nil {
			h.refuse(w, r, v, "project", err)
			return
		}
		pc := censusOf(census)
		list, err := cl.List(r.Context(), jobs.Filter{Limit: chartJobs})
		if err != nil {
			h.refuse(w, r, v, "project", err)
			return
		}
		pc.Charts = chartsOf(name, list, h.cfg.Clock.Now(), len(list) == chartJobs)
		p.Projects = append(p.Projects, pc)
	}
	h.render(w, http.StatusOK, "console_overview", p)
}

// censusOf lays census out as a table of queues by state, each count
// linking to the jobs it counts.
func censusOf(census jobs.Census) projectCensus {
	project, cells, capped := census.Project, census.Cells, census.Capped
	pc := projectCensus{Name: project, States: jobs.States, Capped: len(capped) > 0, Cap: census.PerState}
	link := func(queue string, state jobs.State) string {
		q := url.Values{}
		if queue != "" {
			q.Set("queue", queue)
		}
		if state != "" {
			q.Set("state", string(state))
		}
		return pageLink(consolePath(project, "jobs"), q)
	}
	col := func(s jobs.State) int { return slices.Index(jobs.States, s) }
	pc.Totals = make([]censusCount, len(jobs.States))
	for i, s := range jobs.States {
		pc.Totals[i] = censusCount{State: s, Link: link("", s), Capped: slices.Contains(capped, s)}
	}
	for _, cell := range cells {
		i := col(cell.State)
		if i < 0 {
			continue
		}
		if len(pc.Rows) == 0 || pc.Rows[len(pc.Rows)-1].Queue != cell.Queue {
			row := censusRow{Queue: cell.Queue, Counts: make([]censusCount, len(jobs.States))}
			for j, s := range jobs.States {
				row.Counts[j] = censusCount{State: s, Link: link(cell.Queue, s)}
			}
			pc.Rows = append(pc.Rows, row)
		}
		n := int64(cell.Jobs)
		row := &pc.Rows[len(pc.Rows)-1]
		row.Counts[i].N += n
		row.Total += n
		pc.Totals[i].N += n
		pc.Total += n
	}
	return pc
}

// jobRow is a job in a console list.
type jobRow struct {
	ID          int64
	Kind        string
	Queue       string
	State       jobs.State
	Attempts    string
	AvailableAt time.Time
	UpdatedAt   time.Time
	Diagnostic  string
}

func jobRowOf(j jobs.Job) jobRow {
	return jobRow{ID: j.ID, Kind: j.Kind, Queue: j.Queue, State: j.State,
		Attempts:    strconv.Itoa(j.Attempts) + "/" + strconv.Itoa(j.MaxAttempts),
		AvailableAt: j.AvailableAt, UpdatedAt: j.UpdatedAt, Diagnostic: show.Cut(show.Printable(j.Diagnostic), 300)}
}

type jobListPage struct {
	consoleFrame
	// Which is the list: "jobs", "uncertain" or "dead".
	Which              string
	States             []jobs.State
	State, Queue, Kind string
	Jobs               []jobRow
	Next               string
	MayReconcile       bool
	MayCancel          bool
	Outcomes           []jobs.Outcome
	MaxNote            int
	Filtered           bool
	// Bulk are the bulk actions the list's filter leads to, each to the
	// page that counts what it would act on.
	Bulk []bulkLink
}

// bulkLink is a link to a bulk action's count.
type bulkLink struct {
	ID, Label, Link string
}

// bulkLinks are the bulk actions a list of state, queue and kind offers
// the visitor v: retry for finished jobs (to a holder of job.retry), cancel
// for queued ones (job.cancel), both when no state is chosen; none on a
// read-only console.
func (h *Handler) bulkLinks(ctx context.Context, v visitor, project string, state jobs.State, queue, kind string) ([]bulkLink, error) {
	retry := state == "" || state == jobs.Failed || state == jobs.Dead || state == jobs.Cancelled
	cancel := state == "" || state == jobs.Queued
	if h.readOnly || !retry && !cancel {
		return nil, nil
	}
	held, err := h.heldOn(ctx, v, project)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if queue != "" {
		q.Set("queue", queue)
	}
	if kind != "" {
		q.Set("kind", kind)
	}
	var out []bulkLink
	if retry && slices.Contains(held, access.JobRetry) {
		rq := maps.Clone(q)
		what := "failed, dead or cancelled"
		if state != "" {
			rq.Set("state", string(state))
			what = string(state)
		}
		out = append(out, bulkLink{ID: "bulk-retry", Label: "Retry every " + what + " job this matches…",
			Link: pageLink(consolePath(project, "bulk", "retry"), rq)})
	}
	if cancel && slices.Contains(held, access.JobCancel) {
		out = append(out, bulkLink{ID: "bulk-cancel", Label: "Cancel every queued job this matches…",
			Link: pageLink(consolePath(project, "bulk", "cancel"), q)})
	}
	return out, nil
}

// jobList lists a project's jobs newest first, filtered by state, queue
// and kind, a page at a time.
func (h *Handler) jobList(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	q := r.URL.Query()
	state := jobs.State(q.Get("state"))
	if state != "" && !slices.Contains(jobs.States, state) {
		h.refuse(w, r, v, "job", invalid("state", "want one of "+show.JoinStates(jobs.States)))
		return
	}
	queue, err := queryText(r, "queue", 200)
	if err == nil && queue != "" && !jobs.ValidQueue(queue) {
		err = invalid("queue", "not a queue name")
	}
	kind, kerr := queryText(r, "kind", 200)
	if err == nil {
		err = kerr
	}
	if err == nil && kind != "" && !jobs.ValidKind(kind) {
		err = invalid("kind", "not a job kind")
	}
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	p := jobListPage{consoleFrame: h.frame(v, "Jobs of "+project, project), Which: "jobs", States: jobs.States,
		State: string(state), Queue: queue, Kind: kind, Filtered: state != "" || queue != "" || kind != ""}
	if p.Bulk, err = h.bulkLinks(r.Context(), v, project, state, queue, kind); err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	h.listJobs(w, r, v, project, jobs.Filter{State: state, Queue: queue, Kind: kind}, &p)
}

// uncertainList lists a project's uncertain jobs, with the forms to
// reconcile or cancel each when the visitor holds the grants.
func (h *Handler) uncertainList(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	p := jobListPage{consoleFrame: h.frame(v, "Uncertain jobs of "+project, project), Which: "uncertain",
		Outcomes: []jobs.Outcome{jobs.DidSucceed, jobs.DidFail, jobs.RunAgain}, MaxNote: consoleMaxNote}
	var err error
	if p.MayReconcile, err = h.may(r.Context(), v, project, access.JobReconcile); err == nil {
		p.MayCancel, err = h.may(r.Context(), v, project, access.JobCancel)
	}
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	h.listJobs(w, r, v, project, jobs.Filter{State: jobs.Uncertain}, &p)
}

// deadList lists a project's dead jobs: their attempts ran out.
func (h *Handler) deadList(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	p := jobListPage{consoleFrame: h.frame(v, "Dead jobs of "+project, project), Which: "dead"}
	var err error
	if p.Bulk, err = h.bulkLinks(r.Context(), v, project, jobs.Dead, "", ""); err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	h.listJobs(w, r, v, project, jobs.Filter{State: jobs.Dead}, &p)
}

// listJobs reads the page of f the query's before names into p and renders
// it.
func (h *Handler) listJobs(w http.ResponseWriter, r *http.Request, v visitor, project string, f jobs.Filter, p *jobListPage) {
	before, err := queryID(r, "before")
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	cl, err := h.jobsIn(v, project)
	if err == nil {
		f.Before, f.Limit = before, consoleRows+1
		var list []jobs.Job
		if list, err = cl.List(r.Context(), f); err == nil {
			for _, j := range list[:min(len(list), consoleRows)] {
				p.Jobs = append(p.Jobs, jobRowOf(j))
			}
			if len(list) > consoleRows {
				q := r.URL.Query()
				q.Set("before", strconv.FormatInt(p.Jobs[len(p.Jobs)-1].ID, 10))
				p.Next = pageLink(r.URL.Path, q)
			}
		}
	}
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	h.render(w, http.StatusOK, "console_jobs", p)
}

// jobEvent is an event of a job's history, as shown.
type jobEvent struct {
	Seq      int
	At       time.Time
	From, To string
	Actor    access.Actor
	Attempt  int
	Revision string
	Detail   string
	// ClaimedBy and ClaimedAt name the claim of the attempt the event ends
	// (one event per attempt); empty on other events.
	ClaimedBy access.Actor
	ClaimedAt time.Time
}

// consoleShowInput is how many characters of each input named by a
// completion record a job's page shows.
const consoleShowInput = 300

// jobRecord is a succeeded job's completion record, as shown: what its
// worker says it produced and used, escaped and cut like the payload.
type jobRecord struct {
	Produced   string
	Params     string
	Inputs     []string
	RecordedBy access.Actor
	RecordedAt time.Time
}

type jobPage struct {
	consoleFrame
	Job     jobs.Job
	Payload string
	// Output is the output the job was asked for; empty when none.
	Output string
	// Record is a succeeded job's completion record; NoRecord says a
	// succeeded job has none (it was completed without one, or reconciled).
	Record   *jobRecord
	NoRecord bool
	// Pin is the revisions the job may run under, joined; empty when any may.
	Pin     string
	History []jobEvent
	// Verified: the history's hash chain holds; else Problem says where
	// it breaks.
	Verified      bool
	VerifiedCount int
	Problem       string
	MayReconcile  bool
	MayCancel     bool
	// MayRetry: it finished failed, dead or cancelled, of no lane or case,
	// and the visitor holds job.retry. Retries are the jobs that retry it.
	MayRetry bool
	Retries  []int64
	Outcomes []jobs.Outcome
	MaxNote  int
}

// jobPage shows a job, its history and whether the history verifies, with
// the forms to reconcile or cancel it when it is in a state for them and
// the visitor holds the grants.
func (h *Handler) jobPage(w http.ResponseWriter, r *http.Request, v visitor, project string, id int64) {
	ctx := r.Context()
	cl, err := h.jobsByID(v)
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	j, err := h.jobIn(r, cl, project, id)
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	events, err := cl.History(ctx, id)
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	ver, err := cl.Verify(ctx, id)
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	p := jobPage{consoleFrame: h.frame(v, "Job "+strconv.FormatInt(id, 10), project), Job: j,
		Payload: show.Cut(prettyJSON(j.Payload), consoleShowPayload), Verified: ver.OK, VerifiedCount: ver.Events,
		Outcomes: []jobs.Outcome{jobs.DidSucceed, jobs.DidFail, jobs.RunAgain}, MaxNote: consoleMaxNote}
	if j.Output.Asset != "" {
		p.Output = show.Printable(show.JobOutput(j.Output))
	}
	if j.Revisions != nil {
		p.Pin = show.Printable(strings.Join(j.Revisions, ", "))
	}
	if j.State == jobs.Succeeded {
		// The completion record, as the job's re-run plan reads it.
		plan, err := cl.RerunPlan(ctx, id)
		if err != nil {
			h.refuse(w, r, v, "job", err)
			return
		}
		p.Record, p.NoRecord = jobRecordOf(plan), !plan.Recorded
	}
	if !ver.OK {
		p.Problem = "does not verify at event " + strconv.Itoa(ver.BadSeq) + ": " + ver.Problem
	}
	for _, e := range events {
		p.History = append(p.History, jobEvent{Seq: e.Seq, At: e.At, From: show.Dash(string(e.From)), To: string(e.To),
			Actor: e.Actor, Attempt: e.Attempt, Revision: show.Printable(e.Revision), Detail: show.Printable(e.Detail),
			ClaimedBy: e.ClaimedBy, ClaimedAt: e.ClaimedAt})
	}
	if j.State == jobs.Uncertain {
		if p.MayReconcile, err = h.may(ctx, v, project, access.JobReconcile); err != nil {
			h.refuse(w, r, v, "job", err)
			return
		}
	}
	if j.State == jobs.Queued || j.State == jobs.Claimed || j.State == jobs.Uncertain {
		if p.MayCancel, err = h.may(ctx, v, project, access.JobCancel); err != nil {
			h.refuse(w, r, v, "job", err)
			return
		}
	}
	// Only a finished job can have been retried: the others' pages ask
	// nothing more.
	if j.State == jobs.Failed || j.State == jobs.Dead || j.State == jobs.Cancelled {
		if j.LaneID == 0 && j.CaseID == 0 {
			if p.MayRetry, err = h.may(ctx, v, project, access.JobRetry); err != nil {
				h.refuse(w, r, v, "job", err)
				return
			}
		}
		if p.Retries, err = cl.Retries(ctx, id); err != nil {
			h.refuse(w, r, v, "job", err)
			return
		}
	}
	h.render(w, http.StatusOK, "console_job", p)
}

// jobRecordOf is the completion record plan carries; nil when it has none.
func jobRecordOf(plan jobs.RerunPlan) *jobRecord {
	if !plan.Recorded {
		return nil
	}
	rec := &jobRecord{Produced: show.Printable(show.JobOutput(plan.Produced)), RecordedBy: plan.RecordedBy, RecordedAt: plan.RecordedAt}
	if plan.Params != nil {
		rec.Params = show.Cut(prettyJSON(plan.Params), consoleShowPayload)
	}
	for _, in := range plan.Inputs {
		rec.Inputs = append(rec.Inputs, show.Cut(show.Printable(in), consoleShowInput))
	}
	return rec
}

// jobsByID is a jobs client of no project, acting as the visitor: it works
// by job id, and the grants decide per job.
func (h *Handler) jobsByID(v visitor) (*jobs.Client, error) {
	return h.jobsIn(v, "")
}

// jobsIn is a jobs client of project acting as the visitor, reading what
// tolerates lag from the console's Replica when it has one.
func (h *Handler) jobsIn(v visitor, project string) (*jobs.Client, error) {
	return jobs.NewClient(h.pool, jobs.Config{Project: project, Actor: v.who, Clock: h.cfg.Clock, Replica: h.cfg.Replica})
}

// jobIn reads job id as the client's actor, and answers one of another
// project than the path's as not found.
func (h *Handler) jobIn(r *http.Request, cl *jobs.Client, project string, id int64) (jobs.Job, error) {
	j, err := cl.Get(r.Context(), id)
	if err != nil {
		return jobs.Job{}, err
	}
	if j.Project != project {
		return jobs.Job{}, notFound("job", id)
	}
	return j, nil
}

// reconcile settles an uncertain job with the form's outcome and note.
func (h *Handler) reconcile(w http.ResponseWriter, r *http.Request, v visitor, project string, id int64) {
	outcome := jobs.Outcome(r.PostForm.Get("outcome"))
	note, err := formText(r, "note")
	if err == nil && !slices.Contains([]jobs.Outcome{jobs.DidSucceed, jobs.DidFail, jobs.RunAgain}, outcome) {
		err = invalid("outcome", "choose succeeded, failed or queued")
	}
	h.change(w, r, v, project, id, err, func(cl *jobs.Client) error {
		_, err := cl.Reconcile(r.Context(), id, outcome, nil, note)
		return err
	})
}

// cancel withdraws a job with the form's reason.
func (h *Handler) cancel(w http.ResponseWriter, r *http.Request, v visitor, project string, id int64) {
	reason, err := formText(r, "reason")
	h.change(w, r, v, project, id, err, func(cl *jobs.Client) error {
		_, err := cl.Cancel(r.Context(), id, reason)
		return err
	})
}

// change makes a change to job id of project, unless the form was refused
// already (bad), and answers with the job's page.
func (h *Handler) change(w http.ResponseWriter, r *http.Request, v visitor, project string, id int64, bad error, do func(*jobs.Client) error) {
	if bad != nil {
		h.refuse(w, r, v, "job", bad)
		return
	}
	cl, err := h.jobsByID(v)
	if err == nil {
		_, err = h.jobIn(r, cl, project, id)
	}
	if err == nil {
		err = do(cl)
	}
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	http.Redirect(w, r, h.path(consolePath(project, "jobs", id)), http.StatusSeeOther)
}
