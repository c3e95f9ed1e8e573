package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/show"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/lanes"
)

// routeActions adds the operator's actions beyond a job's reconcile and
// cancel: retrying a finished job, retrying or cancelling the jobs a
// filter matches (counted first), pausing and resuming a queue, and the
// pages they start from (queues, lanes).
func (h *Handler) routeActions() {
	m := h.mux
	m.HandleFunc("POST /console/{project}/jobs/{id}/retry", h.signedIn(h.posted(h.withID("job", h.retryOne))))
	m.HandleFunc("GET /console/{project}/bulk/{action}", h.signedIn(h.readable(h.inProject(h.bulkCount))))
	m.HandleFunc("POST /console/{project}/bulk/{action}", h.signedIn(h.posted(h.inProject(h.bulkDo))))
	m.HandleFunc("GET /console/{project}/queues", h.signedIn(h.readable(h.inProject(h.queueList))))
	m.HandleFunc("POST /console/{project}/queues/{queue}/{verb}", h.signedIn(h.posted(h.inProject(h.queueSet))))
	m.HandleFunc("POST /console/{project}/queues", h.signedIn(h.posted(h.inProject(h.queueSet))))
	m.HandleFunc("GET /console/{project}/lanes", h.signedIn(h.readable(h.inProject(h.laneList))))
	m.HandleFunc("GET /console/{project}/lanes/{id}", h.signedIn(h.readable(h.withID("lane", h.lanePage))))
}

// confirmed refuses a form whose confirm box was not ticked: every action
// of these pages asks for it, so that a stray click changes nothing.
func confirmed(r *http.Request) error {
	if r.PostForm.Get("confirm") != "yes" {
		return invalid("confirm", "tick the box that confirms it")
	}
	return nil
}

// retryOne retries a finished job: a new job, whose page it answers with.
func (h *Handler) retryOne(w http.ResponseWriter, r *http.Request, v visitor, project string, id int64) {
	if err := confirmed(r); err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	cl, err := h.jobsByID(v)
	var retry jobs.Job
	if err == nil {
		_, err = h.jobIn(r, cl, project, id)
	}
	if err == nil {
		retry, err = cl.Retry(r.Context(), id)
	}
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	http.Redirect(w, r, h.path(consolePath(project, "jobs", retry.ID)), http.StatusSeeOther)
}

// bulkAction is a bulk action's words and needs.
type bulkAction struct {
	Name       string // "retry" or "cancel"
	Verb, Done string // "Retry", "retried"
	Grant      access.Capability
	States     []jobs.State // the states its filter may name
}

var bulkActions = map[string]bulkAction{
	"retry":  {Name: "retry", Verb: "Retry", Done: "retried", Grant: access.JobRetry, States: []jobs.State{jobs.Failed, jobs.Dead, jobs.Cancelled}},
	"cancel": {Name: "cancel", Verb: "Cancel", Done: "cancelled", Grant: access.JobCancel, States: []jobs.State{jobs.Queued}},
}

type bulkPage struct {
	consoleFrame
	Action bulkAction
	// The filter, as given, and as a query string for links back.
	State, Kind, Queue string
	Query              string
	// Count is how many jobs match now; Counted, when acting, how many
	// the confirmation page showed, and Acted how many were acted on.
	Count, Counted int64
	Acted          []jobs.Job
	More           bool
	Max            int
	MaxNote        int
	Done           bool
}

// bulkFilter reads the action and its filter from r: the path's action,
// and state, kind and queue from the query or the form.
func bulkFilter(r *http.Request, get func(string) string) (bulkAction, jobs.BulkFilter, error) {
	a, ok := bulkActions[r.PathValue("action")]
	if !ok {
		return bulkAction{}, jobs.BulkFilter{}, db.Refuse(db.ErrNotFound, "console", fmt.Sprintf("%q is no bulk action", r.PathValue("action")))
	}
	f := jobs.BulkFilter{State: jobs.State(get("state")), Kind: get("kind"), Queue: get("queue")}
	switch {
	case f.State != "" && !slices.Contains(a.States, f.State):
		return a, f, invalid("state", "a "+a.Name+" takes jobs "+show.JoinStates(a.States))
	case len(f.Kind) > 200 || (f.Kind != "" && !jobs.ValidKind(f.Kind)):
		return a, f, invalid("kind", "not a job kind")
	case len(f.Queue) > 200 || (f.Queue != "" && !jobs.ValidQueue(f.Queue)):
		return a, f, invalid("queue", "not a queue name")
	}
	if a.Name == "cancel" {
		f.State = jobs.Queued
	}
	return a, f, nil
}

