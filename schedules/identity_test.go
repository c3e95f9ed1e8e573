package schedules_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// TestLocalTimeRepeatsOnlyInOverlaps checks the database's view of which
// local times happen twice against known transitions: Berlin's and New
// York's hour, and Lord Howe's half hour.
func TestLocalTimeRepeatsOnlyInOverlaps(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, tc := range []struct {
		local, zone string
		repeats     bool
	}{
		{"2026-10-25 02:30", "Europe/Berlin", true},
		{"2026-10-25 03:30", "Europe/Berlin", false},
		{"2026-03-29 02:30", "Europe/Berlin", false}, // a gap: it never happens
		{"2026-11-01 01:15", "America/New_York", true},
		{"2026-04-05 01:45", "Australia/Lord_Howe", true},
		{"2026-04-05 02:15", "Australia/Lord_Howe", false},
		{"2026-10-25 02:30", "UTC", false},
	} {
		var got bool
		require.NoError(t, e.Pool.QueryRow(t.Context(), `SELECT docket.local_time_repeats($1::timestamp, $2)`, tc.local, tc.zone).Scan(&got))
		require.Equal(t, tc.repeats, got, "%s in %s", tc.local, tc.zone)
	}
}

// TestAnOccurrenceIsItsJobsKey shows a hand-written occurrence refused when
// its local time is not a whole minute (its job key could not tell it from
// another) or when it claims a second run (fold 1) of a local time that
// happens once, and the database as it was.
func TestAnOccurrenceIsItsJobsKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	s, err := e.app.Create(ctx, spec("berlin", "30 2 * * *", "Europe/Berlin"))
	require.NoError(t, err)
	jc, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	job, err := jc.Enqueue(ctx, jobs.Spec{Kind: tickKind.Name(), Payload: []byte(`{"n": 1}`)})
	require.NoError(t, err)
	insert := func(local string, fold int) error {
		return testkit.Raw(ctx, e.Pool, ops, t0, `
			INSERT INTO docket.schedule_occurrences (schedule_id, local_time, fold, due_at, job_id, recorded_at)
			VALUES ($1, $2::timestamp, $3, ($2::timestamp AT TIME ZONE 'Europe/Berlin'), $4, $5)`,
			s.ID, local, fold, job.Job.ID, t0)
	}

	before := snapshot(t, e.Pool)
	require.ErrorIs(t, insert("2026-11-03 02:30:17", 0), db.ErrInvalidArgument, "a local time between minutes")
	err = insert("2026-11-03 02:30", 1)
	require.ErrorIs(t, err, db.ErrInvalidArgument, "a second run of a time that happens once")
	require.ErrorContains(t, err, "happens once in Europe/Berlin")
	require.Equal(t, before, snapshot(t, e.Pool))

	require.NoError(t, insert("2026-10-25 02:30", 1), "the second 02:30 of the fall-back night")
}
