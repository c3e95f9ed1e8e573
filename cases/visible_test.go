package cases_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
)

// requireNotVisible asserts err is the db.ErrNotFound of a read by id whose
// message names what was read and who asked.
func requireNotVisible(t *testing.T, err error, noun string, id int64, actor access.Actor) {
	t.Helper()
	require.ErrorIs(t, err, db.ErrNotFound)
	require.ErrorContains(t, err, fmt.Sprintf("%s %d not found or not visible to %s", noun, id, actor))
}

// A read by id that finds nothing, because there is nothing or because the
// actor may not read it, is db.ErrNotFound naming the id and the actor.
func TestReadByIDNamesTheActor(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.admit(t, key("document", "DOC-1"))
	stranger := e.as(t, sam)
	_, err := stranger.Get(ctx, c.ID)
	requireNotVisible(t, err, "case", c.ID, sam)
	_, err = stranger.State(ctx, c.ID)
	requireNotVisible(t, err, "case", c.ID, sam)
	_, err = stranger.History(ctx, c.ID)
	requireNotVisible(t, err, "case", c.ID, sam)

	const unknown = 987654
	_, err = e.app.Get(ctx, unknown)
	requireNotVisible(t, err, "case", unknown, app)
	_, err = e.app.History(ctx, unknown)
	requireNotVisible(t, err, "case", unknown, app)
	_, err = e.app.Obligation(ctx, unknown)
	requireNotVisible(t, err, "obligation", unknown, app)
	_, err = e.app.Message(ctx, unknown)
	requireNotVisible(t, err, "message", unknown, app)
	_, err = e.app.Wait(ctx, unknown)
	requireNotVisible(t, err, "wait", unknown, app)
}
