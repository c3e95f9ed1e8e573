package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// job list and job census given --cell read every cell named, each row
// naming its cell; a project two cells both have is refused, and a cell
// that does not answer is named.
func TestJobListAcrossCells(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := testkit.Setup(t, ana, []string{project}, testkit.Grants(app, project, access.JobCreate)...)
	b := testkit.Setup(t, ana, []string{"globex", "initech"},
		testkit.Join(testkit.Grants(app, "globex", access.JobCreate), testkit.Grants(app, "initech", access.JobCreate))...)
	enqueue := func(k testkit.Env, p string, n int) []int64 {
		k.Clock.Set(time.Now().UTC().Add(-time.Minute))
		jc, err := jobs.NewClient(k.Pool, jobs.Config{Project: p, Actor: app, Clock: k.Clock})
		require.NoError(t, err)
		var ids []int64
		for i := range n {
			e, err := jc.Enqueue(ctx, jobs.Spec{Kind: "billing.invoice", Payload: []byte(fmt.Sprint(i))})
			require.NoError(t, err)
			ids = append(ids, e.Job.ID)
		}
		return ids
	}
	inA, inGlobex, inInitech := enqueue(a, project, 2), enqueue(b, "globex", 1), enqueue(b, "initech", 3)
	cellA, cellB := "a="+a.Pool.Config().ConnString(), "b="+b.Pool.Config().ConnString()

	// Every project of both cells; no --database-url needed.
	r := docket(t, nil, "--as", string(app), "job", "list", "--cell", cellA, "--cell", cellB)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 1+6, r.stdout)
	require.Regexp(t, `^CELL\s+PROJECT\s+ID\s+KIND`, lines[0])
	var rows []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		rows = append(rows, f[0]+"/"+f[1]+"/"+f[2])
	}
	require.Equal(t, []string{
		fmt.Sprintf("a/acme/%d", inA[1]), fmt.Sprintf("a/acme/%d", inA[0]),
		fmt.Sprintf("b/globex/%d", inGlobex[0]),
		fmt.Sprintf("b/initech/%d", inInitech[2]), fmt.Sprintf("b/initech/%d", inInitech[1]), fmt.Sprintf("b/initech/%d", inInitech[0]),
	}, rows)

	// Named projects, as JSON: each job names its cell and where it was read.
	r = docket(t, nil, "--as", string(app), "--cell", cellB, "--cell", cellA, "job", "list", "initech", "acme", "--limit", "1", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var doc struct {
		Cells []string `json:"cells"`
		Jobs  []struct {
			Cell     string `json:"cell"`
			ReadFrom string `json:"read_from"`
			ID       int64  `json:"id"`
			Project  string `json:"project"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	require.Equal(t, []string{"a", "b"}, doc.Cells)
	require.Len(t, doc.Jobs, 2)
	require.Equal(t, "b", doc.Jobs[0].Cell)
	require.Equal(t, "initech", doc.Jobs[0].Project)
	require.Equal(t, inInitech[2], doc.Jobs[0].ID)
	require.Equal(t, "primary", doc.Jobs[0].ReadFrom)
	require.Equal(t, "a", doc.Jobs[1].Cell)
	require.Equal(t, inA[1], doc.Jobs[1].ID)

	// The census, a table per project naming its cell.
	r = docket(t, nil, "--as", string(app), "job", "census", "--cell", cellA, "--cell", cellB)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, regexp.MustCompile(`(?s)cell a, project acme \(primary\):.*cell b, project globex \(primary\):.*cell b, project initech \(primary\):`), r.stdout)

	// A project in both cells is refused: a project lives in one cell.
	c := testkit.Setup(t, ana, []string{"globex"})
	r = docket(t, nil, "--as", string(app), "job", "list", "--cell", cellB, "--cell", "c="+c.Pool.Config().ConnString())
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, "project globex is in cells b and c")

	// A cell that does not answer is named; the other's rows are listed.
	r = docket(t, nil, "--as", string(app), "job", "list", "--cell", cellA, "--cell", "gone=postgres://u:p@127.0.0.1:1/x")
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, "cell gone")
	require.Equal(t, 1+2, strings.Count(r.stdout, "\n"), "cell a's rows are listed:\n%s", r.stdout)
	require.Contains(t, r.stdout, fmt.Sprintf("a     acme     %d", inA[0]))

	// Without --cell, one PROJECT; a malformed --cell is a wrong command line.
	requireUsageErrors(t, [][]string{
		{"job", "list", "acme", "globex"},
		{"job", "list", "--cell", "a"},
		{"job", "list", "--cell", "=postgres://x"},
		{"job", "list", "--cell", cellA, "--cell", cellA},
		{"job", "census"},
	})
}

// docket serve given --cell serves the console of each cell and, at its
// root, the page of every cell, each row naming its cell.
func TestServeAcrossCells(t *testing.T) {
	t.Parallel()
	a := testkit.Setup(t, ana, []string{project}, testkit.Join(testkit.Grants(app, project, access.JobCreate),
		testkit.Grants("user:vic", project, access.JobView))...)
	b := testkit.Setup(t, ana, []string{"globex"}, testkit.Join(testkit.Grants(app, "globex", access.JobCreate),
		testkit.Grants("user:vic", "globex", access.JobView))...)
	for _, k := range []struct {
		env     testkit.Env
		project string
	}{{a, project}, {b, "globex"}} {
		jc, err := jobs.NewClient(k.env.Pool, jobs.Config{Project: k.project, Actor: app, Clock: k.env.Clock})
		require.NoError(t, err)
		_, err = jc.Enqueue(t.Context(), jobs.Spec{Kind: "billing.invoice", Payload: []byte(`{}`)})
		require.NoError(t, err)
	}
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	out, outW := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--project", "acme,globex",
			"--cell", "a=" + a.Pool.Config().ConnString(), "--cell", "b=" + b.Pool.Config().ConnString()},
			func(string) string { return "" }, outW, &stderr)
		outW.Close()
	}()
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatalf("docket serve printed nothing: exit %d: %s", <-done, stderr.String())
	}
	base := regexp.MustCompile(`http://\S+`).FindString(lines.Text())
	go func() {
		for lines.Scan() {
		}
	}()
	vic := &person{t: t, base: base, header: http.Header{"X-Forwarded-User": {"vic"}}, client: http.DefaultClient}
	status, body := vic.get("/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<tr id="job-a-1" data-cell="a" data-state="queued">`)
	require.Contains(t, body, `<tr id="job-b-1" data-cell="b" data-state="queued">`)
	status, body = vic.get("/cells/b/console/globex/jobs/1")
	require.Equal(t, http.StatusOK, status, body)
	interrupt()
	require.Equal(t, exitOK, <-done, stderr.String())

	requireUsageErrors(t, [][]string{
		{"serve", "--project", "acme", "--cell", "a=postgres://x", "--replica-url", "postgres://y"},
	})
}
