//go:build unix

package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a throw-away local server, started as [StartLocal] starts one,
// that its owner may stop (cleanly or as a crash) and start again on the same
// data directory and port, so its URLs stay valid across restarts: for tests
// of what clients do when their server goes away. It is safe for concurrent
// use. Close it when done.
type Cluster struct {
	mu      sync.Mutex
	l       *localPostgres
	running bool
	closed  bool
}

// StartCluster initialises and starts a local cluster of this process's own,
// never the server of [EnvURL]: a crash must hurt nobody else. Unlike the
// servers of [StartLocal], it keeps across a crash of the server every
// commit it acknowledged: synchronous_commit is on for every session (a
// setting of all roles, which a session may still change for itself). fsync
// stays off, which only a crash of the machine would make matter.
//
// It returns an error wrapping [ErrNoLocalBinaries] if initdb and postgres
// are not installed, and otherwise an error with the end of the server's
// output if it does not come up.
func StartCluster(ctx context.Context) (*Cluster, error) {
	l, err := startLocal(ctx, LocalConfig{MaxConnections: DefaultMaxConnections})
	if err != nil {
		return nil, err
	}
	if err := durableCommits(ctx, l.url); err != nil {
		return nil, errors.Join(err, l.stop(context.WithoutCancel(ctx)))
	}
	return &Cluster{l: l, running: true}, nil
}

// durableCommits turns synchronous_commit on for every new session of the
// server at url: with it off, as the server was started, a commit's WAL may
// still be in the server's memory when it acknowledges the commit, and a
// crash then loses it.
func durableCommits(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("local postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "ALTER ROLE ALL SET synchronous_commit = on"); err != nil {
		return fmt.Errorf("local postgres: synchronous_commit: %w", err)
	}
	return nil
}

// AdminURL returns the URL of the postgres database as the cluster's
// superuser (trust authentication, no password). It stays valid across
// restarts.
func (c *Cluster) AdminURL() string { return c.l.url }

// URL returns the URL of database name on the cluster, as its superuser.
func (c *Cluster) URL(name string) (string, error) { return withDatabase(c.l.url, name) }

// Running reports whether the server is running: started, not stopped
// since, and its postmaster has not exited.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return false
	}
	select {
	case <-c.l.exited:
		return false
	default:
		return true
	}
}

// Stop stops the server in mode and waits until its postmaster has exited.
// One that has not exited within 10 s, or when ctx ends, is killed. The data
// directory is kept for [Cluster.Start]. It refuses a cluster that is not
// running.
func (c *Cluster) Stop(ctx context.Context, mode ShutdownMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return errors.New("pgserver: stop: the cluster is not running")
	}
	sig := syscall.SIGINT
	if mode == ImmediateShutdown {
		sig = syscall.SIGQUIT
	}
	c.running = false
	if err := c.l.cmd.Process.Signal(sig); err != nil {
		select {
		case <-c.l.exited: // it had exited already
			return nil
		default:
			return fmt.Errorf("pgserver: %s shutdown: %w", mode, err)
		}
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-c.l.exited:
		return nil
	case <-timer.C:
	case <-ctx.Done():
	}
	c.l.kill()
	return fmt.Errorf("pgserver: %s shutdown did not end within %v; killed the postmaster", mode, stopTimeout)
}

// Start starts the stopped server again, on the same data directory and
// port, and waits until it accepts connections (after crash recovery, when
// it was stopped in [ImmediateShutdown]). It refuses a cluster that is
// running or closed, and returns an error with the end of the server's
// output if the server does not come up (the port taken by someone else
// meanwhile, say).
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return errors.New("pgserver: start: the cluster is closed")
	case c.running:
		return errors.New("pgserver: start: the cluster is running")
	}
	if err := c.l.rerun(ctx); err != nil {
		return err
	}
	c.running = true
	return nil
}

// Close stops the server if it runs (fast shutdown, then SIGKILL after 10 s
// or when ctx ends) and removes its directory. It returns the error of
// removing the directory. Close once.
func (c *Cluster) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed, c.running = true, false
	return c.l.stop(ctx)
}

// rerun starts postgres again with the command line, environment and
// credential of its last start, after that process has exited, and waits
// until it accepts connections.
func (l *localPostgres) rerun(ctx context.Context) error {
	<-l.exited
	prev := l.cmd
	attr := *prev.SysProcAttr
	cmd := exec.Command(prev.Path, prev.Args[1:]...)
	cmd.Dir, cmd.Env, cmd.SysProcAttr = prev.Dir, prev.Env, &attr
	if err := l.spawn(ctx, cmd); err != nil {
		return fmt.Errorf("local postgres: restart: %w", err)
	}
	return nil
}
