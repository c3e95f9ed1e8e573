package console

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
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/show"
	"github.com/docket-dev/docket/tasks"
)

// Bounds of the console.
const (
	// maxBody bounds the body of a form.
	maxBody = 16 << 10
	// requestTimeout bounds the database work of one request.
	requestTimeout = 30 * time.Second
	// worklistRows is the most tasks a worklist shows per project.
	worklistRows = 100
)

// csrfCookie holds a browser's CSRF token; each form echoes it in the field
// csrfField.
const (
	csrfCookie = "docket_csrf"
	csrfField  = "csrf"
)

// projectName is the rule of docket.valid_project_name.
var projectName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// idPattern is an id as a URL carries it: a positive int64 in decimal, no
// sign, no leading zero.
var idPattern = regexp.MustCompile(`^[1-9][0-9]{0,18}$`)

// prefixPattern is a Config.Prefix: empty, or a path of segments without a
// trailing slash.
var prefixPattern = regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)*$`)

// AuthenticateFunc says whom a request is signed in as: the docket
// principal the console acts as for it. An error means nobody: the console
// answers 401 with a sign-in page that shows the error's message as a
// sentence, so the message should say what to do ("sign in at …"), not
// why in detail.
type AuthenticateFunc func(r *http.Request) (access.Actor, error)

// Config is what a console serves, and how it learns whom each request is
// signed in as.
type Config struct {
	// AuthenticateFunc names each request's principal. Required: the
	// console serves nobody it cannot name.
	AuthenticateFunc AuthenticateFunc
	// Projects are those the console serves. Each visitor is shown those
	// of them in which they hold a grant. Defaults to every project in
	// which the visitor holds a grant.
	Projects []string
	// Prefix is the path the console is mounted under, such as "/ops":
	// it serves the paths under it, and its links and redirects carry it.
	// Mount it with mux.Handle(prefix+"/", h), without http.StripPrefix.
	// Defaults to "", the root.
	Prefix string
	// SignInURL, when set, is linked from the sign-in page a request
	// nobody is signed in on gets.
	SignInURL string
	// Refresh is how often a page's lists, censuses and runs are fetched
	// anew while it is open, by a few lines of the console's own script.
	// Defaults to 5 seconds; a negative Refresh turns it off.
	Refresh time.Duration
	// Clock gives the instants passed to the database. Defaults to
	// db.SystemClock.
	Clock db.Clock
	// Logger receives what went wrong on the server's side. Defaults to
	// discarding it.
	Logger *slog.Logger
	// Replica, when not nil, is a pool on a hot standby of the database:
	// the jobs, cases and plans pages read there what tolerates lag (lists,
	// censuses, histories), and every page says in its header how far
	// behind the replica it read at may be. Every action writes to the
	// primary. Optional.
	Replica db.Pool
}

// check refuses a configuration the console cannot run with, and fills in
// the defaults.
func (cfg *Config) check() error {
	if cfg.AuthenticateFunc == nil {
		return errors.New("no AuthenticateFunc: the console serves nobody it cannot name")
	}
	for _, p := range cfg.Projects {
		if !projectName.MatchString(p) {
			return fmt.Errorf("project %q is not a project name: 1-63 characters of [a-z0-9._-], starting with a letter or digit", p)
		}
	}
	if !prefixPattern.MatchString(cfg.Prefix) {
		return fmt.Errorf("prefix %q is not a path such as /ops: segments of [A-Za-z0-9._~-], no trailing slash", cfg.Prefix)
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = db.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

//go:embed templates static
var files embed.FS

// pages are the console's templates; each Handler clones them with its own
// prefix.
var pages = template.Must(template.New("pages").Funcs(template.FuncMap{
	"base":      func() string { return "" },
	"refresh":   func() int64 { return 0 },
	"cellsHome": func() string { return "" },
	"inCells":   func() bool { return false },
	"cell":      func() string { return "" },
	"add":       func(n, m int) int { return m + n },
	"at":        func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"iso":       func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"actors": func(a []access.Actor) string {
		return show.Dash(show.JoinStates(a))
	},
}).ParseFS(files, "templates/*.html"))

// Handler is the console: the worklist of tasks and the operators' pages
// of jobs, cases, waits, schedules, runs and batches. Each request reads
// and writes through docket's API as the principal its AuthenticateFunc
// names, so the database's grants decide what it sees and may do.
type Handler struct {
	pool    db.Pool
	cfg     Config
	pages   *template.Template
	origins *http.CrossOriginProtection
	mux     *http.ServeMux
	// login is the role the pool logs in as, for the server's log (the
	// pages do not name it).
	login string
	// readOnly: the login is a docket_reader member that can call none of
	// the API's writes. Forms are hidden and every POST is refused before
	// the database is asked.
	readOnly bool
}

// New returns the console on pool. pool should log in as a docket_app
// member bound to the principals AuthenticateFunc names (docs/console.md):
// the console acts as each of them in turn. New asks the database what the
// login may do. It refuses, with [db.ErrInvalidArgument], a nil pool or a
// configuration it cannot run with, and returns the database's error when
// it cannot be asked.
func New(pool db.Pool, cfg Config) (*Handler, error) {
	if err := cfg.check(); err != nil {
		return nil, db.Refuse(db.ErrInvalidArgument, "console", err.Error())
	}
	return newHandler(pool, cfg, mount{})
}

// newHandler is [New] of a checked cfg, mounted at among cells.
func newHandler(pool db.Pool, cfg Config, at mount) (*Handler, error) {
	if db.IsNil(pool) {
		return nil, db.Refuse(db.ErrInvalidArgument, "console", "no pool")
	}
	h := &Handler{pool: pool, cfg: cfg, origins: http.NewCrossOriginProtection(), mux: http.NewServeMux(),
		pages: template.Must(pages.Clone())}
	h.funcs(at)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if err := h.probeLogin(ctx); err != nil {
		return nil, err
	}
	if h.readOnly {
		cfg.Logger.Warn("docket console: its database login is a docket_reader member only, which reads docket's tables "+
			"and views as its own principals may but calls no API: the console runs read-only and can show nobody anything; "+
			"serve it with a docket_app login bound to the principals it signs in", "login", h.login)
	}
	h.routeWorklist()
	h.routeConsole()
	h.mux.HandleFunc("GET /static/{file}", h.static)
	h.mux.HandleFunc("/", h.notFound)
	return h, nil
}

// ServeHTTP serves the console's pages under its prefix, and 404 elsewhere.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	if h.cfg.Prefix == "" {
		h.mux.ServeHTTP(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, h.cfg.Prefix)
	if !ok || (rest != "" && rest[0] != '/') {
		http.NotFound(w, r)
		return
	}
	if rest == "" {
		http.Redirect(w, r, h.cfg.Prefix+"/", http.StatusMovedPermanently)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = rest, ""
	h.mux.ServeHTTP(w, r2)
}

// path is the path of a page of the console, p rooted at its prefix.
func (h *Handler) path(p string) string { return h.cfg.Prefix + p }

// static serves the stylesheet and script embedded in the console.
func (h *Handler) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	types := map[string]string{"docket.css": "text/css; charset=utf-8", "live.js": "text/javascript; charset=utf-8"}
	ct, ok := types[name]
	b, err := files.ReadFile("static/" + name)
	if !ok || err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Write(b)
}

// probeLogin learns whom the pool logs in as, and whether that login is a
// docket_reader member that may call no API function: not a member of
// docket_app or docket_operator, not the schema's owner, not a superuser.
func (h *Handler) probeLogin(ctx context.Context) error {
	var reader, writer bool
	err := h.pool.QueryRow(ctx, `
