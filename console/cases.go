package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/internal/show"
)

func (h *Handler) cases(v visitor) (*cases.Client, error) {
	return cases.NewClient(h.pool, cases.Config{Actor: v.who, Clock: h.cfg.Clock, Replica: h.cfg.Replica})
}

type caseListPage struct {
	consoleFrame
	Statuses []cases.Status
	Status   string
	Cases    []cases.Case
	Next     string
}

// caseList lists a project's cases the visitor may see, oldest first, a
// page at a time.
func (h *Handler) caseList(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	status := cases.Status(r.URL.Query().Get("status"))
	after, err := queryID(r, "after")
	if err == nil && status != "" && !slices.Contains(cases.Statuses, status) {
		err = invalid("status", "want one of "+show.JoinStates(cases.Statuses))
	}
	var list []cases.Case
	if err == nil {
		var cl *cases.Client
		if cl, err = h.cases(v); err == nil {
			list, err = cl.List(r.Context(), cases.Filter{Project: project, Status: status, After: after, Limit: consoleRows + 1})
		}
	}
	if err != nil {
		h.refuse(w, r, v, "case", err)
		return
	}
	p := caseListPage{consoleFrame: h.frame(v, "Cases of "+project, project), Statuses: cases.Statuses, Status: string(status),
		Cases: list[:min(len(list), consoleRows)]}
	if len(list) > consoleRows {
		q := r.URL.Query()
		q.Set("after", strconv.FormatInt(p.Cases[len(p.Cases)-1].ID, 10))
		p.Next = pageLink(r.URL.Path, q)
	}
	h.render(w, http.StatusOK, "console_cases", p)
}

// waitRow is a wait as a console table shows it.
type waitRow struct {
	ID, CaseID int64
	Name       string
	Status     cases.WaitStatus
	Keys       string
	Deadline   time.Time
	Left       string
	OnArrival  string
	OnTimeout  string
	// ArrivalJobID is the job a satisfied wait's arrival continuation
	// enqueued, TimeoutJobID the one an expired wait's timeout
	// continuation did; 0 when that continuation did not run.
	ArrivalJobID, TimeoutJobID int64
}

func (h *Handler) waitRowOf(x cases.Wait) waitRow {
	row := waitRow{ID: x.ID, CaseID: x.CaseID, Name: show.Printable(x.Name), Status: x.Status, Keys: show.Keys(x.Keys),
		Deadline: x.Deadline, Left: "–", OnArrival: x.OnArrival.Kind, OnTimeout: "–"}
	switch x.Status {
	case cases.Satisfied:
		row.ArrivalJobID = x.ContinuationJobID
	case cases.Expired:
		row.TimeoutJobID = x.ContinuationJobID
	}
	if x.Status == cases.Waiting {
		row.Left = show.TimeLeft(x.Deadline.Sub(h.cfg.Clock.Now()))
	}
	if x.OnTimeout != nil {
		row.OnTimeout = x.OnTimeout.Kind
	}
	return row
}

// obligationRow is an obligation as a case's page shows it.
type obligationRow struct {
	ID         int64
	Name       string
	State      cases.ObligationState
	Due        time.Time
	Left       string
	Rule       string
	Escalation string
	JobID      int64
}

// caseEvent is an event of a case's history, as shown.
type caseEvent struct {
	At       time.Time
	What     cases.EventType
	From, To string
	Actor    access.Actor
	Detail   string
}

type casePage struct {
	consoleFrame
	Case        cases.Case
	StateBytes  int
	Keys        []cases.KeyClaim
	Obligations []obligationRow
	Waits       []waitRow
	History     []caseEvent
	MoreHistory int
}

