package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
)

func TestCasesCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.NewURL(t)
	env := map[string]string{"DOCKET_DATABASE_URL": url}
	for _, args := range [][]string{
		{"project", "create", "acme"},
		{"grant", "svc:app", "acme", "case.admit"},
		{"grant", "user:vic", "acme", "case.view"},
	} {
		r := docket(t, env, append([]string{"--as", "user:ana"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
	}

	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	clock := db.NewFakeClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	app, err := cases.NewClient(pool, cases.Config{Actor: "svc:app", Clock: clock})
	require.NoError(t, err)
	first, err := app.Admit(ctx, cases.Admission{Project: "acme", Kind: "supplier.switch",
		Keys: []cases.Key{{Namespace: "document", Value: "DOC-1"}}})
	require.NoError(t, err)
	ack, err := app.RegisterObligation(ctx, first.ID, cases.ObligationSpec{Name: "ack", Due: clock.Now().Add(time.Hour),
		Escalation: &cases.Escalation{Kind: "case.escalate"}})
	require.NoError(t, err)
	second, err := app.Admit(ctx, cases.Admission{Project: "acme", Kind: "supplier.switch",
		Keys: []cases.Key{{Namespace: "document", Value: "DOC-2"}}})
	require.NoError(t, err)
	_, err = app.Close(ctx, second.ID)
	require.NoError(t, err)

	for _, tc := range []struct {
		as    string
		args  []string
		lines int
	}{
		{"user:vic", nil, 3},
		{"svc:app", nil, 3},
		{"user:sam", nil, 1},
		{"user:vic", []string{"--status", "closed"}, 2},
		{"user:vic", []string{"--limit", "1", "--after", fmt.Sprint(first.ID)}, 2},
	} {
		r := docket(t, env, append(append([]string{"--as", tc.as, "cases", "list"}, tc.args...), "acme")...)
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, tc.lines, strings.Count(r.stdout, "\n"), "%s %v: %s", tc.as, tc.args, r.stdout)
	}
	r := docket(t, env, "--as", "user:vic", "cases", "list", "--status", "closed", "acme")
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+supplier.switch\s+closed\s+1\s`, second.ID), r.stdout)

	r = docket(t, env, "--as", "user:vic", "cases", "show", fmt.Sprint(first.ID))
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
	r = docket(t, env, "--as", "user:vic", "cases", "show", fmt.Sprint(second.ID))
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "\nno obligations\n")
	require.Regexp(t, `status\s+closed\n`, r.stdout)
	require.Regexp(t, `\sstatus\s+open\s+closed\s+svc:app\s`, r.stdout)

	// Refusals: one line, exit 1.
	for _, args := range [][]string{
		{"--as", "user:sam", "cases", "show", fmt.Sprint(first.ID)}, // may not see it
		{"--as", "user:vic", "cases", "show", "999999"},
	} {
		r = docket(t, env, args...)
		require.Equal(t, 1, r.code, "%v", args)
		require.Empty(t, r.stdout)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
		require.Contains(t, r.stderr, "not found")
	}

	// A wrong command line exits 2 before connecting.
	for _, args := range [][]string{
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
	} {
		r = docket(t, map[string]string{"DOCKET_DATABASE_URL": "postgres://u:p@127.0.0.1:1/x"}, args...)
		require.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
	}
}
