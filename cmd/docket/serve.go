package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cells"
	"github.com/docket-dev/docket/console"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/tasks"
)

// Bounds of docket serve.
const (
	// serveRequestTimeout bounds the database work of one request.
	serveRequestTimeout = 30 * time.Second
	// serveShutdownTimeout bounds finishing the requests in flight after
	// an interrupt.
	serveShutdownTimeout = 10 * time.Second
)

// The auth proxy's header docket serve reads the signed-in user from by
// default: oauth2-proxy's.
const defaultAuthHeader = "X-Forwarded-User"

// projectName is the rule of docket.valid_project_name.
var projectName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

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
	if len(c.cells) > 0 && c.replicaURL != "" {
		return nil, usageOf(fs, "--cell with --replica-url: a cell's reads go to its own primary")
	}
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		if len(c.cells) > 0 {
			m, closeAll, missed, err := c.cellMap(ctx)
			if err != nil {
				return err
			}
			defer closeAll()
			if missed != nil {
				return fmt.Errorf("docket serve serves every --cell, and cannot reach some: %w", missed)
			}
			cfg.Cells = m
			where := make([]string, 0, len(cfg.Projects))
			for _, p := range cfg.Projects {
				cell, err := m.Cell(p)
				if err != nil {
					return fmt.Errorf("--project %s: in no --cell whose login may see it", p)
				}
				where = append(where, p+" in cell "+cell)
			}
			cfg.Logger.Info("docket serve: serving cells", "cells", m.Cells(), "projects", where)
		} else {
			cfg.Replica = c.replicaPool()
		}
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
	// Replica is --replica-url's pool, which the console's pages read
	// from when they tolerate lag; nil without it.
	Replica db.Pool
	// Cells, from --cell, serves the console of each cell, the pool of
	// newServeHandler unused; nil without it.
	Cells *cells.Map
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

// newServeHandler returns docket serve's handler on pool: the console,
// signing people in as cfg says. It refuses, with [db.ErrInvalidArgument],
// a nil pool or a configuration serve cannot run with.
func newServeHandler(pool db.Pool, cfg serveConfig) (http.Handler, error) {
	if err := cfg.check(); err != nil {
		return nil, db.Refuse(db.ErrInvalidArgument, "serve", err.Error())
	}
	ccfg := console.Config{AuthenticateFunc: cfg.authenticate, Projects: cfg.Projects, Clock: cfg.Clock,
		Logger: cfg.Logger, Replica: cfg.Replica}
	if cfg.Cells != nil {
		return console.NewCells(cfg.Cells, ccfg)
	}
	return console.New(pool, ccfg)
}

// authenticate is who r is signed in as: --dev-principal, else the user
// the auth proxy's header names.
func (cfg serveConfig) authenticate(r *http.Request) (access.Actor, error) {
	if cfg.DevPrincipal != "" {
		return cfg.DevPrincipal, nil
	}
	values := r.Header.Values(cfg.AuthHeader)
	switch {
	case len(values) > 1:
		return "", fmt.Errorf("sign-in to this worklist is by the auth proxy in front of it; this request named %d people in its %s header, "+
			"and docket signs in only one", len(values), cfg.AuthHeader)
	case len(values) == 0 || strings.TrimSpace(values[0]) == "":
		return "", fmt.Errorf("sign-in to this worklist is by the auth proxy in front of it, which names who you are in its %s header; "+
			"this request came without one: open the worklist at the proxy's address and sign in there", cfg.AuthHeader)
	}
	return access.Actor("user:" + strings.TrimSpace(values[0])), nil
}

// liveClaim reports whether a claim holds t at now.
func liveClaim(t tasks.Task, now time.Time) bool { return t.Claim != nil && t.Claim.Until.After(now) }
