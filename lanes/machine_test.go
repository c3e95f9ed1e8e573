package lanes_test

// The machines, pair by pair: every (from, to) on the execution and review
// axes, through the API and by a hand-written UPDATE. A legal move succeeds
// and records one event; anything else is refused with DK001 and changes
// nothing. Terminal states, immutable columns, the merge record and the
// append-only tables hold against psql too.

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/lanes"
)

var legalExecution = map[[2]lanes.State]bool{
	{lanes.Open, lanes.InProgress}:      true,
	{lanes.Open, lanes.Cancelled}:       true,
	{lanes.InProgress, lanes.Done}:      true,
	{lanes.InProgress, lanes.Failed}:    true,
	{lanes.InProgress, lanes.Cancelled}: true,
}

var legalReview = map[[2]lanes.Review]bool{
	{lanes.NotSubmitted, lanes.Submitted}:     true,
	{lanes.Submitted, lanes.Approved}:         true,
	{lanes.Submitted, lanes.ChangesRequested}: true,
	{lanes.ChangesRequested, lanes.Submitted}: true,
}

func TestExecutionMachineEveryPair(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.as(t, cond)
	n := 0
	for _, from := range lanes.States {
		for _, to := range lanes.States {
			for _, byHand := range []bool{false, true} {
				n++
				l := e.drive(t, e.lane(t, name("x%d", n)).ID, from, lanes.Submitted)
				before := snapshot(t, e.Pool)
				var err error
				if byHand {
					err = e.raw(ctx, `UPDATE docket.lanes SET state = $2 WHERE id = $1`, l.ID, string(to))
				} else {
					_, err = c.SetState(ctx, l.ID, to, "")
				}
				what := name("%s -> %s (by hand: %v)", from, to, byHand)
				if legalExecution[[2]lanes.State{from, to}] {
					require.NoError(t, err, what)
					got, err := c.Get(ctx, l.ID)
					require.NoError(t, err)
					require.Equal(t, to, got.State, what)
					require.Equal(t, lanes.Submitted, got.Review, what)
					h, err := c.History(ctx, l.ID)
					require.NoError(t, err)
					last := h[len(h)-1]
					require.Equal(t, lanes.Event{ID: last.ID, LaneID: l.ID, Type: lanes.EventExecution, From: string(from), To: string(to),
						Actor: last.Actor, At: last.At}, last, what)
					continue
				}
				if byHand && from == to {
					// Not a move: the row is rewritten as it is.
					require.NoError(t, err, what)
				} else {
					require.ErrorIs(t, err, db.ErrIllegalTransition, what)
				}
				require.Equal(t, before, snapshot(t, e.Pool), what)
			}
		}
	}
}

func TestReviewMachineEveryPair(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.as(t, cond)
	n := 0
	for _, from := range lanes.Reviews {
		for _, to := range lanes.Reviews {
			for _, byHand := range []bool{false, true} {
				if !byHand && to == lanes.NotSubmitted {
					continue // no operation goes back to none
				}
				n++
				l := e.drive(t, e.lane(t, name("x%d", n)).ID, lanes.InProgress, from)
				before := snapshot(t, e.Pool)
				var err error
				switch {
				case byHand:
					err = e.raw(ctx, `UPDATE docket.lanes SET review = $2 WHERE id = $1`, l.ID, string(to))
				case to == lanes.Submitted:
					_, err = c.Submit(ctx, l.ID, "")
				case to == lanes.Approved:
					_, err = c.Approve(ctx, l.ID, "")
				case to == lanes.ChangesRequested:
					_, err = c.RequestChanges(ctx, l.ID, "")
				}
				what := name("%s -> %s (by hand: %v)", from, to, byHand)
				if legalReview[[2]lanes.Review{from, to}] {
					require.NoError(t, err, what)
					got, err := c.Get(ctx, l.ID)
					require.NoError(t, err)
					require.Equal(t, to, got.Review, what)
					require.Equal(t, lanes.InProgress, got.State, what)
					continue
				}
				if byHand && from == to {
					require.NoError(t, err, what)
				} else {
					require.ErrorIs(t, err, db.ErrIllegalTransition, what)
				}
				require.Equal(t, before, snapshot(t, e.Pool), what)
			}
		}
	}
}

