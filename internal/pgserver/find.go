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

// EnvOnly names the environment variable that allows [Find] one way to a
// server and no other: "url" (the server at [EnvURL]), "local" (local
// binaries) or the Name of a [Starter] the caller passes, such as pgtest's
// "container". Find then fails, instead of trying the next way, when that
// way does not work, so that a run meant for one kind of server cannot
// pass on another.
const EnvOnly = "DOCKET_TEST_POSTGRES"

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
// environment and local binaries.
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
	return StartLocalWith(ctx, LocalConfig{})
}

// LocalConfig sizes a server started from local binaries.
type LocalConfig struct {
	// MaxConnections is the server's max_connections: room for every
	// connection the processes using it open at once. Defaults to
	// [DefaultMaxConnections].
	MaxConnections int
	// Settings are more server settings, each name=value, passed to
	// postgres as -c name=value after docket's own: a benchmark's
	// shared_preload_libraries=pg_stat_statements, for example.
	Settings []string
}

// DefaultMaxConnections is the max_connections of a server [StartLocal]
// starts: enough for one test process of docket's, whose tests run
// GOMAXPROCS at a time, each with its pools and workers, with room to spare.
const DefaultMaxConnections = 200

// StartLocalWith is [StartLocal] with the server sized by cfg. It refuses
// a negative MaxConnections.
func StartLocalWith(ctx context.Context, cfg LocalConfig) (*Server, error) {
	if cfg.MaxConnections < 0 {
		return nil, fmt.Errorf("local postgres: MaxConnections %d is negative", cfg.MaxConnections)
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	l, err := startLocal(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return Open(ctx, l.url, "local PostgreSQL "+l.binDir, l.stop)
}

// Find returns a server, trying in order: the admin URL in $DOCKET_TEST_DATABASE_URL
// ([EnvURL]), local PostgreSQL binaries, and each of starters. With
// $DOCKET_TEST_POSTGRES ([EnvOnly]) set it tries that one way alone. The
// error is one line saying what failed, or, wrapping [ErrNotFound], what to
// set or install.
func Find(ctx context.Context, starters ...Starter) (*Server, error) {
	return find(ctx, os.Getenv, ways(starters))
}

// ways lists every way Find tries, in order: local binaries, then starters.
func ways(starters []Starter) []Starter {
	return slices.Concat([]Starter{local}, starters)
}

// find is Find with the environment read through getenv and every way to
// start a server in starters.
func find(ctx context.Context, getenv func(string) string, starters []Starter) (*Server, error) {
	raw := getenv(EnvURL)
	if only := getenv(EnvOnly); only != "" {
		return findOnly(ctx, only, raw, starters)
	}
	if raw != "" {
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

// findOnly is find with $DOCKET_TEST_POSTGRES set to only: the server at
// raw if only is "url", else the starter named only, with no other tried.
// It refuses a URL set beside another way, and a name it does not know.
func findOnly(ctx context.Context, only, raw string, starters []Starter) (*Server, error) {
	prefix := EnvOnly + "=" + only + ": "
	if only == "url" {
		if raw == "" {
			return nil, errors.New(prefix + EnvURL + " is not set")
		}
		return Open(ctx, raw, "$"+EnvURL, nil)
	}
	i := slices.IndexFunc(starters, func(st Starter) bool { return st.Name == only })
	if i < 0 {
		names := []string{"url"}
		for _, st := range starters {
			names = append(names, st.Name)
		}
		return nil, errors.New(prefix + "not a way to a server here; want one of " + strings.Join(names, ", "))
	}
	if raw != "" {
		return nil, errors.New(prefix + EnvURL + " is set too: unset one of them")
	}
	st := starters[i]
	srv, err := st.Start(ctx)
	switch {
	case errors.Is(err, ErrUnavailable):
		return nil, fmt.Errorf("%s%w; %s", prefix, err, st.Hint)
	case err != nil:
		return nil, fmt.Errorf("%s%w", prefix, err)
	}
	return srv, nil
}
