package retention_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/lanes"
	"github.com/docket-dev/docket/retention"
	"github.com/docket-dev/docket/tasks"
	"github.com/docket-dev/docket/worker"
)

// matter is a case of acme with everything that can be bound to one: a
// key, an obligation met, a wait satisfied by a message whose continuation
// job succeeded, and a timer whose job closing cancelled.
type matter struct {
	c       cases.Case
	job     int64 // the continuation
	timer   int64 // the timer's job
	message int64
}

func open(t testing.TB, e env, key string) matter {
	t.Helper()
	ctx := context.Background()
	k := cases.Key{Namespace: "order", Value: key}
	a, err := e.cases.Admit(ctx, cases.Admission{Project: project, Kind: "order.fulfil", Keys: []cases.Key{k}})
	require.NoError(t, err)
	m := matter{c: a.Case}
	ob, err := e.cases.RegisterObligation(ctx, a.ID, cases.ObligationSpec{Name: "ship", Due: e.Clock.Now().Add(24 * time.Hour)})
	require.NoError(t, err)
	_, err = e.cases.Meet(ctx, ob.ID)
	require.NoError(t, err)
	_, err = e.cases.Await(ctx, a.ID, cases.WaitSpec{Name: "reply", Keys: []cases.Key{k}, Deadline: e.Clock.Now().Add(48 * time.Hour),
		OnArrival: cases.Continuation{Kind: "order.reply"}})
	require.NoError(t, err)
	d, err := e.cases.Deliver(ctx, cases.Delivery{Project: project, Producer: "carrier:1", MessageID: key, Keys: []cases.Key{k},
		Payload: json.RawMessage(`{"ok": true}`)})
	require.NoError(t, err)
	require.NotZero(t, d.ContinuationJobID)
	m.job, m.message = d.ContinuationJobID, d.ID
	tm, err := e.cases.SleepUntil(ctx, a.ID, "remind", e.Clock.Now().Add(time.Hour), cases.Continuation{Kind: "order.remind"})
	require.NoError(t, err)
	m.timer = tm.JobID
	return m
}

