//go:build !linux

package worker_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuNow measures nothing off Linux: BenchmarkBurnDown reports no CPU then.
func cpuNow(context.Context, *pgxpool.Pool) cpuUse { return cpuUse{} }

func startProfile(b *testing.B, _ string) func() {
	if *benchPerf != "" {
		b.Fatal("-docket.bench.perf records with Linux perf: Linux only")
	}
	return func() {}
}
