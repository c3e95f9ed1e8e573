package worker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// sqlEnqueueOne enqueues, as app through its own login, the invoice of order
// with docket's SQL function, as a service without the Go client would.
const sqlEnqueueOne = `
	SELECT id FROM docket.job_enqueue_one('acme', 'svc:app', $1, 'billing.invoice', 'default', 1::smallint,
	    jsonb_build_object('order', $2::int), 1, NULL, $1, 5, false, $3::boolean, interval '5 minutes',
	    interval '1 second', interval '1 minute', 0::float8, NULL, '{}'::text[], NULL, NULL, NULL, NULL)`

// sqlInsert is a plain INSERT of an invoice, as an operator in psql would
// write it, claimable from $2.
const sqlInsert = `
	INSERT INTO docket.jobs (project, kind, payload, available_at, created_by, created_at, updated_at)
	VALUES ('acme', 'billing.invoice', jsonb_build_object('order', $1::int), $2, 'user:ana', $3, $3)`

// TestJobsEnqueuedBySQLRunThroughTheNotification enqueues without the Go
// client, one job at a time, as a service calling docket's SQL function and
// as an operator with a plain INSERT would, while a worker runs that learns
// of new jobs only from their notifications (its poll is an hour away): each
// job due now runs once, promptly; a job for an external executor and one
// not yet due are left alone. No River row is written for any of them.
func TestJobsEnqueuedBySQLRunThroughTheNotification(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const n = 20 // orders 1..10 by the SQL function, 11..20 by INSERT
	var runs [n + 2]atomic.Int32
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		runs[j.Args.Order].Add(1)
		return nil
	}))
	// A job enqueued before the worker starts runs at its start; once it
	// has, the worker's batch waits for notifications.
	first, err := e.client.Enqueue(ctx, invoiceSpec(t, 0, "before the start"))
	require.NoError(t, err)
	rec := newRecorder()
	w := startWorker(t, e, reg, rec, notifiedOnly)
	rec.waitN(t, 1, is(worker.EventSucceeded, first.Job.ID))
	waitListening(t, w)

	var external, later int64
	latest := time.Duration(0)
	for order := 1; order <= n+1; order++ {
		began := time.Now()
		var id int64
		switch {
		case order <= n/2:
			// Order 1 is for an external executor.
			require.NoError(t, e.API.QueryRow(ctx, sqlEnqueueOne, e.Clock.Now(), order, order == 1).Scan(&id))
		case order <= n:
			require.NoError(t, testkit.Raw(ctx, e.Pool, ana, e.Clock.Now(), sqlInsert+" RETURNING id",
				order, e.Clock.Now(), e.Clock.Now()))
			require.NoError(t, e.Pool.QueryRow(ctx, "SELECT max(id) FROM docket.jobs").Scan(&id))
		default:
			// Due in an hour, by the worker's clock: not notified, not run.
			require.NoError(t, testkit.Raw(ctx, e.Pool, ana, e.Clock.Now(), sqlInsert,
				order, e.Clock.Now().Add(time.Hour), e.Clock.Now()))
			require.NoError(t, e.Pool.QueryRow(ctx, "SELECT max(id) FROM docket.jobs").Scan(&id))
			later = id
			continue
		}
		if order == 1 {
			external = id
			continue
		}
		rec.waitN(t, 1, is(worker.EventSucceeded, id))
		latest = max(latest, time.Since(began))
	}
	t.Logf("slowest job, from its enqueue to its recorded success: %v (the poll is %v away)", latest, time.Hour)

	for order := 2; order <= n; order++ {
		require.EqualValues(t, 1, runs[order].Load(), "order %d ran once", order)
	}
	require.Zero(t, runs[1].Load(), "a job for external executors is never run by the worker")
	require.Zero(t, runs[n+1].Load(), "a job not yet due is not run")
	require.Equal(t, jobs.Queued, jobState(t, e.Pool, external))
	require.Equal(t, jobs.Queued, jobState(t, e.Pool, later))
	require.Zero(t, rec.count(func(ev worker.Event) bool { return ev.JobID == external || ev.JobID == later }))
	var byState = map[string]int{}
	rows, err := e.Pool.Query(ctx, "SELECT state, count(*) FROM docket.jobs GROUP BY state")
	require.NoError(t, err)
	for rows.Next() {
		var s string
		var c int
		require.NoError(t, rows.Scan(&s, &c))
		byState[s] = c
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int{"succeeded": n, "queued": 2}, byState)
	require.Zero(t, perJobRiverRows(t, e.Pool), "no job has a River row of its own")
}

