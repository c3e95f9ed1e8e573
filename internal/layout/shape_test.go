package layout_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The import paths of the packages declaring the connection types.
const (
	pgxPath = "github.com/jackc/pgx/v5"
	dbPath  = module + "/db"
)

// The rules of the API shape, as named in a violation.
const (
	// (a) A connection argument is the client's pool, given to the
	// constructor, or the caller's transaction as a pgx.Tx: never a db.DBTX
	// or a *pgx.Conn.
	ruleConnArg = "no DBTX or Conn argument"
	// (b) What takes a pgx.Tx says so in its name.
	ruleTxName = "pgx.Tx taker named …Tx"
	// (c) An XTx has its pool form X beside it, on the same receiver, which
	// takes no pgx.Tx; or XTx's doc says why it "has no pool form".
	rulePoolForm = "pool form beside …Tx"
	// (d) Only constructors (New…) and poolTakers take a pool.
	rulePoolTaker = "pool taken by constructors only"
	// (e) An interface method taking a pgx.Tx is named …Tx.
	ruleInterfaceTx = "interface pgx.Tx method named …Tx"
	// (f) An XTx's doc says what commit and rollback mean for it: it names
	// a commit or a rollback.
	ruleTxDoc = "…Tx doc says what commit and rollback mean"
)

// noPoolForm is the phrase with which an XTx's doc comment says why it has
// no pool form X.
const noPoolForm = "has no pool form"

// poolTakers are the exported functions, other than constructors, that may
// take a pool, each with why.
var poolTakers = map[string]string{
	"db.WithTx":                  "runs fn in a transaction it begins on b: a pool, a connection, or a pgx.Tx for a savepoint",
	"db.Migrate":                 "migrates the database the pool reaches, before any client runs on it",
	"db.MigrateDownTo":           "rolls back the database the pool reaches, as Migrate migrates it",
	"db.MigrationStatus":         "reads the schema versions on the pool it is given, before any client runs on it",
	"integration/pgtest.Explain": "a test helper, taking testing.TB: explains a query on the test's pool",
	"examples/orders.Setup":      "creates the example service's own table on the database the pool reaches, as db.Migrate does docket's",
}

// typeRef names a parameter's type: the import path of the package that
// declares it and its name. Pointers are looked through; other type
// expressions (func, map, slice, …) leave it empty.
type typeRef struct {
	path, name string
}

// tx reports whether r is pgx.Tx.
func (r typeRef) tx() bool { return r == typeRef{pgxPath, "Tx"} }

// connection reports whether r is db.DBTX or pgx.Conn: a connection argument
// that is neither the client's pool nor the caller's transaction.
func (r typeRef) connection() bool {
	return r == typeRef{dbPath, "DBTX"} || r == typeRef{pgxPath, "Conn"}
}

// pool reports whether r is pool-like: db.Beginner or any type named Pool
// (db.Pool, *pgxpool.Pool, a package's own Pool).
func (r typeRef) pool() bool {
	return r == typeRef{dbPath, "Beginner"} || r.path != "" && r.name == "Pool"
}

// param is one parameter of an API function.
type param struct {
	name string  // "_" when unnamed
	typ  string  // the type as written, e.g. "db.DBTX"
	ref  typeRef // the type resolved through the file's imports
}

// apiFunc is an exported function, an exported method of an exported type, or
// an exported method of an exported interface.
type apiFunc struct {
	pkg    string // package directory relative to the module root
	recv   string // receiver or interface type name; "" for a function
	name   string
	iface  bool // declared in an interface type
	doc    string
	pos    token.Position
	params []param
}

// qualified names f as pkg.Func, pkg.Type.Method or pkg.Interface.Method.
func (f apiFunc) qualified() string {
	if f.recv == "" {
		return f.pkg + "." + f.name
	}
	return f.pkg + "." + f.recv + "." + f.name
}

// takesTx reports whether a parameter of f is a pgx.Tx.
func (f apiFunc) takesTx() bool {
	return slices.ContainsFunc(f.params, func(p param) bool { return p.ref.tx() })
}

// violation is one breach of the API shape.
type violation struct {
	pos  token.Position
	fn   string // qualified name of the function in breach
	rule string
	text string
}

func (v violation) String() string {
	return fmt.Sprintf("%s: %s: %s: %s", v.pos, v.fn, v.rule, v.text)
}

