package lanes_test

// Verdicts race: goroutines released together on a barrier, each on a
// connection and transaction of its own begun beforehand, approve and
// request changes on one submitted lane. One verdict wins; every other call
// learns that it lost (DK001); the history holds exactly one verdict.
// Repeated, under -race.

import (
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/lanes"
)

const racers = 16

func TestVerdictRace(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cfg, err := db.PoolConfig(e.Pool.Config().ConnString())
	require.NoError(t, err)
	cfg.MaxConns = racers
	pool, err := db.OpenConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	c := e.as(t, cond)
	wins := map[lanes.Review]int{}

	for round := range 8 {
		ctx := t.Context()
		l := e.drive(t, e.lane(t, name("r%d", round)).ID, lanes.InProgress, lanes.Submitted)
		txs := make([]pgx.Tx, racers)
		errs := make([]error, racers)
		beginErrs := make([]error, racers)
		commitErrs := make([]error, racers)
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		ready.Add(racers)
		done.Add(racers)
		for i := range racers {
			go func() {
				defer done.Done()
				txs[i], beginErrs[i] = pool.Begin(ctx)
				ready.Done()
				<-start
				if beginErrs[i] != nil {
					return
				}
				if i%2 == 0 {
					_, errs[i] = c.ApproveTx(ctx, txs[i], l.ID, name("racer %d", i))
				} else {
					_, errs[i] = c.RequestChangesTx(ctx, txs[i], l.ID, name("racer %d", i))
				}
				if errs[i] != nil {
					_ = txs[i].Rollback(ctx)
					return
				}
				commitErrs[i] = txs[i].Commit(ctx)
			}()
		}
		ready.Wait()
		close(start)
		done.Wait()
		require.NoError(t, errors.Join(beginErrs...))
		require.NoError(t, errors.Join(commitErrs...))

		winners := 0
		for i, err := range errs {
			if err == nil {
				winners++
				continue
			}
			require.ErrorIs(t, err, db.ErrIllegalTransition, "racer %d", i)
		}
		require.Equal(t, 1, winners, "round %d", round)

		got, err := c.Get(ctx, l.ID)
		require.NoError(t, err)
		require.Contains(t, []lanes.Review{lanes.Approved, lanes.ChangesRequested}, got.Review)
		wins[got.Review]++
		var verdicts []lanes.Event
		for _, ev := range mustHistory(t, c, l.ID) {
			if ev.Type == lanes.EventReview && ev.From == string(lanes.Submitted) {
				verdicts = append(verdicts, ev)
			}
		}
		require.Len(t, verdicts, 1, "round %d", round)
		require.Equal(t, string(got.Review), verdicts[0].To)
	}
	t.Logf("verdicts that won: %v", wins)
}
