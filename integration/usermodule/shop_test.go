package shop_test

import (
	"context"
	"io/fs"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/dockettest"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
	"github.com/docket-dev/docket/worker"

	"example.com/shop"
)

// suite makes databases named shop_…, whose template has the shop's own
// tables besides docket's.
var suite = pgtest.MustNew(pgtest.Options{
	Prefix:         "shop_",
	Migrate:        migrate,
	MigrateVersion: mustHash(shop.Migrations),
})

func TestMain(m *testing.M) { pgtest.Main(m) }

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	names, err := fs.Glob(shop.Migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	for _, name := range names {
		sql, err := fs.ReadFile(shop.Migrations, name)
		if err != nil {
			return err
		}
		if _, err := pool.Exec(ctx, string(sql)); err != nil {
			return err
		}
	}
	return nil
}

func mustHash(fsys fs.FS) string {
	h, err := pgtest.HashFS(fsys)
	if err != nil {
		panic(err)
	}
	return h
}

const actor = access.Actor("svc:shop")

// setup returns a database with project shop, where svc:shop may create and
// claim jobs, a service and a worker client of svc:shop on a fake clock.
func setup(t *testing.T) (*pgxpool.Pool, *db.FakeClock, *shop.Service, *worker.Client) {
	t.Helper()
	ctx := t.Context()
	pool := suite.NewDB(t)
	clock := db.NewFakeClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	pc, err := projects.NewClient(pool, projects.Config{Actor: "user:ops", Clock: clock})
	require.NoError(t, err)
	_, err = pc.Create(ctx, "shop")
	require.NoError(t, err)
	ac, err := access.NewClient(pool, access.Config{Actor: "user:ops", Clock: clock})
	require.NoError(t, err)
	for _, c := range []access.Capability{access.JobCreate, access.JobClaim} {
		_, err := ac.Allow(ctx, access.Grant{Principal: actor, Project: "shop", Capability: c})
		require.NoError(t, err)
	}
	svc, err := shop.NewService(pool, "shop", actor, clock)
	require.NoError(t, err)
	reg := worker.NewRegistry()
	require.NoError(t, shop.Register(reg))
	w, err := worker.NewClient(pool, worker.Config{Project: "shop", Actor: actor, Registry: reg, Clock: clock})
	require.NoError(t, err)
	return pool, clock, svc, w
}

func TestRemindEnqueuesAndTheHandlerSends(t *testing.T) {
	t.Parallel()
	pool, clock, svc, w := setup(t)
	ctx := t.Context()

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	id, err := svc.RemindTx(ctx, tx, "acme")
	require.NoError(t, err)
	job := dockettest.RequireEnqueuedTx(ctx, t, w.Jobs(), tx, shop.ReminderKind, &dockettest.EnqueuedOpts{Queue: "mail"})
	require.Equal(t, shop.Reminder{ID: id, Customer: "acme"}, job.Args)
	require.NoError(t, tx.Commit(ctx))

	run := dockettest.WorkJob(ctx, t, w, job.ID)
	require.NoError(t, run.Err)
	require.Equal(t, jobs.Succeeded, run.Job.State)
	require.Equal(t, clock.Now(), run.Job.FinishedAt)
	var sent bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT sent FROM shop.reminders WHERE id = $1", id).Scan(&sent))
	require.True(t, sent)
}

func TestReminderWithoutAnAddressFails(t *testing.T) {
	t.Parallel()
	pool, _, svc, w := setup(t)
	ctx := t.Context()
	_, err := svc.Remind(ctx, "nobody")
	require.NoError(t, err)
	job := dockettest.RequireEnqueued(ctx, t, w.Jobs(), shop.ReminderKind, nil)

	run := dockettest.WorkJob(ctx, t, w, job.ID)
	require.ErrorContains(t, run.Err, "no address for nobody")
	require.Equal(t, jobs.Failed, run.Job.State)

	var name string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_database()").Scan(&name))
	require.Regexp(t, `^shop_t_[0-9a-f]{16}$`, name)
}