// shape is what checkShape finds.
type shape struct {
	violations  []violation
	connections []string // every API function's connection parameters
	pools       []string // every API function taking a pool, with why it may
}

// checkShape checks the API functions of pkgs, files by package directory
// relative to the module root, against the shape rules.
func checkShape(fset *token.FileSet, pkgs map[string][]*ast.File) shape {
	var s shape
	for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
		fns := apiFuncs(fset, pkg, pkgs[pkg])
		for _, f := range fns {
			s.violations = append(s.violations, checkFunc(f, fns)...)
			for _, p := range f.params {
				if p.ref.tx() || p.ref.connection() || p.ref.pool() {
					s.connections = append(s.connections, fmt.Sprintf("%s takes %s %s (%s)", f.qualified(), p.name, p.typ, f.pos))
				}
			}
			if p, ok := poolParam(f); ok {
				why, _ := mayTakePool(f)
				s.pools = append(s.pools, fmt.Sprintf("%s takes %s %s: %s", f.qualified(), p.name, p.typ, why))
			}
		}
	}
	return s
}

// checkFunc returns f's breaches of the shape; pkg is every API function of
// f's package, where f's pool form is looked for.
func checkFunc(f apiFunc, pkg []apiFunc) []violation {
	var vs []violation
	flag := func(rule, format string, args ...any) {
		vs = append(vs, violation{pos: f.pos, fn: f.qualified(), rule: rule, text: fmt.Sprintf(format, args...)})
	}
	named := strings.HasSuffix(f.name, "Tx")
	if f.iface {
		if f.takesTx() && !named {
			flag(ruleInterfaceTx, "takes a pgx.Tx, so its name ends in Tx")
		}
		return vs
	}
	for _, p := range f.params {
		if p.ref.connection() {
			flag(ruleConnArg, "takes %s %s: take the client's pool in the constructor, or the caller's transaction as pgx.Tx", p.name, p.typ)
		}
	}
	switch {
	case f.takesTx() && !named:
		flag(ruleTxName, "takes a pgx.Tx, so its name ends in Tx")
	case f.takesTx():
		vs = append(vs, checkPoolForm(f, pkg)...)
		if doc := strings.ToLower(f.doc); !strings.Contains(doc, "commit") && !strings.Contains(doc, "roll") {
			flag(ruleTxDoc, "its doc does not say what commit and rollback of tx mean for it")
		}
	}
	if p, ok := poolParam(f); ok {
		if why, ok := mayTakePool(f); !ok {
			flag(rulePoolTaker, "takes %s %s: %s", p.name, p.typ, why)
		}
	}
	return vs
}

// checkPoolForm checks that txForm, an XTx taking a pgx.Tx, has its pool form
// X on the same receiver among pkg, and that X takes no pgx.Tx; or that
// txForm's doc says why it has none.
func checkPoolForm(txForm apiFunc, pkg []apiFunc) []violation {
	base := strings.TrimSuffix(txForm.name, "Tx")
	i := slices.IndexFunc(pkg, func(g apiFunc) bool { return !g.iface && g.recv == txForm.recv && g.name == base })
	if i < 0 {
		if strings.Contains(txForm.doc, noPoolForm) {
			return nil
		}
		return []violation{{
			pos: txForm.pos, fn: txForm.qualified(), rule: rulePoolForm,
			text: fmt.Sprintf("no pool form %s beside it: add one, or say in the doc comment why it %s", base, noPoolForm),
		}}
	}
	if pool := pkg[i]; pool.takesTx() {
		return []violation{{
			pos: pool.pos, fn: pool.qualified(), rule: rulePoolForm,
			text: fmt.Sprintf("is the pool form of %s but takes a pgx.Tx: it runs on the client's pool", txForm.name),
		}}
	}
	return nil
}

// poolParam returns f's first pool-like parameter, if any.
func poolParam(f apiFunc) (param, bool) {
	i := slices.IndexFunc(f.params, func(p param) bool { return p.ref.pool() })
	if i < 0 || f.iface {
		return param{}, false
	}
	return f.params[i], true
}

// mayTakePool says why f may take a pool, or why not.
func mayTakePool(f apiFunc) (string, bool) {
	if strings.HasPrefix(f.name, "New") {
		return "a constructor", true
	}
	if why, ok := poolTakers[f.qualified()]; ok {
		return why, true
	}
	return "only constructors (New…) and poolTakers take a pool; take a pgx.Tx, or run on the client's pool", false
}

