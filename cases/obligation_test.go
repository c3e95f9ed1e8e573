package cases_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
)

// TestRegisterRacingClose releases a registration and a close of the same
// case together, 50 times: the case is never closed while owing something.
// Either the close wins and the registration is refused (case closed), or
// the registration wins and the close is refused (obligations outstanding).
func TestRegisterRacingClose(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	closes, registers := 0, 0
	for round := range 50 {
		c := e.admit(t, key("document", fmt.Sprintf("DOC-%d", round)))
		start := make(chan struct{})
		var regErr, closeErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, regErr = e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "ack", Due: t0.Add(time.Hour)})
		}()
		go func() {
			defer wg.Done()
			<-start
			_, closeErr = e.app.Close(ctx, c.ID)
		}()
		close(start)
		wg.Wait()
		if regErr == nil {
			require.ErrorIs(t, closeErr, db.ErrObligationsOutstanding, "round %d", round)
			registers++
		} else {
			require.ErrorIs(t, regErr, db.ErrCaseClosed, "round %d", round)
			require.NoError(t, closeErr, "round %d", round)
			closes++
		}
		var bad int
		require.NoError(t, e.Pool.QueryRow(ctx, `
			SELECT count(*) FROM docket.cases c JOIN docket.obligations o ON o.case_id = c.id
			WHERE c.status = 'closed' AND o.state = 'pending'`).Scan(&bad))
		require.Zero(t, bad, "round %d: a closed case owes something", round)
	}
	t.Logf("register first %d times, close first %d times", registers, closes)
}

// TestObligationsEndOnce: terminal states never change, through the API or
// by hand; re-applying the state held is a quiet no-op; a late meet is
// recorded beside the breach, once, and the breach stands.
func TestObligationsEndOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	reg := func(name string) cases.Obligation {
		o, err := e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: name, Due: t0.Add(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, cases.Pending, o.State)
		return o
	}
	met, breached, withdrawn := reg("met"), reg("breached"), reg("withdrawn")
	for _, step := range []struct {
		id int64
		to cases.ObligationState
	}{{met.ID, cases.Met}, {breached.ID, cases.Breached}, {withdrawn.ID, cases.Withdrawn}} {
		o, err := e.app.Settle(ctx, step.id, step.to)
		require.NoError(t, err)
		require.Equal(t, step.to, o.State)
		require.Equal(t, app, o.ResolvedBy)
	}
	events := countEvents(t, e.Pool, c.ID, cases.EventObligation)
	require.Equal(t, 6, events, "three registrations, three moves")

	for _, o := range []cases.Obligation{met, breached, withdrawn} {
		for _, to := range []cases.ObligationState{cases.Met, cases.Breached, cases.Withdrawn} {
			before := snapshot(t, e.Pool)
			got, err := e.app.Settle(ctx, o.ID, to)
			cur, _ := e.app.Obligation(ctx, o.ID)
			switch {
			case cur.State == to: // the same state again: a retry
				require.NoError(t, err)
				require.Equal(t, to, got.State)
				require.Equal(t, before, snapshot(t, e.Pool), "a retry records nothing")
			case cur.State == cases.Breached && to == cases.Met: // late
				require.NoError(t, err)
				require.Equal(t, cases.Breached, got.State, "the breach stands")
			default:
				require.ErrorIs(t, err, db.ErrIllegalTransition, "%s -> %s", cur.State, to)
				require.Equal(t, before, snapshot(t, e.Pool))
			}
			// By hand: the same state is a no-op, any other is refused.
			err = raw(ctx, e.Pool, `UPDATE docket.obligations SET state = $2 WHERE id = $1`, o.ID, string(to))
			if cur.State == to {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, db.ErrIllegalTransition, "by hand %s -> %s", cur.State, to)
			}
		}
		require.ErrorIs(t, raw(ctx, e.Pool, `UPDATE docket.obligations SET state = 'pending' WHERE id = $1`, o.ID), db.ErrIllegalTransition)
		require.ErrorIs(t, raw(ctx, e.Pool, `UPDATE docket.obligations SET due_at = due_at + interval '1 day' WHERE id = $1`, o.ID), db.ErrImmutable)
		require.ErrorIs(t, raw(ctx, e.Pool, `DELETE FROM docket.obligations WHERE id = $1`, o.ID), db.ErrImmutable)
	}
	require.Equal(t, events, countEvents(t, e.Pool, c.ID, cases.EventObligation), "nothing moved")
	require.Equal(t, 1, countEvents(t, e.Pool, c.ID, cases.EventLateMeet), "the late meet, once")
	h, err := e.app.History(ctx, c.ID)
	require.NoError(t, err)
	late := h[len(h)-1]
	require.Equal(t, cases.EventLateMeet, late.Type)
	var d struct {
		ObligationID int64 `json:"obligation_id"`
	}
	require.NoError(t, json.Unmarshal(late.Detail, &d))
	require.Equal(t, breached.ID, d.ObligationID)
	got, err := e.app.Obligation(ctx, breached.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Breached, got.State)

	// A pending obligation cannot be edited either, nor born settled.
	p := reg("pending")
	require.ErrorIs(t, raw(ctx, e.Pool, `UPDATE docket.obligations SET name = 'renamed' WHERE id = $1`, p.ID), db.ErrImmutable)
	require.ErrorIs(t, raw(ctx, e.Pool, `
		INSERT INTO docket.obligations (case_id, project, name, due_at, state, created_by, created_at, resolved_at, resolved_by)
		VALUES ($1, 'acme', 'born-met', $2, 'met', 'user:ops', $2, $2, 'user:ops')`, c.ID, t0), db.ErrIllegalTransition)
}

