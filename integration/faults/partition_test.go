//go:build unix

package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/pgserver"
)

// The partition scenario runs Postgres and each worker in a container of
// their own on a Docker network the test makes (the suite's local clusters
// listen on 127.0.0.1 alone, which a network cannot come between), and cuts
// the worker off that network. The test itself reaches Postgres through
// the port its container publishes on 127.0.0.1, which the partition
// leaves alone. Both containers run the image scripts/pg-image builds from
// the machine's own Debian packages, with no registry: the worker's is the
// same Debian userland, so the test binary, built here with -race against
// the machine's C library, runs in it, mounted read-only: the engine must
// run on this machine, as it does on docket's CI.

// partitionFor is how long the partition cuts the worker off the network.
const partitionFor = 10 * time.Second

// requireDockerEnv, set to 1 (anything but empty or 0), makes the
// partition scenario fail where it would be skipped: no docker command, no
// engine answering, or no image. CI sets it, so that the scenario cannot
// silently not run.
const requireDockerEnv = "DOCKET_FAULTS_REQUIRE_DOCKER"

// partitionEnv, set to "apart", skips the partition scenario in a run of
// the whole suite, for a run of it alone: CI runs it after the other tests,
// so that its containers do not share the machine with a whole test run
// (the worker behind docker run is the slowest of the suite's workers, and
// its 3 s leases leave little to a saturated machine).
const partitionEnv = "DOCKET_FAULTS_PARTITION"

// The labels of every container and network the scenario makes: pgtest's
// (integration/pgtest), naming the machine and the test process, so that
// a later run here, pgtest, and CI's tidying remove what a test process that
// died left behind.
const (
	labelHost = "dev.docket.pgtest.host"
	labelPID  = "dev.docket.pgtest.pid"
)

// imageLimit bounds the build of the image, which on a machine without it
// takes two to five minutes (mostly fetching Debian's packages), and more
// on a busy one. The build also ends partitionRun before the test binary's
// deadline (go test -timeout), which would otherwise end every scenario.
const (
	imageLimit   = 8 * time.Minute
	partitionRun = 3 * time.Minute
)

// dockerNet is a Docker network of a scenario's own, with Postgres in a
// container on it and a container for each worker the rig starts.
type dockerNet struct {
	t      *testing.T
	name   string // the network's, and the prefix of its containers' names
	image  string
	pg     string   // Postgres's container
	bin    string   // the test binary, mounted into each worker's container
	labels []string // docker's --label arguments for what it makes
}

// inContainers is the partition scenario's rig: Postgres in a container on
// a network of the test's own, and the workers on it (see dockerNet.worker).
// It skips t when there is no Docker engine or image, unless
// requireDockerEnv is set.
func inContainers(t *testing.T) *rig {
	t.Helper()
	if os.Getenv(partitionEnv) == "apart" {
		t.Skipf("%s=apart: the partition scenario runs on its own, after this run", partitionEnv)
	}
	ctx := t.Context()
	img := theImage(t)
	if img.err != nil {
		if v := os.Getenv(requireDockerEnv); v != "" && v != "0" {
			t.Fatalf("the partition scenario needs a Docker engine (%s is set): %v", requireDockerEnv, img.err)
		}
		t.Skipf("the partition scenario runs Postgres and the worker in Docker containers: %v (%s=1 makes this a failure)",
			img.err, requireDockerEnv)
	}
	t.Logf("partition: %s", img.said)
	bin, err := filepath.Abs(os.Args[0])
	require.NoError(t, err)
	host, _ := os.Hostname()
	n := &dockerNet{t: t, name: pgserver.RandomName("docket-faults-"), image: img.name, bin: bin,
		labels: []string{"--label", labelHost + "=" + host, "--label", labelPID + "=" + strconv.Itoa(os.Getpid())}}
	n.pg = n.name + "-pg"

	n.must(ctx, append(append([]string{"network", "create"}, n.labels...), n.name)...)
	t.Cleanup(func() { n.remove("network", "rm", n.name) })
	password := pgserver.RandomName("pw")
	n.must(ctx, append(append([]string{"run", "--detach", "--name", n.pg, "--network", n.name}, n.labels...),
		"--publish", "127.0.0.1::5432", "--tmpfs", "/var/lib/postgresql/data", "--env", "POSTGRES_PASSWORD="+password,
		n.image, "postgres", "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections="+strconv.Itoa(pgserver.DefaultMaxConnections))...)
	// Registered before the workers' kills, so run after them.
	t.Cleanup(func() { n.remove("rm", "--force", "--volumes", n.pg) })
	published := strings.Fields(n.must(ctx, "port", n.pg, "5432/tcp"))
	require.NotEmpty(t, published, "container %s publishes no port", n.pg)
	hostPort := published[0]
	admin := fmt.Sprintf("postgres://postgres:%s@%s/postgres?sslmode=disable", password, hostPort)
	waitAccepting(t, admin)
	srv, err := pgserver.Open(ctx, admin, "container "+n.pg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close(context.Background())) })

	r := &rig{t: t, net: n}
	r.setUp(srv, "")
	return r
}

