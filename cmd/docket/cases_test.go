package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/internal/testkit"
)

func TestCasesCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := setup(t, testkit.Grants(app, project, access.CaseAdmit), testkit.Grants(vic, project, access.CaseView))

	cc, err := cases.NewClient(c.Pool, cases.Config{Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	first, err := cc.Admit(ctx, cases.Admission{Project: project, Kind: "supplier.switch",
		Keys: []cases.Key{{Namespace: "document", Value: "DOC-1"}}})
	require.NoError(t, err)
	ack, err := cc.RegisterObligation(ctx, first.ID, cases.ObligationSpec{Name: "ack", Due: c.Clock.Now().Add(time.Hour),
		Escalation: &cases.Escalation{Kind: "case.escalate"}})
	require.NoError(t, err)
	second, err := cc.Admit(ctx, cases.Admission{Project: project, Kind: "supplier.switch",
		Keys: []cases.Key{{Namespace: "document", Value: "DOC-2"}}})
	require.NoError(t, err)
	_, err = cc.Close(ctx, second.ID)
	require.NoError(t, err)

	for _, tc := range []struct {
		as    access.Actor
		args  []string
		lines int
	}{
		{vic, nil, 3},
		{app, nil, 3},
		{"user:sam", nil, 1},
		{vic, []string{"--status", "closed"}, 2},
		{vic, []string{"--limit", "1", "--after", fmt.Sprint(first.ID)}, 2},
	} {
		r := c.as(t, tc.as, append(append([]string{"cases", "list"}, tc.args...), project)...)
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, tc.lines, strings.Count(r.stdout, "\n"), "%s %v: %s", tc.as, tc.args, r.stdout)
	}
	r := c.as(t, vic, "cases", "list", "--status", "closed", project)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+supplier.switch\s+closed\s+1\s`, second.ID), r.stdout)

	r = c.as(t, vic, "cases", "show", fmt.Sprint(first.ID))
	require.Equal(t, 0, r.code, r.stderr)
	for _, re := range []string{
		`project\s+acme\n`,
		`kind\s+supplier.switch\n`,
		`status\s+open\n`,
		`version\s+1\n`,
		`(?m)^document\s+DOC-1\s+\S+\s+held\n`,
		fmt.Sprintf(`(?m)^%d\s+ack\s+pending\s+2026-11-02T10:00:00Z\s+-\s+case.escalate\n`, ack.ID),
		`\screated\s+-\s+open\s+svc:app\s`,
		`\skey_claimed\s+-\s+-\s+svc:app\s+\{"value": "DOC-1", "namespace": "document"\}\n`,
		`\sobligation\s+-\s+pending\s+svc:app\s`,
	} {
		require.Regexp(t, re, r.stdout)
	}
	r = c.as(t, vic, "cases", "show", fmt.Sprint(second.ID))
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "\nno obligations\n")
	require.Regexp(t, `status\s+closed\n`, r.stdout)
	require.Regexp(t, `\sstatus\s+open\s+closed\s+svc:app\s`, r.stdout)

	// Refusals: one line, exit 1.
	for _, args := range [][]string{
		{"--as", "user:sam", "cases", "show", fmt.Sprint(first.ID)}, // may not see it
		{"--as", string(vic), "cases", "show", "999999"},
	} {
		r = c.run(t, args...)
		requireRefused(t, r, exitError, args)
		require.Contains(t, r.stderr, "not found")
	}

	// A wrong command line exits 2 before connecting.
	requireUsageErrors(t, [][]string{
		{"cases"},
		{"cases", "frob"},
		{"cases", "list"},
		{"cases", "list", "--limit", "0", "acme"},
		{"cases", "list", "--limit", "1001", "acme"},
		{"cases", "list", "--after", "-1", "acme"},
		{"cases", "list", "--status", "pending", "acme"},
		{"cases", "show"},
		{"cases", "show", "x"},
		{"cases", "show", "0"},
		{"cases", "show", "1", "2"},
	})
}