// apiFuncs returns the API functions declared in files, the files of the
// package in directory pkg, in the order declared.
func apiFuncs(fset *token.FileSet, pkg string, files []*ast.File) []apiFunc {
	pkgPath := module + "/" + pkg
	var fns []apiFunc
	for _, file := range files {
		imports := importNames(file)
		ref := func(expr ast.Expr) typeRef { return resolve(expr, pkgPath, imports) }
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if f, ok := funcDecl(fset, pkg, d, ref); ok {
					fns = append(fns, f)
				}
			case *ast.GenDecl:
				fns = append(fns, interfaceMethods(fset, pkg, d, ref)...)
			}
		}
	}
	return fns
}

// funcDecl returns d as an API function, unless d is unexported or a method
// of an unexported type.
func funcDecl(fset *token.FileSet, pkg string, d *ast.FuncDecl, ref func(ast.Expr) typeRef) (apiFunc, bool) {
	f := apiFunc{pkg: pkg, name: d.Name.Name, doc: oneLine(d.Doc.Text()), pos: fset.Position(d.Name.Pos())}
	if d.Recv != nil {
		f.recv = receiverName(d.Recv)
		if !ast.IsExported(f.recv) {
			return apiFunc{}, false
		}
	}
	if !ast.IsExported(f.name) {
		return apiFunc{}, false
	}
	f.params = params(d.Type, ref)
	return f, true
}

// interfaceMethods returns the exported methods of the exported interface
// types d declares.
func interfaceMethods(fset *token.FileSet, pkg string, d *ast.GenDecl, ref func(ast.Expr) typeRef) []apiFunc {
	var fns []apiFunc
	for _, spec := range d.Specs {
		ts, ok := spec.(*ast.TypeSpec)
		if !ok || !ts.Name.IsExported() {
			continue
		}
		it, ok := ts.Type.(*ast.InterfaceType)
		if !ok {
			continue
		}
		for _, m := range it.Methods.List {
			ft, ok := m.Type.(*ast.FuncType)
			if !ok {
				continue // an embedded interface
			}
			for _, name := range m.Names {
				if name.IsExported() {
					fns = append(fns, apiFunc{
						pkg: pkg, recv: ts.Name.Name, name: name.Name, iface: true,
						doc: oneLine(m.Doc.Text()), pos: fset.Position(name.Pos()), params: params(ft, ref),
					})
				}
			}
		}
	}
	return fns
}

// receiverName returns the name of the type of a method's receiver,
// through pointers and type parameters.
func receiverName(recv *ast.FieldList) string {
	t := recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	switch g := t.(type) {
	case *ast.IndexExpr:
		t = g.X
	case *ast.IndexListExpr:
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// params returns ft's parameters.
func params(ft *ast.FuncType, ref func(ast.Expr) typeRef) []param {
	var ps []param
	for _, field := range ft.Params.List {
		p := param{name: "_", typ: types.ExprString(field.Type), ref: ref(field.Type)}
		if len(field.Names) == 0 {
			ps = append(ps, p)
		}
		for _, name := range field.Names {
			p.name = name.Name
			ps = append(ps, p)
		}
	}
	return ps
}

// resolve names the type expr denotes in a file of the package at pkgPath
// whose imports are imports: a bare identifier is the package's own type, a
// selector is resolved through the imports.
func resolve(expr ast.Expr, pkgPath string, imports map[string]string) typeRef {
	if star, ok := expr.(*ast.StarExpr); ok {
		expr = star.X
	}
	switch e := expr.(type) {
	case *ast.Ident:
		return typeRef{pkgPath, e.Name}
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && imports[x.Name] != "" {
			return typeRef{imports[x.Name], e.Sel.Name}
		}
	}
	return typeRef{}
}

// majorVersion matches the last element of a module path of major version 2
// or higher, as in github.com/jackc/pgx/v5.
var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// importNames maps the names by which file refers to its imports to their
// import paths. An import without a name is taken to be named by its path's
// last element, or the one before a major version: Go's convention, which
// the packages the rules name keep.
func importNames(file *ast.File) map[string]string {
	names := map[string]string{}
	for _, spec := range file.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		elems := strings.Split(p, "/")
		name := elems[len(elems)-1]
		if len(elems) > 1 && majorVersion.MatchString(name) {
			name = elems[len(elems)-2]
		}
		if spec.Name != nil {
			name = spec.Name.Name
		}
		names[name] = p
	}
	return names
}

// moduleRoot returns the directory of docket's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err, "go env GOMOD")
	gomod := strings.TrimSpace(string(out))
	require.NotEmpty(t, gomod, "go env GOMOD: not in a module")
	return filepath.Dir(gomod)
}

