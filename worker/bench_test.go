package worker_test

// BenchmarkBurnDown compares burning down a backlog of no-op jobs through the
// docket worker with burning down the same number of no-op jobs through bare
// River, on one fresh database, in the same run, with the same River worker
// count, FetchCooldown and FetchPollInterval. Each side's backlog is inserted
// untimed; the clock runs from Start until the last job is recorded done.
// It reports
//
//	docket_jobs/s  jobs per second through the docket worker
//	river_jobs/s   jobs per second through bare River
//	ratio          docket_jobs/s / river_jobs/s
//	*_wal_B/job    WAL written per job, per side
//	*_go_us/job    CPU time of this test process per job, per side
//	*_pg_us/job    CPU time of the database server per job, per side, when
//	               it runs on this machine (Linux, /proc shows its
//	               processes); not reported otherwise
//
// Run it with, for example:
//
//	export DOCKET_TEST_DATABASE_URL=$(scripts/pg-local)
//	go test -run XXX -bench BenchmarkBurnDown -benchtime 1x ./worker/
//	go test -run XXX -bench BenchmarkBurnDown -benchtime 1x ./worker/ -docket.bench.workers 1000
//	go test -run XXX -bench BenchmarkBurnDown -benchtime 1x ./worker/ -docket.bench.perf /tmp/burn   # a profile of each side

import (
	"context"
	"flag"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

var (
	benchJobs         = flag.Int("docket.bench.jobs", 100_000, "backlog of BenchmarkBurnDown, per side")
	benchWorkers      = flag.Int("docket.bench.workers", 200, "handlers at once on both sides of BenchmarkBurnDown: River's MaxWorkers, docket's Queues")
	benchConns        = flag.Int("docket.bench.conns", 40, "pool size of both sides of BenchmarkBurnDown")
	benchClaimMax     = flag.Int("docket.bench.batch", 0, "docket Batching.Max: jobs per batch (0: the default)")
	benchWindow       = flag.Duration("docket.bench.window", 0, "docket batch window")
	benchCooldownFlag = flag.Duration("docket.bench.cooldown", 0, "FetchCooldown of BenchmarkStartLatency (0: the default)")
	benchAblate       = flag.String("docket.bench.ablate", "", "for attribution only: comma-separated triggers of docket.jobs to disable in the benchmark's database (jobs_guard, jobs_record_update)")
	benchRiverFirst   = flag.Bool("docket.bench.river-first", false, "BenchmarkBurnDown runs River's side first (alternate it between runs)")
	benchSlices       = flag.Int("docket.bench.slices", 1, "BenchmarkBurnDown runs each side's backlog in this many slices, the sides alternating, and reports the spread of the slices' ratios")
	benchInsert       = flag.Bool("docket.bench.insert", false, "BenchmarkBurnDown handlers each INSERT one row (outside the completion), on both sides")
	benchPollFlag     = flag.Duration("docket.bench.poll", 0, "FetchPollInterval of BenchmarkStartLatency (0: the default)")
	benchPerf         = flag.String("docket.bench.perf", "", "BenchmarkBurnDown records each side's run with Linux perf (perf record -a -g) into PREFIX.docket.data and PREFIX.river.data")
)

const (
	benchCooldown = 2 * time.Millisecond
	benchPoll     = 20 * time.Millisecond
	benchTimeout  = 10 * time.Minute
)

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	done   *atomic.Int64
	all    chan struct{}
	n      int64
	effect func(ctx context.Context, n int) error
}

func (w *noopWorker) Work(ctx context.Context, j *river.Job[noopArgs]) error {
	if err := w.effect(ctx, j.Args.N); err != nil {
		return err
	}
	if w.done.Add(1) == w.n {
		close(w.all)
	}
	return nil
}

var noopKind = jobs.MustKind[noopArgs]("bench.noop", 1)

