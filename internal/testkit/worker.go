package testkit

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Logger shows a test worker's warnings and errors only.
var Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// Runner is what [Start] starts: a worker.Client, or anything started and
// stopped as one is.
type Runner interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// StopTimeout bounds how long a test's cleanup waits for a runner to stop.
const StopTimeout = 30 * time.Second

// Start starts r and stops it when the test ends, waiting at most
// [StopTimeout].
func Start(t testing.TB, r Runner) {
	t.Helper()
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		_ = r.Stop(ctx)
	})
}
