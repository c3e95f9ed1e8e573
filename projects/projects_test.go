package projects_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/projects"
)

func TestLifecycleIsRecorded(t *testing.T) {
	t.Parallel()
	e, pc := setup(t)
	ctx := t.Context()
	_, byBo := testkit.Clients(t, e.Pool, e.Clock, bo)

	p, err := pc.Create(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, projects.Active, p.Status)
	require.Equal(t, t0, p.CreatedAt)

	e.Clock.Advance(time.Hour)
	p, err = byBo.SetStatus(ctx, "acme", projects.Archived)
	require.NoError(t, err)
	require.Equal(t, projects.Archived, p.Status)
	require.Equal(t, t0.Add(time.Hour), p.UpdatedAt)

	// Setting the status it has is a no-op that records nothing.
	before := snapshot(t, e.Pool)
	e.Clock.Advance(time.Hour)
	_, err = byBo.SetStatus(ctx, "acme", projects.Archived)
	require.NoError(t, err)
	require.Equal(t, before, snapshot(t, e.Pool))

	e.Clock.Advance(time.Hour)
	_, err = pc.SetStatus(ctx, "acme", projects.Retired)
	require.NoError(t, err)

	history, err := pc.History(ctx, "acme")
	require.NoError(t, err)
	for i := range history {
		history[i].ID = 0
	}
	require.Equal(t, []projects.Event{
		{To: projects.Active, Actor: ana, At: t0},
		{From: projects.Active, To: projects.Archived, Actor: bo, At: t0.Add(time.Hour)},
		{From: projects.Archived, To: projects.Retired, Actor: ana, At: t0.Add(3 * time.Hour)},
	}, history)

	got, err := pc.Get(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, projects.Retired, got.Status)
}

func TestIllegalMovesAreRefused(t *testing.T) {
	t.Parallel()
	e, pc := setup(t)
	ctx := t.Context()
	_, err := pc.Create(ctx, "acme")
	require.NoError(t, err)

	before := snapshot(t, e.Pool)
	_, err = pc.SetStatus(ctx, "acme", projects.Retired)
	require.ErrorIs(t, err, db.ErrIllegalTransition)
	require.ErrorContains(t, err, "active -> retired")
	require.Equal(t, before, snapshot(t, e.Pool))

	_, err = pc.SetStatus(ctx, "acme", projects.Archived)
	require.NoError(t, err)
	_, err = pc.SetStatus(ctx, "acme", projects.Retired)
	require.NoError(t, err)

	// Retired is terminal: nothing moves it, not even back to where it was.
	before = snapshot(t, e.Pool)
	for _, to := range []projects.Status{projects.Active, projects.Archived} {
		_, err = pc.SetStatus(ctx, "acme", to)
		require.ErrorIs(t, err, db.ErrIllegalTransition, "retired -> %s", to)
	}
	require.Equal(t, before, snapshot(t, e.Pool))
}

// The transition-trigger pattern, proven once for every machine that copies
// it: a hand-written UPDATE is held to the same rules as the functions.
func TestRawUpdatesAreHeldToTheMachine(t *testing.T) {
	t.Parallel()
	e, pc := setup(t)
	ctx := t.Context()
	_, err := pc.Create(ctx, "acme")
	require.NoError(t, err)
	_, err = pc.Create(ctx, "gone")
	require.NoError(t, err)
	_, err = pc.SetStatus(ctx, "gone", projects.Archived)
	require.NoError(t, err)
	_, err = pc.SetStatus(ctx, "gone", projects.Retired)
	require.NoError(t, err)
	before := snapshot(t, e.Pool)

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
		require.ErrorIs(t, asOperator(ctx, e.Pool, tc.sql), tc.want, tc.name)
	}
	require.Equal(t, before, snapshot(t, e.Pool))

	// A project is born active, even by hand.
	for _, status := range []string{"archived", "retired", "frozen"} {
		err := asOperator(ctx, e.Pool, `INSERT INTO docket.projects (name, status, created_by, created_at, updated_at)
			VALUES ('born', '`+status+`', 'user:ops', '2026-11-02T12:00:00Z', '2026-11-02T12:00:00Z')`)
		require.ErrorIs(t, err, db.ErrIllegalTransition, "born %s", status)
	}
	require.Equal(t, before, snapshot(t, e.Pool))

	// Without a change context a legal move is refused too: no change
	// goes unattributed.
	_, err = e.Pool.Exec(ctx, `UPDATE docket.projects SET status = 'archived' WHERE name = 'acme'`)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument)
	require.Equal(t, before, snapshot(t, e.Pool))

	// A legal move by hand is recorded with the operator's context.
	require.NoError(t, asOperator(ctx, e.Pool, `UPDATE docket.projects SET status = 'archived', updated_at = '2026-11-02T12:00:00Z' WHERE name = 'acme'`))
	history, err := pc.History(ctx, "acme")
	require.NoError(t, err)
	last := history[len(history)-1]
	require.Equal(t, projects.Event{ID: last.ID, From: projects.Active, To: projects.Archived, Actor: ops, At: byHand}, last)
}

