package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cells"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// consoleCells is two cells, each a database of its own on the test
// server: cell a with acme, cell b with globex and initech. vic may see
// acme's and globex's jobs and cancel globex's; initech is app's alone.
type consoleCells struct {
	a, b testkit.Env
	// bPool is cell b's own pool in the map, which a test may close to
	// take the cell away.
	bPool *pgxpool.Pool
	m     *cells.Map
}

func setupCells(t *testing.T) consoleCells {
	t.Helper()
	work := []access.Capability{access.JobCreate, access.JobView}
	c := consoleCells{
		a: testkit.Setup(t, ana, []string{"acme"}, testkit.Join(testkit.Grants(app, "acme", work...),
			testkit.Grants(vic, "acme", access.JobView))...),
		b: testkit.Setup(t, ana, []string{"globex", "initech"}, testkit.Join(testkit.Grants(app, "globex", work...),
			testkit.Grants(app, "initech", work...), testkit.Grants(vic, "globex", access.JobView, access.JobCancel))...),
	}
	var err error
	c.bPool, err = pgxpool.NewWithConfig(t.Context(), c.b.API.Config())
	require.NoError(t, err)
	t.Cleanup(c.bPool.Close)
	c.m, err = cells.New(t.Context(), cells.Config{
		Cells:    map[string]cells.Cell{"a": {Pool: c.a.API}, "b": {Pool: c.bPool}},
		Projects: map[string]string{"acme": "a", "globex": "b", "initech": "b"},
	})
	require.NoError(t, err)
	return c
}

// enqueue makes a job of kind in project of env, as app.
func enqueueIn(t *testing.T, env testkit.Env, project, kind string) jobs.Job {
	t.Helper()
	jc, err := jobs.NewClient(env.API, jobs.Config{Project: project, Actor: app, Clock: env.Clock})
	require.NoError(t, err)
	e, err := jc.Enqueue(t.Context(), jobs.Spec{Kind: kind, Payload: json.RawMessage(`{}`)})
	require.NoError(t, err)
	return e.Job
}

func (c consoleCells) serve(t *testing.T, cfg Config) site {
	t.Helper()
	cfg.AuthenticateFunc, cfg.Clock, cfg.Prefix = proxyUser, c.a.Clock, "/ops"
	h, err := NewCells(c.m, cfg)
	require.NoError(t, err)
	return site{url: serveHandler(t, h)}
}