// A merge needs done, approved and a commit: the API refuses anything else
// with DK001, a hand-written UPDATE meets the table's CHECK. A recorded merge
// never changes.
func TestMergeNeedsDoneApprovedAndCommit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.as(t, cond)
	n := 0
	for _, s := range lanes.States {
		for _, r := range lanes.Reviews {
			if s == lanes.Done && r == lanes.Approved {
				continue
			}
			n++
			l := e.drive(t, e.lane(t, name("m%d", n)).ID, s, r)
			before := snapshot(t, e.Pool)
			_, err := c.Merge(ctx, l.ID, commitA)
			require.ErrorIs(t, err, db.ErrIllegalTransition, "%s/%s", s, r)
			err = e.raw(ctx, `UPDATE docket.lanes SET merge_commit = $2, merged_at = '2026-11-03T09:00:00Z', merged_by = 'user:ops' WHERE id = $1`,
				l.ID, commitA)
			requireConstraint(t, err, "lanes_merged_only_done_approved")
			require.Equal(t, before, snapshot(t, e.Pool), "%s/%s", s, r)
		}
	}

	ready := e.drive(t, e.lane(t, "ready").ID, lanes.Done, lanes.Approved)
	before := snapshot(t, e.Pool)
	// No commit, or half a record, by hand: refused by the CHECKs.
	err := e.raw(ctx, `UPDATE docket.lanes SET merged_at = '2026-11-03T09:00:00Z', merged_by = 'user:ops' WHERE id = $1`, ready.ID)
	requireConstraint(t, err, "lanes_merge_record_whole")
	err = e.raw(ctx, `UPDATE docket.lanes SET merge_commit = $2 WHERE id = $1`, ready.ID, commitA)
	requireConstraint(t, err, "lanes_merge_record_whole")
	err = e.raw(ctx, `UPDATE docket.lanes SET merge_commit = 'HEAD', merged_at = '2026-11-03T09:00:00Z', merged_by = 'user:ops' WHERE id = $1`, ready.ID)
	requireConstraint(t, err, "lanes_merge_commit_valid")
	require.Equal(t, before, snapshot(t, e.Pool))

	// By hand, with everything in place, a merge is recorded like any other.
	require.NoError(t, e.raw(ctx, `UPDATE docket.lanes SET merge_commit = $2, merged_at = '2026-11-03T09:00:00Z', merged_by = 'user:ops' WHERE id = $1`,
		ready.ID, commitA))
	h, err := c.History(ctx, ready.ID)
	require.NoError(t, err)
	require.Equal(t, lanes.EventMerge, h[len(h)-1].Type)
	require.Equal(t, "user:ops", string(h[len(h)-1].Actor))

	before = snapshot(t, e.Pool)
	for _, set := range []string{
		`merge_commit = '` + commitB + `'`,
		`merged_at = '2026-11-04T09:00:00Z'`,
		`merged_by = 'user:mallory'`,
		`merge_commit = NULL, merged_at = NULL, merged_by = NULL`,
	} {
		err := e.raw(ctx, `UPDATE docket.lanes SET `+set+` WHERE id = $1`, ready.ID)
		require.ErrorIs(t, err, db.ErrTerminal, set)
	}
	_, err = c.Merge(ctx, ready.ID, commitB)
	require.ErrorIs(t, err, db.ErrTerminal)
	require.Equal(t, before, snapshot(t, e.Pool))
}

func requireConstraint(t *testing.T, err error, constraint string) {
	t.Helper()
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23514", pgErr.Code)
	require.Equal(t, constraint, pgErr.ConstraintName)
}

// What a lane is made of never changes, whoever tries; lanes and quorums are
// never deleted; events and dependencies are append-only.
func TestImmutableByHand(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	base := e.lane(t, "base")
	l := e.lane(t, "l", base.ID)
	// Another project with a quorum of its own, for the project to move to.
	require.NoError(t, e.raw(ctx, `SELECT docket.project_create('globex', 'user:ops', '2026-11-03T09:00:00Z')`))
	require.NoError(t, e.raw(ctx, `INSERT INTO docket.quorums (project, name, conductor, created_by, created_at)
		VALUES ('globex', 'web', 'user:cond', 'user:ops', '2026-11-03T09:00:00Z')`))
	before := snapshot(t, e.Pool)

	for _, set := range []string{
		`project = 'globex'`,
		`quorum_id = (SELECT id FROM docket.quorums WHERE project = 'globex')`,
		`quorum_id = (SELECT id FROM docket.quorums WHERE project = 'globex'), project = 'globex'`,
		name(`quorum_id = %d`, e.api.ID),
		`name = 'renamed'`,
		`branch = 'feature/other'`,
		`assignee = 'user:sam'`,
		`task_ref = 'WEB-9'`,
		`created_by = 'user:sam'`,
		`created_at = '2020-01-01T00:00:00Z'`,
	} {
		err := e.raw(ctx, `UPDATE docket.lanes SET `+set+` WHERE id = $1`, l.ID)
		require.ErrorIs(t, err, db.ErrImmutable, set)
	}
	for _, sql := range []string{
		`DELETE FROM docket.lanes WHERE id = $1`,
		`UPDATE docket.lane_events SET actor = 'user:mallory' WHERE lane_id = $1`,
		`DELETE FROM docket.lane_events WHERE lane_id = $1`,
		`UPDATE docket.lane_dependencies SET depends_on = depends_on WHERE lane_id = $1`,
		`DELETE FROM docket.lane_dependencies WHERE lane_id = $1`,
		`UPDATE docket.quorums SET conductor = 'user:sam' WHERE id = (SELECT quorum_id FROM docket.lanes WHERE id = $1)`,
		`DELETE FROM docket.quorums WHERE id = (SELECT quorum_id FROM docket.lanes WHERE id = $1)`,
	} {
		err := e.raw(ctx, sql, l.ID)
		require.ErrorIs(t, err, db.ErrImmutable, sql)
	}
	require.Equal(t, before, snapshot(t, e.Pool))
}

