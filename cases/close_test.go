package cases_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
)

// TestCloseReleasesKeysAndReopenTakesBackTheFreeOnes: closing releases the
// keys, so an admission with one of them opens a fresh case; reopening the
// first takes back only the keys no open case claimed since.
func TestCloseReleasesKeysAndReopenTakesBackTheFreeOnes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	doc, meter := key("document", "DOC-1"), key("meter", "M-1")
	first := e.admit(t, doc, meter)
	closed, err := e.app.Close(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Closed, closed.Status)
	again, err := e.app.Close(ctx, first.ID)
	require.NoError(t, err, "closing a closed case is a no-op")
	require.Equal(t, closed, again)
	keys, err := e.app.Keys(ctx, first.ID)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	for _, k := range keys {
		require.False(t, k.Held(), "closing released %v", k.Key)
	}
	_, err = e.app.Correlate(ctx, project, doc)
	require.ErrorIs(t, err, db.ErrNotFound, "a closed case correlates nothing")

	e.Clock.Advance(1)
	fresh := e.admit(t, doc)
	require.True(t, fresh.Created, "a new matter with a released key opens a fresh case")
	require.NotEqual(t, first.ID, fresh.ID)

	e.Clock.Advance(1)
	r, err := e.app.Reopen(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Open, r.Case.Status)
	require.True(t, r.Case.ClosedAt.IsZero())
	require.Equal(t, []cases.Key{meter}, r.Taken)
	require.Equal(t, []cases.Key{doc}, r.Left, "the key the fresh case claimed stays with it")
	got, err := e.app.Correlate(ctx, project, meter)
	require.NoError(t, err)
	require.Equal(t, first.ID, got.ID)
	got, err = e.app.Correlate(ctx, project, doc)
	require.NoError(t, err)
	require.Equal(t, fresh.ID, got.ID)

	r2, err := e.app.Reopen(ctx, first.ID)
	require.NoError(t, err, "reopening an open case is a no-op")
	require.Empty(t, r2.Taken)
	require.Empty(t, r2.Left)

	h, err := e.app.History(ctx, first.ID)
	require.NoError(t, err)
	var whats []cases.EventType
	for _, ev := range h {
		require.Equal(t, first.ID, ev.CaseID)
		whats = append(whats, ev.Type)
	}
	require.Equal(t, []cases.EventType{
		cases.EventCreated, cases.EventKeyClaimed, cases.EventKeyClaimed,
		cases.EventKeyReleased, cases.EventKeyReleased, cases.EventStatus,
		cases.EventStatus, cases.EventKeyClaimed,
	}, whats)
	require.ErrorIs(t, raw(ctx, e.Pool, `DELETE FROM docket.case_events WHERE case_id = $1`, first.ID), db.ErrImmutable)
	require.ErrorIs(t, raw(ctx, e.Pool, `UPDATE docket.case_keys SET released_at = NULL WHERE case_id = $1`, first.ID), db.ErrImmutable)
	require.ErrorIs(t, raw(ctx, e.Pool, `UPDATE docket.cases SET kind = 'other.kind' WHERE id = $1`, first.ID), db.ErrImmutable)
}
