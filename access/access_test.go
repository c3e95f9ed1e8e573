package access_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
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

const operator access.Actor = "user:ana"

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

// setup returns a migrated database holding projects acme and globex.
func setup(t *testing.T) (*pgxpool.Pool, *db.FakeClock) {
	t.Helper()
	pool := pgtest.NewDB(t)
	clock := db.NewFakeClock(t0)
	for _, name := range []string{"acme", "globex"} {
		_, err := projects.Create(t.Context(), pool, name, operator, clock.Now())
		require.NoError(t, err)
	}
	return pool, clock
}

// grantRows counts grants and grant events: a refusal must change neither.
func grantRows(t *testing.T, q db.DBTX) [2]int {
	t.Helper()
	var n [2]int
	require.NoError(t, q.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM docket.grants), (SELECT count(*) FROM docket.grant_events)`).Scan(&n[0], &n[1]))
	return n
}

func TestExplicitGrantSatisfiesOnlyItsTriple(t *testing.T) {
	t.Parallel()
	q, clock := setup(t)
	ctx := t.Context()
	g := access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobCreate}

	held, err := access.Allowed(ctx, q, g)
	require.NoError(t, err)
	require.False(t, held, "nothing is allowed before a grant")

	added, err := access.Allow(ctx, q, g, operator, clock.Now())
	require.NoError(t, err)
	require.True(t, added)

	for _, tc := range []struct {
		name string
		g    access.Grant
		want bool
	}{
		{"the grant itself", g, true},
		{"other project", access.Grant{Principal: g.Principal, Project: "globex", Capability: g.Capability}, false},
		{"other capability", access.Grant{Principal: g.Principal, Project: g.Project, Capability: access.JobClaim}, false},
		{"other principal", access.Grant{Principal: "svc:shipping", Project: g.Project, Capability: g.Capability}, false},
		{"unknown project", access.Grant{Principal: g.Principal, Project: "nope", Capability: g.Capability}, false},
		{"malformed principal", access.Grant{Principal: "svc billing", Project: g.Project, Capability: g.Capability}, false},
		{"wildcard capability", access.Grant{Principal: g.Principal, Project: g.Project, Capability: "job.*"}, false},
		{"wildcard project", access.Grant{Principal: g.Principal, Project: "*", Capability: g.Capability}, false},
	} {
		held, err := access.Allowed(ctx, q, tc.g)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, held, tc.name)
	}

	// Granting again is a quiet no-op.
	before := grantRows(t, q)
	added, err = access.Allow(ctx, q, g, operator, clock.Advance(time.Minute))
	require.NoError(t, err)
	require.False(t, added)
	require.Equal(t, before, grantRows(t, q))

	list, err := access.List(ctx, q, "acme")
	require.NoError(t, err)
	require.Equal(t, []access.Record{{Grant: g, GrantedBy: operator, GrantedAt: t0}}, list)
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	q, clock := setup(t)
	ctx := t.Context()
	g := access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobClaim}
	_, err := access.Allow(ctx, q, g, operator, clock.Now())
	require.NoError(t, err)

	removed, err := access.Revoke(ctx, q, g, "user:bo", clock.Advance(time.Hour))
	require.NoError(t, err)
	require.True(t, removed)
	held, err := access.Allowed(ctx, q, g)
	require.NoError(t, err)
	require.False(t, held)

	removed, err = access.Revoke(ctx, q, g, "user:bo", clock.Advance(time.Hour))
	require.NoError(t, err)
	require.False(t, removed, "revoking what is not held removes nothing")

	// Both changes are on record, with who and when.
	rows, err := q.Query(ctx, `SELECT action, actor, at FROM docket.grant_events ORDER BY id`)
	require.NoError(t, err)
	type ev struct {
		action, actor string
		at            time.Time
	}
	var got []ev
	for rows.Next() {
		var e ev
		require.NoError(t, rows.Scan(&e.action, &e.actor, &e.at))
		e.at = e.at.UTC()
		got = append(got, e)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []ev{
		{"granted", "user:ana", t0},
		{"revoked", "user:bo", t0.Add(time.Hour)},
	}, got)
}

func TestBadGrantsAreRefusedAndWriteNothing(t *testing.T) {
	t.Parallel()
	q, clock := setup(t)
	ctx := t.Context()
	valid := access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobCreate}

	cases := []struct {
		name string
		g    access.Grant
		by   access.Actor
		want error
	}{
		{"empty principal", access.Grant{Principal: "", Project: "acme", Capability: access.JobCreate}, operator, db.ErrInvalidArgument},
		{"principal without kind", access.Grant{Principal: "billing", Project: "acme", Capability: access.JobCreate}, operator, db.ErrInvalidArgument},
		{"principal with space", access.Grant{Principal: "svc:bil ling", Project: "acme", Capability: access.JobCreate}, operator, db.ErrInvalidArgument},
		{"principal too long", access.Grant{Principal: access.Actor("svc:" + strings.Repeat("a", 201)), Project: "acme", Capability: access.JobCreate}, operator, db.ErrInvalidArgument},
		{"principal with NUL", access.Grant{Principal: "svc:a\x00b", Project: "acme", Capability: access.JobCreate}, operator, db.ErrInvalidArgument},
		{"project uppercase", access.Grant{Principal: "svc:billing", Project: "ACME", Capability: access.JobCreate}, operator, db.ErrInvalidArgument},
		{"project empty", access.Grant{Principal: "svc:billing", Project: "", Capability: access.JobCreate}, operator, db.ErrInvalidArgument},
		{"project wildcard", access.Grant{Principal: "svc:billing", Project: "*", Capability: access.JobCreate}, operator, db.ErrInvalidArgument},
		{"project too long", access.Grant{Principal: "svc:billing", Project: strings.Repeat("a", 64), Capability: access.JobCreate}, operator, db.ErrInvalidArgument},
		{"project unknown", access.Grant{Principal: "svc:billing", Project: "initech", Capability: access.JobCreate}, operator, db.ErrNotFound},
		{"capability wildcard", access.Grant{Principal: "svc:billing", Project: "acme", Capability: "job.*"}, operator, db.ErrInvalidArgument},
		{"capability bare", access.Grant{Principal: "svc:billing", Project: "acme", Capability: "job"}, operator, db.ErrInvalidArgument},
		{"capability unknown", access.Grant{Principal: "svc:billing", Project: "acme", Capability: "job.craete"}, operator, db.ErrInvalidArgument},
		{"capability too long", access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.Capability("job." + strings.Repeat("a", 61))}, operator, db.ErrInvalidArgument},
		{"malformed actor", valid, "ana", db.ErrInvalidArgument},
		{"empty actor", valid, "", db.ErrInvalidArgument},
	}
	for _, tc := range cases {
		before := grantRows(t, q)
		_, err := access.Allow(ctx, q, tc.g, tc.by, clock.Now())
		require.ErrorIs(t, err, tc.want, "allow: %s", tc.name)
		_, err = access.Revoke(ctx, q, tc.g, tc.by, clock.Now())
		require.ErrorIs(t, err, tc.want, "revoke: %s", tc.name)
		require.Equal(t, before, grantRows(t, q), "%s wrote something", tc.name)
		if tc.g.Principal == "svc:a\x00b" {
			continue
		}
		held, err := access.Allowed(ctx, q, tc.g)
		require.NoError(t, err, tc.name)
		require.False(t, held, tc.name)
	}
}

// A hand-written INSERT or DELETE in psql is held to the same rules, and is
// recorded like any other change.
func TestGrantsByHandAreValidatedAndRecorded(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	ctx := t.Context()

	_, err := q.Exec(ctx, `INSERT INTO docket.grants (principal, project, capability, granted_by, granted_at)
		VALUES ('svc:x', 'acme', 'job.create', 'user:ana', '2026-11-02T09:00:00Z')`)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument, "no change context: refused")

	_, err = q.Exec(ctx, `INSERT INTO docket.grants (principal, project, capability, granted_by, granted_at)
		VALUES ('svc x', 'acme', 'job.create', 'user:ana', '2026-11-02T09:00:00Z')`)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument, "CHECK refuses a malformed principal")

	err = db.WithTx(ctx, q, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT docket.set_context('user:ops', '2026-11-02T10:00:00Z')`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO docket.grants (principal, project, capability, granted_by, granted_at)
			VALUES ('svc:x', 'acme', 'job.create', 'user:ops', '2026-11-02T10:00:00Z')`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE docket.grants SET capability = 'job.claim' WHERE principal = 'svc:x'`)
		require.ErrorIs(t, db.Translate(err, "raw"), db.ErrImmutable, "grants are never edited")
		return nil
	})
	require.Error(t, err, "the refused UPDATE aborted the transaction")

	require.NoError(t, db.WithTx(ctx, q, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT docket.set_context('user:ops', '2026-11-02T10:00:00Z')`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO docket.grants (principal, project, capability, granted_by, granted_at)
			VALUES ('svc:x', 'acme', 'job.create', 'user:ops', '2026-11-02T10:00:00Z')`)
		return err
	}))
	held, err := access.Allowed(ctx, q, access.Grant{Principal: "svc:x", Project: "acme", Capability: access.JobCreate})
	require.NoError(t, err)
	require.True(t, held)
	var actor string
	require.NoError(t, q.QueryRow(ctx, `SELECT actor FROM docket.grant_events WHERE principal = 'svc:x' AND action = 'granted'`).Scan(&actor))
	require.Equal(t, "user:ops", actor)

	_, err = q.Exec(ctx, `UPDATE docket.grant_events SET actor = 'user:mallory'`)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrImmutable, "events are append-only")
	_, err = q.Exec(ctx, `DELETE FROM docket.grant_events`)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrImmutable, "events are append-only")
}

