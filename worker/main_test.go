package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
	"github.com/docket-dev/docket/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast: ana administers project acme; svc:app enqueues there and runs
// its jobs; svc:nobody holds no grant.
const (
	project              = "acme"
	ana     access.Actor = "user:ana"
	app     access.Actor = "svc:app"
	nobody  access.Actor = "svc:nobody"
)

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

// waitLimit bounds every wait for a worker's event: reached, the test fails.
const waitLimit = 60 * time.Second

type env struct {
	pool   *pgxpool.Pool
	clock  *db.FakeClock
	client *worker.Client // enqueues as app
}

// Invoice is the payload of the tests' kind.
type Invoice struct {
	Order int    `json:"order"`
	Mode  string `json:"mode,omitempty"`
}

var invoiceKind = jobs.MustKind[Invoice]("billing.invoice", 1)

// setup returns a fresh migrated database with project acme, app granted
// every job capability there, and a client enqueueing as app on a fake clock
// at t0.
func setup(t testing.TB) env {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	clock := db.NewFakeClock(t0)
	_, err := projects.Create(ctx, pool, project, ana, clock.Now())
	require.NoError(t, err)
	for _, c := range []access.Capability{access.JobCreate, access.JobClaim, access.JobCancel, access.JobReconcile} {
		_, err := access.Allow(ctx, pool, access.Grant{Principal: app, Project: project, Capability: c}, ana, clock.Now())
		require.NoError(t, err)
	}
	c, err := worker.NewClient(pool, worker.ClientConfig{Project: project, Actor: app, Clock: clock})
	require.NoError(t, err)
	return env{pool: pool, clock: clock, client: c}
}

// recorder collects a worker's events and lets a test wait for one.
type recorder struct {
	mu     sync.Mutex
	events []worker.Event
	signal chan struct{}
}

func newRecorder() *recorder { return &recorder{signal: make(chan struct{}, 1)} }

func (r *recorder) add(e worker.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// count returns how many recorded events match.
func (r *recorder) count(match func(worker.Event) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if match(e) {
			n++
		}
	}
	return n
}

// waitN waits until n recorded events match, and fails the test if that
// takes longer than waitLimit.
func (r *recorder) waitN(t testing.TB, n int, match func(worker.Event) bool) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for r.count(match) < n {
		select {
		case <-r.signal:
		case <-deadline.C:
			t.Fatalf("waited %v for %d matching events; have %d", waitLimit, n, r.count(match))
		}
	}
}

func is(typ worker.EventType, id int64) func(worker.Event) bool {
	return func(e worker.Event) bool { return e.Type == typ && (id == 0 || e.JobID == id) }
}

// startWorker starts a worker as app on e's pool and clock with reg, and
// stops it when the test ends.
func startWorker(t testing.TB, e env, reg *worker.Registry, rec *recorder, tune func(*worker.Config)) *worker.Worker {
	t.Helper()
	cfg := worker.Config{
		Actor: app, Registry: reg, Clock: e.clock, Deployment: "test",
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		SweepEvery: 50 * time.Millisecond,
		Logger:     testLogger,
	}
	if rec != nil {
		cfg.OnEvent = rec.add
	}
	if tune != nil {
		tune(&cfg)
	}
	w, err := worker.New(e.pool, cfg)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return w
}

// testLogger shows the workers' warnings and errors only.
var testLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

func invoiceSpec(t testing.TB, order int, mode string) jobs.Spec {
	t.Helper()
	s, err := invoiceKind.Spec(Invoice{Order: order, Mode: mode})
	require.NoError(t, err)
	return s
}

func jobState(t testing.TB, q db.DBTX, id int64) jobs.State {
	t.Helper()
	var s string
	require.NoError(t, q.QueryRow(context.Background(), "SELECT state FROM docket.jobs WHERE id = $1", id).Scan(&s))
	return jobs.State(s)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