// waitAccepting waits up to a minute for the server at url to accept a
// connection: its container's entrypoint first starts it on its socket
// alone, to make its database, and then again on the network.
func waitAccepting(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			err = conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Postgres in its container did not accept connections within a minute: %v", err)
		}
		time.Sleep(poll)
	}
}

// worker returns how to run worker process name in a container on n, and
// the URL it logs in with: the rig's login, at Postgres's container on the
// network. docker run -i passes on the spec's variable, the worker's
// standard streams and the signals sent to it; SIGKILL, which it cannot,
// ends the docker command alone, and then the worker, whose standard input
// has ended, returns at once (--rm removes its container). The container
// is removed when the test ends in any case.
func (n *dockerNet) worker(r *rig, name string) (loginURL string, command []string) {
	u, err := url.Parse(r.loginURL())
	require.NoError(n.t, err)
	u.Host = net.JoinHostPort(n.pg, "5432")
	ctr := n.container(name)
	n.t.Cleanup(func() { n.remove("rm", "--force", ctr) })
	const inside = "/usr/local/bin/faults.test"
	command = append([]string{"docker", "run", "--interactive", "--rm", "--name", ctr, "--network", n.name}, n.labels...)
	command = append(command, "--env", childEnv, "--env", "GORACE",
		"--mount", "type=bind,source="+n.bin+",target="+inside+",readonly",
		"--entrypoint", inside, n.image)
	return u.String(), command
}

// container is the name of worker name's container.
func (n *dockerNet) container(worker string) string { return n.name + "-" + worker }

// address is a container's address on n, "" when it has none.
func (n *dockerNet) address(ctr string) string {
	return n.must(n.t.Context(), "inspect", "--format",
		fmt.Sprintf(`{{with index .NetworkSettings.Networks %q}}{{.IPAddress}}{{end}}`, n.name), ctr)
}

// must runs the docker command with args and returns its output, failing
// the test if it fails.
func (n *dockerNet) must(ctx context.Context, args ...string) string {
	n.t.Helper()
	out, err := docker(ctx, args...)
	require.NoError(n.t, err)
	return out
}

// remove runs the docker command with args to remove what n made, when the
// test ends: a failure is logged.
func (n *dockerNet) remove(args ...string) {
	if _, err := docker(context.Background(), args...); err != nil {
		n.t.Logf("partition: %v", err)
	}
}

// dockerLimit bounds each docker command but the image's build.
const dockerLimit = time.Minute

// docker runs the docker command with args and returns its standard output,
// trimmed; its error says what the command said on its standard error.
func docker(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, dockerLimit)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// image is the image the scenario's containers run, or why there is none.
type image struct {
	name string
	said string // what scripts/pg-image said: found, or built and how fast
	err  error
}

// theImage finds, once per test process, a Docker engine and the image
// scripts/pg-image builds, building it if it is not there within
// imageLimit and t's deadline, and removes what test processes that died
// left on the engine.
func theImage(t *testing.T) image {
	imageOnce.Do(func() {
		limit := imageLimit
		if deadline, ok := t.Deadline(); ok {
			limit = min(limit, time.Until(deadline)-partitionRun)
		}
		found = findImage(limit)
	})
	return found
}

var (
	imageOnce sync.Once
	found     image
)

