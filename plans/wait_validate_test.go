package plans_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/plans"
)

// TestWaitingStepsValidate: a well-formed waiting step of each type
// validates (with a deployment that knows no wait kind), its kind is filled
// in by the canonical form, and a plan without waiting steps keeps its
// digest; malformed ones are refused, each problem named.
func TestWaitingStepsValidate(t *testing.T) {
	good := plan(
		st("a"),
		plans.Step{ID: "nap", After: []string{"a"}, Wait: plans.Sleep(72 * time.Hour)},
		plans.Step{ID: "paid", After: []string{"a"}, Wait: plans.AwaitMessage("payment", "order", plans.StepPath("a", "order"), time.Hour)},
		plans.Step{ID: "ok", After: []string{"nap", "paid"}, Terminal: true, Wait: plans.Approval(plans.TaskSpec{
			Title: "Approve", Decisions: []string{"approve", "reject"}, Audience: []access.Actor{"user:bo"},
			Within: time.Hour, AutoDecision: "reject"})},
	)
	require.Empty(t, plans.Validate(good, knownKinds, plans.Limits{}))
	require.Contains(t, string(plans.Canonical(good)), `"kind":"docket.wait.sleep"`)
	require.NotContains(t, string(plans.Canonical(diamond())), `"wait"`, "a plan of jobs is written as before")

	bad := plan(
		term(st("a")),
		plans.Step{ID: "both", Wait: &plans.Wait{Type: plans.WaitSleep, For: 60, Until: new(time.Time)}},
		plans.Step{ID: "comp", Compensation: "test.undo", Wait: plans.Sleep(time.Minute)},
		plans.Step{ID: "kind", Kind: "test.run", Wait: plans.Sleep(time.Minute)},
		plans.Step{ID: "far", Wait: plans.AwaitMessage("payment", "order", plans.StepResult("a"), time.Hour)},
		plans.Step{ID: "nodeadline", Wait: plans.AwaitMessage("payment", "order", plans.Input("o"), 0)},
		plans.Step{ID: "policy", Wait: plans.Approval(plans.TaskSpec{Title: "x", Decisions: []string{"yes"},
			Audience: []access.Actor{"user:bo"}, Within: time.Hour, AutoDecision: "no"})},
		plans.Step{ID: "what", Wait: &plans.Wait{Type: "nap"}},
	)
	problems := plans.Validate(bad, knownKinds, plans.Limits{})
	var got []string
	for _, p := range problems {
		if p.Class == plans.ProblemInvalidWait {
			got = append(got, p.Step)
		}
	}
	slices.Sort(got)
	require.Equal(t, []string{"both", "comp", "far", "kind", "nodeadline", "policy", "what"}, slices.Compact(got),
		"problems: %v", problems)
	for _, p := range problems {
		if p.Step == "far" {
			require.True(t, strings.Contains(p.Reason, "not a direct predecessor"), p.Reason)
		}
	}
}
