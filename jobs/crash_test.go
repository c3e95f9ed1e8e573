package jobs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// crashHelperEnv makes the test binary act as a worker process that claims
// jobs, says which, and "works" until it is killed.
const crashHelperEnv = "DOCKET_JOBS_CRASH_HELPER_URL"

func TestCrashHelperProcess(t *testing.T) {
	url := os.Getenv(crashHelperEnv)
	if url == "" {
		t.Skip("only runs as the worker of TestWorkerKilledMidJob")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	client, err := jobs.NewClient(pool, jobs.Config{Project: project, Actor: "svc:worker", Clock: db.NewFakeClock(t0)})
	require.NoError(t, err)
	claimed, err := client.Claim(ctx, "default", jobs.ClaimOptions{Limit: 10})
	require.NoError(t, err)
	ids := make([]int64, len(claimed))
	for i, j := range claimed {
		ids[i] = j.ID
	}
	require.NoError(t, json.NewEncoder(os.Stdout).Encode(ids))
	_, _ = io.Copy(io.Discard, os.Stdin) // working, until killed
}

// A worker process killed in the middle of its jobs leaves them claimed until
// their leases expire; then the sweep queues the repeatable one again and
// leaves the other uncertain, because the dead worker may have done it. The
// dead worker's tokens are worth nothing, and both histories verify.
func TestWorkerKilledMidJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	e.Allow(t, testkit.Grants("svc:worker", project, access.JobClaim)...)
	safe := spec(`{"n": "safe to repeat"}`)
	safe.Repeatable = true
	rep, err := e.client.Enqueue(ctx, safe)
	require.NoError(t, err)
	once, err := e.client.Enqueue(ctx, spec(`{"n": "charges a card"}`))
	require.NoError(t, err)

	worker := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.v=false")
	worker.Env = append(os.Environ(), crashHelperEnv+"="+e.Pool.Config().ConnString())
	worker.Stderr = os.Stderr
	stdin, err := worker.StdinPipe() // kept open: the worker works until killed
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := worker.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, worker.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the worker claimed nothing")
	var ids []int64
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(line)), &ids))
	require.ElementsMatch(t, []int64{rep.Job.ID, once.Job.ID}, ids)

	require.NoError(t, worker.Process.Kill())
	_ = worker.Wait()

	// While the leases run, nobody else gets the jobs.
	got, err := e.client.Claim(ctx, "default", jobs.ClaimOptions{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got)

	e.Clock.Set(t0.Add(jobs.DefaultLease))
	moved, err := e.client.ExpireLeases(ctx, 100)
	require.NoError(t, err)
	require.Len(t, moved, 2)
	states := map[int64]jobs.State{}
	for _, j := range moved {
		states[j.ID] = j.State
	}
	require.Equal(t, map[int64]jobs.State{rep.Job.ID: jobs.Queued, once.Job.ID: jobs.Uncertain}, states)

	for _, id := range ids {
		j, err := e.client.Get(ctx, id)
		require.NoError(t, err)
		require.Contains(t, j.Diagnostic, "lease expired")
		require.Contains(t, j.Diagnostic, "svc:worker")
		v, err := e.client.Verify(ctx, id)
		require.NoError(t, err)
		require.True(t, v.OK, v.Problem)
	}

	// The repeatable job runs again, after its backoff, for someone else.
	e.Clock.Advance(time.Hour)
	got, err = e.client.Claim(ctx, "default", jobs.ClaimOptions{Limit: 10})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, rep.Job.ID, got[0].ID)
	require.Equal(t, 2, got[0].Attempts)
}
