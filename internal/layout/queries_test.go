package layout_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// queryRoot is the directory the generated queries live under, relative to
// module: one package per aggregate, internal/dbsqlc/<aggregate>.
const queryRoot = "internal/dbsqlc"

// queryImports says which query packages each of docket's packages may
// import, by the aggregate that names them (internal/dbsqlc/jobs is "jobs").
// A package may call only the queries of the packages it imports, so this
// list is what each package may write or read through sqlc; a package it
// does not name imports no query package at all (the query packages
// themselves among them).
//
// Each public package imports its own aggregate's queries, and nothing
// else: access the actors', grants' and bindings' queries, jobs those of
// jobs, their provenance and their telemetry, cases those of cases and their
// waits. Two packages read another aggregate's: the worker, which writes job
// delivery, lease and result facts through jobs and calls a job query of its
// own (which queues have a job due), and docketotel, which reads the job
// census. Neither may import the lanes' queries, so no worker file can
// decide a lane state or a merge, however it is written.
var queryImports = map[string][]string{
	"access":     {"access"},
	"batches":    {"batches"},
	"budgets":    {"budgets"},
	"cases":      {"cases"},
	"docketotel": {"jobs"},
	"jobs":       {"jobs"},
	"lanes":      {"lanes"},
	"plans":      {"plans"},
	"projects":   {"projects"},
	"retention":  {"retention"},
	"schedules":  {"schedules"},
	"tasks":      {"tasks"},
	"worker":     {"jobs"},
}

// queryCrossings returns, for the package in directory rel (relative to
// module) made of files (source by file name), each import of a query
// package that queryImports does not give rel, as "<rel>/<file> imports
// <path>", sorted. It returns an error for a file that does not parse.
func queryCrossings(rel string, files map[string]string) ([]string, error) {
	fset := token.NewFileSet()
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f, err := parser.ParseFile(fset, name, files[name], parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: import %s: %w", name, spec.Path.Value, err)
			}
			dep, ok := docketPath(p)
			if !ok || !within(dep, queryRoot) {
				continue
			}
			aggregate := strings.TrimPrefix(dep, queryRoot+"/")
			if dep == queryRoot || !slices.Contains(queryImports[rel], aggregate) {
				bad = append(bad, fmt.Sprintf("%s imports %s", path.Join(rel, name), p))
			}
		}
	}
	return bad, nil
}

// modulePackages returns the Go files of every directory of docket's module
// the go command builds, test files included, by directory relative to the
// module root: source by file name.
func modulePackages(t *testing.T) map[string]map[string]string {
	t.Helper()
	root := moduleRoot(t)
	pkgs := map[string]map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		base := path.Base(rel)
		if d.IsDir() {
			if rel != "." && (base == "testdata" || base == "vendor" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir := path.Dir(rel)
		if pkgs[dir] == nil {
			pkgs[dir] = map[string]string{}
		}
		pkgs[dir][base] = string(src)
		return nil
	})
	require.NoError(t, err, "read docket's packages")
	return pkgs
}

// TestQueryImports fails when a file of docket's module imports a query
// package that queryImports does not give its package: a worker file calling
// a lane query, say. It names each such file and import.
func TestQueryImports(t *testing.T) {
	t.Parallel()
	pkgs := modulePackages(t)
	require.Contains(t, pkgs, "worker", "the walk found docket's packages")
	for rel, aggregates := range queryImports {
		require.Contains(t, pkgs, rel, "queryImports names a package that exists")
		for _, a := range aggregates {
			require.Contains(t, pkgs, path.Join(queryRoot, a), "queryImports names a query package that exists")
		}
	}
	var bad []string
	for _, rel := range slices.Sorted(maps.Keys(pkgs)) {
		crossings, err := queryCrossings(rel, pkgs[rel])
		require.NoError(t, err, rel)
		bad = append(bad, crossings...)
	}
	require.Empty(t, bad, "these files import query packages their package may not call")
}

