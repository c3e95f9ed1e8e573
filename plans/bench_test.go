package plans_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

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
			jc, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
			require.NoError(b, err)
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