SELECT session_user::text,
       coalesce(bool_or(pg_has_role(session_user, r.oid, 'MEMBER')) FILTER (WHERE r.rolname = 'docket_reader'), false),
       coalesce(bool_or(pg_has_role(session_user, r.oid, 'MEMBER')) FILTER (WHERE r.rolname <> 'docket_reader'), false)
         OR coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = session_user), false)
         OR coalesce((SELECT pg_has_role(session_user, nspowner, 'MEMBER') FROM pg_namespace WHERE nspname = 'docket'), false)
FROM pg_roles r WHERE r.rolname IN ('docket_reader', 'docket_app', 'docket_operator')`).Scan(&h.login, &reader, &writer)
	if err != nil {
		return fmt.Errorf("console: asking the database what its login may do: %w", db.Translate(err, "console.login"))
	}
	h.readOnly = reader && !writer
	return nil
}

// visitor is who a request is signed in as, with a tasks client acting as
// them and their browser's CSRF token.
type visitor struct {
	who   access.Actor
	tasks *tasks.Client
	csrf  string
	// reads says, when the console has a Replica, where its pages read
	// and how far behind that may be (db.Lag's words); empty otherwise.
	reads string
}

func (v visitor) frame(title string) frame {
	return frame{Title: title, Who: v.who, CSRF: v.csrf, Reads: v.reads}
}

// frame is what every page shows: its title, who is signed in, and with a
// Replica where its reads went.
type frame struct {
	Title string
	Who   access.Actor
	CSRF  string
	Reads string
}

// signedIn serves fn to signed-in requests, and refuses the others with 401
// (no sign-in) or 403 (a name that is no principal).
func (h *Handler) signedIn(fn func(http.ResponseWriter, *http.Request, visitor)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, refusal := h.principal(r)
		if refusal != nil {
			h.render(w, refusal.Status, "refusal", refusal)
			return
		}
		cl, err := tasks.NewClient(h.pool, tasks.Config{Actor: who, Clock: h.cfg.Clock})
		if err != nil {
			h.refuseTask(w, r, visitor{who: who}, 0, err)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		v := visitor{who: who, tasks: cl, csrf: h.csrfToken(w, r)}
		if h.cfg.Replica != nil && !h.readOnly {
			if v.reads, err = h.readsAt(ctx, v); err != nil {
				h.refuse(w, r, v, "page", err)
				return
			}
		}
		fn(w, r.WithContext(ctx), v)
	}
}

// readsAt says where the pages' lag-tolerant reads go for v and how far
// behind the primary they may be, asked before the page reads.
func (h *Handler) readsAt(ctx context.Context, v visitor) (string, error) {
	cl, err := h.jobsByID(v)
	if err != nil {
		return "", err
	}
	lag, err := cl.ReplicaLag(ctx)
	if err != nil {
		return "", err
	}
	return lag.String(), nil
}

// principal is who r is signed in as, as the AuthenticateFunc says.
func (h *Handler) principal(r *http.Request) (access.Actor, *refusalPage) {
	who, err := h.cfg.AuthenticateFunc(r)
	if err != nil {
		p := &refusalPage{frame: frame{Title: "Sign in"}, Status: http.StatusUnauthorized, Reason: "sign-in",
			Heading: "Sign in", Lines: []string{sentence(err.Error())}, SignInURL: h.cfg.SignInURL}
		return "", p
	}
	if who.Validate() != nil {
		return "", &refusalPage{frame: frame{Title: "Sign in"}, Status: http.StatusForbidden, Reason: "sign-in",
			Heading: "Not a name docket knows", Lines: []string{
				fmt.Sprintf("You are signed in as %q, which is not a principal docket accepts "+
					"(kind:name, the name 1-200 characters of letters, digits and ._@+:/-).", string(who))}}
	}
	return who, nil
}

// csrfToken returns the token of r's browser, giving the browser one when
// it has none.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && validToken(c.Value) {
		return c.Value
	}
	token := rand.Text()
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: token, Path: h.path("/"), HttpOnly: true, SameSite: http.SameSiteStrictMode,
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

// form checks a form posted from the console's own pages: same origin, at
// most maxBody bytes, carrying the browser's CSRF token. It answers
// anything else itself, with 403 (or 413, 400 for a body too large or
// unreadable), and reports whether fn may go on; nothing has been asked of
// the database.
func (h *Handler) form(w http.ResponseWriter, r *http.Request, v visitor, back int64, page string) bool {
	forged := func(reason, why string) {
		h.render(w, http.StatusForbidden, "refusal", refusalPage{frame: v.frame("Refused"), Status: http.StatusForbidden,
			Reason: reason, Heading: "Form refused", TaskID: back,
			Lines: []string{why, "Nothing was changed. Open the " + page + " again and submit its form from there."}})
	}
	if h.readOnly {
		forged("read-only", "This console runs read-only: its database login is a docket_reader member, which may change nothing.")
		return false
	}
	if err := h.origins.Check(r); err != nil {
		forged("csrf", "This form was sent from another site.")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		status, line := http.StatusBadRequest, "The form could not be read."
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status, line = http.StatusRequestEntityTooLarge, fmt.Sprintf("The form was larger than %d KiB.", maxBody>>10)
		}
		h.render(w, status, "refusal", refusalPage{frame: v.frame("Refused"), Status: status, Reason: "form",
			Heading: "Form refused", TaskID: back, Lines: []string{line, "Nothing was changed."}})
		return false
	}
	c, err := r.Cookie(csrfCookie)
	sent := r.PostForm.Get(csrfField)
	if err != nil || sent == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(sent)) != 1 {
		forged("csrf", "This form did not carry this browser's token: it was not sent from this "+page+"'s page, "+
			"or the page is older than the browser's sign-in cookie.")
		return false
	}
	return true
}

type refusalPage struct {
	frame
	Status int
	// Reason names the refusal for the page's markup: sign-in,
	// four-eyes, answered, claimed, not-found, not-permitted, invalid,
	// csrf, form, read-only, reader-login, pruned, changed, failed.
	Reason  string
	Heading string
	Lines   []string
	// Task is the task as it is now, when re-reading it says how it was
	// settled or who holds it.
	Task *tasks.Task
	// TaskID links back to the task.
	TaskID int64
	// SignInURL links a sign-in refusal to where to sign in.
	SignInURL string
}

// render writes the page name with data and status, or 500 when it does not
// render.
func (h *Handler) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := h.pages.ExecuteTemplate(&b, name, data); err != nil {
		h.cfg.Logger.Error("docket console: page does not render", "page", name, "error", err)
		http.Error(w, "docket could not show this page", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
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

// sentence shows an error's message as a sentence: its first letter
// capitalised, a full stop at its end.
func sentence(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(r)) + s[n:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}
