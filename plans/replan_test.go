package plans_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
)

// complete succeeds the job of step id of run with result, as app.
func complete(t testing.TB, e env, run int64, id string, result string) {
	t.Helper()
	ctx := context.Background()
	steps, err := e.app.Steps(ctx, run)
	require.NoError(t, err)
	jc, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	for _, s := range steps {
		if s.StepID != id {
			continue
		}
		j, ok, err := jc.ClaimID(ctx, s.JobID, jobs.ClaimOptions{})
		require.NoError(t, err)
		require.True(t, ok, "step %s's job is claimable", id)
		_, err = jc.Complete(ctx, j.Lease(), json.RawMessage(result), nil)
		require.NoError(t, err)
		return
	}
	t.Fatalf("run %d has not admitted step %s", run, id)
}

// TestReplans: a replan names its predecessor and reason, stays within the
// limit, carries completed steps over unchanged, keeps a started step's
// kind, and keeps both versions; each refusal names its cause and changes
// nothing.
func TestReplans(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	v1 := plans.Plan{Steps: []plans.Step{
		{ID: "a", Kind: "t.a", Args: []plans.Arg{}},
		{ID: "b", Kind: "t.b", After: []string{"a"}, Args: []plans.Arg{{Name: "x", Source: plans.StepResult("a")}}},
		{ID: "c", Kind: "t.c", After: []string{"b"}, Terminal: true, Args: []plans.Arg{}},
	}}
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: v1, InputTrusted: true, ReplanLimit: 1})
	require.NoError(t, err)
	complete(t, e, run.ID, "a", `"A"`) // a succeeded; b is admitted and queued

	v2 := plans.Plan{Steps: []plans.Step{v1.Steps[0], v1.Steps[1],
		{ID: "c2", Kind: "t.c2", After: []string{"b"}, Terminal: true, Args: []plans.Arg{{Name: "from_a", Source: plans.StepResult("a")}}}}}
	changedDone := plans.Plan{Steps: []plans.Step{{ID: "a", Kind: "t.other", Args: []plans.Arg{}}, v1.Steps[1], v1.Steps[2]}}
	changedStarted := plans.Plan{Steps: []plans.Step{v1.Steps[0], {ID: "b", Kind: "t.b2", After: []string{"a"}, Args: []plans.Arg{}}, v1.Steps[2]}}
	snapshot := func() string {
		var s string
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT (SELECT string_agg(r::text, ';') FROM docket.runs r) ||
			(SELECT string_agg(v::text, ';') FROM docket.run_versions v) || (SELECT string_agg(s::text, ';') FROM docket.run_steps s)`).Scan(&s))
		return s
	}
	before := snapshot()
	for name, tc := range map[string]struct {
		predecessor string
		plan        plans.Plan
		reason      string
		want        string
	}{
		"no reason":              {run.Digest, v2, "", "needs a reason"},
		"blank reason":           {run.Digest, v2, "   ", "needs a reason"},
		"no predecessor":         {"", v2, "the supplier changed", "names predecessor none"},
		"another predecessor":    {plans.Digest(v2), v2, "the supplier changed", "but the run runs plan " + run.Digest},
		"a completed step moved": {run.Digest, changedDone, "the supplier changed", "step a is succeeded: a completed step is carried over unchanged or not at all"},
		"a started step's kind":  {run.Digest, changedStarted, "the supplier changed", "step b is admitted: a started step keeps its kind"},
	} {
		_, err := e.app.Replan(ctx, run.ID, tc.predecessor, tc.plan, tc.reason)
		require.ErrorIs(t, err, db.ErrInvalidArgument, name)
		require.ErrorContains(t, err, tc.want, name)
	}
	require.Equal(t, before, snapshot(), "the refusals changed nothing")

	replanned, err := e.app.Replan(ctx, run.ID, run.Digest, v2, "the supplier changed its terms")
	require.NoError(t, err)
	require.Equal(t, 2, replanned.Version)
	require.Equal(t, plans.Digest(v2), replanned.Digest)
	_, err = e.app.Replan(ctx, run.ID, replanned.Digest, v1, "back again")
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "replan limit of 1 is reached")

	versions, err := e.app.Versions(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, versions, 2, "both versions stay on record")
	require.Equal(t, run.Digest, versions[0].Digest)
	require.Equal(t, "", versions[0].Predecessor)
	require.Equal(t, plans.Digest(v2), versions[1].Digest)
	require.Equal(t, run.Digest, versions[1].Predecessor)
	require.Equal(t, "the supplier changed its terms", versions[1].Reason)
	require.Equal(t, plans.Digest(v1), plans.Digest(versions[0].Plan), "the stored text is the plan")

	complete(t, e, run.ID, "b", `"B"`)
	complete(t, e, run.ID, "c2", `"done"`)
	got, err := e.app.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Succeeded, got.Status)
	require.JSONEq(t, `"done"`, string(got.Output))
	steps, err := e.app.Steps(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, 2, steps[2].Version, "c2 was admitted under the successor")
	require.JSONEq(t, `{"from_a": "A"}`, string(steps[2].Args))

	_, err = e.app.Replan(ctx, run.ID, got.Digest, v1, "too late")
	require.ErrorIs(t, err, db.ErrTerminal, "a finished run is not replanned")
}

// TestNoReplanAfterAnUntrustedRead: once a step was admitted with an
// untrusted value, a replan is refused naming the source.
func TestNoReplanAfterAnUntrustedRead(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	p := plans.Plan{Steps: []plans.Step{
		{ID: "read", Kind: "t.read", Args: []plans.Arg{{Name: "body", Source: plans.Input("body")}}},
		{ID: "act", Kind: "t.act", After: []string{"read"}, Terminal: true, Args: []plans.Arg{}},
	}}
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p, Input: json.RawMessage(`{"body": "hi"}`), InputTrusted: false, ReplanLimit: 5})
	require.NoError(t, err)
	require.Contains(t, run.UntrustedRead, "the run's input at body")
	succ := plans.Plan{Steps: []plans.Step{p.Steps[0], {ID: "act2", Kind: "t.act", After: []string{"read"}, Terminal: true, Args: []plans.Arg{}}}}
	_, err = e.app.Replan(ctx, run.ID, run.Digest, succ, "read said so")
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "no replan once an untrusted value has been read (step read: argument body from the run's input at body)")

	// Somebody without plan.run may not replan, nor see the run.
	sc, err := plans.NewClient(e.API, plans.Config{Actor: sam, Clock: e.Clock})
	require.NoError(t, err)
	_, err = sc.Replan(ctx, run.ID, run.Digest, succ, "mine now")
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = sc.Get(ctx, run.ID)
	require.ErrorIs(t, err, db.ErrNotFound)
	steps, err := sc.Steps(ctx, run.ID)
	require.NoError(t, err)
	require.Empty(t, steps)
}

// TestCancelUnwinds: cancelling a running run cancels the steps not
// started and compensates what completed.
func TestCancelUnwinds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	p := plans.Plan{Steps: []plans.Step{
		{ID: "a", Kind: "t.a", Compensation: "t.undo", Args: []plans.Arg{}},
		{ID: "b", Kind: "t.b", After: []string{"a"}, Terminal: true, Args: []plans.Arg{}},
	}}
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: p})
	require.NoError(t, err)
	complete(t, e, run.ID, "a", `1`)
	got, err := e.app.Cancel(ctx, run.ID, "the customer withdrew")
	require.NoError(t, err)
	require.Equal(t, plans.Unwinding, got.Status)
	require.Contains(t, got.Failure, "the customer withdrew")
	steps, err := e.app.Steps(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.StepCompensating, steps[0].State)
	require.Equal(t, plans.StepCancelled, steps[1].State)
	// The compensation is an ordinary job; its success ends the unwind.
	jc, err := jobs.NewClient(e.API, jobs.Config{Project: project, Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	j, ok, err := jc.ClaimID(ctx, steps[0].CompensationJobID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	var args map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(j.Payload, &args))
	require.JSONEq(t, `1`, string(args["result"]), "a compensation gets what the step did")
	_, err = jc.Complete(ctx, j.Lease(), nil, nil)
	require.NoError(t, err)
	got, err = e.app.Get(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, plans.Compensated, got.Status)
	again, err := e.app.Cancel(ctx, run.ID, "again")
	require.NoError(t, err)
	require.Equal(t, plans.Compensated, again.Status, "cancelling an ended run is a no-op")
}

// TestAReplanIsCheckedAgainstWhatRan: a completed step a later version
// dropped keeps its id's definition. Bringing it back as another capability,
// with a new step behind it, is refused naming both capabilities, and
// changes nothing; bringing it back as it ran is accepted.
func TestAReplanIsCheckedAgainstWhatRan(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	a := plans.Step{ID: "a", Kind: "x.charge", Args: []plans.Arg{}}
	b := plans.Step{ID: "b", Kind: "x.book", After: []string{"a"}, Terminal: true, Args: []plans.Arg{}}
	v1 := plans.Plan{Steps: []plans.Step{a, b}}
	run, err := e.app.Start(ctx, plans.Start{Project: project, Plan: v1, InputTrusted: true, ReplanLimit: 3})
	require.NoError(t, err)
	complete(t, e, run.ID, "a", `{"charged": 100}`)

	v2 := plans.Plan{Steps: []plans.Step{{ID: "b", Kind: "x.book", Terminal: true, Args: []plans.Arg{}}}}
	r2, err := e.app.Replan(ctx, run.ID, run.Digest, v2, "the charge is settled elsewhere")
	require.NoError(t, err, "dropping a completed step is allowed")

	c := plans.Step{ID: "c", Kind: "x.ship", After: []string{"a"}, Args: []plans.Arg{{Name: "paid", Source: plans.StepResult("a")}}}
	v3 := plans.Plan{Steps: []plans.Step{{ID: "a", Kind: "x.verify", Args: []plans.Arg{}}, v2.Steps[0], c}}
	snapshot := func() string {
		return testkit.Snapshot(t, e.Pool, "docket.runs", "docket.run_versions", "docket.run_steps", "docket.jobs")
	}
	before := snapshot()
	_, err = e.app.Replan(ctx, run.ID, r2.Digest, v3, "verify instead")
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "step a is succeeded: a completed step is carried over unchanged or not at all")
	require.ErrorContains(t, err, "admitted as x.charge under version 1; the successor declares x.verify")
	require.Equal(t, before, snapshot(), "the refusal changed nothing: c was not admitted")

	// The same id with other dependencies is refused too.
	moved := plans.Plan{Steps: []plans.Step{{ID: "a", Kind: "x.charge", After: []string{"b"}, Args: []plans.Arg{}}, v2.Steps[0]}}
	_, err = e.app.Replan(ctx, run.ID, r2.Digest, moved, "charge after booking")
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.ErrorContains(t, err, "step a is succeeded")

	v4 := plans.Plan{Steps: []plans.Step{a, v2.Steps[0], c}}
	r4, err := e.app.Replan(ctx, run.ID, r2.Digest, v4, "ship after the charge")
	require.NoError(t, err, "the completed step carried over as it ran")
	require.Equal(t, 3, r4.Version)
	steps, err := e.app.Steps(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, "c", steps[len(steps)-1].StepID)
	require.JSONEq(t, `{"paid": {"charged": 100}}`, string(steps[len(steps)-1].Args))
}
