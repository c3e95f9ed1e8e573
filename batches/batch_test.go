package batches_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/worker"
)

func echo(_ context.Context, n int) (any, error) { return n, nil }

// TestABatchRunsEveryItemOnce: 300 items of a two-step plan, fed in pages
// through two workers: the census is exact, the cursor at the end, and
// every item has exactly one run, which succeeded.
func TestABatchRunsEveryItemOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const n = 300
	ev1, ev2 := startWorker(t, e, echo, echo), startWorker(t, e, echo, echo)
	b, err := e.app.Open(ctx, project, "nightly", twoSteps)
	require.NoError(t, err)
	require.Equal(t, plans.Digest(twoSteps), b.Digest)
	r, err := e.app.Run(ctx, b.ID, numbers{n}, 50, 0)
	require.NoError(t, err)
	require.True(t, r.SourceDone)
	events := make(chan worker.Event, 1)
	go func() {
		for {
			select {
			case v := <-ev1:
				select {
				case events <- v:
				default:
				}
			case v := <-ev2:
				select {
				case events <- v:
				default:
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	r = waitFor(t, e, b.ID, events, func(r batches.Report) bool { return r.Status == batches.Completed })
	require.Equal(t, batches.Report{ID: b.ID, Project: project, Name: "nightly", Digest: b.Digest, Status: batches.Completed,
		LastKey: key(n), Cursor: key(n), SourceDone: true, Items: n, Succeeded: n, CreatedBy: app, CreatedAt: b.CreatedAt,
		FinishedAt: r.FinishedAt}, r)
	require.False(t, r.NeedsAttention())
	var runs, distinct, succeeded int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT i.run_id), count(*) FILTER (WHERE r.status = 'succeeded')
		FROM docket.batch_items i JOIN docket.runs r ON r.id = i.run_id WHERE i.batch_id = $1`, b.ID).Scan(&runs, &distinct, &succeeded))
	require.Equal(t, []int{n, n, n}, []int{runs, distinct, succeeded})
	var total int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.runs`).Scan(&total))
	require.Equal(t, n, total, "one run per item, no more")
	list, err := e.app.NeedingAttention(ctx, b.ID, "", 100)
	require.NoError(t, err)
	require.Empty(t, list)
}

// TestAStuckItemHoldsTheCursor: item 40 does not finish while 41..50 do:
// the cursor stays at 39, a resume steps over nothing and starts nothing
// twice, and once item 40 finishes the cursor reaches the end.
func TestAStuckItemHoldsTheCursor(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	release := make(chan struct{})
	var once sync.Once
	hold := func(ctx context.Context, n int) (any, error) {
		if n == 40 {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return n, nil
	}
	events := startWorker(t, e, hold, echo)
	b, err := e.app.Open(ctx, project, "stuck", twoSteps)
	require.NoError(t, err)
	_, err = e.app.Run(ctx, b.ID, numbers{50}, 10, 0)
	require.NoError(t, err)
	r := waitFor(t, e, b.ID, events, func(r batches.Report) bool { return r.Succeeded == 49 })
	require.Equal(t, key(39), r.Cursor, "the item at 40 holds the cursor")
	require.Equal(t, 1, r.InFlight)
	require.Equal(t, batches.Running, r.Status)
	list, err := e.app.NeedingAttention(ctx, b.ID, "", 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, key(40), list[0].Key)
	require.Equal(t, batches.Reserved, list[0].Status)

	// A resume, the cursor lost or not, offers 40..50 again and reserves nothing.
	again, err := e.app.Run(ctx, b.ID, numbers{50}, 10, 0)
	require.NoError(t, err)
	require.Equal(t, 50, again.Items)
	resumed, err := e.app.Admit(ctx, b.ID, []batches.Item{{Key: key(40)}, {Key: key(41)}}, false)
	require.NoError(t, err)
	require.False(t, resumed[0].ReservedNow)
	require.Equal(t, list[0].RunID, resumed[0].RunID, "reserving twice returns the original run")
	once.Do(func() { close(release) })
	r = waitFor(t, e, b.ID, events, func(r batches.Report) bool { return r.Status == batches.Completed })
	require.Equal(t, key(50), r.Cursor)
	require.Equal(t, 50, r.Succeeded)
}

// TestPagesAreInByteOrder: a page out of order is refused naming the key;
// a new key inside what was admitted too; another plan on resume is refused
// naming both digests; nothing is admitted by a refusal.
func TestPagesAreInByteOrder(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	b, err := e.app.Open(ctx, project, "ordered", twoSteps)
	require.NoError(t, err)
	_, err = e.app.Admit(ctx, b.ID, []batches.Item{{Key: "b"}, {Key: "a"}}, false)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "out of order at key a (after b)")
	_, err = e.app.Admit(ctx, b.ID, []batches.Item{{Key: "b"}, {Key: "b"}}, false)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = e.app.Admit(ctx, b.ID, []batches.Item{{Key: "a"}, {Key: "c"}}, false)
	require.NoError(t, err)
	_, err = e.app.Admit(ctx, b.ID, []batches.Item{{Key: "b"}}, false)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "key b comes before the last key admitted (c) and was never admitted")
	// Byte order, not a locale's: "B" < "a".
	_, err = e.app.Admit(ctx, b.ID, []batches.Item{{Key: "d"}, {Key: "D"}}, false)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	other := plans.Plan{Steps: []plans.Step{{ID: "only", Kind: "b.read", Terminal: true, Args: []plans.Arg{}}}}
	_, err = e.app.Open(ctx, project, "ordered", other)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, b.Digest)
	require.ErrorContains(t, err, plans.Digest(other))
	r, err := e.app.Get(ctx, b.ID)
	require.NoError(t, err)
	require.Equal(t, 2, r.Items)
	require.Equal(t, "c", r.LastKey)

	sc, err := batches.NewClient(e.API, batches.Config{Actor: sam, Clock: e.Clock})
	require.NoError(t, err)
	_, err = sc.Open(ctx, project, "mine", twoSteps)
	require.ErrorIs(t, err, db.ErrNotPermitted)
	_, err = sc.Admit(ctx, b.ID, []batches.Item{{Key: "z"}}, false)
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = sc.Get(ctx, b.ID)
	require.ErrorIs(t, err, db.ErrNotFound, "an unknown or unreadable batch is a refusal, never an empty running")
	_, err = e.app.Get(ctx, 424242)
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = e.app.Admit(ctx, b.ID, make([]batches.Item, batches.MaxPage+1), false)
	require.ErrorIs(t, err, db.ErrInvalidArgument)
}

