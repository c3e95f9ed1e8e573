package projects_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/projects"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const ana access.Actor = "user:ana"

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

func setup(t *testing.T) (*pgxpool.Pool, *db.FakeClock) {
	t.Helper()
	return pgtest.NewDB(t), db.NewFakeClock(t0)
}

// snapshot is every project row and event, to show a refusal changed nothing.
func snapshot(t *testing.T, q db.DBTX) string {
	t.Helper()
	var s string
	require.NoError(t, q.QueryRow(context.Background(), `
		SELECT coalesce((SELECT string_agg(p::text, ';' ORDER BY id) FROM docket.projects p), '') || '|' ||
		       coalesce((SELECT string_agg(e::text, ';' ORDER BY id) FROM docket.project_events e), '')`).Scan(&s))
	return s
}

func TestLifecycleIsRecorded(t *testing.T) {
	t.Parallel()
	pool, clock := setup(t)
	ctx := t.Context()

	p, err := projects.Create(ctx, pool, "acme", ana, clock.Now())
	require.NoError(t, err)
	require.Equal(t, projects.Active, p.Status)
	require.Equal(t, t0, p.CreatedAt)

	p, err = projects.SetStatus(ctx, pool, "acme", projects.Archived, "user:bo", clock.Advance(time.Hour))
	require.NoError(t, err)
	require.Equal(t, projects.Archived, p.Status)
	require.Equal(t, t0.Add(time.Hour), p.UpdatedAt)

	// Setting the status it has is a no-op that records nothing.
	before := snapshot(t, pool)
	_, err = projects.SetStatus(ctx, pool, "acme", projects.Archived, "user:bo", clock.Advance(time.Hour))
	require.NoError(t, err)
	require.Equal(t, before, snapshot(t, pool))

	_, err = projects.SetStatus(ctx, pool, "acme", projects.Retired, ana, clock.Advance(time.Hour))
	require.NoError(t, err)

	history, err := projects.History(ctx, pool, "acme")
	require.NoError(t, err)
	for i := range history {
		history[i].ID = 0
	}
	require.Equal(t, []projects.Event{
		{To: projects.Active, Actor: ana, At: t0},
		{From: projects.Active, To: projects.Archived, Actor: "user:bo", At: t0.Add(time.Hour)},
		{From: projects.Archived, To: projects.Retired, Actor: ana, At: t0.Add(3 * time.Hour)},
	}, history)

	got, err := projects.Get(ctx, pool, "acme")
	require.NoError(t, err)
	require.Equal(t, projects.Retired, got.Status)
}

func TestIllegalMovesAreRefused(t *testing.T) {
	t.Parallel()
	pool, clock := setup(t)
	ctx := t.Context()
	_, err := projects.Create(ctx, pool, "acme", ana, clock.Now())
	require.NoError(t, err)

	before := snapshot(t, pool)
	_, err = projects.SetStatus(ctx, pool, "acme", projects.Retired, ana, clock.Now())
	require.ErrorIs(t, err, db.ErrIllegalTransition)
	require.ErrorContains(t, err, "active -> retired")
	require.Equal(t, before, snapshot(t, pool))

	_, err = projects.SetStatus(ctx, pool, "acme", projects.Archived, ana, clock.Now())
	require.NoError(t, err)
	_, err = projects.SetStatus(ctx, pool, "acme", projects.Retired, ana, clock.Now())
	require.NoError(t, err)

	// Retired is terminal: nothing moves it, not even back to where it was.
	before = snapshot(t, pool)
	for _, to := range []projects.Status{projects.Active, projects.Archived} {
		_, err = projects.SetStatus(ctx, pool, "acme", to, ana, clock.Now())
		require.ErrorIs(t, err, db.ErrIllegalTransition, "retired -> %s", to)
	}
	require.Equal(t, before, snapshot(t, pool))
}

