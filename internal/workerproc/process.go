//go:build unix

package workerproc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The lines every worker process prints on its standard output: ready once
// its worker has started; stopped at the end of its worker's Stop, with how
// long Stop took, in milliseconds, and its error, quoted ("<nil>" for none).
const (
	LineReady   = "ready"
	LineStopped = "stopped"
)

// Worker is what a worker process runs: a worker.Client.
type Worker interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Process is a worker process's own side: the lines it prints and the
// signals that end it.
type Process struct {
	mu   sync.Mutex // one whole line at a time
	out  io.Writer
	term chan os.Signal
	gone chan struct{}
}

// Begin makes the running binary a worker process: from now on SIGTERM asks
// it to stop (see [Process.Serve]), and the end of its standard input says
// the test that started it is gone. Call it first, before the worker is
// built, so that a SIGTERM sent as soon as the process is ready is never
// the default one that kills it.
func Begin() *Process {
	p := &Process{out: os.Stdout, term: make(chan os.Signal, 1), gone: make(chan struct{})}
	signal.Notify(p.term, syscall.SIGTERM)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(p.gone)
	}()
	return p
}

// Say prints one line on standard output: what, then args, separated by
// spaces.
func (p *Process) Say(what string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintln(p.out, append([]any{what}, args...)...)
}

// Serve starts w and says [LineReady], then waits: for SIGTERM, when it
// stops w, giving Stop stopTimeout, and says [LineStopped]; or for the
// standard input to end (the test is gone), when it returns at once. While
// it waits, tick, when not nil, runs every period. It returns the error of
// w's Start; Stop's is said, not returned.
func (p *Process) Serve(ctx context.Context, w Worker, stopTimeout, period time.Duration, tick func()) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	p.Say(LineReady)
	var ticks <-chan time.Time
	if tick != nil {
		t := time.NewTicker(period)
		defer t.Stop()
		ticks = t.C
	}
	for stop := false; !stop; {
		select {
		case <-p.term:
			stop = true
		case <-p.gone:
			return nil
		case <-ticks:
			tick()
		}
	}
	began := time.Now()
	sctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	err := w.Stop(sctx)
	p.Say(LineStopped, time.Since(began).Milliseconds(), strconv.Quote(fmt.Sprint(err)))
	return nil
}

// Logger is the logger a worker process gives its worker: warnings and
// errors, as slog's text lines on standard error, which the test reads
// (level=WARN msg=… job=…).
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
