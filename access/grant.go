package access

import (
	"context"
	"time"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/dbsqlc"
)

var queries = dbsqlc.New()

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

// Allow grants g on behalf of by at now and reports whether the grant is new;
// allowing what is already allowed changes nothing and returns false. Run on
// the caller's transaction, the grant commits or rolls back with it.
//
// It refuses, writing nothing: a malformed principal, project name, actor or
// capability, or a capability not in docket.capabilities, with
// [db.ErrInvalidArgument]; a project that does not exist with [db.ErrNotFound].
func Allow(ctx context.Context, q db.DBTX, g Grant, by Actor, now time.Time) (bool, error) {
	added, err := queries.GrantAdd(ctx, q, dbsqlc.GrantAddParams{
		Principal:  string(g.Principal),
		Project:    g.Project,
		Capability: string(g.Capability),
		Actor:      string(by),
		Now:        now,
	})
	if err != nil {
		return false, db.Translate(err, "grant.allow", "principal", g.Principal, "project", g.Project, "capability", g.Capability)
	}
	return added, nil
}

// Revoke removes grant g on behalf of by at now and reports whether there was
// one to remove. It refuses what [Allow] refuses, writing nothing.
func Revoke(ctx context.Context, q db.DBTX, g Grant, by Actor, now time.Time) (bool, error) {
	removed, err := queries.GrantRevoke(ctx, q, dbsqlc.GrantRevokeParams{
		Principal:  string(g.Principal),
		Project:    g.Project,
		Capability: string(g.Capability),
		Actor:      string(by),
		Now:        now,
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
func Allowed(ctx context.Context, q db.DBTX, g Grant) (bool, error) {
	held, err := queries.GrantCheck(ctx, q, string(g.Principal), g.Project, string(g.Capability))
	if err != nil {
		return false, db.Translate(err, "grant.check", "principal", g.Principal, "project", g.Project, "capability", g.Capability)
	}
	return held, nil
}

// List returns the grants on project, ordered by principal then capability.
// An unknown project has none.
func List(ctx context.Context, q db.DBTX, project string) ([]Record, error) {
	rows, err := queries.GrantList(ctx, q, project)
	if err != nil {
		return nil, db.Translate(err, "grant.list", "project", project)
	}
	out := make([]Record, len(rows))
	for i, r := range rows {
		out[i] = Record{
			Grant:     Grant{Principal: Actor(r.Principal), Project: r.Project, Capability: Capability(r.Capability)},
			GrantedBy: Actor(r.GrantedBy),
			GrantedAt: r.GrantedAt.UTC(),
		}
	}
	return out, nil
}

// Capabilities lists the capabilities a grant may name, with what each allows.
func Capabilities(ctx context.Context, q db.DBTX) (map[Capability]string, error) {
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
