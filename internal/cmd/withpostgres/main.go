// Command withpostgres runs a command beside a private PostgreSQL cluster,
// as make test runs docket's tests: it starts a cluster from the local
// server binaries (internal/pgserver: a temporary directory, a free port
// of 127.0.0.1, durability off), gives it the login role docket_test
// (CREATEDB, CREATEROLE, a member of pg_signal_backend: what docket's own
// tests need, and no superuser), runs the command with
// DOCKET_TEST_DATABASE_URL naming that role on it, then stops the cluster
// and removes its directory. It exits with the command's status.
//
//	go run ./internal/cmd/withpostgres [-max-connections N] command [args ...]
//
// It never touches a server it did not start. It refuses to run when
// DOCKET_TEST_DATABASE_URL or DOCKET_TEST_POSTGRES is set already, since
// the command would then not use the server those name.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/internal/pgserver"
)

// role is the login the command gets: not a superuser, as on a server of
// the user's own.
const role = "docket_test"

func main() {
	maxConns := flag.Int("max-connections", suiteConnections(runtime.NumCPU()),
		"the cluster's max_connections (default: room for go test's parallel packages on this machine)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: withpostgres [-max-connections N] command [args ...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	code, err := run(flag.Args(), *maxConns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "withpostgres:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// suiteConnections is the max_connections of the cluster for go test ./...
// on a machine with cpus cores. go test runs that many packages at once,
// and each package that many of its tests at a time, so the connections
// open at once grow with the square of the cores: on 2 cores a whole run
// was seen to hold 97 at its peak (pg_stat_activity's client backends,
// sampled every second or two), about 24 for each test running. Twenty-five
// a test, and never fewer than 200, twice that peak, leaves room.
func suiteConnections(cpus int) int {
	return max(pgserver.DefaultMaxConnections, 25*cpus*cpus)
}

// run starts the cluster, runs args with its URL and stops it. It returns
// the command's exit code, and an error if the cluster could not be started
// or stopped or the command not run.
func run(args []string, maxConns int) (code int, err error) {
	for _, name := range []string{pgserver.EnvURL, pgserver.EnvOnly} {
		if os.Getenv(name) != "" {
			return 2, fmt.Errorf("%s is set: run the command without withpostgres to use that server", name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgserver.FindTimeout)
	defer cancel()
	srv, err := pgserver.StartLocalWith(ctx, pgserver.LocalConfig{MaxConnections: maxConns})
	if err != nil {
		return 1, err
	}
	defer func() {
		stop, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if cerr := srv.Close(stop); cerr != nil {
			err = errors.Join(err, fmt.Errorf("removing the cluster: %w", cerr))
		}
	}()
	u, err := loginURL(ctx, srv.AdminURL())
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(os.Stderr, "withpostgres: a private cluster, %s, max_connections %d, as %s; removed at the end\n",
		srv, maxConns, role)

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), pgserver.EnvURL+"="+u)
	// An interrupt reaches the command from the terminal as it reaches this
	// process; this process waits for the command to end, then removes the
	// cluster. A termination signal sent to this process alone is passed
	// on.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	if err := cmd.Start(); err != nil {
		return 1, err
	}
	go func() {
		for sig := range signals {
			if sig == syscall.SIGTERM {
				_ = cmd.Process.Signal(sig)
			}
		}
	}()
	err = cmd.Wait()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

// loginURL gives the server at adminURL (as its superuser) the role
// docket_test and returns adminURL with that role in place of the
// superuser. Local connections are trusted: the role needs no password.
func loginURL(ctx context.Context, adminURL string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ident := pgx.Identifier{role}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE ROLE "+ident+" LOGIN CREATEDB CREATEROLE"); err != nil {
		return "", fmt.Errorf("create role %s: %w", role, err)
	}
	if _, err := conn.Exec(ctx, "GRANT pg_signal_backend TO "+ident); err != nil {
		return "", fmt.Errorf("grant pg_signal_backend to %s: %w", role, err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", errors.New("the cluster's URL does not parse")
	}
	u.User = url.User(role)
	return u.String(), nil
}
