package cases_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
)

// The rules that span tables hold for the schema owner's hand-written SQL,
// not only for the functions: each attack below is tried by raw SQL and
// shown refused, with the database as it was.

// TestARawCloseOwesNothing shows a hand-written close of a case with a
// pending obligation refused (DK006), and a close of one that owes nothing
// releasing its keys, so a new matter with the same key opens a new case.
func TestARawCloseOwesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("customer", "C-1"))
	o, err := e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "ack", Due: t0.Add(time.Hour)})
	require.NoError(t, err)

	before := snapshot(t, e.Pool)
	err = raw(ctx, e.Pool, `UPDATE docket.cases SET status = 'closed', closed_at = $2 WHERE id = $1`, c.ID, byHand)
	require.ErrorIs(t, err, db.ErrObligationsOutstanding)
	require.Equal(t, before, snapshot(t, e.Pool))

	_, err = e.app.Meet(ctx, o.ID)
	require.NoError(t, err)
	require.NoError(t, raw(ctx, e.Pool, `UPDATE docket.cases SET status = 'closed', closed_at = $2 WHERE id = $1`, c.ID, byHand))
	keys, err := e.app.Keys(ctx, c.ID)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.Equal(t, byHand, keys[0].ReleasedAt, "closing released the key, at the instant of the close")
	again := e.admit(t, key("customer", "C-1"))
	require.True(t, again.Created, "the released key opens a new case")
	require.NotEqual(t, c.ID, again.Case.ID)
}

// TestAKeyIsReleasedOnlyByItsCaseClosing shows a hand-written release of an
// open case's key refused (DK001).
func TestAKeyIsReleasedOnlyByItsCaseClosing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("customer", "C-1"))
	before := snapshot(t, e.Pool)
	err := raw(ctx, e.Pool, `UPDATE docket.case_keys SET released_at = $2 WHERE case_id = $1`, c.ID, byHand)
	require.ErrorIs(t, err, db.ErrIllegalTransition)
	require.ErrorContains(t, err, "released only when its case closes")
	require.Equal(t, before, snapshot(t, e.Pool))
}

// TestNoObligationOnAClosedCase shows a hand-written obligation on a closed
// case refused (DK005), so no breach sweep can escalate it.
func TestNoObligationOnAClosedCase(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("customer", "C-1"))
	_, err := e.app.Close(ctx, c.ID)
	require.NoError(t, err)
	before := snapshot(t, e.Pool)
	err = raw(ctx, e.Pool, `
		INSERT INTO docket.obligations (case_id, project, name, due_at, created_by, created_at)
		VALUES ($1, 'acme', 'ack', $2, 'user:ops', $2)`, c.ID, byHand)
	require.ErrorIs(t, err, db.ErrCaseClosed)
	require.Equal(t, before, snapshot(t, e.Pool))
}

// TestAWaitAndItsMessageNameEachOther shows a wait satisfied by hand with a
// dead letter, or with a message another wait consumed, refused when the
// transaction commits (DK001), and the database as it was.
func TestAWaitAndItsMessageNameEachOther(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	in := e.as(t, inbox)

	// A dead letter filed under DOC-1, addressed to no case: given up on by
	// hand before any wait asked for it.
	dead, err := in.Deliver(ctx, message("m-dead"))
	require.NoError(t, err)
	require.Equal(t, cases.Buffered, dead.Status)
	require.NoError(t, raw(ctx, e.Pool, `UPDATE docket.messages SET status = 'dead_lettered', settled_at = $2,
		dead_letter_reason = 'given up by hand' WHERE id = $1`, dead.ID, byHand))

	// A message taken by one wait, and a second wait on the same key.
	first := e.admit(t, key("customer", "C-1"))
	w1, err := e.app.Await(ctx, first.ID, reply())
	require.NoError(t, err)
	taken, err := in.Deliver(ctx, message("m-taken"))
	require.NoError(t, err)
	require.Equal(t, cases.Consumed, taken.Status)
	second := e.admit(t, key("customer", "C-2"))
	w2, err := e.app.Await(ctx, second.ID, reply())
	require.NoError(t, err)
	require.Equal(t, cases.Waiting, w2.Status)
	got, err := e.app.Wait(ctx, w1.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Satisfied, got.Status)

	before := snapshot(t, e.Pool)
	satisfy := func(msg int64) error {
		return raw(ctx, e.Pool, `UPDATE docket.waits SET status = 'satisfied', satisfied_by = $2, settled_at = $3, settled_by = 'user:ops'
			WHERE id = $1`, w2.ID, msg, byHand)
	}
	err = satisfy(dead.ID)
	require.ErrorIs(t, err, db.ErrIllegalTransition, "a dead letter satisfies nothing")
	require.ErrorContains(t, err, "which was not consumed by it")
	require.Equal(t, before, snapshot(t, e.Pool))
	err = satisfy(taken.ID)
	require.ErrorIs(t, err, db.ErrAlreadyExists, "a message another wait consumed satisfies nothing more")
	require.ErrorContains(t, err, "waits_satisfied_by_key")
	require.Equal(t, before, snapshot(t, e.Pool))
	for _, m := range []int64{dead.ID, taken.ID} {
		err = raw(ctx, e.Pool, `UPDATE docket.messages SET status = 'consumed', consumed_by = $2, settled_at = $3,
			dead_letter_reason = NULL WHERE id = $1`, m, w2.ID, byHand)
		require.ErrorIs(t, err, db.ErrIllegalTransition, "a settled message is consumed by nothing more")
		require.Equal(t, before, snapshot(t, e.Pool))
	}
}
