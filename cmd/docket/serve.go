package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/tasks"
)

// Bounds of docket serve.
const (
	// serveMaxBody bounds the body of a form.
	serveMaxBody = 16 << 10
	// serveRequestTimeout bounds the database work of one request.
	serveRequestTimeout = 30 * time.Second
	// serveShutdownTimeout bounds finishing the requests in flight after
	// an interrupt.
	serveShutdownTimeout = 10 * time.Second
	// serveWorklistRows is the most tasks a worklist shows per project.
	serveWorklistRows = 100
)

// The auth proxy's header docket serve reads the signed-in user from by
// default: oauth2-proxy's.
const defaultAuthHeader = "X-Forwarded-User"

// csrfCookie holds a browser's CSRF token; each form echoes it in the field
// csrfField.
const (
	csrfCookie = "docket_csrf"
	csrfField  = "csrf"
)

// projectName is the rule of docket.valid_project_name.
var projectName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// taskIDPattern is a task id as a URL carries it: a positive int64 in
// decimal, no sign, no leading zero.
var taskIDPattern = regexp.MustCompile(`^[1-9][0-9]{0,18}$`)

// serve runs the web worklist until interrupted.
func (c *cli) serve(args []string) (dbAction, error) {
	fs := c.flags("serve")
	addr := fs.String("addr", "127.0.0.1:8080", "listen at `HOST:PORT`")
	var projects projectList
	fs.Var(&projects, "project", "serve the worklist of project `P` (repeatable, or a comma list)")
	header := fs.String("auth-header", defaultAuthHeader, "the auth proxy's header `H` naming the signed-in user")
	dev := fs.String("dev-principal", "", "sign everybody in as this principal `P`: for development only")
	if _, err := c.parse(fs, args); err != nil {
		return nil, err
	}
	if *header == "" {
		return nil, usageOf(fs, "--auth-header \"\": want a header name, e.g. %s", defaultAuthHeader)
	}
	if _, _, err := net.SplitHostPort(*addr); err != nil {
		return nil, usageOf(fs, "--addr %q: want HOST:PORT, e.g. 127.0.0.1:8080", *addr)
	}
	cfg := serveConfig{Projects: projects, AuthHeader: *header, DevPrincipal: access.Actor(*dev), Clock: c.clock,
		Logger: slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if err := cfg.check(); err != nil {
		return nil, usageOf(fs, "%v", err)
	}
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		h, err := newServeHandler(pool, cfg)
		if err != nil {
			return err
		}
		ln, err := new(net.ListenConfig).Listen(ctx, "tcp", *addr)
		if err != nil {
			return err
		}
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      serveRequestTimeout + 10*time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		}
		how := "the auth proxy's " + cfg.AuthHeader + " header"
		if cfg.DevPrincipal != "" {
			how = string(cfg.DevPrincipal) + " for everybody (--dev-principal: for development only)"
			cfg.Logger.Warn("docket serve: --dev-principal signs every request in as one principal, whatever its headers: "+
				"for development only, never behind a real proxy", "principal", cfg.DevPrincipal)
		}
		fmt.Fprintf(c.stdout, "docket serve: listening on http://%s for %s; signed in by %s\n", ln.Addr(),
			strings.Join(cfg.Projects, ", "), how)
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		select {
		case err := <-served:
			return err
		case <-ctx.Done():
		}
		stop, cancel := context.WithTimeout(context.Background(), serveShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(stop); err != nil {
			return err
		}
		<-served
		fmt.Fprintln(c.stdout, "docket serve: stopped")
		return nil
	}, nil
}

// projectList is the value of the repeatable --project flag.
type projectList []string

func (p *projectList) String() string { return strings.Join(*p, ",") }

func (p *projectList) Set(v string) error {
	for name := range strings.SplitSeq(v, ",") {
		if name = strings.TrimSpace(name); name != "" && !slices.Contains(*p, name) {
			*p = append(*p, name)
		}
	}
	return nil
}

// serveConfig is what docket serve serves, and whom it signs in how.
type serveConfig struct {
	// Projects are those whose worklists it serves. At least one.
	Projects []string
	// AuthHeader names the auth proxy's header carrying the signed-in
	// user: a value U is always the principal user:U (a name such as
	// svc:app signs in as user:svc:app, never as the service), so a person
	// can never pass for a service whatever names the identity provider
	// lets them pick. Defaults to X-Forwarded-User.
	AuthHeader string
	// DevPrincipal, when set, signs every request in as it, whatever its
	// headers: for development only, never behind a real proxy.
	DevPrincipal access.Actor
	// Clock gives the instants passed to the database. Defaults to
	// db.SystemClock.
	Clock db.Clock
	// Logger receives what went wrong on the server's side. Defaults to
	// discarding it.
	Logger *slog.Logger
}

