package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
)

// TestConsoleAndCLIShareTheListReads: the console's census and its lists
// of runs and batches, and the CLI's job census, plans list and batches
// list, are what jobs.Client.Census, plans.Client.List and
// batches.Client.List return to the same actor, and the command holds no
// SQL of its own for those reads.
func TestConsoleAndCLIShareTheListReads(t *testing.T) {
	t.Parallel()
	s := setupConsole(t)
	ctx := t.Context()
	jc, err := jobs.NewClient(s.API, jobs.Config{Project: project, Actor: ops, Clock: s.Clock})
	require.NoError(t, err)
	census, err := jc.Census(ctx, 0)
	require.NoError(t, err)
	require.NotEmpty(t, census.Cells)
	pc, err := plans.NewClient(s.API, plans.Config{Actor: ops, Clock: s.Clock})
	require.NoError(t, err)
	runs, err := pc.List(ctx, plans.Filter{Project: project})
	require.NoError(t, err)
	require.Greater(t, len(runs), 1, "the seeded run and the runs of the batch's items")
	bc, err := batches.NewClient(s.API, batches.Config{Actor: ops, Clock: s.Clock})
	require.NoError(t, err)
	reports, err := bc.List(ctx, batches.Filter{Project: project})
	require.NoError(t, err)
	require.NotEmpty(t, reports)

	// The console shows them: a census row for each of the method's
	// queues (the console's own tests hold the table to the census), the
	// lists in the methods' order.
	o := s.as(t, "ops")
	status, body := o.get("/console/")
	require.Equal(t, http.StatusOK, status)
	table := censusTable(t, body)
	for _, cell := range census.Cells {
		require.Contains(t, table, `data-queue="`+cell.Queue+`"`)
	}
	status, body = o.get("/console/acme/runs")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, idsOf(runs, func(r plans.Run) int64 { return r.ID }), rowIDs(body, "run"))
	status, body = o.get("/console/acme/batches")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, idsOf(reports, func(r batches.Report) int64 { return r.ID }), rowIDs(body, "batch"))

	// The CLI prints them.
	r := s.harness.as(t, ops, "job", "census", project, "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var gotCensus jobCensusDoc
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &gotCensus))
	require.Equal(t, jobCensusDocOf(census), gotCensus)
	r = s.harness.as(t, ops, "plans", "list", project, "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var gotRuns runListDoc
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &gotRuns))
	require.Equal(t, idsOf(runs, func(r plans.Run) int64 { return r.ID }), idsOf(gotRuns.Runs, func(r runJSON) int64 { return r.ID }))
	r = s.harness.as(t, ops, "batches", "list", project, "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var gotBatches batchListDoc
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &gotBatches))
	require.Equal(t, idsOf(reports, func(r batches.Report) int64 { return r.ID }),
		idsOf(gotBatches.Batches, func(b batchListJSON) int64 { return b.ID }))

	// Their text forms too.
	r = s.harness.as(t, ops, "job", "census", project, "--per-state", "50")
	require.Equal(t, exitOK, r.code, r.stderr)
	requireAll(t, r.stdout, "QUEUE       QUEUED  CLAIMED  SUCCEEDED  FAILED  DEAD  UNCERTAIN  CANCELLED  EXHAUSTED  TOTAL\n",
		"\nall queues  50      1        1          1       1     2          0          0          56\n",
		"The census counts at most 50 jobs of each state: queued reached it, and may have more.\n")
	r = s.harness.as(t, ops, "plans", "list", project)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "RUN  STATUS   PLAN"), r.stdout)
	require.Contains(t, r.stdout, "\n"+strconv.FormatInt(s.seed.Run.ID, 10)+"  ")
	r = s.harness.as(t, ops, "batches", "list", project)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "BATCH  NAME"), r.stdout)
	require.Contains(t, r.stdout, "nightly-invoices")

	// And neither reads those tables itself.
	sources, err := filepath.Glob("*.go")
	require.NoError(t, err)
	ownSQL := regexp.MustCompile(`docket\.(runs|batches|job_visible)\b`)
	for _, f := range sources {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NotRegexp(t, ownSQL, string(src), "%s reads runs, batches or a job census with SQL of its own", f)
	}
}

// censusTable is the census table of project acme in page.
func censusTable(t *testing.T, page string) string {
	t.Helper()
	i := strings.Index(page, `id="census-acme"`)
	require.GreaterOrEqual(t, i, 0, "no census of acme")
	j := strings.Index(page[i:], "</table>")
	require.GreaterOrEqual(t, j, 0)
	return page[i : i+j]
}

// rowIDs are the ids of the rows of noun ("run", "batch") in a console
// list, in order.
func rowIDs(page, noun string) []int64 {
	var ids []int64
	for _, m := range regexp.MustCompile(`<tr id="`+noun+`-(\d+)"`).FindAllStringSubmatch(page, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		ids = append(ids, id)
	}
	return ids
}

func idsOf[T any](list []T, id func(T) int64) []int64 {
	var ids []int64
	for _, x := range list {
		ids = append(ids, id(x))
	}
	return ids
}