func BenchmarkBurnDown(b *testing.B) {
	e := setup(b)
	cfg := e.Pool.Config()
	cfg.MaxConns = int32(*benchConns)
	pool, err := db.OpenConfig(b.Context(), cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	ctx := b.Context()
	n := *benchJobs
	for _, trigger := range strings.Split(*benchAblate, ",") {
		if trigger != "" {
			// Measurement only: what the job store's guard or event
			// trigger costs. The rules they keep are then not kept.
			_, err := pool.Exec(ctx, "ALTER TABLE docket.jobs DISABLE TRIGGER "+pgx.Identifier{trigger}.Sanitize())
			require.NoError(b, err)
		}
	}
	client, err := worker.NewClient(pool, worker.Config{Project: project, Actor: app}) // insert-only
	require.NoError(b, err)
	// What a handler does: nothing, or one INSERT of its own (the realistic
	// job), on either side.
	effect := func(context.Context, int) error { return nil }
	if *benchInsert {
		_, err := e.Pool.Exec(ctx, `CREATE TABLE public.bench_effects (side text NOT NULL, n integer NOT NULL, at timestamptz NOT NULL DEFAULT now());
			GRANT INSERT ON public.bench_effects TO docket_app`)
		require.NoError(b, err)
		effect = func(ctx context.Context, n int) error {
			_, err := pool.Exec(ctx, `INSERT INTO public.bench_effects (side, n) VALUES ('x', $1)`, n)
			return err
		}
	}

	var docketTime, riverTime time.Duration
	var docketWAL, riverWAL int64
	// CPU per side: this process's, and the server's where it runs here.
	var docketSelf, docketServer, riverSelf, riverServer time.Duration
	serverKnown := true
	measure := func(side string, self, server *time.Duration, run func()) {
		stop := startProfile(b, side)
		before := cpuNow(ctx, pool)
		run()
		after := cpuNow(ctx, pool)
		stop()
		*self += after.self - before.self
		*server += after.server - before.server
		serverKnown = serverKnown && before.serverKnown && after.serverKnown
	}
	// walBytes is the WAL Postgres has written so far, for WAL bytes per job.
	walBytes := func() int64 {
		var n int64
		require.NoError(b, pool.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&n))
		return n
	}
	// Slices: each side's backlog in parts, the sides alternating part by
	// part, so that a host whose speed drifts during the run moves both
	// sides of each pair alike; the spread of the pairs' ratios is
	// reported with the run's.
	parts := *benchSlices
	require.True(b, parts >= 1 && n%parts == 0, "-docket.bench.slices must divide -docket.bench.jobs")
	// perf writes each side's recording to one file, which a later slice's
	// would replace.
	require.True(b, parts == 1 || *benchPerf == "", "-docket.bench.perf records one slice a side: leave -docket.bench.slices at 1")
	var pairRatios []float64
	for b.Loop() {
		each := n / parts // jobs a side, a slice
		docketSide := func() time.Duration {
			// docket: enqueue the backlog, then run it down.
			var took time.Duration
			specs := make([]jobs.Spec, each)
			for i := range specs {
				specs[i], err = noopKind.Spec(noopArgs{N: i})
				require.NoError(b, err)
			}
			for start := 0; start < each; start += 10_000 {
				_, err = client.EnqueueMany(ctx, specs[start:min(start+10_000, each)])
				require.NoError(b, err)
			}
			var done atomic.Int64
			all := make(chan struct{})
			reg := worker.NewRegistry()
			require.NoError(b, worker.Handle(reg, noopKind, func(ctx context.Context, j *jobs.Typed[noopArgs]) error {
				return effect(ctx, j.Args.N)
			}))
			batch := worker.Batching{Max: *benchClaimMax, Window: *benchWindow}
			w, err := worker.NewClient(pool, worker.Config{
				Actor: app, Registry: reg, Deployment: "bench", Logger: testLogger,
				Queues:        map[string]int{jobs.DefaultQueue: *benchWorkers},
				FetchCooldown: benchCooldown, FetchPollInterval: benchPoll,
				Batch: batch,
				OnEvent: func(ev worker.Event) {
					if ev.Type == worker.EventSucceeded && done.Add(1) == int64(each) {
						close(all)
					}
				},
			})
			require.NoError(b, err)
			wal := walBytes()
			measure("docket", &docketSelf, &docketServer, func() {
				began := time.Now()
				require.NoError(b, w.Start(ctx))
				waitAll(b, all)
				took = time.Since(began)
			})
			docketTime += took
			docketWAL += walBytes() - wal
			require.NoError(b, w.Stop(ctx))
			return took
		}

		riverSide := func() time.Duration {
			var took time.Duration
			// River: the same backlog of no-ops.
			rdone := &atomic.Int64{}
			rall := make(chan struct{})
			workers := river.NewWorkers()
			river.AddWorker(workers, &noopWorker{done: rdone, all: rall, n: int64(each), effect: effect})
			rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
				Schema: db.Schema, Logger: testLogger, Workers: workers,
				Queues:        map[string]river.QueueConfig{"bench": {MaxWorkers: *benchWorkers}},
				FetchCooldown: benchCooldown, FetchPollInterval: benchPoll,
			})
			require.NoError(b, err)
			params := make([]river.InsertManyParams, each)
			for i := range params {
				params[i] = river.InsertManyParams{Args: noopArgs{N: i}, InsertOpts: &river.InsertOpts{Queue: "bench"}}
			}
			require.NoError(b, db.WithTx(ctx, pool, func(tx pgx.Tx) error {
				_, err := rc.InsertManyFastTx(ctx, tx, params)
				return err
			}))
			wal := walBytes()
			measure("river", &riverSelf, &riverServer, func() {
				began := time.Now()
				require.NoError(b, rc.Start(ctx))
				waitAll(b, rall)
				took = time.Since(began)
			})
			riverTime += took
			riverWAL += walBytes() - wal
			require.NoError(b, rc.Stop(ctx))
			return took
		}
		// Which side runs first alternates between runs of a series
		// (-docket.bench.river-first), so neither always has the fresher
		// database, and from slice to slice within a run.
		for i := range parts {
			var d, r time.Duration
			if *benchRiverFirst == (i%2 == 0) {
				r = riverSide()
				d = docketSide()
			} else {
				d = docketSide()
				r = riverSide()
			}
			pairRatios = append(pairRatios, r.Seconds()/d.Seconds())
		}
	}
	d := float64(n*b.N) / docketTime.Seconds()
	r := float64(n*b.N) / riverTime.Seconds()
	b.ReportMetric(d, "docket_jobs/s")
	b.ReportMetric(r, "river_jobs/s")
	b.ReportMetric(d/r, "ratio")
	if parts > 1 {
		slices.Sort(pairRatios)
		b.ReportMetric(pairRatios[0], "slice_ratio_min")
		b.ReportMetric(pairRatios[len(pairRatios)/2], "slice_ratio_median")
		b.ReportMetric(pairRatios[len(pairRatios)-1], "slice_ratio_max")
	}
	b.ReportMetric(float64(docketWAL)/float64(n*b.N), "docket_wal_B/job")
	b.ReportMetric(float64(riverWAL)/float64(n*b.N), "river_wal_B/job")
	perJob := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n*b.N) }
	b.ReportMetric(perJob(docketSelf), "docket_go_us/job")
	b.ReportMetric(perJob(riverSelf), "river_go_us/job")
	if serverKnown {
		b.ReportMetric(perJob(docketServer), "docket_pg_us/job")
		b.ReportMetric(perJob(riverServer), "river_pg_us/job")
	}
}

