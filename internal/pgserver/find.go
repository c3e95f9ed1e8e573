package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// EnvURL names the environment variable holding an admin URL of an existing
// server: a role allowed to CREATE DATABASE.
const EnvURL = "DOCKET_TEST_DATABASE_URL"

// FindTimeout bounds finding or starting a server, including whatever a
// [Starter] does (a container image pull, say). Callers that want a bound
// apply it to the context they pass.
const FindTimeout = 5 * time.Minute

// ErrNotFound is wrapped by the error of [Find] when no way to get a server
// exists on this machine: no URL is set, no [Starter] is available and no
// PostgreSQL server binaries are installed.
var ErrNotFound = errors.New("no PostgreSQL found")

// ErrUnavailable is wrapped by the error of a [Starter] (and of
// [StartLocal]) whose kind of server cannot exist on this machine: nothing
// to start it with, as opposed to a start that failed. [Find] then tries the
// next way quietly.
var ErrUnavailable = errors.New("unavailable")

// A Starter is one more way for [Find] to get a server, tried after the
// environment and before local binaries.
type Starter struct {
	// Name starts the Starter's errors in Find's error, e.g. "docker".
	Name string
	// Hint says what would make the Starter work, for the message when
	// nothing was found, e.g. "start a Docker engine".
	Hint string
	// Start returns a server it started, opened with [Open] and a stop
	// function, or an error wrapping ErrUnavailable if this way cannot work
	// here.
	Start func(context.Context) (*Server, error)
}

// local is the Starter Find tries last.
var local = Starter{
	Name:  "local",
	Hint:  "install PostgreSQL server binaries (apt-get install postgresql)",
	Start: StartLocal,
}

// StartLocal starts a throw-away server from local PostgreSQL binaries (see
// the package documentation) and opens it; [Server.Close] stops it and
// removes its directory. It returns an error wrapping [ErrNoLocalBinaries]
// if initdb and postgres are not installed, and otherwise an error with the
// end of the server's output if it does not come up.
func StartLocal(ctx context.Context) (*Server, error) {
	l, err := startLocal(ctx)
	if err != nil {
		return nil, err
	}
	return Open(ctx, l.url, "local PostgreSQL "+l.binDir, l.stop)
}

// Find returns a server, trying in order: the admin URL in $DOCKET_TEST_DATABASE_URL
// ([EnvURL]), each of starters, and local PostgreSQL binaries. The error is
// one line saying what failed, or, wrapping [ErrNotFound], what to set or
// install.
func Find(ctx context.Context, starters ...Starter) (*Server, error) {
	return find(ctx, os.Getenv, slices.Concat(starters, []Starter{local}))
}

// find is Find with the environment read through getenv and every way to
// start a server in starters.
func find(ctx context.Context, getenv func(string) string, starters []Starter) (*Server, error) {
	if raw := getenv(EnvURL); raw != "" {
		return Open(ctx, raw, "$"+EnvURL, nil)
	}
	var failures []string
	hints := []string{"set " + EnvURL + " to an admin URL"}
	for _, st := range starters {
		srv, err := st.Start(ctx)
		switch {
		case err == nil:
			return srv, nil
		case !errors.Is(err, ErrUnavailable):
			failures = append(failures, st.Name+": "+err.Error())
		}
		hints = append(hints, st.Hint)
	}
	if len(failures) > 0 {
		return nil, errors.New("could not start PostgreSQL; " + strings.Join(failures, "; "))
	}
	hint := hints[0]
	if last := len(hints) - 1; last > 0 {
		hint = strings.Join(hints[:last], ", ") + ", or " + hints[last]
	}
	return nil, fmt.Errorf("%w: %s", ErrNotFound, hint)
}
