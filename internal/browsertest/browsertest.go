package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Timeout bounds each call of [Page.Run] and [Get], and the start of a
// browser or a page.
const Timeout = 30 * time.Second

// The environment variables the package reads.
const (
	// ChromiumEnv names the browser binary, a path or a name looked up
	// in PATH, in place of chromium or chromium-browser.
	ChromiumEnv = "DOCKET_CHROMIUM"
	// ArtifactsEnv names the directory that keeps screenshots after the
	// test, one directory per test under it. An absolute path: go test
	// runs each package in its own directory.
	ArtifactsEnv = "DOCKET_ARTIFACTS"
)

// Browser is one headless Chromium for one test. It stops when the test
// ends.
type Browser struct {
	t         testing.TB
	ctx       context.Context // the browser's first tab, parent of every page
	artifacts string

	mu    sync.Mutex
	pages map[string]bool // names in use
}

// Page is one person at the browser: a tab in a browser context of its
// own, with its own cookies, storage and cache. One goroutine at a time
// may drive a page; different pages may be driven at once.
type Page struct {
	b    *Browser
	name string
	ctx  context.Context
	main cdp.FrameID // the tab's main frame

	mu     sync.Mutex
	status int // of the last main document
}

// New starts headless Chromium for the test, with a fresh profile under
// t.TempDir(), and stops it when the test ends. It fails the test if no
// browser is installed or it does not start.
func New(t testing.TB) *Browser {
	t.Helper()
	path, err := chromiumPath()
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	b := &Browser{t: t, artifacts: artifactDir(t), pages: map[string]bool{}}
	out := new(syncBuffer)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "profile")),
		chromedp.Headless,
		chromedp.NoSandbox, // root in a container has no user namespaces for it
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(out),
	)
	// Not t.Context(): that ends before cleanups run, and a failed test's
	// pages take their last screenshot in theirs.
	allocCtx, stopAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, stop := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		stop()
		stopAlloc()
	})
	// The first call binds the browser's life to its context, so it gets
	// no deadline of its own.
	if err := within(Timeout, func() error { return chromedp.Do(ctx) }); err != nil {
		t.Fatalf("browsertest: starting %s: %v\n%s", path, err, out.tail(2000))
	}
	b.ctx = ctx
	return b
}

// NewPage opens a page for the person name, in a browser context of its
// own. The name labels the page's errors and screenshots, and must be
// unique in the browser. The page closes when the test ends; if the test
// failed, it first saves a screenshot named "failed".
func (b *Browser) NewPage(name string) *Page {
	t := b.t
	t.Helper()
	b.mu.Lock()
	taken := b.pages[name]
	b.pages[name] = true
	b.mu.Unlock()
	if taken {
		t.Fatalf("browsertest: a page named %q is open already", name)
	}

	ctx, closePage := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	p := &Page{b: b, name: name, ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() {
			if path, err := p.screenshot("failed"); err != nil {
				t.Logf("browsertest: no screenshot of %s after the failure: %v", name, err)
			} else {
				t.Logf("browsertest: screenshot %s", path)
			}
		}
		closePage()
	})
	// As for the browser: the first call binds the tab to its context.
	if err := within(Timeout, func() error { return chromedp.Do(ctx) }); err != nil {
		t.Fatalf("browsertest: opening page %s: %v", name, err)
	}
	// A tab's main frame has the tab's id, for as long as the tab lives.
	p.main = cdp.FrameID(chromedp.FromContext(ctx).Target.TargetID)
	if err := chromedp.Listen(ctx, p.observe); err != nil {
		t.Fatalf("browsertest: page %s: %v", name, err)
	}
	return p
}

