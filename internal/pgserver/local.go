//go:build unix

package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// localDirPrefix starts the name of each temporary directory holding a
	// local server's data directory and socket. It still says pgtest, where
	// this code began, so that directories left by older runs are tidied up.
	localDirPrefix = "docket-pgtest-"
	// ownerFile, inside that directory, holds the pid of the process that
	// made it, so later runs can remove directories of dead processes.
	ownerFile = "owner.pid"
	// readyTimeout bounds waiting for a started postgres to accept connections.
	readyTimeout = time.Minute
	// readyPoll is the interval between connection attempts while waiting.
	readyPoll = 25 * time.Millisecond
	// stopTimeout is how long a fast shutdown may take before SIGKILL.
	stopTimeout = 10 * time.Second
	// bindAttempts is how often to retry when the chosen port was taken.
	bindAttempts = 3
)

// ErrNoLocalBinaries says that initdb and postgres were not found. It wraps
// ErrUnavailable.
var ErrNoLocalBinaries = fmt.Errorf("%w: no PostgreSQL server binaries (initdb, postgres) found", ErrUnavailable)

// localPostgres is a postgres child process of this process, on a
// throw-away data directory.
type localPostgres struct {
	url    string // admin URL of the postgres database, trust auth, no password
	binDir string // directory initdb and postgres came from
	dir    string // temporary directory with data/ and the unix socket

	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	waitErr error         // cmd.Wait's result, set before exited is closed
	log     *tailBuffer   // the end of postgres's output, for errors

	stopOnce sync.Once
	stopErr  error
}

// startLocal starts a new PostgreSQL server from local binaries: initdb a
// temporary data directory, run postgres on a free port of 127.0.0.1 as a
// child process that the kernel kills when this process dies (on Linux), and
// wait until it accepts connections. When running as root it runs them as
// the "postgres" system user. It returns ErrNoLocalBinaries (wrapped) when no
// binaries exist, or an error with the tail of the server's output if the
// server does not come up. The caller must call stop.
func startLocal(ctx context.Context, cfg LocalConfig) (*localPostgres, error) {
	binDir, err := findLocalBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := childCredential()
	if err != nil {
		return nil, err
	}
	base := localBase(cred != nil)
	removeStaleDirs(base)
	if disk := diskBase(cred != nil); disk != base {
		removeStaleDirs(disk)
	}

	dir, err := newLocalDir(base, cred)
	if err != nil {
		return nil, err
	}
	l := &localPostgres{binDir: binDir, dir: dir}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}()

	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"),
		"-D", data, "-U", "postgres", "--auth=trust", "--no-sync",
		"--encoding=UTF8", "--locale=C")
	initdb.Dir = dir
	initdb.Env = childEnv()
	initdb.SysProcAttr = childProcAttr(cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("local postgres: %s: %w\n%s", initdb.Path, err, lastLines(out, 20))
	}

	for attempt := 1; ; attempt++ {
		err := l.run(ctx, data, cred, cfg)
		if err == nil {
			break
		}
		if attempt < bindAttempts && l.portTaken() {
			continue
		}
		return nil, err
	}
	ok = true
	return l, nil
}

// newLocalDir makes a server's temporary directory under base, marked as
// this process's (ownerFile, for removeStaleDirs) and, when the server runs
// as another user (cred), owned by it.
func newLocalDir(base string, cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp(base, localDirPrefix)
	if err != nil {
		return "", fmt.Errorf("local postgres: %w", err)
	}
	err = os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644)
	if err == nil && cred != nil {
		err = os.Chown(dir, int(cred.Uid), int(cred.Gid))
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("local postgres: %w", err)
	}
	return dir, nil
}

// run starts postgres on a free port and waits until it accepts
// connections. On failure the process is gone and the error holds the tail
// of its output.
func (l *localPostgres) run(ctx context.Context, data string, cred *syscall.Credential, cfg LocalConfig) error {
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("local postgres: %w", err)
	}
	l.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	l.log = &tailBuffer{max: 64 << 10}
	cmd := exec.Command(filepath.Join(l.binDir, "postgres"),
		"-D", data,
		"-p", strconv.Itoa(port),
		"-k", l.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections="+strconv.Itoa(cfg.MaxConnections),
		// Dynamic shared memory in the data directory, not /dev/shm: a
		// postgres killed with this process leaves nothing behind that
		// removing its directory does not remove.
		"-c", "dynamic_shared_memory_type=mmap")
	for _, kv := range cfg.Settings {
		cmd.Args = append(cmd.Args, "-c", kv)
	}
	cmd.Dir = l.dir
	cmd.Env = childEnv()
	cmd.SysProcAttr = childProcAttr(cred)
	if err := l.spawn(ctx, cmd); err != nil {
		return fmt.Errorf("local postgres: %w", err)
	}
	return nil
}

