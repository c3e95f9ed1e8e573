package dockettest_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/dockettest"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
)

// userFailsEnv makes TestUserAssertionInsideWithTx run: it fails by design.
const userFailsEnv = "DOCKETTEST_USER_ASSERTION_FAILS"

// A test kit assertion that fails inside db.WithTx fails its test at once,
// with its message: the assertion ends the test's goroutine
// (runtime.Goexit), WithTx rolls the transaction back on the way out, and
// the test's cleanup, which closes the pool, finds every connection back.
// The failing test runs in a process of its own, verbose, so its log says
// when the assertion is about to fail.
func TestAFailingAssertionInsideWithTxFailsAtOnce(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), os.Args[0],
		"-test.run=^TestUserAssertionInsideWithTx$", "-test.v", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), userFailsEnv+"=1")
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close() // the child holds its own copy
	require.NoError(t, err)

	var out bytes.Buffer
	var asserting time.Time
	lines := bufio.NewScanner(io.TeeReader(r, &out))
	for lines.Scan() {
		if asserting.IsZero() && strings.Contains(lines.Text(), "asserting inside WithTx") {
			asserting = time.Now()
		}
	}
	err = cmd.Wait()
	took := time.Since(asserting)
	r.Close()

	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the test should fail: %v\n%s", err, out.String())
	require.Equal(t, 1, exit.ExitCode(), out.String())
	require.False(t, asserting.IsZero(), "the test never reached its assertion:\n%s", out.String())
	require.Contains(t, out.String(), "--- FAIL: TestUserAssertionInsideWithTx")
	require.Contains(t, out.String(), "dockettest: no job of kind shop.receipt (payload schema 1) in project shop visible to svc:shop",
		"the assertion's own message")
	require.NotContains(t, out.String(), "test timed out")
	require.Less(t, took, 10*time.Second, "from the failing assertion to the end of the test process")
	t.Logf("from the failing assertion to the end of the test process: %v", took.Round(time.Millisecond))
}

// TestUserAssertionInsideWithTx is a test as a user of docket writes it:
// its service enqueues in a transaction of its own, and the test checks
// what was enqueued before the commit, inside db.WithTx. The check asks
// for a job the service did not enqueue, so the test fails. Run by
// TestAFailingAssertionInsideWithTxFailsAtOnce.
func TestUserAssertionInsideWithTx(t *testing.T) {
	if os.Getenv(userFailsEnv) != "1" {
		t.Skip("fails by design: run by TestAFailingAssertionInsideWithTxFailsAtOnce")
	}
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewDB(t)
	clock := db.NewFakeClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	pc, err := projects.NewClient(pool, projects.Config{Actor: "user:ops", Clock: clock})
	require.NoError(t, err)
	_, err = pc.Create(ctx, "shop")
	require.NoError(t, err)
	ac, err := access.NewClient(pool, access.Config{Actor: "user:ops", Clock: clock})
	require.NoError(t, err)
	_, err = ac.Allow(ctx, access.Grant{Principal: "svc:shop", Project: "shop", Capability: access.JobCreate})
	require.NoError(t, err)
	client, err := jobs.NewClient(pool, jobs.Config{Project: "shop", Actor: "svc:shop", Clock: clock})
	require.NoError(t, err)

	orderKind := jobs.MustKind[Invoice]("shop.invoice", 1)
	receiptKind := jobs.MustKind[Receipt]("shop.receipt", 1)
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		spec, err := orderKind.Spec(Invoice{Order: 7})
		require.NoError(t, err)
		_, err = client.EnqueueTx(ctx, tx, spec)
		require.NoError(t, err)
		t.Log("asserting inside WithTx")
		dockettest.RequireEnqueuedTx(ctx, t, client, tx, receiptKind, nil)
		return nil
	})
	require.NoError(t, err)
}
