package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// noEnv is an environment without EnvURL.
func noEnv(string) string { return "" }

// unavailable is a Starter that cannot work on this machine.
func unavailable(name, hint string) Starter {
	return Starter{Name: name, Hint: hint, Start: func(context.Context) (*Server, error) {
		return nil, fmt.Errorf("%w: no %s here", ErrUnavailable, name)
	}}
}

// failing is a Starter whose start fails with msg, and which records that
// it was tried.
func failing(name, msg string, tried *bool) Starter {
	return Starter{Name: name, Hint: "mend " + name, Start: func(context.Context) (*Server, error) {
		*tried = true
		return nil, errors.New(msg)
	}}
}

func TestFindPrefersTheURL(t *testing.T) {
	t.Parallel()
	raw := os.Getenv(EnvURL)
	if raw == "" {
		t.Skip(EnvURL + " is not set")
	}
	tried := false
	srv, err := find(t.Context(), func(k string) string { return map[string]string{EnvURL: raw}[k] },
		[]Starter{failing("never", "tried", &tried)})
	require.NoError(t, err)
	require.NoError(t, srv.Close(context.Background()))
	require.False(t, tried, "a starter was tried although %s is set", EnvURL)
	require.True(t, strings.HasPrefix(srv.String(), "$"+EnvURL+" at postgres"), srv.String())
	require.Equal(t, raw, srv.AdminURL())
	require.Nil(t, srv.stopper, "Close stops no server found by URL")
}

func TestFindRejectsABadURLWithoutLeakingItsPassword(t *testing.T) {
	t.Parallel()
	_, err := find(t.Context(), func(k string) string {
		return map[string]string{EnvURL: "mysql://root:s3cret@localhost/db"}[k]
	}, nil)
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "$"+EnvURL+": database URL "), err.Error())
	require.NotContains(t, err.Error(), "s3cret")
}

func TestFindSaysWhatToSetOrInstall(t *testing.T) {
	t.Parallel()
	_, err := find(t.Context(), noEnv, []Starter{unavailable("a", "start A"), unavailable("b", "install B")})
	require.ErrorIs(t, err, ErrNotFound)
	require.EqualError(t, err, "no PostgreSQL found: set "+EnvURL+" to an admin URL, start A, or install B")

	_, err = find(t.Context(), noEnv, nil)
	require.EqualError(t, err, "no PostgreSQL found: set "+EnvURL+" to an admin URL")

	// Without binaries, Find's own last resort says to install them.
	if _, err := findLocalBinaries(); errors.Is(err, ErrNoLocalBinaries) {
		_, err := find(t.Context(), noEnv, []Starter{local})
		require.EqualError(t, err, "no PostgreSQL found: set "+EnvURL+" to an admin URL, or "+local.Hint)
	}
}

// A start that fails is reported, ways that are unavailable are left out,
// and the next way is still tried.
func TestFindReportsFailedStarts(t *testing.T) {
	t.Parallel()
	var first, second bool
	_, err := find(t.Context(), noEnv, []Starter{
		unavailable("a", "start A"), failing("broken", "boom", &first), failing("also", "bang", &second),
	})
	require.True(t, first && second)
	require.NotErrorIs(t, err, ErrNotFound)
	require.EqualError(t, err, "could not start PostgreSQL; broken: boom; also: bang")
}

// Find tries local binaries before any Starter it is given, as the design
// orders them: a private cluster, then a container.
func TestFindTriesLocalBinariesFirst(t *testing.T) {
	t.Parallel()
	var names []string
	for _, st := range ways([]Starter{unavailable("container", "start a Docker engine")}) {
		names = append(names, st.Name)
	}
	require.Equal(t, []string{"local", "container"}, names)
}

// With DOCKET_TEST_POSTGRES set, Find tries that way alone and fails
// rather than falling back to another.
func TestFindOnlyOneWay(t *testing.T) {
	t.Parallel()
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	var triedA bool
	fake := &Server{source: "fake"}
	works := Starter{Name: "b", Hint: "mend b", Start: func(context.Context) (*Server, error) { return fake, nil }}
	a := failing("a", "boom", &triedA)

	srv, err := find(t.Context(), env(map[string]string{EnvOnly: "b"}), []Starter{a, works})
	require.NoError(t, err)
	require.Same(t, fake, srv)
	require.False(t, triedA, "a way other than the one allowed was tried")

	_, err = find(t.Context(), env(map[string]string{EnvOnly: "b"}), []Starter{a, unavailable("b", "start B")})
	require.EqualError(t, err, EnvOnly+"=b: unavailable: no b here; start B")
	require.False(t, triedA)

	_, err = find(t.Context(), env(map[string]string{EnvOnly: "a"}), []Starter{a, works})
	require.EqualError(t, err, EnvOnly+"=a: boom")

	_, err = find(t.Context(), env(map[string]string{EnvOnly: "c"}), []Starter{a, works})
	require.EqualError(t, err, EnvOnly+"=c: not a way to a server here; want one of url, a, b")

	_, err = find(t.Context(), env(map[string]string{EnvOnly: "b", EnvURL: "postgres://u:s3cret@h/db"}), []Starter{works})
	require.EqualError(t, err, EnvOnly+"=b: "+EnvURL+" is set too: unset one of them")

	_, err = find(t.Context(), env(map[string]string{EnvOnly: "url"}), []Starter{works})
	require.EqualError(t, err, EnvOnly+"=url: "+EnvURL+" is not set")
}