func (p *bulkPage) filter(f jobs.BulkFilter) {
	p.Kind, p.Queue = f.Kind, f.Queue
	q := url.Values{}
	if f.State != "" && p.Action.Name == "retry" {
		p.State = string(f.State)
		q.Set("state", p.State)
	}
	if f.Kind != "" {
		q.Set("kind", f.Kind)
	}
	if f.Queue != "" {
		q.Set("queue", f.Queue)
	}
	p.Query = q.Encode()
}

// bulkCount shows how many jobs a bulk action's filter matches now, with
// the form that acts on them.
func (h *Handler) bulkCount(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	a, f, err := bulkFilter(r, r.URL.Query().Get)
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	p := bulkPage{consoleFrame: h.frame(v, a.Verb+" jobs of "+project, project), Action: a, Max: jobs.MaxBulk, MaxNote: consoleMaxNote}
	p.filter(f)
	cl, err := h.jobsIn(v, project)
	if err == nil {
		p.Count, err = a.count(r, cl, f)
	}
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	h.render(w, http.StatusOK, "console_bulk", p)
}

// count is how many jobs a would act on now with filter f.
func (a bulkAction) count(r *http.Request, cl *jobs.Client, f jobs.BulkFilter) (int64, error) {
	if a.Name == "retry" {
		return cl.CountToRetry(r.Context(), f)
	}
	return cl.CountToCancel(r.Context(), f)
}

// bulkDo acts on up to jobs.MaxBulk of the jobs the posted filter matches,
// and says how many, against the count the visitor confirmed.
func (h *Handler) bulkDo(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	a, f, err := bulkFilter(r, r.PostForm.Get)
	if err == nil {
		err = confirmed(r)
	}
	var reason string
	if err == nil && a.Name == "cancel" {
		reason, err = formText(r, "reason")
	}
	counted, cerr := strconv.ParseInt(r.PostForm.Get("counted"), 10, 64)
	if err == nil && (cerr != nil || counted < 0) {
		err = invalid("counted", "the count the confirmation showed is missing")
	}
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	p := bulkPage{consoleFrame: h.frame(v, a.Verb+" jobs of "+project, project), Action: a, Counted: counted,
		Max: jobs.MaxBulk, Done: true}
	p.filter(f)
	cl, err := h.jobsIn(v, project)
	if err == nil {
		if a.Name == "retry" {
			p.Acted, err = cl.RetryMatching(r.Context(), f)
		} else {
			p.Acted, err = cl.CancelMatching(r.Context(), f, reason)
		}
	}
	if err == nil {
		p.Count, err = a.count(r, cl, f)
	}
	if err != nil {
		h.refuse(w, r, v, "job", err)
		return
	}
	p.More = p.Count > 0
	h.render(w, http.StatusOK, "console_bulk", p)
}

// queueRow is a queue on the queues page.
type queueRow struct {
	jobs.Queue
	// Counts are its jobs by state, from the project's census (see
	// queueCounts); none when the visitor may not see the project's jobs.
	Counts  []censusCount
	History []jobs.QueueEvent
}

type queuesPage struct {
	consoleFrame
	Queues []queueRow
	// SeesJobs: the visitor may read the project's jobs. A holder of
	// queue.view or queue.pause alone reads its queues but not its jobs,
	// and the census answers them with no cells at all: their queues
	// are not counted, rather than shown as empty.
	SeesJobs bool
	// Capped: some state has more jobs than the census counts; Cap is
	// how many it counts.
	Capped   bool
	Cap      int
	MayPause bool
	MaxNote  int
}

// queueList shows the project's queues: paused or running, how many jobs
// each holds in each state, who paused or resumed it and why, with the
// forms to pause and resume.
func (h *Handler) queueList(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	ctx := r.Context()
	p := queuesPage{consoleFrame: h.frame(v, "Queues of "+project, project), MaxNote: consoleMaxNote}
	cl, err := h.jobsIn(v, project)
	var qs []jobs.Queue
	var census jobs.Census
	if err == nil {
		qs, err = cl.Queues(ctx)
	}
	if err == nil {
		census, err = cl.Census(ctx, 0)
	}
	var held []access.Capability
	if err == nil {
		held, err = h.heldOn(ctx, v, project)
	}
	// A census with a cell was read by somebody who sees the jobs; an empty
	// one is told from "none to see" by the grants.
	p.SeesJobs = len(census.Cells) > 0 || readsJobs(held)
	p.MayPause = !h.readOnly && slices.Contains(held, access.QueuePause)
	if err != nil {
		h.refuse(w, r, v, "queue", err)
		return
	}
	pc := censusOf(census)
	p.Capped, p.Cap = pc.Capped, pc.Cap
	for _, q := range qs {
		row := queueRow{Queue: q}
		if p.SeesJobs {
			row.Counts = queueCounts(pc, q.Name)
		}
		if q.Revision > 0 {
			if row.History, err = cl.QueueHistory(ctx, q.Name); err != nil {
				h.refuse(w, r, v, "queue", err)
				return
			}
			slices.Reverse(row.History) // newest first
		}
		p.Queues = append(p.Queues, row)
	}
	h.render(w, http.StatusOK, "console_queues", p)
}

