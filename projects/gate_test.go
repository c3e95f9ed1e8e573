package projects_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/projects"
	"github.com/docket-dev/docket/schedules"
)

// TestOnlyAnActiveProjectTakesNewWork shows an archived project refusing new
// jobs and cases with db.ErrNotPermitted, through the API and by hand,
// writing nothing, while the work of a case it already holds goes on, and a
// reactivated project taking work again.
func TestOnlyAnActiveProjectTakesNewWork(t *testing.T) {
	t.Parallel()
	k := testkit.Setup(t, testkit.Ana, []string{testkit.Acme},
		testkit.Grants(testkit.App, testkit.Acme, access.JobCreate, access.CaseAdmit)...)
	ctx := t.Context()
	jc, err := jobs.NewClient(k.API, jobs.Config{Project: testkit.Acme, Actor: testkit.App, Clock: k.Clock})
	require.NoError(t, err)
	cc, err := cases.NewClient(k.API, cases.Config{Actor: testkit.App, Clock: k.Clock})
	require.NoError(t, err)
	_, pc := testkit.Clients(t, k.Pool, k.Clock, testkit.Ana)
	open, err := cc.Admit(ctx, cases.Admission{Project: testkit.Acme, Kind: "supplier.switch", Keys: []cases.Key{{Namespace: "customer", Value: "C-1"}}})
	require.NoError(t, err)
	job := jobs.Spec{Kind: "billing.invoice", Payload: []byte(`{}`)}

	_, err = pc.SetStatus(ctx, testkit.Acme, projects.Archived)
	require.NoError(t, err)
	before := testkit.Snapshot(t, k.Pool, "docket.jobs", "docket.job_events", "docket.cases", "docket.case_keys")
	_, err = jc.Enqueue(ctx, job)
	require.ErrorIs(t, err, db.ErrNotPermitted)
	require.ErrorContains(t, err, "project acme is archived: it takes no new jobs")
	_, err = cc.Admit(ctx, cases.Admission{Project: testkit.Acme, Kind: "supplier.switch", Keys: []cases.Key{{Namespace: "customer", Value: "C-2"}}})
	require.ErrorIs(t, err, db.ErrNotPermitted)
	require.ErrorContains(t, err, "it takes no new cases")
	err = testkit.Raw(ctx, k.Pool, testkit.Ana, testkit.T0, `
		INSERT INTO docket.cases (project, kind, created_by, created_at, updated_at) VALUES ('acme', 'supplier.switch', 'user:ana', $1, $1)`, testkit.T0)
	require.ErrorIs(t, err, db.ErrNotPermitted, "by hand too")
	require.Equal(t, before, testkit.Snapshot(t, k.Pool, "docket.jobs", "docket.job_events", "docket.cases", "docket.case_keys"))

	bound := job
	bound.CaseID = open.ID
	_, err = jc.Enqueue(ctx, bound)
	require.NoError(t, err, "the work of an open case goes on")

	_, err = pc.SetStatus(ctx, testkit.Acme, projects.Active)
	require.NoError(t, err)
	_, err = jc.Enqueue(ctx, job)
	require.NoError(t, err, "an active project takes work again")
}

// TestAnArchivedProjectsSchedulesWait shows an archived project refusing a
// new schedule, and the schedule sweep passing its due schedules by until
// it is active again.
func TestAnArchivedProjectsSchedulesWait(t *testing.T) {
	t.Parallel()
	k := testkit.Setup(t, testkit.Ana, []string{testkit.Acme}, testkit.Join(
		testkit.Grants(testkit.App, testkit.Acme, access.ScheduleManage, access.JobCreate),
		testkit.Grants(testkit.Sweeper, testkit.Acme, access.ScheduleSweep, access.JobCreate))...)
	ctx := t.Context()
	sc, err := schedules.NewClient(k.API, schedules.Config{Actor: testkit.App, Clock: k.Clock})
	require.NoError(t, err)
	_, pc := testkit.Clients(t, k.Pool, k.Clock, testkit.Ana)
	spec := func(name string) schedules.Spec {
		return schedules.Spec{Project: testkit.Acme, Name: name, Cron: "@hourly", Zone: "UTC",
			Job:       schedules.Job{Kind: "report.tick", Payload: json.RawMessage(`{}`)},
			Unbounded: true, UnboundedReason: "runs for as long as the test"}
	}
	_, err = sc.Create(ctx, spec("hourly"))
	require.NoError(t, err)
	due := func() int {
		var n int
		require.NoError(t, k.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.schedule_due(100, $1, $2)`,
			string(testkit.Sweeper), k.Clock.Now().Add(2*time.Hour)).Scan(&n))
		return n
	}
	require.Equal(t, 1, due())

	_, err = pc.SetStatus(ctx, testkit.Acme, projects.Archived)
	require.NoError(t, err)
	_, err = sc.Create(ctx, spec("daily"))
	require.ErrorIs(t, err, db.ErrNotPermitted)
	require.ErrorContains(t, err, "it takes no new schedules")
	require.Zero(t, due(), "the sweep passes an archived project's schedules by")

	_, err = pc.SetStatus(ctx, testkit.Acme, projects.Active)
	require.NoError(t, err)
	require.Equal(t, 1, due())
}
