package lanes_test

// Refusals: malformed, oversized and out-of-range input gets a typed error
// naming the field, and changes nothing. The database decides; Go adds no
// rule of its own beyond paging bounds.

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/lanes"
)

func TestCreateRefusesMalformedInput(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.as(t, cond)
	good := lanes.Spec{Quorum: e.web.ID, Name: "login", Branch: "feature/login", Assignee: ann, Task: "WEB-1"}
	taken := e.lane(t, "taken")
	before := snapshot(t, e.Pool)

	for _, tc := range []struct {
		name  string
		edit  func(s *lanes.Spec)
		field string // named in the message
		want  error
	}{
		{"empty name", func(s *lanes.Spec) { s.Name = "" }, "lane name", db.ErrInvalidArgument},
		{"name of 64 characters", func(s *lanes.Spec) { s.Name = strings.Repeat("n", lanes.MaxNameLen+1) }, "lane name", db.ErrInvalidArgument},
		{"name with a capital", func(s *lanes.Spec) { s.Name = "Login" }, "lane name", db.ErrInvalidArgument},
		{"name with a space", func(s *lanes.Spec) { s.Name = "log in" }, "lane name", db.ErrInvalidArgument},
		{"name starting with a dash", func(s *lanes.Spec) { s.Name = "-login" }, "lane name", db.ErrInvalidArgument},
		{"name taken in the quorum", func(s *lanes.Spec) { s.Name = taken.Name }, "lanes_name_key", db.ErrAlreadyExists},
		{"empty branch", func(s *lanes.Spec) { s.Branch = "" }, "branch", db.ErrInvalidArgument},
		{"branch of 256 characters", func(s *lanes.Spec) { s.Branch = strings.Repeat("b", lanes.MaxBranchLen+1) }, "branch", db.ErrInvalidArgument},
		{"branch with a space", func(s *lanes.Spec) { s.Branch = "feature/log in" }, "branch", db.ErrInvalidArgument},
		{"branch with ..", func(s *lanes.Spec) { s.Branch = "feature/../main" }, "branch", db.ErrInvalidArgument},
		{"branch with //", func(s *lanes.Spec) { s.Branch = "feature//login" }, "branch", db.ErrInvalidArgument},
		{"branch ending in /", func(s *lanes.Spec) { s.Branch = "feature/" }, "branch", db.ErrInvalidArgument},
		{"branch ending in .", func(s *lanes.Spec) { s.Branch = "feature." }, "branch", db.ErrInvalidArgument},
		{"branch ending in .lock", func(s *lanes.Spec) { s.Branch = "feature.lock" }, "branch", db.ErrInvalidArgument},
		{"branch component .lock", func(s *lanes.Spec) { s.Branch = "a.lock/b" }, "branch", db.ErrInvalidArgument},
		{"branch component starting with .", func(s *lanes.Spec) { s.Branch = "feature/.hidden" }, "branch", db.ErrInvalidArgument},
		{"branch starting with /", func(s *lanes.Spec) { s.Branch = "/feature" }, "branch", db.ErrInvalidArgument},
		{"branch starting with -", func(s *lanes.Spec) { s.Branch = "-f" }, "branch", db.ErrInvalidArgument},
		{"branch with ~", func(s *lanes.Spec) { s.Branch = "feature~1" }, "branch", db.ErrInvalidArgument},
		{"branch with ^", func(s *lanes.Spec) { s.Branch = "feature^" }, "branch", db.ErrInvalidArgument},
		{"branch with :", func(s *lanes.Spec) { s.Branch = "a:b" }, "branch", db.ErrInvalidArgument},
		{"branch with @{", func(s *lanes.Spec) { s.Branch = "a@{1}" }, "branch", db.ErrInvalidArgument},
		{"branch HEAD", func(s *lanes.Spec) { s.Branch = "HEAD" }, "branch", db.ErrInvalidArgument},
		{"branch with a newline", func(s *lanes.Spec) { s.Branch = "a\nb" }, "branch", db.ErrInvalidArgument},
		{"empty assignee", func(s *lanes.Spec) { s.Assignee = "" }, "assignee", db.ErrInvalidArgument},
		{"assignee without kind", func(s *lanes.Spec) { s.Assignee = "ann" }, "assignee", db.ErrInvalidArgument},
		{"assignee too long", func(s *lanes.Spec) { s.Assignee = access.Actor("user:" + strings.Repeat("a", 201)) }, "assignee", db.ErrInvalidArgument},
		{"empty task", func(s *lanes.Spec) { s.Task = "" }, "task reference", db.ErrInvalidArgument},
		{"task of 501 characters", func(s *lanes.Spec) { s.Task = strings.Repeat("t", lanes.MaxTaskLen+1) }, "task reference", db.ErrInvalidArgument},
		{"task with a newline", func(s *lanes.Spec) { s.Task = "WEB-1\nWEB-2" }, "task reference", db.ErrInvalidArgument},
		{"task with a C1 control", func(s *lanes.Spec) { s.Task = "WEB\u00851" }, "task reference", db.ErrInvalidArgument},
		{"task with a leading space", func(s *lanes.Spec) { s.Task = " WEB-1" }, "task reference", db.ErrInvalidArgument},
		{"task with NUL", func(s *lanes.Spec) { s.Task = "WEB\x001" }, "", db.ErrInvalidArgument},
		{"task not UTF-8", func(s *lanes.Spec) { s.Task = "WEB\xff" }, "", db.ErrInvalidArgument},
	} {
		s := good
		tc.edit(&s)
		_, err := c.Create(ctx, s)
		require.ErrorIs(t, err, tc.want, tc.name)
		var typed *db.Error
		require.ErrorAs(t, err, &typed, tc.name)
		if tc.field != "" {
			require.ErrorContains(t, err, tc.field, tc.name)
		}
		require.Equal(t, before, snapshot(t, e.Pool), tc.name)
	}

	// At the bounds, accepted.
	s := good
	s.Name = strings.Repeat("n", lanes.MaxNameLen)
	s.Branch = "release/" + strings.Repeat("b", lanes.MaxBranchLen-len("release/"))
	s.Task = strings.Repeat("t", lanes.MaxTaskLen)
	_, err := c.Create(ctx, s)
	require.NoError(t, err)
}

