package schedules_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/schedules"
)

// otherApp manages the schedules of project other, and nothing of acme.
const otherApp access.Actor = "svc:other-app"

// TestSweepCapsCatchUpAtTheSweepBound: a per-minute schedule catching up
// all, at most 1000, left unswept for 20 hours has 1194 missed occurrences
// and 6 on time; the sweep runs the 6 and the latest 994 missed (1000, the
// bound schedule_advance holds a sweep to) and records the 200 older as
// skipped, instead of being refused, and the hourly schedule beside it
// advances in the same sweep. All as docket_app logins.
func TestSweepCapsCatchUpAtTheSweepBound(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c, err := schedules.NewClient(e.Login(t, testkit.AppRole, app).Pool, schedules.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	minutely := spec("minutely", "* * * * *", "UTC")
	minutely.Start, minutely.CatchUp, minutely.MaxCatchUp = t0, schedules.CatchUpAll, schedules.MaxCatchUp
	m, err := c.Create(ctx, minutely)
	require.NoError(t, err)
	hourly := spec("hourly", "0 * * * *", "UTC")
	hourly.Start = t0
	h, err := c.Create(ctx, hourly)
	require.NoError(t, err)

	e.Clock.Advance(20 * time.Hour)
	w := e.sweeperWorker(t, 100)
	moved, err := w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	require.Equal(t, 2, moved)

	got, err := c.Get(ctx, h.ID)
	require.NoError(t, err)
	require.Equal(t, schedules.Active, got.Status)
	require.EqualValues(t, 1, got.Runs, "the hourly schedule ran its on-time occurrence")
	require.Equal(t, t0.Add(21*time.Hour), got.NextDue)

	got, err = c.Get(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, schedules.Active, got.Status, "not broken: its plan fits the bound")
	require.EqualValues(t, schedules.MaxRunsPerSweep, got.Runs)
	require.Equal(t, t0.Add(20*time.Hour+time.Minute), got.NextDue)
	runs := e.runs(t, m.ID)
	require.Len(t, runs, schedules.MaxRunsPerSweep)
	require.Equal(t, t0.Add(201*time.Minute).Format(time.RFC3339), runs[0].at, "the latest 994 missed")
	require.Equal(t, t0.Add(20*time.Hour).Format(time.RFC3339), runs[len(runs)-1].at, "and the 6 on time")
	var skipped int
	var last string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT skipped, last ->> 'at' FROM docket.schedule_skips WHERE schedule_id = $1`, m.ID).
		Scan(&skipped, &last))
	require.Equal(t, 200, skipped)
	lastAt, err := time.Parse(time.RFC3339, last)
	require.NoError(t, err)
	require.Equal(t, t0.Add(200*time.Minute), lastAt.UTC())

	e.Clock.Advance(time.Minute)
	moved, err = w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	require.Equal(t, 1, moved, "the next minute, on time")
}

// TestSweepRecordsABrokenScheduleAndAdvancesTheOthers: a schedule whose
// expression was edited by hand into one docket does not parse, and one
// whose first job's key another job of its kind already holds with another
// payload (the database refuses its sweep), are recorded broken with the
// reason in the sweep that meets them; the schedule beside them advances in
// that sweep, and the broken ones are passed over until mended. The view
// shows them to the project's logins and not to another project's, whose
// principal can neither see nor resume them. An update or a resume mends
// one, and each step is an event.
func TestSweepRecordsABrokenScheduleAndAdvancesTheOthers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.Allow(t, testkit.Grants(otherApp, other, access.ScheduleManage, access.JobCreate)...)
	login := e.Login(t, testkit.AppRole, app)
	c, err := schedules.NewClient(login.Pool, schedules.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	create := func(name string, policy schedules.CatchUp) schedules.Schedule {
		sp := spec(name, "0 * * * *", "UTC")
		sp.Start, sp.CatchUp = t0, policy
		s, err := c.Create(ctx, sp)
		require.NoError(t, err)
		return s
	}
	edited, fine := create("edited", schedules.CatchUpSkip), create("fine", schedules.CatchUpSkip)
	// Catching up one, it runs its 10:00 however late it is swept.
	squatted := create("squatted", schedules.CatchUpOne)
	require.NoError(t, testkit.Raw(ctx, e.Pool, ops, t0, `UPDATE docket.schedules SET cron = '@every 1h' WHERE id = $1`, edited.ID))
	jc, err := jobs.NewClient(login.Pool, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	_, err = jc.Enqueue(ctx, jobs.Spec{Kind: tickKind.Name(), Payload: []byte(`{"n": 2}`),
		IdempotencyKey: fmt.Sprintf("schedule:%d:2026-11-02T10:00:0", squatted.ID)})
	require.NoError(t, err)

	e.Clock.Advance(time.Hour + time.Minute)
	w := e.sweeperWorker(t, 100)
	moved, err := w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	require.Equal(t, 3, moved, "one advanced, two found broken")
	require.Len(t, e.runs(t, fine.ID), 1, "the fine schedule advanced")
	require.Empty(t, e.runs(t, squatted.ID), "what the refused sweep wrote is rolled back")
	for _, tc := range []struct {
		s    schedules.Schedule
		want string
	}{
		{edited, "@every"},
		{squatted, "idempotency"},
	} {
		got, err := c.Get(ctx, tc.s.ID)
		require.NoError(t, err)
		require.Equal(t, schedules.Broken, got.Status, tc.s.Name)
		require.Contains(t, got.BrokenReason, tc.want, tc.s.Name)
		require.Equal(t, e.Clock.Now(), got.BrokenAt)
		require.Equal(t, tc.s.NextDue, got.NextDue, "its due instant and cursor are kept")
		evs, err := c.Events(ctx, tc.s.ID)
		require.NoError(t, err)
		last := evs[len(evs)-1]
		require.Equal(t, schedules.EventStatus, last.Type)
		require.Equal(t, schedules.Active, last.From)
		require.Equal(t, schedules.Broken, last.To)
		require.Equal(t, sweeper, last.Actor)
		require.Contains(t, string(last.Detail), tc.want)
	}
	moved, err = w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	require.Zero(t, moved, "broken schedules are passed over")

	// The operators' view: the project's login sees both; another
	// project's sees none, and its principal cannot read or resume them.
	brokenIn := func(q db.DBTX) []int64 {
		rows, err := q.Query(ctx, `SELECT id FROM docket.schedules_broken ORDER BY id`)
		require.NoError(t, err)
		var ids []int64
		for rows.Next() {
			var id int64
			require.NoError(t, rows.Scan(&id))
			ids = append(ids, id)
		}
		require.NoError(t, rows.Err())
		return ids
	}
	require.Equal(t, []int64{edited.ID, squatted.ID}, brokenIn(login.Pool))
	require.Equal(t, []int64{edited.ID, squatted.ID}, brokenIn(e.Login(t, testkit.ReaderRole, vic).Pool))
	require.Equal(t, []int64{edited.ID, squatted.ID}, brokenIn(e.Pool), "the owner sees every one")
	stranger := e.Login(t, testkit.AppRole, otherApp)
	require.Empty(t, brokenIn(stranger.Pool))
	sc, err := schedules.NewClient(stranger.Pool, schedules.Config{Actor: otherApp, Clock: e.Clock})
	require.NoError(t, err)
	before := snapshot(t, e.Pool)
	_, err = sc.Get(ctx, squatted.ID)
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = sc.Resume(ctx, squatted.ID)
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = sc.Update(ctx, edited.ID, spec("x", "0 * * * *", "UTC"))
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = c.Resume(ctx, 1<<40)
	require.ErrorIs(t, err, db.ErrNotFound)
	// Only the sweep breaks a schedule, and only with a reason.
	_, err = stranger.Pool.Exec(ctx, `SELECT docket.schedule_break($1, $2, 'because', $3, $4)`, fine.ID, fine.Cursor, string(otherApp), e.Clock.Now())
	require.ErrorIs(t, db.Translate(err, "schedule.break"), db.ErrNotFound, "another project's principal may not break a schedule")
	err = testkit.Raw(ctx, e.Pool, ops, e.Clock.Now(), `UPDATE docket.schedules SET status = 'broken' WHERE id = $1`, fine.ID)
	require.ErrorIs(t, err, db.ErrInvalidArgument, "broken needs its reason")
	require.ErrorContains(t, err, "schedules_broken_iff_reason")
	require.Equal(t, before, snapshot(t, e.Pool), "nothing was written")

	// Mended by an update: active again, and swept by its new terms.
	up, err := c.Update(ctx, edited.ID, spec("x", "30 * * * *", "UTC"))
	require.NoError(t, err)
	require.Equal(t, schedules.Active, up.Status)
	require.Empty(t, up.BrokenReason)
	require.True(t, up.BrokenAt.IsZero())
	evs, err := c.Events(ctx, edited.ID)
	require.NoError(t, err)
	require.Equal(t, schedules.EventStatus, evs[len(evs)-2].Type)
	require.Equal(t, schedules.Broken, evs[len(evs)-2].From)
	require.Equal(t, schedules.Active, evs[len(evs)-2].To)
	require.Equal(t, app, evs[len(evs)-2].Actor)
	require.Equal(t, schedules.EventUpdated, evs[len(evs)-1].Type)

	// Resumed while its cause is still there: the next sweep breaks it again
	// and says so again.
	res, err := c.Resume(ctx, squatted.ID)
	require.NoError(t, err)
	require.Equal(t, schedules.Active, res.Status)
	require.Empty(t, res.BrokenReason)
	e.Clock.Advance(30 * time.Minute)
	moved, err = w.Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	require.Equal(t, 2, moved)
	require.Equal(t, []occ{{"2026-11-02 10:30", 0, "2026-11-02T10:30:00Z"}}, e.runs(t, edited.ID), "the mended one ran")
	got, err := c.Get(ctx, squatted.ID)
	require.NoError(t, err)
	require.Equal(t, schedules.Broken, got.Status)
	evs, err = c.Events(ctx, squatted.ID)
	require.NoError(t, err)
	var moves []string
	for _, ev := range evs {
		if ev.Type == schedules.EventStatus {
			moves = append(moves, fmt.Sprintf("%s>%s by %s", ev.From, ev.To, ev.Actor))
		}
	}
	require.Equal(t, []string{"active>broken by svc:sweeper", "broken>active by svc:app", "active>broken by svc:sweeper"}, moves)
}

// TestAResumeUnderRepeatableReadMeetsTheBreak: a resume in a REPEATABLE
// READ transaction whose snapshot predates the sweep that broke the
// schedule does not take it for active and do nothing: it fails
// (db.ErrSerialization), the schedule stays broken, and the resume retried
// mends it.
func TestAResumeUnderRepeatableReadMeetsTheBreak(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	login := e.Login(t, testkit.AppRole, app)
	c, err := schedules.NewClient(login.Pool, schedules.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	sp := spec("edited", "0 * * * *", "UTC")
	sp.Start = t0
	s, err := c.Create(ctx, sp)
	require.NoError(t, err)
	require.NoError(t, testkit.Raw(ctx, e.Pool, ops, t0, `UPDATE docket.schedules SET cron = '@every 1h' WHERE id = $1`, s.ID))
	e.Clock.Advance(time.Hour + time.Minute)

	tx, err := login.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var status string
	require.NoError(t, tx.QueryRow(ctx, `SELECT status FROM docket.schedules WHERE id = $1`, s.ID).Scan(&status))
	require.Equal(t, "active", status, "the snapshot is taken")

	moved, err := e.sweeperWorker(t, 10).Sweep(ctx, schedules.SweepName)
	require.NoError(t, err)
	require.Equal(t, 1, moved)

	_, err = c.ResumeTx(ctx, tx, s.ID)
	require.ErrorIs(t, err, db.ErrSerialization)
	require.NoError(t, tx.Rollback(ctx))
	got, err := c.Get(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, schedules.Broken, got.Status)

	got, err = c.Resume(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, schedules.Active, got.Status)
	require.Empty(t, got.BrokenReason)
}
