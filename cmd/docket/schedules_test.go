package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/schedules"
)

func TestSchedulesCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := setup(t,
		testkit.Grants(app, project, access.ScheduleManage, access.JobCreate),
		testkit.Grants(vic, project, access.ScheduleView))
	// The day before Berlin leaves summer time.
	c.Clock.Set(time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC))
	sc, err := schedules.NewClient(c.Pool, schedules.Config{Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	s, err := sc.Create(ctx, schedules.Spec{Project: project, Name: "nightly", Cron: "30 2 * * *", Zone: "Europe/Berlin",
		Job: schedules.Job{Kind: "report.nightly", Payload: json.RawMessage(`{}`)}, End: time.Date(2027, 10, 24, 12, 0, 0, 0, time.UTC)})
	require.NoError(t, err)

	r := c.as(t, vic, "schedules", "list", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "nightly")
	require.Contains(t, r.stdout, "2026-10-25T00:30:00Z")
	r = c.as(t, "user:sam", "schedules", "list", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, "\n"), "a header only: sam sees nothing")

	r = c.as(t, vic, "schedules", "preview", "--count", "2", fmt.Sprint(s.ID))
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `2026-10-25 02:30\s+0\s+2026-10-25T00:30:00Z`, r.stdout)
	require.Regexp(t, `2026-10-26 02:30\s+0\s+2026-10-26T01:30:00Z`, r.stdout)

	r = c.run(t, "schedules", "preview", "--count", "3", "--from", "2026-10-25T00:30:00Z", "0 * * * *", "Europe/Berlin")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `2026-10-25 02:00\s+1\s+2026-10-25T01:00:00Z`, r.stdout)
	require.Regexp(t, `2026-10-25 03:00\s+0\s+2026-10-25T02:00:00Z`, r.stdout)

	// Flags may come after the expression and zone, too.
	r = c.run(t, "schedules", "preview", "0 * * * *", "Europe/Berlin", "--from", "2026-10-25T00:30:00Z", "--count", "3")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `2026-10-25 02:00\s+1\s+2026-10-25T01:00:00Z`, r.stdout)

	r = c.run(t, "schedules", "preview", "61 * * * *", "UTC")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "invalid cron")
	r = c.run(t, "schedules", "frobnicate")
	require.NotEqual(t, 0, r.code)
}
