package console

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/show"
	"github.com/docket-dev/docket/tasks"
)

// routeWorklist adds the worklist's routes: the tasks each visitor may take
// and hold, a task's page, and the forms to claim, release and decide it.
func (h *Handler) routeWorklist() {
	h.mux.HandleFunc("GET /{$}", h.signedIn(h.worklist))
	h.mux.HandleFunc("GET /tasks/{id}", h.signedIn(h.withTask(h.task)))
	h.mux.HandleFunc("POST /tasks/{id}/claim", h.signedIn(h.postedTask(h.claim)))
	h.mux.HandleFunc("POST /tasks/{id}/release", h.signedIn(h.postedTask(h.release)))
	h.mux.HandleFunc("POST /tasks/{id}/decide", h.signedIn(h.postedTask(h.decide)))
}

// withTask serves fn with the id of the path's task, and answers a path
// whose id is not a positive int64 with 404.
func (h *Handler) withTask(fn func(http.ResponseWriter, *http.Request, visitor, int64)) func(http.ResponseWriter, *http.Request, visitor) {
	return func(w http.ResponseWriter, r *http.Request, v visitor) {
		raw := r.PathValue("id")
		id, err := strconv.ParseInt(raw, 10, 64)
		if !idPattern.MatchString(raw) || err != nil {
			h.refuseTask(w, r, v, 0, db.Refuse(db.ErrNotFound, "console", fmt.Sprintf("%q is not a task id", raw)))
			return
		}
		fn(w, r, v, id)
	}
}

// postedTask serves fn to a form posted from a task's page (see
// [Handler.form]).
func (h *Handler) postedTask(fn func(http.ResponseWriter, *http.Request, visitor, int64)) func(http.ResponseWriter, *http.Request, visitor) {
	return h.withTask(func(w http.ResponseWriter, r *http.Request, v visitor, id int64) {
		if h.form(w, r, v, id, "task") {
			fn(w, r, v, id)
		}
	})
}

// taskRow is a task in a worklist.
type taskRow struct {
	ID         int64
	Title      string
	Status     tasks.Status
	Deadline   time.Time
	Left       string
	ClaimedBy  access.Actor
	ClaimUntil time.Time
}

// projectTasks is a project's part of a worklist.
type projectTasks struct {
	Name         string
	Held, Queued []taskRow
	More         bool
}

type worklistPage struct {
	frame
	Projects []projectTasks
	Rows     int
}

// worklist shows, for each project served (when none are configured,
// each the visitor holds a grant in), the tasks the visitor may take
// now and those they hold.
func (h *Handler) worklist(w http.ResponseWriter, r *http.Request, v visitor) {
	now := h.cfg.Clock.Now()
	p := worklistPage{frame: v.frame("Worklist"), Rows: worklistRows}
	names := h.cfg.Projects
	if len(names) == 0 {
		var err error
		if names, err = h.projects(r.Context(), v); err != nil {
			h.refuseTask(w, r, v, 0, err)
			return
		}
	}
	for _, name := range names {
		list, err := v.tasks.Worklist(r.Context(), name, false, tasks.Page{Limit: worklistRows + 1})
		if err != nil {
			h.refuseTask(w, r, v, 0, err)
			return
		}
		pt := projectTasks{Name: name, More: len(list) > worklistRows}
		for _, t := range list[:min(len(list), worklistRows)] {
			row := taskRow{ID: t.ID, Title: t.Title, Status: t.Status, Deadline: t.Deadline, Left: show.DueIn(t.Deadline.Sub(now))}
			if liveClaim(t, now) {
				row.ClaimedBy, row.ClaimUntil = t.Claim.Holder, t.Claim.Until
			}
			if row.ClaimedBy == v.who {
				pt.Held = append(pt.Held, row)
			} else {
				pt.Queued = append(pt.Queued, row)
			}
		}
		p.Projects = append(p.Projects, pt)
	}
	h.render(w, http.StatusOK, "worklist", p)
}

// liveClaim reports whether a claim holds t at now.
func liveClaim(t tasks.Task, now time.Time) bool { return t.Claim != nil && t.Claim.Until.After(now) }

