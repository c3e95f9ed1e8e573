package batches_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/testkit"
)

// BenchmarkCensus reads a batch's report at 1,000 and at 100,000 items:
// the census is the batch row's maintained counts, so both cost the same.
// The items are filled by hand, quarantined, with the counts to match.
//
//	go test -run XXX -bench BenchmarkCensus -benchtime 2000x ./batches/
func BenchmarkCensus(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			e := setup(b)
			ctx := context.Background()
			r, err := e.app.Open(ctx, project, "census", twoSteps)
			require.NoError(b, err)
			require.NoError(b, testkit.Raw(ctx, e.Pool, ops, e.Clock.Now(), `
				WITH i AS (
					INSERT INTO docket.batch_items (batch_id, key, status, trusted, reason, admitted_at, settled_at)
					SELECT $1, 'k' || lpad(n::text, 7, '0'), 'quarantined', false, 'filled', $3, $3 FROM generate_series(1, $2::int) n
					RETURNING 1)
				UPDATE docket.batches SET items = (SELECT count(*) FROM i), quarantined = (SELECT count(*) FROM i),
					last_key = 'k' || lpad($2::text, 7, '0'), cursor = 'k' || lpad($2::text, 7, '0') WHERE id = $1`,
				r.ID, n, e.Clock.Now()))
			b.ResetTimer()
			for range b.N {
				got, err := e.app.Get(ctx, r.ID)
				if err != nil || got.Items != n {
					b.Fatal(err, got.Items)
				}
			}
		})
	}
}
