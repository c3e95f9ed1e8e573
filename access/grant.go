package access

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/access"
	"github.com/docket-dev/docket/internal/newclient"
	"github.com/docket-dev/docket/internal/paging"
)

var queries = dbsqlc.New()

// Config configures a [Client].
type Config struct {
	// Actor is who the client acts as: grants it gives or revokes are
	// recorded as given or revoked by it. Required.
	Actor Actor
	// Clock gives the instants the client passes to the database. Defaults
	// to [db.SystemClock].
	Clock db.Clock
}

// Client gives, revokes and reads grants as one actor. It is safe for
// concurrent use.
//
// Each operation comes in two forms: one that runs on the client's pool, and
// one ending in Tx that runs in the caller's transaction, so a grant commits
// or rolls back with the caller's own writes.
type Client struct {
	pool  db.Pool
	actor Actor
	clock db.Clock
}

// NewClient returns a client on pool, typically a *pgxpool.Pool. It refuses,
// with [db.ErrInvalidArgument], a nil pool or a malformed actor.
func NewClient(pool db.Pool, cfg Config) (*Client, error) {
	clock, err := newclient.Check("access.new_client", pool, cfg.Actor.Validate, cfg.Clock)
	if err != nil {
		return nil, err
	}
	return &Client{pool: pool, actor: cfg.Actor, clock: clock}, nil
}

// Actor returns who the client acts as.
func (c *Client) Actor() Actor { return c.actor }

// Grant is one explicit permission: Principal may exercise Capability in
// Project.
type Grant struct {
	Principal  Actor
	Project    string
	Capability Capability
}

// Record is a [Grant] as stored, with who gave it and when.
type Record struct {
	Grant
	GrantedBy Actor
	GrantedAt time.Time
}

// Allow grants g, given by the client's actor at the clock's now, and reports
// whether the grant is new; allowing what is already allowed changes nothing
// and returns false.
//
// It refuses, writing nothing: a malformed principal, project name or
// capability, or a capability not in docket.capabilities, with
// [db.ErrInvalidArgument]; a project that does not exist with [db.ErrNotFound].
func (c *Client) Allow(ctx context.Context, g Grant) (bool, error) {
	return c.allow(ctx, c.pool, g)
}

// AllowTx is [Client.Allow] in tx: the grant commits with tx, and a rollback
// leaves it ungiven.
func (c *Client) AllowTx(ctx context.Context, tx pgx.Tx, g Grant) (bool, error) {
	return c.allow(ctx, tx, g)
}

func (c *Client) allow(ctx context.Context, q db.DBTX, g Grant) (bool, error) {
	added, err := queries.GrantAdd(ctx, q, dbsqlc.GrantAddParams{
		Principal:  string(g.Principal),
		Project:    g.Project,
		Capability: string(g.Capability),
		Actor:      string(c.actor),
		Now:        c.clock.Now(),
	})
	if err != nil {
		return false, db.Translate(err, "grant.allow", "principal", g.Principal, "project", g.Project, "capability", g.Capability)
	}
	return added, nil
}

// Revoke removes grant g, as the client's actor at the clock's now, and
// reports whether there was one to remove. It refuses what [Client.Allow]
// refuses, writing nothing.
func (c *Client) Revoke(ctx context.Context, g Grant) (bool, error) {
	return c.revoke(ctx, c.pool, g)
}

// RevokeTx is [Client.Revoke] in tx: the grant is gone once tx commits, and
// a rollback keeps it.
func (c *Client) RevokeTx(ctx context.Context, tx pgx.Tx, g Grant) (bool, error) {
	return c.revoke(ctx, tx, g)
}

func (c *Client) revoke(ctx context.Context, q db.DBTX, g Grant) (bool, error) {
	removed, err := queries.GrantRevoke(ctx, q, dbsqlc.GrantRevokeParams{
		Principal:  string(g.Principal),
		Project:    g.Project,
		Capability: string(g.Capability),
		Actor:      string(c.actor),
		Now:        c.clock.Now(),
	})
	if err != nil {
		return false, db.Translate(err, "grant.revoke", "principal", g.Principal, "project", g.Project, "capability", g.Capability)
	}
	return removed, nil
}