// spawn starts cmd as the server, its output going to l.log, and waits until
// it accepts connections. On failure the process is gone and the error holds
// the tail of its output.
func (l *localPostgres) spawn(ctx context.Context, cmd *exec.Cmd) error {
	cmd.Stdout, cmd.Stderr = l.log, l.log
	exited := make(chan struct{})
	started := make(chan error)
	go func() {
		// Pdeathsig fires when the thread that started the child exits, not
		// the process. Go may end a thread whose goroutine exits while locked
		// to it, so pin this goroutine to its thread until the child is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		l.waitErr = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return err
	}
	l.cmd, l.exited = cmd, exited
	if err := l.waitReady(ctx); err != nil {
		l.kill()
		return fmt.Errorf("%w\n%s", err, lastLines(l.log.Bytes(), 20))
	}
	return nil
}

// waitReady polls until the server accepts a connection, it exits, ctx ends
// or readyTimeout passes; only the first returns nil.
func (l *localPostgres) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(l.url)
	if err != nil {
		return err
	}
	cfg.ConnectTimeout = time.Second
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-l.exited:
			return fmt.Errorf("postgres exited during startup: %v", l.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections: %w (last: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// portTaken reports whether the last start failed because another process
// took the port between freePort and postgres binding it.
func (l *localPostgres) portTaken() bool {
	out := l.log.Bytes()
	return bytes.Contains(out, []byte("could not bind")) || bytes.Contains(out, []byte("already in use"))
}

// kill ends the server at once and waits for it.
func (l *localPostgres) kill() {
	_ = l.cmd.Process.Kill()
	<-l.exited
}

// stop shuts the server down (fast shutdown, then SIGKILL after
// stopTimeout or when ctx ends) and removes its directory. It is safe to
// call more than once and returns the error of removing the directory.
func (l *localPostgres) stop(ctx context.Context) error {
	l.stopOnce.Do(func() {
		_ = l.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		timer := time.NewTimer(stopTimeout)
		defer timer.Stop()
		select {
		case <-l.exited:
		case <-timer.C:
			l.kill()
		case <-ctx.Done():
			l.kill()
		}
		l.stopErr = os.RemoveAll(l.dir)
	})
	return l.stopErr
}

// findLocalBinaries returns a directory holding both initdb and postgres,
// looking in PATH, then in `pg_config --bindir`, then in the newest
// /usr/lib/postgresql/*/bin. It returns ErrNoLocalBinaries if none does.
func findLocalBinaries() (string, error) {
	var candidates []string
	if initdb, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(initdb))
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	candidates = append(candidates, debianBinDirs()...)
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", ErrNoLocalBinaries
}

// debianBinDirs returns /usr/lib/postgresql/<version>/bin directories,
// newest version first.
func debianBinDirs() []string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		return v
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	return dirs
}

// isExecutable reports whether path is a regular file with an execute bit.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// childCredential returns nil when not root, and otherwise the credential of
// the "postgres" system user, since postgres refuses to run as root. It
// fails if running as root and that user does not exist.
func childCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("local postgres: running as root, but PostgreSQL refuses to run as root and there is no \"postgres\" user to run it as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("local postgres: user postgres has non-numeric uid %q or gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// childProcAttr runs a child as cred (if not nil) with no supplementary
// groups, and asks the kernel to kill it when this process dies.
func childProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Credential: cred}
	setPdeathsig(attr)
	return attr
}

// childEnv is this process's environment without libpq/PG variables, which
// could point initdb or postgres at something else.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// localBase returns the directory to create the temporary directory in:
// a memory file system with room to spare if there is one (creating a
// database there is several times faster than on disk), else os.TempDir,
// else /tmp if os.TempDir is too long for a unix socket path or, when the
// server runs as another user, not traversable by others.
func localBase(otherUser bool) string {
	if mem := memoryBase(); mem != "" {
		return mem
	}
	return diskBase(otherUser)
}

// diskBase is localBase without the memory file system.
func diskBase(otherUser bool) string {
	base := os.TempDir()
	if len(base) > 40 || (otherUser && !traversableByOthers(base)) {
		return "/tmp"
	}
	return base
}

// traversableByOthers reports whether every directory from / to dir has
// the execute bit for others.
func traversableByOthers(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// removeStaleDirs removes temporary directories in base left behind by
// processes that died without stopping their server (the server itself was
// killed with them). Directories whose owner or postmaster still runs are
// kept; errors are ignored, since this is only tidying up.
func removeStaleDirs(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, localDirPrefix+"*"))
	for _, dir := range dirs {
		if pidAlive(filepath.Join(dir, ownerFile)) || pidAlive(filepath.Join(dir, "data", "postmaster.pid")) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, ownerFile)); err != nil {
			continue // not made by us, or still being made
		}
		_ = os.RemoveAll(dir)
	}
}

// pidAlive reports whether the pid on the first line of file names a
// running process.
func pidAlive(file string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	return err == nil && ProcessAlive(pid)
}

// ProcessAlive reports whether pid names a running process of this machine
// (a zombie is not running). What was left by a process that is not
// running may be removed.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// Linux: a zombie (state Z, after the ")" ending the command name)
		// is dead, though nobody has reaped it yet.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z")) {
			return false
		}
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// Write appends p, dropping the oldest bytes beyond max. It never fails.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// Bytes returns a copy of what the buffer holds.
func (b *tailBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf)
}

// lastLines returns at most n trailing lines of out, indented, for errors.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