func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	e, pc := setup(t)
	ctx := t.Context()
	_, err := pc.Create(ctx, "acme")
	require.NoError(t, err)
	before := snapshot(t, e.Pool)

	for _, tc := range []struct {
		name    string
		project string
		now     time.Time
		want    error
	}{
		{"empty name", "", e.Clock.Now(), db.ErrInvalidArgument},
		{"uppercase", "Acme", e.Clock.Now(), db.ErrInvalidArgument},
		{"space", "ac me", e.Clock.Now(), db.ErrInvalidArgument},
		{"too long", strings.Repeat("a", 64), e.Clock.Now(), db.ErrInvalidArgument},
		{"leading dash", "-acme", e.Clock.Now(), db.ErrInvalidArgument},
		{"NUL", "ac\x00me", e.Clock.Now(), db.ErrInvalidArgument},
		{"zero instant", "initech", time.Time{}, db.ErrInvalidArgument},
		{"infinite instant", "initech", time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), db.ErrInvalidArgument},
		{"duplicate", "acme", e.Clock.Now(), db.ErrAlreadyExists},
	} {
		_, onClock := testkit.Clients(t, e.Pool, db.NewFakeClock(tc.now), ana)
		_, err := onClock.Create(ctx, tc.project)
		require.ErrorIs(t, err, tc.want, tc.name)
	}
	for _, tc := range []struct {
		name    string
		project string
		status  projects.Status
		want    error
	}{
		{"unknown project", "initech", projects.Archived, db.ErrNotFound},
		{"unknown status", "acme", "frozen", db.ErrInvalidArgument},
		{"empty status", "acme", "", db.ErrInvalidArgument},
	} {
		_, err := pc.SetStatus(ctx, tc.project, tc.status)
		require.ErrorIs(t, err, tc.want, tc.name)
	}
	_, err = pc.Get(ctx, "initech")
	require.ErrorIs(t, err, db.ErrNotFound)
	for _, limit := range []int{-1, db.MaxPage + 1} {
		_, err = pc.List(ctx, projects.Filter{Limit: limit})
		require.ErrorIs(t, err, db.ErrInvalidArgument, "limit %d", limit)
		require.ErrorContains(t, err, fmt.Sprintf("limit %d is outside 1..%d", limit, db.MaxPage))
	}
	require.Equal(t, before, snapshot(t, e.Pool))
}

// NewClient refuses a nil pool and a malformed actor up front. The database
// holds a caller that goes around the client to the same rule: a project
// created or moved by a malformed actor is refused and writes nothing.
func TestNewClientRefusesNilPoolAndMalformedActor(t *testing.T) {
	t.Parallel()
	e, pc := setup(t)
	ctx := t.Context()
	_, err := pc.Create(ctx, "acme")
	require.NoError(t, err)
	before := snapshot(t, e.Pool)

	for _, tc := range []struct {
		name  string
		pool  db.Pool
		actor access.Actor
		op    string
	}{
		{"nil pool", nil, ana, "projects.new_client"},
		{"nil *pgxpool.Pool", (*pgxpool.Pool)(nil), ana, "projects.new_client"},
		{"malformed actor", e.Pool, "ana", "actor.validate"},
		{"empty actor", e.Pool, "", "actor.validate"},
	} {
		c, err := projects.NewClient(tc.pool, projects.Config{Actor: tc.actor, Clock: e.Clock})
		require.ErrorIs(t, err, db.ErrInvalidArgument, tc.name)
		require.ErrorContains(t, err, tc.op, tc.name)
		require.Nil(t, c, tc.name)
	}

	for _, by := range []access.Actor{"ana", ""} {
		_, err := e.Pool.Exec(ctx, `SELECT docket.project_create($1::text, $2::text, $3::timestamptz)`,
			"initech", string(by), e.Clock.Now())
		require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument, "create by %q", by)
		_, err = e.Pool.Exec(ctx, `SELECT docket.project_set_status($1::text, $2::text, $3::text, $4::timestamptz)`,
			"acme", string(projects.Archived), string(by), e.Clock.Now())
		require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument, "set status by %q", by)
	}
	require.Equal(t, before, snapshot(t, e.Pool))
}

