package cells_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cells"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast: ana administers every cell; app works in every project.
const ana, app = testkit.Ana, testkit.App

// appGrants are what app holds on each project it works in.
var appGrants = []access.Capability{access.JobCreate, access.JobClaim, access.JobCancel, access.CaseAdmit, access.PlanRun}

// twoCells is two cells, each a database of its own on the test server:
// cell a with project acme, cell b with globex and initech, app granted its
// work in each.
type twoCells struct {
	a, b testkit.Env
}

func setupTwo(t testing.TB) twoCells {
	t.Helper()
	return twoCells{
		a: testkit.Setup(t, ana, []string{"acme"}, testkit.Grants(app, "acme", appGrants...)...),
		b: testkit.Setup(t, ana, []string{"globex", "initech"},
			testkit.Join(testkit.Grants(app, "globex", appGrants...), testkit.Grants(app, "initech", appGrants...))...),
	}
}

// config maps acme to cell a and globex and initech to cell b, on the
// cells' API logins.
func (c twoCells) config() cells.Config {
	return cells.Config{
		Cells:    map[string]cells.Cell{"a": {Pool: c.a.API}, "b": {Pool: c.b.API}},
		Projects: map[string]string{"acme": "a", "globex": "b", "initech": "b"},
	}
}

func (c twoCells) newMap(t testing.TB) *cells.Map {
	t.Helper()
	m, err := cells.New(t.Context(), c.config())
	require.NoError(t, err)
	return m
}

// grantsOn is app's grants on project.
func grantsOn(project string) []access.Grant { return testkit.Grants(app, project, appGrants...) }
