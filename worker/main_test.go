package worker_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast, from the test kit's: ana administers project acme; app enqueues
// there and runs its jobs; nobody holds no grant.
const project, ana, app, nobody = testkit.Acme, testkit.Ana, testkit.App, testkit.Nobody

// waitLimit bounds every wait for a worker's event: reached, the test fails.
const waitLimit = 60 * time.Second

type env struct {
	testkit.Env
	client *worker.Client // enqueues as app, and runs nothing
}

// Invoice is the payload of the tests' kind.
type Invoice struct {
	Order int    `json:"order"`
	Mode  string `json:"mode,omitempty"`
}

var invoiceKind = jobs.MustKind[Invoice]("billing.invoice", 1)

// setup returns a fresh migrated database with project acme, app granted
// every job capability there, and an insert-only client enqueueing as app on
// a fake clock at testkit.T0.
func setup(t testing.TB) env {
	t.Helper()
	k := testkit.Setup(t, ana, []string{project},
		testkit.Grants(app, project, access.JobCreate, access.JobClaim, access.JobCancel, access.JobReconcile)...)
	return env{Env: k, client: enqueuerAs(t, k.API, k.Clock, project, app)}
}

// enqueuerAs returns an insert-only client of project proj acting as actor.
func enqueuerAs(t testing.TB, pool *pgxpool.Pool, clock db.Clock, proj string, actor access.Actor) *worker.Client {
	t.Helper()
	c, err := worker.NewClient(pool, worker.Config{Project: proj, Actor: actor, Clock: clock})
	require.NoError(t, err)
	return c
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

// startWorker starts a client running reg's handlers as app on e's pool and
// clock, and stops it when the test ends.
func startWorker(t testing.TB, e env, reg *worker.Registry, rec *recorder, tune func(*worker.Config)) *worker.Client {
	t.Helper()
	w := newWorker(t, e, reg, rec, tune)
	testkit.Start(t, w)
	return w
}

// newWorker returns a client, not started, that would run reg's handlers as
// app on e's pool and clock, reporting to rec when that is not nil.
func newWorker(t testing.TB, e env, reg *worker.Registry, rec *recorder, tune func(*worker.Config)) *worker.Client {
	t.Helper()
	cfg := worker.Config{
		Actor: app, Registry: reg, Clock: e.Clock, Deployment: "test",
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		SweepEvery: time.Hour, PollInterval: 50 * time.Millisecond, // sweeps are driven by the tests
		Logger: testLogger,
	}
	if rec != nil {
		cfg.OnEvent = rec.add
	}
	if tune != nil {
		tune(&cfg)
	}
	w, err := worker.NewClient(e.API, cfg)
	require.NoError(t, err)
	return w
}

// notifiedOnly makes a worker that finds new jobs through their
// notifications only: its poll, and its batches' idle end, are an hour away,
// beyond any test's wait.
func notifiedOnly(cfg *worker.Config) {
	cfg.PollInterval, cfg.Batch.Idle = time.Hour, time.Hour
}

// waitListening waits until w listens for new jobs.
func waitListening(t testing.TB, w *worker.Client) {
	t.Helper()
	select {
	case <-worker.Listening(w):
	case <-time.After(waitLimit):
		t.Fatalf("the worker did not listen on %s within %v", worker.NotifyChannel, waitLimit)
	}
}

// perJobRiverRows counts River jobs other than the worker's batches: none,
// since a docket job has no River row of its own.
func perJobRiverRows(t testing.TB, q db.DBTX) int {
	t.Helper()
	var n int
	require.NoError(t, q.QueryRow(context.Background(), `SELECT count(*) FROM docket.river_job
		WHERE kind <> $1`, worker.BatchKind).Scan(&n))
	return n
}

// startTogether starts ws at once, from goroutines released together, and
// stops each when the test ends.
func startTogether(t testing.TB, ws ...*worker.Client) {
	t.Helper()
	start := make(chan struct{})
	errs := make(chan error, len(ws))
	for _, w := range ws {
		t.Cleanup(func() { // stopping a client that did not start is a no-op
			ctx, cancel := context.WithTimeout(context.Background(), testkit.StopTimeout)
			defer cancel()
			_ = w.Stop(ctx)
		})
		go func() {
			<-start
			errs <- w.Start(context.Background())
		}()
	}
	close(start)
	for range ws {
		require.NoError(t, <-errs)
	}
}

// testLogger shows the workers' warnings and errors only.
var testLogger = testkit.Logger

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
