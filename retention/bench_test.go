package retention_test

// Benchmarks of the prune: how long it takes to remove 10,000 finished jobs
// with their events, and what a prune running does to the latency of claims
// beside it. Run them with:
//
//	export DOCKET_TEST_DATABASE_URL=$(scripts/pg-local)
//	go test -run XXX -bench 'BenchmarkPrune' -benchtime 5x ./retention/

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
)

// benchPruned is how many jobs one timed prune removes.
const benchPruned = 10_000

// finishMany enqueues n jobs of queue and succeeds them, in batches.
func finishMany(b testing.TB, e env, queue string, n int) {
	b.Helper()
	ctx := context.Background()
	for done := 0; done < n; {
		chunk := min(n-done, 1000)
		specs := make([]jobs.Spec, chunk)
		for i := range specs {
			specs[i] = jobs.Spec{Kind: "report.build", Queue: queue, Payload: json.RawMessage(`{"n": 1}`)}
		}
		_, err := e.jobs.EnqueueMany(ctx, specs)
		require.NoError(b, err)
		claimed, err := e.jobs.Claim(ctx, queue, jobs.ClaimOptions{Limit: chunk})
		require.NoError(b, err)
		_, err = e.jobs.CompleteMany(ctx, completions(claimed))
		require.NoError(b, err)
		done += chunk
	}
}

// BenchmarkPrune times one prune of 10,000 succeeded jobs (30,000 events),
// their chains verified, and reports ms per 10,000 jobs.
func BenchmarkPrune(b *testing.B) {
	e := setup(b, hours(1, 1, 1))
	ctx := context.Background()
	var total time.Duration
	for range b.N {
		b.StopTimer()
		finishMany(b, e, "default", benchPruned)
		e.Clock.Advance(2 * time.Hour)
		b.StartTimer()
		began := time.Now()
		ps, err := e.pruner.Prune(ctx, benchPruned)
		total += time.Since(began)
		require.NoError(b, err)
		require.Len(b, ps, 1)
		require.Equal(b, benchPruned, ps[0].Jobs)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/10k-jobs")
}

// BenchmarkPruneClaimLatency measures the latency of claiming and
// completing one job at a time, on queue "live", while nothing else runs
// and while prunes of 10,000 jobs run beside it, and reports p50 and p99 of
// each.
func BenchmarkPruneClaimLatency(b *testing.B) {
	e := setup(b, hours(1, 1, 1))
	ctx := context.Background()
	claimLoop := func(n int) []time.Duration {
		lat := make([]time.Duration, 0, n)
		for range n {
			_, err := e.jobs.Enqueue(ctx, jobs.Spec{Kind: "report.build", Queue: "live", Payload: json.RawMessage(`{}`)})
			require.NoError(b, err)
			began := time.Now()
			claimed, err := e.jobs.Claim(ctx, "live", jobs.ClaimOptions{Limit: 1})
			require.NoError(b, err)
			require.Len(b, claimed, 1)
			_, err = e.jobs.Complete(ctx, claimed[0].Lease(), nil, nil)
			require.NoError(b, err)
			lat = append(lat, time.Since(began))
		}
		return lat
	}
	pct := func(lat []time.Duration, p float64) float64 {
		slices.Sort(lat)
		return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000
	}
	var idle, pruning []time.Duration
	for range b.N {
		b.StopTimer()
		finishMany(b, e, "default", benchPruned)
		e.Clock.Advance(2 * time.Hour)
		b.StartTimer()
		idle = append(idle, claimLoop(200)...)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(stop)
			_, err := e.pruner.Prune(ctx, benchPruned)
			require.NoError(b, err)
		}()
		for {
			select {
			case <-stop:
			default:
				pruning = append(pruning, claimLoop(10)...)
				continue
			}
			break
		}
		wg.Wait()
	}
	b.ReportMetric(pct(idle, 0.5), "idle_p50_ms")
	b.ReportMetric(pct(idle, 0.99), "idle_p99_ms")
	b.ReportMetric(pct(pruning, 0.5), "pruning_p50_ms")
	b.ReportMetric(pct(pruning, 0.99), "pruning_p99_ms")
	b.ReportMetric(float64(len(pruning))/float64(b.N), "claims_during_prune")
}

// BenchmarkPruneHistory times one prune of 10,000 succeeded jobs, and the
// WAL it writes, two ways: "rows", their events deleted row by row (the
// jobs' ids in a partition still open), and "drop", the jobs filling one
// history partition 10,000 ids wide, which the prune's upkeep drops whole.
// It reports ms and WAL bytes per pruned job; WAL is the server's, so run it
// on a server of its own (DOCKET_TEST_DATABASE_URL unset: a private one).
func BenchmarkPruneHistory(b *testing.B) {
	for _, mode := range []string{"rows", "drop"} {
		b.Run(mode, func(b *testing.B) {
			e := setup(b, hours(1, 1, 1))
			ctx := context.Background()
			if mode == "drop" {
				_, err := e.Pool.Exec(ctx, `UPDATE docket.settings SET value = $1 WHERE name = 'history_partition_width'`, fmt.Sprint(benchPruned))
				require.NoError(b, err)
				_, err = e.Pool.Exec(ctx, `ALTER TABLE docket.jobs ALTER COLUMN id RESTART WITH 1000000000`)
				require.NoError(b, err)
				tx, err := e.API.Begin(ctx)
				require.NoError(b, err)
				_, err = e.pruner.MaintainHistoryTx(ctx, tx)
				require.NoError(b, err)
				require.NoError(b, tx.Commit(ctx))
			}
			lsn := func() (n int64) {
				require.NoError(b, e.Pool.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&n))
				return n
			}
			var total, upkeep time.Duration
			var wal int64
			dropped := 0
			for range b.N {
				b.StopTimer()
				finishMany(b, e, "default", benchPruned)
				e.Clock.Advance(2 * time.Hour)
				_, err := e.Pool.Exec(ctx, `CHECKPOINT`)
				require.NoError(b, err)
				b.StartTimer()
				began, from := time.Now(), lsn()
				tx, err := e.API.Begin(ctx)
				require.NoError(b, err)
				ps, err := e.pruner.PruneTx(ctx, tx, benchPruned)
				require.NoError(b, err)
				pruned := time.Now()
				up, err := e.pruner.MaintainHistoryTx(ctx, tx)
				require.NoError(b, err)
				require.NoError(b, tx.Commit(ctx))
				upkeep += time.Since(pruned)
				total += time.Since(began)
				wal += lsn() - from
				require.Len(b, ps, 1)
				require.Equal(b, benchPruned, ps[0].Jobs)
				dropped += up.Dropped
			}
			jobsPruned := float64(b.N * benchPruned)
			b.ReportMetric(float64(total.Microseconds())/jobsPruned, "µs/job")
			b.ReportMetric(float64(upkeep.Microseconds())/jobsPruned, "upkeep-µs/job")
			b.ReportMetric(float64(wal)/jobsPruned, "WAL-B/job")
			b.ReportMetric(float64(dropped)/float64(b.N), "dropped/op")
		})
	}
}
