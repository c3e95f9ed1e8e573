package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
)

// Bounds of the console.
const (
	// consoleRows is the most rows a console list shows per page.
	consoleRows = 50
	// consolePreview is how many next runs a schedule's page shows.
	consolePreview = 10
	// consoleHistoryRows is the most events a case's page shows.
	consoleHistoryRows = 200
	// consoleMaxNote bounds a reconcile note or a cancel reason, in
	// characters.
	consoleMaxNote = 2000
	// consoleShowPayload is how many characters of a job's payload its
	// page shows.
	consoleShowPayload = 4000
)

// routeConsole adds the operators' pages: jobs, cases, waits, dead letters,
// schedules, plans' runs and batches of the projects served.
func (h *Handler) routeConsole() {
	m := h.mux
	m.HandleFunc("GET /console/{$}", h.signedIn(h.readable(h.overview)))
	m.HandleFunc("GET /console/{project}/jobs", h.signedIn(h.readable(h.inProject(h.jobList))))
	m.HandleFunc("GET /console/{project}/uncertain", h.signedIn(h.readable(h.inProject(h.uncertainList))))
	m.HandleFunc("GET /console/{project}/dead", h.signedIn(h.readable(h.inProject(h.deadList))))
	m.HandleFunc("GET /console/{project}/jobs/{id}", h.signedIn(h.readable(h.withID("job", h.jobPage))))
	m.HandleFunc("POST /console/{project}/jobs/{id}/reconcile", h.signedIn(h.posted(h.withID("job", h.reconcile))))
	m.HandleFunc("POST /console/{project}/jobs/{id}/cancel", h.signedIn(h.posted(h.withID("job", h.cancel))))
	m.HandleFunc("GET /console/{project}/cases", h.signedIn(h.readable(h.inProject(h.caseList))))
	m.HandleFunc("GET /console/{project}/cases/{id}", h.signedIn(h.readable(h.withID("case", h.casePage))))
	m.HandleFunc("GET /console/{project}/waits", h.signedIn(h.readable(h.inProject(h.waitList))))
	m.HandleFunc("GET /console/{project}/dead-letters", h.signedIn(h.readable(h.inProject(h.deadLetterList))))
	m.HandleFunc("GET /console/{project}/schedules", h.signedIn(h.readable(h.inProject(h.scheduleList))))
	m.HandleFunc("GET /console/{project}/schedules/{id}", h.signedIn(h.readable(h.withID("schedule", h.schedulePage))))
	m.HandleFunc("GET /console/{project}/runs", h.signedIn(h.readable(h.inProject(h.runList))))
	m.HandleFunc("GET /console/{project}/runs/{id}", h.signedIn(h.readable(h.withID("run", h.runPage))))
	m.HandleFunc("GET /console/{project}/batches", h.signedIn(h.readable(h.inProject(h.batchList))))
	m.HandleFunc("GET /console/{project}/batches/{id}", h.signedIn(h.readable(h.withID("batch", h.batchPage))))
	h.routeActions()
}

// consoleFrame is what every console page shows besides the frame: the
// project it is about, and whether the console runs read-only.
type consoleFrame struct {
	frame
	Project  string
	ReadOnly bool
}

func (h *Handler) frame(v visitor, title, project string) consoleFrame {
	return consoleFrame{frame: v.frame(title), Project: project, ReadOnly: h.readOnly}
}

// serves reports whether the console serves project p: one of
// Config.Projects, or when none are configured any project name.
func (h *Handler) serves(p string) bool {
	if len(h.cfg.Projects) == 0 {
		return projectName.MatchString(p)
	}
	return slices.Contains(h.cfg.Projects, p)
}