// TestQueryImportsRefuseALaneQueryInTheWorker copies a real worker file,
// worker/execute.go, adds to it a call to a lane query (the lane decision
// the worker never writes) and shows the check refuses the worker package
// with the copy in it, naming the file and the import; the real package
// passes.
func TestQueryImportsRefuseALaneQueryInTheWorker(t *testing.T) {
	t.Parallel()
	worker := modulePackages(t)["worker"]
	require.Contains(t, worker, "execute.go")
	ok, err := queryCrossings("worker", worker)
	require.NoError(t, err)
	require.Empty(t, ok, "the worker as it is")

	const lanesPath = module + "/" + queryRoot + "/lanes"
	for _, call := range []string{
		"lanesq.New().LaneSetState(ctx, w.pool, lanesq.LaneSetStateParams{})",
		`lanesq.New().LaneMerge(ctx, w.pool, id, "commit", string(w.cfg.Actor), w.cfg.Clock.Now())`,
	} {
		src := worker["execute.go"]
		require.Contains(t, src, "\nimport (\n")
		src = strings.Replace(src, "\nimport (\n", "\nimport (\n\tlanesq \""+lanesPath+"\"\n", 1)
		src += "\n// decideLane is what the worker must never do.\n" +
			"func (w *Client) decideLane(ctx context.Context, id int64) error {\n" +
			"\t_, err := " + call + "\n\treturn err\n}\n"
		_, err := parser.ParseFile(token.NewFileSet(), "execute.go", src, parser.SkipObjectResolution)
		require.NoError(t, err, "the copy is Go")

		copied := maps.Clone(worker)
		copied["execute.go"] = src
		bad, err := queryCrossings("worker", copied)
		require.NoError(t, err)
		require.Equal(t, []string{"worker/execute.go imports " + lanesPath}, bad, call)
	}
}

// TestQueryImportsCatchACrossing shows the query rule refuses a package
// importing another aggregate's queries, a package queryImports does not
// name importing any, a query package importing another, and the old
// package of all queries; and passes each package's own.
func TestQueryImportsCatchACrossing(t *testing.T) {
	t.Parallel()
	file := func(imports ...string) string {
		src := "package p\n\nimport (\n"
		for _, p := range imports {
			src += "\t_ " + strconv.Quote(module+"/"+p) + "\n"
		}
		return src + ")\n"
	}
	cases := []struct {
		rel   string
		files map[string]string
		want  []string
	}{
		{"jobs", map[string]string{"a.go": file("internal/dbsqlc/jobs", "db"), "b_test.go": file("internal/dbsqlc/cases")},
			[]string{"jobs/b_test.go imports " + module + "/internal/dbsqlc/cases"}},
		{"docketotel", map[string]string{"census.go": file("internal/dbsqlc/jobs")}, nil},
		{"docketotel", map[string]string{"census.go": file("internal/dbsqlc/retention")},
			[]string{"docketotel/census.go imports " + module + "/internal/dbsqlc/retention"}},
		{"cmd/docket", map[string]string{"main.go": file("internal/dbsqlc/jobs")},
			[]string{"cmd/docket/main.go imports " + module + "/internal/dbsqlc/jobs"}},
		{"internal/dbsqlc/jobs", map[string]string{"db.go": file("internal/dbsqlc/lanes")},
			[]string{"internal/dbsqlc/jobs/db.go imports " + module + "/internal/dbsqlc/lanes"}},
		{"lanes", map[string]string{"lane.go": file("internal/dbsqlc")},
			[]string{"lanes/lane.go imports " + module + "/internal/dbsqlc"}},
		{"lanes", map[string]string{"lane.go": file("internal/dbsqlc/lanes", "internal/paging")}, nil},
	}
	for _, c := range cases {
		bad, err := queryCrossings(c.rel, c.files)
		require.NoError(t, err)
		require.Equal(t, c.want, bad, c.rel)
	}
}
