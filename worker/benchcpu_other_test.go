//go:build !linux

package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuUse is unmeasured off Linux: BenchmarkBurnDown reports no CPU then.
type cpuUse struct {
	self, server time.Duration
	serverKnown  bool
}

func cpuNow(context.Context, *pgxpool.Pool) cpuUse { return cpuUse{} }

func startProfile(b *testing.B, _ string) func() {
	if *benchPerf != "" {
		b.Fatal("-docket.bench.perf records with Linux perf: Linux only")
	}
	return func() {}
}
