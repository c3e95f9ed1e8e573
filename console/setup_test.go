package console

import (
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/tasks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The cast of the console's tests: ana administers project acme, svc:app is
// the application working there, svc:inbox delivers its messages and
// svc:sweeper runs the sweeps; user:vic reads it. The people of the
// worklist: pat proposes, the work acts for root, rita and rob review.
// user:sam holds nothing.
const (
	project                    = testkit.Acme
	ana, app, vic              = testkit.Ana, testkit.App, testkit.Vic
	sweeper                    = testkit.Sweeper
	sam                        = testkit.Sam
	inbox         access.Actor = "svc:inbox"
	pat           access.Actor = "user:pat"
	root          access.Actor = "user:root"
	rita          access.Actor = "user:rita"
	rob           access.Actor = "user:rob"
)

// testPages are the templates as a console at the root renders them.
var testPages = func() *template.Template {
	t := template.Must(pages.Clone())
	return t.Funcs(template.FuncMap{"base": func() string { return "" }, "refresh": func() int64 { return 0 }})
}()

// harness is one test's database, with project acme and the test's grants
// given by ana.
type harness struct {
	testkit.Env
}

// setup returns a fresh migrated database with project acme, each of grants
// given by ana, and a fake clock at [testkit.T0] for the test's own clients.
func setup(t *testing.T, grants ...[]access.Grant) harness {
	t.Helper()
	return harness{testkit.Setup(t, ana, []string{project}, testkit.Join(grants...)...)}
}

// proxyUser signs a request in as user:U for the U its X-Forwarded-User
// header names, as an auth proxy in front of the console would.
func proxyUser(r *http.Request) (access.Actor, error) {
	name := strings.TrimSpace(r.Header.Get("X-Forwarded-User"))
	if name == "" {
		return "", errors.New("Sign in through the proxy: this request came without its X-Forwarded-User header.")
	}
	return access.Actor("user:" + name), nil
}

// newTestHandler is the console on pool with cfg, signing people in by
// proxyUser unless cfg says otherwise.
func newTestHandler(pool db.Pool, cfg Config) (*Handler, error) {
	if cfg.AuthenticateFunc == nil {
		cfg.AuthenticateFunc = proxyUser
	}
	return New(pool, cfg)
}

// desk is a database with the worklist tests' grants, and app's clients to
// open tasks with.
type desk struct {
	harness
	cases  *cases.Client
	opener *tasks.Client
}

// setupDesk returns a fresh desk, its clock set to about now.
func setupDesk(t *testing.T) desk {
	t.Helper()
	c := setup(t,
		testkit.Grants(app, project, access.CaseAdmit, access.JobCreate),
		testkit.Grants(pat, project, access.TaskReview),
		testkit.Grants(root, project, access.TaskReview),
		testkit.Grants(rita, project, access.TaskReview),
		testkit.Grants(rob, project, access.TaskReview),
		testkit.Grants(vic, project, access.CaseView))
	c.Clock.Set(time.Now().UTC().Truncate(time.Second))
	d := desk{harness: c}
	var err error
	d.cases, err = cases.NewClient(c.API, cases.Config{Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	d.opener = d.tasksAs(t, app)
	return d
}

// tasksAs is a tasks client acting as actor on the desk's clock.
func (d desk) tasksAs(t *testing.T, actor access.Actor) *tasks.Client {
	t.Helper()
	cl, err := tasks.NewClient(d.API, tasks.Config{Actor: actor, Clock: d.Clock})
	require.NoError(t, err)
	return cl
}

// open admits a case under key and opens on it a four-eyes approval of a
// payment, proposed by pat for root, due a day from now, escalating to
// user:boss; edit, when given, changes the spec first.
func (d desk) open(t *testing.T, key string, edit func(*tasks.Spec)) tasks.Task {
	t.Helper()
	ctx := t.Context()
	a, err := d.cases.Admit(ctx, cases.Admission{Project: project, Kind: "payment.release",
		Keys: []cases.Key{{Namespace: "payment", Value: key}}})
	require.NoError(t, err)
	s := tasks.Spec{
		Key: key, Title: "Release payment " + key,
		Summary:   "A supplier asks for 4,200 EUR.\nThe invoice matches the purchase order.",
		Proposal:  json.RawMessage(`{"amount_minor": 420000, "currency": "EUR", "supplier": "Müller & Söhne <GmbH>"}`),
		Evidence:  json.RawMessage(`{"invoice": "INV-1", "remark": "<script>alert(1)</script>"}`),
		Decisions: []string{"approve", "reject"}, AudienceCapabilities: []access.Capability{access.TaskReview},
		Proposer: pat, ActingFor: []access.Actor{root}, Deadline: d.Clock.Now().Add(24 * time.Hour),
		Expiry:       tasks.Escalate([]access.Actor{"user:boss"}, nil, 48*time.Hour),
		Continuation: cases.Continuation{Kind: "payment.decided"},
	}
	if edit != nil {
		edit(&s)
	}
	o, err := d.opener.Open(ctx, a.Case.ID, s)
	require.NoError(t, err)
	return o.Task
}

// snapshot renders every table a task call writes.
func (d desk) snapshot(t *testing.T) string {
	t.Helper()
	return testkit.Snapshot(t, d.Pool, "docket.tasks", "docket.task_events", "docket.waits(id, status)",
		"docket.messages(id, status)", "docket.jobs(id, state)")
}

// serveHandler serves h until the test ends, and returns its URL.
func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// indexOf is where sub first is in s; the test fails when it is not.
func indexOf(t *testing.T, s, sub string) int {
	t.Helper()
	i := strings.Index(s, sub)
	require.GreaterOrEqual(t, i, 0, "no %q", sub)
	return i
}