// check refuses a configuration docket serve cannot run with, and fills in
// the defaults.
func (cfg *serveConfig) check() error {
	if len(cfg.Projects) == 0 {
		return errors.New("no --project: name the projects whose worklists it serves")
	}
	for _, p := range cfg.Projects {
		if !projectName.MatchString(p) {
			return fmt.Errorf("--project %q is not a project name: 1-63 characters of [a-z0-9._-], starting with a letter or digit", p)
		}
	}
	if cfg.AuthHeader == "" {
		cfg.AuthHeader = defaultAuthHeader
	}
	if !validHeaderName(cfg.AuthHeader) {
		return fmt.Errorf("--auth-header %q is not a header name", cfg.AuthHeader)
	}
	cfg.AuthHeader = textproto.CanonicalMIMEHeaderKey(cfg.AuthHeader)
	if cfg.DevPrincipal != "" {
		if err := cfg.DevPrincipal.Validate(); err != nil {
			return fmt.Errorf("--dev-principal: %w", err)
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = db.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// validHeaderName reports whether s is an HTTP field name (an RFC 9110
// token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

//go:embed templates
var templateFiles embed.FS

var pages = template.Must(template.New("pages").Funcs(template.FuncMap{
	"at":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"actors": func(a []access.Actor) string {
		return dash(joinStates(a))
	},
}).ParseFS(templateFiles, "templates/*.html"))

var stylesheet = func() []byte {
	b, err := templateFiles.ReadFile("templates/docket.css")
	if err != nil {
		panic(err)
	}
	return b
}()

// worklistServer is docket serve's handler: each request acts, through the
// tasks API, as the principal it is signed in as.
type worklistServer struct {
	pool    db.Pool
	cfg     serveConfig
	origins *http.CrossOriginProtection
	mux     *http.ServeMux
}

// newServeHandler returns docket serve's handler on pool. It refuses, with
// [db.ErrInvalidArgument], a nil pool or a configuration serve cannot run
// with.
func newServeHandler(pool db.Pool, cfg serveConfig) (http.Handler, error) {
	if pool == nil {
		return nil, db.Refuse(db.ErrInvalidArgument, "serve", "no pool")
	}
	if err := cfg.check(); err != nil {
		return nil, db.Refuse(db.ErrInvalidArgument, "serve", err.Error())
	}
	s := &worklistServer{pool: pool, cfg: cfg, origins: http.NewCrossOriginProtection(), mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /{$}", s.signedIn(s.worklist))
	s.mux.HandleFunc("GET /tasks/{id}", s.signedIn(s.withTask(s.task)))
	s.mux.HandleFunc("POST /tasks/{id}/claim", s.signedIn(s.posted(s.claim)))
	s.mux.HandleFunc("POST /tasks/{id}/release", s.signedIn(s.posted(s.release)))
	s.mux.HandleFunc("POST /tasks/{id}/decide", s.signedIn(s.posted(s.decide)))
	if err := registerConsole(s); err != nil {
		return nil, err
	}
	s.mux.HandleFunc("GET /static/docket.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Write(stylesheet)
	})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.render(w, http.StatusNotFound, "refusal", refusalPage{frame: frame{Title: "Not found"}, Status: http.StatusNotFound,
			Reason: "not-found", Heading: "Not found", Lines: []string{"There is no page here."}})
	})
	return s, nil
}

func (s *worklistServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	s.mux.ServeHTTP(w, r)
}

// visitor is who a request is signed in as, with a tasks client acting as
// them and their browser's CSRF token.
type visitor struct {
	who   access.Actor
	tasks *tasks.Client
	csrf  string
}

func (v visitor) frame(title string) frame { return frame{Title: title, Who: v.who, CSRF: v.csrf} }

// signedIn serves h to signed-in requests, and refuses the others with 401
// (no sign-in) or 403 (a name that is no principal).
func (s *worklistServer) signedIn(h func(http.ResponseWriter, *http.Request, visitor)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, refusal := s.principal(r)
		if refusal != nil {
			s.render(w, refusal.Status, "refusal", refusal)
			return
		}
		cl, err := tasks.NewClient(s.pool, tasks.Config{Actor: who, Clock: s.cfg.Clock})
		if err != nil {
			s.refuse(w, r, visitor{who: who}, 0, err)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), serveRequestTimeout)
		defer cancel()
		h(w, r.WithContext(ctx), visitor{who: who, tasks: cl, csrf: s.csrfToken(w, r)})
	}
}