// The transition-trigger pattern, proven once for every machine that copies
// it: a hand-written UPDATE is held to the same rules as the functions.
func TestRawUpdatesAreHeldToTheMachine(t *testing.T) {
	t.Parallel()
	pool, clock := setup(t)
	ctx := t.Context()
	_, err := projects.Create(ctx, pool, "acme", ana, clock.Now())
	require.NoError(t, err)
	_, err = projects.Create(ctx, pool, "gone", ana, clock.Now())
	require.NoError(t, err)
	_, err = projects.SetStatus(ctx, pool, "gone", projects.Archived, ana, clock.Now())
	require.NoError(t, err)
	_, err = projects.SetStatus(ctx, pool, "gone", projects.Retired, ana, clock.Now())
	require.NoError(t, err)
	before := snapshot(t, pool)

	asOperator := func(sql string) error {
		return db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT docket.set_context('user:ops', '2026-11-02T12:00:00Z')`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, sql)
			return db.Translate(err, "raw")
		})
	}
	for _, tc := range []struct {
		name, sql string
		want      error
	}{
		{"illegal pair", `UPDATE docket.projects SET status = 'retired' WHERE name = 'acme'`, db.ErrIllegalTransition},
		{"out of terminal", `UPDATE docket.projects SET status = 'active' WHERE name = 'gone'`, db.ErrIllegalTransition},
		{"terminal row, other column", `UPDATE docket.projects SET updated_at = updated_at + interval '1 day' WHERE name = 'gone'`, db.ErrIllegalTransition},
		{"unknown state", `UPDATE docket.projects SET status = 'frozen' WHERE name = 'acme'`, db.ErrIllegalTransition},
		{"immutable name", `UPDATE docket.projects SET name = 'acme2' WHERE name = 'acme'`, db.ErrImmutable},
		{"immutable creator", `UPDATE docket.projects SET created_by = 'user:mallory' WHERE name = 'acme'`, db.ErrImmutable},
		{"delete", `DELETE FROM docket.projects WHERE name = 'acme'`, db.ErrImmutable},
		{"edit history", `UPDATE docket.project_events SET actor = 'user:mallory'`, db.ErrImmutable},
		{"erase history", `DELETE FROM docket.project_events`, db.ErrImmutable},
	} {
		require.ErrorIs(t, asOperator(tc.sql), tc.want, tc.name)
	}
	require.Equal(t, before, snapshot(t, pool))

	// A project is born active, even by hand.
	for _, status := range []string{"archived", "retired", "frozen"} {
		err := asOperator(`INSERT INTO docket.projects (name, status, created_by, created_at, updated_at)
			VALUES ('born', '` + status + `', 'user:ops', '2026-11-02T12:00:00Z', '2026-11-02T12:00:00Z')`)
		require.ErrorIs(t, err, db.ErrIllegalTransition, "born %s", status)
	}
	require.Equal(t, before, snapshot(t, pool))

	// Without a change context a legal move is refused too: no change
	// goes unattributed.
	_, err = pool.Exec(ctx, `UPDATE docket.projects SET status = 'archived' WHERE name = 'acme'`)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument)
	require.Equal(t, before, snapshot(t, pool))

	// A legal move by hand is recorded with the operator's context.
	require.NoError(t, asOperator(`UPDATE docket.projects SET status = 'archived', updated_at = '2026-11-02T12:00:00Z' WHERE name = 'acme'`))
	history, err := projects.History(ctx, pool, "acme")
	require.NoError(t, err)
	last := history[len(history)-1]
	require.Equal(t, projects.Event{ID: last.ID, From: projects.Active, To: projects.Archived, Actor: "user:ops",
		At: time.Date(2026, 11, 2, 12, 0, 0, 0, time.UTC)}, last)
}

func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	pool, clock := setup(t)
	ctx := t.Context()
	_, err := projects.Create(ctx, pool, "acme", ana, clock.Now())
	require.NoError(t, err)
	before := snapshot(t, pool)

	for _, tc := range []struct {
		name    string
		project string
		by      access.Actor
		now     time.Time
		want    error
	}{
		{"empty name", "", ana, clock.Now(), db.ErrInvalidArgument},
		{"uppercase", "Acme", ana, clock.Now(), db.ErrInvalidArgument},
		{"space", "ac me", ana, clock.Now(), db.ErrInvalidArgument},
		{"too long", strings.Repeat("a", 64), ana, clock.Now(), db.ErrInvalidArgument},
		{"leading dash", "-acme", ana, clock.Now(), db.ErrInvalidArgument},
		{"NUL", "ac\x00me", ana, clock.Now(), db.ErrInvalidArgument},
		{"malformed actor", "initech", "ana", clock.Now(), db.ErrInvalidArgument},
		{"zero instant", "initech", ana, time.Time{}, db.ErrInvalidArgument},
		{"infinite instant", "initech", ana, time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), db.ErrInvalidArgument},
		{"duplicate", "acme", ana, clock.Now(), db.ErrAlreadyExists},
	} {
		_, err := projects.Create(ctx, pool, tc.project, tc.by, tc.now)
		require.ErrorIs(t, err, tc.want, tc.name)
	}
	for _, tc := range []struct {
		name    string
		project string
		status  projects.Status
		by      access.Actor
		want    error
	}{
		{"unknown project", "initech", projects.Archived, ana, db.ErrNotFound},
		{"unknown status", "acme", "frozen", ana, db.ErrInvalidArgument},
		{"empty status", "acme", "", ana, db.ErrInvalidArgument},
		{"malformed actor", "acme", projects.Archived, "", db.ErrInvalidArgument},
	} {
		_, err := projects.SetStatus(ctx, pool, tc.project, tc.status, tc.by, clock.Now())
		require.ErrorIs(t, err, tc.want, tc.name)
	}
	_, err = projects.Get(ctx, pool, "initech")
	require.ErrorIs(t, err, db.ErrNotFound)
	for _, limit := range []int{0, -1, projects.MaxPage + 1} {
		_, err = projects.List(ctx, pool, "", limit)
		require.ErrorIs(t, err, db.ErrInvalidArgument)
	}
	require.Equal(t, before, snapshot(t, pool))
}

func TestListPages(t *testing.T) {
	t.Parallel()
	pool, clock := setup(t)
	ctx := t.Context()
	for _, name := range []string{"c", "a", "e", "b", "d"} {
		_, err := projects.Create(ctx, pool, name, ana, clock.Now())
		require.NoError(t, err)
	}
	var names []string
	after := ""
	for {
		page, err := projects.List(ctx, pool, after, 2)
		require.NoError(t, err)
		for _, p := range page {
			names = append(names, p.Name)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].Name
	}
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, names)
}

// Creating the same project from many goroutines at once makes one project:
// one creator succeeds, the others are told it exists.
func TestConcurrentCreateMakesOne(t *testing.T) {
	t.Parallel()
	pool, clock := setup(t)
	ctx := t.Context()
	for round := range 5 {
		name := "race" + string(rune('a'+round))
		const n = 8
		release := make(chan struct{})
		errs := make(chan error, n)
		for range n {
			go func() {
				<-release
				_, err := projects.Create(ctx, pool, name, ana, clock.Now())
				errs <- err
			}()
		}
		close(release)
		won := 0
		for range n {
			err := <-errs
			if err == nil {
				won++
				continue
			}
			require.ErrorIs(t, err, db.ErrAlreadyExists)
		}
		require.Equal(t, 1, won)
		history, err := projects.History(ctx, pool, name)
		require.NoError(t, err)
		require.Len(t, history, 1)
	}
}
