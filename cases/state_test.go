package cases_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
)

// TestTwoWritersOfOneVersion: two writers read version v and write at once,
// released on a barrier, 20 times: one succeeds at v+1, the other gets a
// version conflict naming the current version, and the loser's state is not
// stored.
func TestTwoWritersOfOneVersion(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	for round := range 20 {
		snap, err := e.app.State(ctx, c.ID)
		require.NoError(t, err)
		start := make(chan struct{})
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[w] = e.app.PutState(ctx, c.ID, snap.Version, json.RawMessage(fmt.Sprintf(`{"round": %d, "writer": %d}`, round, w)))
			}()
		}
		close(start)
		wg.Wait()
		won := -1
		for w, err := range errs {
			if err == nil {
				require.Equal(t, -1, won, "round %d: both writers succeeded", round)
				won = w
				continue
			}
			require.ErrorIs(t, err, db.ErrVersionConflict, "round %d", round)
			require.ErrorContains(t, err, fmt.Sprintf("version is %d, not %d", snap.Version+1, snap.Version))
		}
		require.NotEqual(t, -1, won, "round %d: neither writer succeeded", round)
		after, err := e.app.State(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, snap.Version+1, after.Version)
		require.JSONEq(t, fmt.Sprintf(`{"round": %d, "writer": %d}`, round, won), string(after.State))
	}
	require.Equal(t, 20, countEvents(t, e.Pool, c.ID, "state"))
}

// TestNoBlindWrite: the API has no write without a version, and a state
// written by hand still moves the version on, so a writer that read before
// it is refused.
func TestNoBlindWrite(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	_, err := e.app.PutState(ctx, c.ID, 0, json.RawMessage(`{}`))
	require.ErrorIs(t, err, db.ErrInvalidArgument, "version 0 is no version")
	_, err = e.Pool.Exec(ctx, `SELECT docket.case_put_state($1, NULL, '{}', 'svc:app', $2)`, c.ID, e.Clock.Now())
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument, "nor through SQL")

	require.NoError(t, raw(ctx, e.Pool, `UPDATE docket.cases SET state = '{"by": "hand"}' WHERE id = $1`, c.ID))
	snap, err := e.app.State(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, snap.Version, "a state written by hand moves the version on")
	_, err = e.app.PutState(ctx, c.ID, 1, json.RawMessage(`{"stale": true}`))
	require.ErrorIs(t, err, db.ErrVersionConflict)
	require.ErrorIs(t, raw(ctx, e.Pool, `UPDATE docket.cases SET version = 9 WHERE id = $1`, c.ID), db.ErrImmutable)
}

// TestStateOfAClosedCase: writes to a closed case are refused; reopened, it
// is written again from the version it had.
func TestStateOfAClosedCase(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	w, err := e.app.PutState(ctx, c.ID, 1, json.RawMessage(`{"step": 1}`))
	require.NoError(t, err)
	require.EqualValues(t, 2, w.Version)
	_, err = e.app.Close(ctx, c.ID)
	require.NoError(t, err)
	before := snapshot(t, e.Pool)
	_, err = e.app.PutState(ctx, c.ID, 2, json.RawMessage(`{"step": 2}`))
	require.ErrorIs(t, err, db.ErrCaseClosed)
	require.ErrorIs(t, raw(ctx, e.Pool, `UPDATE docket.cases SET state = '{}' WHERE id = $1`, c.ID), db.ErrCaseClosed)
	require.Equal(t, before, snapshot(t, e.Pool))
	_, err = e.app.Reopen(ctx, c.ID)
	require.NoError(t, err)
	w, err = e.app.PutState(ctx, c.ID, 2, json.RawMessage(`{"step": 2}`))
	require.NoError(t, err)
	require.EqualValues(t, 3, w.Version)
	_, err = e.app.PutState(ctx, 424242, 1, json.RawMessage(`{}`))
	require.ErrorIs(t, err, db.ErrNotFound)
	require.False(t, errors.Is(err, db.ErrVersionConflict))
}