// A lane written by hand is born open, unreviewed and unmerged, in its
// quorum's project, and needs a change context like any other change.
func TestInsertByHand(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	require.NoError(t, e.raw(ctx, `SELECT docket.project_create('globex', 'user:ops', '2026-11-03T09:00:00Z')`))
	before := snapshot(t, e.Pool)
	insert := func(cols, vals string) error {
		return e.raw(ctx, `INSERT INTO docket.lanes (quorum_id, name, branch, assignee, task_ref, created_by, created_at, updated_at`+cols+`)
			VALUES ($1, 'hand', 'main', 'user:ann', 'T-1', 'user:ops', '2026-11-03T09:00:00Z', '2026-11-03T09:00:00Z'`+vals+`)`, e.web.ID)
	}
	require.ErrorIs(t, insert(`, state`, `, 'in_progress'`), db.ErrIllegalTransition)
	require.ErrorIs(t, insert(`, state`, `, 'done'`), db.ErrIllegalTransition)
	require.ErrorIs(t, insert(`, review`, `, 'approved'`), db.ErrIllegalTransition)
	require.ErrorIs(t, insert(`, merge_commit`, `, '`+commitA+`'`), db.ErrIllegalTransition)
	require.ErrorIs(t, insert(`, project`, `, 'globex'`), db.ErrImmutable)
	err := e.raw(ctx, `INSERT INTO docket.lanes (quorum_id, name, branch, assignee, task_ref, created_by, created_at, updated_at)
		VALUES (999999, 'hand', 'main', 'user:ann', 'T-1', 'user:ops', '2026-11-03T09:00:00Z', '2026-11-03T09:00:00Z')`)
	require.ErrorIs(t, err, db.ErrMissingReference)
	_, err = e.Pool.Exec(ctx, `INSERT INTO docket.lanes (quorum_id, name, branch, assignee, task_ref, created_by, created_at, updated_at)
		VALUES ($1, 'hand', 'main', 'user:ann', 'T-1', 'user:ops', '2026-11-03T09:00:00Z', '2026-11-03T09:00:00Z')`, e.web.ID)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument, "no change context")
	require.Equal(t, before, snapshot(t, e.Pool))

	require.NoError(t, insert(`, project`, `, 'acme'`))
	l, err := e.as(t, cond).List(ctx, lanes.Filter{Project: project})
	require.NoError(t, err)
	require.Len(t, l, 1)
	require.Equal(t, lanes.Open, l[0].State)
	h, err := e.as(t, cond).History(ctx, l[0].ID)
	require.NoError(t, err)
	require.Equal(t, []lanes.EventType{lanes.EventCreated}, axes(h))
}

func axes(h []lanes.Event) []lanes.EventType {
	var out []lanes.EventType
	for _, e := range h {
		out = append(out, e.Type)
	}
	return out
}

// The machine in the database is the machine in Go.
func TestMachineTablesMatchGo(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	rows, err := e.Pool.Query(ctx, `SELECT state, terminal FROM docket.lane_states ORDER BY state`)
	require.NoError(t, err)
	var states []lanes.State
	for rows.Next() {
		var s string
		var terminal bool
		require.NoError(t, rows.Scan(&s, &terminal))
		states = append(states, lanes.State(s))
		require.Equal(t, lanes.State(s).Terminal(), terminal, s)
	}
	require.NoError(t, rows.Err())
	want := slices.Clone(lanes.States)
	slices.Sort(want)
	require.Equal(t, want, states)

	var pairs [][2]string
	rows, err = e.Pool.Query(ctx, `SELECT from_state, to_state FROM docket.lane_transitions`)
	require.NoError(t, err)
	for rows.Next() {
		var p [2]string
		require.NoError(t, rows.Scan(&p[0], &p[1]))
		pairs = append(pairs, p)
	}
	require.NoError(t, rows.Err())
	require.Len(t, pairs, len(legalExecution))
	for _, p := range pairs {
		require.True(t, legalExecution[[2]lanes.State{lanes.State(p[0]), lanes.State(p[1])}], "%v", p)
	}
	pairs = nil
	rows, err = e.Pool.Query(ctx, `SELECT from_state, to_state FROM docket.lane_review_transitions`)
	require.NoError(t, err)
	for rows.Next() {
		var p [2]string
		require.NoError(t, rows.Scan(&p[0], &p[1]))
		pairs = append(pairs, p)
	}
	require.NoError(t, rows.Err())
	require.Len(t, pairs, len(legalReview))
	for _, p := range pairs {
		require.True(t, legalReview[[2]lanes.Review{lanes.Review(p[0]), lanes.Review(p[1])}], "%v", p)
	}
}
