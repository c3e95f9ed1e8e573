package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The built command, not just run: exit codes come from os.Exit and the
// error line from main.
func TestBinaryAgainstUnreachableDatabase(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := filepath.Join(t.TempDir(), "docket")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	for _, cmd := range []string{"migrate", "status"} {
		var stdout, stderr bytes.Buffer
		c := exec.CommandContext(t.Context(), bin, cmd)
		c.Env = append(os.Environ(), "DOCKET_DATABASE_URL=postgres://ana:hunter2@127.0.0.1:1/orders?sslmode=disable")
		c.Stdout, c.Stderr = &stdout, &stderr
		err := c.Run()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%s must fail: %v", cmd, err)
		require.Equal(t, exitError, exit.ExitCode())
		require.Empty(t, stdout.String())
		line := stderr.String()
		require.Equal(t, 1, strings.Count(line, "\n"), "one line: %q", line)
		require.True(t, strings.HasPrefix(line, "docket "+cmd+": cannot connect to 127.0.0.1:1"), line)
		require.NotContains(t, line, "hunter2")
	}
}
