package access

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/access"
	"github.com/docket-dev/docket/internal/paging"
)

// A Binding lets a database login role act as a principal: docket refuses
// ([db.ErrNotPermitted]) every call whose actor the session's login role is
// not bound to, so an actor is never taken on the caller's word. Principal
// "kind:*" binds every principal of that kind (worker:*, say, for workers
// that name themselves by host and process). The schema owner needs no
// binding.
type Binding struct {
	Role      string // the login role, as session_user names it
	Principal Actor  // a principal, or kind:*
	BoundBy   Actor
	BoundAt   time.Time
}

// Bind lets login role act as principal (or, for "kind:*", every principal
// of that kind), as the client's actor at the clock's now, and reports
// whether the binding is new. Only the owner and members of docket_operator
// bind.
//
// It refuses, writing nothing: a session that is not an operator's
// ([db.ErrNotPermitted]); an unknown role or a malformed principal
// ([db.ErrInvalidArgument]).
func (c *Client) Bind(ctx context.Context, role string, principal Actor) (bool, error) {
	return c.bind(ctx, c.pool, role, principal)
}

// BindTx is [Client.Bind] in tx: the binding holds once tx commits, and a
// rollback leaves it unmade.
func (c *Client) BindTx(ctx context.Context, tx pgx.Tx, role string, principal Actor) (bool, error) {
	return c.bind(ctx, tx, role, principal)
}

func (c *Client) bind(ctx context.Context, q db.DBTX, role string, principal Actor) (bool, error) {
	bound, err := queries.ActorBind(ctx, q, role, string(principal), string(c.actor), c.clock.Now())
	if err != nil {
		return false, db.Translate(err, "actor.bind", "role", role, "principal", principal)
	}
	return bound, nil
}

// Unbind removes the binding of login role to principal and reports whether
// there was one. It refuses what [Client.Bind] refuses, writing nothing.
func (c *Client) Unbind(ctx context.Context, role string, principal Actor) (bool, error) {
	return c.unbind(ctx, c.pool, role, principal)
}

// UnbindTx is [Client.Unbind] in tx: the binding is gone once tx commits, and
// a rollback keeps it.
func (c *Client) UnbindTx(ctx context.Context, tx pgx.Tx, role string, principal Actor) (bool, error) {
	return c.unbind(ctx, tx, role, principal)
}

func (c *Client) unbind(ctx context.Context, q db.DBTX, role string, principal Actor) (bool, error) {
	unbound, err := queries.ActorUnbind(ctx, q, role, string(principal), string(c.actor), c.clock.Now())
	if err != nil {
		return false, db.Translate(err, "actor.unbind", "role", role, "principal", principal)
	}
	return unbound, nil
}

// Bindings returns the bindings of login role, or every binding when role
// is empty, by role then principal.
func (c *Client) Bindings(ctx context.Context, role string) ([]Binding, error) {
	return c.bindings(ctx, c.pool, role)
}

// BindingsTx is [Client.Bindings] read in tx: it sees bindings tx made or
// removed and has not committed, and writes nothing, so commit and rollback
// change nothing of it.
func (c *Client) BindingsTx(ctx context.Context, tx pgx.Tx, role string) ([]Binding, error) {
	return c.bindings(ctx, tx, role)
}

func (c *Client) bindings(ctx context.Context, q db.DBTX, role string) ([]Binding, error) {
	rows, err := queries.ActorBindingList(ctx, q, role)
	return paging.Collect(rows, err, fromBindingRow, "actor.bindings", "role", role)
}

func fromBindingRow(r *dbsqlc.DocketActorBinding) Binding {
	return Binding{Role: r.Role, Principal: Actor(r.Principal), BoundBy: Actor(r.BoundBy), BoundAt: r.BoundAt.UTC()}
}
