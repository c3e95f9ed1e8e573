package schedules_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/schedules"
)

// TestABoundIsRequired: a schedule with neither End nor MaxOccurrences is
// refused unless it is Unbounded with a reason, naming the fields, and
// nothing is written; Unbounded beside a bound contradicts it; the reason is
// held to 1-500 characters of text. The API's SQL refuses the same, for a
// docket_app login calling it without the Go client, and the owner's raw
// SQL meets the CHECK.
func TestABoundIsRequired(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	login := e.Login(t, testkit.AppRole, app)
	c, err := schedules.NewClient(login.Pool, schedules.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	existing, err := c.Create(ctx, spec("existing", "0 7 * * *", "UTC"))
	require.NoError(t, err)
	with := func(f func(*schedules.Spec)) schedules.Spec {
		s := spec("new", "0 7 * * *", "UTC")
		f(&s)
		return s
	}
	before := snapshot(t, e.Pool)
	for _, tc := range []struct {
		name, field string
		spec        schedules.Spec
	}{
		{"no bound", "ends_at, max_occurrences or unbounded_reason", with(bounded)},
		{"a reason without Unbounded", "unbounded_reason",
			with(func(s *schedules.Spec) { s.Unbounded = false; s.MaxOccurrences = 3 })},
		{"unbounded with an end", "unbounded_reason", with(func(s *schedules.Spec) { s.End = t0.Add(time.Hour * 24) })},
		{"unbounded with a count", "unbounded_reason", with(func(s *schedules.Spec) { s.MaxOccurrences = 3 })},
		{"no reason", "unbounded_reason", with(func(s *schedules.Spec) { s.UnboundedReason = "" })},
		{"a blank reason", "unbounded_reason", with(func(s *schedules.Spec) { s.UnboundedReason = "   " })},
		{"a reason too long", "unbounded_reason", with(func(s *schedules.Spec) { s.UnboundedReason = strings.Repeat("é", 501) })},
		{"a reason of two lines", "unbounded_reason", with(func(s *schedules.Spec) { s.UnboundedReason = "forever\nand ever" })},
		{"a reason not UTF-8", "unbounded_reason", with(func(s *schedules.Spec) { s.UnboundedReason = "forever \xff" })},
	} {
		_, err := c.Create(ctx, tc.spec)
		require.ErrorIs(t, err, db.ErrInvalidArgument, tc.name)
		require.ErrorContains(t, err, "invalid "+tc.field, tc.name)
		_, err = c.Update(ctx, existing.ID, tc.spec)
		require.ErrorIs(t, err, db.ErrInvalidArgument, tc.name)
		require.ErrorContains(t, err, "invalid "+tc.field, tc.name)
	}
	require.Equal(t, before, snapshot(t, e.Pool), "nothing was written")

	// The API's own refusal, without the Go client's early one.
	sqlCreate := func(ends *time.Time, count *int64, reason *string) error {
		_, err := login.Pool.Exec(ctx, `SELECT docket.schedule_create('acme', 'raw', '0 7 * * *', 'UTC', true, 'report.tick',
			'default', '{}', 1, 5, 'skip', 10, '5 minutes', $1, $2, $3, $4, $5, $6, $1)`,
			t0, ends, count, reason, t0.Add(22*time.Hour), string(app))
		return err
	}
	three, reason, end := int64(3), "forever", t0.Add(48*time.Hour)
	for _, tc := range []struct {
		name, field string
		err         error
	}{
		{"no bound", "ends_at, max_occurrences or unbounded_reason", sqlCreate(nil, nil, nil)},
		{"a reason beside a count", "unbounded_reason", sqlCreate(nil, &three, &reason)},
		{"a reason beside an end", "unbounded_reason", sqlCreate(&end, nil, &reason)},
		{"a reason too long", "unbounded_reason", sqlCreate(nil, nil, new(strings.Repeat("x", 501)))},
		{"a blank reason", "unbounded_reason", sqlCreate(nil, nil, new(" "))},
		{"a reason with a tab", "unbounded_reason", sqlCreate(nil, nil, new("for\tever"))},
	} {
		var pgErr *pgconn.PgError
		require.True(t, errors.As(tc.err, &pgErr), "%s: %v", tc.name, tc.err)
		require.Equal(t, "DK010", pgErr.Code, tc.name)
		require.Contains(t, pgErr.Message, "invalid "+tc.field, tc.name)
	}
	require.Equal(t, before, snapshot(t, e.Pool), "nothing was written")

	// The owner's hand-written SQL meets the CHECK.
	err = testkit.Raw(ctx, e.Pool, ops, t0, `UPDATE docket.schedules SET unbounded_reason = NULL WHERE id = $1`, existing.ID)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "schedules_bounded_or_reasoned")
	err = testkit.Raw(ctx, e.Pool, ops, t0, `UPDATE docket.schedules SET max_occurrences = 5 WHERE id = $1`, existing.ID)
	require.ErrorIs(t, err, db.ErrInvalidArgument, "a bound beside the reason")
	err = testkit.Raw(ctx, e.Pool, ops, t0, `UPDATE docket.schedules SET unbounded_reason = repeat('x', 501) WHERE id = $1`, existing.ID)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "schedules_unbounded_reason_valid")
	require.Equal(t, before, snapshot(t, e.Pool), "nothing was written")

	// At the limit, and bounded ones.
	long := strings.Repeat("é", schedules.MaxReason)
	s, err := c.Create(ctx, with(func(s *schedules.Spec) { s.Name, s.UnboundedReason = "at-the-limit", long }))
	require.NoError(t, err)
	require.Equal(t, long, s.UnboundedReason)
	s, err = c.Create(ctx, with(func(s *schedules.Spec) { s.Name, s.MaxOccurrences = "counted", 3; bounded(s) }))
	require.NoError(t, err)
	require.Empty(t, s.UnboundedReason)
	s, err = c.Create(ctx, with(func(s *schedules.Spec) { s.Name, s.End = "until", t0.Add(30*24*time.Hour); bounded(s) }))
	require.NoError(t, err)
	require.Empty(t, s.UnboundedReason)

	// An update may bound an unbounded schedule, and unbound it again with a
	// reason of its own; each is recorded.
	up, err := c.Update(ctx, existing.ID, with(func(s *schedules.Spec) { s.MaxOccurrences = 10; bounded(s) }))
	require.NoError(t, err)
	require.Empty(t, up.UnboundedReason)
	require.EqualValues(t, 10, up.MaxOccurrences)
	up, err = c.Update(ctx, existing.ID, with(func(s *schedules.Spec) { s.UnboundedReason = "the audit log is kept for ever" }))
	require.NoError(t, err)
	require.Equal(t, "the audit log is kept for ever", up.UnboundedReason)
	evs, err := c.Events(ctx, existing.ID)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	require.JSONEq(t, `{"cron": "0 7 * * *", "zone": "UTC", "job_kind": "report.tick", "catch_up": "skip", "max_occurrences": 10}`,
		string(evs[1].Detail))
	require.Contains(t, string(evs[2].Detail), `"unbounded_reason": "the audit log is kept for ever"`)
}

