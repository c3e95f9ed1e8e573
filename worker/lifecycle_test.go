package worker_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/worker"
)

func TestEnqueueCommittedRunsOnceRolledBackNever(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	var runs atomic.Int32
	ran := map[int]*atomic.Int32{1: new(atomic.Int32), 2: new(atomic.Int32)}
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, invoiceKind, func(ctx context.Context, j *jobs.Typed[Invoice]) error {
		runs.Add(1)
		ran[j.Args.Order].Add(1)
		return nil
	}))
	rec := newRecorder()

	// Rolled back: the job never existed.
	tx, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	rolled, err := e.client.EnqueueTx(ctx, tx, invoiceSpec(t, 1, ""))
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))

	var committed jobs.Enqueued
	require.NoError(t, db.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
		committed, err = e.client.EnqueueTx(ctx, tx, invoiceSpec(t, 2, ""))
		return err
	}))
	startWorker(t, e, reg, rec, nil)
	rec.waitN(t, 1, is(worker.EventSucceeded, committed.Job.ID))

	require.Equal(t, jobs.Succeeded, jobState(t, e.Pool, committed.Job.ID))
	require.EqualValues(t, 1, ran[2].Load())
	require.EqualValues(t, 0, ran[1].Load())
	var n int
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT count(*) FROM docket.jobs WHERE id = $1", rolled.Job.ID).Scan(&n))
	require.Zero(t, n)
	require.Zero(t, perJobRiverRows(t, e.Pool), "a job has no River row of its own")
}
