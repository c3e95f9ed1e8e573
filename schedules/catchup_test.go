package schedules_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/schedules"
)

// TestCatchUpAfterOutage: an hourly schedule runs at t0, then nothing
// sweeps for three days and thirty minutes, so the 72 occurrences from
// 10:00 on day one to 09:00 on day four are all missed (more than the
// 5-minute grace late). skip runs none, one runs the latest, all runs the
// latest ten; the rest are recorded as one skipped window; the next run is
// 10:00 on day four. A schedule paused over the outage and resumed catches
// up by its policy the same way.
func TestCatchUpAfterOutage(t *testing.T) {
	t.Parallel()
	hour := func(day, h int) string {
		return time.Date(2026, 11, day, h, 0, 0, 0, time.UTC).Format(time.RFC3339)
	}
	for _, tc := range []struct {
		policy  schedules.CatchUp
		pause   bool
		caught  []string // after the run at t0
		skipped int
		last    string // the last skipped
	}{
		{schedules.CatchUpSkip, false, nil, 72, hour(5, 9)},
		{schedules.CatchUpOne, false, []string{hour(5, 9)}, 71, hour(5, 8)},
		{schedules.CatchUpAll, false, []string{hour(5, 0), hour(5, 1), hour(5, 2), hour(5, 3), hour(5, 4),
			hour(5, 5), hour(5, 6), hour(5, 7), hour(5, 8), hour(5, 9)}, 62, hour(4, 23)},
		{schedules.CatchUpOne, true, []string{hour(5, 9)}, 71, hour(5, 8)},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx := context.Background()
			sp := spec("hourly", "0 * * * *", "UTC")
			sp.Start, sp.CatchUp, sp.MaxCatchUp = t0.Add(-time.Minute), tc.policy, 10
			s, err := e.app.Create(ctx, sp)
			require.NoError(t, err)
			w := e.sweeperWorker(t, 100)
			moved, err := w.Sweep(ctx, schedules.SweepName)
			require.NoError(t, err)
			require.Equal(t, 1, moved)
			if tc.pause {
				_, err := e.app.Pause(ctx, s.ID)
				require.NoError(t, err)
			}

			e.Clock.Advance(3*24*time.Hour + 30*time.Minute)
			if tc.pause {
				moved, err := w.Sweep(ctx, schedules.SweepName)
				require.NoError(t, err)
				require.Zero(t, moved, "a paused schedule is not swept")
				got, err := e.app.Resume(ctx, s.ID)
				require.NoError(t, err)
				require.Equal(t, t0, got.Cursor, "pause and resume keep the cursor")
			}
			moved, err = w.Sweep(ctx, schedules.SweepName)
			require.NoError(t, err)
			require.Equal(t, 1, moved)

			want := append([]string{t0.Format(time.RFC3339)}, tc.caught...)
			var got []string
			for _, r := range e.runs(t, s.ID) {
				got = append(got, r.at)
			}
			require.Equal(t, want, got)

			evs, err := e.app.Events(ctx, s.ID)
			require.NoError(t, err)
			var skips []schedules.Skipped
			for _, ev := range evs {
				if ev.Type == schedules.EventSkipped {
					var k schedules.Skipped
					require.NoError(t, json.Unmarshal(ev.Detail, &k))
					skips = append(skips, k)
				}
			}
			require.Len(t, skips, 1)
			require.Equal(t, tc.policy, skips[0].Policy)
			require.Equal(t, tc.skipped, skips[0].Count)
			require.Equal(t, hour(2, 10), skips[0].First.At.Format(time.RFC3339))
			require.Equal(t, tc.last, skips[0].Last.At.Format(time.RFC3339))
			require.Equal(t, 72, len(tc.caught)+tc.skipped, "every missed occurrence ran or was recorded as skipped")

			after, err := e.app.Get(ctx, s.ID)
			require.NoError(t, err)
			require.Equal(t, hour(5, 10), after.NextDue.Format(time.RFC3339), "the next future occurrence")
			moved, err = w.Sweep(ctx, schedules.SweepName)
			require.NoError(t, err)
			require.Zero(t, moved)
		})
	}
}

// TestBounds: a schedule runs at most MaxOccurrences times and not after
// its end, then is finished, not deleted.
func TestBounds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	w := e.sweeperWorker(t, 100)
	byCount := spec("three", "*/15 * * * *", "UTC")
	byCount.Start, byCount.MaxOccurrences, byCount.Grace = t0.Add(-time.Minute), 3, 3*time.Hour
	bounded(&byCount)
	a, err := e.app.Create(ctx, byCount)
	require.NoError(t, err)
	byEnd := spec("until", "*/15 * * * *", "UTC")
	byEnd.Start, byEnd.End, byEnd.Grace = t0.Add(-time.Minute), t0.Add(30*time.Minute), 3*time.Hour
	bounded(&byEnd)
	b, err := e.app.Create(ctx, byEnd)
	require.NoError(t, err)

	e.Clock.Advance(2 * time.Hour)
	_, err = w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	for _, c := range []struct {
		id   int64
		runs int
	}{{a.ID, 3}, {b.ID, 3}} {
		s, err := e.app.Get(ctx, c.id)
		require.NoError(t, err)
		require.Equal(t, schedules.Finished, s.Status)
		require.True(t, s.NextDue.IsZero())
		require.Len(t, e.runs(t, c.id), c.runs)
	}
	require.Equal(t, "2026-11-02T09:30:00Z", e.runs(t, b.ID)[2].at, "the end is inclusive")
	_, err = e.app.Resume(ctx, a.ID)
	require.Error(t, err, "finished is terminal")
}
