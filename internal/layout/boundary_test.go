package layout_test

import (
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// module is docket's module path.
const module = "github.com/docket-dev/docket"

// listed is one package of a `go list -deps` answer.
type listed struct {
	ImportPath string
	Standard   bool
}

// boundary is one "never" of the design: package pkg depends, directly or
// through other packages, on no package forbidden reports.
type boundary struct {
	name      string // names a subtest, so no slash
	pkg       string // import path relative to module
	forbidden func(dep listed) bool
}

// boundaries are the import rules docket's layout keeps.
//
// The worker, jobs, db and internal/dbsqlc rules are allow-lists: each of
// those packages stands on a small, known base, and the coordination layer
// (lanes, cases, schedules, and tasks, plans, batches and what comes after)
// keeps growing, so only an allow-list also refuses the coordination
// packages not written yet. The cmd/docket rule is a deny list: the command
// links the whole library, and what it must leave out is the test helpers.
var boundaries = []boundary{
	{
		// The worker writes job delivery, lease and result facts only; lane
		// decisions, reviews, merges and case state belong to the
		// coordination layer.
		name:      "worker imports no coordination package",
		pkg:       "worker",
		forbidden: docketOutside(oneOf("access", "db", "jobs", "sql/schema", "sql/definitions", "worker", "internal/dbsqlc/access", "internal/dbsqlc/jobs"), machinery),
	},
	{
		// The job store sits below both the worker that runs its jobs and
		// the coordination layer that enqueues them.
		name:      "jobs imports no coordination package and not worker",
		pkg:       "jobs",
		forbidden: docketOutside(oneOf("access", "db", "jobs", "sql/schema", "sql/definitions", "internal/dbsqlc/access", "internal/dbsqlc/jobs"), machinery),
	},
	{
		// db is connections, transactions, errors and migrations; every
		// domain package stands on it. It embeds the schema it migrates to: the migrations and the definitions.
		name:      "db imports no domain package",
		pkg:       "db",
		forbidden: docketOutside(oneOf("db", "sql/schema", "sql/definitions")),
	},
	{
		// The generated queries stand on pgx alone; which package may
		// import which of them is queryImports' rule.
		name:      "dbsqlc imports nothing of docket's",
		pkg:       "internal/dbsqlc/...",
		forbidden: docketOutside(queries),
	},
	{
		name:      "the docket command links no test helpers",
		pkg:       "cmd/docket",
		forbidden: forTests,
	},
	{
		// The console is mounted in services: it ships no test helper.
		name:      "the console links no test helpers",
		pkg:       "console",
		forbidden: forTests,
	},
}

// machinery reports whether rel, a path relative to module, is one of
// docket's internal packages other than the test kit and the generated
// queries: a rule names the query packages it lets a package depend on.
func machinery(rel string) bool {
	return within(rel, "internal") && !within(rel, "internal/testkit") && !queries(rel)
}

// queries reports whether rel, a path relative to module, is a package of
// generated queries.
func queries(rel string) bool {
	return within(rel, queryRoot)
}

// forTests reports whether dep exists to write tests: the standard testing
// packages, testcontainers, docket's integration packages or its test kit.
func forTests(dep listed) bool {
	if dep.Standard {
		return within(dep.ImportPath, "testing")
	}
	if within(dep.ImportPath, "github.com/testcontainers") {
		return true
	}
	rel, ok := docketPath(dep.ImportPath)
	return ok && (within(rel, "integration") || within(rel, "internal/testkit"))
}

// oneOf returns a check that rel is one of rels.
func oneOf(rels ...string) func(rel string) bool {
	return func(rel string) bool { return slices.Contains(rels, rel) }
}

// docketOutside returns a forbidden func refusing every docket package that
// none of allowed accepts; packages of other modules and the standard
// library pass.
func docketOutside(allowed ...func(rel string) bool) func(dep listed) bool {
	return func(dep listed) bool {
		rel, ok := docketPath(dep.ImportPath)
		if !ok {
			return false
		}
		for _, allow := range allowed {
			if allow(rel) {
				return false
			}
		}
		return true
	}
}

// docketPath returns importPath relative to module, and whether it is one of
// docket's packages at all.
func docketPath(importPath string) (string, bool) {
	if importPath == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(importPath, module+"/")
	return rel, ok
}

// within reports whether path is root or a package below it.
func within(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}

// crossings returns the import paths among deps that b forbids.
func crossings(b boundary, deps []listed) []string {
	var bad []string
	for _, d := range deps {
		if b.forbidden(d) {
			bad = append(bad, d.ImportPath)
		}
	}
	return bad
}

// goListDeps returns the package at importPath and everything it depends on,
// directly or not, standard packages included.
func goListDeps(t *testing.T, importPath string) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard", importPath).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		require.NoError(t, err, "go list %s: %s", importPath, exit.Stderr)
	}
	require.NoError(t, err, "go list %s", importPath)
	var deps []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		require.NoError(t, dec.Decode(&p))
		deps = append(deps, p)
	}
	return deps
}

