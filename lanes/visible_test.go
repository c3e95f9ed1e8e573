package lanes_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/lanes"
)

// A read by id that finds nothing, because there is nothing or because the
// actor may not read it, is db.ErrNotFound naming the lane and the actor.
func TestReadByIDNamesTheActor(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	l := e.lane(t, "login")
	requireNotVisible := func(err error, id int64, actor access.Actor) {
		t.Helper()
		require.ErrorIs(t, err, db.ErrNotFound)
		require.ErrorContains(t, err, fmt.Sprintf("lane %d not found or not visible to %s", id, actor))
	}
	stranger := e.as(t, sam)
	_, err := stranger.Get(ctx, l.ID)
	requireNotVisible(err, l.ID, sam)
	_, err = stranger.History(ctx, l.ID)
	requireNotVisible(err, l.ID, sam)
	_, err = stranger.Jobs(ctx, l.ID, lanes.Page{})
	requireNotVisible(err, l.ID, sam)

	const unknown = 987654
	viewer := e.as(t, vic)
	_, err = viewer.Get(ctx, unknown)
	requireNotVisible(err, unknown, vic)
	_, err = viewer.History(ctx, unknown)
	requireNotVisible(err, unknown, vic)
	_, err = viewer.Jobs(ctx, unknown, lanes.Page{})
	requireNotVisible(err, unknown, vic)
}