// TestAnUnboundedScheduleSignsItsReason: Unbounded with a reason is
// accepted, as a docket_app login, and the reason is on the schedule and in
// its created event.
func TestAnUnboundedScheduleSignsItsReason(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	login := e.Login(t, testkit.AppRole, app)
	c, err := schedules.NewClient(login.Pool, schedules.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	sp := spec("ledger-close", "0 1 * * *", "Europe/Berlin")
	sp.UnboundedReason = "the ledger closes every night for as long as the company trades"
	s, err := c.Create(ctx, sp)
	require.NoError(t, err)
	require.Equal(t, sp.UnboundedReason, s.UnboundedReason)
	require.True(t, s.End.IsZero())
	require.Zero(t, s.MaxOccurrences)

	got, err := e.as(t, vic).Get(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, sp.UnboundedReason, got.UnboundedReason)
	evs, err := c.Events(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, schedules.EventCreated, evs[0].Type)
	var detail struct {
		UnboundedReason string `json:"unbounded_reason"`
	}
	require.NoError(t, json.Unmarshal(evs[0].Detail, &detail))
	require.Equal(t, sp.UnboundedReason, detail.UnboundedReason)
	var stored string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT unbounded_reason FROM docket.schedules WHERE id = $1`, s.ID).Scan(&stored))
	require.Equal(t, sp.UnboundedReason, stored)
}

// TestUpgradeSignsTheUnboundedSchedulesBefore: a database rolled back to
// before bounds were required (a broken schedule paused by the way down) and
// migrated again gives the schedule that has neither an end nor a count the
// reason 'before bounds were required', and none to the bounded ones.
func TestUpgradeSignsTheUnboundedSchedulesBefore(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	forever, err := e.app.Create(ctx, spec("forever", "0 * * * *", "UTC"))
	require.NoError(t, err)
	counted := spec("counted", "0 * * * *", "UTC")
	counted.MaxOccurrences = 5
	bounded(&counted)
	c, err := e.app.Create(ctx, counted)
	require.NoError(t, err)
	until := spec("until", "0 * * * *", "UTC")
	until.End = t0.Add(30 * 24 * time.Hour)
	bounded(&until)
	u, err := e.app.Create(ctx, until)
	require.NoError(t, err)
	require.NoError(t, testkit.Raw(ctx, e.Pool, ops, t0, `SELECT docket.schedule_break($1, $2, 'by hand', $3, $4)`,
		u.ID, u.Cursor, string(sweeper), t0))

	require.NoError(t, db.MigrateDownTo(ctx, e.Pool, 37))
	require.NoError(t, db.Migrate(ctx, e.Pool))
	reasons := map[int64]*string{}
	rows, err := e.Pool.Query(ctx, `SELECT id, unbounded_reason, status FROM docket.schedules`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		var reason *string
		var status string
		require.NoError(t, rows.Scan(&id, &reason, &status))
		reasons[id] = reason
		if id == u.ID {
			require.Equal(t, "paused", status, "a broken schedule is paused on the way down")
		}
	}
	require.NoError(t, rows.Err())
	require.Len(t, reasons, 3)
	require.NotNil(t, reasons[forever.ID])
	require.Equal(t, "before bounds were required", *reasons[forever.ID])
	require.Nil(t, reasons[c.ID])
	require.Nil(t, reasons[u.ID])
}
