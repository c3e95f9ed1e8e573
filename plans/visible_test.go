package plans_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/plans"
)

// A read by id that finds nothing, because there is nothing or because the
// actor may not read it, is db.ErrNotFound naming the run and the actor.
func TestReadByIDNamesTheActor(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	p := plans.Plan{Steps: []plans.Step{step("a", "t.a")}}
	p.Steps[0].Terminal = true
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
	require.NoError(t, err)
	requireNotVisible := func(err error, id int64, actor access.Actor) {
		t.Helper()
		require.ErrorIs(t, err, db.ErrNotFound)
		require.ErrorContains(t, err, fmt.Sprintf("run %d not found or not visible to %s", id, actor))
	}
	stranger, err := plans.NewClient(e.API, plans.Config{Actor: sam, Clock: e.Clock})
	require.NoError(t, err)
	_, err = stranger.Get(ctx, run.ID)
	requireNotVisible(err, run.ID, sam)

	const unknown = 987654
	_, err = e.app.Get(ctx, unknown)
	requireNotVisible(err, unknown, app)
}