// TestImportBoundaries fails when a package depends, directly or through
// other packages, on a package one of boundaries forbids it.
func TestImportBoundaries(t *testing.T) {
	t.Parallel()
	deps := map[string][]listed{}
	for _, b := range boundaries {
		if _, done := deps[b.pkg]; !done {
			deps[b.pkg] = goListDeps(t, module+"/"+b.pkg)
		}
	}
	for _, b := range boundaries {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			pkg, pattern := strings.CutSuffix(b.pkg, "/...")
			seen := slices.ContainsFunc(deps[b.pkg], func(d listed) bool {
				rel, ok := docketPath(d.ImportPath)
				return ok && (rel == pkg || pattern && within(rel, pkg))
			})
			require.True(t, seen, "go list saw %s", b.pkg)
			require.Empty(t, crossings(b, deps[b.pkg]), "%s must not depend on these packages", b.pkg)
		})
	}
}

// TestImportBoundaryCatchesACrossing shows each rule of boundaries fails for
// a package that crosses it, directly or through a package between, and
// passes what the package may depend on.
func TestImportBoundaryCatchesACrossing(t *testing.T) {
	t.Parallel()
	std := func(path string) listed { return listed{ImportPath: path, Standard: true} }
	mod := func(path string) listed { return listed{ImportPath: path} }
	docket := func(rel string) listed { return mod(module + "/" + rel) }
	cases := []struct {
		rule string
		deps []listed
		want []string
	}{
		{
			rule: "worker imports no coordination package",
			deps: []listed{
				std("context"), mod("github.com/riverqueue/river"), docket("jobs"), docket("internal/dbsqlc/jobs"),
				docket("internal/paging"), docket("lanes"), docket("internal/dbsqlc/lanes"), docket("cases/calendar"),
				docket("internal/testkit"), docket("worker"),
			},
			want: []string{module + "/lanes", module + "/internal/dbsqlc/lanes", module + "/cases/calendar", module + "/internal/testkit"},
		},
		{
			rule: "jobs imports no coordination package and not worker",
			deps: []listed{
				std("fmt"), docket("access"), docket("internal/dbsqlc/access"), docket("db"), docket("schedules"),
				docket("internal/dbsqlc/schedules"), docket("worker"), docket("jobs"),
			},
			want: []string{module + "/schedules", module + "/internal/dbsqlc/schedules", module + "/worker"},
		},
		{
			rule: "db imports no domain package",
			deps: []listed{
				mod("github.com/jackc/pgx/v5"), docket("sql/schema"), docket("access"), docket("internal/dbsqlc/access"), docket("db"),
			},
			want: []string{module + "/access", module + "/internal/dbsqlc/access"},
		},
		{
			rule: "dbsqlc imports nothing of docket's",
			deps: []listed{mod("github.com/jackc/pgx/v5"), docket("db"), docket("internal/dbsqlc/jobs"), docket("internal/dbsqlc/lanes")},
			want: []string{module + "/db"},
		},
		{
			rule: "the docket command links no test helpers",
			deps: []listed{
				std("os"), std("internal/testlog"), std("testing"), docket("jobs"),
				mod("github.com/testcontainers/testcontainers-go"), docket("integration/pgtest"),
				docket("internal/testkit"), docket("cmd/docket"),
			},
			want: []string{
				"testing", "github.com/testcontainers/testcontainers-go",
				module + "/integration/pgtest", module + "/internal/testkit",
			},
		},
		{
			rule: "the console links no test helpers",
			deps: []listed{std("net/http"), std("testing"), docket("jobs"), docket("internal/testkit"), docket("console")},
			want: []string{"testing", module + "/internal/testkit"},
		},
	}
	var covered []string
	for _, c := range cases {
		i := slices.IndexFunc(boundaries, func(b boundary) bool { return b.name == c.rule })
		require.GreaterOrEqual(t, i, 0, "no boundary named %q", c.rule)
		require.Equal(t, c.want, crossings(boundaries[i], c.deps), c.rule)
		covered = append(covered, c.rule)
	}
	for _, b := range boundaries {
		require.Contains(t, covered, b.name, "every boundary has a crossing case")
	}
}