// Allowed reports whether g is held by an explicit grant. Malformed or unknown
// names are simply not allowed: the answer is false, not an error, so a caller
// learns nothing more from a bad name than from a missing grant. The only
// errors are the database's own (a lost connection).
func (c *Client) Allowed(ctx context.Context, g Grant) (bool, error) {
	return c.allowed(ctx, c.pool, g)
}

// AllowedTx is [Client.Allowed] read in tx: it sees grants tx gave or
// revoked and has not committed, and writes nothing.
func (c *Client) AllowedTx(ctx context.Context, tx pgx.Tx, g Grant) (bool, error) {
	return c.allowed(ctx, tx, g)
}

func (c *Client) allowed(ctx context.Context, q db.DBTX, g Grant) (bool, error) {
	held, err := queries.GrantCheck(ctx, q, string(g.Principal), g.Project, string(g.Capability))
	if err != nil {
		return false, db.Translate(err, "grant.check", "principal", g.Principal, "project", g.Project, "capability", g.Capability)
	}
	return held, nil
}

// Held returns the capabilities principal holds by explicit grant on each
// of projects (on every project when none is named), sorted, in one read:
// what [Client.Allowed] would answer true for, project by project. A
// project where it holds none is absent. Malformed names hold nothing, as
// for Allowed.
func (c *Client) Held(ctx context.Context, principal Actor, projects ...string) (map[string][]Capability, error) {
	return c.held(ctx, c.pool, principal, projects)
}

// HeldTx is [Client.Held] read in tx: it sees grants tx gave or revoked and
// has not committed, and writes nothing.
func (c *Client) HeldTx(ctx context.Context, tx pgx.Tx, principal Actor, projects ...string) (map[string][]Capability, error) {
	return c.held(ctx, tx, principal, projects)
}

func (c *Client) held(ctx context.Context, q db.DBTX, principal Actor, projects []string) (map[string][]Capability, error) {
	if projects == nil {
		projects = []string{}
	}
	rows, err := queries.GrantHeld(ctx, q, string(principal), projects)
	if err != nil {
		return nil, db.Translate(err, "grant.held", "principal", principal)
	}
	out := map[string][]Capability{}
	for _, r := range rows {
		out[r.Project] = append(out[r.Project], Capability(r.Capability))
	}
	return out, nil
}

// List returns the grants on project, ordered by principal then capability.
// An unknown project has none.
func (c *Client) List(ctx context.Context, project string) ([]Record, error) {
	return c.list(ctx, c.pool, project)
}

// ListTx is [Client.List] read in tx: it sees grants tx gave or revoked and
// has not committed, and writes nothing.
func (c *Client) ListTx(ctx context.Context, tx pgx.Tx, project string) ([]Record, error) {
	return c.list(ctx, tx, project)
}

func (c *Client) list(ctx context.Context, q db.DBTX, project string) ([]Record, error) {
	rows, err := queries.GrantList(ctx, q, project)
	return paging.Collect(rows, err, fromGrantRow, "grant.list", "project", project)
}

func fromGrantRow(r *dbsqlc.DocketGrant) Record {
	return Record{
		Grant:     Grant{Principal: Actor(r.Principal), Project: r.Project, Capability: Capability(r.Capability)},
		GrantedBy: Actor(r.GrantedBy),
		GrantedAt: r.GrantedAt.UTC(),
	}
}

// Capabilities lists the capabilities a grant may name, with what each allows.
func (c *Client) Capabilities(ctx context.Context) (map[Capability]string, error) {
	return c.capabilities(ctx, c.pool)
}

// CapabilitiesTx is [Client.Capabilities] read in tx.
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) CapabilitiesTx(ctx context.Context, tx pgx.Tx) (map[Capability]string, error) {
	return c.capabilities(ctx, tx)
}

func (c *Client) capabilities(ctx context.Context, q db.DBTX) (map[Capability]string, error) {
	rows, err := queries.CapabilityList(ctx, q)
	if err != nil {
		return nil, db.Translate(err, "capability.list")
	}
	out := make(map[Capability]string, len(rows))
	for _, r := range rows {
		out[Capability(r.Name)] = r.Description
	}
	return out, nil
}
