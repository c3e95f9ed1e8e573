package setup_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/pgserver"
)

// ownPrefix starts the name of the packaged cluster the test makes; the
// rest is its process id, so that a later run drops what a run that died
// left behind.
const ownPrefix = "docket_untouched_"

// cluster is what the test records of one packaged cluster.
type cluster struct {
	Status   string // online, down
	Started  string // pg_postmaster_start_time(), when online
	MaxConns string // max_connections, when online
}

// make test's setup and make demo, with no URL naming a server, run on a
// private cluster: every packaged cluster of the machine keeps its status,
// and those online keep their start time and max_connections. The machine
// may have none running, so the test makes one of its own first (with
// pg_createcluster, on a free port), which the old setup would have
// reconfigured and restarted.
func TestMakeLeavesTheMachinesClustersAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make demo and make test's setup: not with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes a packaged cluster and reads each as its owner")
	}
	for _, tool := range []string{"pg_lsclusters", "pg_createcluster", "pg_dropcluster", "runuser", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: the machine's clusters are Debian's postgresql-common's", tool)
		}
	}
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)

	dropStale(t)
	version := newestVersion(t)
	name := ownPrefix + strconv.Itoa(os.Getpid())
	run(t, nil, "", "pg_createcluster", "--start", "-p", strconv.Itoa(freePort(t)), version, name)
	t.Cleanup(func() { run(t, nil, "", "pg_dropcluster", "--stop", version, name) })

	before := clusters(t)
	require.Equal(t, "online", before[version+"/"+name].Status, "the test's own cluster runs: %v", before)
	t.Logf("clusters before: %v", before)

	env := withoutServers(os.Environ())
	out := run(t, env, root, "scripts/test", "-run", "^$", "./internal/pgserver/")
	require.Contains(t, out, "withpostgres: a private cluster", "make test's setup started a cluster of its own")
	require.Equal(t, before, clusters(t), "after make test's setup")

	out = run(t, env, root, "make", "-s", "demo")
	require.Contains(t, out, "a scratch database on local PostgreSQL", "the demo ran on a cluster of its own")
	require.Equal(t, before, clusters(t), "after make demo")
}

// withoutServers is env without the variables that name a server or a way
// to one, as on a machine where nobody set them.
func withoutServers(env []string) []string {
	var kept []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case pgserver.EnvURL, pgserver.EnvOnly, "DOCKET_DATABASE_URL", "DATABASE_URL":
			continue
		}
		kept = append(kept, kv)
	}
	return kept
}

// clusters returns the machine's packaged clusters by version/name.
func clusters(t *testing.T) map[string]cluster {
	t.Helper()
	all := map[string]cluster{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, nil, "", "pg_lsclusters", "--no-header")), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		c := cluster{Status: f[3]}
		if c.Status == "online" {
			// As the cluster's owner, through its own socket: Debian's
			// peer authentication, no password.
			got := run(t, nil, "", "runuser", "-u", f[4], "--", "psql", "--cluster", f[0]+"/"+f[1], "-XAtq", "-d", "postgres",
				"-c", "SELECT pg_postmaster_start_time() || ' ' || current_setting('max_connections')")
			c.Started, c.MaxConns, _ = strings.Cut(strings.TrimSpace(got), " ")
			c.Started, c.MaxConns = strings.TrimSpace(c.Started), strings.TrimSpace(c.MaxConns)
		}
		all[f[0]+"/"+f[1]] = c
	}
	return all
}

// dropStale drops the clusters of this test's earlier runs whose process
// is gone.
func dropStale(t *testing.T) {
	t.Helper()
	for key := range clusters(t) {
		version, name, _ := strings.Cut(key, "/")
		pid, err := strconv.Atoi(strings.TrimPrefix(name, ownPrefix))
		if strings.HasPrefix(name, ownPrefix) && err == nil && !pgserver.ProcessAlive(pid) {
			run(t, nil, "", "pg_dropcluster", "--stop", version, name)
		}
	}
}

// newestVersion returns the newest PostgreSQL version whose server is
// installed as Debian packages it.
func newestVersion(t *testing.T) string {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		t.Skip("no packaged PostgreSQL server in /usr/lib/postgresql")
	}
	versions := make([]int, 0, len(bins))
	for _, b := range bins {
		if v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(b)))); err == nil {
			versions = append(versions, v)
		}
	}
	sort.Ints(versions)
	return strconv.Itoa(versions[len(versions)-1])
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// run runs a command in dir with env (nil: this process's), within ten
// minutes, and returns its output; it fails t if the command fails.
func run(t *testing.T, env []string, dir, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}