// observe keeps the status of the page's last main document. It runs in
// the loop that reads the tab's messages, before the next one is read, so
// the status is up to date once anything on the new document is seen.
func (p *Page) observe(ev any) {
	r, ok := ev.(*network.EventResponseReceived)
	if !ok || r.Type != network.ResourceTypeDocument || r.FrameID != p.main || r.Response == nil {
		return
	}
	p.mu.Lock()
	p.status = int(r.Response.Status)
	p.mu.Unlock()
}

// Name is the name the page was opened with.
func (p *Page) Name() string { return p.name }

// Context is the page's chromedp context, for what [Page.Run] and [Get] do
// not cover, such as chromedp.Events. It has no deadline: bound each call
// made with it.
func (p *Page) Context() context.Context { return p.ctx }

// Run runs the actions on the page in order, stopping at the first error,
// all within [Timeout]. The error names the page.
func (p *Page) Run(actions ...chromedp.Action[chromedp.Void]) error {
	_, err := Get(p, chromedp.Steps(actions...))
	return err
}

// Get runs one action that returns a value on the page, such as
// chromedp.Text or chromedp.Location, within [Timeout]. The error names the
// page.
func Get[T any](p *Page, action chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(p.ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		return v, fmt.Errorf("page %s: %w", p.name, err)
	}
	return v, nil
}

// SetHeaders makes the page send headers with every request from now on,
// in place of those set before (none for an empty map), as an auth proxy
// in front of docket serve adds X-Forwarded-User and X-Forwarded-Email.
func (p *Page) SetHeaders(headers map[string]string) error {
	h := make(network.Headers, len(headers))
	for k, v := range headers {
		h[k] = v
	}
	return p.Run(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: h})
		return err
	}))
}

// Status is the HTTP status code of the page's last main document (not of
// its frames, images or scripts), or 0 before the first. After a click
// that loads a page, wait for something on the new page before reading it.
func (p *Page) Status() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// Screenshot saves a full-page PNG of the page as <page>-<name>.png in the
// test's artifact directory (see the package documentation), logs its path
// and returns it. If it cannot, it marks the test failed and returns "".
func (p *Page) Screenshot(name string) string {
	t := p.b.t
	t.Helper()
	path, err := p.screenshot(name)
	if err != nil {
		t.Errorf("browsertest: screenshot %s of %s: %v", name, p.name, err)
		return ""
	}
	t.Logf("browsertest: screenshot %s", path)
	return path
}

func (p *Page) screenshot(name string) (string, error) {
	png, err := Get(p, chromedp.FullScreenshot(100))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(p.b.artifacts, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(p.b.artifacts, safeName(p.name)+"-"+safeName(name)+".png")
	return path, os.WriteFile(path, png, 0o644)
}

// chromiumPath finds the browser: DOCKET_CHROMIUM, else chromium or
// chromium-browser in PATH.
func chromiumPath() (string, error) {
	if name := os.Getenv(ChromiumEnv); name != "" {
		path, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", ChromiumEnv, name, err)
		}
		return path, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", errors.New("no chromium or chromium-browser in PATH: install Debian's package " +
		"(apt-get install chromium), or set " + ChromiumEnv + " to the browser")
}

// artifactDir is where the test's screenshots go: its own directory under
// DOCKET_ARTIFACTS, made at the first screenshot, else its temporary
// directory.
func artifactDir(t testing.TB) string {
	t.Helper()
	if root := os.Getenv(ArtifactsEnv); root != "" {
		return filepath.Join(root, safeName(t.Name()))
	}
	return t.TempDir()
}

// safeName makes s a file name: letters, digits, '.', '-' and '_' stay,
// anything else (the '/' of a subtest, spaces) becomes '_'.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}

// within runs f, giving up on it after d. The first call on a chromedp
// context may take no deadline, so a start that hangs is bounded here; f
// ends when the test's cleanup stops the browser.
func within(d time.Duration, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return fmt.Errorf("no answer after %v", d)
	}
}

// syncBuffer keeps the browser's output, written from the allocator's
// goroutines, for the message of a failed start.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail is the last n bytes written.
func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
