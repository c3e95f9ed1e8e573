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
// [AppRole], [OperatorRole], [ReaderRole], [WorkerRole]), binds it, as the
// env's admin, to each of principals, and returns it with a pool logged in
// as it: a real login, not SET ROLE. The role is dropped when the test ends.
// The server's admin must be allowed to create roles.
func (e Env) Login(t testing.TB, group string, principals ...access.Actor) Login {
	t.Helper()
	return e.LoginIn(t, []string{group}, principals...)
}

// WorkerLogin is [Env.Login] for a service that runs a worker: a member of
// [AppRole] and [WorkerRole].
func (e Env) WorkerLogin(t testing.TB, principals ...access.Actor) Login {
	t.Helper()
	return e.LoginIn(t, []string{AppRole, WorkerRole}, principals...)
}

// LoginIn is [Env.Login] for a login that is a member of each of groups.
func (e Env) LoginIn(t testing.TB, groups []string, principals ...access.Actor) Login {
	t.Helper()
	ctx := context.Background()
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	l := Login{Role: "docket_t_" + hex.EncodeToString(b[:])}
	password := hex.EncodeToString(b[:]) + "-pw"
	in := make([]string, len(groups))
	for i, g := range groups {
		in[i] = pgx.Identifier{g}.Sanitize()
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
