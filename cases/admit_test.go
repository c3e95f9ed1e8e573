package cases_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
)

// TestConcurrentAdmissionsMakeOneCase releases 64 goroutines on a barrier,
// each admitting the same new key set, 50 times over: each round makes
// exactly one case, and every goroutine gets its id.
func TestConcurrentAdmissionsMakeOneCase(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	const goroutines, rounds = 64, 50
	for round := range rounds {
		keys := []cases.Key{key("document", fmt.Sprintf("DOC-%d", round)), key("meter", fmt.Sprintf("M-%d", round))}
		if round%2 == 1 { // the same set, given in another order
			keys[0], keys[1] = keys[1], keys[0]
		}
		start := make(chan struct{})
		ids := make([]int64, goroutines)
		created := make([]bool, goroutines)
		errs := make([]error, goroutines)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ks := keys
				if g%2 == 1 {
					ks = []cases.Key{keys[1], keys[0]}
				}
				a, err := e.app.Admit(ctx, cases.Admission{Project: project, Kind: "supplier.switch", Keys: ks})
				ids[g], created[g], errs[g] = a.ID, a.Created, err
			}()
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "round %d", round)
		made := 0
		for g := range goroutines {
			require.Equal(t, ids[0], ids[g], "round %d: goroutine %d got another case", round, g)
			if created[g] {
				made++
			}
		}
		require.Equal(t, 1, made, "round %d: exactly one admission created the case", round)
		var n int
		require.NoError(t, e.Pool.QueryRow(ctx, `
			SELECT count(DISTINCT case_id) FROM docket.case_keys
			WHERE project = $1 AND value IN ($2, $3)`, project, keys[0].Value, keys[1].Value).Scan(&n))
		require.Equal(t, 1, n, "round %d", round)
	}
	var total int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.cases`).Scan(&total))
	require.Equal(t, rounds, total)
}

// TestAdmissionFindsTheCaseAndAttachesFreeKeys: a second admission with one
// known key and one new key finds the case and attaches the new key; keys of
// two open cases are ambiguous, naming both.
func TestAdmissionFindsTheCaseAndAttachesFreeKeys(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	first := e.admit(t, key("document", "DOC-1"))
	require.True(t, first.Created)
	require.Equal(t, cases.Open, first.Status)
	require.EqualValues(t, 1, first.Version)

	again := e.admit(t, key("document", "DOC-1"), key("meter", "M-1"))
	require.False(t, again.Created)
	require.Equal(t, first.ID, again.ID)
	found, err := e.app.Correlate(ctx, project, key("meter", "M-1"))
	require.NoError(t, err)
	require.Equal(t, first.ID, found.ID, "the new key was attached")

	second := e.admit(t, key("document", "DOC-2"))
	require.NotEqual(t, first.ID, second.ID)
	before := snapshot(t, e.Pool)
	_, err = e.app.Admit(ctx, cases.Admission{Project: project, Kind: "supplier.switch",
		Keys: []cases.Key{key("document", "DOC-1"), key("document", "DOC-2"), key("meter", "M-9")}})
	require.ErrorIs(t, err, db.ErrAmbiguousCorrelation)
	require.ErrorContains(t, err, fmt.Sprintf("%d and %d", first.ID, second.ID))
	_, err = e.app.Correlate(ctx, project, key("document", "DOC-1"), key("document", "DOC-2"))
	require.ErrorIs(t, err, db.ErrAmbiguousCorrelation)
	require.Equal(t, before, snapshot(t, e.Pool), "an ambiguous admission attaches nothing")

	_, err = e.app.Correlate(ctx, project, key("document", "DOC-404"))
	require.ErrorIs(t, err, db.ErrNotFound, "correlation creates nothing")
	require.Equal(t, before, snapshot(t, e.Pool))

	// Keys are per project: the same key in another project is another matter.
	r, err := e.as(t, rival).Admit(ctx, cases.Admission{Project: other, Kind: "supplier.switch", Keys: []cases.Key{key("document", "DOC-1")}})
	require.NoError(t, err)
	require.True(t, r.Created)
}
