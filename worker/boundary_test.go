package worker_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// module is docket's module path.
const module = "github.com/docket-dev/docket"

// workerMayImport lists the docket packages the worker may depend on: the job
// store and what it stands on. The worker writes job delivery, lease and
// result facts only; lane decisions, reviews, merges and case state belong to
// the coordination layer (lanes, cases, and what comes after), which the
// worker must never import, directly or through another package.
var workerMayImport = []string{
	module + "/access",
	module + "/db",
	module + "/internal/dbsqlc",
	module + "/jobs",
	module + "/sql/schema",
	module + "/worker",
}

// TestImportBoundary fails when package worker depends, directly or not, on a
// docket package outside workerMayImport.
func TestImportBoundary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath", module+"/worker").Output()
	require.NoError(t, err, "go list")
	var deps []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath string }
		require.NoError(t, dec.Decode(&p))
		deps = append(deps, p.ImportPath)
	}
	require.Contains(t, deps, module+"/jobs", "go list saw the worker's dependencies")
	require.Empty(t, crossings(deps), "worker must not depend on these docket packages")
}

// TestImportBoundaryCatchesACrossing shows the check fails for a worker that
// reaches the coordination layer, directly or through a package between.
func TestImportBoundaryCatchesACrossing(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{module + "/lanes"}, crossings([]string{"context", module + "/jobs", module + "/lanes"}))
	require.Equal(t, []string{module + "/cases", module + "/schedules"},
		crossings([]string{module + "/cases", module + "/db", module + "/schedules"}))
	require.Empty(t, crossings([]string{"fmt", "github.com/riverqueue/river", module + "/jobs"}))
}

// crossings returns the docket packages among deps the worker may not import.
func crossings(deps []string) []string {
	var bad []string
	for _, d := range deps {
		if (d == module || strings.HasPrefix(d, module+"/")) && !slices.Contains(workerMayImport, d) {
			bad = append(bad, d)
		}
	}
	return bad
}
