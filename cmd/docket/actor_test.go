package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/testkit"
)

// TestActorBindings binds, lists and unbinds as a docket_operator member,
// and shows a docket_app member refused a binding and a wrong command line
// refused before connecting.
func TestActorBindings(t *testing.T) {
	t.Parallel()
	c := setup(t)
	operator := c.Login(t, testkit.OperatorRole, ana)
	app := c.Login(t, testkit.AppRole, testkit.App)
	as := func(l testkit.Login, args ...string) result {
		return docket(t, dbEnv(l.URL), append([]string{"--as", string(ana)}, args...)...)
	}

	r := as(operator, "actor", "bind", app.Role, "worker:*")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, app.Role+" may act as worker:*\n", r.stdout)
	r = as(operator, "actor", "bind", app.Role, "worker:*")
	require.Equal(t, app.Role+" was already bound to worker:*\n", r.stdout)

	r = as(operator, "actor", "list", app.Role)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, app.Role+`\s+svc:app\s+user:ana`, r.stdout)
	require.Regexp(t, app.Role+`\s+worker:\*\s+user:ana`, r.stdout)

	r = as(operator, "actor", "unbind", app.Role, "worker:*")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, app.Role+" no longer acts as worker:*\n", r.stdout)

	requireRefused(t, docket(t, dbEnv(app.URL), "--as", string(testkit.App), "actor", "bind", app.Role, "svc:root"),
		exitError, []string{"actor bind as docket_app"})
	requireRefused(t, as(operator, "actor", "bind", "docket_t_nobody", "svc:x"), exitError, []string{"actor bind of an unknown role"})
	requireRefused(t, as(operator, "actor", "bind", app.Role, "svc"), exitError, []string{"actor bind of a malformed principal"})

	requireUsageErrors(t, [][]string{
		{"actor"},
		{"actor", "bind", "role"},
		{"actor", "unbind", "role", "svc:x", "extra"},
		{"actor", "list", "a", "b"},
		{"actor", "grant", "role", "svc:x"},
	})
}