func TestListPages(t *testing.T) {
	t.Parallel()
	_, pc := setup(t)
	ctx := t.Context()
	for _, name := range []string{"c", "a", "e", "b", "d"} {
		_, err := pc.Create(ctx, name)
		require.NoError(t, err)
	}
	var names []string
	after := ""
	for {
		page, err := pc.List(ctx, projects.Filter{After: after, Limit: 2})
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

// A limit of 0 asks for the default page, db.DefaultPage projects; a larger
// limit takes more, up to db.MaxPage.
func TestListLimitZeroIsTheDefaultPage(t *testing.T) {
	t.Parallel()
	_, pc := setup(t)
	ctx := t.Context()
	var want []string
	for i := range db.DefaultPage + 1 {
		name := fmt.Sprintf("p%03d", i)
		_, err := pc.Create(ctx, name)
		require.NoError(t, err)
		want = append(want, name)
	}
	names := func(ps []projects.Project) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.Name
		}
		return out
	}

	page, err := pc.List(ctx, projects.Filter{})
	require.NoError(t, err)
	require.Equal(t, want[:db.DefaultPage], names(page))
	rest, err := pc.List(ctx, projects.Filter{After: page[len(page)-1].Name})
	require.NoError(t, err)
	require.Equal(t, want[db.DefaultPage:], names(rest))

	all, err := pc.List(ctx, projects.Filter{Limit: db.MaxPage})
	require.NoError(t, err)
	require.Equal(t, want, names(all))
}

// The Tx forms run in the caller's transaction: their reads see what it
// wrote and has not committed, and a rollback undoes its creations and
// moves.
func TestTxFormsFollowTheCallersTransaction(t *testing.T) {
	t.Parallel()
	e, pc := setup(t)
	ctx := t.Context()
	rollback := errors.New("roll back")

	before := snapshot(t, e.Pool)
	err := db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		_, err := pc.CreateTx(ctx, tx, "acme")
		require.NoError(t, err)
		p, err := pc.GetTx(ctx, tx, "acme")
		require.NoError(t, err)
		require.Equal(t, projects.Active, p.Status)
		list, err := pc.ListTx(ctx, tx, projects.Filter{})
		require.NoError(t, err)
		require.Len(t, list, 1)
		history, err := pc.HistoryTx(ctx, tx, "acme")
		require.NoError(t, err)
		require.Len(t, history, 1)
		_, err = pc.Get(ctx, "acme")
		require.ErrorIs(t, err, db.ErrNotFound, "the pool does not see an uncommitted project")
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	require.Equal(t, before, snapshot(t, e.Pool), "the rollback left the name free")

	_, err = pc.Create(ctx, "acme")
	require.NoError(t, err)
	created := snapshot(t, e.Pool)
	err = db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		p, err := pc.SetStatusTx(ctx, tx, "acme", projects.Archived)
		require.NoError(t, err)
		require.Equal(t, projects.Archived, p.Status)
		p, err = pc.GetTx(ctx, tx, "acme")
		require.NoError(t, err)
		require.Equal(t, projects.Archived, p.Status)
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	require.Equal(t, created, snapshot(t, e.Pool), "the rollback left the project as it was")
}

// Creating the same project from many goroutines at once makes one project:
// one creator succeeds, the others are told it exists.
func TestConcurrentCreateMakesOne(t *testing.T) {
	t.Parallel()
	_, pc := setup(t)
	ctx := t.Context()
	for round := range 5 {
		name := "race" + string(rune('a'+round))
		const n = 8
		release := make(chan struct{})
		errs := make(chan error, n)
		for range n {
			go func() {
				<-release
				_, err := pc.Create(ctx, name)
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
		history, err := pc.History(ctx, name)
		require.NoError(t, err)
		require.Len(t, history, 1)
	}
}