// TestReservingTwiceReturnsTheSameRun: eight admissions of one page at once
// reserve each item once, and every admission sees the same runs.
func TestReservingTwiceReturnsTheSameRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	b, err := e.app.Open(ctx, project, "race", twoSteps)
	require.NoError(t, err)
	page, _, _ := numbers{20}.Page(ctx, "", 20)
	for round := range 5 {
		if round > 0 {
			page, _, _ = numbers{20 * (round + 1)}.Page(ctx, key(20*round), 20)
		}
		release := make(chan struct{})
		results := make([][]batches.Admitted, 8)
		errs := make([]error, 8)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-release
				results[i], errs[i] = e.app.Admit(ctx, b.ID, page, false)
			}()
		}
		close(release)
		wg.Wait()
		now := 0
		for i := range 8 {
			require.NoError(t, errs[i])
			for j, a := range results[i] {
				require.Equal(t, results[0][j].RunID, a.RunID, "round %d item %s", round, a.Key)
				if a.ReservedNow {
					now++
				}
			}
		}
		require.Equal(t, 20, now, "round %d: each item reserved once", round)
	}
	var runs int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.runs`).Scan(&runs))
	require.Equal(t, 100, runs)
}

// TestItemsNeedingAttention: failed and quarantined items, and reserved
// ones with no outcome, oldest key first, from the attention index; the
// report needs attention by its counts.
func TestItemsNeedingAttention(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	fail := func(_ context.Context, n int) (any, error) {
		if n%10 == 3 {
			return nil, worker.Fail(jobs.ClassPermanent, errors.New("the meter is gone"))
		}
		return n, nil
	}
	events := startWorker(t, e, fail, echo)
	b, err := e.app.Open(ctx, project, "attention", twoSteps)
	require.NoError(t, err)
	huge := json.RawMessage(fmt.Sprintf(`{"blob": "%s"}`, strings.Repeat("x", 70000)))
	_, err = e.app.Admit(ctx, b.ID, []batches.Item{{Key: key(0), Input: huge}}, false)
	require.NoError(t, err)
	_, err = e.app.Run(ctx, b.ID, numbers{30}, 10, 0)
	require.NoError(t, err)
	r := waitFor(t, e, b.ID, events, func(r batches.Report) bool { return r.Status == batches.Completed })
	require.Equal(t, 31, r.Items)
	require.Equal(t, 3, r.Failed)
	require.Equal(t, 1, r.Quarantined)
	require.Equal(t, 27, r.Succeeded)
	require.True(t, r.NeedsAttention())
	list, err := e.app.NeedingAttention(ctx, b.ID, "", 100)
	require.NoError(t, err)
	var keys []string
	for _, a := range list {
		keys = append(keys, a.Key+":"+string(a.Status))
	}
	require.Equal(t, []string{key(0) + ":quarantined", key(3) + ":failed", key(13) + ":failed", key(23) + ":failed"}, keys)
	require.Contains(t, list[1].Reason, "step read failed")
	page, err := e.app.NeedingAttention(ctx, b.ID, key(3), 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.Equal(t, key(13), page[0].Key)

	plan := pgtest.Explain(t, e.Pool, `SELECT * FROM docket.batch_items i WHERE i.batch_id = $1 AND i.status <> 'succeeded'
		ORDER BY i.key LIMIT 100`, b.ID)
	require.Contains(t, plan, "batch_items_attention_idx")
	require.NotContains(t, plan, "Seq Scan")
}

// TestAnItemNamesARunThatExists: an item's run is checked as the foreign
// key did (23503, batch_items_run_id_fkey), locking no run: a row naming a
// run that does not exist is refused, the items unchanged.
func TestAnItemNamesARunThatExists(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	b, err := e.app.Open(ctx, project, "refs", twoSteps)
	require.NoError(t, err)
	page, _, _ := numbers{1}.Page(ctx, "", 1)
	admitted, err := e.app.Admit(ctx, b.ID, page, false)
	require.NoError(t, err)
	require.Len(t, admitted, 1)
	before := testkit.Snapshot(t, e.Pool, "docket.batch_items")
	tx, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT docket.set_context($1, $2)`, string(ops), e.Clock.Now())
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO docket.batch_items (batch_id, key, status, run_id, trusted, admitted_at)
		SELECT batch_id, key || 'x', status, run_id + 1000, trusted, admitted_at FROM docket.batch_items WHERE batch_id = $1`, b.ID)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23503", pgErr.Code, pgErr.Message)
	require.Equal(t, "batch_items_run_id_fkey", pgErr.ConstraintName)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, before, testkit.Snapshot(t, e.Pool, "docket.batch_items"))
}
