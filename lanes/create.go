package lanes

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/lanes"
)

// Bounds of what a lane carries, as the database enforces them.
const (
	MaxNameLen      = 63   // quorum and lane names
	MaxBranchLen    = 255  // a lane's branch
	MaxTaskLen      = 500  // a lane's task reference
	MaxNoteLen      = 1000 // the note given with a move or a verdict
	MaxDependencies = 64   // lanes one lane may depend on
)

// QuorumSpec describes a quorum to create.
type QuorumSpec struct {
	// Project is the project the quorum and its lanes belong to.
	Project string
	// Name is unique in the project: 1-63 characters of [a-z0-9._-],
	// starting with a letter or digit.
	Name string
	// Conductor creates the quorum's lanes, moves them, gives the review
	// verdicts and records merges.
	Conductor access.Actor
}

// CreateQuorum creates the quorum spec describes, in its own transaction.
// See [Client.CreateQuorumTx].
func (c *Client) CreateQuorum(ctx context.Context, spec QuorumSpec) (Quorum, error) {
	return c.createQuorum(ctx, c.pool, spec)
}

// CreateQuorumTx creates the quorum spec describes in tx, typically the
// caller's transaction: the quorum commits with the caller's writes or not at
// all. The actor needs an explicit quorum.create grant on the project
// ([access.QuorumCreate]); it may name any conductor, itself included.
//
// It refuses, writing nothing: a malformed project, name or conductor with
// [db.ErrInvalidArgument]; an actor without the grant, or an unknown project,
// with [db.ErrNotPermitted]; a name taken in the project with
// [db.ErrAlreadyExists].
func (c *Client) CreateQuorumTx(ctx context.Context, tx pgx.Tx, spec QuorumSpec) (Quorum, error) {
	return c.createQuorum(ctx, tx, spec)
}

// createQuorum is [Client.CreateQuorumTx] on q: the client's pool or the caller's transaction.
func (c *Client) createQuorum(ctx context.Context, q db.DBTX, spec QuorumSpec) (Quorum, error) {
	row, err := queries.QuorumCreate(ctx, q, dbsqlc.QuorumCreateParams{
		Project: spec.Project, Name: spec.Name, Conductor: string(spec.Conductor),
		Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Quorum{}, db.Translate(err, "quorum.create", "project", spec.Project, "quorum", spec.Name)
	}
	return fromQuorumRow(row), nil
}

// Spec describes a lane to create.
type Spec struct {
	// Quorum is the id of the quorum the lane belongs to; the lane takes its
	// project from it, for good.
	Quorum int64
	// Name is unique in the quorum: 1-63 characters of [a-z0-9._-], starting
	// with a letter or digit.
	Name string
	// Branch is the git branch the lane's work lives on: 1-255 characters of
	// [A-Za-z0-9._/-], a name git accepts for a branch.
	Branch string
	// Assignee does the lane's work and may submit it for review.
	Assignee access.Actor
	// Task refers to the task thread the lane follows, e.g. PROJ-123 or a
	// URL: 1-500 characters, no control characters, no leading or trailing
	// space. docket never follows it.
	Task string
	// DependsOn names up to [MaxDependencies] lanes of the same quorum this
	// one depends on. docket records them; it gates nothing on them.
	DependsOn []int64
}

// Create creates the lane spec describes, in its own transaction. See
// [Client.CreateTx].
func (c *Client) Create(ctx context.Context, spec Spec) (Lane, error) {
	return c.create(ctx, c.pool, spec)
}

// CreateTx creates the lane spec describes in tx, typically the caller's
// transaction, and returns it open, with review none. Only the conductor of
// the quorum creates its lanes. Everything is validated now: the lane, its
// dependencies and its creation event commit together or not at all.
//
// It refuses, writing nothing: a malformed name, branch, assignee or task, or
// more than [MaxDependencies] dependencies, with [db.ErrInvalidArgument] (the
// message names the field); an actor that is not the quorum's conductor, or
// an unknown quorum, with [db.ErrNotPermitted]; a dependency named twice,
// unknown or of another quorum with [db.ErrInvalidDependency] (the message
// names it); a name taken in the quorum with [db.ErrAlreadyExists].
func (c *Client) CreateTx(ctx context.Context, tx pgx.Tx, spec Spec) (Lane, error) {
	return c.create(ctx, tx, spec)
}

// create is [Client.CreateTx] on q: the client's pool or the caller's transaction.
func (c *Client) create(ctx context.Context, q db.DBTX, spec Spec) (Lane, error) {
	// A nil DependsOn travels as NULL, which lane_create reads as none.
	row, err := queries.LaneCreate(ctx, q, dbsqlc.LaneCreateParams{
		QuorumID: spec.Quorum, Name: spec.Name, Branch: spec.Branch, Assignee: string(spec.Assignee),
		TaskRef: spec.Task, DependsOn: spec.DependsOn, Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Lane{}, db.Translate(err, "lane.create", "quorum", spec.Quorum, "lane", spec.Name)
	}
	return fromRow(row), nil
}