// TestSeveralWorkersNeverHoldOneJobAtOnce runs four workers on one queue,
// started together over a backlog made by SQL, each allowed two handlers at
// once: the first eight handlers wait until all eight run, so every worker is
// claiming at the same time as the others. No job is ever held by two
// handlers at once, and each runs exactly once. Three rounds, each with new
// workers and a new backlog.
func TestSeveralWorkersNeverHoldOneJobAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const (
		workers  = 4
		each     = 2 // handlers at once per worker
		backlog  = 150
		barrierN = workers * each
	)
	for round := range 3 {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			var (
				mu      sync.Mutex
				holders = map[int64]int{} // handlers holding each job now
				runs    = map[int64]int{}
				ranOn   = map[int64]int{} // the worker each job ran on
				double  []string
				running atomic.Int32
				started atomic.Int32
			)
			barrier := make(chan struct{})
			rec := newRecorder()
			ws := make([]*worker.Client, workers)
			for i := range ws {
				reg := worker.NewRegistry()
				require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
					mu.Lock()
					holders[j.ID]++
					runs[j.ID]++
					ranOn[j.ID] = i
					if holders[j.ID] > 1 {
						double = append(double, fmt.Sprintf("job %d held %d times at once", j.ID, holders[j.ID]))
					}
					mu.Unlock()
					defer func() {
						mu.Lock()
						holders[j.ID]--
						mu.Unlock()
					}()
					running.Add(1)
					defer running.Add(-1)
					if started.Add(1) == barrierN {
						close(barrier)
					}
					select {
					case <-barrier:
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}))
				ws[i] = newWorker(t, e, reg, rec, func(c *worker.Config) {
					c.Queues = map[string]int{jobs.DefaultQueue: each}
					c.Batch.Max = each
				})
			}
			_, err := e.API.Exec(ctx, `
				SELECT docket.job_enqueue_many('acme', 'svc:app', $1,
				    array_fill('billing.invoice'::text, ARRAY[$2::int]), array_fill('default'::text, ARRAY[$2::int]),
				    array_fill(1::smallint, ARRAY[$2::int]), ARRAY(SELECT jsonb_build_object('order', g) FROM generate_series(1, $2::int) g),
				    array_fill(1, ARRAY[$2::int]),
				    array_fill(NULL::text, ARRAY[$2::int]), array_fill($1::timestamptz, ARRAY[$2::int]), array_fill(5, ARRAY[$2::int]),
				    array_fill(false, ARRAY[$2::int]), array_fill(false, ARRAY[$2::int]), array_fill(interval '5 minutes', ARRAY[$2::int]),
				    array_fill(interval '1 second', ARRAY[$2::int]), array_fill(interval '1 minute', ARRAY[$2::int]),
				    array_fill(0::float8, ARRAY[$2::int]), array_fill(NULL::jsonb, ARRAY[$2::int]), array_fill(NULL::jsonb, ARRAY[$2::int]),
				    array_fill(NULL::text, ARRAY[$2::int]), array_fill(NULL::bigint, ARRAY[$2::int]), array_fill(NULL::bigint, ARRAY[$2::int]),
				    array_fill(NULL::text, ARRAY[$2::int]))`, e.Clock.Now(), backlog)
			require.NoError(t, err)
			var ids []int64
			rows, err := e.Pool.Query(ctx, "SELECT id FROM docket.jobs WHERE state = 'queued' ORDER BY id")
			require.NoError(t, err)
			for rows.Next() {
				var id int64
				require.NoError(t, rows.Scan(&id))
				ids = append(ids, id)
			}
			require.NoError(t, rows.Err())
			require.Len(t, ids, backlog)

			startTogether(t, ws...)
			select {
			case <-barrier:
			case <-time.After(waitLimit):
				t.Fatalf("%d handlers never ran at once across the %d workers; %d started", barrierN, workers, started.Load())
			}
			rec.waitN(t, backlog, func(ev worker.Event) bool { return ev.Type == worker.EventSucceeded })
			stopTogether(t, ws...)

			mu.Lock()
			defer mu.Unlock()
			require.Empty(t, double, "no job was held by two handlers at once")
			perWorker := make([]int, workers)
			for _, id := range ids {
				require.Equal(t, 1, runs[id], "job %d ran once", id)
				perWorker[ranOn[id]]++
			}
			t.Logf("jobs run by each worker: %v", perWorker)
			for i, c := range perWorker {
				require.NotZero(t, c, "worker %d ran jobs", i)
			}
			var claims, attempts, succeeded int
			require.NoError(t, e.Pool.QueryRow(ctx, `
				SELECT count(*) FILTER (WHERE e.claimed_at IS NOT NULL), count(DISTINCT j.id) FILTER (WHERE j.attempts = 1),
				       count(DISTINCT j.id) FILTER (WHERE j.state = 'succeeded')
				FROM docket.jobs j JOIN docket.job_events e ON e.job_id = j.id
				WHERE j.id = ANY($1)`, ids).Scan(&claims, &attempts, &succeeded))
			require.Equal(t, backlog, claims, "one claim per job, each named by the event ending its attempt")
			require.Equal(t, backlog, attempts, "one attempt per job")
			require.Equal(t, backlog, succeeded)
			require.Zero(t, perJobRiverRows(t, e.Pool))
		})
	}
}