func TestQuorumCreateRefusesMalformedInput(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	o := e.as(t, ops)
	before := snapshot(t, e.Pool)
	for _, tc := range []struct {
		name string
		spec lanes.QuorumSpec
		want error
		says string
	}{
		{"empty name", lanes.QuorumSpec{Project: project, Name: "", Conductor: cond}, db.ErrInvalidArgument, "quorum name"},
		{"name too long", lanes.QuorumSpec{Project: project, Name: strings.Repeat("q", 64), Conductor: cond}, db.ErrInvalidArgument, "quorum name"},
		{"name with a slash", lanes.QuorumSpec{Project: project, Name: "a/b", Conductor: cond}, db.ErrInvalidArgument, "quorum name"},
		{"malformed conductor", lanes.QuorumSpec{Project: project, Name: "q", Conductor: "cond"}, db.ErrInvalidArgument, "conductor"},
		{"empty conductor", lanes.QuorumSpec{Project: project, Name: "q"}, db.ErrInvalidArgument, "conductor"},
		{"malformed project", lanes.QuorumSpec{Project: "ACME", Name: "q", Conductor: cond}, db.ErrInvalidArgument, "project name"},
		{"name taken", lanes.QuorumSpec{Project: project, Name: "web", Conductor: cond}, db.ErrAlreadyExists, "quorums_name_key"},
	} {
		_, err := o.CreateQuorum(ctx, tc.spec)
		require.ErrorIs(t, err, tc.want, tc.name)
		require.ErrorContains(t, err, tc.says, tc.name)
		require.Equal(t, before, snapshot(t, e.Pool), tc.name)
	}
	q, err := o.CreateQuorum(ctx, lanes.QuorumSpec{Project: project, Name: strings.Repeat("q", 63), Conductor: ops})
	require.NoError(t, err)
	require.Equal(t, ops, q.Conductor)
}