// TestCloseWithPendingObligations: closing is refused while something is
// owed, naming it; settled, the case closes.
func TestCloseWithPendingObligations(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	o, err := e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "ack", Due: t0.Add(time.Hour)})
	require.NoError(t, err)
	again, err := e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "ack", Due: t0.Add(time.Hour)})
	require.NoError(t, err, "registering the same obligation again is a retry")
	require.Equal(t, o.ID, again.ID)
	_, err = e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "ack", Due: t0.Add(2 * time.Hour)})
	require.ErrorIs(t, err, db.ErrAlreadyExists, "the same name on other terms")

	before := snapshot(t, e.Pool)
	_, err = e.app.Close(ctx, c.ID)
	require.ErrorIs(t, err, db.ErrObligationsOutstanding)
	require.ErrorContains(t, err, fmt.Sprintf("ack (%d", o.ID))
	require.Equal(t, before, snapshot(t, e.Pool))
	_, err = e.app.Meet(ctx, o.ID)
	require.NoError(t, err)
	closed, err := e.app.Close(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, cases.Closed, closed.Status)
	require.Equal(t, t0, closed.ClosedAt)
	_, err = e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "late", Due: t0.Add(time.Hour)})
	require.ErrorIs(t, err, db.ErrCaseClosed)
	_, err = e.app.Meet(ctx, o.ID)
	require.NoError(t, err, "met again on a closed case: a retry")
}

// TestRegisterFromSpec stores the instant the calendar resolved, the spec and
// the calendar's digest; a spec the calendar refuses is refused, writing
// nothing.
func TestRegisterFromSpec(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	from := t0.Add(30 * time.Minute)
	o, err := e.app.RegisterFromSpec(ctx, c.ID, "ack", cases.Deadline{Calendar: fixedCalendar{}, From: from, Spec: "24h"}, nil)
	require.NoError(t, err)
	require.Equal(t, from.Add(24*time.Hour), o.Due)
	require.Equal(t, "24h", o.Rule)
	require.Equal(t, fixedCalendar{}.Digest(), o.CalendarDigest)
	obs, err := e.app.Obligations(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, []cases.Obligation{o}, obs)

	before := snapshot(t, e.Pool)
	_, err = e.app.RegisterFromSpec(ctx, c.ID, "reply", cases.Deadline{Calendar: fixedCalendar{}, From: from, Spec: "5 working days"}, nil)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "5 working days")
	_, err = e.app.RegisterFromSpec(ctx, c.ID, "reply", cases.Deadline{From: from, Spec: "1h"}, nil)
	require.ErrorIs(t, err, db.ErrInvalidArgument, "no calendar")
	require.Equal(t, before, snapshot(t, e.Pool))
	require.ErrorIs(t, raw(ctx, e.Pool, `UPDATE docket.obligations SET calendar_digest = NULL, rule = NULL WHERE id = $1`, o.ID), db.ErrImmutable)
}