// run completes job id (claimed by its id) as app.
func run(t testing.TB, e env, id int64, to jobs.State) {
	t.Helper()
	ctx := context.Background()
	j, ok, err := e.jobs.ClaimID(ctx, id, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	if to == jobs.Uncertain {
		_, err = e.jobs.Fail(ctx, j.Lease(), jobs.Failure{Class: jobs.ClassUncertain, Diagnostic: "lost"})
	} else {
		_, err = e.jobs.Complete(ctx, j.Lease(), nil, nil)
	}
	require.NoError(t, err)
}

// caseRows counts what is left of case id in every table bound to it.
func caseRows(t testing.TB, e env, m matter) map[string]int {
	t.Helper()
	return map[string]int{
		"cases":       rows(t, e, "docket.cases", "id = $1", m.c.ID),
		"case_events": rows(t, e, "docket.case_events", "case_id = $1", m.c.ID),
		"case_keys":   rows(t, e, "docket.case_keys", "case_id = $1", m.c.ID),
		"obligations": rows(t, e, "docket.obligations", "case_id = $1", m.c.ID),
		"waits":       rows(t, e, "docket.waits", "case_id = $1", m.c.ID),
		"timers":      rows(t, e, "docket.timers", "case_id = $1", m.c.ID),
		"messages":    rows(t, e, "docket.messages", "id = $1", m.message),
		"jobs":        rows(t, e, "docket.jobs", "case_id = $1", m.c.ID),
		"job_events":  rows(t, e, "docket.job_events e JOIN docket.jobs j ON j.id = e.job_id", "j.case_id = $1", m.c.ID),
	}
}

// TestAClosedCaseGoesWithEverythingBoundToIt prunes a closed case past its
// horizon with its keys, obligations, waits, messages, timers, jobs and all
// their events, and keeps an open case and a closed case with an uncertain
// job whatever their age.
func TestAClosedCaseGoesWithEverythingBoundToIt(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 1, 24))
	ctx := t.Context()
	done := open(t, e, "o-1")
	run(t, e, done.job, jobs.Succeeded)
	stillOpen := open(t, e, "o-2")
	run(t, e, stillOpen.job, jobs.Succeeded)
	unsure := open(t, e, "o-3")
	run(t, e, unsure.job, jobs.Uncertain)
	for _, m := range []matter{done, unsure} {
		_, err := e.cases.Close(ctx, m.c.ID)
		require.NoError(t, err)
	}
	bound := caseRows(t, e, done)
	for table, n := range bound {
		require.Positive(t, n, table)
	}

	e.Clock.Advance(24*time.Hour - time.Second)
	ps, err := e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, ps, "the jobs of cases go with their case, not on their own horizon")

	e.Clock.Advance(time.Second)
	ps, err = e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	p := ps[0]
	require.Equal(t, 1, p.Cases)
	require.Equal(t, "{["+itoa(done.c.ID)+","+itoa(done.c.ID+1)+")}", p.CaseIDs)
	require.Equal(t, 2, p.Jobs, "the continuation and the timer's job")
	require.Equal(t, map[string]int{"succeeded": 1, "cancelled": 1}, p.JobStates)
	require.Equal(t, bound["job_events"], p.JobEvents)
	require.Equal(t, bound["case_events"], p.CaseEvents)
	require.Equal(t, bound["case_keys"], p.CaseKeys)
	require.Equal(t, bound["obligations"], p.Obligations)
	require.Equal(t, bound["waits"], p.Waits)
	require.Equal(t, bound["timers"], p.Timers)
	require.Equal(t, 1, p.Messages)
	for table, n := range caseRows(t, e, done) {
		require.Zero(t, n, table)
	}
	requirePruned(t, e, done.job, p.ID)
	requirePruned(t, e, done.timer, p.ID)

	e.Clock.Advance(1000 * time.Hour)
	ps, err = e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, ps)
	for _, m := range []matter{stillOpen, unsure} {
		_, err := e.cases.Get(ctx, m.c.ID)
		require.NoError(t, err)
		require.Equal(t, 1, rows(t, e, "docket.cases", "id = $1", m.c.ID))
		requireKept(t, e, m.job)
	}
}

// TestJobsOfALaneStillOpenAreKept keeps a finished job while its lane is in
// progress, and prunes it once the lane is done.
func TestJobsOfALaneStillOpenAreKept(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 1, 1))
	ctx := t.Context()
	lc, err := lanes.NewClient(e.API, lanes.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	q, err := lc.CreateQuorum(ctx, lanes.QuorumSpec{Project: project, Name: "web", Conductor: app})
	require.NoError(t, err)
	l, err := lc.Create(ctx, lanes.Spec{Quorum: q.ID, Name: "l", Branch: "main", Assignee: testkit.Bo, Task: "WEB-1"})
	require.NoError(t, err)
	_, err = lc.SetState(ctx, l.ID, lanes.InProgress, "")
	require.NoError(t, err)
	enq, err := e.jobs.Enqueue(ctx, jobs.Spec{Kind: "build.run", Payload: json.RawMessage(`{}`), LaneID: l.ID})
	require.NoError(t, err)
	run(t, e, enq.Job.ID, jobs.Succeeded)

	e.Clock.Advance(2 * time.Hour)
	ps, err := e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, ps, "its lane is in progress")
	requireKept(t, e, enq.Job.ID)

	_, err = lc.SetState(ctx, l.ID, lanes.Done, "")
	require.NoError(t, err)
	ps, err = e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	requirePruned(t, e, enq.Job.ID, ps[0].ID)
}

