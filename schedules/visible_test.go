package schedules_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
)

// A read by id that finds nothing, because there is nothing or because the
// actor may not read it, is db.ErrNotFound naming the schedule and the
// actor.
func TestReadByIDNamesTheActor(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	s, err := e.app.Create(ctx, spec("daily", "0 9 * * *", "UTC"))
	require.NoError(t, err)
	requireNotVisible := func(err error, id int64, actor access.Actor) {
		t.Helper()
		require.ErrorIs(t, err, db.ErrNotFound)
		require.ErrorContains(t, err, fmt.Sprintf("schedule %d not found or not visible to %s", id, actor))
	}
	stranger := e.as(t, sam)
	_, err = stranger.Get(ctx, s.ID)
	requireNotVisible(err, s.ID, sam)
	_, err = stranger.Preview(ctx, s.ID, 3)
	requireNotVisible(err, s.ID, sam)

	const unknown = 987654
	_, err = e.app.Get(ctx, unknown)
	requireNotVisible(err, unknown, app)
}