// historyRow is an event of a task's history, as shown.
type historyRow struct {
	At     time.Time
	What   string
	Actor  access.Actor
	Detail string
}

type taskPage struct {
	frame
	Task               tasks.Task
	Proposal, Evidence string
	Left               string
	// HeldByMe and HeldByOther say who holds a live claim on it.
	HeldByMe, HeldByOther bool
	// Takeable: undecided and not held by another, so the visitor may try
	// to claim or answer it.
	Takeable bool
	// Excluded: the visitor may not claim or answer it (four eyes).
	Excluded bool
	// OnExpiry and Audience say, in words, what the deadline does and who
	// may take the task.
	OnExpiry, Audience string
	History            []historyRow
	MaxNote            int
	ClaimMinutes       int
}

// task shows a task: what is to be decided and what for, who may not answer
// it, its claim, its decision and its history, with the forms to act on it.
func (h *Handler) task(w http.ResponseWriter, r *http.Request, v visitor, id int64) {
	t, err := v.tasks.Get(r.Context(), id)
	if err != nil {
		h.refuseTask(w, r, v, 0, err)
		return
	}
	events, err := v.tasks.History(r.Context(), id)
	if err != nil {
		h.refuseTask(w, r, v, 0, err)
		return
	}
	now := h.cfg.Clock.Now()
	p := taskPage{frame: v.frame(t.Title), Task: t, Proposal: prettyJSON(t.Proposal), Evidence: prettyJSON(t.Evidence),
		Left: show.DueIn(t.Deadline.Sub(now)), Excluded: slices.Contains(t.Excluded, v.who), OnExpiry: show.Expiry(t),
		Audience: show.Audience(t), MaxNote: tasks.MaxNote, ClaimMinutes: int(tasks.DefaultClaim / time.Minute)}
	if liveClaim(t, now) {
		p.HeldByMe, p.HeldByOther = t.Claim.Holder == v.who, t.Claim.Holder != v.who
	}
	p.Takeable = t.Pending() && !p.HeldByOther
	for _, e := range events {
		p.History = append(p.History, historyRow{At: e.At, What: e.What, Actor: e.Actor, Detail: show.CompactJSON(e.Detail)})
	}
	h.render(w, http.StatusOK, "task", p)
}

// claim claims the task for the default lease.
func (h *Handler) claim(w http.ResponseWriter, r *http.Request, v visitor, id int64) {
	if _, err := v.tasks.Claim(r.Context(), id, 0); err != nil {
		h.refuseTask(w, r, v, id, err)
		return
	}
	http.Redirect(w, r, h.path(taskPath(id)), http.StatusSeeOther)
}

// release gives back the visitor's claim on the task.
func (h *Handler) release(w http.ResponseWriter, r *http.Request, v visitor, id int64) {
	t, err := v.tasks.Get(r.Context(), id)
	if err == nil {
		_, err = v.tasks.Release(r.Context(), t)
	}
	if err != nil {
		h.refuseTask(w, r, v, id, err)
		return
	}
	http.Redirect(w, r, h.path(taskPath(id)), http.StatusSeeOther)
}

// decide answers the task with the form's decision and note.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request, v visitor, id int64) {
	decision := r.PostForm.Get("decision")
	// A browser sends a textarea's line breaks as CRLF.
	note := strings.TrimSpace(strings.ReplaceAll(r.PostForm.Get("note"), "\r\n", "\n"))
	var err error
	switch n := utf8.RuneCountInString(note); {
	case decision == "":
		err = db.Refuse(db.ErrInvalidArgument, "task.decide", "choose one of the task's decisions", "task", id)
	case !utf8.ValidString(note):
		err = db.Refuse(db.ErrInvalidArgument, "task.decide", "the note is not UTF-8 text", "task", id)
	case n > tasks.MaxNote:
		err = db.Refuse(db.ErrInvalidArgument, "task.decide", fmt.Sprintf("a note of %d characters: at most %d", n, tasks.MaxNote), "task", id)
	default:
		_, err = v.tasks.Decide(r.Context(), id, decision, note)
	}
	if err != nil {
		h.refuseTask(w, r, v, id, err)
		return
	}
	http.Redirect(w, r, h.path(taskPath(id)), http.StatusSeeOther)
}

