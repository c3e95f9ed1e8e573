package batches_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/db"
)

// List pages a project's batches by name, each with its census as Get
// reads it; an actor that may not read the project's batches gets none.
func TestListPagesAProjectsBatchesByName(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	var want []batches.Report // by name
	for _, name := range []string{"a-monthly", "b-nightly", "c-weekly", "d-yearly", "e-hourly"} {
		b, err := e.app.Open(ctx, project, name, twoSteps)
		require.NoError(t, err)
		want = append(want, b)
	}
	// One with items, so its census is not all zeros.
	_, err := e.app.Admit(ctx, want[1].ID, []batches.Item{{Key: key(1)}, {Key: key(2)}}, false)
	require.NoError(t, err)
	want[1], err = e.app.Get(ctx, want[1].ID)
	require.NoError(t, err)
	require.Equal(t, 2, want[1].Items)

	var listed []batches.Report
	for after := ""; ; {
		page, err := e.app.List(ctx, batches.Filter{Project: project, After: after, Limit: 2})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 2)
		if len(page) == 0 {
			break
		}
		listed = append(listed, page...)
		after = page[len(page)-1].Name
	}
	require.Equal(t, want, listed, "every batch once, by name, as Get reads it")

	stranger, err := batches.NewClient(e.API, batches.Config{Actor: sam, Clock: e.Clock})
	require.NoError(t, err)
	none, err := stranger.List(ctx, batches.Filter{Project: project})
	require.NoError(t, err)
	require.Empty(t, none, "sam may not read acme's batches")

	for _, c := range []struct {
		f    batches.Filter
		says string
	}{
		{batches.Filter{}, "project is empty"},
		{batches.Filter{Project: project, Limit: -1}, "limit -1 is outside 1..1000"},
	} {
		_, err := e.app.List(ctx, c.f)
		require.ErrorIs(t, err, db.ErrInvalidArgument, c.says)
		require.ErrorContains(t, err, c.says)
	}
}
