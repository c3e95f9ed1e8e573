package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/lanes"
)

func TestLanesCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := setup(t,
		testkit.Grants(ana, project, access.QuorumCreate),
		testkit.Grants(vic, project, access.LaneView),
		testkit.Grants(app, project, access.JobCreate))

	as := func(actor string) *lanes.Client {
		lc, err := lanes.NewClient(c.Pool, lanes.Config{Actor: access.Actor("user:" + actor), Clock: c.Clock})
		require.NoError(t, err)
		return lc
	}
	web, err := as("ana").CreateQuorum(ctx, lanes.QuorumSpec{Project: project, Name: "web", Conductor: "user:cora"})
	require.NoError(t, err)
	api, err := as("ana").CreateQuorum(ctx, lanes.QuorumSpec{Project: project, Name: "api", Conductor: "user:cora"})
	require.NoError(t, err)
	schema, err := as("cora").Create(ctx, lanes.Spec{Quorum: web.ID, Name: "schema", Branch: "feature/schema", Assignee: "user:ann", Task: "WEB-41"})
	require.NoError(t, err)
	login, err := as("cora").Create(ctx, lanes.Spec{Quorum: web.ID, Name: "login", Branch: "feature/login", Assignee: "user:bo", Task: "WEB-42",
		DependsOn: []int64{schema.ID}})
	require.NoError(t, err)
	_, err = as("cora").Create(ctx, lanes.Spec{Quorum: api.ID, Name: "auth", Branch: "feature/auth", Assignee: "user:ann", Task: "API-1"})
	require.NoError(t, err)
	_, err = as("cora").SetState(ctx, login.ID, lanes.InProgress, "go")
	require.NoError(t, err)
	_, err = as("bo").Submit(ctx, login.ID, "ready\nfor a look")
	require.NoError(t, err)
	jc, err := jobs.NewClient(c.Pool, jobs.Config{Project: project, Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	job, err := jc.Enqueue(ctx, jobs.Spec{Kind: "build.run", Payload: []byte(`{}`), LaneID: login.ID})
	require.NoError(t, err)

	// Each reader sees what it may.
	for _, tc := range []struct {
		as    access.Actor
		lines int
	}{{vic, 4}, {"user:cora", 4}, {"user:ann", 3}, {"user:bo", 2}, {"user:sam", 1}} {
		r := c.as(t, tc.as, "lanes", "list", project)
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, tc.lines, strings.Count(r.stdout, "\n"), "%s: %s", tc.as, r.stdout)
	}
	r := c.as(t, vic, "lanes", "list", "--quorum", "web", "--state", "in_progress", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+web\s+login\s+feature/login\s+user:bo\s+in_progress\s+submitted\s+-\s`, login.ID), r.stdout)
	require.Equal(t, 2, strings.Count(r.stdout, "\n"), r.stdout)
	r = c.as(t, vic, "lanes", "list", "--limit", "1", "--after", fmt.Sprint(schema.ID), project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+web\s+login`, login.ID), r.stdout)

	r = c.as(t, "user:bo", "lanes", "show", fmt.Sprint(login.ID))
	require.Equal(t, 0, r.code, r.stderr)
	for _, re := range []string{
		`name\s+login\n`,
		fmt.Sprintf(`quorum\s+web \(%d\), conductor user:cora\n`, web.ID),
		`branch\s+feature/login\n`,
		`assignee\s+user:bo\n`,
		`task\s+WEB-42\n`,
		`state\s+in_progress\n`,
		`review\s+submitted\n`,
		`merged\s+no\n`,
		fmt.Sprintf(`depends on\s+%d\n`, schema.ID),
		`\screated\s+-\s+open\s+user:cora\s`,
		fmt.Sprintf(`\sdependency\s+-\s+%d\s+user:cora\s+depends on lane %d\n`, schema.ID, schema.ID),
		`\sexecution\s+open\s+in_progress\s+user:cora\s+go\n`,
		`\sreview\s+none\s+submitted\s+user:bo\s+ready for a look\n`,
		fmt.Sprintf(`(?m)^%d\s+build.run\s+default\s+queued\s+0/5\s`, job.Job.ID),
	} {
		require.Regexp(t, re, r.stdout)
	}
	r = c.as(t, vic, "lanes", "show", fmt.Sprint(schema.ID))
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "\nno jobs\n")

	// Refusals: one line, exit 1.
	for _, args := range [][]string{
		{"--as", "user:sam", "lanes", "show", fmt.Sprint(login.ID)}, // may not see it
		{"--as", string(vic), "lanes", "show", "999999"},
	} {
		r = c.run(t, args...)
		requireRefused(t, r, exitError, args)
		require.Contains(t, r.stderr, "not found")
	}

	// A wrong command line exits 2 before connecting.
	requireUsageErrors(t, [][]string{
		{"lanes"},
		{"lanes", "frob"},
		{"lanes", "list"},
		{"lanes", "list", "--limit", "0", "acme"},
		{"lanes", "list", "--limit", "1001", "acme"},
		{"lanes", "list", "--after", "-1", "acme"},
		{"lanes", "list", "--state", "merged", "acme"},
		{"lanes", "list", "--review", "rejected", "acme"},
		{"lanes", "show"},
		{"lanes", "show", "x"},
		{"lanes", "show", "0"},
		{"lanes", "show", "1", "2"},
	})
}