// cpuUse is the CPU time used so far by this process (self) and, when the
// database server runs on this machine where /proc shows its processes, by
// the server: every process of it that is alive plus every one that has
// exited (its postmaster's reaped children). serverKnown is false when the
// server's processes are not to be found here, as in a container or on
// another host, and off Linux.
type cpuUse struct {
	self, server time.Duration
	serverKnown  bool
}

func waitAll(b *testing.B, all chan struct{}) {
	b.Helper()
	select {
	case <-all:
	case <-time.After(benchTimeout):
		b.Fatalf("burn-down did not finish in %v", benchTimeout)
	}
}

// BenchmarkStartLatency measures, at low load, how long a job takes from
// the commit of its enqueue to its handler starting: the enqueue's
// notification wakes the queue's waiting batch, which claims the job. One
// job at a time; it reports the median and the 99th percentile.
//
//	go test -run XXX -bench BenchmarkStartLatency -benchtime 500x ./worker/
func BenchmarkStartLatency(b *testing.B) {
	e := setup(b)
	ctx := b.Context()
	started := make(chan time.Time, 1)
	reg := worker.NewRegistry()
	require.NoError(b, worker.Handle(reg, noopKind, func(context.Context, *jobs.Typed[noopArgs]) error {
		started <- time.Now()
		return nil
	}))
	client, err := worker.NewClient(e.API, worker.Config{
		Project: project, Actor: app, Registry: reg, Deployment: "bench", Logger: testLogger,
		FetchCooldown: *benchCooldownFlag, FetchPollInterval: *benchPollFlag,
	})
	require.NoError(b, err)
	require.NoError(b, client.Start(ctx))
	b.Cleanup(func() { _ = client.Stop(context.Background()) })

	var lat []time.Duration
	i := 0
	for b.Loop() {
		s, err := noopKind.Spec(noopArgs{N: i})
		require.NoError(b, err)
		i++
		_, err = client.Enqueue(ctx, s)
		committed := time.Now()
		require.NoError(b, err)
		select {
		case at := <-started:
			lat = append(lat, at.Sub(committed))
		case <-time.After(benchTimeout):
			b.Fatal("the job did not start")
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
}
