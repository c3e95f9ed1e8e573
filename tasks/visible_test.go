package tasks_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
)

// A read by id that finds nothing, because there is nothing or because the
// actor may not read it, is db.ErrNotFound naming the task and the actor;
// so is the backlog of a project the actor may not read.
func TestReadByIDNamesTheActor(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	task := e.open(t, "T-1", nil)
	requireNotVisible := func(err error, what string, actor access.Actor) {
		t.Helper()
		require.ErrorIs(t, err, db.ErrNotFound)
		require.ErrorContains(t, err, what+" not found or not visible to "+string(actor))
	}
	stranger := e.as(t, sam)
	_, err := stranger.Get(ctx, task.ID)
	requireNotVisible(err, fmt.Sprintf("task %d", task.ID), sam)
	_, err = stranger.Backlog(ctx, project)
	requireNotVisible(err, "project "+project, sam)

	const unknown = 987654
	_, err = e.app.Get(ctx, unknown)
	requireNotVisible(err, fmt.Sprintf("task %d", unknown), app)
}