// TestTheSweepPrunesDeadLettersAndJobs runs the prune as a worker's sweep,
// beside the dead-letter sweep: a message no wait took is dead-lettered,
// then pruned a horizon later, with the jobs past theirs.
func TestTheSweepPrunesDeadLettersAndJobs(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 1, 2))
	ctx := t.Context()
	d, err := e.cases.Deliver(ctx, cases.Delivery{Project: project, Producer: "carrier:1", MessageID: "stray",
		Keys: []cases.Key{{Namespace: "order", Value: "nobody"}}, Payload: json.RawMessage(`{}`)})
	require.NoError(t, err)
	j := finish(t, e, e.jobs, "", jobs.Succeeded)
	reg := worker.NewRegistry()
	require.NoError(t, worker.Handle(reg, jobs.MustKind[struct{}]("report.build", 1), func(context.Context, *jobs.Typed[struct{}]) error { return nil }))
	w, err := worker.NewClient(e.API, worker.Config{Actor: pruner, Registry: reg, Clock: e.Clock, Logger: testkit.Logger,
		Deployment: "test", Sweeps: []worker.Sweep{cases.DeadLetterSweep(time.Minute, time.Hour), retention.Sweep(0)}})
	require.NoError(t, err)

	e.Clock.Advance(time.Hour)
	n, err := w.Sweep(ctx, cases.SweepDeadLetters)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = w.Sweep(ctx, retention.SweepName)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the job; the message was dead-lettered only now")
	require.Zero(t, rows(t, e, "docket.jobs", "id = $1", j.ID))
	require.Equal(t, 1, rows(t, e, "docket.messages", "id = $1", d.ID))

	e.Clock.Advance(2 * time.Hour)
	n, err = w.Sweep(ctx, retention.SweepName)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the dead letter, two hours after it was dead-lettered")
	require.Zero(t, rows(t, e, "docket.messages", "id = $1", d.ID))
}

// TestAClosedCasesTasksGoWithIt prunes a closed case's human task, decided
// and withdrawn alike, with its history.
func TestAClosedCasesTasksGoWithIt(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 1, 1))
	ctx := t.Context()
	const rita access.Actor = "user:rita"
	e.Allow(t, testkit.Grants(rita, project, access.TaskReview)...)
	a, err := e.cases.Admit(ctx, cases.Admission{Project: project, Kind: "payment.release", Keys: []cases.Key{{Namespace: "payment", Value: "P-1"}}})
	require.NoError(t, err)
	tc, err := tasks.NewClient(e.API, tasks.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	var ids []int64
	for _, key := range []string{"decided", "withdrawn"} {
		o, err := tc.Open(ctx, a.ID, tasks.Spec{Key: key, Title: "Release", Decisions: []string{"approve", "reject"},
			AudienceCapabilities: []access.Capability{access.TaskReview}, Proposer: "user:pat",
			Deadline: e.Clock.Now().Add(time.Hour), Expiry: tasks.DecideAutomatically("reject"),
			Continuation: cases.Continuation{Kind: "payment.decided"}})
		require.NoError(t, err)
		ids = append(ids, o.ID)
	}
	rc, err := tasks.NewClient(e.API, tasks.Config{Actor: rita, Clock: e.Clock})
	require.NoError(t, err)
	d, err := rc.Decide(ctx, ids[0], "approve", "")
	require.NoError(t, err)
	var job int64
	require.NoError(t, e.Pool.QueryRow(ctx, "SELECT continuation_job_id FROM docket.waits WHERE id = $1", d.WaitID).Scan(&job))
	run(t, e, job, jobs.Succeeded)
	_, err = e.cases.Close(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, 2, rows(t, e, "docket.tasks", "case_id = $1", a.ID))

	e.Clock.Advance(2 * time.Hour)
	ps, err := e.pruner.Prune(ctx, 100)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, 1, ps[0].Cases)
	require.Zero(t, rows(t, e, "docket.tasks", "case_id = $1", a.ID))
	require.Zero(t, rows(t, e, "docket.task_events", "task_id = ANY ($1)", ids))
	require.Zero(t, rows(t, e, "docket.cases", "id = $1", a.ID))
}
