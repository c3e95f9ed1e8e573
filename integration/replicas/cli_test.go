//go:build unix

package replicas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// The docket command given --replica-url reads from the standby, says on
// stderr where it read and how far behind that may be, and sends a write
// to the primary.
func cli(t *testing.T, r *rig) {
	ctx := t.Context()
	bin := filepath.Join(t.TempDir(), "docket")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../cmd/docket")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	docket := func(args ...string) (stdout, stderr string) {
		t.Helper()
		var o, e bytes.Buffer
		c := exec.CommandContext(ctx, bin, append([]string{"--database-url", r.primaryURL, "--replica-url", r.replicaURL,
			"--as", string(app)}, args...)...)
		c.Env = append(os.Environ(), "DOCKET_DATABASE_URL=", "DOCKET_REPLICA_URL=")
		c.Stdout, c.Stderr = &o, &e
		require.NoError(t, c.Run(), "docket %v:\n%s%s", args, o.String(), e.String())
		return o.String(), e.String()
	}
	listed := func(stdout string) []int64 {
		t.Helper()
		var doc struct {
			Jobs []struct {
				ID int64 `json:"id"`
			} `json:"jobs"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &doc), stdout)
		var ids []int64
		for _, j := range doc.Jobs {
			ids = append(ids, j.ID)
		}
		return ids
	}
	said := regexp.MustCompile(`^docket: reading from 127\.0\.0\.1:\d+/` + database +
		`: replica, at most \S+ behind \(replayed up to \S+\); writes go to 127\.0\.0\.1:\d+/` + database + "\n$")

	// The command runs on the system clock; so do these clients, so that
	// the command's cancel is not before the job's birth.
	on := func(pool *pgxpool.Pool) *jobs.Client {
		c, err := jobs.NewClient(pool, jobs.Config{Project: project, Actor: app, Clock: db.SystemClock{}})
		require.NoError(t, err)
		return c
	}
	applied := on(r.applied)
	spec := jobs.Spec{Kind: "cli.replica", Payload: []byte(`{}`)}
	first, err := applied.Enqueue(ctx, spec) // replayed before it returns
	require.NoError(t, err)
	stdout, stderr := docket("job", "list", project, "--kind", "cli.replica", "-o", "json")
	require.Equal(t, []int64{first.Job.ID}, listed(stdout))
	require.Regexp(t, said, stderr)

	// Replay paused: the CLI's list is the standby's, without the job the
	// primary has since committed.
	r.pauseReplay(t)
	second, err := on(r.flushed).Enqueue(ctx, spec)
	require.NoError(t, err)
	stdout, stderr = docket("job", "list", project, "--kind", "cli.replica", "-o", "json")
	require.Equal(t, []int64{first.Job.ID}, listed(stdout), "read on the standby, whose replay is paused")
	require.Regexp(t, said, stderr)

	// A write through the CLI goes to the primary: the standby, read-only
	// and paused, could not take it.
	stdout, _ = docket("job", "cancel", fmt.Sprint(second.Job.ID), "--reason", "cancelled through the CLI")
	require.Equal(t, fmt.Sprintf("job %d is cancelled\n", second.Job.ID), stdout)
	got, err := on(r.flushed).Get(ctx, second.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Cancelled, got.State)
	r.resumeReplay(t)
}