// Go's early checks and the database's CHECKs agree on what a name is. The
// seeds run with every go test; go test -fuzz explores further.
func FuzzActorRuleMatchesDatabase(f *testing.F) {
	for _, a := range []string{"svc:billing", "user:ana", "worker:host-7/pid-12", "a:b", "svc:", ":x", "Svc:x",
		"svc:-x", "user:ana@example.com", "svc:a b", "x:" + strings.Repeat("a", 200), "x:" + strings.Repeat("a", 201),
		strings.Repeat("k", 32) + ":a", strings.Repeat("k", 33) + ":a", "svc:a\nb", "svc:a\n", "svc:é"} {
		f.Add(a)
	}
	pool := pgtest.NewDB(f)
	f.Fuzz(func(t *testing.T, a string) {
		var sqlOK bool
		err := pool.QueryRow(context.Background(), `SELECT docket.valid_principal($1)`, a).Scan(&sqlOK)
		if err != nil {
			// Not text Postgres can hold (invalid UTF-8, NUL): the database
			// refuses it whatever Go says; Go must not accept it either.
			require.ErrorIs(t, db.Translate(err, "fuzz"), db.ErrInvalidArgument)
			sqlOK = false
		}
		require.Equal(t, sqlOK, access.Actor(a).Validate() == nil, "actor %q", a)
	})
}

