package main

import (
	"context"
	"crypto/subtle"
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

// console is the operators' pages of docket serve, beside the worklist:
// jobs, cases, waits, dead letters, schedules, plans' runs and batches of
// the projects served. Each request reads and writes through docket's API
// as the principal it is signed in as, so the database's grants decide what
// it sees and may do.
type console struct {
	*worklistServer
	// login is the role serve's pool logs in as, for the server's log
	// (the pages do not name it).
	login string
	// readOnly: the login is a docket_reader member that can call none of
	// the API's writes. Forms are hidden and every POST is refused before
	// the database is asked.
	readOnly bool
}

// registerConsole adds the console's routes to s, after asking the database
// what serve's login may do.
func registerConsole(s *worklistServer) error {
	c := &console{worklistServer: s}
	ctx, cancel := context.WithTimeout(context.Background(), serveRequestTimeout)
	defer cancel()
	if err := c.probeLogin(ctx); err != nil {
		return err
	}
	if c.readOnly {
		s.cfg.Logger.Warn("docket serve: its database login is a docket_reader member only, which reads docket's tables "+
			"and views as its own principals may but calls no API: the console runs read-only and can show nobody anything; "+
			"serve with a docket_app login bound to the principals it signs in", "login", c.login)
	}
	m := s.mux
	m.HandleFunc("GET /console/{$}", s.signedIn(c.readable(c.overview)))
	m.HandleFunc("GET /console/{project}/jobs", s.signedIn(c.readable(c.inProject(c.jobList))))
	m.HandleFunc("GET /console/{project}/uncertain", s.signedIn(c.readable(c.inProject(c.uncertainList))))
	m.HandleFunc("GET /console/{project}/dead", s.signedIn(c.readable(c.inProject(c.deadList))))
	m.HandleFunc("GET /console/{project}/jobs/{id}", s.signedIn(c.readable(c.withID("job", c.jobPage))))
	m.HandleFunc("POST /console/{project}/jobs/{id}/reconcile", s.signedIn(c.posted(c.withID("job", c.reconcile))))
	m.HandleFunc("POST /console/{project}/jobs/{id}/cancel", s.signedIn(c.posted(c.withID("job", c.cancel))))
	m.HandleFunc("GET /console/{project}/cases", s.signedIn(c.readable(c.inProject(c.caseList))))
	m.HandleFunc("GET /console/{project}/cases/{id}", s.signedIn(c.readable(c.withID("case", c.casePage))))
	m.HandleFunc("GET /console/{project}/waits", s.signedIn(c.readable(c.inProject(c.waitList))))
	m.HandleFunc("GET /console/{project}/dead-letters", s.signedIn(c.readable(c.inProject(c.deadLetterList))))
	m.HandleFunc("GET /console/{project}/schedules", s.signedIn(c.readable(c.inProject(c.scheduleList))))
	m.HandleFunc("GET /console/{project}/schedules/{id}", s.signedIn(c.readable(c.withID("schedule", c.schedulePage))))
	m.HandleFunc("GET /console/{project}/runs", s.signedIn(c.readable(c.inProject(c.runList))))
	m.HandleFunc("GET /console/{project}/runs/{id}", s.signedIn(c.readable(c.withID("run", c.runPage))))
	m.HandleFunc("GET /console/{project}/batches", s.signedIn(c.readable(c.inProject(c.batchList))))
	m.HandleFunc("GET /console/{project}/batches/{id}", s.signedIn(c.readable(c.withID("batch", c.batchPage))))
	return nil
}

// probeLogin learns whom serve's pool logs in as, and whether that login is
// a docket_reader member that may call no API function: not a member of
// docket_app or docket_operator, not the schema's owner, not a superuser.
func (c *console) probeLogin(ctx context.Context) error {
	var reader, writer bool
	err := c.pool.QueryRow(ctx, `
SELECT session_user::text,
       coalesce(bool_or(pg_has_role(session_user, r.oid, 'MEMBER')) FILTER (WHERE r.rolname = 'docket_reader'), false),
       coalesce(bool_or(pg_has_role(session_user, r.oid, 'MEMBER')) FILTER (WHERE r.rolname <> 'docket_reader'), false)
         OR coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = session_user), false)
         OR coalesce((SELECT pg_has_role(session_user, nspowner, 'MEMBER') FROM pg_namespace WHERE nspname = 'docket'), false)
FROM pg_roles r WHERE r.rolname IN ('docket_reader', 'docket_app', 'docket_operator')`).Scan(&c.login, &reader, &writer)
	if err != nil {
		return fmt.Errorf("serve: asking the database what its login may do: %w", db.Translate(err, "serve.login"))
	}
	c.readOnly = reader && !writer
	return nil
}

// consoleFrame is what every console page shows besides the frame: the
// project it is about, and whether the console runs read-only.
type consoleFrame struct {
	frame
	Project  string
	ReadOnly bool
}

func (c *console) frame(v visitor, title, project string) consoleFrame {
	return consoleFrame{frame: v.frame(title), Project: project, ReadOnly: c.readOnly}
}

// inProject serves h with the path's project, and answers a project the
// console does not serve with 404.
func (c *console) inProject(h func(http.ResponseWriter, *http.Request, visitor, string)) func(http.ResponseWriter, *http.Request, visitor) {
	return func(w http.ResponseWriter, r *http.Request, v visitor) {
		p := r.PathValue("project")
		if !slices.Contains(c.cfg.Projects, p) {
			c.refuse(w, r, v, "project", db.Refuse(db.ErrNotFound, "console", fmt.Sprintf("%q is not a project this console serves", p)))
			return
		}
		h(w, r, v, p)
	}
}

// withID serves h with the path's project and the id of its noun, and
// answers an id that is not a positive int64 (as taskIDPattern has it) with
// 404.
func (c *console) withID(noun string, h func(http.ResponseWriter, *http.Request, visitor, string, int64)) func(http.ResponseWriter, *http.Request, visitor) {
	return c.inProject(func(w http.ResponseWriter, r *http.Request, v visitor, project string) {
		raw := r.PathValue("id")
		id, err := strconv.ParseInt(raw, 10, 64)
		if !taskIDPattern.MatchString(raw) || err != nil {
			c.refuse(w, r, v, noun, db.Refuse(db.ErrNotFound, "console", fmt.Sprintf("%q is not a %s id", raw, noun)))
			return
		}
		h(w, r, v, project, id)
	})
}

// readable serves h, or, when the console runs read-only, refuses the page
// before the database is asked: a docket_reader login reads what its own
// principals may see, not what the person signed in may, and calls no API
// function the console's pages read through.
func (c *console) readable(h func(http.ResponseWriter, *http.Request, visitor)) func(http.ResponseWriter, *http.Request, visitor) {
	return func(w http.ResponseWriter, r *http.Request, v visitor) {
		if c.readOnly {
			c.refuse(w, r, v, "page", db.Refuse(db.ErrNotPermitted, "console", "the console's login is a docket_reader member only"))
			return
		}
		h(w, r, v)
	}
}

// posted serves h to a form posted from the console's own pages: same
// origin, at most serveMaxBody bytes, carrying the browser's CSRF token.
// Anything else, and every form when the console runs read-only, is refused
// before the database is asked.
func (c *console) posted(h func(http.ResponseWriter, *http.Request, visitor)) func(http.ResponseWriter, *http.Request, visitor) {
	return func(w http.ResponseWriter, r *http.Request, v visitor) {
		forged := func(reason, why string) {
			c.render(w, http.StatusForbidden, "refusal", refusalPage{frame: v.frame("Refused"), Status: http.StatusForbidden,
				Reason: reason, Heading: "Form refused", Lines: []string{why, "Nothing was changed."}})
		}
		if c.readOnly {
			forged("read-only", "This console runs read-only: its database login is a docket_reader member, "+
				"which may change nothing.")
			return
		}
		if err := c.origins.Check(r); err != nil {
			forged("csrf", "This form was sent from another site.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, serveMaxBody)
		if err := r.ParseForm(); err != nil {
			status, line := http.StatusBadRequest, "The form could not be read."
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				status, line = http.StatusRequestEntityTooLarge, fmt.Sprintf("The form was larger than %d KiB.", serveMaxBody>>10)
			}
			c.render(w, status, "refusal", refusalPage{frame: v.frame("Refused"), Status: status, Reason: "form",
				Heading: "Form refused", Lines: []string{line, "Nothing was changed."}})
			return
		}
		cookie, err := r.Cookie(csrfCookie)
		sent := r.PostForm.Get(csrfField)
		if err != nil || sent == "" || subtle.ConstantTimeCompare([]byte(cookie.Value), []byte(sent)) != 1 {
			forged("csrf", "This form did not carry this browser's token: it was not sent from this console's page, "+
				"or the page is older than the browser's sign-in cookie. Open the page again and submit its form from there.")
			return
		}
		h(w, r, v)
	}
}

// may reports whether the visitor holds capability on project, so that a
// page offers the form that needs it. It only decides what is shown: the
// database checks the grant again when the form is posted.
func (c *console) may(ctx context.Context, v visitor, project string, capability access.Capability) (bool, error) {
	if c.readOnly {
		return false, nil
	}
	ac, err := access.NewClient(c.pool, access.Config{Actor: v.who, Clock: c.cfg.Clock})
	if err != nil {
		return false, err
	}
	return ac.Allowed(ctx, access.Grant{Principal: v.who, Project: project, Capability: capability})
}

// refuse answers err, the refusal of the visitor's read or act on a noun
// (job, case …), with the refusal page: the status and words that go with
// it. What the database did not refuse is logged and answered 500.
func (c *console) refuse(w http.ResponseWriter, r *http.Request, v visitor, noun string, err error) {
	p := refusalPage{frame: v.frame("Refused")}
	message := err.Error()
	if e, ok := errors.AsType[*db.Error](err); ok && e.Message != "" {
		message = e.Message
	}
	pruned, isPruned := errors.AsType[*jobs.PrunedError](err)
	switch {
	case isPruned && slices.Contains(c.cfg.Projects, pruned.Project):
		p.Status, p.Reason, p.Heading = http.StatusGone, "pruned", "Pruned"
		p.Lines = []string{fmt.Sprintf("Job %d finished and was removed by prune %d at %s, by %s, past its project's retention horizon.",
			pruned.Job, pruned.Prune, pruned.At.UTC().Format("2006-01-02 15:04:05 UTC"), pruned.By),
			"docket.prunes keeps the record of what the prune removed."}
	case errors.Is(err, db.ErrNotPermitted) && c.readOnly:
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
		c.cfg.Logger.Error("docket serve: console request failed", "method", r.Method, "path", r.URL.Path, "principal", v.who, "error", err)
		p.Status, p.Reason, p.Heading = http.StatusInternalServerError, "failed", "Something went wrong"
		p.Lines = []string{"docket could not do that just now; try again in a moment. The server's log says what went wrong."}
	}
	c.render(w, p.Status, "refusal", p)
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
// 0 when absent, else a positive int64 as taskIDPattern has it.
func queryID(r *http.Request, name string) (int64, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if !taskIDPattern.MatchString(raw) || err != nil {
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
