package access_test

import (
	"context"
	"errors"
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
	"github.com/docket-dev/docket/internal/testkit"
)

func TestExplicitGrantSatisfiesOnlyItsTriple(t *testing.T) {
	t.Parallel()
	e, ac := setup(t)
	ctx := t.Context()
	g := access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobCreate}

	held, err := ac.Allowed(ctx, g)
	require.NoError(t, err)
	require.False(t, held, "nothing is allowed before a grant")

	added, err := ac.Allow(ctx, g)
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
		held, err := ac.Allowed(ctx, tc.g)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, held, tc.name)
	}

	// Granting again is a quiet no-op.
	before := snapshot(t, e.Pool)
	e.Clock.Advance(time.Minute)
	added, err = ac.Allow(ctx, g)
	require.NoError(t, err)
	require.False(t, added)
	require.Equal(t, before, snapshot(t, e.Pool))

	list, err := ac.List(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, []access.Record{{Grant: g, GrantedBy: operator, GrantedAt: t0}}, list)
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	e, ac := setup(t)
	ctx := t.Context()
	revoker, _ := testkit.Clients(t, e.Pool, e.Clock, bo)
	g := access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobClaim}
	_, err := ac.Allow(ctx, g)
	require.NoError(t, err)

	e.Clock.Advance(time.Hour)
	removed, err := revoker.Revoke(ctx, g)
	require.NoError(t, err)
	require.True(t, removed)
	held, err := ac.Allowed(ctx, g)
	require.NoError(t, err)
	require.False(t, held)

	e.Clock.Advance(time.Hour)
	removed, err = revoker.Revoke(ctx, g)
	require.NoError(t, err)
	require.False(t, removed, "revoking what is not held removes nothing")

	// Both changes are on record, with who and when.
	rows, err := e.Pool.Query(ctx, `SELECT action, actor, at FROM docket.grant_events ORDER BY id`)
	require.NoError(t, err)
	type ev struct {
		action, actor string
		at            time.Time
	}
	var got []ev
	for rows.Next() {
		var r ev
		require.NoError(t, rows.Scan(&r.action, &r.actor, &r.at))
		r.at = r.at.UTC()
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []ev{
		{"granted", "user:ana", t0},
		{"revoked", "user:bo", t0.Add(time.Hour)},
	}, got)
}

func TestBadGrantsAreRefusedAndWriteNothing(t *testing.T) {
	t.Parallel()
	e, ac := setup(t)
	ctx := t.Context()

	cases := []struct {
		name string
		g    access.Grant
		want error
	}{
		{"empty principal", access.Grant{Principal: "", Project: "acme", Capability: access.JobCreate}, db.ErrInvalidArgument},
		{"principal without kind", access.Grant{Principal: "billing", Project: "acme", Capability: access.JobCreate}, db.ErrInvalidArgument},
		{"principal with space", access.Grant{Principal: "svc:bil ling", Project: "acme", Capability: access.JobCreate}, db.ErrInvalidArgument},
		{"principal too long", access.Grant{Principal: access.Actor("svc:" + strings.Repeat("a", 201)), Project: "acme", Capability: access.JobCreate}, db.ErrInvalidArgument},
		{"principal with NUL", access.Grant{Principal: "svc:a\x00b", Project: "acme", Capability: access.JobCreate}, db.ErrInvalidArgument},
		{"project uppercase", access.Grant{Principal: "svc:billing", Project: "ACME", Capability: access.JobCreate}, db.ErrInvalidArgument},
		{"project empty", access.Grant{Principal: "svc:billing", Project: "", Capability: access.JobCreate}, db.ErrInvalidArgument},
		{"project wildcard", access.Grant{Principal: "svc:billing", Project: "*", Capability: access.JobCreate}, db.ErrInvalidArgument},
		{"project too long", access.Grant{Principal: "svc:billing", Project: strings.Repeat("a", 64), Capability: access.JobCreate}, db.ErrInvalidArgument},
		{"project unknown", access.Grant{Principal: "svc:billing", Project: "initech", Capability: access.JobCreate}, db.ErrNotFound},
		{"capability wildcard", access.Grant{Principal: "svc:billing", Project: "acme", Capability: "job.*"}, db.ErrInvalidArgument},
		{"capability bare", access.Grant{Principal: "svc:billing", Project: "acme", Capability: "job"}, db.ErrInvalidArgument},
		{"capability unknown", access.Grant{Principal: "svc:billing", Project: "acme", Capability: "job.craete"}, db.ErrInvalidArgument},
		{"capability too long", access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.Capability("job." + strings.Repeat("a", 61))}, db.ErrInvalidArgument},
	}
	for _, tc := range cases {
		before := snapshot(t, e.Pool)
		_, err := ac.Allow(ctx, tc.g)
		require.ErrorIs(t, err, tc.want, "allow: %s", tc.name)
		_, err = ac.Revoke(ctx, tc.g)
		require.ErrorIs(t, err, tc.want, "revoke: %s", tc.name)
		require.Equal(t, before, snapshot(t, e.Pool), "%s wrote something", tc.name)
		if tc.g.Principal == "svc:a\x00b" {
			continue
		}
		held, err := ac.Allowed(ctx, tc.g)
		require.NoError(t, err, tc.name)
		require.False(t, held, tc.name)
	}
}