func taskPath(id int64) string { return "/tasks/" + strconv.FormatInt(id, 10) }

// refuse answers err, the refusal of the visitor's act on task id (0: none,
// or a read), with a page that says why in words and the status that goes
// with it. What the database did not refuse is logged and answered 500.
func (h *Handler) refuseTask(w http.ResponseWriter, r *http.Request, v visitor, id int64, err error) {
	p := refusalPage{frame: v.frame("Refused"), TaskID: id}
	// reread is the task as it is now, or nil.
	reread := func() *tasks.Task {
		if v.tasks == nil || id == 0 {
			return nil
		}
		t, err := v.tasks.Get(r.Context(), id)
		if err != nil {
			return nil
		}
		return &t
	}
	switch {
	case errors.Is(err, db.ErrExcludedActor):
		p.Status, p.Reason, p.Heading = http.StatusForbidden, "four-eyes", "Four eyes: not yours to answer"
		p.Lines = []string{"You proposed this task, admitted its case, or act for someone in it, so you may not claim or answer it. " +
			"Someone else in its audience has to."}
		if t := reread(); t != nil {
			switch {
			case t.Proposer == v.who:
				p.Lines = append(p.Lines, "You are its proposer.")
			case slices.Contains(t.ActingFor, v.who):
				p.Lines = append(p.Lines, "The work it decides acts for you.")
			default:
				p.Lines = append(p.Lines, "You admitted its case.")
			}
		}
	case errors.Is(err, db.ErrAlreadyAnswered):
		p.Status, p.Reason, p.Heading = http.StatusConflict, "answered", "Already answered"
		p.Lines = []string{"This task was settled before your request reached it, which changed nothing."}
		p.Task = reread()
	case errors.Is(err, db.ErrStaleClaim):
		p.Status, p.Reason, p.Heading = http.StatusConflict, "claimed", "Claimed by someone else"
		p.Lines = []string{"Somebody else holds this task, which changed nothing."}
		if t := reread(); t != nil {
			now := h.cfg.Clock.Now()
			switch {
			case liveClaim(*t, now) && t.Claim.Holder != v.who:
				p.Lines = []string{fmt.Sprintf("%s holds this task until %s; it comes back to the worklist when they release it or then. Nothing was changed.",
					t.Claim.Holder, t.Claim.Until.UTC().Format("2006-01-02 15:04:05 UTC"))}
			case !liveClaim(*t, now):
				p.Lines = []string{"Your claim on this task is gone: it ran out or was released. Nothing was changed."}
			}
			if !t.Pending() {
				p.Task = t
			}
		}
	case errors.Is(err, db.ErrNotFound):
		p.Status, p.Reason, p.Heading = http.StatusNotFound, "not-found", "No such task"
		p.Lines = []string{"There is no such task, or you may not see it."}
		p.TaskID = 0
	case errors.Is(err, db.ErrNotPermitted):
		p.Status, p.Reason, p.Heading = http.StatusForbidden, "not-permitted", "Not yours to take"
		p.Lines = []string{"You may see this task, but you are not in its audience: you may not claim or answer it."}
	case errors.Is(err, db.ErrInvalidArgument):
		p.Status, p.Reason, p.Heading = http.StatusBadRequest, "invalid", "Not accepted"
		msg := err.Error()
		if e, ok := errors.AsType[*db.Error](err); ok && e.Message != "" {
			msg = e.Message
		}
		p.Lines = []string{msg, "Nothing was changed."}
	default:
		h.cfg.Logger.Error("docket console: request failed", "method", r.Method, "path", r.URL.Path, "principal", v.who, "error", err)
		p.Status, p.Reason, p.Heading = http.StatusInternalServerError, "failed", "Something went wrong"
		p.Lines = []string{"docket could not do that just now; try again in a moment. The server's log says what went wrong."}
	}
	h.render(w, p.Status, "refusal", p)
}
