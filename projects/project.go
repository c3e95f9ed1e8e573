package projects

import (
	"context"
	"fmt"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/dbsqlc"
)

var queries = dbsqlc.New()

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

// Create creates the active project name on behalf of by at now. Run on the
// caller's transaction, it commits or rolls back with it.
//
// It refuses, writing nothing: a malformed name (1-63 characters of
// [a-z0-9._-], starting with a letter or digit), actor or instant with
// [db.ErrInvalidArgument]; a name already taken with [db.ErrAlreadyExists].
func Create(ctx context.Context, q db.DBTX, name string, by access.Actor, now time.Time) (Project, error) {
	row, err := queries.ProjectCreate(ctx, q, name, string(by), now)
	if err != nil {
		return Project{}, db.Translate(err, "project.create", "project", name)
	}
	return fromRow(row), nil
}

// SetStatus moves project name to status on behalf of by at now. Setting the
// status it already has changes nothing.
//
// It refuses, writing nothing: an unknown status or malformed actor with
// [db.ErrInvalidArgument]; an unknown project with [db.ErrNotFound]; a move
// not in docket.project_transitions, or any move out of [Retired], with
// [db.ErrIllegalTransition].
func SetStatus(ctx context.Context, q db.DBTX, name string, status Status, by access.Actor, now time.Time) (Project, error) {
	row, err := queries.ProjectSetStatus(ctx, q, name, string(status), string(by), now)
	if err != nil {
		return Project{}, db.Translate(err, "project.set_status", "project", name, "status", status)
	}
	return fromRow(row), nil
}

// Get returns project name, or [db.ErrNotFound].
func Get(ctx context.Context, q db.DBTX, name string) (Project, error) {
	row, err := queries.ProjectGet(ctx, q, name)
	if err != nil {
		return Project{}, db.Translate(err, "project.get", "project", name)
	}
	return fromRow(row), nil
}

// MaxPage bounds the page size of [List].
const MaxPage = 1000

// List returns up to limit projects whose names sort after after, in name
// order; pass the last name of one page as after to get the next. It refuses
// a limit outside 1..[MaxPage] with [db.ErrInvalidArgument].
func List(ctx context.Context, q db.DBTX, after string, limit int) ([]Project, error) {
	if limit < 1 || limit > MaxPage {
		return nil, db.Refuse(db.ErrInvalidArgument, "project.list",
			fmt.Sprintf("limit %d is outside 1..%d", limit, MaxPage))
	}
	rows, err := queries.ProjectList(ctx, q, after, int32(limit))
	if err != nil {
		return nil, db.Translate(err, "project.list")
	}
	out := make([]Project, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// History returns the recorded creation and status moves of project name,
// oldest first. An unknown project has none.
func History(ctx context.Context, q db.DBTX, name string) ([]Event, error) {
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
