//go:build unix

package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// standbyWait bounds the wait for a new standby to stream from its primary,
// and for a promoted one to take writes.
const standbyWait = 30 * time.Second

// StartStandby makes a streaming-replication standby of primary, from the
// same local binaries: a base backup of it (pg_basebackup, streaming the
// WAL it needs, with the recovery settings written for it) in a directory
// of its own, run on a port of its own, and waits until primary reports it
// streaming. With synchronous, primary then waits for the standby to have
// flushed every commit before it acknowledges one (synchronous_standby_names
// '*', with synchronous_commit on for every session, as [StartCluster]
// sets); without, the standby trails asynchronously. Close the standby as a
// cluster of its own.
func StartStandby(ctx context.Context, primary *Cluster, synchronous bool) (*Cluster, error) {
	p := primary.l
	cred, err := childCredential()
	if err != nil {
		return nil, err
	}
	dir, err := newLocalDir(localBase(cred != nil), cred)
	if err != nil {
		return nil, err
	}
	l := &localPostgres{binDir: p.binDir, dir: dir}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}()
	u, err := url.Parse(p.url)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	backup := exec.CommandContext(ctx, serverTool(p.binDir, "pg_basebackup"),
		"-D", data, "-h", u.Hostname(), "-p", u.Port(), "-U", "postgres",
		"--wal-method=stream", "--checkpoint=fast", "--write-recovery-conf", "--no-sync")
	backup.Dir = dir
	backup.Env = childEnv()
	backup.SysProcAttr = childProcAttr(cred)
	if out, err := backup.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("local postgres: %s: %w\n%s", backup.Path, err, lastLines(out, 20))
	}
	cfg := LocalConfig{MaxConnections: DefaultMaxConnections,
		Settings: []string{"hot_standby=on", "cluster_name=standby"}}
	if err := l.run(ctx, data, cred, cfg); err != nil {
		return nil, fmt.Errorf("local postgres: standby: %w", err)
	}
	standby := &Cluster{l: l, running: true}
	ok = true
	if err := awaitStreaming(ctx, p.url, synchronous); err != nil {
		return nil, errors.Join(err, standby.Close(context.WithoutCancel(ctx)))
	}
	return standby, nil
}

// serverTool is the path of the server's tool name: beside postgres in
// binDir, or, where binDir holds links to the server (a PATH directory),
// beside the server the link names.
func serverTool(binDir, name string) string {
	if path := filepath.Join(binDir, name); isExecutable(path) {
		return path
	}
	if real, err := filepath.EvalSymlinks(filepath.Join(binDir, "postgres")); err == nil {
		return filepath.Join(filepath.Dir(real), name)
	}
	return filepath.Join(binDir, name)
}

// awaitStreaming waits until the primary at url has a standby streaming to
// it, then, with synchronous, makes every standby's flush part of each
// commit.
func awaitStreaming(ctx context.Context, url string, synchronous bool) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("local postgres: standby: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	deadline := time.Now().Add(standbyWait)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&n); err != nil {
			return fmt.Errorf("local postgres: standby: %w", err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("local postgres: standby: not streaming after %v", standbyWait)
		}
		time.Sleep(readyPoll)
	}
	if !synchronous {
		return nil
	}
	for _, stmt := range []string{`ALTER SYSTEM SET synchronous_standby_names = '*'`, `SELECT pg_reload_conf()`} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("local postgres: standby: %w", err)
		}
	}
	for {
		var mode string
		err := conn.QueryRow(ctx, `SELECT coalesce((SELECT sync_state FROM pg_stat_replication LIMIT 1), '')`).Scan(&mode)
		if err != nil {
			return fmt.Errorf("local postgres: standby: %w", err)
		}
		if mode == "sync" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("local postgres: standby: not synchronous after %v (%q)", standbyWait, mode)
		}
		time.Sleep(readyPoll)
	}
}

// Promote makes the standby c a primary (pg_promote) and waits until it
// takes writes.
func (c *Cluster) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.AdminURL())
	if err != nil {
		return fmt.Errorf("pgserver: promote: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var done bool
	if err := conn.QueryRow(ctx, `SELECT pg_promote(true, $1)`, int(standbyWait.Seconds())).Scan(&done); err != nil {
		return fmt.Errorf("pgserver: promote: %w", err)
	}
	if !done {
		return fmt.Errorf("pgserver: promote: not promoted within %v", standbyWait)
	}
	return nil
}

// Kill ends the server's postmaster with SIGKILL, as the loss of its
// machine would: no shutdown, no checkpoint, nothing more sent to a standby
// (its other processes end as they notice, or as the caller kills them).
// It does not wait: the postmaster's output ends only once every process
// of the server has, and one the caller stopped ends when it is killed.
func (c *Cluster) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running = false
	return c.l.cmd.Process.Kill()
}

// Port is the port the cluster listens on, on 127.0.0.1.
func (c *Cluster) Port() int {
	u, err := url.Parse(c.l.url)
	if err != nil {
		return 0
	}
	port, _ := strconv.Atoi(u.Port())
	return port
}

// MultiHost returns raw, a URL of one of the clusters, naming every host of
// clusters in turn (host:port, comma-separated, as libpq and pgx read them)
// and asking for the one that takes writes (target_session_attrs
// read-write): a client of it follows a failover from one to another.
func MultiHost(raw string, clusters ...*Cluster) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	hosts := make([]string, len(clusters))
	for i, c := range clusters {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(c.Port())
	}
	u.Host = strings.Join(hosts, ",")
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	return u.String(), nil
}