// stopTogether stops ws at once, from goroutines released together, each
// with waitLimit to spare.
func stopTogether(t testing.TB, ws ...*worker.Client) {
	t.Helper()
	start := make(chan struct{})
	errs := make(chan error, len(ws))
	for _, w := range ws {
		go func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			errs <- w.Stop(ctx)
		}()
	}
	close(start)
	for range ws {
		require.NoError(t, <-errs)
	}
}

// TestUnknownPayloadSchemaNeverRuns enqueues a job whose payload schema no
// handler of the worker decodes, then one it decodes: the worker's claim that
// takes the second, later job passes over the first, which is never handed
// to a handler and stays queued, its attempts untouched, listed in
// docket.jobs_undecodable for operators. A deployment that decodes its
// schema runs it.
func TestUnknownPayloadSchemaNeverRuns(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	var runs [4]atomic.Int32
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(_ context.Context, j *jobs.Typed[Invoice]) error {
		runs[j.Args.Order].Add(1)
		return nil
	}))
	newer := jobs.MustKind[Invoice]("billing.invoice", 2)
	s, err := newer.Spec(Invoice{Order: 1})
	require.NoError(t, err)
	future, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	known, err := e.client.Enqueue(ctx, invoiceSpec(t, 2, ""))
	require.NoError(t, err)

	rec := newRecorder()
	w := startWorker(t, e, reg, rec, nil)
	rec.waitN(t, 1, is(worker.EventSucceeded, known.Job.ID))
	// And a later claim, through a notification, passes it over again.
	again, err := e.client.Enqueue(ctx, invoiceSpec(t, 3, ""))
	require.NoError(t, err)
	rec.waitN(t, 1, is(worker.EventSucceeded, again.Job.ID))
	sctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	require.NoError(t, w.Stop(sctx))

	require.Zero(t, runs[1].Load(), "the unknown schema's job was never handed to a handler")
	require.EqualValues(t, 1, runs[2].Load())
	require.EqualValues(t, 1, runs[3].Load())
	require.Zero(t, rec.count(func(ev worker.Event) bool { return ev.JobID == future.Job.ID }), "the worker reported nothing of it")
	j, err := e.client.Jobs().Get(ctx, future.Job.ID)
	require.NoError(t, err)
	require.Equal(t, future.Job, j, "the job is as it was enqueued")
	require.Equal(t, jobs.Queued, j.State)
	require.Zero(t, j.Attempts, "it spent no attempt")
	var events, listed int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.job_events WHERE job_id = $1", future.Job.ID).Scan(&events))
	require.Equal(t, 1, events, "only its enqueue is recorded")
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.jobs_undecodable WHERE id = $1", future.Job.ID).Scan(&listed))
	require.Equal(t, 1, listed, "operators see it as undecodable")

	// A deployment that decodes schema 2 registers it, and runs the job.
	var ranNewer atomic.Int32
	reg2 := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg2, newer, func(context.Context, *jobs.Typed[Invoice]) error {
		ranNewer.Add(1)
		return nil
	}))
	rec2 := newRecorder()
	startWorker(t, e, reg2, rec2, func(c *worker.Config) { c.Deployment = "newer" })
	rec2.waitN(t, 1, is(worker.EventSucceeded, future.Job.ID))
	require.EqualValues(t, 1, ranNewer.Load())
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.jobs_undecodable").Scan(&listed))
	require.Zero(t, listed)
}

// TestJobsEnqueuedBySweepsRun gives the worker a sweep that enqueues a job in
// its run's transaction, as the deadline sweeps of other packages do: the
// job needs nothing more, and runs.
func TestJobsEnqueuedBySweepsRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	var runs atomic.Int32
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(context.Context, *jobs.Typed[Invoice]) error {
		runs.Add(1)
		return nil
	}))
	var enqueued atomic.Int64
	sweep := worker.Sweep{Name: "invoices.due", Every: time.Hour, Func: func(ctx context.Context, run *worker.SweepRun) (int, error) {
		if enqueued.Load() != 0 {
			return 0, nil
		}
		s, err := invoiceKind.Spec(Invoice{Order: 1, Mode: "swept"})
		if err != nil {
			return 0, err
		}
		s.IdempotencyKey = "swept-once"
		got, err := e.client.EnqueueTx(ctx, run.Tx, s)
		if err != nil {
			return 0, err
		}
		enqueued.Store(got.Job.ID)
		return 1, nil
	}}
	rec := newRecorder()
	w := startWorker(t, e, reg, rec, func(c *worker.Config) { c.Sweeps = []worker.Sweep{sweep} })
	moved, err := w.Sweep(ctx, "invoices.due")
	require.NoError(t, err)
	id := enqueued.Load()
	if moved == 0 { // the periodic run got there first
		require.NotZero(t, id)
	}
	rec.waitN(t, 1, is(worker.EventSucceeded, id))
	require.EqualValues(t, 1, runs.Load())
	require.Equal(t, jobs.Succeeded, jobState(t, e.Pool, id))
	require.Zero(t, perJobRiverRows(t, e.Pool))
}