// principal is who r is signed in as: --dev-principal, else the one the
// auth proxy's header names.
func (s *worklistServer) principal(r *http.Request) (access.Actor, *refusalPage) {
	if s.cfg.DevPrincipal != "" {
		return s.cfg.DevPrincipal, nil
	}
	values := r.Header.Values(s.cfg.AuthHeader)
	name := ""
	if len(values) == 1 {
		name = strings.TrimSpace(values[0])
	}
	if name == "" {
		lines := []string{
			"Sign-in to this worklist is by the auth proxy in front of it, which names who you are in its " +
				s.cfg.AuthHeader + " header; this request came without one.",
			"Open the worklist at the proxy's address and sign in there.",
		}
		if len(values) > 1 {
			lines[0] = "Sign-in to this worklist is by the auth proxy in front of it; this request named " +
				strconv.Itoa(len(values)) + " people in its " + s.cfg.AuthHeader + " header, and docket signs in only one."
		}
		return "", &refusalPage{frame: frame{Title: "Sign in"}, Status: http.StatusUnauthorized, Reason: "sign-in",
			Heading: "Sign in through the auth proxy", Lines: lines}
	}
	who := access.Actor("user:" + name)
	if who.Validate() != nil {
		return "", &refusalPage{frame: frame{Title: "Sign in"}, Status: http.StatusForbidden, Reason: "sign-in",
			Heading: "Not a name docket knows", Lines: []string{
				fmt.Sprintf("The auth proxy signed you in as %q, which is not a principal docket accepts "+
					"(kind:name, the name 1-200 characters of letters, digits and ._@+:/-).", name)}}
	}
	return who, nil
}

// csrfToken returns the token of r's browser, giving the browser one when
// it has none.
func (s *worklistServer) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && validToken(c.Value) {
		return c.Value
	}
	token := rand.Text()
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"})
	return token
}

// validToken reports whether s is a token csrfToken gives: rand.Text's 26
// characters of base32.
func validToken(s string) bool {
	if len(s) != 26 {
		return false
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < '2' || r > '7') {
			return false
		}
	}
	return true
}

// withTask serves h with the id of the path's task, and answers a path
// whose id is not a positive int64 with 404.
func (s *worklistServer) withTask(h func(http.ResponseWriter, *http.Request, visitor, int64)) func(http.ResponseWriter, *http.Request, visitor) {
	return func(w http.ResponseWriter, r *http.Request, v visitor) {
		raw := r.PathValue("id")
		id, err := strconv.ParseInt(raw, 10, 64)
		if !taskIDPattern.MatchString(raw) || err != nil {
			s.refuse(w, r, v, 0, db.Refuse(db.ErrNotFound, "serve", fmt.Sprintf("%q is not a task id", raw)))
			return
		}
		h(w, r, v, id)
	}
}

// posted serves h to a form posted from docket's own pages: same origin,
// at most serveMaxBody bytes, carrying the browser's CSRF token. Others
// are refused with 403 (or 413, 400 for a body too large or unreadable)
// before anything is done.
func (s *worklistServer) posted(h func(http.ResponseWriter, *http.Request, visitor, int64)) func(http.ResponseWriter, *http.Request, visitor) {
	return s.withTask(func(w http.ResponseWriter, r *http.Request, v visitor, id int64) {
		forged := func(why string) {
			s.render(w, http.StatusForbidden, "refusal", refusalPage{frame: v.frame("Refused"), Status: http.StatusForbidden,
				Reason: "csrf", Heading: "Form refused", TaskID: id,
				Lines: []string{why, "Nothing was changed. Open the task again and submit its form from there."}})
		}
		if err := s.origins.Check(r); err != nil {
			forged("This form was sent from another site.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, serveMaxBody)
		if err := r.ParseForm(); err != nil {
			status, line := http.StatusBadRequest, "The form could not be read."
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				status, line = http.StatusRequestEntityTooLarge, fmt.Sprintf("The form was larger than %d KiB.", serveMaxBody>>10)
			}
			s.render(w, status, "refusal", refusalPage{frame: v.frame("Refused"), Status: status, Reason: "form",
				Heading: "Form refused", TaskID: id, Lines: []string{line, "Nothing was changed."}})
			return
		}
		c, err := r.Cookie(csrfCookie)
		sent := r.PostForm.Get(csrfField)
		if err != nil || sent == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(sent)) != 1 {
			forged("This form did not carry this browser's token: it was not sent from this worklist's page, or the page is older than the browser's sign-in cookie.")
			return
		}
		h(w, r, v, id)
	})
}

