package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/lanes"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/schedules"
	"github.com/docket-dev/docket/tasks"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json with the shapes the read commands print")

// shape is the shape of a decoded JSON value: for an object, the shape of
// each member; for an array, that of its first element ([] when empty);
// else the name of its JSON type.
func shape(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = shape(x)
		}
		return out
	case []any:
		if len(v) == 0 {
			return []any{}
		}
		return []any{shape(v[0])}
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	panic(fmt.Sprintf("unexpected JSON value %T", v))
}

// requireGoldenShape requires out to be one JSON document of the shape in
// testdata/name.golden.json; -update writes it there.
func requireGoldenShape(t *testing.T, name, out string) {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(out))
	require.NoError(t, dec.Decode(&v), "%s: %s", name, out)
	require.False(t, dec.More(), "%s: one document", name)
	got, err := json.MarshalIndent(shape(v), "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "%s: run go test ./cmd/docket -update to write it", path)
	require.JSONEq(t, string(want), string(got), "%s: the shape of the JSON changed; its fields are documented in "+
		"docs/operators.md (add fields, never rename or remove one), then run go test ./cmd/docket -update", name)
}

// world is a database with one of each thing the read commands read, in
// project acme.
type world struct {
	harness
	job, lane, kase, schedule, task, run, batch int64
}

