package batches_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/batches"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const project = testkit.Acme
const ops, app, sam = testkit.Ops, testkit.App, testkit.Sam

type env struct {
	testkit.Env
	app *batches.Client
}

func setup(t testing.TB) env {
	t.Helper()
	e := env{Env: testkit.Setup(t, ops, []string{project},
		testkit.Grants(app, project, access.BatchRun, access.PlanRun, access.JobCreate, access.JobClaim)...)}
	var err error
	e.app, err = batches.NewClient(e.API, batches.Config{Actor: app, Clock: e.Clock})
	require.NoError(t, err)
	return e
}

// twoSteps is the plan every item runs: read its input, then settle it.
var twoSteps = plans.Plan{Steps: []plans.Step{
	{ID: "read", Kind: "b.read", Args: []plans.Arg{{Name: "n", Source: plans.Input("n")}}},
	{ID: "settle", Kind: "b.settle", After: []string{"read"}, Terminal: true, Args: []plans.Arg{{Name: "n", Source: plans.StepResult("read")}}},
}}

type Args map[string]json.RawMessage

// key is item n's key: zero-padded, so byte order is numeric order.
func key(n int) string { return fmt.Sprintf("k%06d", n) }

// numbers is a source of items 1..n.
type numbers struct{ n int }

func (s numbers) Page(_ context.Context, after string, limit int) ([]batches.Item, bool, error) {
	from := 1
	if after != "" {
		_, err := fmt.Sscanf(after, "k%06d", &from)
		if err != nil {
			return nil, false, err
		}
		from++
	}
	var out []batches.Item
	for i := from; i <= s.n && len(out) < limit; i++ {
		out = append(out, batches.Item{Key: key(i), Input: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)), Trusted: true})
	}
	return out, from+len(out) > s.n, nil
}

// runStep is a step handler: what the step of an item does.
type runStep func(ctx context.Context, n int) (any, error)

// startWorker runs the plan's two kinds as app, reading failures into the
// events channel.
func startWorker(t testing.TB, e env, read, settle runStep) chan worker.Event {
	t.Helper()
	events := make(chan worker.Event, 1<<20)
	reg := worker.NewRegistry()
	for kind, h := range map[string]runStep{"b.read": read, "b.settle": settle} {
		require.NoError(t, worker.HandleResult(reg, jobs.MustKind[Args](kind, 1), func(ctx context.Context, j *jobs.Typed[Args]) (worker.Result, error) {
			var n int
			_ = json.Unmarshal(j.Args["n"], &n)
			v, err := h(ctx, n)
			if err != nil {
				return worker.Result{}, err
			}
			b, _ := json.Marshal(v)
			return worker.Result{Value: b}, nil
		}))
	}
	w, err := worker.NewClient(e.API, worker.Config{Actor: app, Registry: reg, Clock: e.Clock, Deployment: "test", Logger: testkit.Logger,
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond, SweepEvery: time.Hour,
		OnEvent: func(ev worker.Event) {
			select {
			case events <- ev:
			default:
			}
		}})
	require.NoError(t, err)
	testkit.Start(t, w)
	return events
}

// waitFor re-reads batch id after every worker event until done says so.
func waitFor(t testing.TB, e env, id int64, events chan worker.Event, done func(batches.Report) bool) batches.Report {
	t.Helper()
	deadline := time.After(120 * time.Second)
	for {
		r, err := e.app.Get(context.Background(), id)
		require.NoError(t, err)
		if done(r) {
			return r
		}
		select {
		case <-events:
		case <-deadline:
			t.Fatalf("batch %d: still %+v", id, r)
		}
	}
}

var _ sync.Mutex