// frame is what every page shows: its title and who is signed in.
type frame struct {
	Title string
	Who   access.Actor
	CSRF  string
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

// worklist shows, for each project served, the tasks the visitor may take
// now and those they hold.
func (s *worklistServer) worklist(w http.ResponseWriter, r *http.Request, v visitor) {
	now := s.cfg.Clock.Now()
	p := worklistPage{frame: v.frame("Worklist"), Rows: serveWorklistRows}
	for _, name := range s.cfg.Projects {
		list, err := v.tasks.Worklist(r.Context(), name, false, tasks.Page{Limit: serveWorklistRows + 1})
		if err != nil {
			s.refuse(w, r, v, 0, err)
			return
		}
		pt := projectTasks{Name: name, More: len(list) > serveWorklistRows}
		for _, t := range list[:min(len(list), serveWorklistRows)] {
			row := taskRow{ID: t.ID, Title: t.Title, Status: t.Status, Deadline: t.Deadline, Left: dueIn(t.Deadline.Sub(now))}
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
	s.render(w, http.StatusOK, "worklist", p)
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
func (s *worklistServer) task(w http.ResponseWriter, r *http.Request, v visitor, id int64) {
	t, err := v.tasks.Get(r.Context(), id)
	if err != nil {
		s.refuse(w, r, v, 0, err)
		return
	}
	events, err := v.tasks.History(r.Context(), id)
	if err != nil {
		s.refuse(w, r, v, 0, err)
		return
	}
	now := s.cfg.Clock.Now()
	p := taskPage{frame: v.frame(t.Title), Task: t, Proposal: prettyJSON(t.Proposal), Evidence: prettyJSON(t.Evidence),
		Left: dueIn(t.Deadline.Sub(now)), Excluded: slices.Contains(t.Excluded, v.who), OnExpiry: expiryText(t),
		Audience: audienceText(t), MaxNote: tasks.MaxNote, ClaimMinutes: int(tasks.DefaultClaim / time.Minute)}
	if liveClaim(t, now) {
		p.HeldByMe, p.HeldByOther = t.Claim.Holder == v.who, t.Claim.Holder != v.who
	}
	p.Takeable = t.Pending() && !p.HeldByOther
	for _, e := range events {
		p.History = append(p.History, historyRow{At: e.At, What: e.What, Actor: e.Actor, Detail: compactJSON(e.Detail)})
	}
	s.render(w, http.StatusOK, "task", p)
}

// claim claims the task for the default lease.
func (s *worklistServer) claim(w http.ResponseWriter, r *http.Request, v visitor, id int64) {
	if _, err := v.tasks.Claim(r.Context(), id, 0); err != nil {
		s.refuse(w, r, v, id, err)
		return
	}
	http.Redirect(w, r, taskPath(id), http.StatusSeeOther)
}

// release gives back the visitor's claim on the task.
func (s *worklistServer) release(w http.ResponseWriter, r *http.Request, v visitor, id int64) {
	t, err := v.tasks.Get(r.Context(), id)
	if err == nil {
		_, err = v.tasks.Release(r.Context(), t)
	}
	if err != nil {
		s.refuse(w, r, v, id, err)
		return
	}
	http.Redirect(w, r, taskPath(id), http.StatusSeeOther)
}

// decide answers the task with the form's decision and note.
func (s *worklistServer) decide(w http.ResponseWriter, r *http.Request, v visitor, id int64) {
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
		s.refuse(w, r, v, id, err)
		return
	}
	http.Redirect(w, r, taskPath(id), http.StatusSeeOther)
}

func taskPath(id int64) string { return "/tasks/" + strconv.FormatInt(id, 10) }

type refusalPage struct {
	frame
	Status int
	// Reason names the refusal for the page's markup: sign-in,
	// four-eyes, answered, claimed, not-found, not-permitted, invalid,
	// csrf, form, failed.
	Reason  string
	Heading string
	Lines   []string
	// Task is the task as it is now, when re-reading it says how it was
	// settled or who holds it.
	Task *tasks.Task
	// TaskID links back to the task.
	TaskID int64
}

// refuse answers err, the refusal of the visitor's act on task id (0: none,
// or a read), with a page that says why in words and the status that goes
// with it. What the database did not refuse is logged and answered 500.
func (s *worklistServer) refuse(w http.ResponseWriter, r *http.Request, v visitor, id int64, err error) {
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
			now := s.cfg.Clock.Now()
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
		s.cfg.Logger.Error("docket serve: request failed", "method", r.Method, "path", r.URL.Path, "principal", v.who, "error", err)
		p.Status, p.Reason, p.Heading = http.StatusInternalServerError, "failed", "Something went wrong"
		p.Lines = []string{"docket could not do that just now; try again in a moment. The server's log says what went wrong."}
	}
	s.render(w, p.Status, "refusal", p)
}

// render writes the page name with data and status, or 500 when it does not
// render.
func (s *worklistServer) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		s.cfg.Logger.Error("docket serve: page does not render", "page", name, "error", err)
		http.Error(w, "docket could not show this page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// prettyJSON indents JSON for a page; what is not JSON is shown as it is.
func prettyJSON(j json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, j, "", "  "); err != nil {
		return string(j)
	}
	return b.String()
}

// compactJSON shows JSON on one line; null and nothing as "".
func compactJSON(j json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, j); err != nil {
		return string(j)
	}
	if s := b.String(); s != "null" {
		return s
	}
	return ""
}
