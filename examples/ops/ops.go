package ops

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/console"
	"github.com/docket-dev/docket/db"
)

// User is a person of the service: the password they sign in with and the
// docket principal they act as.
type User struct {
	Password  string
	Principal access.Actor
}

// Config is what the service serves to whom.
type Config struct {
	// Users are the people who may sign in, by name. At least one.
	Users map[string]User
	// Key signs the session cookies: at least 32 random bytes.
	Key []byte
	// Session is how long a sign-in lasts. Defaults to 8 hours.
	Session time.Duration
	// Clock gives the time sessions expire by and docket's instants.
	// Defaults to db.SystemClock.
	Clock db.Clock
	// Logger receives what went wrong on the server's side. Defaults to
	// discarding it.
	Logger *slog.Logger
}

// sessionCookie holds a signed-in browser's session: name, expiry and
// their signature.
const sessionCookie = "ops_session"

// New returns the service's handler on pool: /login, /logout, and the
// console under /ops/. pool's login should be a docket_app member bound to
// the users' principals. It refuses a configuration without users or with
// a short key.
func New(pool db.Pool, cfg Config) (http.Handler, error) {
	if len(cfg.Users) == 0 || len(cfg.Key) < 32 {
		return nil, errors.New("ops: want at least one user and a key of at least 32 bytes")
	}
	if cfg.Session == 0 {
		cfg.Session = 8 * time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = db.SystemClock{}
	}
	s := &service{cfg: cfg}
	c, err := console.New(pool, console.Config{Prefix: "/ops", AuthenticateFunc: s.principal, SignInURL: "/login",
		Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/", s.signedIn(c))
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.logout)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ops/", http.StatusSeeOther) })
	return mux, nil
}

type service struct {
	cfg Config
}

// signedIn is the service's authenticating middleware: a browser without
// a valid session goes to /login first.
func (s *service) signedIn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.session(r); !ok {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// principal is the console's AuthenticateFunc: the principal of the
// session's user.
func (s *service) principal(r *http.Request) (access.Actor, error) {
	u, ok := s.session(r)
	if !ok {
		return "", errors.New("your session has ended: sign in again")
	}
	return u.Principal, nil
}

// session is the user r's session cookie names, when it is signed by the
// service's key and has not expired.
func (s *service) session(r *http.Request) (User, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return User{}, false
	}
	value, sig, ok := strings.Cut(c.Value, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(s.sign(value))) {
		return User{}, false
	}
	name, until, ok := strings.Cut(value, "|")
	expiry, err := strconv.ParseInt(until, 10, 64)
	if !ok || err != nil || s.cfg.Clock.Now().Unix() >= expiry {
		return User{}, false
	}
	u, ok := s.cfg.Users[name]
	return u, ok
}

func (s *service) sign(value string) string {
	m := hmac.New(sha256.New, s.cfg.Key)
	m.Write([]byte(value))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · ops</title></head>
<body><h1>Sign in</h1>{{if .}}<p id="failed">{{.}}</p>{{end}}
<form method="post" action="/login">
<label>Name <input name="user" id="user" autocomplete="username"></label>
<label>Password <input name="password" id="password" type="password" autocomplete="current-password"></label>
<button type="submit" id="sign-in">Sign in</button>
</form></body></html>`))

func (s *service) loginPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	loginPage.Execute(w, "")
}

// login signs the form's user in when the password matches.
func (s *service) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	name, password := r.PostFormValue("user"), r.PostFormValue("password")
	u, known := s.cfg.Users[name]
	if !known || subtle.ConstantTimeCompare([]byte(u.Password), []byte(password)) != 1 {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		loginPage.Execute(w, "Unknown name or wrong password.")
		return
	}
	value := name + "|" + strconv.FormatInt(s.cfg.Clock.Now().Add(s.cfg.Session).Unix(), 10)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: value + "." + s.sign(value), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/ops/", http.StatusSeeOther)
}

// logout ends the browser's session.
func (s *service) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
