package testkit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/projects"
)

// Clients returns an access client and a projects client on pool and clock,
// both acting as actor.
func Clients(t testing.TB, pool db.Pool, clock db.Clock, actor access.Actor) (*access.Client, *projects.Client) {
	t.Helper()
	ac, err := access.NewClient(pool, access.Config{Actor: actor, Clock: clock})
	require.NoError(t, err)
	pc, err := projects.NewClient(pool, projects.Config{Actor: actor, Clock: clock})
	require.NoError(t, err)
	return ac, pc
}