// casePage shows a case: its keys, its obligations, its waits and its
// history; of its state only the size (it is the application's, untrusted).
func (h *Handler) casePage(w http.ResponseWriter, r *http.Request, v visitor, project string, id int64) {
	ctx := r.Context()
	cl, err := h.cases(v)
	var k cases.Case
	if err == nil {
		k, err = cl.Get(ctx, id)
	}
	if err == nil && k.Project != project {
		err = notFound("case", id)
	}
	p := casePage{consoleFrame: h.frame(v, "Case "+strconv.FormatInt(id, 10), project), Case: k, StateBytes: len(k.State)}
	var obligations []cases.Obligation
	var waits []cases.Wait
	var events []cases.Event
	if err == nil {
		p.Keys, err = cl.Keys(ctx, id)
	}
	if err == nil {
		obligations, err = cl.Obligations(ctx, id)
	}
	if err == nil {
		waits, err = cl.Waits(ctx, id)
	}
	if err == nil {
		events, err = cl.History(ctx, id)
	}
	if err != nil {
		h.refuse(w, r, v, "case", err)
		return
	}
	now := h.cfg.Clock.Now()
	for _, o := range obligations {
		row := obligationRow{ID: o.ID, Name: show.Printable(o.Name), State: o.State, Due: o.Due, Left: "–", Rule: show.Dash(show.Printable(o.Rule)),
			Escalation: "–", JobID: o.EscalationJobID}
		if o.State == cases.Pending {
			row.Left = show.TimeLeft(o.Due.Sub(now))
		}
		if o.Escalation != nil {
			row.Escalation = o.Escalation.Kind
		}
		p.Obligations = append(p.Obligations, row)
	}
	for _, x := range waits {
		p.Waits = append(p.Waits, h.waitRowOf(x))
	}
	if len(events) > consoleHistoryRows {
		p.MoreHistory = len(events) - consoleHistoryRows
		events = events[len(events)-consoleHistoryRows:]
	}
	for _, e := range events {
		p.History = append(p.History, caseEvent{At: e.At, What: e.Type, From: show.Dash(e.From), To: show.Dash(e.To), Actor: e.Actor,
			Detail: show.Printable(show.CompactJSON(e.Detail))})
	}
	h.render(w, http.StatusOK, "console_case", p)
}

type waitListPage struct {
	consoleFrame
	Waits []waitRow
	Next  string
}

// waitList lists a project's waiting waits the visitor may see, soonest
// deadline first, a page at a time (after: the last wait of the page
// before).
func (h *Handler) waitList(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	ctx := r.Context()
	after, err := queryID(r, "after")
	var cl *cases.Client
	if err == nil {
		cl, err = h.cases(v)
	}
	f := cases.WaitingFilter{Project: project, Limit: consoleRows + 1}
	if err == nil && after != 0 {
		var last cases.Wait
		if last, err = cl.Wait(ctx, after); err == nil {
			f.After = &last
		}
	}
	var list []cases.Wait
	if err == nil {
		list, err = cl.Waiting(ctx, f)
	}
	if err != nil {
		h.refuse(w, r, v, "wait", err)
		return
	}
	p := waitListPage{consoleFrame: h.frame(v, "Waits of "+project, project)}
	for _, x := range list[:min(len(list), consoleRows)] {
		p.Waits = append(p.Waits, h.waitRowOf(x))
	}
	if len(list) > consoleRows {
		p.Next = pageLink(r.URL.Path, url.Values{"after": {strconv.FormatInt(p.Waits[len(p.Waits)-1].ID, 10)}})
	}
	h.render(w, http.StatusOK, "console_waits", p)
}

// deadLetterRow is a dead letter as shown: who sent it and the keys it was
// filed under, never its payload.
type deadLetterRow struct {
	ID             int64
	Producer       string
	MessageID      string
	Keys           string
	Addressee      int64
	Age            string
	DeadLetteredAt time.Time
	Reason         string
}

type deadLetterPage struct {
	consoleFrame
	Letters []deadLetterRow
	Next    string
}

// deadLetterList lists a project's dead letters, newest first, a page at a
// time.
func (h *Handler) deadLetterList(w http.ResponseWriter, r *http.Request, v visitor, project string) {
	before, err := queryID(r, "before")
	var list []cases.DeadLetter
	if err == nil {
		var cl *cases.Client
		if cl, err = h.cases(v); err == nil {
			list, err = cl.DeadLetters(r.Context(), cases.DeadLetterFilter{Project: project, Before: before, Limit: consoleRows + 1})
		}
	}
	if err != nil {
		h.refuse(w, r, v, "dead letter", err)
		return
	}
	p := deadLetterPage{consoleFrame: h.frame(v, "Dead letters of "+project, project)}
	now := h.cfg.Clock.Now()
	for _, m := range list[:min(len(list), consoleRows)] {
		p.Letters = append(p.Letters, deadLetterRow{ID: m.ID, Producer: show.Printable(m.Producer), MessageID: show.Printable(m.MessageID),
			Keys: show.Keys(m.Keys), Addressee: m.Addressee, Age: show.Span(max(now.Sub(m.ArrivedAt), 0)), DeadLetteredAt: m.DeadLetteredAt,
			Reason: show.Dash(show.Printable(m.Reason))})
	}
	if len(list) > consoleRows {
		p.Next = pageLink(r.URL.Path, url.Values{"before": {strconv.FormatInt(p.Letters[len(p.Letters)-1].ID, 10)}})
	}
	h.render(w, http.StatusOK, "console_dead_letters", p)
}
