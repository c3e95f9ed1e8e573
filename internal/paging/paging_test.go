package paging_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/paging"
)

type state string

var states = []state{"open", "closed"}

// TestCheck shows each part of a list's request refused in the same words,
// the first refusal winning, and the page size a good request gets.
func TestCheck(t *testing.T) {
	t.Parallel()
	check := func(project string, after int64, st state, limit int) (int32, error) {
		return paging.For("thing.list").Project("things", project).Cursor("after", after).
			OneOf("state", paging.In(st, states)).Limit(limit)
	}
	for _, tc := range []struct {
		name    string
		project string
		after   int64
		state   state
		limit   int
		want    int32
		refusal string
	}{
		{name: "defaults", project: "acme", want: db.DefaultPage},
		{name: "everything set", project: "acme", after: 7, state: "closed", limit: 1, want: 1},
		{name: "the largest page", project: "acme", limit: db.MaxPage, want: db.MaxPage},
		{name: "no project", refusal: "thing.list: invalid argument: project is empty: things are listed per project"},
		{name: "a negative cursor", project: "acme", after: -1, refusal: "thing.list: invalid argument: after -1 is negative"},
		{name: "an unknown state", project: "acme", state: "lost", refusal: `thing.list: invalid argument: unknown state "lost"`},
		{name: "a negative limit", project: "acme", limit: -1, refusal: "thing.list: invalid argument: limit -1 is outside 1..1000"},
		{name: "too large a page", project: "acme", limit: db.MaxPage + 1, refusal: "thing.list: invalid argument: limit 1001 is outside 1..1000"},
		{name: "the first refusal wins", after: -1, state: "lost", limit: -1,
			refusal: "thing.list: invalid argument: project is empty: things are listed per project"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := check(tc.project, tc.after, tc.state, tc.limit)
			if tc.refusal != "" {
				require.ErrorIs(t, err, db.ErrInvalidArgument)
				require.Equal(t, tc.refusal, err.Error())
				require.Zero(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestCollect shows rows converted in order, and a query's error translated
// rather than rows returned.
func TestCollect(t *testing.T) {
	t.Parallel()
	double := func(n int) int { return 2 * n }

	got, err := paging.Collect([]int{1, 2, 3}, nil, double, "thing.list")
	require.NoError(t, err)
	require.Equal(t, []int{2, 4, 6}, got)

	got, err = paging.Collect([]int{}, nil, double, "thing.list")
	require.NoError(t, err)
	require.Equal(t, []int{}, got, "an empty page is empty, not nil")

	lost := errors.New("connection reset")
	got, err = paging.Collect([]int{1}, lost, double, "thing.list", "project", "acme")
	require.ErrorIs(t, err, lost)
	require.Equal(t, "thing.list project=acme: connection reset", err.Error())
	require.Nil(t, got)
}
