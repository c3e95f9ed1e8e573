package access_test

import (
	"testing"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast of every access test: operator created projects acme and globex
// and gives the grants; bo revokes them.
const operator, bo = testkit.Ana, testkit.Bo

var t0 = testkit.T0

// setup returns a fresh migrated database holding projects acme and globex,
// with its fake clock at t0, and a client acting as operator on it.
func setup(t testing.TB) (testkit.Env, *access.Client) {
	t.Helper()
	k := testkit.Setup(t, operator, []string{"acme", "globex"})
	ac, _ := testkit.Clients(t, k.Pool, k.Clock, operator)
	return k, ac
}

// snapshot renders every grant and grant event: a refusal must change
// neither.
func snapshot(t testing.TB, q db.DBTX) string {
	t.Helper()
	return testkit.Snapshot(t, q, "docket.grants", "docket.grant_events")
}