// The page of every cell lists each cell's projects the visitor may see,
// their censuses and newest jobs, each row naming its cell: job 1 of cell a
// and job 1 of cell b are two jobs, each linking to its own cell's console,
// where an action writes to that cell alone.
func TestCellsConsoleNamesEachRowsCell(t *testing.T) {
	t.Parallel()
	c := setupCells(t)
	inA := enqueueIn(t, c.a, "acme", "billing.invoice")
	inB := enqueueIn(t, c.b, "globex", "mail.send")
	enqueueIn(t, c.b, "initech", "secret.work")
	require.Equal(t, inA.ID, inB.ID, "each cell numbers its own jobs")
	s := c.serve(t, Config{})
	vicAt := s.as(t, "vic")

	status, body := vicAt.get("/ops/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<tr id="cell-a" data-cell="a">`)
	require.Contains(t, body, `<a href="/ops/cells/a/console/acme/jobs">acme</a>`)
	require.Contains(t, body, `<a href="/ops/cells/b/console/globex/jobs">globex</a>`)
	require.NotContains(t, body, "initech", "vic holds nothing there")
	require.NotContains(t, body, "secret.work")
	require.Contains(t, body, `<tr id="census-acme" data-cell="a">`)
	require.Contains(t, body, `<tr id="census-globex" data-cell="b">`)
	require.Contains(t, body, `<tr id="job-a-1" data-cell="a" data-state="queued">`)
	require.Contains(t, body, `<tr id="job-b-1" data-cell="b" data-state="queued">`)
	require.Contains(t, body, `href="/ops/cells/a/console/acme/jobs/1"`)
	require.Contains(t, body, `href="/ops/cells/b/console/globex/jobs/1"`)
	require.Contains(t, body, "primary", "each cell says where it was read")
	require.NotContains(t, body, `id="cells-missing"`)

	// Each cell's console serves its own projects, saying which cell it is.
	status, body = vicAt.get("/ops/cells/b/console/globex/jobs/1")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "mail.send")
	require.Contains(t, body, `<strong id="cell">b</strong>`)
	require.Contains(t, body, `<a id="nav-cells" href="/ops/">`)
	status, _ = vicAt.get("/ops/cells/a/console/globex/jobs/1")
	require.Equal(t, http.StatusNotFound, status, "globex is not cell a's")
	status, _ = vicAt.get("/ops/cells/c/console/")
	require.Equal(t, http.StatusNotFound, status, "no cell c")

	// A cancel in cell b's console cancels cell b's job 1 and leaves cell
	// a's job 1 as it was.
	beforeA := testkit.Snapshot(t, c.a.Pool, "docket.jobs(id, state)", "docket.job_events")
	resp, body := vicAt.do(http.MethodPost, "/ops/cells/b/console/globex/jobs/1/cancel",
		strings.NewReader(url.Values{"csrf": {vicAt.token}, "reason": {"not wanted"}}.Encode()), nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/ops/cells/b/console/globex/jobs/1", resp.Header.Get("Location"))
	jb, err := jobs.NewClient(c.b.API, jobs.Config{Project: "globex", Actor: app, Clock: c.b.Clock})
	require.NoError(t, err)
	got, err := jb.Get(t.Context(), 1)
	require.NoError(t, err)
	require.Equal(t, jobs.Cancelled, got.State)
	require.Equal(t, beforeA, testkit.Snapshot(t, c.a.Pool, "docket.jobs(id, state)", "docket.job_events"))

	// Somebody holding nothing sees the cells and no project.
	status, body = s.as(t, "sam").get("/ops/")
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, "acme")
	require.NotContains(t, body, "globex")
	status, _ = s.as(t, "").get("/ops/")
	require.Equal(t, http.StatusUnauthorized, status)
	status, _ = vicAt.get("/ops/?state=nonsense")
	require.Equal(t, http.StatusBadRequest, status)
}

// A cell that does not answer holds up its own rows only: the page shows
// the other cell's and names the one missing.
func TestCellsConsoleShowsTheCellsThatAnswer(t *testing.T) {
	t.Parallel()
	c := setupCells(t)
	enqueueIn(t, c.a, "acme", "billing.invoice")
	enqueueIn(t, c.b, "globex", "mail.send")
	s := c.serve(t, Config{})
	c.bPool.Close()

	status, body := s.as(t, "vic").get("/ops/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<tr id="job-a-1" data-cell="a" data-state="queued">`)
	require.NotContains(t, body, `id="job-b-1"`)
	require.Contains(t, body, `id="failed-b"`)
	require.NotContains(t, body, `id="failed-a"`)
	require.Contains(t, body, `id="cells-missing"`)
}

// NewCells refuses a nil map and a Replica of its own, as each cell's is
// the map's; Projects narrows the cells' projects.
func TestNewCellsRefusesWhatItCannotServe(t *testing.T) {
	t.Parallel()
	c := setupCells(t)
	_, err := NewCells(nil, Config{AuthenticateFunc: proxyUser})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = NewCells(c.m, Config{AuthenticateFunc: proxyUser, Replica: c.a.API})
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	_, err = NewCells(c.m, Config{})
	require.ErrorIs(t, err, db.ErrInvalidArgument, "no AuthenticateFunc")

	enqueueIn(t, c.a, "acme", "billing.invoice")
	s := c.serve(t, Config{Projects: []string{"acme"}})
	status, body := s.as(t, "vic").get("/ops/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `id="job-a-1"`)
	require.NotContains(t, body, "globex")
	require.NotContains(t, body, `id="cell-b"`, "no project of the console's in cell b")
	status, _ = s.as(t, "vic").get("/ops/cells/b/console/")
	require.Equal(t, http.StatusNotFound, status)
}