func setupWorld(t *testing.T) world {
	t.Helper()
	ctx := t.Context()
	h := setup(t,
		testkit.Grants(app, project, access.JobCreate, access.JobClaim, access.CaseAdmit, access.MessageDeliver,
			access.CaseSweep, access.ScheduleManage, access.PlanRun, access.BatchRun),
		testkit.Grants(ana, project, access.QuorumCreate, access.JobCancel, access.JobReconcile, access.QueuePause),
		testkit.Grants(vic, project, access.CaseView, access.LaneView, access.ScheduleView),
		testkit.Grants(rita, project, access.TaskReview),
		testkit.Grants(pat, project, access.TaskReview))
	h.Clock.Set(time.Now().UTC().Truncate(time.Second))
	w := world{harness: h}

	jc, err := jobs.NewClient(h.Pool, jobs.Config{Project: project, Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	e, err := jc.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: json.RawMessage(`{"order": 7}`)})
	require.NoError(t, err)
	w.job = e.Job.ID
	// A paused queue, for queue list and show; default stays running.
	_, err = jc.Enqueue(ctx, jobs.Spec{Kind: "mail.send", Queue: "mail", Payload: json.RawMessage(`{}`)})
	require.NoError(t, err)
	qc, err := jobs.NewClient(h.Pool, jobs.Config{Project: project, Actor: ana, Clock: h.Clock})
	require.NoError(t, err)
	_, err = qc.PauseQueue(ctx, "mail", "relay down")
	require.NoError(t, err)

	laneAs := func(actor access.Actor) *lanes.Client {
		lc, err := lanes.NewClient(h.Pool, lanes.Config{Actor: actor, Clock: h.Clock})
		require.NoError(t, err)
		return lc
	}
	q, err := laneAs(ana).CreateQuorum(ctx, lanes.QuorumSpec{Project: project, Name: "web", Conductor: "user:cora"})
	require.NoError(t, err)
	l, err := laneAs("user:cora").Create(ctx, lanes.Spec{Quorum: q.ID, Name: "login", Branch: "feature/login",
		Assignee: "user:bo", Task: "WEB-42"})
	require.NoError(t, err)
	w.lane = l.ID
	_, err = jc.Enqueue(ctx, jobs.Spec{Kind: "build.run", Payload: json.RawMessage(`{}`), LaneID: l.ID})
	require.NoError(t, err)

	cc, err := cases.NewClient(h.Pool, cases.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	doc := cases.Key{Namespace: "document", Value: "DOC-1"}
	a, err := cc.Admit(ctx, cases.Admission{Project: project, Kind: "supplier.switch", Keys: []cases.Key{doc}})
	require.NoError(t, err)
	w.kase = a.Case.ID
	_, err = cc.RegisterObligation(ctx, a.Case.ID, cases.ObligationSpec{Name: "ack", Due: h.Clock.Now().Add(time.Hour),
		Escalation: &cases.Escalation{Kind: "case.escalate"}})
	require.NoError(t, err)
	_, err = cc.Await(ctx, a.Case.ID, cases.WaitSpec{Name: "reply", Keys: []cases.Key{doc}, Deadline: h.Clock.Now().Add(48 * time.Hour),
		OnArrival: cases.Continuation{Kind: "supplier.reply"}, OnTimeout: &cases.Continuation{Kind: "supplier.chase"}})
	require.NoError(t, err)
	_, err = cc.Deliver(ctx, cases.Delivery{Project: project, Producer: "supplier:4711", MessageID: "m-lost",
		Keys: []cases.Key{{Namespace: "document", Value: "DOC-404"}}, Payload: json.RawMessage(`{}`)})
	require.NoError(t, err)
	_, err = h.Pool.Exec(ctx, `SELECT docket.message_dead_letter_due(100, interval '1 minute', $1, $2)`, string(app),
		h.Clock.Now().Add(time.Hour))
	require.NoError(t, err)

	sc, err := schedules.NewClient(h.Pool, schedules.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	s, err := sc.Create(ctx, schedules.Spec{Project: project, Name: "nightly", Cron: "30 2 * * *", Zone: "Europe/Berlin",
		Job:       schedules.Job{Kind: "report.nightly", Payload: json.RawMessage(`{}`)},
		Unbounded: true, UnboundedReason: "the nightly report runs for as long as the service"})
	require.NoError(t, err)
	w.schedule = s.ID

	ta, err := cc.Admit(ctx, cases.Admission{Project: project, Kind: "payment.release",
		Keys: []cases.Key{{Namespace: "payment", Value: "P-1"}}})
	require.NoError(t, err)
	opener, err := tasks.NewClient(h.API, tasks.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	o, err := opener.Open(ctx, ta.Case.ID, tasks.Spec{Key: "P-1", Title: "Release payment P-1", Summary: "4,200 EUR",
		Proposal: json.RawMessage(`{"amount_minor": 420000}`), Evidence: json.RawMessage(`{"invoice": "INV-1"}`),
		Decisions: []string{"approve", "reject"}, AudienceCapabilities: []access.Capability{access.TaskReview},
		Proposer: pat, Deadline: h.Clock.Now().Add(24 * time.Hour),
		Expiry:       tasks.Escalate([]access.Actor{"user:boss"}, nil, 48*time.Hour),
		Continuation: cases.Continuation{Kind: "payment.decided"}})
	require.NoError(t, err)
	w.task = o.Task.ID

	pc, err := plans.NewClient(h.API, plans.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	run, err := pc.Start(ctx, plans.Start{Project: project, Plan: plans.Plan{Steps: []plans.Step{
		{ID: "a", Kind: "t.a", Args: []plans.Arg{{Name: "order", Source: plans.Input("order")}}},
		{ID: "b", Kind: "t.b", After: []string{"a"}, Terminal: true, Args: []plans.Arg{{Name: "a", Source: plans.StepResult("a")}}},
	}}, Input: json.RawMessage(`{"order": 7}`), InputTrusted: true})
	require.NoError(t, err)
	w.run = run.ID

	bc, err := batches.NewClient(h.API, batches.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	b, err := bc.Open(ctx, project, "nightly", batchWork)
	require.NoError(t, err)
	_, err = bc.Admit(ctx, b.ID, []batches.Item{{Key: "k1", Input: json.RawMessage(`{"n": 1}`), Trusted: true}}, false)
	require.NoError(t, err)
	w.batch = b.ID
	return w
}

// Every read command prints, with -o json (and its other spellings), one
// JSON document of the shape its golden file keeps.
func TestReadCommandsJSON(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	for _, tc := range []struct {
		golden string
		as     access.Actor
		args   []string
	}{
		{"status", ana, []string{"status"}},
		{"status-check", ana, []string{"status", "--check"}},
		{"version", ana, []string{"version"}},
		{"project-list", ana, []string{"project", "list"}},
		{"grant-list", ana, []string{"grant", "list", project}},
		{"actor-list", ana, []string{"actor", "list"}},
		{"job-list", ana, []string{"job", "list", project}},
		{"job-census", ana, []string{"job", "census", project}},
		{"job-show", ana, []string{"job", "show", id(w.job)}},
		{"queue-list", ana, []string{"queue", "list", project}},
		{"queue-show", ana, []string{"queue", "show", project, "mail"}},
		{"lane-list", vic, []string{"lane", "list", project}},
		{"lane-show", vic, []string{"lane", "show", id(w.lane)}},
		{"case-list", vic, []string{"case", "list", project}},
		{"case-show", vic, []string{"case", "show", id(w.kase)}},
		{"wait-list", vic, []string{"wait", "list", project}},
		{"dead-letter-list", vic, []string{"dead-letter", "list", project}},
		{"schedule-list", vic, []string{"schedule", "list", project}},
		{"schedule-preview", vic, []string{"schedule", "preview", id(w.schedule), "--count", "2"}},
		{"schedule-preview", vic, []string{"schedule", "preview", "0 * * * *", "Europe/Berlin", "--count", "2"}},
		{"task-list", rita, []string{"task", "list", project}},
		{"task-show", rita, []string{"task", "show", id(w.task)}},
		{"plan-list", vic, []string{"plan", "list", project}},
		{"plan-show", vic, []string{"plan", "show", id(w.run)}},
		{"batch-list", vic, []string{"batch", "list", project}},
		{"batch-show", vic, []string{"batch", "show", id(w.batch)}},
	} {
		var outs []string
		for _, spelling := range [][]string{{"-o", "json"}, {"--output", "json"}, {"--output=json"}, {"--json"}} {
			args := append(slices.Clone(tc.args), spelling...)
			r := w.as(t, tc.as, args...)
			require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
			requireGoldenShape(t, tc.golden, r.stdout)
			outs = append(outs, r.stdout)
		}
		// The text form is something else; the spellings agree.
		r := w.as(t, tc.as, tc.args...)
		require.Equal(t, exitOK, r.code, "%v: %s", tc.args, r.stderr)
		require.False(t, json.Valid([]byte(r.stdout)), "%v: text by default", tc.args)
		for _, out := range outs[1:] {
			require.Equal(t, outs[0], out, "%v", tc.args)
		}
	}

	// No claim token, payload of a dead letter or state of a case is
	// printed.
	r := w.as(t, vic, "cases", "show", id(w.kase), "-o", "json")
	var kase struct{ Case map[string]any }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &kase))
	require.Contains(t, kase.Case, "state_bytes")
	require.NotContains(t, kase.Case, "state")
	r = w.as(t, vic, "dead-letters", project, "-o", "json")
	require.NotContains(t, r.stdout, "payload")
	r = w.as(t, ana, "job", "show", id(w.job), "-o", "json")
	require.NotContains(t, r.stdout, "token")
	var doc jobShowDoc
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	require.Equal(t, w.job, doc.Job.ID)
	require.JSONEq(t, `{"order": 7}`, string(doc.Job.Payload))
	require.True(t, doc.Verification.OK)

	// Every read command the usage marks with -o json is in the table.
	var covered []string
	for _, h := range helps {
		if strings.Contains(h.args, "-o json") {
			covered = append(covered, h.name)
		}
	}
	golden, err := filepath.Glob("testdata/*.golden.json")
	require.NoError(t, err)
	names := map[string]bool{}
	for _, g := range golden {
		names[strings.TrimSuffix(filepath.Base(g), ".golden.json")] = true
	}
	for _, c := range covered {
		require.True(t, names[strings.ReplaceAll(c, " ", "-")], "%s has -o json but no golden shape: %v", c, slices.Sorted(maps.Keys(names)))
	}
}

// -o json prints every field, a field without a value too: null for an
// instant or object that is absent, 0, "" or [] for the others, so that a
// reader need not tell a missing field from an empty one.
func TestJSONPrintsEmptyFields(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	read := func(as access.Actor, args ...string) map[string]any {
		t.Helper()
		r := w.as(t, as, append(args, "-o", "json")...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
		return doc
	}
	requireFields := func(obj any, want map[string]any) {
		t.Helper()
		m, ok := obj.(map[string]any)
		require.True(t, ok, "%v", obj)
		for k, v := range want {
			require.Contains(t, m, k)
			require.Equal(t, v, m[k], k)
		}
	}

	// A running run without a case, ceilings, output or failure; its
	// steps not yet run.
	doc := read(vic, "plan", "show", id(w.run))
	requireFields(doc["run"], map[string]any{"case_id": float64(0), "suspended": false, "untrusted_read": "",
		"output": nil, "failure": "", "budget": nil, "finished_at": nil})
	steps := doc["steps"].([]any)
	require.NotEmpty(t, steps)
	requireFields(steps[len(steps)-1], map[string]any{"result": nil, "compensation": "", "compensation_job_id": float64(0),
		"reason": ""})
	requireFields(doc["versions"].([]any)[0], map[string]any{"predecessor": "", "reason": ""})
	doc = read(vic, "plan", "list", project)
	requireFields(doc["runs"].([]any)[0], map[string]any{"budget": nil, "output": nil, "failure": ""})

	// A queued job: no lease, not finished, retrying none.
	doc = read(ana, "job", "show", id(w.job))
	requireFields(doc["job"], map[string]any{"lease_expires_at": nil, "finished_at": nil, "retry_of": float64(0),
		"claimed_by": "", "result": nil})
	requireFields(doc, map[string]any{"completion": nil, "retries": []any{}})

	// An open case, not closed; a batch still reading its source, and an
	// item in flight, with neither a reason nor a settlement.
	doc = read(vic, "case", "show", id(w.kase))
	requireFields(doc["case"], map[string]any{"closed_at": nil})
	doc = read(vic, "batch", "show", id(w.batch))
	requireFields(doc["batch"], map[string]any{"finished_at": nil, "cursor": ""})
	requireFields(doc["items"].([]any)[0], map[string]any{"reason": "", "settled_at": nil})

	// An empty list is [], never null.
	doc = read(vic, "case", "list", project, "--status", "closed")
	requireFields(doc, map[string]any{"cases": []any{}})
	doc = read(ana, "plan", "list", project, "--before", "1")
	requireFields(doc, map[string]any{"runs": []any{}})
}
