package jobs_test

// Benchmarks of docket against bare River on the same database, in the same
// run. Each benchmark is one comparison on one fresh database (pgtest.NewDB,
// River's migrations included, River's tables in schema docket): every
// iteration runs the docket side and the River side, times each on its own,
// and the benchmark reports
//
//	docket_jobs/s  jobs per second of the docket side
//	river_jobs/s   jobs per second of the River side
//	ratio          docket_jobs/s / river_jobs/s (1.0: as fast as River)
//
// ns/op covers a whole iteration, both sides and any untimed setup, so it is
// not a throughput figure. Run them with, for example:
//
//	export DOCKET_TEST_DATABASE_URL=$(scripts/pg-local)
//	go test -run XXX -bench 'BenchmarkEnqueueSerial' -benchtime 2000x ./jobs/
//	go test -run XXX -bench 'BenchmarkEnqueueBulk|BenchmarkExternalExecutors' -benchtime 1x ./jobs/
//
// Both sides share one pgxpool of benchPoolConns connections, so neither
// waits for a connection the other would have had.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

const (
	// benchPoolConns is the size of the pool both sides run on.
	benchPoolConns = 20
	// benchBulk is the batch of BenchmarkEnqueueBulk and the backlog of
	// BenchmarkExternalExecutors.
	benchBulk = 100_000
	// benchExecutors and benchClaimLimit shape docket's external executors:
	// goroutines that each claim up to benchClaimLimit jobs at a time.
	benchExecutors  = 4
	benchClaimLimit = 100
	// benchBurnTimeout bounds one side's burn-down.
	benchBurnTimeout = 10 * time.Minute
	// benchSerialWarmup is how many untimed transactions each side of
	// BenchmarkEnqueueSerial runs first.
	benchSerialWarmup = 20
)

// benchRiverWorkers is River's MaxWorkers in BenchmarkExternalExecutors. The
// default, 400, is docket's most jobs in flight (benchExecutors goroutines
// holding up to benchClaimLimit each). River's own benchmark (cmd/river
// riverbench) uses 2000.
var benchRiverWorkers = flag.Int("docket.bench.river-workers", benchExecutors*benchClaimLimit,
	"MaxWorkers of the River queue in BenchmarkExternalExecutors")

// benchArgs is the River side's job: a trivial args type whose JSON is the
// same size as the docket side's payload.
type benchArgs struct {
	N int `json:"n"`
}

func (benchArgs) Kind() string { return "bench_noop" }

// benchNoopWorker works a benchArgs job by doing nothing.
type benchNoopWorker struct {
	river.WorkerDefaults[benchArgs]
}

func (benchNoopWorker) Work(context.Context, *river.Job[benchArgs]) error { return nil }

// benchEnv is a fresh database with project acme and app's grants (setup),
// a pool of benchPoolConns on it, and a docket client acting as app on the
// wall clock.
type benchEnv struct {
	pool   *pgxpool.Pool
	client *jobs.Client
}

func benchSetup(b *testing.B) benchEnv {
	b.Helper()
	e := setup(b)
	cfg := e.Pool.Config() // a copy
	cfg.MaxConns = benchPoolConns
	pool, err := db.OpenConfig(b.Context(), cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close) // before pgtest drops the database
	return benchEnv{pool: pool, client: clientAs(b, pool, db.SystemClock{}, app)}
}

// benchInsertOnlyRiver is an insert-only River client: no Queues and no
// Workers, so River skips its unknown-kind check at insert.
func benchInsertOnlyRiver(b *testing.B, pool *pgxpool.Pool) *river.Client[pgx.Tx] {
	b.Helper()
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: db.Schema, Logger: benchLogger()})
	require.NoError(b, err)
	return rc
}

func benchLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// benchSpec is the docket side's job: kind bench.noop, payload {"n": n}.
func benchSpec(n int, external bool) jobs.Spec {
	return jobs.Spec{Kind: "bench.noop", Payload: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`), External: external}
}

func benchSpecs(external bool) []jobs.Spec {
	specs := make([]jobs.Spec, benchBulk)
	for i := range specs {
		specs[i] = benchSpec(i, external)
	}
	return specs
}

func benchRiverParams() []river.InsertManyParams {
	params := make([]river.InsertManyParams, benchBulk)
	for i := range params {
		params[i] = river.InsertManyParams{Args: benchArgs{N: i}}
	}
	return params
}

// benchTimed runs fn and adds its duration to *total.
func benchTimed(b *testing.B, total *time.Duration, fn func() error) {
	b.Helper()
	start := time.Now()
	err := fn()
	*total += time.Since(start)
	require.NoError(b, err)
}

// benchReportRatio reports both sides' throughput and their ratio.
func benchReportRatio(b *testing.B, docketJobs int, docketTime time.Duration, riverJobs int, riverTime time.Duration) {
	b.Helper()
	d := float64(docketJobs) / docketTime.Seconds()
	r := float64(riverJobs) / riverTime.Seconds()
	b.ReportMetric(d, "docket_jobs/s")
	b.ReportMetric(r, "river_jobs/s")
	b.ReportMetric(d/r, "ratio")
}

// BenchmarkEnqueueSerial compares one job per transaction: begin, EnqueueTx,
// commit against begin, River InsertTx, commit, on one connection at a time.
// Each iteration does one of each, alternating which goes first, after
// benchSerialWarmup untimed transactions of each.
func BenchmarkEnqueueSerial(b *testing.B) {
	e := benchSetup(b)
	rc := benchInsertOnlyRiver(b, e.pool)
	ctx := b.Context()

	docketSide := func(n int) error {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := e.client.EnqueueTx(ctx, tx, benchSpec(n, false)); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	riverSide := func(n int) error {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := rc.InsertTx(ctx, tx, benchArgs{N: n}, nil); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}

	// Untimed: both sides' first transactions prepare statements and fill
	// plan caches; -benchtime 1x would otherwise measure little else.
	for i := range benchSerialWarmup {
		require.NoError(b, docketSide(-1-i))
		require.NoError(b, riverSide(-1-i))
	}

	var docketTime, riverTime time.Duration
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			benchTimed(b, &docketTime, func() error { return docketSide(n) })
			benchTimed(b, &riverTime, func() error { return riverSide(n) })
		} else {
			benchTimed(b, &riverTime, func() error { return riverSide(n) })
			benchTimed(b, &docketTime, func() error { return docketSide(n) })
		}
		n++
	}
	benchReportRatio(b, n, docketTime, n, riverTime)
}

// BenchmarkEnqueueBulk compares 100,000 jobs in one transaction: begin,
// EnqueueManyTx, commit against begin, River InsertManyFastTx (COPY FROM),
// commit. The specs and args are built once, outside the timing; turning them
// into statement parameters is timed.
func BenchmarkEnqueueBulk(b *testing.B) {
	e := benchSetup(b)
	rc := benchInsertOnlyRiver(b, e.pool)
	ctx := b.Context()
	specs := benchSpecs(false)
	params := benchRiverParams()

	docketSide := func() error {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		receipts, err := e.client.EnqueueManyTx(ctx, tx, specs)
		if err != nil {
			return err
		}
		if len(receipts) != benchBulk {
			return fmt.Errorf("docket enqueued %d jobs, want %d", len(receipts), benchBulk)
		}
		return tx.Commit(ctx)
	}
	riverSide := func() error {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		n, err := rc.InsertManyFastTx(ctx, tx, params)
		if err != nil {
			return err
		}
		if n != benchBulk {
			return fmt.Errorf("river inserted %d jobs, want %d", n, benchBulk)
		}
		return tx.Commit(ctx)
	}

	var docketTime, riverTime time.Duration
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			benchTimed(b, &docketTime, docketSide)
			benchTimed(b, &riverTime, riverSide)
		} else {
			benchTimed(b, &riverTime, riverSide)
			benchTimed(b, &docketTime, docketSide)
		}
		n++
	}
	benchReportRatio(b, n*benchBulk, docketTime, n*benchBulk, riverTime)
}

// BenchmarkExternalExecutors compares burning down a backlog of 100,000
// queued no-op jobs.
//
// Docket: benchExecutors goroutines each loop ClaimTx (limit benchClaimLimit,
// its own transaction) then CompleteManyTx of what they claimed (another
// transaction), until a claim comes back empty.
//
// River: a client with one queue of -docket.bench.river-workers MaxWorkers
// (default 400, docket's most jobs in flight), FetchCooldown 2 ms and
// FetchPollInterval 20 ms (the settings of River's own benchmark; the
// defaults, 100 ms and 1 s, would idle its fetcher between batches), works
// benchNoopWorker jobs; the time runs from Start until the 100,000th
// EventKindJobCompleted event, as River's benchmark counts.
//
// Each side's backlog is inserted, and both tables ANALYZEd, before either
// side's timing starts.
func BenchmarkExternalExecutors(b *testing.B) {
	e := benchSetup(b)
	ctx := b.Context()
	specs := benchSpecs(true)
	params := benchRiverParams()
	inserter := benchInsertOnlyRiver(b, e.pool)

	var docketTime, riverTime time.Duration
	docketSide := func() error {
		ctx, cancel := context.WithTimeout(ctx, benchBurnTimeout)
		defer cancel()
		return benchDocketBurnDown(ctx, e.client)
	}
	riverSide := func() error {
		// Untimed: the client, its subscription, and its Stop.
		burn, err := newBenchRiverBurn(e.pool)
		if err != nil {
			return err
		}
		defer burn.stop(ctx)
		ctx, cancel := context.WithTimeout(ctx, benchBurnTimeout)
		defer cancel()
		var d time.Duration
		benchTimed(b, &d, func() error { return burn.run(ctx) })
		riverTime += d
		return nil
	}

	n := 0
	for b.Loop() {
		// Untimed: the backlogs.
		_, err := e.client.EnqueueMany(ctx, specs)
		require.NoError(b, err)
		_, err = inserter.InsertManyFast(ctx, params)
		require.NoError(b, err)
		_, err = e.pool.Exec(ctx, "ANALYZE docket.jobs; ANALYZE docket.job_events; ANALYZE docket.river_job")
		require.NoError(b, err)

		if n%2 == 0 {
			benchTimed(b, &docketTime, docketSide)
			require.NoError(b, riverSide())
		} else {
			require.NoError(b, riverSide())
			benchTimed(b, &docketTime, docketSide)
		}
		n++
	}
	benchReportRatio(b, n*benchBulk, docketTime, n*benchBulk, riverTime)
}

// benchDocketBurnDown claims and completes queued jobs of queue default with
// benchExecutors goroutines until none is left, and checks it completed
// benchBulk.
func benchDocketBurnDown(ctx context.Context, client *jobs.Client) error {
	var (
		done atomic.Int64
		wg   sync.WaitGroup
		errs = make(chan error, benchExecutors)
	)
	for range benchExecutors {
		wg.Go(func() {
			for {
				claimed, err := client.Claim(ctx, jobs.DefaultQueue, jobs.ClaimOptions{Limit: benchClaimLimit})
				if err != nil {
					errs <- err
					return
				}
				if len(claimed) == 0 {
					return
				}
				batch := make([]jobs.Completion, len(claimed))
				for i, j := range claimed {
					batch[i] = jobs.Completion{Lease: j.Lease()}
				}
				refusals, err := client.CompleteMany(ctx, batch)
				if err != nil {
					errs <- err
					return
				}
				for _, err := range refusals {
					if err != nil {
						errs <- err
						return
					}
				}
				done.Add(int64(len(claimed)))
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if got := done.Load(); got != benchBulk {
		return fmt.Errorf("docket completed %d jobs, want %d", got, benchBulk)
	}
	return nil
}

// benchRiverBurn is a River client working queue default, not yet started,
// and its subscription to completions.
type benchRiverBurn struct {
	client *river.Client[pgx.Tx]
	events <-chan *river.Event
	cancel func()
}

func newBenchRiverBurn(pool *pgxpool.Pool) (*benchRiverBurn, error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, benchNoopWorker{})
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            db.Schema,
		Logger:            benchLogger(),
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *benchRiverWorkers}},
		Workers:           workers,
	})
	if err != nil {
		return nil, err
	}
	events, cancel := rc.SubscribeConfig(&river.SubscribeConfig{
		// Events that overflow the channel are dropped: make room for all.
		ChanSize: benchBulk + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	return &benchRiverBurn{client: rc, events: events, cancel: cancel}, nil
}

// run starts the client and waits until it has completed benchBulk jobs.
func (r *benchRiverBurn) run(ctx context.Context) error {
	if err := r.client.Start(ctx); err != nil {
		return err
	}
	for completed := 0; completed < benchBulk; {
		select {
		case ev := <-r.events:
			if ev == nil {
				return fmt.Errorf("river: subscription closed after %d completions", completed)
			}
			if ev.Kind != river.EventKindJobCompleted {
				return fmt.Errorf("river: job %d: %s", ev.Job.ID, ev.Kind)
			}
			completed++
		case <-ctx.Done():
			return fmt.Errorf("river: %d of %d jobs completed: %w", completed, benchBulk, ctx.Err())
		}
	}
	return nil
}

// stop ends the subscription and stops the client, if it started.
func (r *benchRiverBurn) stop(ctx context.Context) {
	r.cancel()
	_ = r.client.Stop(ctx)
}

// BenchmarkBatchesAfterOneJob is docket alone: 2,000 jobs claimed and
// completed 100 at a time on one new session, as a worker's batches are,
// once on a session that begins with them and once on a session whose
// first claim and completion took a single job. A session keeps the
// generic plans its first statements made; a plan made for one row that
// compares every row with every other would cost the batches after it
// dearly. It reports each side's µs a job and after_one/fresh (1.0: the
// first statement's size costs the batches nothing):
//
//	go test -run XXX -bench BenchmarkBatchesAfterOneJob -benchtime 5x ./jobs/
func BenchmarkBatchesAfterOneJob(b *testing.B) {
	e := benchSetup(b)
	ctx := b.Context()
	const batch, perSide = 100, 2000
	var fresh, afterOne time.Duration
	for b.Loop() {
		specs := make([]jobs.Spec, 2*perSide+1)
		for i := range specs {
			specs[i] = benchSpec(i, false)
		}
		_, err := e.client.EnqueueMany(ctx, specs)
		require.NoError(b, err)
		cfg := e.pool.Config().ConnConfig
		fresh += testkit.SettleOnNewSession(b, cfg, e.client, "default", nil, false, perSide, batch)
		afterOne += testkit.SettleOnNewSession(b, cfg, e.client, "default", nil, true, perSide, batch)
	}
	jobsEach := float64(b.N * perSide)
	b.ReportMetric(float64(fresh.Microseconds())/jobsEach, "fresh_us/job")
	b.ReportMetric(float64(afterOne.Microseconds())/jobsEach, "after_one_us/job")
	b.ReportMetric(float64(afterOne)/float64(fresh), "after_one/fresh")
}
