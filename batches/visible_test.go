package batches_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/db"
)

// A read by id that finds nothing, because there is nothing or because the
// actor may not read it, is db.ErrNotFound naming the batch and the actor.
func TestReadByIDNamesTheActor(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	b, err := e.app.Open(ctx, project, "nightly", twoSteps)
	require.NoError(t, err)
	requireNotVisible := func(err error, id int64, actor access.Actor) {
		t.Helper()
		require.ErrorIs(t, err, db.ErrNotFound)
		require.ErrorContains(t, err, fmt.Sprintf("batch %d not found or not visible to %s", id, actor))
	}
	stranger, err := batches.NewClient(e.API, batches.Config{Actor: sam, Clock: e.Clock})
	require.NoError(t, err)
	_, err = stranger.Get(ctx, b.ID)
	requireNotVisible(err, b.ID, sam)

	const unknown = 987654
	_, err = e.app.Get(ctx, unknown)
	requireNotVisible(err, unknown, app)
}
