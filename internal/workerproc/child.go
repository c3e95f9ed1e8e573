//go:build unix

package workerproc

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Lines receives what a worker process prints, from the goroutines that
// read it, one line at a time and in order for each stream. A nil func
// drops its lines.
type Lines struct {
	// Stdout gets each line of standard output but ready and stopped, split
	// into its fields (never none), and whole.
	Stdout func(fields []string, line string)
	// Stderr gets each line of standard error.
	Stderr func(line string)
}

// Child is a worker process, seen from the test that started it.
type Child struct {
	Name string

	cmd *exec.Cmd
	in  io.WriteCloser // kept open: the process works until it ends

	ready   chan struct{} // closed when it says it is ready
	stopped chan string   // its stopped line, once said
	done    chan struct{} // closed when it has exited and its output is read

	mu      sync.Mutex
	races   int      // data races the race detector reported
	tail    []string // the end of its standard error
	exitErr error
}

// tailLines is how much of a worker's standard error a failure shows.
const tailLines = 40

// Start runs the test binary again as worker process name, with spec, as
// JSON, in the environment variable env, which the suite's TestMain looks
// for, and waits until the process says it is ready. It fails the test
// when the process exits first, or is not ready within a minute. The
// process is killed when the test ends, if it still runs.
func Start(t testing.TB, name, env string, spec any, lines Lines) *Child {
	t.Helper()
	return StartCommand(t, name, []string{os.Args[0]}, env, spec, lines)
}

// StartCommand is [Start] for a worker process that command runs (its
// program, then its arguments) in place of the test binary: one that runs
// the binary elsewhere, such as docker run -i in a container, passing on
// env. Signals go to command's process, and the worker process reads its
// standard input and writes its output through it.
func StartCommand(t testing.TB, name string, command []string, env string, spec any, lines Lines) *Child {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatalf("worker %s: spec: %v", name, err)
	}
	c := &Child{Name: name, ready: make(chan struct{}), stopped: make(chan string, 1), done: make(chan struct{})}
	c.cmd = exec.Command(command[0], command[1:]...)
	c.cmd.Env = append(os.Environ(), env+"="+string(raw))
	var stdout, stderr io.ReadCloser
	c.in, err = c.cmd.StdinPipe()
	if err == nil {
		stdout, err = c.cmd.StdoutPipe()
	}
	if err == nil {
		stderr, err = c.cmd.StderrPipe()
	}
	if err == nil {
		err = c.cmd.Start()
	}
	if err != nil {
		t.Fatalf("worker %s: %v", name, err)
	}
	t.Cleanup(c.Kill)
	var reading sync.WaitGroup
	reading.Add(2)
	go func() {
		defer reading.Done()
		c.readStdout(stdout, lines.Stdout)
	}()
	go func() {
		defer reading.Done()
		c.readStderr(stderr, lines.Stderr)
	}()
	go func() {
		reading.Wait()
		err := c.cmd.Wait()
		c.mu.Lock()
		c.exitErr = err
		c.mu.Unlock()
		close(c.done)
	}()
	select {
	case <-c.ready:
	case <-c.done:
		t.Fatalf("worker %s exited before it was ready (%v):\n%s", name, c.ExitErr(), c.StderrTail())
	case <-time.After(time.Minute):
		t.Fatalf("worker %s was not ready within a minute:\n%s", name, c.StderrTail())
	}
	return c
}

func (c *Child) readStdout(stdout io.Reader, each func([]string, string)) {
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == LineReady:
			close(c.ready)
		case f[0] == LineStopped:
			select {
			case c.stopped <- line:
			default: // said once only
			}
		case each != nil:
			each(f, line)
		}
	}
}

func (c *Child) readStderr(stderr io.Reader, each func(string)) {
	lines := bufio.NewScanner(stderr)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		c.mu.Lock()
		if strings.Contains(line, "WARNING: DATA RACE") {
			c.races++
		}
		c.tail = append(c.tail, line)
		if len(c.tail) > tailLines {
			c.tail = c.tail[1:]
		}
		c.mu.Unlock()
		if each != nil {
			each(line)
		}
	}
}

// Done is closed once the process has exited and its output is read.
func (c *Child) Done() <-chan struct{} { return c.done }

// Exited reports whether the process has ended.
func (c *Child) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// ExitErr is how the process ended (nil for exit status 0, or while it
// runs).
func (c *Child) ExitErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exitErr
}

// Races is how many data races the race detector reported in the process
// so far.
func (c *Child) Races() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.races
}

// StderrTail is the end of the process's standard error, for a failure to
// show.
func (c *Child) StderrTail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.tail, "\n")
}

// Kill ends the process with SIGKILL, if it still runs, and waits for it.
func (c *Child) Kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// Stopped is what a worker process said of its worker's Stop.
type Stopped struct {
	Line string        // the stopped line as said; "" when it said none
	Took time.Duration // how long Stop took
	Err  string        // Stop's error, "<nil>" for none
}

// Terminate sends the process SIGTERM, so it stops its worker, and waits up
// to limit for it to exit. It returns how long the exit took, what the
// process said of its worker's Stop, and whether it exited in time; one
// that did not is killed.
func (c *Child) Terminate(limit time.Duration) (took time.Duration, said Stopped, ok bool) {
	began := time.Now()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		ok = true
	case <-time.After(limit):
		c.Kill()
	}
	took = time.Since(began)
	select {
	case said.Line = <-c.stopped:
		said.Took, said.Err = parseStopped(said.Line)
	default:
	}
	return took, said, ok
}

// parseStopped reads a stopped line: stopped MILLISECONDS "ERROR".
func parseStopped(line string) (took time.Duration, err string) {
	rest := strings.TrimSpace(strings.TrimPrefix(line, LineStopped))
	ms, quoted, _ := strings.Cut(rest, " ")
	if n, perr := strconv.ParseInt(ms, 10, 64); perr == nil {
		took = time.Duration(n) * time.Millisecond
	}
	if s, uerr := strconv.Unquote(quoted); uerr == nil {
		return took, s
	}
	return took, quoted
}
