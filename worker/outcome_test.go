package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

// quickRetry retries at once (1 ms backoff) up to three attempts.
var quickRetry = jobs.RetryPolicy{Base: time.Millisecond, Cap: time.Millisecond, MaxAttempts: 3}

// TestOutcomes runs one job per way a handler can end and checks where each
// job lands and what its history says.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	var flaky atomic.Int32
	reg := worker.NewRegistry()
	require.NoError(t, worker.HandleResult(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) (worker.Result, error) {
		switch j.Args.Mode {
		case "ok":
			return worker.Result{Value: mustJSON(map[string]int{"invoice": j.Args.Order})}, nil
		case "flaky": // fails the first attempt, succeeds the second
			if flaky.Add(1) == 1 {
				return worker.Result{}, errors.New("gateway busy")
			}
			return worker.Result{}, nil
		case "always":
			return worker.Result{}, errors.New("still broken")
		case "permanent":
			return worker.Result{}, worker.Fail(jobs.ClassPermanent, errors.New("no such customer"))
		case "uncertain":
			return worker.Result{}, worker.Fail(jobs.ClassUncertain, errors.New("timeout after sending"))
		case "later":
			if j.Attempts == 1 {
				return worker.Result{}, worker.RetryAfter(-1, errors.New("come back"))
			}
			return worker.Result{}, nil
		case "panic":
			if j.Attempts == 1 {
				panic("nil map somewhere")
			}
			return worker.Result{}, nil
		case "writes":
			return worker.Result{WritesFunc: func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "INSERT INTO invoices (order_id) VALUES ($1)", j.Args.Order)
				return err
			}}, nil
		case "bad-writes": // the writes fail: nothing commits, the attempt fails
			return worker.Result{WritesFunc: func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "INSERT INTO invoices (order_id) VALUES ($1)", j.Args.Order); err != nil {
					return err
				}
				return errors.New("ledger refused")
			}}, nil
		}
		return worker.Result{}, worker.Fail(jobs.ClassPermanent, errors.New("unknown mode"))
	}, worker.HandlerOptions{Revision: "r7"}))
	// The service's own table, which its docket_app login writes.
	_, err := e.Pool.Exec(ctx, "CREATE TABLE invoices (order_id int PRIMARY KEY); GRANT INSERT, SELECT ON invoices TO docket_app")
	require.NoError(t, err)

	want := map[string]jobs.State{
		"ok": jobs.Succeeded, "flaky": jobs.Succeeded, "always": jobs.Dead, "permanent": jobs.Failed,
		"uncertain": jobs.Uncertain, "later": jobs.Succeeded, "panic": jobs.Succeeded, "writes": jobs.Succeeded,
		"bad-writes": jobs.Dead,
	}
	ids := map[string]int64{}
	modes := []string{"ok", "flaky", "always", "permanent", "uncertain", "later", "panic", "writes", "bad-writes"}
	require.Len(t, modes, len(want))
	for i, mode := range modes {
		s := invoiceSpec(t, i+1, mode)
		s.Retry = quickRetry
		got, err := e.client.Enqueue(ctx, s)
		require.NoError(t, err)
		ids[mode] = got.Job.ID
	}
	rec := newRecorder()
	startWorker(t, e, reg, nil, func(cfg *worker.Config) {
		// Time passes for a retry when one is queued.
		cfg.OnEvent = func(ev worker.Event) {
			if ev.Type == worker.EventFailed && ev.State == string(jobs.Queued) {
				e.Clock.Advance(time.Second)
			}
			rec.add(ev)
		}
	})
	final := func(ev worker.Event) bool {
		return ev.State == string(jobs.Succeeded) || ev.State == string(jobs.Failed) ||
			ev.State == string(jobs.Dead) || ev.State == string(jobs.Uncertain)
	}
	rec.waitN(t, len(want), final)

	for mode, state := range want {
		j, err := e.client.Jobs().Get(ctx, ids[mode])
		require.NoError(t, err)
		require.Equal(t, state, j.State, mode)
		v, err := e.client.Jobs().Verify(ctx, ids[mode])
		require.NoError(t, err)
		require.True(t, v.OK, mode)
	}
	j, _ := e.client.Jobs().Get(ctx, ids["ok"])
	require.JSONEq(t, `{"invoice": 1}`, string(j.Result))
	j, _ = e.client.Jobs().Get(ctx, ids["always"])
	require.Equal(t, 3, j.Attempts)
	require.Contains(t, j.Diagnostic, "[r7] still broken")
	j, _ = e.client.Jobs().Get(ctx, ids["panic"])
	require.Equal(t, 2, j.Attempts)
	hist, err := e.client.Jobs().History(ctx, ids["panic"])
	require.NoError(t, err)
	var panicked bool
	for _, ev := range hist {
		if strings.Contains(ev.Detail, "panic: nil map somewhere") {
			panicked = true
		}
	}
	require.True(t, panicked, "the panic's diagnostic is in the history: %+v", hist)

	// Outputs commit with success, or not at all.
	var invoices []int
	rows, err := e.Pool.Query(ctx, "SELECT order_id FROM invoices ORDER BY order_id")
	require.NoError(t, err)
	invoices, err = pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{8}, invoices, "only the writes of the succeeded job")
}

// TestTimeoutCancelsTheAttempt gives a handler that waits for its context a
// timeout: the attempt fails retryably, saying it timed out.
func TestTimeoutCancelsTheAttempt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		<-ctx.Done()
		return ctx.Err()
	}, worker.HandlerOptions{Timeout: 100 * time.Millisecond}))
	s := invoiceSpec(t, 1, "")
	s.Retry = jobs.RetryPolicy{Base: time.Hour, Cap: time.Hour, MaxAttempts: 3}
	got, err := e.client.Enqueue(ctx, s)
	require.NoError(t, err)
	rec := newRecorder()
	startWorker(t, e, reg, rec, nil)
	rec.waitN(t, 1, is(worker.EventFailed, got.Job.ID))

	j, err := e.client.Jobs().Get(ctx, got.Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.Queued, j.State, "a timeout is retryable")
	require.Equal(t, 1, j.Attempts)
	require.Contains(t, j.Diagnostic, "timed out after 100ms")
}

// TestOlderPayloadSchemasRunWhenDeclared runs a job written under an older
// payload schema through a handler that declares it.
func TestOlderPayloadSchemasRunWhenDeclared(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	v2 := jobs.MustKind[Invoice]("billing.invoice", 2)
	seen := make(chan Invoice, 1)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, v2, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		seen <- j.Args
		return nil
	}, worker.HandlerOptions{Schemas: []int{1}}))
	old, err := e.client.Enqueue(ctx, invoiceSpec(t, 7, "")) // schema 1
	require.NoError(t, err)
	rec := newRecorder()
	startWorker(t, e, reg, rec, nil)
	rec.waitN(t, 1, is(worker.EventSucceeded, old.Job.ID))
	require.Equal(t, Invoice{Order: 7}, <-seen)
}