// projects are the projects the console serves in which the visitor holds
// a grant, in name order. The candidates are Config.Projects, or when none
// are configured the projects the pool's login may see.
func (h *Handler) projects(ctx context.Context, v visitor) ([]string, error) {
	candidates := h.cfg.Projects
	if len(candidates) == 0 {
		cl, err := projects.NewClient(h.pool, projects.Config{Actor: v.who, Clock: h.cfg.Clock})
		if err != nil {
			return nil, err
		}
		for after := ""; ; {
			page, err := cl.List(ctx, projects.Filter{After: after, Limit: db.MaxPage})
			if err != nil {
				return nil, err
			}
			for _, p := range page {
				candidates = append(candidates, p.Name)
			}
			if len(page) < db.MaxPage {
				break
			}
			after = page[len(page)-1].Name
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	ac, err := access.NewClient(h.pool, access.Config{Actor: v.who, Clock: h.cfg.Clock})
	if err != nil {
		return nil, err
	}
	held, err := ac.Held(ctx, v.who, candidates...)
	if err != nil {
		return nil, err
	}
	var shown []string
	for _, p := range candidates {
		if len(held[p]) > 0 {
			shown = append(shown, p)
		}
	}
	return shown, nil
}

// inProject serves fn with the path's project, and answers a project the
// console does not serve with 404. What the visitor sees of a project
// served is the database's to decide.
func (h *Handler) inProject(fn func(http.ResponseWriter, *http.Request, visitor, string)) func(http.ResponseWriter, *http.Request, visitor) {
	return func(w http.ResponseWriter, r *http.Request, v visitor) {
		p := r.PathValue("project")
		if !h.serves(p) {
			h.refuse(w, r, v, "project", db.Refuse(db.ErrNotFound, "console", fmt.Sprintf("%q is not a project this console serves", p)))
			return
		}
		fn(w, r, v, p)
	}
}

// withID serves h with the path's project and the id of its noun, and
// answers an id that is not a positive int64 (as idPattern has it) with
// 404.
func (h *Handler) withID(noun string, fn func(http.ResponseWriter, *http.Request, visitor, string, int64)) func(http.ResponseWriter, *http.Request, visitor) {
	return h.inProject(func(w http.ResponseWriter, r *http.Request, v visitor, project string) {
		raw := r.PathValue("id")
		id, err := strconv.ParseInt(raw, 10, 64)
		if !idPattern.MatchString(raw) || err != nil {
			h.refuse(w, r, v, noun, db.Refuse(db.ErrNotFound, "console", fmt.Sprintf("%q is not a %s id", raw, noun)))
			return
		}
		fn(w, r, v, project, id)
	})
}

// readable serves h, or, when the console runs read-only, refuses the page
// before the database is asked: a docket_reader login reads what its own
// principals may see, not what the person signed in may, and calls no API
// function the console's pages read through.
func (h *Handler) readable(fn func(http.ResponseWriter, *http.Request, visitor)) func(http.ResponseWriter, *http.Request, visitor) {
	return func(w http.ResponseWriter, r *http.Request, v visitor) {
		if h.readOnly {
			h.refuse(w, r, v, "page", db.Refuse(db.ErrNotPermitted, "console", "the console's login is a docket_reader member only"))
			return
		}
		fn(w, r, v)
	}
}

// posted serves fn to a form posted from the console's own pages (see
// [Handler.form]). An action is a route of the form
// "POST /console/{project}/<noun>/{id}/<verb>" served by
// h.signedIn(h.posted(h.withID(noun, fn))): fn changes what it names
// through docket's API as the visitor, answers a refusal with h.refuse and
// a change with a 303 to the page of what it changed.
func (h *Handler) posted(fn func(http.ResponseWriter, *http.Request, visitor)) func(http.ResponseWriter, *http.Request, visitor) {
	return func(w http.ResponseWriter, r *http.Request, v visitor) {
		if h.form(w, r, v, 0, "console") {
			fn(w, r, v)
		}
	}
}

// may reports whether the visitor holds capability on project, so that a
// page offers the form that needs it. It only decides what is shown: the
// database checks the grant again when the form is posted.
func (h *Handler) may(ctx context.Context, v visitor, project string, capability access.Capability) (bool, error) {
	if h.readOnly {
		return false, nil
	}
	ac, err := access.NewClient(h.pool, access.Config{Actor: v.who, Clock: h.cfg.Clock})
	if err != nil {
		return false, err
	}
	return ac.Allowed(ctx, access.Grant{Principal: v.who, Project: project, Capability: capability})
}

// jobReaders are the capabilities that read a project's jobs, as
// docket.job_visible has them: job.view, and every other job capability.
// TestJobReadersAreJobVisible holds them to the database's function.
var jobReaders = []access.Capability{access.JobView, access.JobCreate, access.JobClaim, access.JobCancel,
	access.JobReconcile, access.JobPin, access.JobRetry}

// heldOn is what the visitor holds explicitly on project, in one read:
// what a page that asks several capabilities of one project derives its
// answers from, rather than asking may once for each.
func (h *Handler) heldOn(ctx context.Context, v visitor, project string) ([]access.Capability, error) {
	ac, err := access.NewClient(h.pool, access.Config{Actor: v.who, Clock: h.cfg.Clock})
	if err != nil {
		return nil, err
	}
	held, err := ac.Held(ctx, v.who, project)
	return held[project], err
}

// readsJobs reports whether capabilities caps read a project's jobs: one of
// jobReaders. The jobs reads answer a visitor who may not with nothing, not
// a refusal, so a page asks this to tell "none" from "none you may see".
func readsJobs(caps []access.Capability) bool {
	return slices.ContainsFunc(caps, func(c access.Capability) bool { return slices.Contains(jobReaders, c) })
}

// refuse answers err, the refusal of the visitor's read or act on a noun
// (job, case …), with the refusal page: the status and words that go with
// it. What the database did not refuse is logged and answered 500.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, v visitor, noun string, err error) {
	p := refusalPage{frame: v.frame("Refused")}
	message := err.Error()
	if e, ok := errors.AsType[*db.Error](err); ok && e.Message != "" {
		message = e.Message
	}
	pruned, isPruned := errors.AsType[*jobs.PrunedError](err)
	switch {
	case isPruned && h.serves(pruned.Project):
		p.Status, p.Reason, p.Heading = http.StatusGone, "pruned", "Pruned"
		p.Lines = []string{fmt.Sprintf("Job %d finished and was removed by prune %d at %s, by %s, past its project's retention horizon.",
			pruned.Job, pruned.Prune, pruned.At.UTC().Format("2006-01-02 15:04:05 UTC"), pruned.By),
			"docket.prunes keeps the record of what the prune removed."}
	case errors.Is(err, db.ErrNotPermitted) && h.readOnly:
		p.Status, p.Reason, p.Heading = http.StatusForbidden, "reader-login", "This console cannot read as you"
		p.Lines = []string{"Its database login is a docket_reader member: it reads what its own principals may see, " +
			"not through the API the console reads through as the person signed in, and that does not know your grants.",
			"Ask whoever runs docket serve to give it a docket_app login bound to the principals it signs in."}
	case errors.Is(err, db.ErrNotFound):
		p.Status, p.Reason, p.Heading = http.StatusNotFound, "not-found", "No such "+noun
		p.Lines = []string{"There is no such " + noun + " in the projects this console serves, or you may not see it."}
	case errors.Is(err, db.ErrNotPermitted):
		p.Status, p.Reason, p.Heading = http.StatusForbidden, "not-permitted", "Not permitted"
		p.Lines = []string{"The database refused: you do not hold the grant this needs on the " + noun + "'s project.",
			"Nothing was changed."}
	case errors.Is(err, db.ErrIllegalTransition), errors.Is(err, db.ErrTerminal):
		p.Status, p.Reason, p.Heading = http.StatusConflict, "changed", "Not in a state for that"
		p.Lines = []string{"The " + noun + " is no longer where the page showed it: " + message + ".",
			"Nothing was changed. Open it again to see where it is now."}
	case errors.Is(err, db.ErrInvalidArgument):
		p.Status, p.Reason, p.Heading = http.StatusBadRequest, "invalid", "Not accepted"
		p.Lines = []string{message, "Nothing was changed."}
	default:
		h.cfg.Logger.Error("docket console: request failed", "method", r.Method, "path", r.URL.Path, "principal", v.who, "error", err)
		p.Status, p.Reason, p.Heading = http.StatusInternalServerError, "failed", "Something went wrong"
		p.Lines = []string{"docket could not do that just now; try again in a moment. The server's log says what went wrong."}
	}
	h.render(w, p.Status, "refusal", p)
}

// invalid is a refusal of a bad query parameter or form field.
func invalid(field, why string) error {
	return db.Refuse(db.ErrInvalidArgument, "console", field+": "+why)
}

// formText reads a free-text form field: trimmed, its CRLFs made LFs, UTF-8
// and at most consoleMaxNote characters.
func formText(r *http.Request, field string) (string, error) {
	s := strings.TrimSpace(strings.ReplaceAll(r.PostForm.Get(field), "\r\n", "\n"))
	switch n := utf8.RuneCountInString(s); {
	case !utf8.ValidString(s):
		return "", invalid(field, "not UTF-8 text")
	case n > consoleMaxNote:
		return "", invalid(field, fmt.Sprintf("%d characters: at most %d", n, consoleMaxNote))
	}
	return s, nil
}

// queryID reads an optional id parameter of the query (a keyset cursor):
// 0 when absent, else a positive int64 as idPattern has it.
func queryID(r *http.Request, name string) (int64, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if !idPattern.MatchString(raw) || err != nil {
		return 0, invalid(name, fmt.Sprintf("%q is not an id", raw))
	}
	return id, nil
}

// queryText reads an optional text parameter of the query: UTF-8, at most
// max bytes, no control characters.
func queryText(r *http.Request, name string, max int) (string, error) {
	s := r.URL.Query().Get(name)
	if len(s) > max || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
	}) {
		return "", invalid(name, fmt.Sprintf("not a value of at most %d bytes of printable text", max))
	}
	return s, nil
}

// pageLink is the path of list with query q, for the next page's link.
func pageLink(list string, q url.Values) string {
	if len(q) == 0 {
		return list
	}
	return list + "?" + q.Encode()
}

func consolePath(project string, parts ...any) string {
	var b strings.Builder
	b.WriteString("/console/" + url.PathEscape(project))
	for _, p := range parts {
		fmt.Fprintf(&b, "/%v", p)
	}
	return b.String()
}

// notFound is the refusal of a noun's id that is not in the path's project.
func notFound(noun string, id int64) error {
	return db.Refuse(db.ErrNotFound, "console", fmt.Sprintf("no %s %d in this project", noun, id), noun, id)
}
