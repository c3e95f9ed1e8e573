package plans_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/plans"
)

// List pages a project's runs newest first, each as Get reads it; an
// actor that may not read the project's runs gets none, and a project's
// list holds none of another's.
func TestListPagesAProjectsRunsNewestFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	p := chainOf("t.a")
	var want []plans.Run // newest first
	for range 5 {
		run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
		require.NoError(t, err)
		got, err := e.app.Get(ctx, run.ID)
		require.NoError(t, err)
		want = append([]plans.Run{got}, want...)
	}

	var listed []plans.Run
	for before := int64(0); ; {
		page, err := e.app.List(ctx, plans.Filter{Project: project, Before: before, Limit: 2})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 2)
		if len(page) == 0 {
			break
		}
		listed = append(listed, page...)
		before = page[len(page)-1].ID
	}
	require.Equal(t, want, listed, "every run once, newest first, as Get reads it")
	all, err := e.app.List(ctx, plans.Filter{Project: project})
	require.NoError(t, err)
	require.Equal(t, want, all)

	stranger, err := plans.NewClient(e.API, plans.Config{Actor: sam, Clock: e.Clock})
	require.NoError(t, err)
	none, err := stranger.List(ctx, plans.Filter{Project: project})
	require.NoError(t, err)
	require.Empty(t, none, "sam may not read acme's runs")
	none, err = e.app.List(ctx, plans.Filter{Project: testkit.Other})
	require.NoError(t, err)
	require.Empty(t, none)
}

// A list it cannot page it refuses, saying why.
func TestListRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct {
		f    plans.Filter
		says string
	}{
		{plans.Filter{}, "project is empty"},
		{plans.Filter{Project: project, Before: -1}, "before -1 is negative"},
		{plans.Filter{Project: project, Limit: db.MaxPage + 1}, "limit 1001 is outside 1..1000"},
	} {
		_, err := e.app.List(t.Context(), c.f)
		require.ErrorIs(t, err, db.ErrInvalidArgument, c.says)
		require.ErrorContains(t, err, c.says)
	}
}
