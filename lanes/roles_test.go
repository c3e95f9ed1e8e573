package lanes_test

// Who may do what. Every operation is tried by every role: the conductor of
// the lane's quorum, the lane's assignee, a holder of lane.view on the
// project, the conductor of another quorum and a stranger. A refused write is
// DK009, writes nothing, and is decided without taking a lock: each refused
// call is made while another transaction holds the lane row FOR UPDATE, in a
// transaction whose lock_timeout would turn any wait into an error, and must
// still answer DK009.

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/lanes"
)

// roles, in the order of the matrix.
var roles = []access.Actor{cond, ann, vic, cond2, sam}

// holdRow locks the row of table with id FOR UPDATE in a transaction of its
// own, and returns a second transaction in which any wait for a lock fails
// fast (55P03) instead of waiting, and a function that ends both. Make each
// call in it through [attempt], so a refusal leaves it usable for the next.
func holdRow(t *testing.T, e env, table string, id int64) (pgx.Tx, func()) {
	t.Helper()
	ctx := t.Context()
	holder, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, `SELECT 1 FROM docket.`+table+` WHERE id = $1 FOR UPDATE`, id)
	require.NoError(t, err)
	tx, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SET LOCAL lock_timeout = '200ms'`)
	require.NoError(t, err)
	var once sync.Once
	release := func() {
		once.Do(func() {
			_ = tx.Rollback(context.Background())
			_ = holder.Rollback(context.Background())
		})
	}
	t.Cleanup(release)
	return tx, release
}

// attempt makes call in a transaction begun on b: committed when call
// succeeds, and when b is a pgx.Tx a savepoint that a failed call rolls back
// to, leaving b usable.
func attempt(ctx context.Context, b db.Beginner, call func(tx pgx.Tx) (lanes.Lane, error)) (lanes.Lane, error) {
	var l lanes.Lane
	err := db.WithTx(ctx, b, func(tx pgx.Tx) error {
		var err error
		l, err = call(tx)
		return err
	})
	return l, err
}

func requireLockTimeout(t *testing.T, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "55P03", pgErr.Code, "lock_not_available")
}

func TestWriteRoleMatrix(t *testing.T) {
	t.Parallel()
	type op struct {
		name    string
		pre     func(e env, t *testing.T, name string) lanes.Lane // a lane on which the operation is legal
		allowed []access.Actor
		call    func(ctx context.Context, c *lanes.Client, tx pgx.Tx, id int64) (lanes.Lane, error)
		after   func(t *testing.T, l lanes.Lane)
	}
	open := func(e env, t *testing.T, n string) lanes.Lane { return e.lane(t, n) }
	at := func(s lanes.State, r lanes.Review) func(e env, t *testing.T, n string) lanes.Lane {
		return func(e env, t *testing.T, n string) lanes.Lane { return e.drive(t, e.lane(t, n).ID, s, r) }
	}
	ops := []op{
		{"set state", open, []access.Actor{cond},
			func(ctx context.Context, c *lanes.Client, tx pgx.Tx, id int64) (lanes.Lane, error) {
				return c.SetStateTx(ctx, tx, id, lanes.InProgress, "")
			},
			func(t *testing.T, l lanes.Lane) { require.Equal(t, lanes.InProgress, l.State) }},
		{"submit", at(lanes.InProgress, lanes.NotSubmitted), []access.Actor{cond, ann},
			func(ctx context.Context, c *lanes.Client, tx pgx.Tx, id int64) (lanes.Lane, error) {
				return c.SubmitTx(ctx, tx, id, "")
			},
			func(t *testing.T, l lanes.Lane) { require.Equal(t, lanes.Submitted, l.Review) }},
		{"approve", at(lanes.InProgress, lanes.Submitted), []access.Actor{cond},
			func(ctx context.Context, c *lanes.Client, tx pgx.Tx, id int64) (lanes.Lane, error) {
				return c.ApproveTx(ctx, tx, id, "")
			},
			func(t *testing.T, l lanes.Lane) { require.Equal(t, lanes.Approved, l.Review) }},
		{"request changes", at(lanes.InProgress, lanes.Submitted), []access.Actor{cond},
			func(ctx context.Context, c *lanes.Client, tx pgx.Tx, id int64) (lanes.Lane, error) {
				return c.RequestChangesTx(ctx, tx, id, "")
			},
			func(t *testing.T, l lanes.Lane) { require.Equal(t, lanes.ChangesRequested, l.Review) }},
		{"merge", at(lanes.Done, lanes.Approved), []access.Actor{cond},
			func(ctx context.Context, c *lanes.Client, tx pgx.Tx, id int64) (lanes.Lane, error) {
				return c.MergeTx(ctx, tx, id, commitA)
			},
			func(t *testing.T, l lanes.Lane) { require.True(t, l.Merged()) }},
	}
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx := t.Context()
			for i, actor := range roles {
				l := o.pre(e, t, name("l%d", i))
				c := e.as(t, actor)
				if contains(o.allowed, actor) {
					events := eventCount(t, e.Pool, l.ID)
					got, err := attempt(ctx, e.Pool, func(tx pgx.Tx) (lanes.Lane, error) { return o.call(ctx, c, tx, l.ID) })
					require.NoError(t, err, actor)
					o.after(t, got)
					require.Equal(t, events+1, eventCount(t, e.Pool, l.ID), "one event for the change")
					require.Equal(t, events+1, len(mustHistory(t, e.as(t, cond), l.ID)))
					continue
				}
				before := snapshot(t, e.Pool)
				waiting, release := holdRow(t, e, "lanes", l.ID)
				_, err := attempt(ctx, waiting, func(tx pgx.Tx) (lanes.Lane, error) { return o.call(ctx, c, tx, l.ID) })
				require.ErrorIs(t, err, db.ErrNotPermitted, actor)
				require.NotContains(t, err.Error(), string(l.State), "the refusal says nothing of the lane")
				// The same words for a lane that does not exist.
				_, err2 := attempt(ctx, waiting, func(tx pgx.Tx) (lanes.Lane, error) { return o.call(ctx, c, tx, l.ID+1000) })
				require.ErrorIs(t, err2, db.ErrNotPermitted, actor)
				require.Equal(t, before, snapshot(t, e.Pool), actor)
				// Control: the conductor's call does wait for the lock.
				_, err = attempt(ctx, waiting, func(tx pgx.Tx) (lanes.Lane, error) { return o.call(ctx, e.as(t, cond), tx, l.ID) })
				requireLockTimeout(t, err)
				release()
			}
		})
	}
}

// Creating a lane is the quorum's conductor's; creating a quorum needs the
// quorum.create grant. Refusals read the quorum without locking it.
func TestCreateRoles(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	dep := e.lane(t, "dep")
	spec := lanes.Spec{Quorum: e.web.ID, Name: "new", Branch: "main", Assignee: ann, Task: "T-1", DependsOn: []int64{dep.ID}}

	before := snapshot(t, e.Pool)
	waiting, release := holdRow(t, e, "quorums", e.web.ID)
	create := func(actor access.Actor, spec lanes.Spec) error {
		_, err := attempt(ctx, waiting, func(tx pgx.Tx) (lanes.Lane, error) { return e.as(t, actor).CreateTx(ctx, tx, spec) })
		return err
	}
	for _, actor := range []access.Actor{ann, vic, cond2, sam, ops} {
		err := create(actor, spec)
		require.ErrorIs(t, err, db.ErrNotPermitted, actor)
		unknown := spec
		unknown.Quorum = 999999
		err = create(actor, unknown)
		require.ErrorIs(t, err, db.ErrNotPermitted, actor)
	}
	err := create(cond, spec)
	requireLockTimeout(t, err)
	release()
	require.Equal(t, before, snapshot(t, e.Pool))

	for _, actor := range []access.Actor{cond, ann, vic, sam} {
		_, err := e.as(t, actor).CreateQuorum(ctx, lanes.QuorumSpec{Project: project, Name: "q", Conductor: actor})
		require.ErrorIs(t, err, db.ErrNotPermitted, actor)
	}
	_, err = e.as(t, ops).CreateQuorum(ctx, lanes.QuorumSpec{Project: "initech", Name: "q", Conductor: cond})
	require.ErrorIs(t, err, db.ErrNotPermitted, "an unknown project is no different")
	require.Equal(t, before, snapshot(t, e.Pool))
}

func TestReadRoleMatrix(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	l := e.drive(t, e.lane(t, "l").ID, lanes.InProgress, lanes.Submitted)
	for _, actor := range roles {
		c := e.as(t, actor)
		got, err := c.Get(ctx, l.ID)
		h, herr := c.History(ctx, l.ID)
		j, jerr := c.Jobs(ctx, l.ID, lanes.Page{})
		if actor == cond2 || actor == sam {
			require.ErrorIs(t, err, db.ErrNotFound, actor)
			require.ErrorIs(t, herr, db.ErrNotFound, actor)
			require.ErrorIs(t, jerr, db.ErrNotFound, actor)
			continue
		}
		require.NoError(t, err, actor)
		require.Equal(t, l, got)
		require.NoError(t, herr, actor)
		require.Len(t, h, 3)
		require.NoError(t, jerr, actor)
		require.Empty(t, j)
	}
	// An unknown lane reads the same as a hidden one.
	_, err := e.as(t, vic).Get(ctx, l.ID+1000)
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = e.as(t, vic).History(ctx, l.ID+1000)
	require.ErrorIs(t, err, db.ErrNotFound)
}

func contains(list []access.Actor, a access.Actor) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

func mustHistory(t *testing.T, c *lanes.Client, id int64) []lanes.Event {
	t.Helper()
	h, err := c.History(t.Context(), id)
	require.NoError(t, err)
	return h
}