// public reports whether the directory rel, relative to the module root, can
// hold public API: neither cmd nor internal, testdata, vendor, or a
// directory the go command ignores.
func public(rel string) bool {
	base := path.Base(rel)
	switch {
	case rel == ".":
		return true
	case rel == "cmd", base == "internal", base == "testdata", base == "vendor":
		return false
	case strings.HasPrefix(base, "."), strings.HasPrefix(base, "_"):
		return false
	}
	return true
}

// publicPackages parses the non-test files of docket's public packages, by
// directory relative to the module root. A main package has no API, so its
// files are left out.
func publicPackages(t *testing.T, fset *token.FileSet) map[string][]*ast.File {
	t.Helper()
	root := moduleRoot(t)
	pkgs := map[string][]*ast.File{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if !public(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, rel, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name != "main" {
			pkgs[path.Dir(rel)] = append(pkgs[path.Dir(rel)], f)
		}
		return nil
	})
	require.NoError(t, err, "parse docket's public packages")
	return pkgs
}

// TestAPIShape fails when an exported function or method of a public docket
// package breaks the API shape: a connection argument other than the
// client's pool (at construction) or the caller's pgx.Tx; a pgx.Tx taker
// not named …Tx; an XTx without its pool form X, where its doc does not say
// why; a pool taken outside constructors and poolTakers; an interface
// method taking a pgx.Tx not named …Tx. It logs every exported function
// taking a connection and every one taking a pool.
func TestAPIShape(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	pkgs := publicPackages(t, fset)
	require.Contains(t, pkgs, "jobs", "the walk found docket's packages")
	s := checkShape(fset, pkgs)
	t.Logf("exported functions and methods taking a connection (%d):\n%s", len(s.connections), strings.Join(s.connections, "\n"))
	t.Logf("exported functions and methods taking a pool (%d):\n%s", len(s.pools), strings.Join(s.pools, "\n"))
	if len(s.violations) > 0 {
		lines := make([]string, len(s.violations))
		for i, v := range s.violations {
			lines[i] = v.String()
		}
		t.Errorf("%d breaches of the API shape:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// parseSources parses sources, Go source by file name, into packages by
// directory, as publicPackages does for the module.
func parseSources(t *testing.T, fset *token.FileSet, sources map[string]string) map[string][]*ast.File {
	t.Helper()
	pkgs := map[string][]*ast.File{}
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		f, err := parser.ParseFile(fset, name, sources[name], parser.ParseComments|parser.SkipObjectResolution)
		require.NoError(t, err, name)
		pkgs[path.Dir(name)] = append(pkgs[path.Dir(name)], f)
	}
	return pkgs
}

// badShape holds one breach of each shape rule, and one through an import
// under another name.
const badShape = `package fake

import (
	"context"

	pg "github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/db"
)

type Client struct{}

func (c *Client) Get(ctx context.Context, q db.DBTX, id int64) error { return nil }

func Load(ctx context.Context, conn *pg.Conn) error { return nil }

func (c *Client) Enqueue(ctx context.Context, tx pg.Tx) error { return nil }

// CloseTx closes on tx.
func (c *Client) CloseTx(ctx context.Context, tx pg.Tx) error { return nil }

func (c *Client) Renew(ctx context.Context, tx pg.Tx) error { return nil }

func (c *Client) RenewTx(ctx context.Context, tx pg.Tx) error { return nil }

func Attach(pool *pgxpool.Pool) error { return nil }

func (c *Client) Use(p db.Pool) {}

type Dispatcher interface {
	Dispatch(ctx context.Context, tx pg.Tx) error
}
`

// badDB takes a DBTX as package db spells it.
const badDB = `package db

import "context"

type DBTX interface{}

func Exec(ctx context.Context, q DBTX) error { return nil }
`

// TestShapeCatchesEachViolation shows checkShape reports a breach of each
// shape rule, at the function in breach.
func TestShapeCatchesEachViolation(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	s := checkShape(fset, parseSources(t, fset, map[string]string{"fake/fake.go": badShape, "db/db.go": badDB}))
	var got []string
	for _, v := range s.violations {
		got = append(got, v.fn+": "+v.rule)
	}
	require.ElementsMatch(t, []string{
		"fake.Client.Get: " + ruleConnArg,
		"fake.Load: " + ruleConnArg,
		"db.Exec: " + ruleConnArg,
		"fake.Client.Enqueue: " + ruleTxName,
		"fake.Client.Renew: " + ruleTxName,
		"fake.Client.CloseTx: " + rulePoolForm,
		"fake.Client.CloseTx: " + ruleTxDoc,
		"fake.Client.RenewTx: " + ruleTxDoc,
		"fake.Client.Renew: " + rulePoolForm,
		"fake.Attach: " + rulePoolTaker,
		"fake.Client.Use: " + rulePoolTaker,
		"fake.Dispatcher.Dispatch: " + ruleInterfaceTx,
	}, got)
	require.Equal(t, "db/db.go:7:6: db.Exec: "+ruleConnArg+": takes q DBTX: take the client's pool in the constructor, or the caller's transaction as pgx.Tx",
		s.violations[0].String(), "a violation names file, line and function")
}

// goodShape keeps every shape rule: a pool taken by constructors, X beside
// XTx, an XTx that says why it has no pool form, a pgx.Tx only inside a
// callback's type, and connections only in unexported declarations.
const goodShape = `package fake

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/db"
)

type Pool interface {
	db.DBTX
	db.Beginner
}

type Client struct{}

func NewClient(pool Pool) (*Client, error) { return nil, nil }

func NewFromPool(pool *pgxpool.Pool) *Client { return nil }

// Enqueue runs EnqueueTx in a transaction of its own.
func (c *Client) Enqueue(ctx context.Context, spec string) error { return nil }

// EnqueueTx enqueues spec in tx: it commits with tx, or rolls back with it.
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, spec string) error { return nil }

// DispatchTx dispatches on tx the jobs js, once tx commits. DispatchTx has
// no pool form: the jobs it dispatches were enqueued in tx.
func (c *Client) DispatchTx(ctx context.Context, tx pgx.Tx, js ...int64) error { return nil }

// Complete settles a job and runs writes in the same transaction.
func (c *Client) Complete(ctx context.Context, writes func(tx pgx.Tx) error) error { return nil }

type Dispatcher interface {
	DispatchTx(ctx context.Context, tx pgx.Tx, js ...int64) error
}

type client struct{}

func (c *client) Get(ctx context.Context, q db.DBTX) error { return nil }

func get(ctx context.Context, q db.DBTX) error { return nil }
`

// goodDB takes a Beginner where poolTakers allows it.
const goodDB = `package db

import (
	"context"

	"github.com/jackc/pgx/v5"
)

type Beginner interface{}

func WithTx(ctx context.Context, b Beginner, fn func(tx pgx.Tx) error) error { return nil }
`

// TestShapeAcceptsSyntheticGoodCase shows checkShape finds nothing wrong in
// code that keeps the shape, and lists its connections and pools.
func TestShapeAcceptsSyntheticGoodCase(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	s := checkShape(fset, parseSources(t, fset, map[string]string{"fake/fake.go": goodShape, "db/db.go": goodDB}))
	require.Empty(t, s.violations)
	connections := strings.Join(s.connections, "\n")
	for _, want := range []string{
		"fake.NewClient takes pool Pool",
		"fake.NewFromPool takes pool *pgxpool.Pool",
		"fake.Client.EnqueueTx takes tx pgx.Tx",
		"fake.Client.DispatchTx takes tx pgx.Tx",
		"fake.Dispatcher.DispatchTx takes tx pgx.Tx",
		"db.WithTx takes b Beginner",
	} {
		require.Contains(t, connections, want)
	}
	require.NotContains(t, connections, "Complete", "a pgx.Tx inside a callback's type is no connection argument")
	require.NotContains(t, connections, "DBTX", "unexported declarations are no API")
	require.Equal(t, []string{
		"db.WithTx takes b Beginner: " + poolTakers["db.WithTx"],
		"fake.NewClient takes pool Pool: a constructor",
		"fake.NewFromPool takes pool *pgxpool.Pool: a constructor",
	}, s.pools)
}

// oneLine is a doc comment's text with its line breaks and runs of spaces
// folded, so a phrase matches wherever the comment wraps.
func oneLine(doc string) string { return strings.Join(strings.Fields(doc), " ") }
