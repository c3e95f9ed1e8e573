package dockettest_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The module in integration/usermodule (example.com/shop) uses docket from
// outside as its users do, through dockettest and pgtest with its own
// migrations: its tests pass, run by the go command in a copy of it whose
// docket is this checkout. Its go.mod replaces docket with ../..; the copy
// points the replacement here, and -mod=mod lets the go command complete
// its go.sum when docket's requirements have changed since it was written.
// The copy keeps the checkout clean. DOCKET_TEST_DATABASE_URL is passed on.
func TestUserModuleOutsideTheRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a module of its own: not with -short")
	}
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := copyTree(filepath.Join(root, "integration", "usermodule"), dir); err != nil {
		t.Fatalf("copy the user module: %v", err)
	}
	goflags := strings.TrimSpace(os.Getenv("GOFLAGS") + " -mod=mod")
	run := func(timeout time.Duration, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS="+goflags)
		cmd.WaitDelay = timeout
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in the user module: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("go %s:\n%s", strings.Join(args, " "), out)
	}
	run(time.Minute, "mod", "edit", "-replace", "github.com/docket-dev/docket="+root)
	run(10*time.Minute, "test", "-count=1", "./...")
}

// copyTree copies the regular files under src to dst, keeping their paths.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
