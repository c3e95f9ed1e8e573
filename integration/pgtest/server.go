package pgtest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/docket-dev/docket/internal/pgserver"
)

// server is one PostgreSQL server that tests create databases on, with the
// templates built on it, by name.
type server struct {
	*pgserver.Server

	mu    sync.Mutex
	tmpls map[string]*builtTemplate
}

// builtTemplate is one template's build on a server: done once, with the
// same answer for every caller.
type builtTemplate struct {
	once sync.Once
	err  error
}

// close drops the Scratch databases, then closes the admin connections and
// stops the server if this package started it. It returns the errors of
// dropping and stopping, if any. Close, which leaves the Scratch databases
// alone, is for servers other than the shared one.
func (s *server) close(ctx context.Context) error {
	return errors.Join(s.dropScratch(ctx), s.Close(ctx))
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
		// Independent of the calling test's context, so that one test
		// ending cannot poison the process-wide result.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgserver.FindTimeout)
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
// DOCKET_TEST_DATABASE_URL, local PostgreSQL binaries, and a container on a
// reachable Docker engine (or the one way DOCKET_TEST_POSTGRES allows). The error is one line saying what failed or
// what to set or install.
func findServer(ctx context.Context) (*server, error) {
	srv, err := pgserver.Find(ctx, docker)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	return &server{Server: srv}, nil
}
