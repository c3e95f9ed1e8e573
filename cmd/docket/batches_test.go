package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
)

// batchWork is the plan every item of the batches tests runs: one step,
// reading the item's input.
var batchWork = plans.Plan{Steps: []plans.Step{
	{ID: "work", Kind: "t.work", Terminal: true, Args: []plans.Arg{{Name: "n", Source: plans.Input("n")}}},
}}

// batchItemKey is item n's key: zero-padded, so byte order is numeric order.
func batchItemKey(n int) string { return fmt.Sprintf("k%06d", n) }

// batchesEnv is a batches test's database, with svc:app running batches
// and their steps' jobs, and user:vic viewing acme's cases, and so its
// batches.
type batchesEnv struct {
	harness
	batches *batches.Client
	plans   *plans.Client
	jobs    *jobs.Client
}

func setupBatches(t *testing.T) batchesEnv {
	t.Helper()
	h := setup(t,
		testkit.Grants(app, project, access.BatchRun, access.PlanRun, access.JobCreate, access.JobClaim),
		testkit.Grants(vic, project, access.CaseView))
	e := batchesEnv{harness: h}
	var err error
	e.batches, err = batches.NewClient(h.API, batches.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	e.plans, err = plans.NewClient(h.API, plans.Config{Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	e.jobs, err = jobs.NewClient(h.API, jobs.Config{Project: project, Actor: app, Clock: h.Clock})
	require.NoError(t, err)
	return e
}

// settle claims the job of item a's step by id and completes it, or, when
// failure is not empty, fails it for good with that diagnostic.
func (e batchesEnv) settle(t *testing.T, a batches.Admitted, failure string) {
	t.Helper()
	ctx := t.Context()
	steps, err := e.plans.Steps(ctx, a.RunID)
	require.NoError(t, err)
	require.Len(t, steps, 1, "item %s", a.Key)
	j, ok, err := e.jobs.ClaimID(ctx, steps[0].JobID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok, "item %s: job %d claimable", a.Key, steps[0].JobID)
	if failure != "" {
		_, err = e.jobs.Fail(ctx, j.Lease(), jobs.Failure{Class: jobs.ClassPermanent, Diagnostic: failure})
	} else {
		_, err = e.jobs.Complete(ctx, j.Lease(), json.RawMessage(`{"ok": true}`), nil)
	}
	require.NoError(t, err)
}

// TestBatchesShow: a page of six items, the first over 64 KiB and so
// quarantined; two succeed, one fails for good with a diagnostic full of
// terminal controls, two are in flight. batches show prints the batch, its
// census and the items nobody is finished with, in pages.
func TestBatchesShow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupBatches(t)
	b, err := e.batches.Open(ctx, project, "nightly", batchWork)
	require.NoError(t, err)
	huge := json.RawMessage(fmt.Sprintf(`{"blob": "%s"}`, strings.Repeat("x", 70000)))
	page := []batches.Item{{Key: batchItemKey(0), Input: huge}}
	for n := 1; n <= 5; n++ {
		page = append(page, batches.Item{Key: batchItemKey(n), Input: json.RawMessage(fmt.Sprintf(`{"n": %d}`, n)), Trusted: true})
	}
	items, err := e.batches.Admit(ctx, b.ID, page, false)
	require.NoError(t, err)
	require.Equal(t, batches.Quarantined, items[0].Status)
	e.settle(t, items[1], "")
	e.settle(t, items[2], "")
	e.settle(t, items[3], "the meter\x1b[2J is gone\u202e")

	id := fmt.Sprint(b.ID)
	digest := plans.Digest(batchWork)
	run := func(n int) string { return fmt.Sprint(items[n].RunID) }
	r := e.as(t, app, "batches", "show", id)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("batches show %s:\n%s", id, r.stdout)
	requireLines(t, r.stdout,
		`batch\s+`+id,
		`project\s+acme`,
		`name\s+nightly`,
		`status\s+running`,
		`plan\s+`+digest[:12],
		`digest\s+`+digest,
		`source\s+not read to its end`,
		`last key\s+k000005`,
		`cursor\s+k000003`,
		`created\s+\S+ by svc:app`,
		`finished\s+-`,
		`items\s+6`,
		`in flight\s+2`,
		`exhausted\s+0`,
		`succeeded\s+2`,
		`failed\s+1`,
		`quarantined\s+1`,
		`needs attention: yes`,
		`items failed, quarantined or in flight, oldest key first:`,
		`KEY\s+STATUS\s+RUN\s+REASON`,
		`k000000\s+quarantined\s+-\s+refused at admission: its input is \d+ characters of JSON, over 65536`,
		`k000003\s+failed\s+`+run(3)+`\s+run `+run(3)+` \w+: .*the meter\x{FFFD}\[2J is gone\x{FFFD}.*`,
		`k000004\s+reserved\s+`+run(4)+`\s+-`,
		`k000005\s+reserved\s+`+run(5)+`\s+-`,
	)
	require.NotContains(t, r.stdout, "k000001")
	require.NotContains(t, r.stdout, "\x1b")
	require.NotContains(t, r.stdout, "\u202e")
	require.NotContains(t, r.stdout, "… and more")

	// A viewer of acme's cases reads it too, the same.
	rv := e.as(t, vic, "batches", "show", id)
	require.Equal(t, 0, rv.code, rv.stderr)
	require.Equal(t, r.stdout, rv.stdout)

	// Pages: a full page says how to read on; a full page with nothing
	// after it does not.
	r = e.as(t, app, "batches", "show", "--limit", "2", id)
	require.Equal(t, 0, r.code, r.stderr)
	requireLines(t, r.stdout, `k000000\s+quarantined.*`, `k000003\s+failed.*`,
		`… and more: docket batch show `+id+` --after k000003 --limit 2`)
	require.NotContains(t, r.stdout, "k000004")
	r = e.as(t, app, "batches", "show", id, "--after", "k000003", "--limit", "2")
	require.Equal(t, 0, r.code, r.stderr)
	requireLines(t, r.stdout, `k000004\s+reserved.*`, `k000005\s+reserved.*`)
	require.NotContains(t, r.stdout, "k000003  ")
	require.NotContains(t, r.stdout, "… and more")
	r = e.as(t, app, "batches", "show", "--after", "k000004", id)
	require.Equal(t, 0, r.code, r.stderr)
	requireLines(t, r.stdout, `k000005\s+reserved.*`)
	require.Equal(t, 1, strings.Count(r.stdout, "reserved"))

	// --json: the batch, its census and the page, whole, controls escaped.
	r = e.as(t, app, "batches", "show", "--json", "--limit", "3", id)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `is gone\u202e`, "bidirectional formatting escaped")
	require.NotContains(t, r.stdout, "\u202e")
	var doc struct {
		Batch struct {
			ID         int64   `json:"id"`
			Project    string  `json:"project"`
			Name       string  `json:"name"`
			Digest     string  `json:"digest"`
			Status     string  `json:"status"`
			SourceDone bool    `json:"source_done"`
			LastKey    string  `json:"last_key"`
			Cursor     string  `json:"cursor"`
			CreatedBy  string  `json:"created_by"`
			FinishedAt *string `json:"finished_at"`
		} `json:"batch"`
		Census map[string]any `json:"census"`
		Items  []struct {
			Key     string `json:"key"`
			Status  string `json:"status"`
			RunID   int64  `json:"run_id"`
			Trusted bool   `json:"trusted"`
			Reason  string `json:"reason"`
		} `json:"items"`
		More bool `json:"more"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	require.Equal(t, b.ID, doc.Batch.ID)
	require.Equal(t, "nightly", doc.Batch.Name)
	require.Equal(t, digest, doc.Batch.Digest)
	require.Equal(t, "running", doc.Batch.Status)
	require.False(t, doc.Batch.SourceDone)
	require.Equal(t, []string{"k000005", "k000003"}, []string{doc.Batch.LastKey, doc.Batch.Cursor})
	require.Equal(t, "svc:app", doc.Batch.CreatedBy)
	require.Nil(t, doc.Batch.FinishedAt)
	require.Equal(t, map[string]any{"items": 6.0, "in_flight": 2.0, "exhausted": 0.0, "succeeded": 2.0, "failed": 1.0, "quarantined": 1.0,
		"needs_attention": true}, doc.Census)
	require.Len(t, doc.Items, 3)
	require.Equal(t, []string{"k000000", "quarantined"}, []string{doc.Items[0].Key, doc.Items[0].Status})
	require.Zero(t, doc.Items[0].RunID)
	require.False(t, doc.Items[0].Trusted)
	require.Equal(t, []string{"k000003", "failed"}, []string{doc.Items[1].Key, doc.Items[1].Status})
	require.Equal(t, items[3].RunID, doc.Items[1].RunID)
	require.True(t, doc.Items[1].Trusted)
	require.Contains(t, doc.Items[1].Reason, "the meter\x1b[2J is gone\u202e", "the reason whole")
	require.Equal(t, items[4].RunID, doc.Items[2].RunID)
	require.True(t, doc.More)

	// The rest settle and the source ends: completed, and still needing
	// attention for the failed and the quarantined item.
	e.settle(t, items[4], "")
	e.settle(t, items[5], "")
	_, err = e.batches.Admit(ctx, b.ID, []batches.Item{}, true)
	require.NoError(t, err)
	r = e.as(t, app, "batches", "show", id)
	require.Equal(t, 0, r.code, r.stderr)
	requireLines(t, r.stdout,
		`status\s+completed`,
		`source\s+read to its end`,
		`cursor\s+k000005`,
		`finished\s+\S+Z`,
		`in flight\s+0`,
		`succeeded\s+4`,
		`needs attention: yes`,
	)
	require.NotContains(t, r.stdout, "reserved")

	// Refusals: a batch the actor may not read, or none, or an actor that
	// is no actor: one line, exit 1, nothing of the batch shown.
	for _, args := range [][]string{
		{"--as", string(sam), "batches", "show", id},
		{"--as", string(sam), "batches", "show", "--json", id},
		{"--as", string(app), "batches", "show", "999999"},
		{"--as", "nobody", "batches", "show", id},
	} {
		r := e.run(t, args...)
		requireRefused(t, r, exitError, args)
		require.NotContains(t, r.stderr, "nightly")
	}
	r = e.as(t, sam, "batches", "show", id)
	require.Equal(t, fmt.Sprintf("docket batch show: batch.get: batch %s not found or not visible to %s\n", id, sam), r.stderr)
}

// TestBatchesShowAllWell: a batch whose every item succeeded needs no
// attention and lists none.
func TestBatchesShowAllWell(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupBatches(t)
	b, err := e.batches.Open(ctx, project, "small", batchWork)
	require.NoError(t, err)
	items, err := e.batches.Admit(ctx, b.ID, []batches.Item{{Key: "only", Input: json.RawMessage(`{"n": 1}`)}}, true)
	require.NoError(t, err)
	e.settle(t, items[0], "")
	r := e.as(t, app, "batches", "show", fmt.Sprint(b.ID))
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("batches show %d:\n%s", b.ID, r.stdout)
	requireLines(t, r.stdout,
		`status\s+completed`,
		`source\s+read to its end`,
		`last key\s+only`,
		`cursor\s+only`,
		`items\s+1`,
		`succeeded\s+1`,
		`failed\s+0`,
		`quarantined\s+0`,
		`needs attention: no`,
		`no item is failed, quarantined or in flight`,
	)
	require.NotContains(t, r.stdout, "KEY")
	r = e.as(t, app, "batches", "show", "--json", fmt.Sprint(b.ID))
	require.Equal(t, 0, r.code, r.stderr)
	var doc struct {
		Census struct {
			NeedsAttention bool `json:"needs_attention"`
		} `json:"census"`
		Items []json.RawMessage `json:"items"`
		More  bool              `json:"more"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	require.False(t, doc.Census.NeedsAttention)
	require.NotNil(t, doc.Items)
	require.Empty(t, doc.Items)
	require.False(t, doc.More)
}

// TestShellWord: the key batches show offers to read on after is one word
// of a shell command line, whatever it holds, and shows no character a
// terminal would act on.
func TestShellWord(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"k000003":            "k000003",
		"orders/2024-01:7":   "orders/2024-01:7",
		"a b":                "'a b'",
		"it's":               `'it'\''s'`,
		"$(rm -rf /)":        "'$(rm -rf /)'",
		"a  b":               "$'a  b'",
		"evil\u202etxt.exe":  `$'evil\u202etxt.exe'`,
		"it's\u2066\\":       `$'it\'s\u2066\\'`,
		"tab\tand\u0085next": `$'tab\u0009and\u0085next'`,
	} {
		require.Equal(t, want, shellWord(in), "%q", in)
	}
}

// TestBatchesUsage: a wrong command line exits 2 before connecting.
func TestBatchesUsage(t *testing.T) {
	t.Parallel()
	requireUsageErrors(t, [][]string{
		{"batches"},
		{"batches", "frob"},
		{"batches", "show"},
		{"batches", "show", "x"},
		{"batches", "show", "-1"},
		{"batches", "show", "0"},
		{"batches", "show", "1", "2"},
		{"batches", "show", "--limit", "0", "1"},
		{"batches", "show", "--limit", "1001", "1"},
		{"batches", "show", "--limit", "many", "1"},
		{"batches", "show", "--after", "1"},
		{"batches", "show", "--json=maybe", "1"},
		{"batches", "show", "--frob", "1"},
	})
	r := docket(t, unreachable, "help")
	require.Contains(t, r.stdout, "batch show ID [--limit N] [--after KEY] [-o json]")
}
