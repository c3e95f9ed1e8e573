package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
)

// The group roles docket's migration creates, for [Env.Login].
const (
	AppRole      = "docket_app"
	OperatorRole = "docket_operator"
	ReaderRole   = "docket_reader"
	// ClockRole's members may give docket any instant: a login outside it
	// is held to the database's clock, give or take the clock_skew setting
	// (DK016). Every [Env.Login] is a member, for the fake clock tests
	// run on; [Env.LoginWithoutClock] makes one that is not.
	ClockRole = "docket_clock"
	// WorkerRole holds what River's client needs of River's tables: a login
	// that runs a worker is a member of it beside [AppRole].
	WorkerRole = "docket_worker"
)

// Login is a database login role of a test's own: a member of one of
// docket's group roles, bound to some principals, and a pool logged in as
// it, as a service or an operator would be.
type Login struct {
	Role string
	Pool *pgxpool.Pool
	URL  string // logs in as Role, for a program under test
}

// Login creates a login role for the test, a member of group (one of
// [AppRole], [OperatorRole], [ReaderRole], [WorkerRole]) and of
// [ClockRole], binds it, as the env's admin, to each of principals, and
// returns it with a pool logged in as it: a real login, not SET ROLE. The
// role is dropped when the test ends. The server's admin must be allowed to
// create roles.
//
// Being in [ClockRole] lets the login give docket the instants of the env's
// fake clock. A production login is not a member: see
// [Env.LoginWithoutClock].
func (e Env) Login(t testing.TB, group string, principals ...access.Actor) Login {
	t.Helper()
	return e.login(t, true, []string{group}, principals)
}

// LoginWithoutClock is [Env.Login] for a login outside [ClockRole], as a
// production service's is: docket refuses its instants further from the
// database's clock than the clock_skew setting allows (DK016), so it must
// act at the database's time (time.Now), not at the env's fake clock.
func (e Env) LoginWithoutClock(t testing.TB, group string, principals ...access.Actor) Login {
	t.Helper()
	return e.login(t, false, []string{group}, principals)
}

// WorkerLogin is [Env.Login] for a service that runs a worker: a member of
// [AppRole] and [WorkerRole] (and [ClockRole]).
func (e Env) WorkerLogin(t testing.TB, principals ...access.Actor) Login {
	t.Helper()
	return e.login(t, true, []string{AppRole, WorkerRole}, principals)
}

// LoginIn is [Env.Login] for a login that is a member of each of groups
// (and of [ClockRole]).
func (e Env) LoginIn(t testing.TB, groups []string, principals ...access.Actor) Login {
	t.Helper()
	return e.login(t, true, groups, principals)
}

func (e Env) login(t testing.TB, clock bool, groups []string, principals []access.Actor) Login {
	t.Helper()
	ctx := context.Background()
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	l := Login{Role: "docket_t_" + hex.EncodeToString(b[:])}
	password := hex.EncodeToString(b[:]) + "-pw"
	in := make([]string, 0, len(groups)+1)
	for _, g := range groups {
		in = append(in, pgx.Identifier{g}.Sanitize())
	}
	if clock {
		in = append(in, pgx.Identifier{ClockRole}.Sanitize())
	}
	_, err = e.Pool.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE %s",
		pgx.Identifier{l.Role}.Sanitize(), password, strings.Join(in, ", ")))
	require.NoError(t, err, "create login role %s in %s", l.Role, groups)
	t.Cleanup(func() {
		_, err := e.Pool.Exec(context.Background(), "DROP ROLE "+pgx.Identifier{l.Role}.Sanitize())
		require.NoError(t, err, "drop login role %s", l.Role)
	})
	ac, err := access.NewClient(e.Pool, access.Config{Actor: e.Admin, Clock: e.Clock})
	require.NoError(t, err)
	for _, p := range principals {
		_, err := ac.Bind(ctx, l.Role, p)
		require.NoError(t, err, "bind %s to %s", l.Role, p)
	}
	u, err := url.Parse(e.Pool.Config().ConnString())
	require.NoError(t, err, "the env's URL")
	u.User = url.UserPassword(l.Role, password)
	l.URL = u.String()
	cfg := e.Pool.Config().Copy()
	cfg.ConnConfig.User, cfg.ConnConfig.Password = l.Role, password
	l.Pool, err = db.OpenConfig(ctx, cfg)
	require.NoError(t, err, "log in as %s", l.Role)
	t.Cleanup(l.Pool.Close)
	return l
}