// findImage is theImage, once, with limit for the build.
func findImage(limit time.Duration) image {
	if _, err := exec.LookPath("docker"); err != nil {
		return image{err: errors.New("there is no docker command in PATH")}
	}
	ctx := context.Background()
	if _, err := docker(ctx, "version", "--format", "{{.Server.Version}}"); err != nil {
		return image{err: fmt.Errorf("the Docker engine does not answer: %w", err)}
	}
	removeStale(ctx)
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "pg-image"))
	if err != nil {
		return image{err: err}
	}
	if limit <= 0 {
		return image{err: errors.New("the test binary's deadline leaves no time to look for the image: raise go test's -timeout")}
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The script, and what it runs, are ended together: SIGTERM, so that its
	// trap removes its work directory.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	began := time.Now()
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: not done within %v (build the image beforehand with scripts/pg-image, or raise go test's -timeout)",
				err, limit.Round(time.Second))
		}
		return image{err: fmt.Errorf("scripts/pg-image (which builds the image from Debian's packages) failed after %v: %w: %s",
			time.Since(began).Round(time.Second), err, lastLine(stderr.String()))}
	}
	return image{name: strings.TrimSpace(stdout.String()),
		said: fmt.Sprintf("%s (%v)", lastLine(stderr.String()), time.Since(began).Round(time.Millisecond))}
}

// lastLine is the last line of s that is not blank.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// removeStale removes the containers, then the networks, labelled for this
// machine and a test process no longer running. Errors are ignored: this
// is only tidying up.
func removeStale(ctx context.Context) {
	host, err := os.Hostname()
	if err != nil {
		return
	}
	for _, kind := range []struct{ list, remove []string }{
		{[]string{"container", "ls", "--all"}, []string{"container", "rm", "--force"}},
		{[]string{"network", "ls"}, []string{"network", "rm"}},
	} {
		out, err := docker(ctx, append(kind.list, "--filter", "label="+labelHost+"="+host,
			"--format", `{{.ID}} {{.Label "`+labelPID+`"}}`)...)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			if pid, err := strconv.Atoi(f[1]); err == nil && !pgserver.ProcessAlive(pid) {
				_, _ = docker(ctx, append(kind.remove, f[0])...)
			}
		}
	}
}

// partition cuts the worker off the network (docker network disconnect)
// for partitionFor, then connects it again. Neither side is told: what
// either sent in the meantime is lost on the way, and their connections
// stall. TCP sends it again, at intervals that double (from 200 ms), so a
// connection may be heard from again up to about partitionFor after the
// network is back: the partition has cleared when the transactions the
// worker had open have been (awaitHeard).
func partition(r *rig, _ int, _ form) injected {
	r.t.Helper()
	n := r.net
	victim := r.children[len(r.children)-1]
	ctr := n.container(victim.Name)
	before := n.address(ctr)
	n.must(r.t.Context(), "network", "disconnect", n.name, ctr)
	cut := time.Now()
	time.Sleep(partitionFor) // the partition itself
	n.must(r.t.Context(), "network", "connect", n.name, ctr)
	back := time.Now()
	after := n.address(ctr)
	took, stalled := r.awaitHeard(cut, 2*partitionFor)
	heard := fmt.Sprintf("its open transactions all heard from again %v after", took.Round(time.Millisecond))
	if stalled > 0 {
		heard = fmt.Sprintf("%d of its transactions still not heard from %v after", stalled, took.Round(time.Millisecond))
	}
	return injected{
		what: fmt.Sprintf("worker %s cut off the network for %v (docker network disconnect, connect)",
			victim.Name, back.Sub(cut).Round(time.Millisecond)),
		effective: cut,
		notes: []string{fmt.Sprintf("the network back, %s; the worker's address %s before, %s after",
			heard, before, after)},
	}
}

// awaitHeard waits, up to limit, until Postgres has heard from the worker
// on every connection it left in a transaction before cut (or it has
// ended), and on every one to which it was sending a result before cut.
// It returns how long it waited and how many such connections were still
// waiting when it gave up.
func (r *rig) awaitHeard(cut time.Time, limit time.Duration) (took time.Duration, stalled int) {
	r.t.Helper()
	began := time.Now()
	for {
		err := r.owner.QueryRow(r.t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE usename = $1 AND state_change < $2
			  AND (state LIKE 'idle in transaction%' OR wait_event = 'ClientWrite')`,
			r.login.Role, cut).Scan(&stalled)
		require.NoError(r.t, err)
		if stalled == 0 || time.Since(began) > limit {
			return time.Since(began), stalled
		}
		time.Sleep(poll)
	}
}