// NewClient refuses a nil pool and a malformed actor up front. The database
// holds a caller that goes around the client to the same rule: a grant given
// or revoked by a malformed actor is refused and writes nothing.
func TestNewClientRefusesNilPoolAndMalformedActor(t *testing.T) {
	t.Parallel()
	e, _ := setup(t)
	ctx := t.Context()

	for _, tc := range []struct {
		name  string
		pool  db.Pool
		actor access.Actor
		op    string
	}{
		{"nil pool", nil, operator, "access.new_client"},
		{"nil *pgxpool.Pool", (*pgxpool.Pool)(nil), operator, "access.new_client"},
		{"malformed actor", e.Pool, "ana", "actor.validate"},
		{"empty actor", e.Pool, "", "actor.validate"},
	} {
		c, err := access.NewClient(tc.pool, access.Config{Actor: tc.actor, Clock: e.Clock})
		require.ErrorIs(t, err, db.ErrInvalidArgument, tc.name)
		require.ErrorContains(t, err, tc.op, tc.name)
		require.Nil(t, c, tc.name)
	}

	valid := access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobCreate}
	for _, by := range []access.Actor{"ana", ""} {
		before := snapshot(t, e.Pool)
		for _, fn := range []string{"docket.grant_add", "docket.grant_revoke"} {
			_, err := e.Pool.Exec(ctx, `SELECT `+fn+`($1::text, $2::text, $3::text, $4::text, $5::timestamptz)`,
				string(valid.Principal), valid.Project, string(valid.Capability), string(by), e.Clock.Now())
			require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument, "%s by %q", fn, by)
		}
		require.Equal(t, before, snapshot(t, e.Pool), "a grant by %q wrote something", by)
	}
}

// A hand-written INSERT or DELETE in psql is held to the same rules, and is
// recorded like any other change.
func TestGrantsByHandAreValidatedAndRecorded(t *testing.T) {
	t.Parallel()
	e, ac := setup(t)
	ctx := t.Context()
	byHand := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	const insert = `INSERT INTO docket.grants (principal, project, capability, granted_by, granted_at)
		VALUES ('svc:x', 'acme', 'job.create', 'user:ops', '2026-11-02T10:00:00Z')`

	_, err := e.Pool.Exec(ctx, `INSERT INTO docket.grants (principal, project, capability, granted_by, granted_at)
		VALUES ('svc:x', 'acme', 'job.create', 'user:ana', '2026-11-02T09:00:00Z')`)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument, "no change context: refused")

	_, err = e.Pool.Exec(ctx, `INSERT INTO docket.grants (principal, project, capability, granted_by, granted_at)
		VALUES ('svc x', 'acme', 'job.create', 'user:ana', '2026-11-02T09:00:00Z')`)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument, "CHECK refuses a malformed principal")

	// Grants are never edited: the refused UPDATE aborts its transaction,
	// the INSERT before it with it.
	before := snapshot(t, e.Pool)
	err = testkit.Raw(ctx, e.Pool, "user:ops", byHand,
		insert+`; UPDATE docket.grants SET capability = 'job.claim' WHERE principal = 'svc:x'`)
	require.ErrorIs(t, err, db.ErrImmutable, "grants are never edited")
	require.Equal(t, before, snapshot(t, e.Pool), "the refused UPDATE aborted the transaction")

	require.NoError(t, testkit.Raw(ctx, e.Pool, "user:ops", byHand, insert))
	held, err := ac.Allowed(ctx, access.Grant{Principal: "svc:x", Project: "acme", Capability: access.JobCreate})
	require.NoError(t, err)
	require.True(t, held)
	var actor string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT actor FROM docket.grant_events WHERE principal = 'svc:x' AND action = 'granted'`).Scan(&actor))
	require.Equal(t, "user:ops", actor)

	_, err = e.Pool.Exec(ctx, `UPDATE docket.grant_events SET actor = 'user:mallory'`)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrImmutable, "events are append-only")
	_, err = e.Pool.Exec(ctx, `DELETE FROM docket.grant_events`)
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
	e, ac := setup(t)
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
				ok, err := ac.Allow(ctx, g)
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
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.grant_events WHERE principal = $1`, string(g.Principal)).Scan(&events))
		require.Equal(t, 1, events)
	}
}