func FuzzCapabilityRuleMatchesDatabase(f *testing.F) {
	for _, c := range []string{"job.create", "job", "job.*", "a.b.c.d", "a.b.c.d.e", "Job.create", "job.create_x", "job._x",
		"j." + strings.Repeat("a", 62), "j." + strings.Repeat("a", 63), "job..create", "job.create\n"} {
		f.Add(c)
	}
	pool := pgtest.NewDB(f)
	f.Fuzz(func(t *testing.T, c string) {
		var sqlOK bool
		err := pool.QueryRow(context.Background(), `SELECT docket.valid_capability($1)`, c).Scan(&sqlOK)
		if err != nil {
			require.ErrorIs(t, db.Translate(err, "fuzz"), db.ErrInvalidArgument)
			sqlOK = false
		}
		require.Equal(t, sqlOK, access.Capability(c).Validate() == nil, "capability %q", c)
	})
}

// Many callers granting the same thing at once: one grant, one event, and
// exactly one caller told it was new.
func TestConcurrentAllowGrantsOnce(t *testing.T) {
	t.Parallel()
	q, clock := setup(t)
	ctx := t.Context()
	for round := range 5 {
		g := access.Grant{Principal: access.Actor(fmt.Sprintf("svc:racer-%d", round)), Project: "acme", Capability: access.JobClaim}
		const callers = 8
		release := make(chan struct{})
		results := make(chan error, callers)
		var added atomic.Int32
		for range callers {
			go func() {
				<-release
				ok, err := access.Allow(ctx, q, g, operator, clock.Now())
				if ok {
					added.Add(1)
				}
				results <- err
			}()
		}
		close(release)
		for range callers {
			require.NoError(t, <-results)
		}
		require.Equal(t, int32(1), added.Load())
		var events int
		require.NoError(t, q.QueryRow(ctx, `SELECT count(*) FROM docket.grant_events WHERE principal = $1`, string(g.Principal)).Scan(&events))
		require.Equal(t, 1, events)
	}
}

func TestCapabilitiesListsTheKnownOnes(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	caps, err := access.Capabilities(t.Context(), q)
	require.NoError(t, err)
	for _, c := range []access.Capability{access.JobCreate, access.JobClaim, access.JobCancel, access.JobReconcile, access.LaneView, access.CaseAdmit, access.TaskReview} {
		require.Contains(t, caps, c)
	}
}