func TestMovesRefuseMalformedInput(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.as(t, cond)
	l := e.drive(t, e.lane(t, "l").ID, lanes.InProgress, lanes.Submitted)
	before := snapshot(t, e.Pool)
	long := strings.Repeat("n", lanes.MaxNoteLen+1)

	for _, tc := range []struct {
		name string
		call func() error
		says string
	}{
		{"unknown state", func() error { _, err := c.SetState(ctx, l.ID, "merged", ""); return err }, "invalid lane state"},
		{"empty state", func() error { _, err := c.SetState(ctx, l.ID, "", ""); return err }, "invalid lane state"},
		{"set state note too long", func() error { _, err := c.SetState(ctx, l.ID, lanes.Done, long); return err }, "invalid note"},
		{"submit note too long", func() error { _, err := c.Submit(ctx, l.ID, long); return err }, "invalid note"},
		{"approve note too long", func() error { _, err := c.Approve(ctx, l.ID, long); return err }, "invalid note"},
		{"request changes note too long", func() error { _, err := c.RequestChanges(ctx, l.ID, long); return err }, "invalid note"},
		{"note with NUL", func() error { _, err := c.Approve(ctx, l.ID, "a\x00b"); return err }, ""},
		{"empty commit", func() error { _, err := c.Merge(ctx, l.ID, ""); return err }, "merge commit"},
		{"short commit", func() error { _, err := c.Merge(ctx, l.ID, commitA[:39]); return err }, "merge commit"},
		{"uppercase commit", func() error { _, err := c.Merge(ctx, l.ID, strings.ToUpper(commitA)); return err }, "merge commit"},
		{"commit of 41 digits", func() error { _, err := c.Merge(ctx, l.ID, commitA+"0"); return err }, "merge commit"},
		{"commit a ref", func() error { _, err := c.Merge(ctx, l.ID, "main"); return err }, "merge commit"},
	} {
		err := tc.call()
		require.ErrorIs(t, err, db.ErrInvalidArgument, tc.name)
		require.ErrorContains(t, err, tc.says, tc.name)
		require.Equal(t, before, snapshot(t, e.Pool), tc.name)
	}
	got, err := c.Approve(ctx, l.ID, strings.Repeat("n", lanes.MaxNoteLen))
	require.NoError(t, err, "a note at the bound")
	require.Equal(t, lanes.Approved, got.Review)
}

// The functions themselves refuse a malformed actor or instant, and a NULL
// anywhere, with DK010.
func TestFunctionsRefuseMalformedContext(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	l := e.drive(t, e.lane(t, "l").ID, lanes.Done, lanes.Approved)
	before := snapshot(t, e.Pool)
	for _, sql := range []string{
		`SELECT docket.quorum_create('acme', 'q', 'user:cond', 'ops', '2026-11-03Z')`,
		`SELECT docket.quorum_create('acme', 'q', 'user:cond', 'user:ops', NULL)`,
		`SELECT docket.quorum_create(NULL, 'q', 'user:cond', 'user:ops', '2026-11-03Z')`,
		`SELECT docket.lane_create($1, 'x', 'main', 'user:ann', 'T', NULL, 'user:cond', 'infinity')`,
		`SELECT docket.lane_create($1, NULL, 'main', 'user:ann', 'T', NULL, 'user:cond', '2026-11-03Z')`,
		`SELECT docket.lane_create($1, 'x', 'main', 'user:ann', 'T', '{NULL}', 'user:cond', '2026-11-03Z')`,
		`SELECT docket.lane_set_state($1, NULL, NULL, 'user:cond', '2026-11-03Z')`,
		`SELECT docket.lane_set_state($1, 'done', NULL, 'user:cond', '1969-12-31Z')`,
		`SELECT docket.lane_review($1, NULL, NULL, 'user:cond', '2026-11-03Z')`,
		`SELECT docket.lane_review($1, 'none', NULL, 'user:cond', '2026-11-03Z')`,
		`SELECT docket.lane_merge($1, NULL, 'user:cond', '2026-11-03Z')`,
		`SELECT docket.lane_merge($1, '` + commitA + `', NULL, '2026-11-03Z')`,
	} {
		arg := l.ID
		if strings.Contains(sql, "lane_create") {
			arg = e.web.ID
		}
		var err error
		if strings.Contains(sql, "$1") {
			_, err = e.Pool.Exec(ctx, sql, arg)
		} else {
			_, err = e.Pool.Exec(ctx, sql)
		}
		require.ErrorIs(t, db.Translate(err, "sql"), db.ErrInvalidArgument, sql)
		require.Equal(t, before, snapshot(t, e.Pool), sql)
	}
}

func TestNewClientRefuses(t *testing.T) {
	t.Parallel()
	var nilPool *pgxpool.Pool
	for _, tc := range []struct {
		pool db.Pool
		cfg  lanes.Config
	}{
		{nil, lanes.Config{Actor: cond}},
		{nilPool, lanes.Config{Actor: cond}},
		{fakePool{}, lanes.Config{Actor: "cond"}},
		{fakePool{}, lanes.Config{}},
	} {
		_, err := lanes.NewClient(tc.pool, tc.cfg)
		require.ErrorIs(t, err, db.ErrInvalidArgument)
	}
	c, err := lanes.NewClient(fakePool{}, lanes.Config{Actor: cond})
	require.NoError(t, err)
	require.Equal(t, cond, c.Actor())
}

// fakePool is a Pool that is never called.
type fakePool struct{ *pgxpool.Pool }