func TestCapabilitiesListsTheKnownOnes(t *testing.T) {
	t.Parallel()
	_, ac := setup(t)
	caps, err := ac.Capabilities(t.Context())
	require.NoError(t, err)
	for _, c := range []access.Capability{access.JobCreate, access.JobClaim, access.JobCancel, access.JobReconcile, access.LaneView, access.CaseAdmit, access.TaskReview} {
		require.Contains(t, caps, c)
	}
}

// The Tx forms run in the caller's transaction: their reads see its
// uncommitted grants, and a rollback undoes what it gave and revoked.
func TestTxFormsFollowTheCallersTransaction(t *testing.T) {
	t.Parallel()
	e, ac := setup(t)
	ctx := t.Context()
	g := access.Grant{Principal: "svc:billing", Project: "acme", Capability: access.JobCreate}
	rollback := errors.New("roll back")

	before := snapshot(t, e.Pool)
	err := db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		added, err := ac.AllowTx(ctx, tx, g)
		require.NoError(t, err)
		require.True(t, added)
		held, err := ac.AllowedTx(ctx, tx, g)
		require.NoError(t, err)
		require.True(t, held, "the transaction sees its own grant")
		list, err := ac.ListTx(ctx, tx, "acme")
		require.NoError(t, err)
		require.Equal(t, []access.Record{{Grant: g, GrantedBy: operator, GrantedAt: t0}}, list)
		held, err = ac.Allowed(ctx, g)
		require.NoError(t, err)
		require.False(t, held, "the pool does not see an uncommitted grant")
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	require.Equal(t, before, snapshot(t, e.Pool), "the rollback left the grant ungiven")

	_, err = ac.Allow(ctx, g)
	require.NoError(t, err)
	given := snapshot(t, e.Pool)
	err = db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		removed, err := ac.RevokeTx(ctx, tx, g)
		require.NoError(t, err)
		require.True(t, removed)
		held, err := ac.AllowedTx(ctx, tx, g)
		require.NoError(t, err)
		require.False(t, held)
		caps, err := ac.CapabilitiesTx(ctx, tx)
		require.NoError(t, err)
		require.Contains(t, caps, access.JobCreate)
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	require.Equal(t, given, snapshot(t, e.Pool), "the rollback kept the grant")
	held, err := ac.Allowed(ctx, g)
	require.NoError(t, err)
	require.True(t, held)
}

// Held answers in one read what Allowed answers grant by grant: the
// capabilities a principal holds explicitly on each project named, or on
// every project. A login bound to a principal of one project reads only
// what its login may read of the grants, as Allowed does.
func TestHeldIsAllowedInOneRead(t *testing.T) {
	t.Parallel()
	e, ac := setup(t)
	ctx := t.Context()
	billing, shipping := access.Actor("svc:billing"), access.Actor("svc:shipping")
	for _, g := range []access.Grant{
		{Principal: billing, Project: "acme", Capability: access.JobCreate},
		{Principal: billing, Project: "acme", Capability: access.JobClaim},
		{Principal: billing, Project: "globex", Capability: access.JobView},
		{Principal: shipping, Project: "globex", Capability: access.JobCreate},
	} {
		_, err := ac.Allow(ctx, g)
		require.NoError(t, err)
	}
	all, err := ac.Held(ctx, billing)
	require.NoError(t, err)
	require.Equal(t, map[string][]access.Capability{
		"acme":   {access.JobClaim, access.JobCreate},
		"globex": {access.JobView},
	}, all)
	for p, caps := range all {
		for _, c := range caps {
			held, err := ac.Allowed(ctx, access.Grant{Principal: billing, Project: p, Capability: c})
			require.NoError(t, err)
			require.True(t, held, "%s %s", p, c)
		}
	}
	some, err := ac.Held(ctx, billing, "acme", "nope")
	require.NoError(t, err)
	require.Equal(t, map[string][]access.Capability{"acme": {access.JobClaim, access.JobCreate}}, some)
	for _, p := range []access.Actor{"svc billing", "svc:nobody", ""} {
		none, err := ac.Held(ctx, p)
		require.NoError(t, err, p)
		require.Empty(t, none, p)
	}

	// shipping's own login, in globex only, sees its own grants and none
	// of billing's.
	login := e.Login(t, testkit.AppRole, shipping)
	own, err := access.NewClient(login.Pool, access.Config{Actor: shipping, Clock: e.Clock})
	require.NoError(t, err)
	mine, err := own.Held(ctx, shipping)
	require.NoError(t, err)
	require.Equal(t, map[string][]access.Capability{"globex": {access.JobCreate}}, mine)
	theirs, err := own.Held(ctx, billing, "acme")
	require.NoError(t, err)
	for _, c := range theirs["acme"] {
		held, err := own.Allowed(ctx, access.Grant{Principal: billing, Project: "acme", Capability: c})
		require.NoError(t, err)
		require.True(t, held, "Held shows no more than Allowed answers")
	}
	require.Empty(t, theirs, "another project's grants are not the login's to read")
}
