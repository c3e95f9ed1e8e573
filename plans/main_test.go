package plans_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast: ops administers acme; app starts runs (plan.run, job.create)
// and runs their steps (job.claim); sam holds nothing.
const project = testkit.Acme
const ops, app, sam = testkit.Ops, testkit.App, testkit.Sam

type env struct {
	testkit.Env
	app *plans.Client
}

func setup(t testing.TB) env {
	t.Helper()
	e := env{Env: testkit.Setup(t, ops, []string{project, testkit.Other},
		testkit.Grants(app, project, access.PlanRun, access.JobCreate, access.JobClaim, access.CaseAdmit)...)}
	var err error
	e.app, err = plans.NewClient(e.API, plans.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	return e
}

// Args is what a step's job carries: its assembled arguments.
type Args map[string]json.RawMessage

// handler is what a step kind does in a test: its result, or an error.
type handler func(ctx context.Context, j jobs.Job, args Args) (any, error)

// runner is a worker running step kinds, and the events it reports.
type runner struct {
	w      *worker.Client
	events chan worker.Event
}

// startRunner starts a worker as app with a handler per kind.
func startRunner(t testing.TB, e env, kinds map[string]handler) *runner {
	t.Helper()
	reg := worker.NewRegistry()
	for kind, h := range kinds {
		require.NoError(t, worker.HandleResult(reg, jobs.MustKind[Args](kind, 1), func(ctx context.Context, j *jobs.Typed[Args]) (worker.Result, error) {
			v, err := h(ctx, j.Job, j.Args)
			if err != nil {
				return worker.Result{}, err
			}
			b, err := json.Marshal(v)
			if err != nil {
				return worker.Result{}, err
			}
			return worker.Result{Value: b}, nil
		}))
	}
	r := &runner{events: make(chan worker.Event, 100000)}
	w, err := worker.NewClient(e.API, worker.Config{
		Actor: app, Registry: reg, Clock: e.Clock, Deployment: "test", Logger: testkit.Logger,
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond,
		SweepEvery: time.Hour,
		OnEvent: func(ev worker.Event) {
			select {
			case r.events <- ev:
			default:
			}
		},
	})
	require.NoError(t, err)
	r.w = w
	testkit.Start(t, w)
	return r
}

// waitRun waits, re-reading run id after every event of the runners, until
// it has ended (succeeded, compensated or failed), and returns it.
func waitRun(t testing.TB, e env, id int64, rs ...*runner) plans.Run {
	t.Helper()
	deadline := time.After(90 * time.Second)
	merged := make(chan struct{}, 1)
	var once sync.Once
	stop := make(chan struct{})
	defer once.Do(func() { close(stop) })
	for _, r := range rs {
		go func() {
			for {
				select {
				case <-r.events:
					select {
					case merged <- struct{}{}:
					default:
					}
				case <-stop:
					return
				}
			}
		}()
	}
	for {
		run, err := e.app.Get(context.Background(), id)
		require.NoError(t, err)
		switch run.Status {
		case plans.Succeeded, plans.Compensated, plans.Failed:
			return run
		}
		select {
		case <-merged:
		case <-deadline:
			steps, _ := e.app.Steps(context.Background(), id)
			t.Fatalf("run %d still %s: %+v", id, run.Status, steps)
		}
	}
}

func step(id, kind string, after ...string) plans.Step {
	return plans.Step{ID: id, Kind: kind, After: after, Args: []plans.Arg{}}
}

// chainOf is a plan of one step per kind, a, b, c, ..., each after the one
// before, the last terminal.
func chainOf(kinds ...string) plans.Plan {
	var p plans.Plan
	for i, kind := range kinds {
		id := string(rune('a' + i))
		s := step(id, kind)
		if i > 0 {
			s.After = []string{p.Steps[i-1].ID}
		}
		p.Steps = append(p.Steps, s)
	}
	p.Steps[len(p.Steps)-1].Terminal = true
	return p
}

// stepOf returns step id of run, as app reads it.
func stepOf(t testing.TB, e env, run int64, id string) plans.RunStep {
	t.Helper()
	steps, err := e.app.Steps(context.Background(), run)
	require.NoError(t, err)
	for _, s := range steps {
		if s.StepID == id {
			return s
		}
	}
	t.Fatalf("run %d has no step %s", run, id)
	return plans.RunStep{}
}

// ownerExec runs q as the schema owner, in a transaction of its own with
// ops's change context, and returns what refused it.
func ownerExec(t testing.TB, e env, q string, args ...any) error {
	t.Helper()
	ctx := context.Background()
	tx, err := e.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT docket.set_context($1, $2)`, string(ops), e.Clock.Now())
	require.NoError(t, err)
	if _, err := tx.Exec(ctx, q, args...); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// ownerRefused runs q as ownerExec does and requires it refused with
// SQLSTATE code (and, when not empty, naming constraint), table as it was.
func ownerRefused(t testing.TB, e env, table, code, constraint, q string, args ...any) {
	t.Helper()
	before := testkit.Snapshot(t, e.Pool, table)
	err := ownerExec(t, e, q, args...)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%s: %v", q, err)
	require.Equal(t, code, pgErr.Code, "%s: %s", q, pgErr.Message)
	if constraint != "" {
		require.Equal(t, constraint, pgErr.ConstraintName, "%s: %s", q, pgErr.Message)
	}
	require.Equal(t, before, testkit.Snapshot(t, e.Pool, table), "%s changed %s", q, table)
}
