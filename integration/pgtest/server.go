package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// envURL names the environment variable holding an admin URL of an existing
// server: a role allowed to CREATE DATABASE.
const envURL = "DOCKET_TEST_DATABASE_URL"

// resolveTimeout bounds finding or starting a server, including a possible
// image pull; it is independent of the calling test's context so that one
// test ending cannot poison the process-wide result.
const resolveTimeout = 5 * time.Minute

// errNothingFound is the one-line answer when no way to get a server exists.
var errNothingFound = errors.New("pgtest: no PostgreSQL found: set " + envURL +
	" to an admin URL, start a Docker engine, or install PostgreSQL server binaries (apt-get install postgresql)")

// server is one PostgreSQL server that tests create databases on.
type server struct {
	adminURL string        // URL of a database on it with CREATE DATABASE rights
	source   string        // where it came from, for logs; never holds a password
	admin    *pgxpool.Pool // connections for CREATE and DROP DATABASE
	stopper  func(context.Context) error

	// createOptions ends every CREATE DATABASE statement; see newServer.
	createOptions string

	tmplOnce sync.Once
	tmpl     string
	tmplErr  error
}

// newServer connects to adminURL and checks that the server answers. stop,
// if not nil, is what shuts the server down; close calls it. On error it has
// already called stop.
//
// A server with a stop function is one this package started, with fsync
// off. On those (PostgreSQL 15 and later) databases are created with
// STRATEGY FILE_COPY, which copies the template's files instead of writing
// every block to the WAL: several times faster there. Its checkpoints would
// be slow on a server with fsync on, so other servers keep their default.
func newServer(ctx context.Context, adminURL, source string, stop func(context.Context) error) (*server, error) {
	fail := func(err error) (*server, error) {
		if stop != nil {
			_ = stop(context.Background())
		}
		return nil, err
	}
	if _, err := parseAdminURL(adminURL); err != nil {
		return fail(fmt.Errorf("pgtest: %s: %w", source, err))
	}
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		return fail(fmt.Errorf("pgtest: %s: parse %s: %w", source, maskURL(adminURL), err))
	}
	admin, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fail(fmt.Errorf("pgtest: %s: connect %s: %w", source, maskURL(adminURL), err))
	}
	if err := admin.Ping(ctx); err != nil {
		admin.Close()
		return fail(fmt.Errorf("pgtest: %s: connect %s: %w", source, maskURL(adminURL), err))
	}
	srv := &server{adminURL: adminURL, source: source, admin: admin, stopper: stop}
	if stop != nil {
		var version int
		if err := admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
			admin.Close()
			return fail(fmt.Errorf("pgtest: %s: server version: %w", source, err))
		}
		if version >= 150000 {
			srv.createOptions = " STRATEGY FILE_COPY"
		}
	}
	return srv, nil
}

// String describes the server for logs, with any password masked.
func (s *server) String() string {
	return s.source + " at " + maskURL(s.adminURL)
}

// close drops the Scratch databases, closes the admin connections and stops
// the server if this package started it. It returns the errors of dropping
// and stopping, if any.
func (s *server) close(ctx context.Context) error {
	return errors.Join(s.dropScratch(ctx), s.shutdown(ctx))
}

// shutdown closes the admin connections and stops the server if this
// package started it. Unlike close it leaves the Scratch databases alone:
// they belong to the server tests share.
func (s *server) shutdown(ctx context.Context) error {
	s.admin.Close()
	if s.stopper == nil {
		return nil
	}
	return s.stopper(ctx)
}

// shared is the process-wide server, found on first use.
var shared struct {
	mu       sync.Mutex
	resolved bool
	stopped  bool
	srv      *server
	err      error
}

// sharedServer returns the process-wide server, finding or starting it on
// the first call. Every caller gets the same server or the same error.
// first reports whether this call did the finding.
func sharedServer(ctx context.Context) (srv *server, first bool, err error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.stopped {
		return nil, false, errors.New("pgtest: the server was already stopped by pgtest.Main")
	}
	if !shared.resolved {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
		defer cancel()
		shared.srv, shared.err = findServer(ctx)
		shared.resolved = true
		first = true
	}
	return shared.srv, first, shared.err
}

// stopShared stops the process-wide server if one was started. Later calls
// to sharedServer fail. It returns the error of stopping, if any.
func stopShared(ctx context.Context) error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.stopped = true
	if shared.srv == nil {
		return nil
	}
	srv := shared.srv
	shared.srv = nil
	return srv.close(ctx)
}

// findServer returns a server, trying in order: the admin URL in
// DOCKET_TEST_DATABASE_URL, a container on a reachable Docker engine, and
// local PostgreSQL binaries. The error is one line saying what failed or
// what to install.
func findServer(ctx context.Context) (*server, error) {
	if raw := os.Getenv(envURL); raw != "" {
		return newServer(ctx, raw, "$"+envURL, nil)
	}

	var failures []string
	if err := dockerReachable(ctx); err == nil {
		c, err := startContainer(ctx)
		if err == nil {
			return newServer(ctx, c.url, "container "+containerImage, c.stop)
		}
		failures = append(failures, fmt.Sprintf("docker: %v", err))
	}

	l, err := startLocal(ctx)
	switch {
	case err == nil:
		return newServer(ctx, l.url, "local PostgreSQL "+l.binDir, l.stop)
	case !errors.Is(err, errNoLocalBinaries):
		failures = append(failures, fmt.Sprintf("local: %v", err))
	}

	if len(failures) == 0 {
		return nil, errNothingFound
	}
	msg := "pgtest: could not start PostgreSQL"
	for _, f := range failures {
		msg += "; " + f
	}
	return nil, errors.New(msg)
}
