package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/schedules"
)

func TestSchedulesCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.NewURL(t)
	env := map[string]string{"DOCKET_DATABASE_URL": url}
	for _, args := range [][]string{
		{"project", "create", "acme"},
		{"grant", "svc:app", "acme", "schedule.manage"},
		{"grant", "svc:app", "acme", "job.create"},
		{"grant", "user:vic", "acme", "schedule.view"},
	} {
		r := docket(t, env, append([]string{"--as", "user:ana"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
	}
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	clock := db.NewFakeClock(time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC))
	app, err := schedules.NewClient(pool, schedules.Config{Actor: "svc:app", Clock: clock})
	require.NoError(t, err)
	s, err := app.Create(ctx, schedules.Spec{Project: "acme", Name: "nightly", Cron: "30 2 * * *", Zone: "Europe/Berlin",
		Job: schedules.Job{Kind: "report.nightly", Payload: json.RawMessage(`{}`)}})
	require.NoError(t, err)

	r := docket(t, env, "--as", "user:vic", "schedules", "list", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "nightly")
	require.Contains(t, r.stdout, "2026-10-25T00:30:00Z")
	r = docket(t, env, "--as", "user:sam", "schedules", "list", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, "\n"), "a header only: sam sees nothing")

	r = docket(t, env, "--as", "user:vic", "schedules", "preview", "--count", "2", fmt.Sprint(s.ID))
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `2026-10-25 02:30\s+0\s+2026-10-25T00:30:00Z`, r.stdout)
	require.Regexp(t, `2026-10-26 02:30\s+0\s+2026-10-26T01:30:00Z`, r.stdout)

	r = docket(t, env, "schedules", "preview", "--count", "3", "--from", "2026-10-25T00:30:00Z", "0 * * * *", "Europe/Berlin")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `2026-10-25 02:00\s+1\s+2026-10-25T01:00:00Z`, r.stdout)
	require.Regexp(t, `2026-10-25 03:00\s+0\s+2026-10-25T02:00:00Z`, r.stdout)

	// Flags may come after the expression and zone, too.
	r = docket(t, env, "schedules", "preview", "0 * * * *", "Europe/Berlin", "--from", "2026-10-25T00:30:00Z", "--count", "3")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `2026-10-25 02:00\s+1\s+2026-10-25T01:00:00Z`, r.stdout)

	r = docket(t, env, "schedules", "preview", "61 * * * *", "UTC")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "invalid cron")
	r = docket(t, env, "schedules", "frobnicate")
	require.NotEqual(t, 0, r.code)
}
