package plans_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
)

// BenchmarkAdvance times one step's completion, claim included, with the
// ready-set advance it triggers (recording the result, applying it in
// ready order, admitting and enqueuing the next step), in a chain of 10
// and of 1,000 steps. Compare the two ns/op: the advance costs the same
// whatever the plan's size.
//
//	go test -run XXX -bench BenchmarkAdvance -benchtime 2000x ./plans/
func BenchmarkAdvance(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			e := setup(b)
			ctx := context.Background()
			jc := jobsAs(b, e)
			p := stepChain(n)
			start := func() int64 {
				run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
				require.NoError(b, err)
				return run.ID
			}
			start()
			b.ResetTimer()
			for range b.N {
				claimed, err := jc.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: 1})
				require.NoError(b, err)
				if len(claimed) == 0 {
					b.StopTimer()
					start()
					b.StartTimer()
					claimed, err = jc.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: 1})
					require.NoError(b, err)
				}
				require.Len(b, claimed, 1)
				_, err = jc.Complete(ctx, claimed[0].Lease(), json.RawMessage(`{"n": 1}`), nil)
				require.NoError(b, err)
			}
		})
	}
}

// BenchmarkAdvanceBatch times a batch's successes advanced together, as a
// worker's batch records them: n runs of a 3-step chain whose steps pass
// results on (stepChain), each step of all n claimed in one claim and
// completed in one statement (CompleteMany), which advances the n runs
// set-based (run_steps_succeeded_set): admitting their next steps, and at
// the third finishing them. Only the completions are timed; ns/step is
// their time a step. Compare batch=10 with batch=250: a step's advance
// should cost the same whatever the size of its batch.
//
//	go test -run XXX -bench BenchmarkAdvanceBatch -benchtime 20x ./plans/
func BenchmarkAdvanceBatch(b *testing.B) {
	for _, n := range []int{10, 250} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			e := setup(b)
			ctx := context.Background()
			jc := jobsAs(b, e)
			p := stepChain(3)
			b.ResetTimer()
			b.StopTimer()
			for range b.N {
				for range n {
					_, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
					require.NoError(b, err)
				}
				for range 3 {
					claimed, err := jc.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: n})
					require.NoError(b, err)
					require.Len(b, claimed, n)
					batch := make([]jobs.Completion, n)
					for i, j := range claimed {
						batch[i] = jobs.Completion{Lease: j.Lease(), Result: json.RawMessage(`{"n": 1}`)}
					}
					b.StartTimer()
					refusals, err := jc.CompleteMany(ctx, batch)
					b.StopTimer()
					require.NoError(b, err)
					for _, r := range refusals {
						require.NoError(b, r)
					}
				}
			}
			var open int
			require.NoError(b, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.runs WHERE status <> 'succeeded'`).Scan(&open))
			require.Zero(b, open, "every run finished")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n*3), "ns/step")
		})
	}
}

// BenchmarkAdvanceAfterOneStep times a session's batches of plan steps'
// successes (2,000 steps, 100 or 500 a batch, each the first of a 2-step
// chain whose success admits the second) on a new connection, and on one
// whose first completion was one step alone: a session keeps the plans its
// first statements make, so a plan chosen for one row must not make every
// later batch slower. Compare after_one/fresh (about 1).
//
//	go test -run XXX -bench BenchmarkAdvanceAfterOneStep -benchtime 2x ./plans/
func BenchmarkAdvanceAfterOneStep(b *testing.B) {
	for _, batch := range []int{100, 500} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			e := setup(b)
			ctx := b.Context()
			jc := jobsAs(b, e)
			const perSide = 2000
			p := stepChain(2)
			result := json.RawMessage(`{"n": 1}`)
			// drain settles, untimed, the second steps the sessions admitted.
			drain := func() {
				for {
					claimed, err := jc.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: jobs.MaxClaimBatch})
					require.NoError(b, err)
					if len(claimed) == 0 {
						return
					}
					done := make([]jobs.Completion, len(claimed))
					for i, j := range claimed {
						done[i] = jobs.Completion{Lease: j.Lease(), Result: result}
					}
					_, err = jc.CompleteMany(ctx, done)
					require.NoError(b, err)
				}
			}
			var fresh, afterOne time.Duration
			for b.Loop() {
				for range 2*perSide + 1 {
					_, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
					require.NoError(b, err)
				}
				cfg := e.API.Config().ConnConfig
				fresh += testkit.SettleOnNewSession(b, cfg, jc, jobs.DefaultQueue, result, false, perSide, batch)
				afterOne += testkit.SettleOnNewSession(b, cfg, jc, jobs.DefaultQueue, result, true, perSide, batch)
				drain()
			}
			stepsEach := float64(b.N * perSide)
			b.ReportMetric(float64(fresh.Microseconds())/stepsEach, "fresh_us/step")
			b.ReportMetric(float64(afterOne.Microseconds())/stepsEach, "after_one_us/step")
			b.ReportMetric(float64(afterOne)/float64(fresh), "after_one/fresh")
		})
	}
}

// BenchmarkStart times one start of a 3-step chain (its plan stored
// already), as a client calls it: the run, its version and its first step's
// job and step written, and its admission set-based (the default) or one
// step at a time (docket.advance = 'row', which starts as the row path
// does). Compare the two ns/op.
//
//	go test -run XXX -bench BenchmarkStart -benchtime 2000x ./plans/
func BenchmarkStart(b *testing.B) {
	for _, how := range []string{"set", "row"} {
		b.Run("admission="+how, func(b *testing.B) {
			e := setup(b)
			if how == "row" {
				e = advanceAs(b, e, how)
			}
			ctx := context.Background()
			p := chainOf("bench.start", "bench.start", "bench.start")
			_, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
			require.NoError(b, err)
			b.ResetTimer()
			for range b.N {
				_, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
				require.NoError(b, err)
			}
		})
	}
}
