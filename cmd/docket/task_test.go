package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/tasks"
)

// The people of the task tests: pat proposes, the work acts for root, rita
// and rob review; all four hold task.review on acme. svc:app admits the
// cases and opens the tasks, and so may not answer them either; vic views
// acme's cases; user:sam holds nothing.
const (
	pat  access.Actor = "user:pat"
	root access.Actor = "user:root"
	rita access.Actor = "user:rita"
	rob  access.Actor = "user:rob"
	sam  access.Actor = testkit.Sam
)

// desk is a database with the task tests' grants, and app's clients to open
// tasks with.
type desk struct {
	harness
	cases  *cases.Client
	opener *tasks.Client
}

// setupDesk returns a fresh desk. Its clock is set to about now: the
// command reads the system clock.
func setupDesk(t *testing.T) desk {
	t.Helper()
	c := setup(t,
		testkit.Grants(app, project, access.CaseAdmit, access.JobCreate),
		testkit.Grants(pat, project, access.TaskReview),
		testkit.Grants(root, project, access.TaskReview),
		testkit.Grants(rita, project, access.TaskReview),
		testkit.Grants(rob, project, access.TaskReview),
		testkit.Grants(vic, project, access.CaseView))
	c.Clock.Set(time.Now().UTC().Truncate(time.Second))
	d := desk{harness: c}
	var err error
	d.cases, err = cases.NewClient(c.API, cases.Config{Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	d.opener = d.tasksAs(t, app)
	return d
}

// tasksAs is a tasks client acting as actor on the desk's clock.
func (d desk) tasksAs(t *testing.T, actor access.Actor) *tasks.Client {
	t.Helper()
	cl, err := tasks.NewClient(d.API, tasks.Config{Actor: actor, Clock: d.Clock})
	require.NoError(t, err)
	return cl
}

// open admits a case under key and opens on it a four-eyes approval of a
// payment, proposed by pat for root, due a day from now, escalating to
// user:boss; edit, when given, changes the spec first.
func (d desk) open(t *testing.T, key string, edit func(*tasks.Spec)) tasks.Task {
	t.Helper()
	ctx := t.Context()
	a, err := d.cases.Admit(ctx, cases.Admission{Project: project, Kind: "payment.release",
		Keys: []cases.Key{{Namespace: "payment", Value: key}}})
	require.NoError(t, err)
	s := tasks.Spec{
		Key: key, Title: "Release payment " + key,
		Summary:   "A supplier asks for 4,200 EUR.\nThe invoice matches the purchase order.",
		Proposal:  json.RawMessage(`{"amount_minor": 420000, "currency": "EUR", "supplier": "Müller & Söhne <GmbH>"}`),
		Evidence:  json.RawMessage(`{"invoice": "INV-1", "remark": "<script>alert(1)</script>"}`),
		Decisions: []string{"approve", "reject"}, AudienceCapabilities: []access.Capability{access.TaskReview},
		Proposer: pat, ActingFor: []access.Actor{root}, Deadline: d.Clock.Now().Add(24 * time.Hour),
		Expiry:       tasks.Escalate([]access.Actor{"user:boss"}, nil, 48*time.Hour),
		Continuation: cases.Continuation{Kind: "payment.decided"},
	}
	if edit != nil {
		edit(&s)
	}
	o, err := d.opener.Open(ctx, a.Case.ID, s)
	require.NoError(t, err)
	return o.Task
}

// snapshot renders every table a task call writes.
func (d desk) snapshot(t *testing.T) string {
	t.Helper()
	return testkit.Snapshot(t, d.Pool, "docket.tasks", "docket.task_events", "docket.waits(id, status)",
		"docket.messages(id, status)", "docket.jobs(id, state)")
}

func TestTaskCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := setupDesk(t)
	first := d.open(t, "P-1", nil)
	second := d.open(t, "P-2", func(s *tasks.Spec) {
		s.Deadline = d.Clock.Now().Add(2 * time.Hour)
		s.Expiry = tasks.DecideAutomatically("reject")
	})
	_, err := d.tasksAs(t, rita).Claim(ctx, second.ID, time.Hour)
	require.NoError(t, err)
	row := func(task tasks.Task, holder string) string {
		return fmt.Sprintf(`(?m)^%d\s+Release payment %s\s+pending\s+%s\s+%s$`, task.ID, task.Key,
			regexp.QuoteMeta(task.Deadline.Format(time.RFC3339)), regexp.QuoteMeta(holder))
	}

	// rita's worklist: what she holds and what she may take, soonest
	// deadline first.
	r := d.as(t, rita, "tasks", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^ID\s+TITLE\s+STATUS\s+DEADLINE\s+CLAIMED BY\n`, r.stdout)
	requireRowsInOrder(t, r.stdout, row(second, string(rita)), row(first, "-"))
	require.Equal(t, 3, strings.Count(r.stdout, "\n"), r.stdout)

	// --mine: only what she holds, the flag before or after the project.
	for _, args := range [][]string{{"tasks", "--mine", project}, {"tasks", project, "--mine"}} {
		r = d.as(t, rita, args...)
		require.Equal(t, 0, r.code, r.stderr)
		require.Regexp(t, row(second, string(rita)), r.stdout)
		require.Equal(t, 2, strings.Count(r.stdout, "\n"), "%v: %s", args, r.stdout)
	}

	// rob may take the first only; the proposer, the one the work acts for
	// and a stranger are offered nothing.
	r = d.as(t, rob, "tasks", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, row(first, "-"), r.stdout)
	require.Equal(t, 2, strings.Count(r.stdout, "\n"), r.stdout)
	for _, who := range []access.Actor{pat, root, sam} {
		r = d.as(t, who, "tasks", project)
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, 1, strings.Count(r.stdout, "\n"), "%s: %s", who, r.stdout)
	}
	r = d.as(t, rob, "tasks", "--limit", "1", "--mine", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, "\n"), r.stdout)

	// task show: what is to be decided, who may not answer it, the claim
	// and the history.
	r = d.as(t, rob, "task", "show", fmt.Sprint(second.ID))
	require.Equal(t, 0, r.code, r.stderr)
	for _, re := range []string{
		fmt.Sprintf(`(?m)^task\s+%d$`, second.ID),
		`(?m)^project\s+acme$`,
		fmt.Sprintf(`(?m)^case\s+%d \(key P-2\)$`, second.CaseID),
		`(?m)^title\s+Release payment P-2$`,
		`(?m)^status\s+pending$`,
		`(?m)^deadline\s+\S+ \(due in (1h59m\d+s|2h0m0s)\)$`,
		`(?m)^at the deadline\s+decides reject automatically, as its opening by svc:app signed$`,
		`(?m)^decisions\s+approve, reject$`,
		`(?m)^audience\s+holders of task.review on acme$`,
		`(?m)^proposer\s+user:pat$`,
		`(?m)^acting for\s+user:root$`,
		`(?m)^may not answer\s+svc:app, user:pat, user:root \(four eyes\)$`,
		`(?m)^claimed by\s+user:rita until \S+$`,
		`(?m)^opened\s+\S+ by svc:app$`,
		`(?m)^summary\s+A supplier asks for 4,200 EUR. The invoice matches the purchase order.$`,
		`(?m)^proposal\s+\{"currency": "EUR", "supplier": "Müller & Söhne <GmbH>", "amount_minor": 420000\}$`,
		`(?m)^evidence\s+\{"remark": "<script>alert\(1\)</script>", "invoice": "INV-1"\}$`,
		`(?m)^AT\s+WHAT\s+ACTOR\s+DETAIL$`,
		`(?m)^\S+\s+opened\s+svc:app\s+\{.*"on_expiry":"decide".*\}$`,
		`(?m)^\S+\s+claimed\s+user:rita\s+\{"until":"\S+"\}$`,
	} {
		require.Regexp(t, re, r.stdout)
	}
	require.NotContains(t, r.stdout, "decided")

	// Decided, with a note that would drive the terminal: shown, not obeyed.
	_, err = d.tasksAs(t, rita).Decide(ctx, second.ID, "approve", "checked\x1b[2J the\u202e invoice")
	require.NoError(t, err)
	r = d.as(t, pat, "task", "show", fmt.Sprint(second.ID))
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^status\s+decided$`, r.stdout)
	require.Regexp(t, `(?m)^deadline\s+\S+$`, r.stdout)
	require.Regexp(t, `(?m)^decided\s+approve by user:rita at \S+$`, r.stdout)
	require.Regexp(t, `(?m)^note\s+checked\x{FFFD}\[2J the\x{FFFD} invoice$`, r.stdout)
	require.Regexp(t, `(?m)^claimed by\s+-$`, r.stdout)
	require.Regexp(t, `(?m)^\S+\s+decided\s+user:rita\s+\{.*"decision":"approve".*\}$`, r.stdout)
	require.NotContains(t, r.stdout, "\x1b")
	require.NotContains(t, r.stdout, "\u202e")

	// Refusals: one line, exit 1.
	for _, args := range [][]string{
		{"--as", string(sam), "task", "show", fmt.Sprint(first.ID)}, // may not see it
		{"--as", string(rita), "task", "show", "999999"},
		{"--as", "nobody", "tasks", project},
		{"--as", "nobody", "task", "show", fmt.Sprint(first.ID)},
	} {
		requireRefused(t, d.run(t, args...), exitError, args)
	}
	r = d.as(t, sam, "task", "show", fmt.Sprint(first.ID))
	require.Contains(t, r.stderr, "not found")
	require.NotContains(t, r.stderr, "Release payment")

	// A wrong command line exits 2 before connecting.
	requireUsageErrors(t, [][]string{
		{"tasks"},
		{"tasks", "acme", "other"},
		{"tasks", "--limit", "0", "acme"},
		{"tasks", "--limit", "1001", "acme"},
		{"tasks", "--mine=maybe", "acme"},
		{"tasks", "--frob", "acme"},
		{"task"},
		{"task", "frob"},
		{"task", "show"},
		{"task", "show", "x"},
		{"task", "show", "0"},
		{"task", "show", "1", "2"},
	})
}
