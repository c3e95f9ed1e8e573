//go:build !linux

package worker_test

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuUse is unmeasured off Linux: BenchmarkBurnDown reports no CPU then.
type cpuUse struct {
	self, server time.Duration
	serverKnown  bool
}

func cpuNow(context.Context, *pgxpool.Pool) cpuUse { return cpuUse{} }
