package pgserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary act as a process that starts a local
// server, prints it, and waits to be killed.
const helperEnv = "DOCKET_PGSERVER_LOCAL_HELPER"

// helperStarted is what the helper process prints once its server runs.
type helperStarted struct {
	Dir           string
	PostmasterPID int
}

func TestLocalHelperProcess(t *testing.T) {
	t.Parallel()
	if os.Getenv(helperEnv) == "" {
		t.Skip("only runs as the helper of TestLocalServerDiesWithTestProcess")
	}
	l, err := startLocal(context.Background(), LocalConfig{MaxConnections: DefaultMaxConnections})
	require.NoError(t, err)
	require.NoError(t, json.NewEncoder(os.Stdout).Encode(helperStarted{Dir: l.dir, PostmasterPID: l.cmd.Process.Pid}))
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed
}

func TestLocalServerDiesWithTestProcess(t *testing.T) {
	t.Parallel()
	if _, err := findLocalBinaries(); err != nil {
		t.Skip("no PostgreSQL server binaries installed")
	}

	helper := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestLocalHelperProcess$", "-test.v=false")
	helper.Env = append(os.Environ(), helperEnv+"=1")
	helper.Stderr = os.Stderr
	stdin, err := helper.StdinPipe() // kept open so the helper waits
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, helper.Start())

	var started helperStarted
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "helper printed no server")
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(line)), &started))
	require.DirExists(t, started.Dir)
	t.Cleanup(func() { _ = os.RemoveAll(started.Dir) }) // in case the test fails

	// A pidfd becomes readable when the process has exited.
	pidfd, err := unix.PidfdOpen(started.PostmasterPID, 0)
	if errors.Is(err, unix.ENOSYS) {
		t.Skip("kernel has no pidfd_open (Linux < 5.3)")
	}
	require.NoError(t, err, "postmaster not running")
	defer unix.Close(pidfd)

	// Kill the "test process" the hard way: no cleanup of its own can run.
	require.NoError(t, helper.Process.Kill())
	_ = helper.Wait()

	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 30_000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		require.NoError(t, err)
		require.Equal(t, 1, n, "postmaster still running 30s after its test process died")
		break
	}

	// The next start in the same place removes the orphaned directory.
	removeStaleDirs(filepath.Dir(started.Dir))
	require.NoDirExists(t, started.Dir)
}
