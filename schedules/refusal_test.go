package schedules_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/schedules"
)

// TestRefusals: bad input is refused with its sentinel and a message naming
// the field, unauthorised callers are refused as elsewhere, and nothing is
// written.
func TestRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	existing, err := e.app.Create(ctx, spec("existing", "0 7 * * 1-5", "Europe/Berlin"))
	require.NoError(t, err)
	with := func(f func(*schedules.Spec)) schedules.Spec {
		s := spec("new", "0 7 * * 1-5", "Europe/Berlin")
		f(&s)
		return s
	}
	before := snapshot(t, e.Pool)
	for _, tc := range []struct {
		name  string
		as    *schedules.Client
		spec  schedules.Spec
		want  error
		field string
	}{
		{"bad expression", e.app, with(func(s *schedules.Spec) { s.Cron = "61 * * * *" }), db.ErrInvalidArgument, "cron"},
		{"six fields", e.app, with(func(s *schedules.Spec) { s.Cron = "0 0 7 * * *" }), db.ErrInvalidArgument, "cron"},
		{"@every", e.app, with(func(s *schedules.Spec) { s.Cron = "@every 1h" }), db.ErrInvalidArgument, "cron"},
		{"never", e.app, with(func(s *schedules.Spec) { s.Cron = "0 0 30 2 *" }), db.ErrInvalidArgument, "cron"},
		{"unknown zone", e.app, with(func(s *schedules.Spec) { s.Zone = "Europe/Atlantis" }), db.ErrInvalidArgument, "zone"},
		{"no zone", e.app, with(func(s *schedules.Spec) { s.Zone = "" }), db.ErrInvalidArgument, "zone"},
		{"local zone", e.app, with(func(s *schedules.Spec) { s.Zone = "Local" }), db.ErrInvalidArgument, "zone"},
		{"negative max occurrences", e.app, with(func(s *schedules.Spec) { s.MaxOccurrences = -1 }), db.ErrInvalidArgument, "max_occurrences"},
		{"negative max catch-up", e.app, with(func(s *schedules.Spec) { s.MaxCatchUp = -1 }), db.ErrInvalidArgument, "max_catch_up"},
		{"max catch-up too big", e.app, with(func(s *schedules.Spec) { s.MaxCatchUp = 1001 }), db.ErrInvalidArgument, "max_catch_up"},
		{"negative grace", e.app, with(func(s *schedules.Spec) { s.Grace = -time.Second }), db.ErrInvalidArgument, "grace"},
		{"unknown policy", e.app, with(func(s *schedules.Spec) { s.CatchUp = "some" }), db.ErrInvalidArgument, "catch_up"},
		{"end before start", e.app, with(func(s *schedules.Spec) { s.Start, s.End = t0, t0.Add(-time.Hour) }), db.ErrInvalidArgument, "ends_at"},
		{"end at start", e.app, with(func(s *schedules.Spec) { s.Start, s.End = t0, t0 }), db.ErrInvalidArgument, "ends_at"},
		{"no occurrence before the end", e.app, with(func(s *schedules.Spec) { s.Start, s.End = t0, t0.Add(time.Hour); bounded(s) }), db.ErrInvalidArgument, "cron"},
		{"bad name", e.app, with(func(s *schedules.Spec) { s.Name = "Bad Name" }), db.ErrInvalidArgument, "schedule name"},
		{"bad job kind", e.app, with(func(s *schedules.Spec) { s.Job.Kind = "Bad Kind" }), db.ErrInvalidArgument, "kind"},
		{"payload not JSON", e.app, with(func(s *schedules.Spec) { s.Job.Payload = []byte("{") }), db.ErrInvalidArgument, "job payload"},
		{"name taken", e.app, with(func(s *schedules.Spec) { s.Name = "existing" }), db.ErrAlreadyExists, ""},
		{"no grant", e.as(t, sam), with(func(*schedules.Spec) {}), db.ErrNotPermitted, ""},
		{"view only", e.as(t, vic), with(func(*schedules.Spec) {}), db.ErrNotPermitted, ""},
		{"manage without job.create", e.as(t, half), with(func(*schedules.Spec) {}), db.ErrNotPermitted, ""},
		{"other project", e.app, with(func(s *schedules.Spec) { s.Project = other }), db.ErrNotPermitted, ""},
	} {
		_, err := tc.as.Create(ctx, tc.spec)
		require.ErrorIs(t, err, tc.want, tc.name)
		if tc.field != "" {
			require.Contains(t, err.Error(), "invalid "+tc.field, tc.name)
		}
	}
	// Writes to a schedule the actor may not manage: not there.
	for _, c := range []*schedules.Client{e.as(t, sam), e.as(t, vic)} {
		_, err := c.Pause(ctx, existing.ID)
		require.ErrorIs(t, err, db.ErrNotFound)
		_, err = c.Finish(ctx, existing.ID)
		require.ErrorIs(t, err, db.ErrNotFound)
		_, err = c.Update(ctx, existing.ID, spec("x", "0 8 * * *", "UTC"))
		require.ErrorIs(t, err, db.ErrNotFound)
	}
	_, err = e.as(t, sam).Get(ctx, existing.ID)
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = e.app.Update(ctx, existing.ID, spec("x", "0 8 * * *", "Mars/Olympus"))
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.Equal(t, before, snapshot(t, e.Pool), "nothing was written")

	// Readers see it; an update keeps the cursor and recomputes the next run.
	got, err := e.as(t, vic).Get(ctx, existing.ID)
	require.NoError(t, err)
	require.Equal(t, existing, got)
	up, err := e.app.Update(ctx, existing.ID, spec("x", "30 6 * * *", "Europe/Berlin"))
	require.NoError(t, err)
	require.Equal(t, "existing", up.Name)
	require.Equal(t, existing.Cursor, up.Cursor)
	require.Equal(t, "2026-11-03T05:30:00Z", up.NextDue.Format(time.RFC3339))
	list, err := e.as(t, vic).List(ctx, schedules.Filter{Project: project})
	require.NoError(t, err)
	require.Len(t, list, 1)
	list, err = e.as(t, sam).List(ctx, schedules.Filter{Project: project})
	require.NoError(t, err)
	require.Empty(t, list)
	pv, err := e.app.Preview(ctx, existing.ID, 2)
	require.NoError(t, err)
	require.Equal(t, "2026-11-03T05:30:00Z", pv[0].At.Format(time.RFC3339))
	require.Equal(t, "2026-11-04T05:30:00Z", pv[1].At.Format(time.RFC3339))
}
