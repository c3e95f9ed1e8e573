package tasks_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/tasks"
)

// TestRefusalsChangeNothing: every entry point refuses malformed,
// oversized, out-of-range and unauthorised input with a typed error, and
// the database is as it was.
func TestRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.admit(t, "P-1")
	task := e.open(t, "P-0", nil)
	e.Allow(t, testkit.Grants("svc:nojobs", project, access.CaseAdmit)...)
	before := snapshot(t, e)

	edit := func(f func(*tasks.Spec)) tasks.Spec { s := spec(e, "K"); f(&s); return s }
	long := func(n int) string { return strings.Repeat("x", n) }
	for name, tc := range map[string]struct {
		as   access.Actor
		spec tasks.Spec
		want error
	}{
		"empty key":             {app, edit(func(s *tasks.Spec) { s.Key = "" }), db.ErrInvalidArgument},
		"key with control":      {app, edit(func(s *tasks.Spec) { s.Key = "a\x01b" }), db.ErrInvalidArgument},
		"oversized key":         {app, edit(func(s *tasks.Spec) { s.Key = long(256) }), db.ErrInvalidArgument},
		"empty title":           {app, edit(func(s *tasks.Spec) { s.Title = "" }), db.ErrInvalidArgument},
		"oversized title":       {app, edit(func(s *tasks.Spec) { s.Title = long(tasks.MaxTitle + 1) }), db.ErrInvalidArgument},
		"oversized summary":     {app, edit(func(s *tasks.Spec) { s.Summary = long(tasks.MaxSummary + 1) }), db.ErrInvalidArgument},
		"oversized proposal":    {app, edit(func(s *tasks.Spec) { s.Proposal = json.RawMessage(`"` + long(tasks.MaxJSON) + `"`) }), db.ErrInvalidArgument},
		"malformed evidence":    {app, edit(func(s *tasks.Spec) { s.Evidence = json.RawMessage(`{`) }), db.ErrInvalidArgument},
		"no decisions":          {app, edit(func(s *tasks.Spec) { s.Decisions = nil }), db.ErrInvalidArgument},
		"malformed decision":    {app, edit(func(s *tasks.Spec) { s.Decisions = []string{"Approve!"} }), db.ErrInvalidArgument},
		"duplicate decision":    {app, edit(func(s *tasks.Spec) { s.Decisions = []string{"ok", "ok"} }), db.ErrInvalidArgument},
		"too many decisions":    {app, edit(func(s *tasks.Spec) { s.Decisions = strings.Split("a b c d e f g h i j k l m n o p q", " ") }), db.ErrInvalidArgument},
		"no audience":           {app, edit(func(s *tasks.Spec) { s.AudienceCapabilities = nil }), db.ErrInvalidArgument},
		"malformed audience":    {app, edit(func(s *tasks.Spec) { s.Audience = []access.Actor{"rita"} }), db.ErrInvalidArgument},
		"malformed capability":  {app, edit(func(s *tasks.Spec) { s.AudienceCapabilities = []access.Capability{"review"} }), db.ErrInvalidArgument},
		"no proposer":           {app, edit(func(s *tasks.Spec) { s.Proposer = "" }), db.ErrInvalidArgument},
		"malformed acting-for":  {app, edit(func(s *tasks.Spec) { s.ActingFor = []access.Actor{"root"} }), db.ErrInvalidArgument},
		"no deadline":           {app, edit(func(s *tasks.Spec) { s.Deadline = time.Time{} }), db.ErrInvalidArgument},
		"deadline past":         {app, edit(func(s *tasks.Spec) { s.Deadline = t0 }), db.ErrInvalidArgument},
		"deadline too far":      {app, edit(func(s *tasks.Spec) { s.Deadline = t0.Add(tasks.MaxAhead + time.Hour) }), db.ErrInvalidArgument},
		"no expiry policy":      {app, edit(func(s *tasks.Spec) { s.Expiry = tasks.Expiry{} }), db.ErrInvalidArgument},
		"auto decision unknown": {app, edit(func(s *tasks.Spec) { s.Expiry = tasks.DecideAutomatically("maybe") }), db.ErrInvalidArgument},
		"escalate to nobody":    {app, edit(func(s *tasks.Spec) { s.Expiry = tasks.Escalate(nil, nil, time.Hour) }), db.ErrInvalidArgument},
		"escalation too short":  {app, edit(func(s *tasks.Spec) { s.Expiry = tasks.Escalate([]access.Actor{boss}, nil, time.Second) }), db.ErrInvalidArgument},
		"no continuation":       {app, edit(func(s *tasks.Spec) { s.Continuation = cases.Continuation{} }), db.ErrInvalidArgument},
		"bad continuation kind": {app, edit(func(s *tasks.Spec) { s.Continuation.Kind = "Not A Kind" }), db.ErrInvalidArgument},
		"unauthorised":          {sam, spec(e, "K"), db.ErrNotFound},
		"a viewer":              {vic, spec(e, "K"), db.ErrNotFound},
		"no job.create":         {"svc:nojobs", spec(e, "K"), db.ErrNotPermitted},
	} {
		_, err := e.as(t, tc.as).Open(ctx, c.ID, tc.spec)
		require.ErrorIs(t, err, tc.want, name)
	}
	_, err := e.app.Open(ctx, 424242, spec(e, "K"))
	require.ErrorIs(t, err, db.ErrNotFound, "unknown case")

	r := e.as(t, rita)
	for _, lease := range []time.Duration{time.Second, -time.Minute, tasks.MaxClaim + time.Second} {
		_, err := r.Claim(ctx, task.ID, lease)
		require.ErrorIs(t, err, db.ErrInvalidArgument, "lease %v", lease)
	}
	for _, id := range []int64{0, -1, 424242} {
		_, err := r.Claim(ctx, id, 0)
		require.ErrorIs(t, err, db.ErrNotFound, "id %d", id)
		_, err = r.Decide(ctx, id, "approve", "")
		require.ErrorIs(t, err, db.ErrNotFound, "id %d", id)
		_, err = r.Get(ctx, id)
		require.ErrorIs(t, err, db.ErrNotFound, "id %d", id)
	}
	_, err = r.Release(ctx, task)
	require.ErrorIs(t, err, db.ErrInvalidArgument, "no claim to release")
	_, err = r.Decide(ctx, task.ID, "maybe", "")
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = r.Decide(ctx, task.ID, "", "")
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = r.Decide(ctx, task.ID, "approve", long(tasks.MaxNote+1))
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	for _, limit := range []int{-1, tasks.MaxPage + 1} {
		_, err = r.Worklist(ctx, project, false, tasks.Page{Limit: limit})
		require.ErrorIs(t, err, db.ErrInvalidArgument)
	}
	_, err = e.as(t, sam).Backlog(ctx, project)
	require.ErrorIs(t, err, db.ErrNotFound)
	list, err := e.as(t, sam).Worklist(ctx, project, false, tasks.Page{})
	require.NoError(t, err)
	require.Empty(t, list)
	_, err = tasks.NewClient(nil, tasks.Config{Actor: rita})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = tasks.NewClient(e.API, tasks.Config{Actor: "rita"})
	require.ErrorIs(t, err, db.ErrInvalidArgument)

	// By hand, in SQL, as the application's login: the same refusals.
	_, err = e.API.Exec(ctx, `SELECT docket.task_claim($1, interval '1 second', 'user:rita', $2)`, task.ID, t0)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrInvalidArgument)
	_, err = e.API.Exec(ctx, `SELECT docket.task_decide($1, 'approve', NULL, 'user:pat', $2)`, task.ID, t0)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrExcludedActor)
	_, err = e.API.Exec(ctx, `UPDATE docket.tasks SET status = 'decided'`)
	require.ErrorIs(t, db.Translate(err, "raw"), db.ErrNotPermitted, "no table privilege")
	require.Equal(t, before, snapshot(t, e))

	// And as the owner: the guard holds.
	err = testkit.Raw(ctx, e.Pool, ops, t0, `UPDATE docket.tasks SET claimed_by = 'user:pat', claim_token = gen_random_uuid(),
		claimed_at = $1::timestamptz, claim_expires_at = $1::timestamptz + interval '1 hour' WHERE id = $2`, t0, task.ID)
	require.ErrorIs(t, err, db.ErrExcludedActor, "four eyes binds the owner too")
	err = testkit.Raw(ctx, e.Pool, ops, t0, `UPDATE docket.tasks SET status = 'decided', decision = 'approve', decided_by = 'user:root',
		settled_at = $1::timestamptz WHERE id = $2`, t0, task.ID)
	require.ErrorIs(t, err, db.ErrExcludedActor, "an answer by an excluded principal, by hand")
	err = testkit.Raw(ctx, e.Pool, ops, t0, `UPDATE docket.tasks SET decision = 'nope' WHERE id = $1`, task.ID)
	require.ErrorIs(t, err, db.ErrInvalidArgument, "a decision goes with the decided status, and is one the task admits")
	require.Equal(t, before, snapshot(t, e))
	err = testkit.Raw(ctx, e.Pool, ops, t0, `UPDATE docket.tasks SET status = 'withdrawn', settled_at = $1::timestamptz WHERE id = $2`, t0, task.ID)
	require.NoError(t, err)
	err = testkit.Raw(ctx, e.Pool, ops, t0, `UPDATE docket.tasks SET status = 'pending', settled_at = NULL WHERE id = $1`, task.ID)
	require.ErrorIs(t, err, db.ErrIllegalTransition, "withdrawn is terminal")
	err = testkit.Raw(ctx, e.Pool, ops, t0, `DELETE FROM docket.tasks`)
	require.ErrorIs(t, err, db.ErrImmutable)
}