// queueCounts are queue's jobs by state, in the order of jobs.States, from
// pc, its project's census: queued and claimed always, since a pause holds
// up the one and lets the other run on, and each other state only when the
// queue has jobs in it. A count is marked Capped when the census stopped
// counting its state, so that it may be more than shown.
func queueCounts(pc projectCensus, queue string) []censusCount {
	i := slices.IndexFunc(pc.Rows, func(r censusRow) bool { return r.Queue == queue })
	var out []censusCount
	for j, s := range jobs.States {
		c := censusCount{State: s}
		if i >= 0 {
			c = pc.Rows[i].Counts[j]
		}
		c.Capped = pc.Totals[j].Capped
		if c.N > 0 || s == jobs.Queued || s == jobs.Claimed {
			out = append(out, c)
		}
	}
	return out
}

// queueSet pauses or resumes the path's queue with the form's reason; on
// the queues page itself, the form's queue (pausing one the page does not
// list: idle, never paused).
func (h *Handler) queueSet(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	queue, verb := r.PathValue("queue"), r.PathValue("verb")
	if queue == "" {
		queue, verb = r.PostForm.Get("queue"), "pause"
	}
	var err error
	switch {
	case verb != "pause" && verb != "resume":
		err = db.Refuse(db.ErrNotFound, "console", fmt.Sprintf("%q is not pause or resume", verb))
	case !jobs.ValidQueue(queue):
		err = invalid("queue", "not a queue name")
	default:
		err = confirmed(r)
	}
	var reason string
	if err == nil {
		reason, err = formText(r, "reason")
	}
	var cl *jobs.Client
	if err == nil {
		cl, err = h.jobsIn(v, project)
	}
	if err == nil {
		if verb == "pause" {
			_, err = cl.PauseQueue(r.Context(), queue, reason)
		} else {
			_, err = cl.ResumeQueue(r.Context(), queue, reason)
		}
	}
	if err != nil {
		h.refuse(w, r, v, "queue", err)
		return
	}
	http.Redirect(w, r, h.path(consolePath(project, "queues")+"#queue-"+url.PathEscape(queue)), http.StatusSeeOther)
}

type lanesPage struct {
	consoleFrame
	Lanes []lanes.Lane
	Next  string
}

// laneList shows the project's lanes, oldest first, each with its three
// axes: execution, review and merge.
func (h *Handler) laneList(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	after, err := queryID(r, "after")
	if err != nil {
		h.refuse(w, r, v, "lane", err)
		return
	}
	cl, err := lanes.NewClient(h.pool, lanes.Config{Actor: v.who, Clock: h.cfg.Clock})
	var list []lanes.Lane
	if err == nil {
		list, err = cl.List(r.Context(), lanes.Filter{Project: project, After: after, Limit: consoleRows + 1})
	}
	if err != nil {
		h.refuse(w, r, v, "lane", err)
		return
	}
	p := lanesPage{consoleFrame: h.frame(v, "Lanes of "+project, project), Lanes: list[:min(len(list), consoleRows)]}
	if len(list) > consoleRows {
		p.Next = pageLink(r.URL.Path, url.Values{"after": {strconv.FormatInt(p.Lanes[len(p.Lanes)-1].ID, 10)}})
	}
	h.render(w, http.StatusOK, "console_lanes", p)
}

type lanePage struct {
	consoleFrame
	Lane    lanes.Lane
	History []lanes.Event
	Jobs    []lanes.JobRef
}

// lanePage shows a lane's three axes, the lanes it depends on, its jobs and
// its history.
func (h *Handler) lanePage(w http.ResponseWriter, r *http.Request, v visitor, project string, id int64) {
	ctx := r.Context()
	cl, err := lanes.NewClient(h.pool, lanes.Config{Actor: v.who, Clock: h.cfg.Clock})
	var p lanePage
	if err == nil {
		p.Lane, err = cl.Get(ctx, id)
	}
	if err == nil && p.Lane.Project != project {
		err = db.Refuse(db.ErrNotFound, "console", fmt.Sprintf("lane %d is not of project %s", id, project))
	}
	if err == nil {
		p.History, err = cl.History(ctx, id)
	}
	if err == nil {
		p.Jobs, err = cl.Jobs(ctx, id, lanes.Page{Limit: consoleRows})
	}
	if err != nil {
		h.refuse(w, r, v, "lane", err)
		return
	}
	p.consoleFrame = h.frame(v, "Lane "+p.Lane.Name, project)
	h.render(w, http.StatusOK, "console_lane", p)
}
