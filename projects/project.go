package projects

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/projects"
	"github.com/docket-dev/docket/internal/newclient"
	"github.com/docket-dev/docket/internal/paging"
)

var queries = dbsqlc.New()

// Config configures a [Client].
type Config struct {
	// Actor is who the client acts as: projects it creates and moves are
	// recorded as its doing. Required.
	Actor access.Actor
	// Clock gives the instants the client passes to the database. Defaults
	// to [db.SystemClock].
	Clock db.Clock
}

// Client creates, moves and reads projects as one actor. It is safe for
// concurrent use.
//
// Each operation comes in two forms: one that runs on the client's pool, and
// one ending in Tx that runs in the caller's transaction, so a project
// commits or rolls back with the caller's own writes.
type Client struct {
	pool  db.Pool
	actor access.Actor
	clock db.Clock
}

// NewClient returns a client on pool, typically a *pgxpool.Pool. It refuses,
// with [db.ErrInvalidArgument], a nil pool or a malformed actor.
func NewClient(pool db.Pool, cfg Config) (*Client, error) {
	clock, err := newclient.Check("projects.new_client", pool, cfg.Actor.Validate, cfg.Clock)
	if err != nil {
		return nil, err
	}
	return &Client{pool: pool, actor: cfg.Actor, clock: clock}, nil
}

// Actor returns who the client acts as.
func (c *Client) Actor() access.Actor { return c.actor }

// Status is where a project stands in its lifecycle.
type Status string

// The project statuses.
const (
	Active   Status = "active"   // accepts work
	Archived Status = "archived" // set aside; may be reactivated or retired
	Retired  Status = "retired"  // terminal
)

// Project is a project as stored.
type Project struct {
	ID        int64
	Name      string
	Status    Status
	CreatedBy access.Actor
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Event is one recorded creation (From is empty) or status move.
type Event struct {
	ID    int64
	From  Status
	To    Status
	Actor access.Actor
	At    time.Time
}

func fromRow(r *dbsqlc.DocketProject) Project {
	return Project{
		ID:        r.ID,
		Name:      r.Name,
		Status:    Status(r.Status),
		CreatedBy: access.Actor(r.CreatedBy),
		CreatedAt: r.CreatedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// Create creates the active project name, as the client's actor at the
// clock's now.
//
// It refuses, writing nothing: a malformed name (1-63 characters of
// [a-z0-9._-], starting with a letter or digit) with
// [db.ErrInvalidArgument]; a name already taken with [db.ErrAlreadyExists].
func (c *Client) Create(ctx context.Context, name string) (Project, error) {
	return c.create(ctx, c.pool, name)
}

// CreateTx is [Client.Create] in tx: the project exists once tx commits, and
// a rollback leaves the name free.
func (c *Client) CreateTx(ctx context.Context, tx pgx.Tx, name string) (Project, error) {
	return c.create(ctx, tx, name)
}

func (c *Client) create(ctx context.Context, q db.DBTX, name string) (Project, error) {
	row, err := queries.ProjectCreate(ctx, q, name, string(c.actor), c.clock.Now())
	if err != nil {
		return Project{}, db.Translate(err, "project.create", "project", name)
	}
	return fromRow(row), nil
}

// SetStatus moves project name to status, as the client's actor at the
// clock's now. Setting the status it already has changes nothing.
//
// It refuses, writing nothing: an unknown status with
// [db.ErrInvalidArgument]; an unknown project with [db.ErrNotFound]; a move
// not in docket.project_transitions, or any move out of [Retired], with
// [db.ErrIllegalTransition].
func (c *Client) SetStatus(ctx context.Context, name string, status Status) (Project, error) {
	return c.setStatus(ctx, c.pool, name, status)
}

// SetStatusTx is [Client.SetStatus] in tx: the move commits with tx, and a
// rollback leaves the project as it was.
func (c *Client) SetStatusTx(ctx context.Context, tx pgx.Tx, name string, status Status) (Project, error) {
	return c.setStatus(ctx, tx, name, status)
}

func (c *Client) setStatus(ctx context.Context, q db.DBTX, name string, status Status) (Project, error) {
	row, err := queries.ProjectSetStatus(ctx, q, name, string(status), string(c.actor), c.clock.Now())
	if err != nil {
		return Project{}, db.Translate(err, "project.set_status", "project", name, "status", status)
	}
	return fromRow(row), nil
}

// Get returns project name, or [db.ErrNotFound].
func (c *Client) Get(ctx context.Context, name string) (Project, error) {
	return c.get(ctx, c.pool, name)
}

// GetTx is [Client.Get] read in tx: it sees what tx has written and not yet
// committed, and writes nothing.
func (c *Client) GetTx(ctx context.Context, tx pgx.Tx, name string) (Project, error) {
	return c.get(ctx, tx, name)
}

func (c *Client) get(ctx context.Context, q db.DBTX, name string) (Project, error) {
	row, err := queries.ProjectGet(ctx, q, name)
	if err != nil {
		return Project{}, db.Translate(err, "project.get", "project", name)
	}
	return fromRow(row), nil
}

// Filter selects projects for [Client.List].
type Filter struct {
	// After continues a listing: only projects whose name sorts after it.
	// Pass the last name of one page to get the next.
	After string
	// Limit is the page size, 1..[db.MaxPage]. Defaults to [db.DefaultPage].
	Limit int
}

// List returns a page of projects whose names sort after f.After, in name
// order. It refuses a limit outside 1..[db.MaxPage] with
// [db.ErrInvalidArgument].
func (c *Client) List(ctx context.Context, f Filter) ([]Project, error) {
	return c.list(ctx, c.pool, f)
}

// ListTx is [Client.List] read in tx.
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) ListTx(ctx context.Context, tx pgx.Tx, f Filter) ([]Project, error) {
	return c.list(ctx, tx, f)
}

func (c *Client) list(ctx context.Context, q db.DBTX, f Filter) ([]Project, error) {
	limit, err := paging.For("project.list").Limit(f.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := queries.ProjectList(ctx, q, f.After, limit)
	return paging.Collect(rows, err, fromRow, "project.list")
}

// History returns the recorded creation and status moves of project name,
// oldest first. An unknown project has none.
func (c *Client) History(ctx context.Context, name string) ([]Event, error) {
	return c.history(ctx, c.pool, name)
}

// HistoryTx is [Client.History] read in tx.
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) HistoryTx(ctx context.Context, tx pgx.Tx, name string) ([]Event, error) {
	return c.history(ctx, tx, name)
}

func (c *Client) history(ctx context.Context, q db.DBTX, name string) ([]Event, error) {
	rows, err := queries.ProjectEvents(ctx, q, name)
	if err != nil {
		return nil, db.Translate(err, "project.history", "project", name)
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		e := Event{ID: r.ID, To: Status(r.ToState), Actor: access.Actor(r.Actor), At: r.At.UTC()}
		if r.FromState != nil {
			e.From = Status(*r.FromState)
		}
		out[i] = e
	}
	return out, nil
}
